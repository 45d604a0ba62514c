// fdatasync cost by bytes per append (1.3-6 KB, back to back, pre-zeroed 64 MiB file), the measurement
// behind bench/RESULTS.md "Ninth session": the record size does not matter, the CPU the caller runs on
// does (the disk interrupt goes to one vCPU). gcc -O2 -o /tmp/asf bench/append_size_fdatasync.c &&
// for c in 0 1; do taskset -c $c /tmp/asf; done   (writes /tmp/wk/sz.dat: mkdir -p /tmp/wk first)
#define _GNU_SOURCE
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int c,char**v){int n=3000; int sizes[]={1300,2600,4300,6000};
 int fd=open("/tmp/wk/sz.dat",O_CREAT|O_RDWR|O_TRUNC,0600);
 char*z=calloc(1,1<<20);for(int i=0;i<64;i++)pwrite(fd,z,1<<20,(off_t)i<<20);fsync(fd);
 char buf[8192];memset(buf,'x',8192);double*l=malloc(n*sizeof(double));
 for(int rep=0;rep<2;rep++)for(int s=0;s<4;s++){off_t off=0;
  for(int i=0;i<n;i++){double t0=now();pwrite(fd,buf,sizes[s],off);fdatasync(fd);off+=sizes[s];l[i]=now()-t0;}
  qsort(l,n,sizeof(double),cmp);printf("%d B per sync: p50 %.0f us p90 %.0f\n",sizes[s],l[n/2],l[n*9/10]);}
}
