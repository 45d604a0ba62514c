// AF_UNIX stream sockets: listening (with the live-broker / stale-file rule), connecting,
// accepting, and peer credentials. `sun_path` is short (~104-108 bytes): paths are checked.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import CShareSystem

/// Peer credentials of a connection, from the kernel (SO_PEERCRED / getpeereid).
public struct PeerCredentials: Sendable, Equatable {
    /// Process id, or -1 when the platform does not say.
    public var pid: Int32
    /// User id.
    public var uid: UInt32
    /// Group id.
    public var gid: UInt32

    /// Creates credentials (the kernel's, or a test's).
    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// Unix-domain stream socket helpers.
public enum UnixSocket {
    /// Why a listening socket could not be set up.
    public enum ListenError: Error, Sendable, CustomStringConvertible {
        /// Another process answers on the path.
        case alreadyRunning(path: String)
        /// The path exists and is not a socket: it is never removed.
        case notASocket(path: String)
        /// The path does not fit in `sun_path`.
        case pathTooLong(path: String, max: Int)
        /// A system call failed.
        case system(SystemError, path: String)

        /// A message naming the path and the cause.
        public var description: String {
            switch self {
            case .alreadyRunning(let p): return "a broker is already listening on \(p)"
            case .notASocket(let p): return "\(p) exists and is not a socket; refusing to replace it"
            case .pathTooLong(let p, let max): return "socket path \(p) is longer than \(max) bytes"
            case .system(let e, let p): return "\(p): \(e)"
            }
        }
    }

    /// Turns off, for one accepted connection, the per-write credentials its listener asked for
    /// (`FD.readWithWriter` then reports no writer). Best effort.
    public static func stopNamingWriters(_ fd: Int32) { _ = sb_set_passcred(fd, 0) }

    /// Turns the per-write credentials on again for one connection (a session newly pinned).
    public static func startNamingWriters(_ fd: Int32) { _ = sb_set_passcred(fd, 1) }

    /// Largest path length `sun_path` holds (without the NUL).
    public static var maxPathLength: Int {
        MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1
    }

