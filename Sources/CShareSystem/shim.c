// C shim implementation: epoll (Linux) / poll-free kqueue-less fallback is not provided here;
// non-Linux systems use kqueue. Signal forwarding writes one byte per signal into a pipe.
#define _GNU_SOURCE
#include "CShareSystem.h"

#include <errno.h>
#include <fcntl.h>
#ifdef __linux__
#include <linux/falloc.h>
#endif
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>

int sb_random(void *buf, size_t len) {
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
#else
int sb_random(void *buf, size_t len) {
    arc4random_buf(buf, len);
    return 0;
}
#endif

#ifdef __linux__
#include <sys/epoll.h>
#include <sys/vfs.h>

int sb_poller_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static uint32_t to_epoll(uint32_t interest) {
    /* A peer's half-close is reported only while reading: a connection that only waits to write
       its last replies must not wake the loop again and again. */
    uint32_t e = 0;
    if (interest & SB_READABLE) e |= EPOLLIN | EPOLLRDHUP;
    if (interest & SB_WRITABLE) e |= EPOLLOUT;
    return e;
}

int sb_poller_add(int pfd, int fd, uint32_t interest, uint64_t token) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = to_epoll(interest);
    ev.data.u64 = token;
    return epoll_ctl(pfd, EPOLL_CTL_ADD, fd, &ev);
}

int sb_poller_modify(int pfd, int fd, uint32_t interest, uint64_t token) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = to_epoll(interest);
    ev.data.u64 = token;
    return epoll_ctl(pfd, EPOLL_CTL_MOD, fd, &ev);
}

int sb_poller_remove(int pfd, int fd) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    return epoll_ctl(pfd, EPOLL_CTL_DEL, fd, &ev);
}

/* epoll_pwait2 (Linux 5.11) takes its timeout in nanoseconds; a kernel or sandbox without it
 * answers ENOSYS (or EPERM under some seccomp filters) once, and milliseconds (rounded up) are
 * used from then on. */
#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif
static int sb_have_pwait2 = 1; /* read and written with relaxed atomics: brokers of one process share it */
/* The kernel's __kernel_timespec: 64-bit fields even where time_t is 32 bits. */
struct sb_kernel_timespec { long long tv_sec; long long tv_nsec; };

static int sb_pwait2(int pfd, struct epoll_event *evs, int max_events, long long timeout_ns) {
    struct sb_kernel_timespec ts = { timeout_ns / 1000000000LL, timeout_ns % 1000000000LL };
    int n = (int)syscall(SYS_epoll_pwait2, pfd, evs, max_events, &ts, NULL, 0);
    if (n < 0 && (errno == ENOSYS || errno == EPERM)) __atomic_store_n(&sb_have_pwait2, 0, __ATOMIC_RELAXED);
    return n;
}

int sb_poller_precise(int pfd) {
    if (__atomic_load_n(&sb_have_pwait2, __ATOMIC_RELAXED)) {
        struct epoll_event ev;
        (void)sb_pwait2(pfd, &ev, 1, 0);
    }
    return __atomic_load_n(&sb_have_pwait2, __ATOMIC_RELAXED);
}

int sb_poller_still_precise(void) { return __atomic_load_n(&sb_have_pwait2, __ATOMIC_RELAXED); }
void sb_poller_set_precise_for_testing(int on) { __atomic_store_n(&sb_have_pwait2, on ? 1 : 0, __ATOMIC_RELAXED); }

int sb_poller_wait_ns(int pfd, sb_event *events, int max_events, long long timeout_ns) {
    struct epoll_event evs[256];
    if (max_events > 256) max_events = 256;
    int n;
    if (timeout_ns > 0 && timeout_ns % 1000000LL != 0 && __atomic_load_n(&sb_have_pwait2, __ATOMIC_RELAXED)) {
        n = sb_pwait2(pfd, evs, max_events, timeout_ns);
        if (n < 0 && !__atomic_load_n(&sb_have_pwait2, __ATOMIC_RELAXED))
            n = epoll_wait(pfd, evs, max_events, (int)((timeout_ns + 999999LL) / 1000000LL));
    } else {
        int ms = timeout_ns < 0 ? -1 : (int)((timeout_ns + 999999LL) / 1000000LL);
        n = epoll_wait(pfd, evs, max_events, ms);
    }
    if (n < 0) return -1;
    for (int i = 0; i < n; i++) {
        uint32_t e = 0;
        if (evs[i].events & EPOLLIN) e |= SB_READABLE;
        if (evs[i].events & EPOLLOUT) e |= SB_WRITABLE;
        if (evs[i].events & (EPOLLHUP | EPOLLRDHUP)) e |= SB_HANGUP;
        if (evs[i].events & EPOLLERR) e |= SB_ERROR;
        events[i].token = evs[i].data.u64;
        events[i].events = e;
    }
    return n;
}
#else
#include <sys/event.h>
#include <sys/time.h>

