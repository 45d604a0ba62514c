/* Fault-injection shim for sharebroker (LD_PRELOAD, Linux/glibc).

   Interposes the libc file calls the broker makes and, for calls on paths under the state
   directory (and descriptors opened under it), counts them and fails the N-th one. Nothing else
   is ever touched: a path outside the state directory, an untracked descriptor and any socket
   (checked with fstat before a fault) pass straight to libc.

   Environment (read once, at load):
     FI_STATE    absolute path of the state directory (required; without it the shim does nothing)
     FI_N        the call to fail, 1-based (0 or unset: never fail, only count and log)
     FI_MODE     transient (only call N fails), sticky (every counted call from N on fails),
                 torn (call N fails; when it is a write, half its bytes are written first),
                 lie (every write from call N on reports success and writes nothing: a disk that
                 loses data; only to check that the driver's checks catch it, --self-test)
     FI_ERRNO    EIO (default), ENOSPC, or a number
     FI_COUNTER  a file holding the counter (8 bytes, mmap'ed shared): the count goes on across
                 processes (the workload's restart) and the driver reads it at any moment
     FI_LOG      a file to which one line per counted call is appended:
                 "N OP PATH" (plus " FAULT errno" for the failed one, " TORN k/len" for a torn write)
     FI_KILL_AT  the shim raises SIGKILL in the broker when call M is counted, before making it (a
                 crash right after the fault: what was answered before must hold)
     FI_OPS      optional comma list of the call classes to count (default: all):
                 open,read,write,sync,truncate,alloc,rename,unlink,mkdir,rmdir

   Built by fault_injection.py with: gcc -shared -fPIC -O2 -o fault_shim.so fault_shim.c -ldl
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 65536

enum { OP_OPEN = 1, OP_READ = 2, OP_WRITE = 4, OP_SYNC = 8, OP_TRUNCATE = 16, OP_ALLOC = 32,
       OP_RENAME = 64, OP_UNLINK = 128, OP_MKDIR = 256, OP_RMDIR = 512 };

static int fi_enabled;
static char fi_state[PATH_MAX];
static size_t fi_state_len;
static char fi_state_real[PATH_MAX];
static size_t fi_state_real_len;
static long fi_n;
static long fi_kill_at;
static int fi_mode; /* 0 transient, 1 sticky, 2 torn, 3 lie */
static int fi_errno = EIO;
static unsigned fi_ops = ~0u;
static volatile uint64_t *fi_counter;
static uint64_t fi_local_counter;
static int fi_log_fd = -1;
static char *fi_fd_path[MAX_FDS];
static pthread_mutex_t fi_lock = PTHREAD_MUTEX_INITIALIZER;

/* The real functions. */
static int (*r_open)(const char *, int, ...);
static int (*r_open64)(const char *, int, ...);
static int (*r_openat)(int, const char *, int, ...);
static int (*r_openat64)(int, const char *, int, ...);
static int (*r___open_2)(const char *, int);
static int (*r___open64_2)(const char *, int);
static int (*r___openat_2)(int, const char *, int);
static int (*r___openat64_2)(int, const char *, int);
static int (*r_creat)(const char *, mode_t);
static ssize_t (*r_read)(int, void *, size_t);
static ssize_t (*r_pread)(int, void *, size_t, off_t);
static ssize_t (*r_pread64)(int, void *, size_t, off_t);
static ssize_t (*r_write)(int, const void *, size_t);
static ssize_t (*r_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*r_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*r_writev)(int, const struct iovec *, int);
static ssize_t (*r_pwritev)(int, const struct iovec *, int, off_t);
static int (*r_fsync)(int);
static int (*r_fdatasync)(int);
static int (*r_ftruncate)(int, off_t);
static int (*r_ftruncate64)(int, off_t);
static int (*r_rename)(const char *, const char *);
static int (*r_renameat)(int, const char *, int, const char *);
static int (*r_renameat2)(int, const char *, int, const char *, unsigned);
static int (*r_unlink)(const char *);
static int (*r_unlinkat)(int, const char *, int);
static int (*r_mkdir)(const char *, mode_t);
static int (*r_mkdirat)(int, const char *, mode_t);
static int (*r_rmdir)(const char *);
static int (*r_fallocate)(int, int, off_t, off_t);
static int (*r_fallocate64)(int, int, off_t, off_t);
static int (*r_posix_fallocate)(int, off_t, off_t);
static int (*r_posix_fallocate64)(int, off_t, off_t);
static int (*r_close)(int);

