#ifndef LU_H
#define LU_H
#include <stdint.h>
void init_array(int n, double *A, double *L, uint64_t seed);
void kernel_lu(int n, double *A);
#endif
