/* main.c -- harness of the matmul-c workload (NOT editable by candidates).
 *
 * usage: ./matmul N SEED
 * Fills A and B from SEED, computes C = A*B and prints all of C, one row per
 * line: the oracle compares every element, so no part of the product can be
 * skipped (a few checksums and sampled elements could be computed without it).
 * Elements are printed as C99 hex floats (the text of printf's %a): exact,
 * and formatted here without printf, so printing all of C costs a few ms
 * rather than a quarter of the run.
 * Output is deterministic; no timing is printed (metric is wall time).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "matmul.h"

/* Write x as a C99 hex float (e.g. -0x1.8cd255afae7e3p+13; Python's float.fromhex reads it). */
static char *put_hex(char *p, double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    unsigned e = (unsigned)(b >> 52) & 0x7ffu;
    uint64_t m = b & ((1ull << 52) - 1);
    if (e == 0x7ffu) {
        memcpy(p, m ? "nan" : ((b >> 63) ? "-inf" : "inf"), 4);
        return p + (m ? 3 : ((b >> 63) ? 4 : 3));
    }
    if (b >> 63)
        *p++ = '-';
    *p++ = '0';
    *p++ = 'x';
    *p++ = e ? '1' : '0';
    int exp = e ? (int)e - 1023 : (m ? -1022 : 0);
    *p++ = '.';
    for (int k = 12; k >= 0; k--)
        *p++ = "0123456789abcdef"[(m >> (4 * k)) & 0xf];
    *p++ = 'p';
    *p++ = exp < 0 ? '-' : '+';
    unsigned u = (unsigned)(exp < 0 ? -exp : exp);
    char digits[8];
    int t = 0;
    do {
        digits[t++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (t)
        *p++ = digits[--t];
    return p;
}

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
    char *line = malloc((size_t)n * 24 + 2);
    if (!line) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        const double *row = C + (size_t)i * (size_t)n;
        char *p = line;
        for (int j = 0; j < n; j++) {
            if (j)
                *p++ = ' ';
            p = put_hex(p, row[j]);
        }
        *p++ = '\n';
        fwrite(line, 1, (size_t)(p - line), stdout);
    }
    free(line);

    free(A);
    free(B);
    free(C);
    return 0;
}
