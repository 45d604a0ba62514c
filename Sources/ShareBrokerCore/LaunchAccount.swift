// Who an app launched on demand runs as. A broker of one user (the usual case) starts every
// launch command as itself. A broker running as root, serving other users' apps, starts an app
// as the user its manifest names (`launchUser`), or else as the first user of its `uids` other
// than root (the users the app could say hello as): never as root by accident. Whoever it runs
// as, a program someone else could change is not run (`launchProgramProblem`).

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
        let found = withEntryBuffer { buf, size -> (Int32, LaunchAccount?) in
            var pwd = passwd()
            var result: UnsafeMutablePointer<passwd>? = nil
            let rc: Int32
            if let uid {
                rc = getpwuid_r(uid, &pwd, buf, size, &result)
            } else {
                rc = getpwnam_r(spec ?? "", &pwd, buf, size, &result)
            }
            return (rc, result.map { account($0.pointee) })
        }
        return found ?? nil
    }

    /// Runs a reentrant lookup in the user or group database (`getpwnam_r`, `getgrgid_r`, ...)
    /// with a buffer for the entry's strings: 16 KiB, and 1 MiB when the entry does not fit
    /// (ERANGE). `lookup` gets the buffer and its size and returns the call's result code and
    /// what it made of the entry; nil when even 1 MiB was too small.
    static func withEntryBuffer<T>(_ lookup: (UnsafeMutablePointer<CChar>, Int) -> (Int32, T)) -> T? {
        for size in [16 * 1024, 1 << 20] {
            var buffer = [CChar](repeating: 0, count: size)
            let (rc, value) = buffer.withUnsafeMutableBufferPointer { lookup($0.baseAddress!, $0.count) }
            if rc != ERANGE { return value }
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
        // (not root's PATH: its directories are no business of the user's, and a program name
        // in `launch` must not be found in them)
        var env = brokerEnvironment.filter { v in
            v.hasPrefix("LANG=") || v.hasPrefix("LANGUAGE=") || v.hasPrefix("LC_") || v.hasPrefix("TZ=")
        }
        env += ["PATH=" + LaunchAccount.defaultPath, "HOME=\(home)", "USER=\(name)", "LOGNAME=\(name)", "SHELL=\(shell)"]
        var st = stat()
        let runtime = "/run/user/\(uid)"
        if lstat(runtime, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == uid {
            env.append("XDG_RUNTIME_DIR=\(runtime)")
        }
        return env + extra
    }

    /// The search path of an app launched as another user (as `login` and `su` set it), and of
    /// one launched as the broker's user when the broker has none.
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

/// What a launch needs, taken from the broker's state on the loop for the start off it.
struct LaunchPlan: Sendable {
    var app: String
    var argv: [String]
    var launchUser: String?
    var uids: [UInt32]?
    var socketPath: String
    var stateDirectory: String
    /// Lets the loop call the start off (a reload changed the launch, the broker stops).
    let ticket: LaunchTicket

    /// The launch as the manifests said it when the start was decided (compared with theirs now).
    var spec: Broker.LaunchSpec { Broker.LaunchSpec(launch: argv, launchUser: launchUser, uids: uids) }
}

/// A launch being started off the loop, which the loop may call off: the start looks before it
/// spawns, so a reload that changed the launch, or the broker stopping, starts nothing (a spawn
/// already under way goes on: `finishLaunch` stops what a reload replaced).
final class LaunchTicket: @unchecked Sendable {  // `calledOff` guarded by `lock`
    private let lock = Lock()
    private var calledOff = false

    func callOff() { lock.withLock { calledOff = true } }

    var isCalledOff: Bool { lock.withLock { calledOff } }
}

/// A launch that started: the child, the account it runs as (nil: the broker's user), and what
/// keeps that account from the socket (logged as a warning).
struct StartedLaunch: Sendable {
    var pid: Int32
    var account: LaunchAccount?
    var socketProblem: String?
}

typealias LaunchOutcome = Result<StartedLaunch, LaunchFailure>

/// Carries a launch's outcome from the worker thread that started it to the loop (read there
/// after the pool reported the job finished).
final class LaunchJob: @unchecked Sendable {
    var outcome: LaunchOutcome? = nil
}

extension Broker {
    /// The account `app`'s launch command runs as, when that is not the broker's own user: its
    /// manifest's `launchUser`; else, for a broker running as root, the first user of its `uids`
    /// other than root (root listed there only lets root's processes act as the app too). Fails
    /// for a user the system does not know, and for another user when the broker is not root (it
    /// could not switch to them).
    func launchAccount(for app: String) throws(LaunchFailure) -> LaunchAccount? {
        guard let manifest = registry.app(app) else { return nil }
        return try Broker.launchAccount(launchUser: manifest.launchUser, uids: manifest.uids)
    }

    /// `launchAccount(for:)` of a manifest's `launchUser` and `uids` (looks the user up: may wait
    /// for the system's user database, a directory service among them).
    static func launchAccount(launchUser: String?, uids: [UInt32]?) throws(LaunchFailure) -> LaunchAccount? {
        let me = getuid()
        let wanted: String
        let source: String
        if let user = launchUser {
            (wanted, source) = (user, "its manifest's launchUser")
        } else if me == 0, let first = uids?.first(where: { $0 != 0 }) {
            (wanted, source) = (String(first), "the first user of its manifest's uids")
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

extension Broker {
    /// What makes running `argv` as `uid` unsafe: its program (looked up in `path` when its name
    /// has no '/'; a relative name is taken from `workingDirectory`, where the child runs), or
    /// anything on the way to it, that someone other than that user and root could change: a
    /// directory or the file owned by another user, or writable by everyone or by a group
    /// someone else is in (a sticky directory excepted), or a symbolic link of another user's,
    /// anywhere along the chain of links. The same rule as for manifests, which are refused
    /// when another user could write them. It fails closed: a program that cannot be found, or
    /// a step that cannot be looked at, is a problem too (else one missing at the check could
    /// be put back before the exec). Only the program is checked: a script an interpreter is
    /// given as an argument is the manifest writer's to keep safe. `primaryGroup`: the user's,
    /// whose writing is theirs when no one else is in it.
    static func launchProgramProblem(
        _ argv: [String], uid: uid_t, primaryGroup: gid_t, path: String, workingDirectory: String
    ) -> String? {
        guard let first = argv.first, !first.isEmpty else { return "the launch command is empty" }
        func absolute(_ p: String) -> String {
            p.hasPrefix("/") ? p : (workingDirectory.hasSuffix("/") ? workingDirectory : workingDirectory + "/") + p
        }
        if first.contains("/") {
            let check = checkedChain(absolute(first), uid: uid, primaryGroup: primaryGroup)
            return check.missing ? "\(absolute(first)) does not exist" : check.problem
        }
        // A name: the first entry of the search path that holds it decides, and every entry
        // before it must be safe too (someone who could write one could put the name there).
        for dir in path.split(separator: ":", omittingEmptySubsequences: false) {
            let entry = absolute(dir.isEmpty ? "." : String(dir))
            let dirCheck = checkedChain(entry, uid: uid, primaryGroup: primaryGroup)
            if dirCheck.missing { continue }
            if let problem = dirCheck.problem { return "the search path entry \(entry): \(problem)" }
            let candidate = entry + "/" + first
            let check = checkedChain(candidate, uid: uid, primaryGroup: primaryGroup)
            if check.missing { continue }
            return check.problem
        }
        return "'\(first)' is in no directory of the search path (\(path))"
    }

    /// Walks `path` one component at a time, following symbolic links by hand (at most 40), and
    /// checks every directory passed, every link and the file reached. `missing`: the path
    /// leads nowhere (what it passed is safe).
    static func checkedChain(_ path: String, uid: uid_t, primaryGroup: gid_t) -> (problem: String?, missing: Bool) {
        func trusted(_ owner: uid_t) -> Bool { owner == 0 || owner == uid }
        func unsafe(_ path: String, _ st: stat) -> String? {
            if !trusted(st.st_uid) { return "\(path) belongs to uid \(st.st_uid)" }
            let isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
            let sticky = isDirectory && st.st_mode & S_ISVTX != 0
            if st.st_mode & 0o002 != 0 && !sticky { return "\(path) is writable by every user" }
            if st.st_mode & 0o020 != 0 && !sticky && !groupIsUsersAlone(st.st_gid, uid: uid, primaryGroup: primaryGroup) {
                return "\(path) is writable by its group (gid \(st.st_gid)), which is not the user's own"
            }
            return nil
        }
        var pending = path.split(separator: "/").map(String.init)
        var current = "/"
        var links = 0
        var st = stat()
        guard lstat("/", &st) == 0 else { return ("/ cannot be looked at", false) }
        if let why = unsafe("/", st) { return (why, false) }
        while !pending.isEmpty {
            let part = pending.removeFirst()
            if part == "." || part.isEmpty { continue }
            if part == ".." {
                current = current == "/" ? "/" : String(current[..<(current.lastIndex(of: "/") ?? current.startIndex)])
                if current.isEmpty { current = "/" }
                continue
            }
            let next = current == "/" ? "/" + part : current + "/" + part
            guard lstat(next, &st) == 0 else {
                let e = errno
                if e == ENOENT || e == ENOTDIR { return (nil, true) }
                return ("\(next) cannot be looked at: \(String(cString: strerror(e)))", false)
            }
            if (st.st_mode & S_IFMT) == S_IFLNK {
                if !trusted(st.st_uid) { return ("\(next) is a symbolic link that belongs to uid \(st.st_uid)", false) }
                links += 1
                guard links <= 40 else { return ("\(path) goes through more than 40 symbolic links", false) }
                var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
                let n = readlink(next, &buf, buf.count - 1)
                guard n > 0 else { return ("\(next) cannot be read: \(String(cString: strerror(errno)))", false) }
                let target = String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                pending = target.split(separator: "/").map(String.init) + pending
                if target.hasPrefix("/") { current = "/" }
                continue
            }
            if let why = unsafe(next, st) { return (why, false) }
            current = next
        }
        return (nil, false)
    }

    /// `launchProgramProblem` for a launch as `account` (nil: the broker's user, in the broker's
    /// working directory and with its search path).
    static func launchProgramProblem(_ argv: [String], account: LaunchAccount?) -> String? {
        var cwd = "/"
        if account == nil, let c = getcwd(nil, 0) {
            cwd = String(cString: c)
            free(c)
        }
        let path = account == nil ? (ProcessInfoLite.env("PATH") ?? LaunchAccount.defaultPath) : LaunchAccount.defaultPath
        // (the child of a launch as another user runs in their home, or in / when it cannot)
        let home = account.map { FileIO.isPlainDirectory($0.home) ? $0.home : "/" } ?? cwd
        return Broker.launchProgramProblem(
            argv, uid: account?.uid ?? getuid(), primaryGroup: account?.gid ?? getgid(), path: path, workingDirectory: home)
    }

    /// What is wrong with `app`'s launch, said when the manifests are loaded (a reload that fixes
    /// it also clears the launch's backoff): a launch user the system does not know (or another
    /// user for a broker that is not root), one the app's `uids` do not admit (it could never
    /// say hello), one who cannot reach the socket, a program someone else could change.
    /// Looks users up and walks the file system: run off the loop (`startLaunchChecks`) once
    /// clients are served. `socketPath`: the broker's socket.
    static func launchWarnings(_ app: AppManifest, socketPath: String) -> [String] {
        guard let argv = app.launch, !argv.isEmpty else { return [] }
        let account: LaunchAccount?
        do { account = try launchAccount(launchUser: app.launchUser, uids: app.uids) } catch { return [error.message] }
        var out: [String] = []
        let uid = account?.uid ?? getuid()
        // (without uids, the broker's user and root are admitted)
        if let uids = app.uids, !uids.contains(uid) {
            out.append(
                "it is launched as \(account?.name ?? "the broker's user") (uid \(uid)), whom its uids do not admit: the app could never say hello (give launchUser one of them)")
        } else if app.uids == nil, !Broker.isBrokersOwnUID(uid) {
            out.append(
                "it is launched as \(account?.name ?? "uid \(uid)") (uid \(uid)), whom the manifest does not admit (without uids, only the broker's user may act as the app): the app could never say hello (list \(uid) in its uids)")
        }
        if let account, let problem = account.socketProblem(socketPath) {
            out.append("it is launched as \(account.name), who cannot reach the socket: \(problem) (see sharebroker serve --socket-mode and --socket-group)")
        }
        if let why = Broker.launchProgramProblem(argv, account: account) {
            out.append("its launch program is not run: \(why)")
        }
        return out
    }
}
