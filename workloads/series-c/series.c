/* series.c -- editable kernel of the series-c workload.
 *
 * Planted bottleneck (see README.md): the series' coefficients (-1)^k / (k+1) depend on k alone,
 * but series_integrate() divides them out again for every term of every point of every value. The
 * work is all arithmetic on a few thousand values that stay in L1, so the run's time is the core's,
 * not the memory system's.
 */
#include "series.h"

void series_integrate(int n, int steps, const double *x, double *out)
{
    for (int i = 0; i < n; i++) {
        double acc = 0.0;
        for (int s = 1; s <= steps; s++) {
            double v = x[i] * ((double)s / (double)steps);
            double p = v;      /* v^(k+1) */
            double sum = 0.0;
            for (int k = 0; k < SERIES_TERMS; k++) {
                double c = ((k & 1) ? -1.0 : 1.0) / (double)(k + 1);
                sum += c * p;
                p *= v;
            }
            acc += sum;
        }
        out[i] = acc / (double)steps;
    }
}
