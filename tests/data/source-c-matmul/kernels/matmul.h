#ifndef MATMUL_H
#define MATMUL_H

#define TILE 32

void matmul(int n, const double *a, const double *b, double *c);
void matmul_blocked(int n, const double *a, const double *b, double *c);
void matmul_print(const double *c, int n);
void clear(double *p, int n);

#endif
