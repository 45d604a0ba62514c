/* Write-then-fdatasync cost by how the file's space was prepared, the measurement behind the
 * journal's zero-ahead (Sources/ShareStore/Journal.swift):
 *   mode 0: plain append (the file grows)
 *   mode 1: fallocate(KEEP_SIZE) ahead, append into the unwritten extents (the old journal)
 *   mode 2: fallocate() ahead with the size set
 *   mode 3: the space written with zeros and synced once, then overwritten (the journal now)
 * usage: gcc -O2 bench/zeroed_fdatasync.c -o /tmp/zf && (cd /some/dir && /tmp/zf MODE COUNT RECORD_BYTES)
 * It writes f.dat (64 MiB) in the current directory. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
#include <linux/falloc.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  int mode=atoi(argv[1]); int n=atoi(argv[2]); int rec=atoi(argv[3]);
  unlink("f.dat"); int fd=open("f.dat",O_RDWR|O_CREAT,0600);
  size_t cap=64<<20;
  if(mode==1) fallocate(fd,FALLOC_FL_KEEP_SIZE,0,cap);
  if(mode==2) fallocate(fd,0,0,cap);
  if(mode==3){ char*z=calloc(1,1<<20); for(int i=0;i<64;i++) write(fd,z,1<<20); fsync(fd);}
  fsync(fd);
  char buf[8192]; memset(buf,'x',sizeof buf);
  double *l=malloc(n*sizeof(double)); off_t off=0;
  double t0=now();
  for(int i=0;i<n;i++){ double a=now(); pwrite(fd,buf,rec,off); off+=rec; fdatasync(fd); l[i]=now()-a; }
  double tot=now()-t0;
  qsort(l,n,sizeof(double),cmp);
  printf("mode %d rec %d: %.0f syncs/s p50 %.0f p99 %.0f us\n",mode,rec,n/(tot/1e6),l[n/2],l[n*99/100]);
}
