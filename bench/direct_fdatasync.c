/* Small commits into pre-zeroed space: buffered pwrite + fdatasync (what the journal does) against
 * the O_DSYNC and O_DIRECT alternatives. Backs the "O_DIRECT, tried and dropped" entry of
 * bench/RESULTS.md (faster here alone, no faster inside the broker).
 *   mode 0: buffered pwrite, then fdatasync (the journal)
 *   mode 1: O_DSYNC buffered pwrite (one call)
 *   mode 2: O_DIRECT | O_DSYNC, whole 4 KiB blocks (the partial last block written again)
 *   mode 3: O_DIRECT, whole blocks, then fdatasync
 * usage: gcc -O2 bench/direct_fdatasync.c -o /tmp/df && (cd /some/dir && /tmp/df MODE COUNT RECORD_BYTES)
 * It writes f.dat (64 MiB of zeros, synced) in the current directory. Linux only. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s MODE COUNT RECORD_BYTES\n", argv[0]); return 64; }
    int mode = atoi(argv[1]), n = atoi(argv[2]), rec = atoi(argv[3]);
    unlink("f.dat");
    int fd = open("f.dat", O_RDWR | O_CREAT, 0600);
    char *z = aligned_alloc(4096, 1 << 20);
    memset(z, 0, 1 << 20);
    for (int i = 0; i < 64; i++) write(fd, z, 1 << 20);
    fsync(fd);
    close(fd);
    int flags = O_RDWR;
    if (mode == 1) flags |= O_DSYNC;
    if (mode == 2) flags |= O_DIRECT | O_DSYNC;
    if (mode == 3) flags |= O_DIRECT;
    fd = open("f.dat", flags);
    if (fd < 0) { perror("open"); return 1; }
    char *buf = aligned_alloc(4096, 1 << 16);
    memset(buf, 'x', 1 << 16);
    double *l = malloc(n * sizeof(double));
    off_t off = 0;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        double a = now();
        if (mode == 0) { pwrite(fd, buf, rec, off); fdatasync(fd); }
        else if (mode == 1) { pwrite(fd, buf, rec, off); }
        else {
            off_t s = off & ~4095, e = (off + rec + 4095) & ~4095;
            if (pwrite(fd, buf, e - s, s) < 0) { perror("pwrite"); return 1; }
            if (mode == 3) fdatasync(fd);
        }
        off += rec;
        l[i] = now() - a;
    }
    double tot = now() - t0;
    qsort(l, n, sizeof(double), cmp);
    printf("mode %d rec %d: %.0f syncs/s p50 %.0f p99 %.0f us\n", mode, rec, n / (tot / 1e6), l[n / 2], l[n * 99 / 100]);
    return 0;
}