int sb_poller_create(void) {
    int fd = kqueue();
    if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

static int kq_set(int pfd, int fd, uint32_t interest, uint64_t token) {
    struct kevent ch[2];
    EV_SET(&ch[0], fd, EVFILT_READ, (interest & SB_READABLE) ? EV_ADD | EV_ENABLE : EV_ADD | EV_DISABLE, 0, 0,
           (void *)(uintptr_t)token);
    EV_SET(&ch[1], fd, EVFILT_WRITE, (interest & SB_WRITABLE) ? EV_ADD | EV_ENABLE : EV_ADD | EV_DISABLE, 0, 0,
           (void *)(uintptr_t)token);
    return kevent(pfd, ch, 2, NULL, 0, NULL);
}

int sb_poller_add(int pfd, int fd, uint32_t interest, uint64_t token) { return kq_set(pfd, fd, interest, token); }
int sb_poller_modify(int pfd, int fd, uint32_t interest, uint64_t token) { return kq_set(pfd, fd, interest, token); }
int sb_poller_remove(int pfd, int fd) {
    struct kevent ch[2];
    EV_SET(&ch[0], fd, EVFILT_READ, EV_DELETE, 0, 0, NULL);
    EV_SET(&ch[1], fd, EVFILT_WRITE, EV_DELETE, 0, 0, NULL);
    kevent(pfd, ch, 2, NULL, 0, NULL);
    return 0;
}

int sb_poller_precise(int pfd) {
    (void)pfd;
    return 1;
}

static int sb_precise_darwin = 1; /* kqueue keeps nanoseconds; only the test hook clears this */
int sb_poller_still_precise(void) { return __atomic_load_n(&sb_precise_darwin, __ATOMIC_RELAXED); }
void sb_poller_set_precise_for_testing(int on) { __atomic_store_n(&sb_precise_darwin, on ? 1 : 0, __ATOMIC_RELAXED); }

int sb_poller_wait_ns(int pfd, sb_event *events, int max_events, long long timeout_ns) {
    struct kevent evs[256];
    if (max_events > 256) max_events = 256;
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000LL);
        ts.tv_nsec = (long)(timeout_ns % 1000000000LL);
        tsp = &ts;
    }
    int n = kevent(pfd, NULL, 0, evs, max_events, tsp);
    if (n < 0) return -1;
    for (int i = 0; i < n; i++) {
        uint32_t e = 0;
        if (evs[i].filter == EVFILT_READ) e |= SB_READABLE;
        if (evs[i].filter == EVFILT_WRITE) e |= SB_WRITABLE;
        if (evs[i].flags & EV_EOF) e |= SB_HANGUP;
        if (evs[i].flags & EV_ERROR) e |= SB_ERROR;
        events[i].token = (uint64_t)(uintptr_t)evs[i].udata;
        events[i].events = e;
    }
    return n;
}
#endif

static volatile sig_atomic_t forward_fd = -1;

static void forward_handler(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (forward_fd >= 0) {
        ssize_t r = write(forward_fd, &b, 1);
        (void)r;
    }
    errno = saved;
}

int sb_signal_forward(int write_fd, const int *signals, int count) {
    forward_fd = write_fd;
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < count; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = forward_handler;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (sigaction(signals[i], &sa, NULL) != 0) return -1;
    }
    /* A parent may have started us with these signals blocked (the mask is inherited across
       exec: some supervisors and Foundation's Process do): unblock them, or SIGTERM would stay
       pending for ever. Threads started later inherit this thread's mask. */
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < count; i++) sigaddset(&set, signals[i]);
    if (pthread_sigmask(SIG_UNBLOCK, &set, NULL) != 0) return -1;
    return 0;
}

void sb_signal_default(const int *signals, int count) {
    for (int i = 0; i < count; i++) signal(signals[i], SIG_DFL);
    forward_fd = -1;
}

int sb_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
#ifdef __linux__
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
#else
    if (getpeereid(fd, uid, gid) != 0) return -1;
    *pid = -1;
