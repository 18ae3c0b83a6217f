/* atax: y := A^T (A x) for a dense row-major M x N matrix A. */
#include <math.h>
#include <stdio.h>

#include "common.h"
#include "atax.h"

static void init_array(int m, int n, DATA_TYPE A[M][N], DATA_TYPE x[N])
{
    for (int j = 0; j < n; j++)
        x[j] = SCALAR_VAL(1.0) + (DATA_TYPE)j / n;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            A[i][j] = (DATA_TYPE)((i + j) % n) / (5 * m);
}

static void print_array(int n, DATA_TYPE y[N])
{
    suite_dump_begin();
    suite_dump_array_begin("y");
    for (int j = 0; j < n; j++)
        suite_dump_value(y[j], j);
    suite_dump_array_end("y");
    suite_dump_end();
}

/* The timed kernel. */
static void kernel_atax(int m, int n, DATA_TYPE A[M][N], DATA_TYPE x[N], DATA_TYPE y[N],
                        DATA_TYPE tmp[M])
{
    for (int i = 0; i < m; i++) {
        tmp[i] = SCALAR_VAL(0.0);
        for (int j = 0; j < n; j++)
            tmp[i] = tmp[i] + A[i][j] * x[j];
    }
    /* y = A^T tmp, one output element at a time: walks A down its columns. */
    for (int j = 0; j < n; j++) {
        y[j] = SCALAR_VAL(0.0);
        for (int i = 0; i < m; i++)
            y[j] = y[j] + A[i][j] * tmp[i];
    }
}

int main(void)
{
    DATA_TYPE (*A)[N] = suite_alloc((size_t)M * N, sizeof(DATA_TYPE));
    DATA_TYPE *x = suite_alloc(N, sizeof(DATA_TYPE));
    DATA_TYPE *y = suite_alloc(N, sizeof(DATA_TYPE));
    DATA_TYPE *tmp = suite_alloc(M, sizeof(DATA_TYPE));

    init_array(M, N, A, x);

    suite_timer_start();
    kernel_atax(M, N, A, x, y, tmp);
    suite_timer_stop();
    suite_timer_print();

#ifdef DUMP_ARRAYS
    print_array(N, y);
#endif
    return 0;
}
