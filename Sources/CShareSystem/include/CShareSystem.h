// C shim for the few system calls Swift's Glibc/Darwin modules do not expose (epoll, ucred,
// async-signal-safe signal forwarding into a pipe). Everything here is a thin wrapper.
#ifndef CSHARESYSTEM_H
#define CSHARESYSTEM_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Readiness bits used by the poller, independent of epoll/poll constants.
enum { SB_READABLE = 1, SB_WRITABLE = 2, SB_HANGUP = 4, SB_ERROR = 8 };

/// One ready descriptor: the token given at registration and readiness bits.
typedef struct sb_event { uint64_t token; uint32_t events; } sb_event;

/// Creates a poller (epoll on Linux). Returns the fd or -1 with errno.
int sb_poller_create(void);
/// Adds fd with interest bits (SB_READABLE | SB_WRITABLE) and a token. 0 or -1/errno.
int sb_poller_add(int pfd, int fd, uint32_t interest, uint64_t token);
/// Changes interest bits of a registered fd.
int sb_poller_modify(int pfd, int fd, uint32_t interest, uint64_t token);
/// Removes fd.
int sb_poller_remove(int pfd, int fd);
/// Waits up to timeout_ns nanoseconds (-1: forever; at least millisecond precision everywhere)
/// for events; returns count or -1/errno.
int sb_poller_wait_ns(int pfd, sb_event *events, int max_events, long long timeout_ns);
/* 1 when sb_poller_wait_ns keeps sub-millisecond timeouts (probes epoll_pwait2 once), else 0. */
int sb_poller_precise(int pfd);
/* Whether nanosecond timeouts still hold, without a system call (epoll_pwait2 can be refused
 * after start-up, e.g. by a seccomp filter installed later): the flag sb_poller_precise set. */
int sb_poller_still_precise(void);
/* Tests only: pretend epoll_pwait2 was refused (0) or is available again (1). */
void sb_poller_set_precise_for_testing(int on);

/// Installs handlers for the given signals that write the signal number as one byte to write_fd
/// (non-blocking). SIGPIPE is set to ignored. Returns 0 or -1/errno.
int sb_signal_forward(int write_fd, const int *signals, int count);
/// Restores default dispositions for the given signals.
void sb_signal_default(const int *signals, int count);

/// Peer credentials of a connected Unix socket. Returns 0 or -1/errno. pid may be -1 if unknown.
int sb_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// on != 0: asks the kernel to attach the writing process's credentials to what is sent to this
/// socket (and, on a listening socket, to the connections it accepts); 0: stops it. SO_PASSCRED on
/// Linux. 0, or -1/errno; -1/ENOTSUP elsewhere when turning it on.
int sb_set_passcred(int fd, int on);

/// read(2) on a socket with SO_PASSCRED: *writer_pid gets the pid of the process that wrote the
/// bytes read (SCM_CREDENTIALS; the kernel never returns bytes of two writers in one call), -1
/// when none came with them (or elsewhere than Linux). Returns what read(2) would.
long sb_read_with_writer(int fd, void *buf, unsigned long len, pid_t *writer_pid);

/// The file system type (statfs f_type) of what `fd` is open on; -1 when unknown or not Linux.
long sb_fs_type(int fd);

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit or -1.
long sb_raise_nofile_limit(void);

/// Creates a non-blocking, close-on-exec pipe. 0 or -1/errno.
int sb_pipe_nonblocking(int fds[2]);

/// accept4 with SOCK_NONBLOCK|SOCK_CLOEXEC (accept + fcntl elsewhere).
int sb_accept_nonblocking(int fd);
/// The process environment (environ; _NSGetEnviron() on Apple platforms, where Swift cannot see environ).
char **sb_environ(void);
/// The path of the executable `pid` runs (/proc/PID/exe on Linux, proc_pidpath on Apple): its length, or -1.
int sb_executable_path(int pid, char *buf, int size);

/// Spawns argv[0] (PATH searched) detached in a new session, stdin/stdout to /dev/null, stderr to
/// err_fd (or /dev/null when -1), with envp. Returns the child pid or -1/errno.
pid_t sb_spawn_detached(const char *const argv[], const char *const envp[], int err_fd);

/// The groups `user` is in, `gid` (their primary group) first: the count written to `groups`
/// (at most `max`), or -1 when there are more than `max`.
int sb_user_groups(const char *user, gid_t gid, gid_t *groups, int max);

/// Like sb_spawn_detached, but the child first takes the identity of `uid`/`gid` with the
/// supplementary `groups`, then changes to `dir` ("/" when it cannot): how a broker running as
/// root launches an app as its user. Without a '/' in argv[0] each entry of `path` is tried in
/// turn, as the new user, as execvp does. Returns the child pid, or -1/errno, the errno of the
/// step that failed in the child (setgroups, setgid, setuid, exec), reported through a
/// close-on-exec pipe: from its setuid on waited for `wait_ms` at most (a child that has not exec'd by then, one the
/// user stopped, say, counts as started). Descriptors from 3 up are not passed to the child.
pid_t sb_spawn_as_user(const char *const argv[], const char *const envp[], int err_fd, uid_t uid, gid_t gid,
                       const gid_t *groups, int ngroups, const char *dir, const char *path, int wait_ms);

/// Reads the resident set size (bytes) and its peak of a process from /proc, or -1.
long sb_process_rss(pid_t pid, long *peak);

/// CRC-32C (Castagnoli) of len bytes, continuing from crc (start with 0).
uint32_t sb_crc32c(uint32_t crc, const void *buf, size_t len);

/// Reserves disk space for [offset, offset+len) of fd (posix_fallocate / F_PREALLOCATE).
/// Returns 0 or an errno value (ENOSPC when the disk is full).
int sb_preallocate(int fd, long long offset, long long len);

/// fdatasync where available, fsync elsewhere (F_FULLFSYNC is not used). 0 or -1/errno.
int sb_datasync(int fd);

/// Fills buf with len bytes from the kernel's CSPRNG (getrandom / arc4random_buf). 0 or -1.
int sb_random(void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