    static func withAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R? {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= maxPathLength else { return nil }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let len = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)! + bytes.count + 1)
        return withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, len) }
        }
    }

    static func newSocket() throws(SystemError) -> Int32 {
        #if canImport(Glibc)
            let fd = try retrying("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        #else
            let fd = try retrying("socket") { socket(AF_UNIX, SOCK_STREAM, 0) }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            // No MSG_NOSIGNAL here: writing to a peer that is gone must fail with EPIPE, not kill.
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return fd
    }

    /// Connects (blocking) to the socket at `path`; returns the descriptor. With `timeoutMillis`
    /// the wait for room in a listener's full queue ends after that long (with `EAGAIN`; a Unix
    /// socket's connect waits only for that): the socket's send timeout bounds it during the
    /// connect, and is cleared after it.
    public static func connect(path: String, timeoutMillis: Int?) throws(SystemError) -> Int32 {
        guard let timeoutMillis else { return try connect(path: path) }
        return try connect(path: path, sendTimeoutMillis: max(1, timeoutMillis))
    }

    /// Connects (blocking) to the socket at `path`; returns the descriptor.
    public static func connect(path: String) throws(SystemError) -> Int32 {
        try connect(path: path, sendTimeoutMillis: nil)
    }

    private static func setSendTimeout(_ fd: Int32, millis: Int) {
        var tv = timeval(tv_sec: millis / 1000, tv_usec: .init((millis % 1000) * 1000))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    private static func connect(path: String, sendTimeoutMillis: Int?) throws(SystemError) -> Int32 {
        let fd = try newSocket()
        if let sendTimeoutMillis { setSendTimeout(fd, millis: sendTimeoutMillis) }
        let r = withAddress(path) { addr, len -> Int32 in
            while true {
                #if canImport(Glibc)
                    let r = Glibc.connect(fd, addr, len)
                #else
                    let r = Darwin.connect(fd, addr, len)
                #endif
                if r == 0 { return 0 }
                if currentErrno() == EINTR { continue }
                return -1
            }
        }
        guard let r else {
            FD.close(fd)
            throw SystemError("connect", errno: ENAMETOOLONG)
        }
        if r != 0 {
            let e = currentErrno()
            FD.close(fd)
            // Linux answers ECONNREFUSED for a path that is no socket at all: say so.
            var st = stat()
            if e == ECONNREFUSED || e == ENOTSOCK, stat(path, &st) == 0, (st.st_mode & S_IFMT) != S_IFSOCK {
                let what = (st.st_mode & S_IFMT) == S_IFDIR ? "a directory" : "a file"
                throw SystemError("connect (\(path) is \(what), not a socket)", errno: ENOTSOCK)
            }
            if sendTimeoutMillis != nil && (e == EAGAIN || e == EWOULDBLOCK) {
                throw SystemError("connect (no room in the listener's queue within \(sendTimeoutMillis!) ms)", errno: e)
            }
            throw SystemError("connect", errno: e)
        }
        if sendTimeoutMillis != nil { setSendTimeout(fd, millis: 0) }
        return fd
    }

    /// True when something accepts connections on `path`.
    public static func isLive(path: String) -> Bool {
        guard let fd = try? connect(path: path) else { return false }
        FD.close(fd)
        return true
    }

    /// Creates a listening, non-blocking socket at `path` with permission `mode`, given to `group`
    /// when one is named.
    /// A live listener on the path → `.alreadyRunning`; a stale socket file is replaced;
    /// a non-socket file is never removed.
    public static func listen(path: String, mode: mode_t = 0o600, group: gid_t? = nil, backlog: Int32 = 1024) throws(ListenError) -> Int32 {
        guard path.utf8.count <= maxPathLength else { throw .pathTooLong(path: path, max: maxPathLength) }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else { throw .notASocket(path: path) }
            if isLive(path: path) { throw .alreadyRunning(path: path) }
            unlink(path)
        }
        let fd: Int32
        do { fd = try newSocket() } catch { throw .system(error, path: path) }
        // Accepted connections inherit it: each read can name the process that wrote the bytes
        // (see `FD.readWithWriter`). Best effort (Linux only).
        _ = sb_set_passcred(fd, 1)
        // Bind with a restrictive umask so the socket never exists with looser permissions.
        let oldMask = umask(0o777 & ~mode)
        let r = withAddress(path) { addr, len in bind(fd, addr, len) } ?? -1
        let bindErrno = currentErrno()
        umask(oldMask)
        if r != 0 {
            FD.close(fd)
            if bindErrno == EADDRINUSE, isLive(path: path) { throw .alreadyRunning(path: path) }
            throw .system(SystemError("bind", errno: bindErrno), path: path)
        }
        // (No one connects before `listen` below: the group and the mode are set by then.)
        if let group, lchown(path, uid_t.max, group) != 0 {
            let e = currentErrno()
            FD.close(fd)
            unlink(path)
            throw .system(SystemError("chown to group \(group)", errno: e), path: path)
        }
        chmod(path, mode)
        #if canImport(Glibc)
            let lr = Glibc.listen(fd, backlog)
        #else
            let lr = Darwin.listen(fd, backlog)
        #endif
        if lr != 0 {
            let e = currentErrno()
            FD.close(fd)
            unlink(path)
            throw .system(SystemError("listen", errno: e), path: path)
        }
        do { try FD.setNonBlocking(fd) } catch {
            FD.close(fd)
            throw .system(error, path: path)
        }
        return fd
    }

    /// Accepts one connection, non-blocking and close-on-exec (`accept4`).
    public static func accept(_ listener: Int32) throws(SystemError) -> IOResult<Int32> {
        try nonBlocking("accept4") { sb_accept_nonblocking(listener) }
    }

    /// The peer's credentials, or nil when the kernel does not say.
    public static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var pid: pid_t = -1
        var uid: uid_t = 0
        var gid: gid_t = 0
        guard sb_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return nil }
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }
}

/// Signals delivered into the loop through a self-pipe: the handler writes the signal number.
public final class SignalPipe {
    /// Read end: becomes readable when a signal arrived.
    public let readFD: Int32
    private let writeFD: Int32
    private let signals: [Int32]

    /// Installs forwarding for `signals` (SIGPIPE is ignored as well).
    public init(signals: [Int32]) throws(SystemError) {
        (readFD, writeFD) = try FD.pipe()
        self.signals = signals
        let r = signals.withUnsafeBufferPointer { sb_signal_forward(writeFD, $0.baseAddress, Int32($0.count)) }
        if r != 0 { throw SystemError("sigaction", errno: currentErrno()) }
    }

