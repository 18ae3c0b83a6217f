/* gemm: C = alpha * A * B + beta * C, on the GPU and on the CPU, compared. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemm.cuh"
#include "polybenchUtilFuncts.h"

#define ALPHA 32412.0f
#define BETA 2123.0f

void gemm(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C) {
  for (int i = 0; i < NI; i++) {
    for (int j = 0; j < NJ; j++) {
      C[i * NJ + j] *= BETA;
      for (int k = 0; k < NK; ++k) {
        C[i * NJ + j] += ALPHA * A[i * NK + k] * B[k * NJ + j];
      }
    }
  }
}

void init(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C) {
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NK; j++) A[i * NK + j] = ((DATA_TYPE)i * j) / NI;
  for (int i = 0; i < NK; i++)
    for (int j = 0; j < NJ; j++) B[i * NJ + j] = ((DATA_TYPE)i * j + 1) / NJ;
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++) C[i * NJ + j] = ((DATA_TYPE)i * j + 2) / NJ;
}

void compareResults(DATA_TYPE *C, DATA_TYPE *C_outputFromGpu) {
  int fail = 0;
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++)
      if (percentDiff(C[i * NJ + j], C_outputFromGpu[i * NJ + j]) > PERCENT_DIFF_ERROR_THRESHOLD) fail++;
  print_mismatches(fail, PERCENT_DIFF_ERROR_THRESHOLD);
}

__global__ void gemm_kernel(DATA_TYPE *a, DATA_TYPE *b, DATA_TYPE *c) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;

  if ((i < NI) && (j < NJ)) {
    c[i * NJ + j] *= BETA;
    for (int k = 0; k < NK; k++) {
      c[i * NJ + j] += ALPHA * a[i * NK + k] * b[k * NJ + j];
    }
  }
}

void gemmCuda(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C, DATA_TYPE *C_outputFromGpu) {
  DATA_TYPE *A_gpu, *B_gpu, *C_gpu;
  CUDA_CHECK(cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * NI * NK));
  CUDA_CHECK(cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * NK * NJ));
  CUDA_CHECK(cudaMalloc((void **)&C_gpu, sizeof(DATA_TYPE) * NI * NJ));
  CUDA_CHECK(cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * NI * NK, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(B_gpu, B, sizeof(DATA_TYPE) * NK * NJ, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(C_gpu, C, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyHostToDevice));

  dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
  dim3 grid((size_t)(ceil(((float)NI) / ((float)block.x))), (size_t)(ceil(((float)NJ) / ((float)block.y))));

  double t_start = rtclock();
  gemm_kernel<<<grid, block>>>(A_gpu, B_gpu, C_gpu);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  double t_end = rtclock();
  print_runtime("GPU", t_end - t_start);

  CUDA_CHECK(cudaMemcpy(C_outputFromGpu, C_gpu, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyDeviceToHost));
  cudaFree(A_gpu);
  cudaFree(B_gpu);
  cudaFree(C_gpu);
}

int main(int argc, char *argv[]) {
  DATA_TYPE *A = (DATA_TYPE *)malloc(NI * NK * sizeof(DATA_TYPE));
  DATA_TYPE *B = (DATA_TYPE *)malloc(NK * NJ * sizeof(DATA_TYPE));
  DATA_TYPE *C = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
  DATA_TYPE *C_outputFromGpu = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));

  init(A, B, C);
  GPU_argv_init();
  gemmCuda(A, B, C, C_outputFromGpu);

  double t_start = rtclock();
  gemm(A, B, C);
  double t_end = rtclock();
  print_runtime("CPU", t_end - t_start);

  compareResults(C, C_outputFromGpu);

  free(A);
  free(B);
  free(C);
  free(C_outputFromGpu);
  return 0;
}
