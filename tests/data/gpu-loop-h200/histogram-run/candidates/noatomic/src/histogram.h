#ifndef HISTOGRAM_H
#define HISTOGRAM_H
#include <cuda_runtime.h>

/* hist[b] += number of i < n with data[i] == b, for b < bins (hist is NOT cleared here). */
void histogram(const unsigned *data, long n, unsigned *hist, int bins, cudaStream_t stream);

#endif
