/* LU decomposition of a symmetric positive definite matrix, after PolyBench's lu: the matrix is
 * initialised as B = L^T * L from a random lower-triangular L (an O(n^3) product that takes most of
 * the run), then kernel_lu factorises it in place (left-looking, i-j-k order: its inner loop walks a column). */
#include "lu.h"

#include <stdint.h>

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

void init_array(int n, double *A, double *L, uint64_t seed) {
    uint64_t s = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            L[i * n + j] = j <= i ? (double)(next(&s) % 1000) / 1000.0 + (i == j ? n : 0) : 0.0;
    /* A = L^T L walks L by columns: a strided O(n^3) product, most of the run. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0.0;
            for (int k = 0; k < n; k++)
                acc += L[k * n + i] * L[k * n + j];
            A[i * n + j] = acc;
        }
}

void kernel_lu(int n, double *A) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) {
            for (int k = 0; k < j; k++)
                A[i * n + j] -= A[i * n + k] * A[k * n + j];
            A[i * n + j] /= A[j * n + j];
        }
        for (int j = i; j < n; j++)
            for (int k = 0; k < i; k++)
                A[i * n + j] -= A[i * n + k] * A[k * n + j];
    }
}
