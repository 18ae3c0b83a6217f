#include <stddef.h>

#define AT(g, i, j) ((g)[(size_t)(i) * 64 + (size_t)(j)])

struct node { struct node *next; double v; };

double gather(const double *a, const int *idx, double *out, int n)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        out[i] = a[idx[i]];
        total += out[i];
    }
    return total;
}

double walk_list(struct node *head)
{
    double s = 0.0;
    for (struct node *q = head; q; q = q->next)
        s += q->v;
    return s;
}

void transpose_2d(int n, double dst[n][n], double src[n][n])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            dst[i][j] = src[j][i];
}

void row_sum(int n, double out[n], double m[n][n])
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            out[i] += m[i][j];
}

void sweep_columns(double *dst, const double *src)
{
    for (int j = 1; j < 63; j++)
        for (int i = 1; i < 63; i++)
            AT(dst, i, j) = 0.5 * (AT(src, i - 1, j) + AT(src, i + 1, j));
}

void sweep_rows(double *dst, const double *src)
{
    for (int i = 1; i < 63; i++)
        for (int j = 1; j < 63; j++)
            AT(dst, i, j) = 0.5 * (AT(src, i, j - 1) + AT(src, i, j + 1));
}
