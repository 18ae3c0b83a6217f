/* Harness of the suite: timer and stderr array dumps (see common.h). */
#define _POSIX_C_SOURCE 200112L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

static double t_start, t_stop;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void *suite_alloc(size_t n_elems, size_t elem_size)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n_elems * elem_size) != 0 || p == NULL) {
        fprintf(stderr, "[suite] cannot allocate %zu bytes\n", n_elems * elem_size);
        exit(1);
    }
    memset(p, 0, n_elems * elem_size);
    return p;
}

void suite_timer_start(void) { t_start = now(); }

void suite_timer_stop(void) { t_stop = now(); }

void suite_timer_print(void)
{
#ifdef SUITE_TIME
    printf("%0.6f\n", t_stop - t_start);
#endif
}

void suite_dump_begin(void) { fprintf(stderr, "==BEGIN DUMP_ARRAYS==\n"); }

void suite_dump_array_begin(const char *name) { fprintf(stderr, "begin dump: %s", name); }

void suite_dump_value(DATA_TYPE v, long index)
{
    if (index % 20 == 0)
        fprintf(stderr, "\n");
    fprintf(stderr, DATA_PRINTF_MODIFIER, v);
}

void suite_dump_array_end(const char *name) { fprintf(stderr, "\nend   dump: %s\n", name); }

void suite_dump_end(void) { fprintf(stderr, "==END   DUMP_ARRAYS==\n"); }
