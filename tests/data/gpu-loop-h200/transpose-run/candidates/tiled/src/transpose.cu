#include "transpose.h"

#define TILE 32
#define ROWS_PER_PASS 8

/* Tiled transpose: a block loads a 32x32 tile with unit-stride reads into shared memory, then
 * writes it out transposed with unit-stride writes. The +1 column pads each shared-memory row so
 * the column reads of the second phase hit 32 different banks. */
__global__ void transpose_kernel(const float *__restrict__ in, float *__restrict__ out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS_PER_PASS)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(long)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;  /* output column = input row */
    y = blockIdx.x * TILE + threadIdx.y;  /* output row = input column */
    for (int j = 0; j < TILE; j += ROWS_PER_PASS)
        if (x < rows && y + j < cols)
            out[(long)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

void transpose(const float *in, float *out, int rows, int cols, cudaStream_t stream)
{
    dim3 block(TILE, ROWS_PER_PASS);
    dim3 grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
    transpose_kernel<<<grid, block, 0, stream>>>(in, out, rows, cols);
}
