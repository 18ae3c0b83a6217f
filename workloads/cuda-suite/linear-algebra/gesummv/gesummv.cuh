/* gesummv: y = alpha * A * x + beta * B * x */
#ifndef GESUMMV_CUH
#define GESUMMV_CUH

#define N 2048

#define DIM_THREAD_BLOCK_X 256
#define DIM_THREAD_BLOCK_Y 1

#define PERCENT_DIFF_ERROR_THRESHOLD 0.05

typedef float DATA_TYPE;

#endif
