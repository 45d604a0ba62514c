// Small blocking file helpers for configuration files (manifests, association documents).

import CShareSystem
#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reading files and directories.
public enum FileIO {
    /// Reads a whole regular file (not following a final symlink unless `followSymlinks`),
    /// refusing files over `limit` bytes.
    public static func readFile(_ path: String, limit: Int = 16 * 1024 * 1024, followSymlinks: Bool = false) throws(SystemError) -> [UInt8] {
        // (O_NONBLOCK: a FIFO is opened without waiting for a writer, then refused below as not a
        // regular file; on a regular file it changes nothing)
        let fd = try retrying("open \(path)") { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (followSymlinks ? 0 : O_NOFOLLOW)) }
        defer { FD.close(fd) }
        var st = stat()
        _ = try retrying("fstat \(path)") { fstat(fd, &st) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw SystemError("open \(path) (not a regular file)", errno: EINVAL) }
        guard Int(st.st_size) <= limit else { throw SystemError("read \(path) (file larger than \(limit) bytes)", errno: EFBIG) }
        var out: [UInt8] = []
        out.reserveCapacity(Int(st.st_size))
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = try buf.withUnsafeMutableBytes { b in
                Result { () throws(SystemError) -> Int in try FD.readBlocking(fd, into: b) }
            }.get()
            if n == 0 { break }
            out.append(contentsOf: buf[0..<n])
            if out.count > limit { throw SystemError("read \(path) (file larger than \(limit) bytes)", errno: EFBIG) }
        }
        return out
    }

    /// `path` made absolute against the current directory (leading `./` segments dropped);
    /// unchanged when it is absolute already or the current directory cannot be read.
    public static func absolutePath(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buf, buf.count) != nil else { return path }
        var cwd = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if !cwd.hasSuffix("/") { cwd += "/" }
        var rest = Substring(path)
        while rest.hasPrefix("./") { rest = rest.dropFirst(2).drop { $0 == "/" } }
        return rest.isEmpty || rest == "." ? String(cwd.dropLast(cwd.count > 1 ? 1 : 0)) : cwd + rest
    }

    /// Names in a directory (without `.` and `..`), sorted; nil (with `errno` set) when it cannot
    /// be opened or a `readdir` fails partway: a partial list is never returned as the whole.
    public static func listDirectory(_ path: String) -> [String]? {
        listDirectory(path, readEntry: { readdir($0) })
    }

    /// What `opendir` returns.
    #if canImport(Darwin)
        typealias DirectoryStream = UnsafeMutablePointer<DIR>
    #else
        typealias DirectoryStream = OpaquePointer
    #endif

    /// `listDirectory` reading each entry with `readEntry` (`readdir`; a test's stand-in may fail
    /// partway, returning nil with `errno` set).
    static func listDirectory(
        _ path: String, readEntry: (DirectoryStream) -> UnsafeMutablePointer<dirent>?
    ) -> [String]? {
        guard let dir = opendir(path) else { return nil }
        defer {
            let err = errno
            closedir(dir)
            errno = err
        }
        var names: [String] = []
        // The name is read in place, up to its NUL: a record `readdir` returns may be shorter
        // than `dirent` (copying `d_name` whole read past its end).
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 0
        while true {
            errno = 0  // (readdir's end and its failure both return NULL: errno tells them apart)
            guard let entry = readEntry(dir) else { break }
            let cName = (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self)
            let name = String(decoding: UnsafeRawBufferPointer(start: cName, count: strlen(cName)), as: UTF8.self)
            if name != "." && name != ".." { names.append(name) }
        }
        if errno != 0 { return nil }
        return names.sorted()
    }

    /// The file system type (`statfs` f_type) of what `fd` is open on; -1 when unknown (and
    /// everywhere but Linux).
    public static func fileSystemType(_ fd: Int32) -> Int { sb_fs_type(fd) }

    /// The file type bits (`S_IFMT` of `st_mode`) of `path`, following a final symlink when
    /// `followSymlinks`, or the error its `stat` failed with (`errno` tells a path that is gone,
    /// ENOENT or ENOTDIR, from one that cannot be looked at now).
    public static func fileType(_ path: String, followSymlinks: Bool) -> Result<mode_t, SystemError> {
        var st = stat()
        let rc = followSymlinks ? stat(path, &st) : lstat(path, &st)
        return rc == 0 ? .success(st.st_mode & S_IFMT) : .failure(SystemError("stat \(path)", errno: currentErrno()))
    }

    /// True when `path` is a directory itself, not a symlink to one (`lstat`).
    public static func isPlainDirectory(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// True when `path` exists (without following a final symlink).
    public static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// The inode of a path, or nil.
    public static func inode(_ path: String) -> UInt64? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return UInt64(st.st_ino)
    }

    /// Removes a file; errors ignored.
    public static func unlinkFile(_ path: String) { unlink(path) }

    /// Writes `bytes` to `path` atomically (temporary file, fsync, rename, fsync of the directory).
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o600) throws(SystemError) {
        let tmp = path + ".tmp-\(getpid())"
        let fd = try retrying("open \(tmp)") { open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode) }
        do {
            try FD.writeAll(fd, bytes)
            _ = try retrying("fsync \(tmp)") { fsync(fd) }
        } catch {
            FD.close(fd)
            unlink(tmp)
            throw error
        }
        FD.close(fd)
        if rename(tmp, path) != 0 {
            let e = currentErrno()
            unlink(tmp)
            throw SystemError("rename \(tmp)", errno: e)
        }
        var dir = path
        if let slash = dir.lastIndex(of: "/") { dir = String(dir[..<slash]) } else { dir = "." }
        if dir.isEmpty { dir = "/" }
        FD.syncDirectory(dir)
    }
}

/// Writing command output (stdout) and messages (stderr) for the command-line tools: whole
/// strings, retried on EINTR and partial writes, errors ignored (a closed pipe ends the output).
public enum Console {
    /// Writes `s` to standard output.
    public static func out(_ s: String) { try? FD.writeAll(1, Array(s.utf8)) }
    /// Writes `s` to standard error.
    public static func err(_ s: String) { try? FD.writeAll(2, Array(s.utf8)) }
}
