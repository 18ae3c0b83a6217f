/* Builds a histogram of 1,200,000 pseudo-random samples over 2,000 unequal bins and prints it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "histo.h"

#define N_SAMPLES 1200000
#define N_BINS 2000

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int main(void)
{
    double *edges = malloc((N_BINS + 1) * sizeof *edges);
    double *xs = malloc(N_SAMPLES * sizeof *xs);
    /* Quadratic edges: narrow bins near 0, wide near 1. */
    for (int b = 0; b <= N_BINS; b++)
        edges[b] = pow((double)b / N_BINS, 2.0);
    uint64_t state = 12345;
    for (int i = 0; i < N_SAMPLES; i++)
        xs[i] = (double)(splitmix64(&state) >> 11) * 0x1.0p-53;

    histo_t h;
    histo_init(&h, edges, N_BINS);
    histo_add_all(&h, xs, N_SAMPLES);

    unsigned long total = 0;
    for (int b = 0; b < N_BINS; b++) {
        total += h.counts[b];
        if (b % 50 == 0)
            printf("bin %d [%.6f, %.6f): %lu\n", b, edges[b], edges[b + 1], h.counts[b]);
    }
    printf("total %lu\n", total);
    histo_free(&h);
    free(xs);
    free(edges);
    return 0;
}
