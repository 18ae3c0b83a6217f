/* series.h -- editable kernel interface of the series-c workload. */
#ifndef SERIES_H
#define SERIES_H

/* The number of terms of the truncated log(1 + v) series: sum over k < SERIES_TERMS of
 * (-1)^k v^(k+1) / (k+1). */
#define SERIES_TERMS 16

/* out[i] = the mean over s = 1..steps of the series at v = x[i] * s / steps: a quadrature of the
 * integral of log(1 + x[i] t) over t in [0, 1], for each of the n values. */
void series_integrate(int n, int steps, const double *x, double *out);

#endif
