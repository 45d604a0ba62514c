// The one syscall helper: retries EINTR, reports EAGAIN as a value, wraps every other errno in
// `SystemError` naming the failing call. Plus small wrappers for the calls the broker uses.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import CShareSystem

/// A failed system call: the C function's name and its errno.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function that failed, e.g. `"bind"`.
    public var call: String
    /// The errno value.
    public var errno: Int32
    /// Creates an error.
    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }
    /// "bind: Address already in use (errno 98)".
    public var description: String { "\(call): \(String(cString: strerror(errno))) (errno \(errno))" }
}

/// The outcome of a non-blocking I/O call.
public enum IOResult<T> {
    /// The call did its work.
    case done(T)
    /// It would block (EAGAIN/EWOULDBLOCK): wait for readiness.
    case wouldBlock
}

/// Current errno.
@inline(__always) public func currentErrno() -> Int32 {
    #if canImport(Glibc)
        return Glibc.errno
    #else
        return Darwin.errno
    #endif
}

/// Runs `body` until it does not fail with EINTR; returns its non-negative result or throws.
@inline(__always)
public func retrying<T: BinaryInteger>(_ call: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let r = body()
        if r >= 0 { return r }
        let e = currentErrno()
        if e == EINTR { continue }
        throw SystemError(call, errno: e)
    }
}

/// Like `retrying` but reports EAGAIN/EWOULDBLOCK as `.wouldBlock`.
@inline(__always)
public func nonBlocking<T: BinaryInteger>(_ call: String, _ body: () -> T) throws(SystemError) -> IOResult<T> {
    while true {
        let r = body()
        if r >= 0 { return .done(r) }
        let e = currentErrno()
        if e == EINTR { continue }
        if e == EAGAIN || e == EWOULDBLOCK { return .wouldBlock }
        throw SystemError(call, errno: e)
    }
}

/// Thin wrappers over file-descriptor calls.
public enum FD {
    /// `close(2)`, ignoring errors (the descriptor is gone either way).
    public static func close(_ fd: Int32) {
        #if canImport(Glibc)
            _ = Glibc.close(fd)
        #else
            _ = Darwin.close(fd)
        #endif
    }

    /// fsync(2) of a directory, so that the entries created, renamed or removed in it are durable.
    /// Returns the errno of the open or fsync that failed (nil: done); callers for whom it is best
    /// effort ignore it, those who acknowledge what the entries hold must not.
    @discardableResult
    public static func syncDirectory(_ path: String) -> Int32? {
        #if canImport(Glibc)
            let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        #else
            let fd = Darwin.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        #endif
        guard fd >= 0 else { return currentErrno() }
        defer { close(fd) }
        do throws(SystemError) {
            _ = try retrying("fsync") { fsync(fd) }
            return nil
        } catch {
            return error.errno
        }
    }

    /// Non-blocking `read(2)` into a buffer; `.done(0)` means end of file.
    public static func read(_ fd: Int32, into buf: UnsafeMutableRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        try nonBlocking("read") {
            #if canImport(Glibc)
                Glibc.read(fd, buf.baseAddress, buf.count)
            #else
                Darwin.read(fd, buf.baseAddress, buf.count)
            #endif
        }
    }

    /// Non-blocking read of a socket with SO_PASSCRED, with the pid of the process that wrote the
    /// bytes (-1 when the kernel attached none, or on platforms without SCM_CREDENTIALS).
    public static func readWithWriter(_ fd: Int32, into buf: UnsafeMutableRawBufferPointer) throws(SystemError) -> (IOResult<Int>, Int32) {
        var pid: pid_t = -1
        let r = try nonBlocking("recvmsg") { sb_read_with_writer(fd, buf.baseAddress, UInt(buf.count), &pid) }
        switch r {
        case .wouldBlock: return (.wouldBlock, -1)
        case .done(let n): return (.done(Int(n)), Int32(pid))
        }
    }

    /// Non-blocking `write(2)` (MSG_NOSIGNAL-like: SIGPIPE is ignored process-wide by the broker).
    public static func write(_ fd: Int32, _ buf: UnsafeRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        try nonBlocking("write") {
            #if canImport(Glibc)
                Glibc.send(fd, buf.baseAddress, buf.count, Int32(MSG_NOSIGNAL))
            #else
                Darwin.write(fd, buf.baseAddress, buf.count)
            #endif
        }
    }

