#ifndef ATAX_H
#define ATAX_H

/* Problem size: A is M x N, x and y have N elements, tmp has M. */
#ifndef M
#  define M 4000
#endif
#ifndef N
#  define N 4096
#endif

#endif
