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
     FI_ALSO     optional comma list of more calls that fail (as transient ones), up to 8
     FI_OPS      optional comma list of the call classes to count (default: all):
                 open,read,write,sync,truncate,alloc,rename,unlink,mkdir,rmdir
     FI_POWER_CUT  a directory (absolute, on the state directory's file system, outside it):
                 power-cut tracking. The shim records there what a power loss would undo
                 (pc.log: one line per file-system change under the state directory and per
                 fsync/fdatasync; pc.undo: the bytes each write or truncation replaced; stash/:
                 hard links that keep unlinked and replaced files' inodes) and the driver, once
                 the broker is dead (FI_KILL_AT), rolls the state directory back to what was
                 durable (fault_injection.py apply_power_cut; README "Power cuts"). Counting,
                 FI_N and FI_KILL_AT work as without it.
     FI_PC_DROP_SYNCS  N: (self-test only) fsync/fdatasync of files from call N on are not
                 recorded, as if the disk ignored them: the power cut then loses what was answered

   pc.log lines (tab-separated; SEQ orders them across threads and processes: it is taken after
   the change was made, and before the sync started for S and D):
     C SEQ DIR NAME DEV INO        a regular file created (open O_CREAT of a name that did not exist)
     M SEQ DIR NAME DEV INO        a directory created
     R SEQ ODIR ONAME NDIR NNAME DEV INO STASH   a rename (STASH: a link to the replaced target, or -)
     X SEQ DIR NAME DEV INO STASH  an unlink of a regular file (STASH: a link to it)
     XD SEQ DIR NAME               a directory removed
     U SEQ DEV INO OFF LEN UOFF    bytes OFF..OFF+LEN of the file were replaced (by a write, a
                                   truncation or O_TRUNC); their old content is at UOFF in pc.undo
     S SEQ DEV INO SIZE            fsync/fdatasync of a regular file succeeded; SIZE: its size when
                                   the call began (what it made durable)
     D SEQ DIR                     fsync of a directory succeeded: the entries of DIR are durable
   DIR is canonical (realpath). At the first start (pc.log empty) every regular file already under
   the state directory gets an S line (seq 0): what is there before the broker is durable.

   Built by fault_injection.py with: gcc -shared -fPIC -O2 -o fault_shim.so fault_shim.c -ldl
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
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
static long fi_also[8];   /* FI_ALSO: more calls that fail (transient), up to 8 */
static int fi_also_count;
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
static int (*r_truncate)(const char *, off_t);
static int (*r_truncate64)(const char *, off_t);
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
    RESOLVE(fsync); RESOLVE(fdatasync); RESOLVE(ftruncate); RESOLVE(ftruncate64); RESOLVE(truncate); RESOLVE(truncate64);
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

static void pc_init(void);

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
    const char *also = getenv("FI_ALSO");
    while (also && *also && fi_also_count < 8) {
        char *end;
        long v = strtol(also, &end, 10);
        if (end == also) break;
        if (v > 0) fi_also[fi_also_count++] = v;
        also = *end == ',' ? end + 1 : end;
    }
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
    pc_init(); /* (before fi_enabled: its own calls are never counted) */
    fi_enabled = 1;
}

/* ---- power-cut tracking (FI_POWER_CUT) ------------------------------------------------------ */

static int pc_enabled;
static long pc_drop_syncs; /* FI_PC_DROP_SYNCS=N (self-test): file syncs from call N on are not recorded */
static int pc_log_fd = -1;
static int pc_undo_fd = -1;
static char pc_stash[PATH_MAX];
static volatile uint64_t *pc_seq_shared;
static uint64_t pc_seq_local;
static pthread_mutex_t pc_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t pc_next(void) {
    return pc_seq_shared ? __atomic_add_fetch(pc_seq_shared, 1, __ATOMIC_SEQ_CST)
                         : __atomic_add_fetch(&pc_seq_local, 1, __ATOMIC_SEQ_CST);
}

static void pc_logf(const char *fmt, ...) {
    char line[3 * PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    if ((size_t)n >= sizeof line) n = sizeof line - 1;
    (void)!r_write(pc_log_fd, line, (size_t)n);  /* O_APPEND: one write per line */
}

/* Splits an absolute path into its canonical directory and its last component. */
static int pc_split(const char *abs, char *dir, char *name) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", abs);
    size_t len = strlen(tmp);
    while (len > 1 && tmp[len - 1] == '/') tmp[--len] = 0;
    char *slash = strrchr(tmp, '/');
    if (!slash) return 0;
    snprintf(name, PATH_MAX, "%s", slash + 1);
    if (slash == tmp) snprintf(tmp, sizeof tmp, "/"); else *slash = 0;
    if (!realpath(tmp, dir)) snprintf(dir, PATH_MAX, "%s", tmp);
    return 1;
}

static void pc_canon(const char *path, char *out) {
    if (!realpath(path, out)) snprintf(out, PATH_MAX, "%s", path);
}

/* Copies bytes off..off+len of the file open as fd (read through /proc/self/fd: fd may be
   write-only) to pc.undo; returns their offset there (-1: nothing saved). *saved: how many. */
static long long pc_save_fd(int fd, off_t off, size_t len, size_t *saved) {
    *saved = 0;
    if (len == 0) return -1;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int rfd = r_open(proc, O_RDONLY | O_CLOEXEC);
    if (rfd < 0) return -1;
    char *buf = malloc(len);
    long long uoff = -1;
    if (buf) {
        ssize_t n = r_pread(rfd, buf, len, off);
        if (n > 0) {
            pthread_mutex_lock(&pc_lock);
            uoff = (long long)lseek(pc_undo_fd, 0, SEEK_END);
            size_t done = 0;
            while (done < (size_t)n) {
                ssize_t w = r_write(pc_undo_fd, buf + done, (size_t)n - done);
                if (w <= 0) break;
                done += (size_t)w;
            }
            pthread_mutex_unlock(&pc_lock);
            *saved = done;
        }
        free(buf);
    }
    r_close(rfd);
    return *saved ? uoff : -1;
}

/* What a write or truncation is about to replace (taken before it, logged after it). */
typedef struct { int valid; unsigned long long dev, ino; long long off, uoff; size_t len; } pc_undo_t;

/* Before a write of len bytes at off (off < 0: at the descriptor's position, or the end with
   O_APPEND): saves the bytes it overwrites inside the file's current size. */
static void pc_pre_write(int fd, off_t off, size_t len, pc_undo_t *u) {
    u->valid = 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (off < 0) {
        int fl = fcntl(fd, F_GETFL);
        off = (fl >= 0 && (fl & O_APPEND)) ? st.st_size : lseek(fd, 0, SEEK_CUR);
        if (off < 0) return;
    }
    u->dev = (unsigned long long)st.st_dev;
    u->ino = (unsigned long long)st.st_ino;
    u->off = off;
    u->uoff = -1;
    u->len = 0;
    u->valid = 1;
    if (off < st.st_size) {
        size_t over = (size_t)(st.st_size - off) < len ? (size_t)(st.st_size - off) : len;
        u->uoff = pc_save_fd(fd, off, over, &u->len);
    }
}

static void pc_post_write(const pc_undo_t *u) {
    if (!u->valid || u->uoff < 0 || u->len == 0) return;
    pc_logf("U\t%llu\t%llu\t%llu\t%lld\t%zu\t%lld\n", (unsigned long long)pc_next(), u->dev, u->ino, u->off, u->len, u->uoff);
}

/* Before a truncation of the file open as fd to len: saves what it cuts off. */
static void pc_pre_truncate(int fd, off_t len, pc_undo_t *u) {
    u->valid = 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || len >= st.st_size) return;
    u->dev = (unsigned long long)st.st_dev;
    u->ino = (unsigned long long)st.st_ino;
    u->off = len;
    u->uoff = pc_save_fd(fd, len, (size_t)(st.st_size - len), &u->len);
    u->valid = 1;
}

