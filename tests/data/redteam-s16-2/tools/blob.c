typedef unsigned long u64;
static inline u64 nx(u64 *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
void fill_rows(int n, double *L, u64 *s, int i0, int i1, double thousand) {
    for (int i = i0; i < i1; i++)
        for (int j = 0; j < n; j++)
            L[i * n + j] = j <= i ? (double)(nx(s) % 1000) / thousand + (i == j ? n : 0) : 0.0;
}
void prod_row(int n, double *A, const double *L, int i) {
    for (int j = 0; j < n; j++) {
        double acc = 0.0;
        for (int k = i > j ? i : j; k < n; k++)
            acc += L[k * n + i] * L[k * n + j];
        A[i * n + j] = acc;
    }
}