#ifdef LOCAL_PEERPID
    pid_t p;
    socklen_t len = sizeof p;
    if (getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID, &p, &len) == 0) *pid = p;
#endif
    return 0;
#endif
}

int sb_set_passcred(int fd, int on) {
#ifdef __linux__
    int value = on != 0;
    return setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &value, sizeof value);
#else
    (void)fd;
    if (!on) return 0;
    errno = ENOTSUP;
    return -1;
#endif
}

long sb_read_with_writer(int fd, void *buf, unsigned long len, pid_t *writer_pid) {
    *writer_pid = -1;
#ifdef __linux__
    struct iovec iov = {buf, len};
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(struct ucred))];
    } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n > 0) {
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
                struct ucred cred;
                memcpy(&cred, CMSG_DATA(c), sizeof cred);
                *writer_pid = cred.pid;
            }
        }
    }
    return (long)n;
#else
    return (long)read(fd, buf, len);
#endif
}

long sb_fs_type(int fd) {
#ifdef __linux__
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0) return -1;
    return (long)fs.f_type;
#else
    (void)fd;
    return -1;
#endif
}

long sb_raise_nofile_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    rlim_t want = rl.rlim_max;
#ifdef __APPLE__
    if (want > 10240 || want == RLIM_INFINITY) want = 10240;  // OPEN_MAX
#endif
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            getrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    return (long)rl.rlim_cur;
}

int sb_pipe_nonblocking(int fds[2]) {
#ifdef __linux__
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
#else
    if (pipe(fds) != 0) return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
        fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    }
    return 0;
#endif
}

#ifdef __APPLE__
#include <libproc.h>
#endif

int sb_executable_path(int pid, char *buf, int size) {
    if (pid <= 0 || size < 2) return -1;
#ifdef __APPLE__
    /* libproc refuses a buffer larger than PROC_PIDPATHINFO_MAXSIZE. */
    int n = proc_pidpath(pid, buf, (uint32_t)(size > PROC_PIDPATHINFO_MAXSIZE ? PROC_PIDPATHINFO_MAXSIZE : size));
    return n > 0 ? n : -1;
#else
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/exe", pid);
    ssize_t n = readlink(link, buf, (size_t)size - 1);
    if (n <= 0) return -1;
    buf[n] = 0;
    return (int)n;
#endif
}

int sb_accept_nonblocking(int fd) {
#ifdef __linux__
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    int c = accept(fd, NULL, NULL);
    if (c < 0) return -1;
    fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
    fcntl(c, F_SETFD, FD_CLOEXEC);
    /* No MSG_NOSIGNAL on Darwin: a write to a peer that is gone must fail with EPIPE, not raise SIGPIPE. */
#ifdef SO_NOSIGPIPE
    int one = 1;
    setsockopt(c, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    return c;
#endif
}

#ifdef __APPLE__
#include <crt_externs.h>
char **sb_environ(void) { return *_NSGetEnviron(); }
#else
extern char **environ;
char **sb_environ(void) { return environ; }
#endif

pid_t sb_spawn_detached(const char *const argv[], const char *const envp[], int err_fd) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (err_fd >= 0) {
        posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    } else {
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    }
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
#ifdef POSIX_SPAWN_SETSID
    flags |= POSIX_SPAWN_SETSID;
#endif
    /* Descriptors the broker inherited (not close-on-exec) are not passed on (its own all are). */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#elif defined(POSIX_SPAWN_CLOEXEC_DEFAULT)
    flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
#endif
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, flags);
    pid_t pid = -1;
    int rc = posix_spawnp(&pid, argv[0], &fa, &attr, (char *const *)argv, (char *const *)envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return pid;
}

#include <grp.h>
#include <poll.h>
#if defined(__linux__) && defined(__has_include)
#if __has_include(<linux/close_range.h>)
#include <linux/close_range.h>
#endif
#endif
#include <limits.h>
#include <pthread.h>
#include <sys/wait.h>

int sb_user_groups(const char *user, gid_t gid, gid_t *groups, int max) {
    int n = max;
#ifdef __APPLE__
    if (getgrouplist(user, (int)gid, (int *)groups, &n) < 0) return -1;
#else
    if (getgrouplist(user, gid, groups, &n) < 0) return -1;
#endif
    return n;
}

/* The child's way out before its exec: the step's errno through the close-on-exec pipe. Only
   async-signal-safe calls from fork to exec: the parent has other threads. */
