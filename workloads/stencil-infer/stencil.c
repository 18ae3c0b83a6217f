/* stencil.c -- 2-D Jacobi heat-diffusion stencil (the stencil-infer workload).
 *
 * Takes no arguments.  A row-major NX x NY grid with fixed hot/cold boundary
 * rows is relaxed for ITERS Jacobi sweeps (two buffers, so the result does
 * not depend on traversal order).  Prints deterministic checksums; exits 0.
 *
 * Planted bottleneck (see README.md): sweep() walks the grid column by column
 * (j outer, i inner) although it is stored row by row, so consecutive updates
 * are NY doubles apart and each touches a different cache line.
 *
 * Build: cc -O2 -g -o stencil stencil.c
 */
#include <stdio.h>
#include <stdlib.h>

#define NX 1500
#define NY 1500
#define ITERS 14

#define AT(g, i, j) ((g)[(size_t)(i) * NY + (size_t)(j)])

static void init(double *g)
{
    for (int i = 0; i < NX; i++)
        for (int j = 0; j < NY; j++) {
            double v = 0.0;
            if (i == 0)
                v = 100.0;                         /* hot top edge */
            else if (j == 0 || j == NY - 1)
                v = 25.0 * (double)i / (double)NX; /* warm side edges */
            AT(g, i, j) = v;
        }
}

/* One Jacobi sweep: dst interior = average of src's four neighbours. */
static void sweep(double *dst, const double *src)
{
    for (int j = 1; j < NY - 1; j++)          /* column-major over a row-major grid */
        for (int i = 1; i < NX - 1; i++)
            AT(dst, i, j) = 0.25 * (AT(src, i - 1, j) + AT(src, i + 1, j) +
                                    AT(src, i, j - 1) + AT(src, i, j + 1));
}

int main(void)
{
    double *a = malloc(sizeof(double) * NX * NY);
    double *b = malloc(sizeof(double) * NX * NY);
    if (!a || !b) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    init(a);
    init(b);
    for (int it = 0; it < ITERS; it++) {
        sweep(b, a);
        double *t = a;
        a = b;
        b = t;
    }

    double sum = 0.0, wsum = 0.0;
    for (int i = 0; i < NX; i++)
        for (int j = 0; j < NY; j++) {
            sum += AT(a, i, j);
            wsum += (double)(i % 5 + j % 3 + 1) * AT(a, i, j);
        }
    printf("grid %d x %d, %d sweeps\n", NX, NY, ITERS);
    printf("sum %.12e\n", sum);
    printf("wsum %.12e\n", wsum);
    printf("u[1][%d] %.12e\n", NY / 2, AT(a, 1, NY / 2));
    printf("u[2][1] %.12e\n", AT(a, 2, 1));
    printf("u[3][%d] %.12e\n", NY / 3, AT(a, 3, NY / 3));

    free(a);
    free(b);
    return 0;
}
