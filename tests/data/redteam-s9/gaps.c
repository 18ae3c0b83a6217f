#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  double t0=now(),prev=t0,t;long gaps=0;
  while((t=now())-t0<0.02){ if(t-prev>1.5e-6) gaps++; prev=t; }
  printf("gaps/s=%.0f\n",gaps/(t-t0));
  double s=0; for(long i=0;i<300000000;i++) s+=i*1e-9; return s<0;
}
