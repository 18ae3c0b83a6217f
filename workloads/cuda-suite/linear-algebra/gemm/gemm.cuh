/* gemm: C = alpha * A * B + beta * C */
#ifndef GEMM_CUH
#define GEMM_CUH

#define NI 512
#define NJ 512
#define NK 512

#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

#define PERCENT_DIFF_ERROR_THRESHOLD 0.05

typedef float DATA_TYPE;

#endif
