// Who an app launched on demand runs as. A broker of one user (the usual case) starts every
// launch command as itself. A broker running as root, serving other users' apps, starts an app
// as the user its manifest names (`launchUser`), or else as the first of its `uids` when they
// leave root out (the only users the app could say hello as): never as root by accident.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import CShareSystem
import ShareRouting
import ShareSystem

/// A user account a launch command runs as (not the broker's own).
struct LaunchAccount: Equatable {
    var uid: uid_t
    var gid: gid_t
    var name: String
    var home: String
    var shell: String
    /// Every group the user is in (the primary one included), as the system's database says.
    var groups: [gid_t]

    /// The account `spec` names, from the user database: a uid when it is all digits (a name
    /// only when no user has that uid), else a user name.
    static func lookUp(_ spec: String) -> LaunchAccount? {
        if let uid = UInt32(spec), uid != UInt32.max, let account = lookUp(uid: uid_t(uid), name: nil) { return account }
        return lookUp(uid: nil, name: spec)
    }

    /// The account of `uid`, or else of `name`.
    static func lookUp(uid: uid_t?, name spec: String?) -> LaunchAccount? {
        // (an entry longer than the buffer is ERANGE: tried again with a larger one)
        for size in [16 * 1024, 1 << 20] {
            var buffer = [CChar](repeating: 0, count: size)
            var rangeError = false
            let found = buffer.withUnsafeMutableBufferPointer { buf -> LaunchAccount? in
                var pwd = passwd()
                var result: UnsafeMutablePointer<passwd>? = nil
                let rc: Int32
                if let uid {
                    rc = getpwuid_r(uid, &pwd, buf.baseAddress!, buf.count, &result)
                } else {
                    rc = getpwnam_r(spec ?? "", &pwd, buf.baseAddress!, buf.count, &result)
                }
                rangeError = rc == ERANGE
                guard let p = result?.pointee else { return nil }
                return account(p)
            }
            if !rangeError { return found }
        }
        return nil
    }

    private static func account(_ p: passwd) -> LaunchAccount {
        let name = String(cString: p.pw_name)
        var result = LaunchAccount(
            uid: p.pw_uid, gid: p.pw_gid, name: name, home: p.pw_dir.map { String(cString: $0) } ?? "/",
            shell: p.pw_shell.map { String(cString: $0) } ?? "/bin/sh", groups: [p.pw_gid])
        for max in [256, 65_536] {
            var groups = [gid_t](repeating: 0, count: max)
            let n = groups.withUnsafeMutableBufferPointer { sb_user_groups(name, p.pw_gid, $0.baseAddress, Int32(max)) }
            if n >= 0 {
                result.groups = Array(groups[0..<Int(n)])
                break
            }
        }
        #if os(macOS)
            // (setgroups takes at most NGROUPS_MAX, 16, on macOS; admin users are often in more)
            result.groups = Array(result.groups.prefix(16))
        #endif
        return result
    }

    /// The environment the launch command gets: a login's, not the broker's (root's `HOME`,
    /// `XDG_RUNTIME_DIR` and the like would point the app at root's files): `PATH`, the locale
    /// and `TZ` kept from the broker's, `HOME`, `USER`, `LOGNAME` and `SHELL` of the account,
    /// its `XDG_RUNTIME_DIR` when `/run/user/UID` is its own, and the broker's variables.
    func environment(from brokerEnvironment: [String], extra: [String]) -> [String] {
        var env = brokerEnvironment.filter { v in
            v.hasPrefix("PATH=") || v.hasPrefix("LANG=") || v.hasPrefix("LANGUAGE=") || v.hasPrefix("LC_") || v.hasPrefix("TZ=")
        }
        if !env.contains(where: { $0.hasPrefix("PATH=") }) { env.append("PATH=" + LaunchAccount.defaultPath) }
        env += ["HOME=\(home)", "USER=\(name)", "LOGNAME=\(name)", "SHELL=\(shell)"]
        var st = stat()
        let runtime = "/run/user/\(uid)"
        if lstat(runtime, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == uid {
            env.append("XDG_RUNTIME_DIR=\(runtime)")
        }
        return env + extra
    }

    /// The search path when the broker has none (as `login` sets).
    static let defaultPath = "/usr/local/bin:/usr/bin:/bin"

    /// What stops this user from connecting to the socket at `path`: a directory on the way they
    /// may not pass, or the socket's mode. Nil when nothing does.
    func socketProblem(_ path: String) -> String? {
        func allows(_ st: stat, _ bits: UInt32) -> Bool {  // bits: 0o7 form (r=4, w=2, x=1)
            let mode = UInt32(st.st_mode)
            if st.st_uid == uid { return mode & (bits << 6) == bits << 6 }
            if groups.contains(st.st_gid) { return mode & (bits << 3) == bits << 3 }
            return mode & bits == bits
        }
        var st = stat()
        var walked = ""
        for part in [""] + path.split(separator: "/").dropLast().map(String.init) {
            walked = part.isEmpty ? "/" : (walked == "/" ? "/" + part : walked + "/" + part)
            guard stat(walked, &st) == 0 else { continue }
            if !allows(st, 0o1) {
                return "\(walked) (mode \(String(UInt32(st.st_mode) & 0o777, radix: 8))) does not let \(name) (uid \(uid)) through"
            }
        }
        guard stat(path, &st) == 0 else { return nil }
        if !allows(st, 0o2) {
            return "the socket (mode \(String(UInt32(st.st_mode) & 0o777, radix: 8)), owner uid \(st.st_uid), group \(st.st_gid)) does not let \(name) (uid \(uid)) connect"
        }
        return nil
    }
}

/// Why an app could not be launched (logged; the launch counts as failed and is retried with backoff).
struct LaunchFailure: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

extension Broker {
    /// The account `app`'s launch command runs as, when that is not the broker's own user: its
    /// manifest's `launchUser`; else, for a broker running as root, the first of its `uids` when
    /// they leave root out. Fails for a user the system does not know, and for another user when
    /// the broker is not root (it could not switch to them).
    func launchAccount(for app: String) throws(LaunchFailure) -> LaunchAccount? {
        guard let manifest = registry.app(app) else { return nil }
        let me = getuid()
        let wanted: String
        let source: String
        if let user = manifest.launchUser {
            (wanted, source) = (user, "its manifest's launchUser")
        } else if me == 0, let uids = manifest.uids, let first = uids.first, !uids.contains(0) {
            (wanted, source) = (String(first), "the first of its manifest's uids")
        } else {
            return nil
        }
        guard let account = LaunchAccount.lookUp(wanted) else {
            throw LaunchFailure("\(source), '\(wanted)', is no user this system knows")
        }
        if account.uid == me { return nil }
        guard me == 0 else {
            throw LaunchFailure(
                "\(source), '\(wanted)', is another user (uid \(account.uid)); only a broker running as root can start an app as another user")
        }
        return account
    }
}