static void spawn_child_fail(int fd, int err) {
    ssize_t unused = write(fd, &err, sizeof err);
    (void)unused;
    _exit(127);
}

/* dup2 that also works when src == dst (dup2 then leaves close-on-exec set). */
static int spawn_move_fd(int src, int dst) {
    if (src != dst) return dup2(src, dst);
    int flags = fcntl(dst, F_GETFD);
    return flags < 0 ? -1 : fcntl(dst, F_SETFD, flags & ~FD_CLOEXEC);
}

/* Every descriptor from 3 up is closed at exec: the broker's own are close-on-exec already, but
   what it inherited from whoever started it (a supervisor's, a shell's redirection) is not, and
   must not reach an app run as another user. */
static void spawn_cloexec_from_3(int max_fd) {
#if defined(__linux__) && defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
    for (int fd = 3; fd < max_fd; fd++) {
        int flags = fcntl(fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC)) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
}

static int spawn_keep_searching(int err) {
    return err == ENOENT || err == ENOTDIR || err == EACCES || err == ESTALE || err == ENODEV || err == ETIMEDOUT
        || err == ELOOP || err == ENAMETOOLONG;
}

pid_t sb_spawn_as_user(const char *const argv[], const char *const envp[], int err_fd, uid_t uid, gid_t gid,
                       const gid_t *groups, int ngroups, const char *dir, const char *path, int wait_ms) {
    int pfd[2];
#ifdef __linux__
    if (pipe2(pfd, O_CLOEXEC) != 0) return -1;
#else
    if (pipe(pfd) != 0) return -1;
    fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
#endif
    struct rlimit lim;
    int max_fd = (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < 1 << 20)
        ? (int)lim.rlim_cur : 1 << 20;
    /* Every signal blocked across fork: no handler of the broker's may run in the child. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++) {
            if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, NULL);
        }
        close(pfd[0]);
        setsid();
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nul < 0) spawn_child_fail(pfd[1], errno);
        if (spawn_move_fd(nul, 0) < 0 || spawn_move_fd(nul, 1) < 0 || spawn_move_fd(err_fd >= 0 ? err_fd : nul, 2) < 0) {
            spawn_child_fail(pfd[1], errno);
        }
        spawn_cloexec_from_3(max_fd);
        if (setgroups(ngroups, groups) != 0) spawn_child_fail(pfd[1], errno);
        if (setgid(gid) != 0) spawn_child_fail(pfd[1], errno);
        /* The user's from the setuid on (they may stop it): the parent's wait for the exec is
           bounded from this mark, written while the child is still root's. A setuid that fails
           is still said at once. */
        int mark = 0;
        ssize_t unused = write(pfd[1], &mark, sizeof mark);
        (void)unused;
        if (setuid(uid) != 0) spawn_child_fail(pfd[1], errno);
        if (dir == NULL || chdir(dir) != 0) {
            if (chdir("/") != 0) spawn_child_fail(pfd[1], errno);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        const char *file = argv[0];
        if (strchr(file, '/') != NULL) {
            execve(file, (char *const *)argv, (char *const *)envp);
            spawn_child_fail(pfd[1], errno);
        }
        /* As execvp: each PATH entry in turn (an empty one is the current directory), searched as
           the new user; EACCES is kept for the end when nothing else was found. */
        int denied = 0;
        size_t flen = strlen(file);
        const char *p = path != NULL ? path : "/usr/local/bin:/usr/bin:/bin";
        for (;;) {
            const char *end = strchr(p, ':');
            size_t dlen = end != NULL ? (size_t)(end - p) : strlen(p);
            char buf[PATH_MAX];
            if (dlen + 1 + flen < sizeof buf) {
                size_t at = 0;
                if (dlen == 0) {
                    buf[at++] = '.';
                } else {
                    memcpy(buf, p, dlen);
                    at = dlen;
                }
                buf[at++] = '/';
                memcpy(buf + at, file, flen + 1);
                execve(buf, (char *const *)argv, (char *const *)envp);
                int e = errno;
                if (e == EACCES) denied = 1;
                if (!spawn_keep_searching(e)) spawn_child_fail(pfd[1], e);
            }
            if (end == NULL) break;
            p = end + 1;
        }
        spawn_child_fail(pfd[1], denied ? EACCES : ENOENT);
    }
    int forkErr = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        errno = forkErr;
        return -1;
    }
    /* What the child says through the pipe: 0 just before it takes the user's identity (what comes
       before is root's and quick, descriptors made close-on-exec included: waited for up to 10 s),
       then an errno if a later step failed, or end of file at its exec. From its setuid on the
       child is the user's (they may stop it with SIGSTOP; their home directory may hang chdir):
       that part is waited for `wait_ms` at most. A child still on its way then counts as launched
       (the broker's launch watchdog stops one that never subscribes). */
    int err = 0;
    ssize_t n = -1;
    for (int phase = 0; phase < 2;) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN, .revents = 0};
        int r = poll(&p, 1, phase == 0 ? 10000 : wait_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        do {
            n = read(pfd[0], &err, sizeof err);
        } while (n < 0 && errno == EINTR);
        if (n != (ssize_t)sizeof err || err != 0) break;  /* (end of file, or a step's errno) */
        n = -1;
        phase++;
    }
    close(pfd[0]);
    if (n == (ssize_t)sizeof err) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        errno = err;
        return -1;
    }
    return pid;
}

