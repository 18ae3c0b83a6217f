/* Shared harness of the suite: a wall-clock timer, the CPU/GPU comparison and error checks.
 * Every kernel includes it; it is not part of any kernel (never edited by a rewrite). */
#ifndef POLYBENCH_UTIL_FUNCTS_H
#define POLYBENCH_UTIL_FUNCTS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#define SMALL_FLOAT_VAL 0.00000001f
#define GPU_DEVICE 0

#define CUDA_CHECK(call)                                                                     \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

static double rtclock(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return tv.tv_sec + tv.tv_usec * 1.0e-6;
}

static float absVal(float a) { return a < 0 ? -a : a; }

/* Relative difference in percent; values near zero count as equal. */
static float percentDiff(double val1, double val2) {
  if ((absVal(val1) < 0.01) && (absVal(val2) < 0.01)) return 0.0f;
  return 100.0f * (absVal(absVal(val1 - val2) / absVal(val1 + SMALL_FLOAT_VAL)));
}

static void GPU_argv_init(void) {
  cudaDeviceProp deviceProp;
  CUDA_CHECK(cudaGetDeviceProperties(&deviceProp, GPU_DEVICE));
  printf("setting device %d with name %s\n", GPU_DEVICE, deviceProp.name);
  CUDA_CHECK(cudaSetDevice(GPU_DEVICE));
}

static void print_runtime(const char *label, double seconds) { printf("%s Runtime:\n%0.6lf\n", label, seconds); }

static void print_mismatches(int fail, double threshold) {
  printf("Non-Matching CPU-GPU Outputs Beyond Error Threshold of %4.2lf Percent: %d\n", threshold, fail);
}

#endif