#define RESOLVE(name) r_##name = dlsym(RTLD_NEXT, #name)
#define READY() do { if (!r_close) fi_resolve(); } while (0)

static void fi_resolve(void) {
    RESOLVE(open); RESOLVE(open64); RESOLVE(openat); RESOLVE(openat64);
    RESOLVE(__open_2); RESOLVE(__open64_2); RESOLVE(__openat_2); RESOLVE(__openat64_2);
    RESOLVE(creat); RESOLVE(read); RESOLVE(pread); RESOLVE(pread64);
    RESOLVE(write); RESOLVE(pwrite); RESOLVE(pwrite64); RESOLVE(writev); RESOLVE(pwritev);
    RESOLVE(fsync); RESOLVE(fdatasync); RESOLVE(ftruncate); RESOLVE(ftruncate64);
    RESOLVE(rename); RESOLVE(renameat); RESOLVE(renameat2); RESOLVE(unlink); RESOLVE(unlinkat);
    RESOLVE(mkdir); RESOLVE(mkdirat); RESOLVE(rmdir); RESOLVE(fallocate); RESOLVE(fallocate64);
    RESOLVE(posix_fallocate); RESOLVE(posix_fallocate64); RESOLVE(close);
}

static unsigned fi_parse_ops(const char *s) {
    static const struct { const char *name; unsigned bit; } names[] = {
        {"open", OP_OPEN}, {"read", OP_READ}, {"write", OP_WRITE}, {"sync", OP_SYNC},
        {"truncate", OP_TRUNCATE}, {"alloc", OP_ALLOC}, {"rename", OP_RENAME},
        {"unlink", OP_UNLINK}, {"mkdir", OP_MKDIR}, {"rmdir", OP_RMDIR}};
    unsigned ops = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *p = strstr(s, names[i].name);
        if (p) ops |= names[i].bit;
    }
    return ops;
}

__attribute__((constructor)) static void fi_init(void) {
    fi_resolve();
    const char *state = getenv("FI_STATE");
    if (!state || state[0] != '/' || strlen(state) >= PATH_MAX) return;
    strcpy(fi_state, state);
    fi_state_len = strlen(fi_state);
    while (fi_state_len > 1 && fi_state[fi_state_len - 1] == '/') fi_state[--fi_state_len] = 0;
    if (realpath(fi_state, fi_state_real)) fi_state_real_len = strlen(fi_state_real);
    const char *n = getenv("FI_N");
    fi_n = n ? atol(n) : 0;
    const char *kill_at = getenv("FI_KILL_AT");
    fi_kill_at = kill_at ? atol(kill_at) : 0;
    const char *mode = getenv("FI_MODE");
    if (mode && strcmp(mode, "sticky") == 0) fi_mode = 1;
    else if (mode && strcmp(mode, "torn") == 0) fi_mode = 2;
    else if (mode && strcmp(mode, "lie") == 0) fi_mode = 3;
    const char *e = getenv("FI_ERRNO");
    if (e && strcmp(e, "ENOSPC") == 0) fi_errno = ENOSPC;
    else if (e && strcmp(e, "EIO") == 0) fi_errno = EIO;
    else if (e && atoi(e) > 0) fi_errno = atoi(e);
    const char *ops = getenv("FI_OPS");
    if (ops && *ops) fi_ops = fi_parse_ops(ops);
    const char *counter = getenv("FI_COUNTER");
    if (counter && *counter) {
        int fd = r_open(counter, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (r_ftruncate(fd, 4096) == 0) {
                void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (m != MAP_FAILED) fi_counter = (volatile uint64_t *)m;
            }
            r_close(fd);
        }
    }
    const char *log = getenv("FI_LOG");
    if (log && *log) {
        fi_log_fd = r_open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        /* Keep it out of the way of the broker's own descriptors (it closes nothing it did not
           open, but a high number is easier to tell apart in /proc/PID/fd). */
        if (fi_log_fd >= 0 && fi_log_fd < 900) {
            int hi = fcntl(fi_log_fd, F_DUPFD_CLOEXEC, 900);
            if (hi >= 0) { r_close(fi_log_fd); fi_log_fd = hi; }
        }
    }
    fi_enabled = 1;
}

