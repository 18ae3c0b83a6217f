/* gemm: C := alpha*A*B + beta*C for dense row-major matrices. */
#include <math.h>
#include <stdio.h>

#include "common.h"
#include "gemm.h"

static void init_array(int ni, int nj, int nk, DATA_TYPE *alpha, DATA_TYPE *beta,
                       DATA_TYPE C[NI][NJ], DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ])
{
    *alpha = SCALAR_VAL(1.5);
    *beta = SCALAR_VAL(1.2);
    for (int i = 0; i < ni; i++)
        for (int j = 0; j < nj; j++)
            C[i][j] = (DATA_TYPE)((i * j + 1) % ni) / ni;
    for (int i = 0; i < ni; i++)
        for (int k = 0; k < nk; k++)
            A[i][k] = (DATA_TYPE)(i * (k + 1) % nk) / nk;
    for (int k = 0; k < nk; k++)
        for (int j = 0; j < nj; j++)
            B[k][j] = (DATA_TYPE)(k * (j + 2) % nj) / nj;
}

static void print_array(int ni, int nj, DATA_TYPE C[NI][NJ])
{
    suite_dump_begin();
    suite_dump_array_begin("C");
    for (int i = 0; i < ni; i++)
        for (int j = 0; j < nj; j++)
            suite_dump_value(C[i][j], (long)i * nj + j);
    suite_dump_array_end("C");
    suite_dump_end();
}

/* The timed kernel. */
static void kernel_gemm(int ni, int nj, int nk, DATA_TYPE alpha, DATA_TYPE beta,
                        DATA_TYPE C[NI][NJ], DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ])
{
    for (int i = 0; i < ni; i++) {
        for (int j = 0; j < nj; j++) {
            C[i][j] *= beta;
            for (int k = 0; k < nk; k++)
                C[i][j] += alpha * A[i][k] * B[k][j];
        }
    }
}

int main(void)
{
    DATA_TYPE alpha, beta;
    DATA_TYPE (*C)[NJ] = suite_alloc((size_t)NI * NJ, sizeof(DATA_TYPE));
    DATA_TYPE (*A)[NK] = suite_alloc((size_t)NI * NK, sizeof(DATA_TYPE));
    DATA_TYPE (*B)[NJ] = suite_alloc((size_t)NK * NJ, sizeof(DATA_TYPE));

    init_array(NI, NJ, NK, &alpha, &beta, C, A, B);

    suite_timer_start();
    kernel_gemm(NI, NJ, NK, alpha, beta, C, A, B);
    suite_timer_stop();
    suite_timer_print();

#ifdef DUMP_ARRAYS
    print_array(NI, NJ, C);
#endif
    return 0;
}
