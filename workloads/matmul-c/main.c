/* main.c -- harness of the matmul-c workload (NOT editable by candidates).
 *
 * usage: ./matmul N SEED
 * Fills A and B from SEED, computes C = A*B, prints checksums of C.
 * Output is deterministic; no timing is printed (metric is wall time).
 */
#include <stdio.h>
#include <stdlib.h>
#include "matmul.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s N SEED\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    unsigned seed = (unsigned)strtoul(argv[2], NULL, 10);
    if (n < 8) {
        fprintf(stderr, "N must be >= 8\n");
        return 2;
    }
    size_t count = (size_t)n * (size_t)n;
    double *A = malloc(count * sizeof *A);
    double *B = malloc(count * sizeof *B);
    double *C = malloc(count * sizeof *C);
    if (!A || !B || !C) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    fill_matrix(A, n, seed, 0);
    fill_matrix(B, n, seed, 1);
    matmul(n, A, B, C);

    double sum = 0.0, wsum = 0.0;
    for (size_t idx = 0; idx < count; idx++) {
        sum += C[idx];
        wsum += (double)(idx % 7 + 1) * C[idx];
    }
    printf("n %d\n", n);
    printf("seed %u\n", seed);
    printf("sum %.12e\n", sum);
    printf("wsum %.12e\n", wsum);
    printf("c[0][0] %.12e\n", C[0]);
    printf("c[%d][%d] %.12e\n", n / 3, n / 2, C[(size_t)(n / 3) * n + n / 2]);
    printf("c[%d][%d] %.12e\n", n / 2, 7, C[(size_t)(n / 2) * n + 7]);
    printf("c[%d][%d] %.12e\n", n - 1, n - 1, C[count - 1]);

    free(A);
    free(B);
    free(C);
    return 0;
}