/* Is this absolute or relative path (resolved against the current directory) under the state
   directory? Writes the absolute form to out. */
static int fi_under_state_abs(const char *abs) {
    if (fi_state_len && strncmp(abs, fi_state, fi_state_len) == 0 &&
        (abs[fi_state_len] == 0 || abs[fi_state_len] == '/'))
        return 1;
    if (fi_state_real_len && strncmp(abs, fi_state_real, fi_state_real_len) == 0 &&
        (abs[fi_state_real_len] == 0 || abs[fi_state_real_len] == '/'))
        return 1;
    return 0;
}

static int fi_resolve_path(int dirfd, const char *path, char *out, size_t size) {
    if (!path) return 0;
    if (path[0] == '/') {
        snprintf(out, size, "%s", path);
    } else if (dirfd == AT_FDCWD) {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) return 0;
        snprintf(out, size, "%s/%s", cwd, path);
    } else {
        if (dirfd < 0 || dirfd >= MAX_FDS) return 0;
        pthread_mutex_lock(&fi_lock);
        const char *base = fi_fd_path[dirfd];
        if (base) snprintf(out, size, "%s/%s", base, path);
        pthread_mutex_unlock(&fi_lock);
        if (!base) return 0;
    }
    return fi_under_state_abs(out);
}

static void fi_track(int fd, const char *path) {
    if (fd < 0 || fd >= MAX_FDS) return;
    char *copy = strdup(path);
    pthread_mutex_lock(&fi_lock);
    free(fi_fd_path[fd]);
    fi_fd_path[fd] = copy;
    pthread_mutex_unlock(&fi_lock);
}

static void fi_untrack(int fd) {
    if (fd < 0 || fd >= MAX_FDS) return;
    pthread_mutex_lock(&fi_lock);
    free(fi_fd_path[fd]);
    fi_fd_path[fd] = NULL;
    pthread_mutex_unlock(&fi_lock);
}

/* The path a descriptor was opened with, copied to out; 0 when it is not tracked. */
static int fi_fd_tracked(int fd, char *out, size_t size) {
    if (!fi_enabled || fd < 0 || fd >= MAX_FDS) return 0;
    if (__atomic_load_n(&fi_fd_path[fd], __ATOMIC_RELAXED) == NULL) return 0;
    int found = 0;
    pthread_mutex_lock(&fi_lock);
    if (fi_fd_path[fd]) { snprintf(out, size, "%s", fi_fd_path[fd]); found = 1; }
    pthread_mutex_unlock(&fi_lock);
    if (!found) return 0;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) return 0; /* never a socket */
    return 1;
}

static void fi_log(const char *line) {
    if (fi_log_fd >= 0) (void)!r_write(fi_log_fd, line, strlen(line));
}

/* Counts a call; returns 1 when it must fail (and logs it). `tornable` says whether the call is
   a write that torn mode may half-do; *torn is set then. */
static int fi_decide(unsigned op, const char *name, const char *path, int tornable, int *torn) {
    if (torn) *torn = 0;
    if (!(fi_ops & op)) return 0;
    uint64_t n = fi_counter ? __atomic_add_fetch(fi_counter, 1, __ATOMIC_SEQ_CST)
                            : __atomic_add_fetch(&fi_local_counter, 1, __ATOMIC_SEQ_CST);
    if (fi_kill_at > 0 && (long)n == fi_kill_at) {
        char kl[PATH_MAX + 64];
        snprintf(kl, sizeof kl, "%llu %s %s KILL pid=%d\n", (unsigned long long)n, name, path, (int)getpid());
        fi_log(kl);
        raise(SIGKILL);
    }
    int fail = fi_n > 0 && (fi_mode == 1 || fi_mode == 3 ? (long)n >= fi_n : (long)n == fi_n);
    if (fi_mode == 3 && fail && !tornable) fail = 0; /* lie: only writes, and they "succeed" */
    if (fail && fi_mode == 2 && tornable && torn) *torn = 1;
    char line[PATH_MAX + 128];
    const char *tag = !fail ? "" : fi_mode == 3 ? " LIE" : (torn && *torn) ? " FAULT-TORN" : " FAULT";
    snprintf(line, sizeof line, "%llu %s %s%s%s pid=%d\n", (unsigned long long)n, name, path, tag,
             !fail ? "" : fi_errno == ENOSPC ? " ENOSPC" : fi_errno == EIO ? " EIO" : " errno",
             (int)getpid());
    fi_log(line);
    return fail;
}

