/* conv2d: a 3x3 convolution of an NI x NJ grid, on the GPU and on the CPU, compared. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "conv2d.cuh"
#include "polybenchUtilFuncts.h"

void conv2D(DATA_TYPE *A, DATA_TYPE *B) {
  DATA_TYPE c11 = +0.2, c21 = +0.5, c31 = -0.8;
  DATA_TYPE c12 = -0.3, c22 = +0.6, c32 = -0.9;
  DATA_TYPE c13 = +0.4, c23 = +0.7, c33 = +0.10;

  for (int i = 1; i < NI - 1; ++i) {
    for (int j = 1; j < NJ - 1; ++j) {
      B[i * NJ + j] = c11 * A[(i - 1) * NJ + (j - 1)] + c12 * A[(i + 0) * NJ + (j - 1)] +
                      c13 * A[(i + 1) * NJ + (j - 1)] + c21 * A[(i - 1) * NJ + (j + 0)] +
                      c22 * A[(i + 0) * NJ + (j + 0)] + c23 * A[(i + 1) * NJ + (j + 0)] +
                      c31 * A[(i - 1) * NJ + (j + 1)] + c32 * A[(i + 0) * NJ + (j + 1)] +
                      c33 * A[(i + 1) * NJ + (j + 1)];
    }
  }
}

void init(DATA_TYPE *A) {
  for (int i = 0; i < NI; ++i)
    for (int j = 0; j < NJ; ++j) A[i * NJ + j] = (float)((i * 7 + j * 13) % 1024) / 1024.0f;
}

void compareResults(DATA_TYPE *B, DATA_TYPE *B_outputFromGpu) {
  int fail = 0;
  for (int i = 1; i < (NI - 1); i++)
    for (int j = 1; j < (NJ - 1); j++)
      if (percentDiff(B[i * NJ + j], B_outputFromGpu[i * NJ + j]) > PERCENT_DIFF_ERROR_THRESHOLD) fail++;
  print_mismatches(fail, PERCENT_DIFF_ERROR_THRESHOLD);
}

__global__ void Convolution2D_kernel(DATA_TYPE *A, DATA_TYPE *B) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int j = blockIdx.y * blockDim.y + threadIdx.y;

  DATA_TYPE c11 = +0.2, c21 = +0.5, c31 = -0.8;
  DATA_TYPE c12 = -0.3, c22 = +0.6, c32 = -0.9;
  DATA_TYPE c13 = +0.4, c23 = +0.7, c33 = +0.10;

  if ((i < NI - 1) && (j < NJ - 1) && (i > 0) && (j > 0)) {
    B[i * NJ + j] = c11 * A[(i - 1) * NJ + (j - 1)] + c12 * A[(i + 0) * NJ + (j - 1)] +
                    c13 * A[(i + 1) * NJ + (j - 1)] + c21 * A[(i - 1) * NJ + (j + 0)] +
                    c22 * A[(i + 0) * NJ + (j + 0)] + c23 * A[(i + 1) * NJ + (j + 0)] +
                    c31 * A[(i - 1) * NJ + (j + 1)] + c32 * A[(i + 0) * NJ + (j + 1)] +
                    c33 * A[(i + 1) * NJ + (j + 1)];
  }
}

void convolution2DCuda(DATA_TYPE *A, DATA_TYPE *B_outputFromGpu) {
  DATA_TYPE *A_gpu, *B_gpu;
  CUDA_CHECK(cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * NI * NJ));
  CUDA_CHECK(cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * NI * NJ));
  CUDA_CHECK(cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyHostToDevice));

  dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
  dim3 grid((size_t)ceil(((float)NI) / ((float)block.x)), (size_t)ceil(((float)NJ) / ((float)block.y)));

  double t_start = rtclock();
  Convolution2D_kernel<<<grid, block>>>(A_gpu, B_gpu);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  double t_end = rtclock();
  print_runtime("GPU", t_end - t_start);

  CUDA_CHECK(cudaMemcpy(B_outputFromGpu, B_gpu, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyDeviceToHost));
  cudaFree(A_gpu);
  cudaFree(B_gpu);
}

int main(int argc, char *argv[]) {
  DATA_TYPE *A = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
  DATA_TYPE *B = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
  DATA_TYPE *B_outputFromGpu = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));

  init(A);
  GPU_argv_init();
  convolution2DCuda(A, B_outputFromGpu);

  double t_start = rtclock();
  conv2D(A, B);
  double t_end = rtclock();
  print_runtime("CPU", t_end - t_start);

  compareResults(B, B_outputFromGpu);

  free(A);
  free(B);
  free(B_outputFromGpu);
  return 0;
}
