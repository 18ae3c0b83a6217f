/* main.c -- harness of the matmul-c workload (NOT editable by candidates).
 *
 * usage: ./matmul N SEED
 * Fills A and B from SEED, computes C = A*B and prints all of C, one row per
 * line: the oracle compares every element, so no part of the product can be
 * skipped (a few checksums and sampled elements could be computed without it).
 * Elements are printed as C99 hex floats (%a): exact, and about four times
 * cheaper to format than %.12e, so printing all of C costs ~5% of the run.
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

    printf("n %d\n", n);
    printf("seed %u\n", seed);
    for (int i = 0; i < n; i++) {
        const double *row = C + (size_t)i * (size_t)n;
        for (int j = 0; j < n; j++)
            printf(j ? " %a" : "%a", row[j]);
        putchar('\n');
    }

    free(A);
    free(B);
    free(C);
    return 0;
}
