#ifndef TRANSPOSE_H
#define TRANSPOSE_H
#include <cuda_runtime.h>

/* out (cols x rows) = transpose of in (rows x cols), both row-major, on `stream`. */
void transpose(const float *in, float *out, int rows, int cols, cudaStream_t stream);

#endif