#define FAIL_WITH(ret) do { errno = fi_errno; return (ret); } while (0)

/* ---- open ---------------------------------------------------------------------------------- */

#define OPEN_BODY(DIRFD, CALL, NAME)                                                          \
    char abs[PATH_MAX];                                                                       \
    if (fi_enabled && fi_resolve_path(DIRFD, path, abs, sizeof abs)) {                        \
        if (fi_decide(OP_OPEN, NAME, abs, 0, NULL)) FAIL_WITH(-1);                            \
        int fd = CALL;                                                                        \
        if (fd >= 0) fi_track(fd, abs);                                                       \
        return fd;                                                                            \
    }                                                                                         \
    return CALL;

static mode_t fi_mode_arg(int flags, va_list ap) {
    if (flags & (O_CREAT | __O_TMPFILE)) return (mode_t)va_arg(ap, int);
    return 0;
}

int open(const char *path, int flags, ...) { READY();
    va_list ap; va_start(ap, flags); mode_t mode = fi_mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(AT_FDCWD, r_open(path, flags, mode), "open")
}
int open64(const char *path, int flags, ...) { READY();
    va_list ap; va_start(ap, flags); mode_t mode = fi_mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(AT_FDCWD, r_open64(path, flags, mode), "open")
}
int openat(int dirfd, const char *path, int flags, ...) { READY();
    va_list ap; va_start(ap, flags); mode_t mode = fi_mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(dirfd, r_openat(dirfd, path, flags, mode), "openat")
}
int openat64(int dirfd, const char *path, int flags, ...) { READY();
    va_list ap; va_start(ap, flags); mode_t mode = fi_mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(dirfd, r_openat64(dirfd, path, flags, mode), "openat")
}
int __open_2(const char *path, int flags) { READY(); OPEN_BODY(AT_FDCWD, r___open_2(path, flags), "open") }
int __open64_2(const char *path, int flags) { READY(); OPEN_BODY(AT_FDCWD, r___open64_2(path, flags), "open") }
int __openat_2(int dirfd, const char *path, int flags) { READY(); OPEN_BODY(dirfd, r___openat_2(dirfd, path, flags), "openat") }
int __openat64_2(int dirfd, const char *path, int flags) { READY(); OPEN_BODY(dirfd, r___openat64_2(dirfd, path, flags), "openat") }
int creat(const char *path, mode_t mode) { READY(); OPEN_BODY(AT_FDCWD, r_creat(path, mode), "creat") }

int close(int fd) { READY();
    if (fi_enabled) fi_untrack(fd);
    return r_close(fd);
}

/* ---- read / write -------------------------------------------------------------------------- */

ssize_t read(int fd, void *buf, size_t len) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_READ, "read", p, 0, NULL)) FAIL_WITH(-1);
    return r_read(fd, buf, len);
}
ssize_t pread(int fd, void *buf, size_t len, off_t off) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_READ, "pread", p, 0, NULL)) FAIL_WITH(-1);
    return r_pread(fd, buf, len, off);
}
ssize_t pread64(int fd, void *buf, size_t len, off_t off) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_READ, "pread", p, 0, NULL)) FAIL_WITH(-1);
    return r_pread64(fd, buf, len, off);
}

static void fi_log_torn(size_t done, size_t len) {
    char line[96];
    snprintf(line, sizeof line, "  torn: wrote %zu of %zu bytes, then failed\n", done, len);
    fi_log(line);
}

