void mmrow(int n, const double *A, const double *B, double *C, int i)
{
    for (int j = 0; j < n; j++) {
        double sum = 0.0;
        for (int k = 0; k < n; k++)
            sum += A[(long)i * n + k] * B[(long)k * n + j];
        C[(long)i * n + j] = sum;
    }
}
