// Eleventh session: write + fdatasync of a 3,200-byte append to a pre-zeroed 64 MiB file, blocking
// (mode 0) against io_uring linked WRITE + FSYNC(DATASYNC) with 1 or 2 commits in flight on two
// files (modes 1, 2), waiting for completions through epoll on the ring. Build: cc -O2 -o u
// bench/uring_fdatasync.c; run: ./u MODE [COUNT]. Needs a kernel with io_uring enabled.
// Measures write+fdatasync: blocking vs io_uring (linked write+fsync), 1 or 2 in flight (2 files).
#define _GNU_SOURCE
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdatomic.h>
static long now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
static int ring_fd; static unsigned *sq_tail,*sq_mask,*sq_array,*cq_head,*cq_tail,*cq_mask; static struct io_uring_sqe*sqes; static struct io_uring_cqe*cqes;
static void setup(unsigned flags){struct io_uring_params p;memset(&p,0,sizeof p);p.flags=flags;ring_fd=syscall(__NR_io_uring_setup,64,&p);if(ring_fd<0){perror("setup");exit(1);}
 size_t sqsz=p.sq_off.array+p.sq_entries*4, cqsz=p.cq_off.cqes+p.cq_entries*sizeof(struct io_uring_cqe);
 char*sq=mmap(0,sqsz,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_POPULATE,ring_fd,IORING_OFF_SQ_RING);
 char*cq=mmap(0,cqsz,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_POPULATE,ring_fd,IORING_OFF_CQ_RING);
 sqes=mmap(0,p.sq_entries*sizeof(struct io_uring_sqe),PROT_READ|PROT_WRITE,MAP_SHARED|MAP_POPULATE,ring_fd,IORING_OFF_SQES);
 sq_tail=(unsigned*)(sq+p.sq_off.tail);sq_mask=(unsigned*)(sq+p.sq_off.ring_mask);sq_array=(unsigned*)(sq+p.sq_off.array);
 cq_head=(unsigned*)(cq+p.cq_off.head);cq_tail=(unsigned*)(cq+p.cq_off.tail);cq_mask=(unsigned*)(cq+p.cq_off.ring_mask);cqes=(void*)(cq+p.cq_off.cqes);}
static void push(int op,int fd,void*buf,unsigned len,long off,unsigned fl,unsigned sqefl,unsigned long ud){unsigned t=*sq_tail,i=t&*sq_mask;struct io_uring_sqe*s=&sqes[i];memset(s,0,sizeof*s);
 s->opcode=op;s->fd=fd;s->addr=(unsigned long)buf;s->len=len;s->off=off;s->fsync_flags=fl;s->flags=sqefl;s->user_data=ud;sq_array[i]=i;atomic_store_explicit((_Atomic unsigned*)sq_tail,t+1,memory_order_release);}
static int reap(unsigned long*ud){unsigned h=*cq_head;if(h==atomic_load_explicit((_Atomic unsigned*)cq_tail,memory_order_acquire))return 0;struct io_uring_cqe*c=&cqes[h&*cq_mask];*ud=c->user_data;if(c->res<0){fprintf(stderr,"cqe res %d\n",c->res);exit(1);}atomic_store_explicit((_Atomic unsigned*)cq_head,h+1,memory_order_release);return 1;}
static int cmp(const void*a,const void*b){long x=*(long*)a,y=*(long*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){int mode=atoi(argv[1]);int n=argc>2?atoi(argv[2]):5000;unsigned sz=3200;char buf[8192];memset(buf,'x',sizeof buf);
 int fds[2];for(int k=0;k<2;k++){char name[64];sprintf(name,"uring-f%d.tmp",k);unlink(name);fds[k]=open(name,O_RDWR|O_CREAT,0600);
  // pre-zero 64 MB so commits overwrite allocated blocks
  static char z[1<<20];for(int i=0;i<64;i++)if(write(fds[k],z,sizeof z)<0)exit(1);fsync(fds[k]);}
 long*lat=malloc(sizeof(long)*n);long t0=now();long off[2]={0,0};
 if(mode==0){for(int i=0;i<n;i++){long a=now();pwrite(fds[0],buf,sz,off[0]);off[0]+=sz;fdatasync(fds[0]);lat[i]=now()-a;}}
 else{setup(0);int ep=epoll_create1(0);struct epoll_event ev={.events=EPOLLIN};epoll_ctl(ep,EPOLL_CTL_ADD,ring_fd,&ev);
  int inflight=mode; long start[2]; int done=0,issued=0;
  for(int k=0;k<inflight;k++){start[k]=now();push(IORING_OP_WRITE,fds[k],buf,sz,off[k],0,IOSQE_IO_LINK,100+k);off[k]+=sz;push(IORING_OP_FSYNC,fds[k],0,0,0,IORING_FSYNC_DATASYNC,0,k);issued++;}
  syscall(__NR_io_uring_enter,ring_fd,2*inflight,0,0,0,0);
  while(done<n){struct epoll_event e;epoll_wait(ep,&e,1,-1);unsigned long ud;int sub=0;
   while(reap(&ud)){if(ud>=100)continue;int k=ud;if(done<n)lat[done++]=now()-start[k];if(issued<n){start[k]=now();push(IORING_OP_WRITE,fds[k],buf,sz,off[k],0,IOSQE_IO_LINK,100+k);off[k]+=sz;push(IORING_OP_FSYNC,fds[k],0,0,0,IORING_FSYNC_DATASYNC,0,k);issued++;sub+=2;}}
   if(sub)syscall(__NR_io_uring_enter,ring_fd,sub,0,0,0,0);}}
 long el=now()-t0;qsort(lat,n,sizeof(long),cmp);printf("mode %d: %.0f commits/s, p50 %ld us p99 %ld us\n",mode,n*1e9/el,lat[n/2]/1000,lat[n*99/100]/1000);}