    /// Blocking write of all bytes to a file or pipe (`write(2)`).
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) {
        try writeAll(fd, bytes, socket: false)
    }

    /// Blocking send of all bytes to a socket (`send(2)` with MSG_NOSIGNAL: no SIGPIPE).
    public static func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) {
        try writeAll(fd, bytes, socket: true)
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], socket: Bool) throws(SystemError) {
        var failure: SystemError? = nil
        bytes.withUnsafeBytes { buf in
            var offset = 0
            while offset < buf.count {
                let n: Int
                #if canImport(Glibc)
                    if socket {
                        n = Glibc.send(fd, buf.baseAddress! + offset, buf.count - offset, Int32(MSG_NOSIGNAL))
                    } else {
                        n = Glibc.write(fd, buf.baseAddress! + offset, buf.count - offset)
                    }
                #else
                    n = Darwin.write(fd, buf.baseAddress! + offset, buf.count - offset)
                #endif
                if n >= 0 {
                    offset += n
                    continue
                }
                let e = currentErrno()
                if e == EINTR { continue }
                failure = SystemError(socket ? "send" : "write", errno: e)
                return
            }
        }
        if let failure { throw failure }
    }

    /// Blocking positional write of all of `buf` at `offset` (`pwrite(2)`, retried on EINTR and
    /// short writes); the descriptor's own offset is untouched.
    public static func pwriteAll(_ fd: Int32, _ buf: UnsafeRawBufferPointer, at offset: Int) throws(SystemError) {
        var done = 0
        try pwriteAll(fd, buf, at: offset, written: &done)
    }

    /// `pwriteAll`, counting in `done` the bytes written (also those before an error).
    public static func pwriteAll(_ fd: Int32, _ buf: UnsafeRawBufferPointer, at offset: Int, written done: inout Int) throws(SystemError) {
        while done < buf.count {
            let n = pwrite(fd, buf.baseAddress! + done, buf.count - done, off_t(offset + done))
            if n >= 0 {
                done += n
                continue
            }
            let e = currentErrno()
            if e == EINTR { continue }
            throw SystemError("pwrite", errno: e)
        }
    }

    /// Blocking read (for clients and tools); returns 0 at end of file.
    public static func readBlocking(_ fd: Int32, into buf: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try retrying("read") {
            #if canImport(Glibc)
                Glibc.read(fd, buf.baseAddress, buf.count)
            #else
                Darwin.read(fd, buf.baseAddress, buf.count)
            #endif
        }
    }

    /// Sets or clears O_NONBLOCK.
    public static func setNonBlocking(_ fd: Int32, _ on: Bool = true) throws(SystemError) {
        let flags = try retrying("fcntl") { fcntl(fd, F_GETFL) }
        _ = try retrying("fcntl") { fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) }
    }

    /// A non-blocking, close-on-exec pipe: (read end, write end).
    public static func pipe() throws(SystemError) -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        _ = try retrying("pipe") { sb_pipe_nonblocking(&fds) }
        return (fds[0], fds[1])
    }
}

/// Monotonic clock.
public enum Clock {
    /// Nanoseconds since an arbitrary fixed point (CLOCK_MONOTONIC).
    public static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
    /// Seconds since the Unix epoch, as a Double (wall clock).
    public static func wallSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// Process-level helpers.
public enum ProcessInfoLite {
    /// Raises the soft open-file limit to the hard limit; returns the limit in force.
    public static func raiseOpenFileLimit() -> Int { Int(sb_raise_nofile_limit()) }
    /// This process's id.
    public static var pid: Int32 { getpid() }
    /// The real user id.
    public static var uid: UInt32 { getuid() }
    /// Resident set size and peak of a process, in bytes (Linux; nil elsewhere).
    public static func rss(of pid: Int32) -> (current: Int, peak: Int)? {
        var peak = 0
        let r = sb_process_rss(pid, &peak)
        return r < 0 ? nil : (r, peak)
    }
    /// The executable a process runs (Linux: /proc/PID/exe; macOS: proc_pidpath), or nil when it
    /// cannot be told.
    public static func executablePath(of pid: Int32) -> String? {
        guard pid > 0 else { return nil }
        var buf = [CChar](repeating: 0, count: 4096)
        let n = Int(sb_executable_path(pid, &buf, Int32(buf.count)))
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// An environment variable, or nil when unset or empty.
    public static func env(_ name: String) -> String? {
        guard let p = getenv(name) else { return nil }
        let s = String(cString: p)
        return s.isEmpty ? nil : s
    }
}

/// The kernel's cryptographically secure random generator.
public enum SecureRandom {
    /// Fills `bytes` (getrandom on Linux, arc4random_buf on macOS); false if the kernel refused.
    public static func fill(_ bytes: inout [UInt8]) -> Bool {
        bytes.withUnsafeMutableBytes { sb_random($0.baseAddress, $0.count) == 0 }
    }
}
