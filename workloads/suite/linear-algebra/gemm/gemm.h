#ifndef GEMM_H
#define GEMM_H

/* Problem size: C is NI x NJ, A is NI x NK, B is NK x NJ. */
#ifndef NI
#  define NI 700
#endif
#ifndef NJ
#  define NJ 760
#endif
#ifndef NK
#  define NK 800
#endif

#endif
