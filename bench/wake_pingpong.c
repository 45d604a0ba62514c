// Round trip of one byte over a Unix socketpair between two processes pinned to CPUs A and B
// (blocking reads): cross-vCPU wake-ups on this VM cost tens of microseconds (bench/RESULTS.md,
// "Ninth session"). gcc -O2 -o /tmp/pp bench/wake_pingpong.c && /tmp/pp 0 1 && /tmp/pp 0 0
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>
#include <sched.h>
static long ns(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
int cmp(const void*a,const void*b){long x=*(long*)a,y=*(long*)b;return x<y?-1:x>y;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
int main(int argc,char**argv){int a=atoi(argv[1]),b=atoi(argv[2]);int n=20000;int sv[2];socketpair(AF_UNIX,SOCK_STREAM,0,sv);
 if(fork()==0){pin(b);char x[256];for(int i=0;i<n;i++){read(sv[1],x,256);write(sv[1],x,1);}_exit(0);}
 pin(a);char x[256]={0};long*d=malloc(n*sizeof(long));
 for(int i=0;i<n;i++){long t0=ns();write(sv[0],x,1);read(sv[0],x,256);d[i]=ns()-t0;}
 qsort(d,n,sizeof(long),cmp);printf("cpu%d<->cpu%d round trip p50 %ld ns p90 %ld\n",a,b,d[n/2],d[n*9/10]);}
