// Paced write + fdatasync: what one durable append costs on an idle disk (bench/RESULTS.md).
// gcc -O2 -o paced_fdatasync bench/paced_fdatasync.c && ./paced_fdatasync   (writes /tmp/fdp.dat)
#define _GNU_SOURCE
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int c,char**v){int fd=open("/tmp/fdp.dat",O_CREAT|O_WRONLY|O_TRUNC|O_APPEND,0600);
fallocate(fd,FALLOC_FL_KEEP_SIZE,0,64<<20);
char buf[400];memset(buf,'x',sizeof buf);int n=3000;double*l=malloc(n*sizeof(double));
for(int i=0;i<n;i++){double t0=now();write(fd,buf,300);fdatasync(fd);l[i]=(now()-t0)*1e6;usleep(2000);}
qsort(l,n,sizeof(double),cmp);printf("paced write+fdatasync: p50 %.0f p90 %.0f p99 %.0f max %.0f us\n",l[n/2],l[n*9/10],l[n*99/100],l[n-1]);unlink("/tmp/fdp.dat");}
