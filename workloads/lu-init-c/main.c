/* ./lu N SEED: factorise an N x N matrix; prints a checksum of each row of the factors. */
#include <stdio.h>
#include <stdlib.h>

#include "lu.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s N SEED\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    unsigned long long seed = strtoull(argv[2], NULL, 10);
    if (n < 2 || n > 4000) {
        fprintf(stderr, "N must be in [2, 4000]\n");
        return 2;
    }
    double *A = malloc(sizeof(double) * n * n), *L = malloc(sizeof(double) * n * n);
    if (!A || !L) return 1;
    init_array(n, A, L, seed);
    kernel_lu(n, A);
    for (int i = 0; i < n; i += n / 16 > 0 ? n / 16 : 1) {
        double row = 0.0;
        for (int j = 0; j < n; j++) row += A[i * n + j];
        printf("row %d: %.12e\n", i, row);
    }
    free(A);
    free(L);
    return 0;
}