ssize_t write(int fd, const void *buf, size_t len) { READY();
    char p[PATH_MAX];
    int torn;
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_WRITE, "write", p, 1, &torn)) {
        if (fi_mode == 3) return (ssize_t)len;
        if (torn && len > 1) { ssize_t w = r_write(fd, buf, len / 2); fi_log_torn(w > 0 ? (size_t)w : 0, len); }
        FAIL_WITH(-1);
    }
    return r_write(fd, buf, len);
}
ssize_t pwrite(int fd, const void *buf, size_t len, off_t off) { READY();
    char p[PATH_MAX];
    int torn;
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_WRITE, "pwrite", p, 1, &torn)) {
        if (fi_mode == 3) return (ssize_t)len;
        if (torn && len > 1) { ssize_t w = r_pwrite(fd, buf, len / 2, off); fi_log_torn(w > 0 ? (size_t)w : 0, len); }
        FAIL_WITH(-1);
    }
    return r_pwrite(fd, buf, len, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) { READY();
    char p[PATH_MAX];
    int torn;
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_WRITE, "pwrite", p, 1, &torn)) {
        if (fi_mode == 3) return (ssize_t)len;
        if (torn && len > 1) { ssize_t w = r_pwrite64(fd, buf, len / 2, off); fi_log_torn(w > 0 ? (size_t)w : 0, len); }
        FAIL_WITH(-1);
    }
    return r_pwrite64(fd, buf, len, off);
}

/* The first `half` bytes of an iovec array, as a new array (at most 64 entries). */
static int fi_half_iov(const struct iovec *iov, int cnt, struct iovec *out, size_t *total) {
    size_t sum = 0;
    for (int i = 0; i < cnt; i++) sum += iov[i].iov_len;
    *total = sum;
    size_t left = sum / 2;
    int k = 0;
    for (int i = 0; i < cnt && left > 0 && k < 64; i++) {
        out[k] = iov[i];
        if (out[k].iov_len > left) out[k].iov_len = left;
        left -= out[k].iov_len;
        k++;
    }
    return k;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt) { READY();
    char p[PATH_MAX];
    int torn;
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_WRITE, "writev", p, 1, &torn)) {
        if (fi_mode == 3) { size_t t = 0; for (int i = 0; i < cnt; i++) t += iov[i].iov_len; return (ssize_t)t; }
        if (torn) {
            struct iovec half[64]; size_t total;
            int k = fi_half_iov(iov, cnt, half, &total);
            ssize_t w = k > 0 ? r_writev(fd, half, k) : 0;
            fi_log_torn(w > 0 ? (size_t)w : 0, total);
        }
        FAIL_WITH(-1);
    }
    return r_writev(fd, iov, cnt);
}
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) { READY();
    char p[PATH_MAX];
    int torn;
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_WRITE, "pwritev", p, 1, &torn)) {
        if (fi_mode == 3) { size_t t = 0; for (int i = 0; i < cnt; i++) t += iov[i].iov_len; return (ssize_t)t; }
        if (torn) {
            struct iovec half[64]; size_t total;
            int k = fi_half_iov(iov, cnt, half, &total);
            ssize_t w = k > 0 ? r_pwritev(fd, half, k, off) : 0;
            fi_log_torn(w > 0 ? (size_t)w : 0, total);
        }
        FAIL_WITH(-1);
    }
    return r_pwritev(fd, iov, cnt, off);
}

/* ---- sync, truncate, allocate -------------------------------------------------------------- */

