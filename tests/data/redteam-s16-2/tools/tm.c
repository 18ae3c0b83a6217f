#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "matmul.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){ int n=720; double bm=1e9, bf=1e9;
  double *A=malloc(8*n*n),*B=malloc(8*n*n),*C=malloc(8*n*n);
  for(int r=0;r<8;r++){ double t=now(); fill_matrix(A,n,r,0); fill_matrix(B,n,r,1); t=now()-t; if(t<bf)bf=t;
    t=now(); matmul(n,A,B,C); t=now()-t; if(t<bm)bm=t;}
  printf("fill x2 best %.4f s, matmul best %.4f s\n",bf,bm); return 0;}
