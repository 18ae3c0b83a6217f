/* matmul.c -- editable kernels of the matmul-c workload.
 *
 * Two planted bottlenecks (see README.md):
 *   fill_matrix: the per-row key is loop-invariant in j but is re-derived
 *                (ROW_KEY_ROUNDS rounds of mixing) for every element.
 *   matmul:      naive i-j-k order; the inner k loop walks B down a column,
 *                a stride of n doubles per step.
 */
#include <stdint.h>
#include "matmul.h"

#define ROW_KEY_ROUNDS 20

void matmul(int n, const double *A, const double *B, double *C)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            double sum = 0.0;
            for (int k = 0; k < n; k++)
                sum += A[(long)i * n + k] * B[(long)k * n + j];
            C[(long)i * n + j] = sum;
        }
    }
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Key of row i of matrix `which`: depends only on (seed, which, i). */
static uint64_t row_key(unsigned seed, int which, int i)
{
    uint64_t k = ((uint64_t)seed << 32) ^ ((uint64_t)which << 24) ^ (uint64_t)i;
    for (int r = 0; r < ROW_KEY_ROUNDS; r++)
        k = mix64(k + (uint64_t)r);
    return k;
}

void fill_matrix(double *M, int n, unsigned seed, int which)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            uint64_t key = row_key(seed, which, i);   /* invariant in j */
            uint64_t h = mix64(key ^ (uint64_t)j);
            /* 53 random bits -> [0, 1) -> [-1, 1) */
            M[(long)i * n + j] = (double)(h >> 11) * 0x1.0p-52 - 1.0;
        }
    }
}