    /// Drains the pipe and returns the signals received, in order.
    public func drain() -> [Int32] {
        var out: [Int32] = []
        var buf = [UInt8](repeating: 0, count: 64)
        while true {
            let n = buf.withUnsafeMutableBytes { b in
                #if canImport(Glibc)
                    Glibc.read(readFD, b.baseAddress, b.count)
                #else
                    Darwin.read(readFD, b.baseAddress, b.count)
                #endif
            }
            if n <= 0 { break }
            out.append(contentsOf: buf[0..<n].map { Int32($0) })
        }
        return out
    }

    /// Restores default signal handling and closes the pipe.
    public func close() {
        signals.withUnsafeBufferPointer { sb_signal_default($0.baseAddress, Int32($0.count)) }
        FD.close(readFD)
        FD.close(writeFD)
    }
}

/// Default locations of the socket and the state directory, as the contract fixes them.
public enum DefaultPaths {
    /// `$SHAREBROKER_SOCKET`, else `$XDG_RUNTIME_DIR/sharebroker.sock`, else `TMPDIR/sharebroker-UID/sharebroker.sock`.
    public static func socket() -> String {
        if let s = ProcessInfoLite.env("SHAREBROKER_SOCKET") { return s }
        if let d = xdg("XDG_RUNTIME_DIR") { return d + "/sharebroker.sock" }
        return privateTempDirectory() + "/sharebroker.sock"
    }

    /// An XDG base directory variable: set, not empty and absolute ("If an implementation
    /// encounters a relative path in any of these variables it should consider the path invalid
    /// and ignore it", the XDG Base Directory Specification).
    static func xdg(_ name: String) -> String? {
        guard let d = ProcessInfoLite.env(name), d.hasPrefix("/") else { return nil }
        return d
    }

    /// The private 0700 directory under the system temporary directory used without XDG_RUNTIME_DIR.
    public static func privateTempDirectory() -> String {
        var tmp = ProcessInfoLite.env("TMPDIR") ?? "/tmp"
        while tmp.count > 1 && tmp.hasSuffix("/") { tmp.removeLast() }
        return "\(tmp)/sharebroker-\(getuid())"
    }

    /// `$SHAREBROKER_STATE`, else `$XDG_STATE_HOME/sharebroker`, else `~/.local/state/sharebroker`
    /// (the home directory from `$HOME`, else the user's password entry: never a shared one).
    public static func state() -> String {
        if let s = ProcessInfoLite.env("SHAREBROKER_STATE") { return s }
        if let d = xdg("XDG_STATE_HOME") { return d + "/sharebroker" }
        return homeDirectory() + "/.local/state/sharebroker"
    }

    /// `$HOME`, else the home directory of the user's password entry (a service started without
    /// `HOME`), else `/` — never a directory other users share, such as `/tmp`.
    public static func homeDirectory() -> String {
        if let h = ProcessInfoLite.env("HOME") { return h }
        if let pw = getpwuid(getuid()), let dir = pw.pointee.pw_dir {
            let h = String(cString: dir)
            if !h.isEmpty { return h }
        }
        return "/"
    }

    /// Creates `path` and missing parents; new directories get `mode`. Existing ones are left as they are.
    /// Returns the directories it created, outermost first.
    @discardableResult
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(SystemError) -> [String] {
        var current = path.hasPrefix("/") ? "" : "."
        var created: [String] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            current += "/" + part
            if mkdir(current, mode) != 0 {
                let e = currentErrno()
                if e == EEXIST { continue }
                throw SystemError("mkdir \(current)", errno: e)
            }
            created.append(current)
        }
        return created
    }

    /// The directory holding `path` ("/" for a top-level one, "." for a bare name).
    public static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Makes the entries of the directories that hold `directories` durable (fsync of each
    /// parent, innermost first), so that a directory just created survives a power cut, not
    /// only a crash of the process; the errno of the first open or fsync that failed, with its
    /// path, or nil.
    public static func syncParents(of directories: [String]) -> (path: String, errno: Int32)? {
        var done = Set<String>()
        for d in directories.reversed() {
            let p = parent(of: d)
            guard done.insert(p).inserted else { continue }
            if let e = FD.syncDirectory(p) { return (p, e) }
        }
        return nil
    }
}
