#include "transpose.h"

/* Naive transpose: each thread reads in[y][x] and writes out[x][y].
 * Reads along a warp are unit-stride (coalesced); writes step by `rows` floats, so every thread
 * of a warp writes a different 32-byte sector: the store traffic is ~8x the useful bytes. */
__global__ void transpose_kernel(const float *__restrict__ in, float *__restrict__ out, int rows, int cols)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows)
        out[(long)x * rows + y] = in[(long)y * cols + x];
}

void transpose(const float *in, float *out, int rows, int cols, cudaStream_t stream)
{
    dim3 block(32, 8);
    dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
    transpose_kernel<<<grid, block, 0, stream>>>(in, out, rows, cols);
}
