/* conv2d: a 3x3 convolution of a 2-D grid */
#ifndef CONV2D_CUH
#define CONV2D_CUH

#define NI 4096
#define NJ 4096

#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

#define PERCENT_DIFF_ERROR_THRESHOLD 0.05

typedef float DATA_TYPE;

#endif