int fsync(int fd) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_SYNC, "fsync", p, 0, NULL)) FAIL_WITH(-1);
    return r_fsync(fd);
}
int fdatasync(int fd) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_SYNC, "fdatasync", p, 0, NULL)) FAIL_WITH(-1);
    return r_fdatasync(fd);
}
int ftruncate(int fd, off_t len) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_TRUNCATE, "ftruncate", p, 0, NULL)) FAIL_WITH(-1);
    return r_ftruncate(fd, len);
}
int ftruncate64(int fd, off_t len) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_TRUNCATE, "ftruncate", p, 0, NULL)) FAIL_WITH(-1);
    return r_ftruncate64(fd, len);
}
int fallocate(int fd, int mode, off_t off, off_t len) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_ALLOC, "fallocate", p, 0, NULL)) FAIL_WITH(-1);
    return r_fallocate(fd, mode, off, len);
}
int fallocate64(int fd, int mode, off_t off, off_t len) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_ALLOC, "fallocate", p, 0, NULL)) FAIL_WITH(-1);
    return r_fallocate64(fd, mode, off, len);
}
int posix_fallocate(int fd, off_t off, off_t len) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_ALLOC, "posix_fallocate", p, 0, NULL)) return fi_errno;
    return r_posix_fallocate(fd, off, len);
}
int posix_fallocate64(int fd, off_t off, off_t len) { READY();
    char p[PATH_MAX];
    if (fi_fd_tracked(fd, p, sizeof p) && fi_decide(OP_ALLOC, "posix_fallocate", p, 0, NULL)) return fi_errno;
    return r_posix_fallocate64(fd, off, len);
}

/* ---- names --------------------------------------------------------------------------------- */

int rename(const char *from, const char *to) { READY();
    char a[PATH_MAX] = "", b[PATH_MAX] = "";
    if (fi_enabled && (fi_resolve_path(AT_FDCWD, from, a, sizeof a) | fi_resolve_path(AT_FDCWD, to, b, sizeof b)) &&
        fi_decide(OP_RENAME, "rename", fi_under_state_abs(a) ? a : b, 0, NULL))
        FAIL_WITH(-1);
    return r_rename(from, to);
}
int renameat(int fd1, const char *from, int fd2, const char *to) { READY();
    char a[PATH_MAX] = "", b[PATH_MAX] = "";
    if (fi_enabled && (fi_resolve_path(fd1, from, a, sizeof a) | fi_resolve_path(fd2, to, b, sizeof b)) &&
        fi_decide(OP_RENAME, "renameat", fi_under_state_abs(a) ? a : b, 0, NULL))
        FAIL_WITH(-1);
    return r_renameat(fd1, from, fd2, to);
}
int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned flags) { READY();
    char a[PATH_MAX] = "", b[PATH_MAX] = "";
    if (fi_enabled && (fi_resolve_path(fd1, from, a, sizeof a) | fi_resolve_path(fd2, to, b, sizeof b)) &&
        fi_decide(OP_RENAME, "renameat2", fi_under_state_abs(a) ? a : b, 0, NULL))
        FAIL_WITH(-1);
    return r_renameat2(fd1, from, fd2, to, flags);
}
int unlink(const char *path) { READY();
    char a[PATH_MAX];
    if (fi_enabled && fi_resolve_path(AT_FDCWD, path, a, sizeof a) && fi_decide(OP_UNLINK, "unlink", a, 0, NULL)) FAIL_WITH(-1);
    return r_unlink(path);
}
int unlinkat(int dirfd, const char *path, int flags) { READY();
    char a[PATH_MAX];
    if (fi_enabled && fi_resolve_path(dirfd, path, a, sizeof a) &&
        fi_decide((flags & AT_REMOVEDIR) ? OP_RMDIR : OP_UNLINK, "unlinkat", a, 0, NULL))
        FAIL_WITH(-1);
    return r_unlinkat(dirfd, path, flags);
}
int mkdir(const char *path, mode_t mode) { READY();
    char a[PATH_MAX];
    if (fi_enabled && fi_resolve_path(AT_FDCWD, path, a, sizeof a) && fi_decide(OP_MKDIR, "mkdir", a, 0, NULL)) FAIL_WITH(-1);
    return r_mkdir(path, mode);
}
int mkdirat(int dirfd, const char *path, mode_t mode) { READY();
    char a[PATH_MAX];
    if (fi_enabled && fi_resolve_path(dirfd, path, a, sizeof a) && fi_decide(OP_MKDIR, "mkdirat", a, 0, NULL)) FAIL_WITH(-1);
    return r_mkdirat(dirfd, path, mode);
}
int rmdir(const char *path) { READY();
    char a[PATH_MAX];
    if (fi_enabled && fi_resolve_path(AT_FDCWD, path, a, sizeof a) && fi_decide(OP_RMDIR, "rmdir", a, 0, NULL)) FAIL_WITH(-1);
    return r_rmdir(path);
}
