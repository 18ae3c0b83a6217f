#include <stdlib.h>

#include "histo.h"

void histo_init(histo_t *h, const double *edges, size_t n_bins)
{
    h->edges = edges;
    h->n_bins = n_bins;
    h->counts = calloc(n_bins, sizeof *h->counts);
}

void histo_free(histo_t *h)
{
    free(h->counts);
    h->counts = NULL;
}

long histo_find_bin(const histo_t *h, double x)
{
    /* Linear scan from the first edge, although the edges are sorted. */
    if (!(x >= h->edges[0]) || !(x < h->edges[h->n_bins]))
        return -1;
    for (size_t b = 0; b < h->n_bins; b++)
        if (x < h->edges[b + 1])
            return (long)b;
    return -1;
}

void histo_add_all(histo_t *h, const double *xs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        long b = histo_find_bin(h, xs[i]);
        if (b >= 0)
            h->counts[b]++;
    }
}