long sb_process_rss(pid_t pid, long *peak) {
#ifdef __linux__
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long rss = -1, hwm = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0) rss = strtol(line + 6, NULL, 10) * 1024;
        if (strncmp(line, "VmHWM:", 6) == 0) hwm = strtol(line + 6, NULL, 10) * 1024;
    }
    fclose(f);
    if (peak) *peak = hwm;
    return rss;
#else
    (void)pid;
    if (peak) *peak = -1;
    return -1;
#endif
}

/* CRC-32C, slicing-by-8 tables built on first use. */
static uint32_t crc_tables[8][256];
static int crc_ready = 0;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_tables[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = crc_tables[0][i];
        for (int t = 1; t < 8; t++) {
            c = crc_tables[0][c & 0xFF] ^ (c >> 8);
            crc_tables[t][i] = c;
        }
    }
    crc_ready = 1;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SB_HAVE_HW_CRC32C 1
/* The SSE4.2 crc32 instruction computes CRC-32C 8 bytes at a time (~30x the tables). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const unsigned char *p, size_t len) {
    uint64_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    while (len--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
static int crc_hw = -1;
#endif

uint32_t sb_crc32c(uint32_t crc, const void *buf, size_t len) {
#ifdef SB_HAVE_HW_CRC32C
#ifdef __APPLE__
    /* Every x86_64 Mac that runs macOS 13 has SSE4.2, and Apple's runtime lacks the
       __cpu_model symbol that __builtin_cpu_supports needs. */
    if (crc_hw < 0) crc_hw = 1;
#else
    if (crc_hw < 0) crc_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    if (crc_hw) return crc32c_hw(crc, (const unsigned char *)buf, len);
#endif
    if (!crc_ready) crc_init();
    const unsigned char *p = (const unsigned char *)buf;
    crc = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        crc = crc_tables[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc;
        crc = crc_tables[7][v & 0xFF] ^ crc_tables[6][(v >> 8) & 0xFF] ^ crc_tables[5][(v >> 16) & 0xFF] ^
              crc_tables[4][(v >> 24) & 0xFF] ^ crc_tables[3][(v >> 32) & 0xFF] ^ crc_tables[2][(v >> 40) & 0xFF] ^
              crc_tables[1][(v >> 48) & 0xFF] ^ crc_tables[0][(v >> 56) & 0xFF];
        p += 8;
        len -= 8;
    }
    while (len--) crc = crc_tables[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

int sb_preallocate(int fd, long long offset, long long len) {
#ifdef __linux__
    /* Reserve blocks without changing the file size, so replay never sees a zero-filled tail. */
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)len) == 0) return 0;
    if (errno == EOPNOTSUPP || errno == ENOSYS) return 0; /* no reservation on this file system */
    return errno;
#else
    fstore_t st = {F_ALLOCATECONTIG, F_PEOFPOSMODE, 0, (off_t)len, 0};
    if (fcntl(fd, F_PREALLOCATE, &st) == -1) {
        st.fst_flags = F_ALLOCATEALL;
        if (fcntl(fd, F_PREALLOCATE, &st) == -1) {
            /* A volume that cannot preallocate (FAT, SMB, NFS; APFS has answered EINVAL) just gets
               no reservation, as Linux does for EOPNOTSUPP; any other error is one. */
            if (errno == ENOTSUP || errno == EOPNOTSUPP || errno == EINVAL) return 0;
            return errno;
        }
    }
    (void)offset;
    return 0;
#endif
}

int sb_datasync(int fd) {
#ifdef __linux__
    return fdatasync(fd);
#else
    return fsync(fd);
#endif
}