/* A sync of fd: what to log once it succeeded (taken before it). */
typedef struct { int kind; uint64_t seq; unsigned long long dev, ino; long long size; char path[PATH_MAX]; } pc_sync_t;

static void pc_pre_sync(int fd, const char *path, pc_sync_t *s) {
    s->kind = 0;
    struct stat st;
    if (fstat(fd, &st) != 0) return;
    s->seq = pc_next();
    if (S_ISDIR(st.st_mode)) {
        s->kind = 2;
        pc_canon(path, s->path);
    } else if (S_ISREG(st.st_mode)) {
        s->kind = 1;
        s->dev = (unsigned long long)st.st_dev;
        s->ino = (unsigned long long)st.st_ino;
        s->size = (long long)st.st_size;
    }
}

static void pc_post_sync(const pc_sync_t *s, int ok) {
    if (!ok || !s->kind) return;
    if (s->kind == 1 && pc_drop_syncs > 0 &&
        (long)(fi_counter ? *fi_counter : fi_local_counter) >= pc_drop_syncs) return;
    if (s->kind == 1) pc_logf("S\t%llu\t%llu\t%llu\t%lld\n", (unsigned long long)s->seq, s->dev, s->ino, s->size);
    else pc_logf("D\t%llu\t%s\n", (unsigned long long)s->seq, s->path);
}

