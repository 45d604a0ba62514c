/* Two or more threads, each pwrite + fdatasync on its own stretch of one pre-zeroed file: how
 * many syncs per second the disk gives when fdatasyncs overlap (the measurement behind the
 * "two commits in flight" lever in bench/RESULTS.md). Writes p.dat in the current directory.
 * usage: gcc -O2 bench/parallel_fdatasync.c -o /tmp/pfsync -lpthread && /tmp/pfsync THREADS SYNCS_PER_THREAD RECORD_BYTES */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int fd; int n; int rec; int nth;
void* run(void*a){ long id=(long)a; char buf[4096]; memset(buf,'x',sizeof buf);
  for(int i=0;i<n;i++){ off_t off=((off_t)(i*nth+id))*rec; pwrite(fd,buf,rec,off); fdatasync(fd);} return 0;}
int main(int argc,char**argv){ nth=atoi(argv[1]); n=atoi(argv[2]); rec=atoi(argv[3]);
  unlink("p.dat"); fd=open("p.dat",O_RDWR|O_CREAT,0600);
  char*z=calloc(1,1<<20); for(int i=0;i<64;i++) write(fd,z,1<<20); fsync(fd);
  pthread_t t[16]; double t0=now();
  for(long i=0;i<nth;i++) pthread_create(&t[i],0,run,(void*)i);
  for(int i=0;i<nth;i++) pthread_join(t[i],0);
  double s=(now()-t0)/1e6; printf("%d threads: %.0f syncs/s total\n",nth,nth*n/s);}
