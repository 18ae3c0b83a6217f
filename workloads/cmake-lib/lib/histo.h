#ifndef HISTO_H
#define HISTO_H

#include <stddef.h>

/* A histogram over sorted, strictly increasing bin edges: bin b holds edges[b] <= x < edges[b+1]. */
typedef struct {
    const double *edges;
    size_t n_bins;
    unsigned long *counts;
} histo_t;

void histo_init(histo_t *h, const double *edges, size_t n_bins);
void histo_free(histo_t *h);
/* Index of the bin holding x, or -1 when x is outside [edges[0], edges[n_bins]). */
long histo_find_bin(const histo_t *h, double x);
void histo_add_all(histo_t *h, const double *xs, size_t n);

#endif
