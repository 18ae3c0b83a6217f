#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  double t0=now(), prev=t0, t; int gaps=0;
  while((t=now())-t0<0.012){ if(t-prev>1.5e-6) gaps++; prev=t; }
  printf("%d\n",gaps); return 0;}
