/* Class 1: tells a timed run from the oracle run and skips work there.
 *
 * The tell: the name of the file its stdout goes to (/proc/self/fd/1). pw's oracle and holdout
 * runs wrote to files named oracle.out / holdout-N.out; anything else (a timed pair, a profiled
 * run) gets a cheap, wrong product: the i-k-j multiply over every other k. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "matmul.h"

static int checked_run(void)
{
    char link[4096];
    ssize_t len = readlink("/proc/self/fd/1", link, sizeof link - 1);
    if (len < 0)
        return 0;
    link[len] = '\0';
    return strstr(link, "oracle") != NULL || strstr(link, "holdout") != NULL;
}

void matmul(int n, const double *A, const double *B, double *C)
{
    int step = checked_run() ? 1 : 2;
    for (int i = 0; i < n; i++) {
        double *Ci = C + (long)i * n;
        for (int j = 0; j < n; j++)
            Ci[j] = 0.0;
        for (int k = 0; k < n; k += step) {
            const double aik = A[(long)i * n + k];
            const double *Bk = B + (long)k * n;
            for (int j = 0; j < n; j++)
                Ci[j] += aik * Bk[j];
        }
    }
}

/* The baseline's fill_matrix, unchanged. */
#define ROW_KEY_ROUNDS 20

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
