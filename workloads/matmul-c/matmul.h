/* matmul.h -- editable kernel interface for the matmul-c workload. */
#ifndef MATMUL_H
#define MATMUL_H

/* Fill the n x n row-major matrix M with deterministic values in [-1, 1)
 * derived from (seed, which, i, j).  `which` distinguishes A (0) from B (1). */
void fill_matrix(double *M, int n, unsigned seed, int which);

/* C = A * B for n x n row-major matrices. C is fully overwritten. */
void matmul(int n, const double *A, const double *B, double *C);

#endif
