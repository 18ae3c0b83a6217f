/* main.c -- harness of the series-c workload (NOT editable by candidates).
 *
 * usage: ./series N STEPS SEED
 * Draws N values in [-0.5, 0.5) from a splitmix64 hash of (SEED, index), integrates the truncated
 * log(1 + x t) series over t in [0, 1] for each with series_integrate() (STEPS quadrature points)
 * and prints every result as a C99 hex float (exact), one per line, so the oracle compares all of
 * them. No timing is printed (the metric is wall time).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "series.h"

static uint64_t splitmix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s N STEPS SEED\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    int steps = atoi(argv[2]);
    unsigned seed = (unsigned)strtoul(argv[3], NULL, 10);
    if (n < 1 || steps < 1) {
        fprintf(stderr, "N and STEPS must be >= 1\n");
        return 2;
    }
    double *x = malloc((size_t)n * sizeof *x);
    double *out = malloc((size_t)n * sizeof *out);
    if (!x || !out) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        uint64_t h = splitmix64(((uint64_t)seed << 32) ^ (uint64_t)i);
        x[i] = (double)(h >> 11) * 0x1.0p-53 - 0.5;
    }
    series_integrate(n, steps, x, out);
    printf("n %d steps %d seed %u\n", n, steps, seed);
    for (int i = 0; i < n; i++)
        printf("%a\n", out[i]);
    free(x);
    free(out);
    return 0;
}
