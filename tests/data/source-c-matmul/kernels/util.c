#include "matmul.h"

static void fill_value(double *p, long count, double v)
{
    for (long i = 0; i < count; i++)
        p[i] = v;
    level_three();
}

void level_three(void)
{
}

void clear(double *p, int n)
{
    fill_value(p, (long)n * n, 0.0);
}
