/* Harness shared by every kernel of the suite: a wall-clock timer and array dumps.
 * Not part of any kernel; kernels include it and link ../../utilities/common.c. */
#ifndef SUITE_COMMON_H
#define SUITE_COMMON_H

#include <stdio.h>

/* Element type of every kernel.  -DDATA_TYPE_IS_FLOAT selects single precision. */
#ifdef DATA_TYPE_IS_FLOAT
#  define DATA_TYPE float
#  define SCALAR_VAL(x) x##f
#  define DATA_PRINTF_MODIFIER "%0.4f "
#  define SQRT_FUN(x) sqrtf(x)
#else
#  define DATA_TYPE double
#  define SCALAR_VAL(x) x
#  define DATA_PRINTF_MODIFIER "%0.6lf "
#  define SQRT_FUN(x) sqrt(x)
#endif

/* Heap arrays of fixed shape, zero-filled, aligned for vector loads. */
void *suite_alloc(size_t n_elems, size_t elem_size);

/* Wall-clock timer around the kernel.  The time is printed only with -DSUITE_TIME
 * (on stdout), so a plain build prints nothing there. */
void suite_timer_start(void);
void suite_timer_stop(void);
void suite_timer_print(void);

/* Array dumps go to stderr, one value per fprintf call, line broken every 20 values. */
void suite_dump_begin(void);
void suite_dump_array_begin(const char *name);
void suite_dump_value(DATA_TYPE v, long index);
void suite_dump_array_end(const char *name);
void suite_dump_end(void);

#endif
