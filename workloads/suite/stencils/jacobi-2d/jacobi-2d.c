/* jacobi-2d: TSTEPS pairs of 5-point Jacobi sweeps between grids A and B. */
#include <math.h>
#include <stdio.h>

#include "common.h"
#include "jacobi-2d.h"

static void init_array(int n, DATA_TYPE A[N][N], DATA_TYPE B[N][N])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            A[i][j] = ((DATA_TYPE)i * (j + 2) + 2) / n;
            B[i][j] = ((DATA_TYPE)i * (j + 3) + 3) / n;
        }
}

static void print_array(int n, DATA_TYPE A[N][N])
{
    suite_dump_begin();
    suite_dump_array_begin("A");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            suite_dump_value(A[i][j], (long)i * n + j);
    suite_dump_array_end("A");
    suite_dump_end();
}

/* The timed kernel.  Both sweeps visit the grid column by column. */
static void kernel_jacobi_2d(int tsteps, int n, DATA_TYPE A[N][N], DATA_TYPE B[N][N])
{
    for (int t = 0; t < tsteps; t++) {
        for (int j = 1; j < n - 1; j++)
            for (int i = 1; i < n - 1; i++)
                B[i][j] = SCALAR_VAL(0.2) * (A[i][j] + A[i][j - 1] + A[i][1 + j] + A[1 + i][j] + A[i - 1][j]);
        for (int j = 1; j < n - 1; j++)
            for (int i = 1; i < n - 1; i++)
                A[i][j] = SCALAR_VAL(0.2) * (B[i][j] + B[i][j - 1] + B[i][1 + j] + B[1 + i][j] + B[i - 1][j]);
    }
}

int main(void)
{
    DATA_TYPE (*A)[N] = suite_alloc((size_t)N * N, sizeof(DATA_TYPE));
    DATA_TYPE (*B)[N] = suite_alloc((size_t)N * N, sizeof(DATA_TYPE));

    init_array(N, A, B);

    suite_timer_start();
    kernel_jacobi_2d(TSTEPS, N, A, B);
    suite_timer_stop();
    suite_timer_print();

#ifdef DUMP_ARRAYS
    print_array(N, A);
#endif
    return 0;
}