/* Links the regular file at abs into stash/ (keeping its inode and bytes for an undo); writes
   the stash path, or "-". */
static void pc_stash_file(const char *abs, char *out, struct stat *st) {
    snprintf(out, PATH_MAX, "-");
    if (lstat(abs, st) != 0 || !S_ISREG(st->st_mode)) return;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/st-%llu", pc_stash, (unsigned long long)pc_next());
    if (link(abs, p) == 0) snprintf(out, PATH_MAX, "%s", p);
}

/* open: before; *existed says whether the name was there, and O_TRUNC's victim is saved. */
static void pc_pre_open(const char *abs, int flags, int *existed, pc_undo_t *u) {
    struct stat st;
    u->valid = 0;
    *existed = lstat(abs, &st) == 0;
    if (*existed && (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY && S_ISREG(st.st_mode) && st.st_size > 0) {
        int rfd = r_open(abs, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (rfd >= 0) {
            u->dev = (unsigned long long)st.st_dev;
            u->ino = (unsigned long long)st.st_ino;
            u->off = 0;
            u->uoff = pc_save_fd(rfd, 0, (size_t)st.st_size, &u->len);
            u->valid = 1;
            r_close(rfd);
        }
    }
}

static void pc_post_open(const char *abs, int fd, int flags, int existed, const pc_undo_t *u) {
    if (fd < 0) return;
    if (u->valid) pc_post_write(u);
    if ((flags & O_CREAT) && !existed) {
        struct stat st;
        char dir[PATH_MAX], name[PATH_MAX];
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pc_split(abs, dir, name))
            pc_logf("C\t%llu\t%s\t%s\t%llu\t%llu\n", (unsigned long long)pc_next(), dir, name,
                    (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    }
}

/* Every regular file under the state directory before the broker's first start is durable. */
static int pc_baseline_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)ftw;
    if (type == FTW_F && S_ISREG(st->st_mode))
        pc_logf("S\t0\t%llu\t%llu\t%lld\n", (unsigned long long)st->st_dev, (unsigned long long)st->st_ino, (long long)st->st_size);
    (void)path;
    return 0;
}

static void pc_init(void) {
    const char *d = getenv("FI_POWER_CUT");
    if (!d || d[0] != '/' || strlen(d) + 32 >= PATH_MAX) return;
    char p[PATH_MAX];
    r_mkdir(d, 0700);
    snprintf(pc_stash, sizeof pc_stash, "%s/stash", d);
    r_mkdir(pc_stash, 0700);
    snprintf(p, sizeof p, "%s/pc.log", d);
    pc_log_fd = r_open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    snprintf(p, sizeof p, "%s/pc.undo", d);
    pc_undo_fd = r_open(p, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (pc_log_fd < 0 || pc_undo_fd < 0) return;
    for (int *fdp = &pc_log_fd; fdp; fdp = fdp == &pc_log_fd ? &pc_undo_fd : NULL) {
        if (*fdp < 900) {
            int hi = fcntl(*fdp, F_DUPFD_CLOEXEC, 900);
            if (hi >= 0) { r_close(*fdp); *fdp = hi; }
        }
    }
    if (fi_counter) pc_seq_shared = fi_counter + 1;
    const char *drop = getenv("FI_PC_DROP_SYNCS");
    pc_drop_syncs = drop ? atol(drop) : 0;
    pc_enabled = 1;
    struct stat st;
    if (fstat(pc_log_fd, &st) == 0 && st.st_size == 0) nftw(fi_state, pc_baseline_one, 16, FTW_PHYS);
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
    for (int i = 0; !fail && i < fi_also_count; i++)
        if ((long)n == fi_also[i]) fail = 1;
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

#define OPEN_BODY(DIRFD, CALL, NAME, FLAGS)                                                   \
    char abs[PATH_MAX];                                                                       \
    if (fi_enabled && fi_resolve_path(DIRFD, path, abs, sizeof abs)) {                        \
        if (fi_decide(OP_OPEN, NAME, abs, 0, NULL)) FAIL_WITH(-1);                            \
        int existed = 1;                                                                      \
        pc_undo_t u = {0};                                                                    \
        if (pc_enabled) pc_pre_open(abs, FLAGS, &existed, &u);                                \
        int fd = CALL;                                                                        \
        int saved_errno = errno;                                                              \
        if (fd >= 0) fi_track(fd, abs);                                                       \
        if (pc_enabled) pc_post_open(abs, fd, FLAGS, existed, &u);                            \
        errno = saved_errno;                                                                  \
        return fd;                                                                            \
    }                                                                                         \
    return CALL;

static mode_t fi_mode_arg(int flags, va_list ap) {
    if (flags & (O_CREAT | __O_TMPFILE)) return (mode_t)va_arg(ap, int);
    return 0;
}

int open(const char *path, int flags, ...) { READY();
    va_list ap; va_start(ap, flags); mode_t mode = fi_mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(AT_FDCWD, r_open(path, flags, mode), "open", flags)
}
int open64(const char *path, int flags, ...) { READY();
    va_list ap; va_start(ap, flags); mode_t mode = fi_mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(AT_FDCWD, r_open64(path, flags, mode), "open", flags)
}
int openat(int dirfd, const char *path, int flags, ...) { READY();
    va_list ap; va_start(ap, flags); mode_t mode = fi_mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(dirfd, r_openat(dirfd, path, flags, mode), "openat", flags)
}
int openat64(int dirfd, const char *path, int flags, ...) { READY();
    va_list ap; va_start(ap, flags); mode_t mode = fi_mode_arg(flags, ap); va_end(ap);
    OPEN_BODY(dirfd, r_openat64(dirfd, path, flags, mode), "openat", flags)
}
int __open_2(const char *path, int flags) { READY(); OPEN_BODY(AT_FDCWD, r___open_2(path, flags), "open", flags) }
int __open64_2(const char *path, int flags) { READY(); OPEN_BODY(AT_FDCWD, r___open64_2(path, flags), "open", flags) }
int __openat_2(int dirfd, const char *path, int flags) { READY(); OPEN_BODY(dirfd, r___openat_2(dirfd, path, flags), "openat", flags) }
int __openat64_2(int dirfd, const char *path, int flags) { READY(); OPEN_BODY(dirfd, r___openat64_2(dirfd, path, flags), "openat", flags) }
int creat(const char *path, mode_t mode) { READY(); OPEN_BODY(AT_FDCWD, r_creat(path, mode), "creat", O_CREAT | O_WRONLY | O_TRUNC) }

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

/* The real write made with power-cut tracking around it: the bytes it overwrites are saved
   before and logged after (see pc_pre_write). */
#define PC_WRITE(FD, OFF, LEN, CALL)                                                           \
    do {                                                                                       \
        pc_undo_t u_;                                                                          \
        pc_pre_write(FD, OFF, LEN, &u_);                                                       \
        ssize_t r_ = CALL;                                                                     \
        int e_ = errno;                                                                        \
        pc_post_write(&u_);                                                                    \
        errno = e_;                                                                            \
        return r_;                                                                             \
    } while (0)

ssize_t write(int fd, const void *buf, size_t len) { READY();
    char p[PATH_MAX];
    int torn;
    int tracked = fi_fd_tracked(fd, p, sizeof p);
    if (tracked && fi_decide(OP_WRITE, "write", p, 1, &torn)) {
        if (fi_mode == 3) return (ssize_t)len;
        if (torn && len > 1) { ssize_t w = r_write(fd, buf, len / 2); fi_log_torn(w > 0 ? (size_t)w : 0, len); }
        FAIL_WITH(-1);
    }
    if (tracked && pc_enabled) PC_WRITE(fd, -1, len, r_write(fd, buf, len));
    return r_write(fd, buf, len);
}
ssize_t pwrite(int fd, const void *buf, size_t len, off_t off) { READY();
    char p[PATH_MAX];
    int torn;
    int tracked = fi_fd_tracked(fd, p, sizeof p);
    if (tracked && fi_decide(OP_WRITE, "pwrite", p, 1, &torn)) {
        if (fi_mode == 3) return (ssize_t)len;
        if (torn && len > 1) { ssize_t w = r_pwrite(fd, buf, len / 2, off); fi_log_torn(w > 0 ? (size_t)w : 0, len); }
        FAIL_WITH(-1);
    }
    if (tracked && pc_enabled) PC_WRITE(fd, off, len, r_pwrite(fd, buf, len, off));
    return r_pwrite(fd, buf, len, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) { READY();
    char p[PATH_MAX];
    int torn;
    int tracked = fi_fd_tracked(fd, p, sizeof p);
    if (tracked && fi_decide(OP_WRITE, "pwrite", p, 1, &torn)) {
        if (fi_mode == 3) return (ssize_t)len;
        if (torn && len > 1) { ssize_t w = r_pwrite64(fd, buf, len / 2, off); fi_log_torn(w > 0 ? (size_t)w : 0, len); }
        FAIL_WITH(-1);
    }
    if (tracked && pc_enabled) PC_WRITE(fd, off, len, r_pwrite64(fd, buf, len, off));
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

static size_t fi_iov_total(const struct iovec *iov, int cnt) {
    size_t t = 0;
    for (int i = 0; i < cnt; i++) t += iov[i].iov_len;
    return t;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt) { READY();
    char p[PATH_MAX];
    int torn;
    int tracked = fi_fd_tracked(fd, p, sizeof p);
    if (tracked && fi_decide(OP_WRITE, "writev", p, 1, &torn)) {
        if (fi_mode == 3) return (ssize_t)fi_iov_total(iov, cnt);
        if (torn) {
            struct iovec half[64]; size_t total;
            int k = fi_half_iov(iov, cnt, half, &total);
            ssize_t w = k > 0 ? r_writev(fd, half, k) : 0;
            fi_log_torn(w > 0 ? (size_t)w : 0, total);
        }
        FAIL_WITH(-1);
    }
    if (tracked && pc_enabled) PC_WRITE(fd, -1, fi_iov_total(iov, cnt), r_writev(fd, iov, cnt));
    return r_writev(fd, iov, cnt);
}
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) { READY();
    char p[PATH_MAX];
    int torn;
    int tracked = fi_fd_tracked(fd, p, sizeof p);
    if (tracked && fi_decide(OP_WRITE, "pwritev", p, 1, &torn)) {
        if (fi_mode == 3) return (ssize_t)fi_iov_total(iov, cnt);
        if (torn) {
            struct iovec half[64]; size_t total;
            int k = fi_half_iov(iov, cnt, half, &total);
            ssize_t w = k > 0 ? r_pwritev(fd, half, k, off) : 0;
            fi_log_torn(w > 0 ? (size_t)w : 0, total);
        }
        FAIL_WITH(-1);
    }
    if (tracked && pc_enabled) PC_WRITE(fd, off, fi_iov_total(iov, cnt), r_pwritev(fd, iov, cnt, off));
    return r_pwritev(fd, iov, cnt, off);
}

/* ---- sync, truncate, allocate -------------------------------------------------------------- */

#define PC_SYNC(FD, PATH, CALL)                                                                \
    do {                                                                                       \
        pc_sync_t s_;                                                                          \
        pc_pre_sync(FD, PATH, &s_);                                                            \
        int r_ = CALL;                                                                         \
        int e_ = errno;                                                                        \
        pc_post_sync(&s_, r_ == 0);                                                            \
        errno = e_;                                                                            \
        return r_;                                                                             \
    } while (0)

int fsync(int fd) { READY();
    char p[PATH_MAX];
    int tracked = fi_fd_tracked(fd, p, sizeof p);
    if (tracked && fi_decide(OP_SYNC, "fsync", p, 0, NULL)) FAIL_WITH(-1);
    if (tracked && pc_enabled) PC_SYNC(fd, p, r_fsync(fd));
    return r_fsync(fd);
}
int fdatasync(int fd) { READY();
    char p[PATH_MAX];
    int tracked = fi_fd_tracked(fd, p, sizeof p);
    if (tracked && fi_decide(OP_SYNC, "fdatasync", p, 0, NULL)) FAIL_WITH(-1);
    if (tracked && pc_enabled) PC_SYNC(fd, p, r_fdatasync(fd));
    return r_fdatasync(fd);
}

#define PC_TRUNCATE(FD, LEN, CALL)                                                             \
    do {                                                                                       \
        pc_undo_t u_;                                                                          \
        pc_pre_truncate(FD, LEN, &u_);                                                         \
        int r_ = CALL;                                                                         \
        int e_ = errno;                                                                        \
        if (r_ == 0) pc_post_write(&u_);                                                       \
        errno = e_;                                                                            \
        return r_;                                                                             \
    } while (0)

int ftruncate(int fd, off_t len) { READY();
    char p[PATH_MAX];
    int tracked = fi_fd_tracked(fd, p, sizeof p);
    if (tracked && fi_decide(OP_TRUNCATE, "ftruncate", p, 0, NULL)) FAIL_WITH(-1);
    if (tracked && pc_enabled) PC_TRUNCATE(fd, len, r_ftruncate(fd, len));
    return r_ftruncate(fd, len);
}
int ftruncate64(int fd, off_t len) { READY();
    char p[PATH_MAX];
    int tracked = fi_fd_tracked(fd, p, sizeof p);
    if (tracked && fi_decide(OP_TRUNCATE, "ftruncate", p, 0, NULL)) FAIL_WITH(-1);
    if (tracked && pc_enabled) PC_TRUNCATE(fd, len, r_ftruncate64(fd, len));
    return r_ftruncate64(fd, len);
}

/* truncate(2) by path (recovery cuts a torn tail or a sealed segment's zeros with it): never
   counted nor failed (the campaign's numbering predates it), only tracked for power cuts. */
static int pc_truncate_path(const char *path, off_t len, int (*real)(const char *, off_t)) {
    char a[PATH_MAX];
    if (!(pc_enabled && fi_resolve_path(AT_FDCWD, path, a, sizeof a))) return real(path, len);
    int fd = r_open(a, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return real(path, len);
    pc_undo_t u;
    pc_pre_truncate(fd, len, &u);
    r_close(fd);
    int r = real(path, len);
    int e = errno;
    if (r == 0) pc_post_write(&u);
    errno = e;
    return r;
}
int truncate(const char *path, off_t len) { READY(); return pc_truncate_path(path, len, r_truncate); }
int truncate64(const char *path, off_t len) { READY(); return pc_truncate_path(path, len, r_truncate64); }

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

/* A rename with power-cut tracking: the replaced target is kept (stash) for an undo. */
static int pc_rename(const char *a, const char *b, int (*do_it)(void *), void *ctx) {
    struct stat src, old;
    char stash[PATH_MAX] = "-";
    int have_src = lstat(a, &src) == 0;
    pc_stash_file(b, stash, &old);
    int r = do_it(ctx);
    int e = errno;
    if (r == 0 && have_src) {
        char odir[PATH_MAX], oname[PATH_MAX], ndir[PATH_MAX], nname[PATH_MAX];
        if (pc_split(a, odir, oname) && pc_split(b, ndir, nname))
            pc_logf("R\t%llu\t%s\t%s\t%s\t%s\t%llu\t%llu\t%s\n", (unsigned long long)pc_next(), odir, oname, ndir, nname,
                    (unsigned long long)src.st_dev, (unsigned long long)src.st_ino, stash);
    } else if (strcmp(stash, "-") != 0) {
        r_unlink(stash);
    }
    errno = e;
    return r;
}

struct pc_rename_args { int fd1; const char *from; int fd2; const char *to; unsigned flags; int kind; };
static int pc_rename_call(void *v) {
    struct pc_rename_args *x = v;
    if (x->kind == 0) return r_rename(x->from, x->to);
    if (x->kind == 1) return r_renameat(x->fd1, x->from, x->fd2, x->to);
    return r_renameat2(x->fd1, x->from, x->fd2, x->to, x->flags);
}

int rename(const char *from, const char *to) { READY();
    char a[PATH_MAX] = "", b[PATH_MAX] = "";
    int under = fi_enabled && (fi_resolve_path(AT_FDCWD, from, a, sizeof a) | fi_resolve_path(AT_FDCWD, to, b, sizeof b));
    if (under && fi_decide(OP_RENAME, "rename", fi_under_state_abs(a) ? a : b, 0, NULL)) FAIL_WITH(-1);
    if (under && pc_enabled && a[0] && b[0]) {
        struct pc_rename_args x = {AT_FDCWD, from, AT_FDCWD, to, 0, 0};
        return pc_rename(a, b, pc_rename_call, &x);
    }
    return r_rename(from, to);
}
int renameat(int fd1, const char *from, int fd2, const char *to) { READY();
    char a[PATH_MAX] = "", b[PATH_MAX] = "";
    int under = fi_enabled && (fi_resolve_path(fd1, from, a, sizeof a) | fi_resolve_path(fd2, to, b, sizeof b));
    if (under && fi_decide(OP_RENAME, "renameat", fi_under_state_abs(a) ? a : b, 0, NULL)) FAIL_WITH(-1);
    if (under && pc_enabled && a[0] && b[0]) {
        struct pc_rename_args x = {fd1, from, fd2, to, 0, 1};
        return pc_rename(a, b, pc_rename_call, &x);
    }
    return r_renameat(fd1, from, fd2, to);
}
int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned flags) { READY();
    char a[PATH_MAX] = "", b[PATH_MAX] = "";
    int under = fi_enabled && (fi_resolve_path(fd1, from, a, sizeof a) | fi_resolve_path(fd2, to, b, sizeof b));
    if (under && fi_decide(OP_RENAME, "renameat2", fi_under_state_abs(a) ? a : b, 0, NULL)) FAIL_WITH(-1);
    if (under && pc_enabled && a[0] && b[0]) {
        struct pc_rename_args x = {fd1, from, fd2, to, flags, 2};
        return pc_rename(a, b, pc_rename_call, &x);
    }
    return r_renameat2(fd1, from, fd2, to, flags);
}

/* An unlink (dir: a rmdir) with power-cut tracking: a regular file is kept (stash) for an undo. */
static int pc_remove(const char *a, int dir, int (*do_it)(void *), void *ctx) {
    struct stat st;
    char stash[PATH_MAX] = "-";
    if (!dir) pc_stash_file(a, stash, &st);
    else if (lstat(a, &st) != 0) memset(&st, 0, sizeof st);
    int r = do_it(ctx);
    int e = errno;
    char d[PATH_MAX], name[PATH_MAX];
    if (r == 0 && pc_split(a, d, name)) {
        if (dir) pc_logf("XD\t%llu\t%s\t%s\n", (unsigned long long)pc_next(), d, name);
        else pc_logf("X\t%llu\t%s\t%s\t%llu\t%llu\t%s\n", (unsigned long long)pc_next(), d, name,
                     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, stash);
    } else if (strcmp(stash, "-") != 0) {
        r_unlink(stash);
    }
    errno = e;
    return r;
}

struct pc_remove_args { int dirfd; const char *path; int flags; int kind; };
static int pc_remove_call(void *v) {
    struct pc_remove_args *x = v;
    if (x->kind == 0) return r_unlink(x->path);
    if (x->kind == 1) return r_unlinkat(x->dirfd, x->path, x->flags);
    return r_rmdir(x->path);
}

int unlink(const char *path) { READY();
    char a[PATH_MAX];
    int under = fi_enabled && fi_resolve_path(AT_FDCWD, path, a, sizeof a);
    if (under && fi_decide(OP_UNLINK, "unlink", a, 0, NULL)) FAIL_WITH(-1);
    if (under && pc_enabled) {
        struct pc_remove_args x = {AT_FDCWD, path, 0, 0};
        return pc_remove(a, 0, pc_remove_call, &x);
    }
    return r_unlink(path);
}
int unlinkat(int dirfd, const char *path, int flags) { READY();
    char a[PATH_MAX];
    int under = fi_enabled && fi_resolve_path(dirfd, path, a, sizeof a);
    if (under && fi_decide((flags & AT_REMOVEDIR) ? OP_RMDIR : OP_UNLINK, "unlinkat", a, 0, NULL)) FAIL_WITH(-1);
    if (under && pc_enabled) {
        struct pc_remove_args x = {dirfd, path, flags, 1};
        return pc_remove(a, (flags & AT_REMOVEDIR) != 0, pc_remove_call, &x);
    }
    return r_unlinkat(dirfd, path, flags);
}
int rmdir(const char *path) { READY();
    char a[PATH_MAX];
    int under = fi_enabled && fi_resolve_path(AT_FDCWD, path, a, sizeof a);
    if (under && fi_decide(OP_RMDIR, "rmdir", a, 0, NULL)) FAIL_WITH(-1);
    if (under && pc_enabled) {
        struct pc_remove_args x = {AT_FDCWD, path, 0, 2};
        return pc_remove(a, 1, pc_remove_call, &x);
    }
    return r_rmdir(path);
}

static void pc_post_mkdir(const char *a, int r) {
    struct stat st;
    char d[PATH_MAX], name[PATH_MAX];
    if (r == 0 && lstat(a, &st) == 0 && pc_split(a, d, name))
        pc_logf("M\t%llu\t%s\t%s\t%llu\t%llu\n", (unsigned long long)pc_next(), d, name,
                (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
}

int mkdir(const char *path, mode_t mode) { READY();
    char a[PATH_MAX];
    int under = fi_enabled && fi_resolve_path(AT_FDCWD, path, a, sizeof a);
    if (under && fi_decide(OP_MKDIR, "mkdir", a, 0, NULL)) FAIL_WITH(-1);
    int r = r_mkdir(path, mode);
    if (under && pc_enabled) { int e = errno; pc_post_mkdir(a, r); errno = e; }
    return r;
}
int mkdirat(int dirfd, const char *path, mode_t mode) { READY();
    char a[PATH_MAX];
    int under = fi_enabled && fi_resolve_path(dirfd, path, a, sizeof a);
    if (under && fi_decide(OP_MKDIR, "mkdirat", a, 0, NULL)) FAIL_WITH(-1);
    int r = r_mkdirat(dirfd, path, mode);
    if (under && pc_enabled) { int e = errno; pc_post_mkdir(a, r); errno = e; }
    return r;
}
