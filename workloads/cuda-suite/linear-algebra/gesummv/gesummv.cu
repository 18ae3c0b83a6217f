/* gesummv: y = alpha * A * x + beta * B * x, on the GPU and on the CPU, compared. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "gesummv.cuh"
#include "polybenchUtilFuncts.h"

#define ALPHA 43532.0f
#define BETA 12313.0f

void gesummv(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *x, DATA_TYPE *y, DATA_TYPE *tmp) {
  for (int i = 0; i < N; i++) {
    tmp[i] = 0;
    y[i] = 0;
    for (int j = 0; j < N; j++) {
      tmp[i] = A[i * N + j] * x[j] + tmp[i];
      y[i] = B[i * N + j] * x[j] + y[i];
    }
    y[i] = ALPHA * tmp[i] + BETA * y[i];
  }
}

void init(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *x) {
  for (int i = 0; i < N; i++) {
    x[i] = ((DATA_TYPE)i) / N;
    for (int j = 0; j < N; j++) {
      A[i * N + j] = ((DATA_TYPE)(i * j % N)) / N;
      B[i * N + j] = ((DATA_TYPE)((i + 3) * j % N)) / N;
    }
  }
}

void compareResults(DATA_TYPE *y, DATA_TYPE *y_outputFromGpu) {
  int fail = 0;
  for (int i = 0; i < N; i++)
    if (percentDiff(y[i], y_outputFromGpu[i]) > PERCENT_DIFF_ERROR_THRESHOLD) fail++;
  print_mismatches(fail, PERCENT_DIFF_ERROR_THRESHOLD);
}

__global__ void gesummv_kernel(DATA_TYPE *a, DATA_TYPE *b, DATA_TYPE *x, DATA_TYPE *y, DATA_TYPE *tmp) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;

  if (i < N) {
    for (int j = 0; j < N; j++) {
      tmp[i] += a[i * N + j] * x[j];
      y[i] += b[i * N + j] * x[j];
    }
    y[i] = ALPHA * tmp[i] + BETA * y[i];
  }
}

void gesummvCuda(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *x, DATA_TYPE *y_outputFromGpu) {
  DATA_TYPE *A_gpu, *B_gpu, *x_gpu, *y_gpu, *tmp_gpu;
  CUDA_CHECK(cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * N * N));
  CUDA_CHECK(cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * N * N));
  CUDA_CHECK(cudaMalloc((void **)&x_gpu, sizeof(DATA_TYPE) * N));
  CUDA_CHECK(cudaMalloc((void **)&y_gpu, sizeof(DATA_TYPE) * N));
  CUDA_CHECK(cudaMalloc((void **)&tmp_gpu, sizeof(DATA_TYPE) * N));
  CUDA_CHECK(cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * N * N, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(B_gpu, B, sizeof(DATA_TYPE) * N * N, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(x_gpu, x, sizeof(DATA_TYPE) * N, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(y_gpu, 0, sizeof(DATA_TYPE) * N));
  CUDA_CHECK(cudaMemset(tmp_gpu, 0, sizeof(DATA_TYPE) * N));

  dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
  dim3 grid((unsigned int)ceil(((float)N) / ((float)block.x)), 1);

  double t_start = rtclock();
  gesummv_kernel<<<grid, block>>>(A_gpu, B_gpu, x_gpu, y_gpu, tmp_gpu);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  double t_end = rtclock();
  print_runtime("GPU", t_end - t_start);

  CUDA_CHECK(cudaMemcpy(y_outputFromGpu, y_gpu, sizeof(DATA_TYPE) * N, cudaMemcpyDeviceToHost));
  cudaFree(A_gpu);
  cudaFree(B_gpu);
  cudaFree(x_gpu);
  cudaFree(y_gpu);
  cudaFree(tmp_gpu);
}

int main(int argc, char *argv[]) {
  DATA_TYPE *A = (DATA_TYPE *)malloc(N * N * sizeof(DATA_TYPE));
  DATA_TYPE *B = (DATA_TYPE *)malloc(N * N * sizeof(DATA_TYPE));
  DATA_TYPE *x = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));
  DATA_TYPE *y = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));
  DATA_TYPE *y_outputFromGpu = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));
  DATA_TYPE *tmp = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));

  init(A, B, x);
  GPU_argv_init();
  gesummvCuda(A, B, x, y_outputFromGpu);

  double t_start = rtclock();
  gesummv(A, B, x, y, tmp);
  double t_end = rtclock();
  print_runtime("CPU", t_end - t_start);

  compareResults(y, y_outputFromGpu);

  free(A);
  free(B);
  free(x);
  free(y);
  free(y_outputFromGpu);
  free(tmp);
  return 0;
}
