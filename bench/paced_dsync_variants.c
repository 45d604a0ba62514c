// Paced (500/s) durable appends of 300 B into a pre-zeroed 16 MiB file, four ways (bench/RESULTS.md,
// fifth session): 0 buffered pwrite + fdatasync (what the journal does), 1 O_DIRECT pwrite of the
// 4 KiB block + fdatasync, 2 O_DIRECT|O_DSYNC pwrite (no separate sync call), 3 buffered pwritev2
// with RWF_DSYNC. Prints p50/p90/p99/max of each append.
// gcc -O2 -o /tmp/pdv bench/paced_dsync_variants.c && for m in 0 1 2 3; do /tmp/pdv $m 2000; done
// (writes ./pd.dat in the current directory: run it on the disk under test)
#define _GNU_SOURCE
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int c,char**v){int mode=atoi(v[1]);int n=c>2?atoi(v[2]):3000;
 const char*p="pd.dat";
 int fd=open(p,O_CREAT|O_RDWR|O_TRUNC,0600);
 char*z=aligned_alloc(4096,1<<20);memset(z,0,1<<20);for(int i=0;i<16;i++)pwrite(fd,z,1<<20,(off_t)i<<20);fsync(fd);close(fd);
 int fl=O_RDWR;if(mode==1)fl|=O_DIRECT;if(mode==2)fl|=O_DIRECT|O_DSYNC;
 fd=open(p,fl);
 char*buf=aligned_alloc(4096,4096);memset(buf,'x',4096);
 double*l=malloc(n*sizeof(double));off_t off=0;
 for(int i=0;i<n;i++){double t0=now();
   if(mode==0){pwrite(fd,buf,300,off);fdatasync(fd);off+=300;}
   else if(mode==1){pwrite(fd,buf,4096,off&~4095);fdatasync(fd);off+=300;}
   else if(mode==2){pwrite(fd,buf,4096,off&~4095);off+=300;}
   else {struct iovec io={buf,300};pwritev2(fd,&io,1,off,RWF_DSYNC);off+=300;}
   l[i]=(now()-t0)*1e6;usleep(2000);}
 qsort(l,n,sizeof(double),cmp);printf("mode %d: p50 %.0f p90 %.0f p99 %.0f max %.0f us\n",mode,l[n/2],l[n*9/10],l[n*99/100],l[n-1]);unlink(p);}
