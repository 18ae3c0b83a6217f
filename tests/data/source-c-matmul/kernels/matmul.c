#include <stdio.h>
#include "matmul.h"

/* naive i-j-k: b is walked down a column */
void matmul(int n, const double *a, const double *b, double *c)
{
    clear(c, n);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            double sum = 0.0;
            for (int k = 0; k < n; k++)
                sum += a[i * n + k] * b[k * n + j];
            c[i * n + j] = sum;
        }
    }
}

void matmul_blocked(int n, const double *a, const double *b, double *c)
{
    clear(c, n);
    for (int ii = 0; ii < n; ii += TILE)
        for (int kk = 0; kk < n; kk += TILE)
            for (int i = ii; i < ii + TILE && i < n; i++)
                for (int k = kk; k < kk + TILE && k < n; k++)
                    for (int j = 0; j < n; j++)
                        c[i * n + j] += a[i * n + k] * b[k * n + j];
}

void matmul_print(const double *c, int n)
{
    printf("%f\n", c[0] + c[n * n - 1]);
}
