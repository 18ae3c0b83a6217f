#ifndef JACOBI_2D_H
#define JACOBI_2D_H

/* Problem size: TSTEPS double sweeps over an N x N grid. */
#ifndef TSTEPS
#  define TSTEPS 300
#endif
#ifndef N
#  define N 720
#endif

#endif
