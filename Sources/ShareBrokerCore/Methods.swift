// The method table as data (name, whether `hello` is required, allowed roles, handler) and the
// session methods: hello, rpc.discover, broker.status, apps.list, apps.reload.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareProtocol
import ShareRouting
import ShareSystem

/// One served method. A class: the table hands out one reference per request (and a connection
/// keeps the last one it called), not a copy of its name, roles and handler.
final class MethodSpec {
    /// The method name.
    let name: String
    /// Whether the session must have said `hello`.
    let needsHello: Bool
    /// Roles allowed (nil: any role after hello).
    let roles: Set<SessionRole>?
    /// `roles` as bits (`SessionRole.bit`; 0: any role): checked on every request without
    /// hashing the role's name, as `Set.contains` did.
    let roleMask: UInt8
    /// The handler.
    let handler: (Broker, Connection, Params) throws(RPCError) -> MethodResult

    convenience init(
        _ name: String, needsHello: Bool = true, roles: Set<SessionRole>? = nil,
        _ handler: @escaping (Broker, Connection, Params) throws(RPCError) -> JSONValue
    ) {
        self.init(name, needsHello: needsHello, roles: roles, encoding: { b, c, p throws(RPCError) in .value(try handler(b, c, p)) })
    }

    /// A method whose handler encodes its result itself (hot paths: no `JSONValue` tree).
    init(
        _ name: String, needsHello: Bool = true, roles: Set<SessionRole>? = nil,
        encoding handler: @escaping (Broker, Connection, Params) throws(RPCError) -> MethodResult
    ) {
        self.name = name
        self.needsHello = needsHello
        self.roles = roles
        self.roleMask = roles?.reduce(0) { $0 | $1.bit } ?? 0
        self.handler = handler
    }

    /// -32001 before hello or for a role not allowed.
    func authorize(_ conn: Connection) throws(RPCError) {
        guard needsHello else { return }
        guard let role = conn.role else {
            throw RPCError(.unauthorized, "Unauthorized: call 'hello' before '\(name)'")
        }
        if roleMask != 0 && roleMask & role.bit == 0 {
            let allowed = (roles ?? []).map(\.rawValue).sorted().joined(separator: " or ")
            throw RPCError(.unauthorized, "Unauthorized: '\(name)' is for role \(allowed), not \(role.rawValue)")
        }
    }
}

extension SessionRole {
    /// One bit per role, for `MethodSpec.roleMask`.
    var bit: UInt8 {
        switch self {
        case .app: return 1
        case .extension: return 2
        case .tool: return 4
        }
    }
}

/// Named params of a request with typed accessors that fail with -32602 naming the field.
struct Params {
    let object: JSONObject
    let method: String
    /// A share.send's params read without a tree (`object` is then empty): see `ShareSendParams`.
    let shareSend: ShareSendParams?

    init(_ raw: JSONValue?, method: String, shareSend: ShareSendParams? = nil) throws(RPCError) {
        self.method = method
        self.shareSend = shareSend
        switch raw {
        case nil: object = JSONObject()
        case .object(let o)?: object = o
        case .array(let a)? where a.isEmpty: object = JSONObject()
        default:
            throw RPCError.invalidParams("Invalid params: '\(method)' takes named params (an object)")
        }
    }

    subscript(key: String) -> JSONValue? {
        // Read without a tree, share.send's params are in `shareSend` only: its handler reads them there.
        assert(shareSend == nil, "share.send params read without a tree were looked up as '\(key)' in the (empty) tree")
        return object[key]
    }

    func string(_ key: String) throws(RPCError) -> String {
        // (a member set to null counts as left out: PROTOCOL, "params": null and null members)
        guard let v = self[key], !v.isNull else { throw .invalidParams("Invalid params: '\(key)' is required") }
        guard case .string(let s) = v else {
            throw .invalidParams("Invalid params: '\(key)' must be a string, got \(v.typeName)")
        }
        return s
    }

    func optionalString(_ key: String) throws(RPCError) -> String? {
        guard let v = self[key], !v.isNull else { return nil }
        guard case .string(let s) = v else {
            throw .invalidParams("Invalid params: '\(key)' must be a string, got \(v.typeName)")
        }
        return s
    }

    /// A non-negative integer, or nil when left out; -32602 for anything else or one past `max`.
    func optionalCount(_ key: String, max: Int = Int.max) throws(RPCError) -> Int? {
        guard let v = self[key], !v.isNull else { return nil }
        guard let n = v.intValue, n >= 0, n <= max else {
            throw .invalidParams("Invalid params: '\(key)' must be an integer from 0 to \(max), got \(v.compactText)")
        }
        return n
    }

    func optionalBool(_ key: String) throws(RPCError) -> Bool? {
        guard let v = self[key], !v.isNull else { return nil }
        guard case .bool(let b) = v else {
            throw .invalidParams("Invalid params: '\(key)' must be a boolean, got \(v.typeName)")
        }
        return b
    }
}

/// Compares two strings in time independent of where they differ.
func constantTimeEquals(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8)
    let y = Array(b.utf8)
    var diff = UInt8(x.count == y.count ? 0 : 1)
    let n = max(x.count, y.count)
    for i in 0..<n {
        let p = i < x.count ? x[i] : 0
        let q = i < y.count ? y[i] : 0
        diff |= p ^ q
    }
    return diff == 0
}

extension Broker {
    /// Every method the broker serves. `rpc.discover`'s document must list exactly these.
    static func methodTable() -> [String: MethodSpec] {
        let specs: [MethodSpec] = [
            MethodSpec("hello", needsHello: false) { b, c, p throws(RPCError) in try b.hello(c, p) },
            MethodSpec("rpc.discover", needsHello: false) { _, _, _ throws(RPCError) in try OpenRPC.document() },
            MethodSpec("broker.status", needsHello: false, encoding: { b, c, p throws(RPCError) in
                let verbose = try p.optionalBool("verbose") == true
                // Every connection's pid, uid and bundle ID: only for the broker's own user (and
                // root), whatever the socket's mode lets connect.
                if verbose, Broker.isOtherUser(c) {
                    throw RPCError(.unauthorized, "Unauthorized: broker.status {verbose: true} is for the broker's own user (uid \(ProcessInfoLite.uid)), not \(Broker.callerUID(c))")
                }
                // (another user, let in by the socket's mode, is not told the broker's pid and paths)
                return .encoded(b.encodedStatus(verbose: verbose, forOtherUser: Broker.isOtherUser(c)))
            }),
            MethodSpec("apps.list") { b, _, _ in b.appsListJSON },
            MethodSpec("apps.reload") { b, c, _ throws(RPCError) in
                // (another user, let in by the socket's mode, does not make the broker re-read its
                // files and retry every launch at will)
                if Broker.isOtherUser(c) {
                    throw RPCError(.unauthorized, "Unauthorized: apps.reload is for the broker's own user (uid \(ProcessInfoLite.uid)), not \(Broker.callerUID(c))")
                }
                b.reloadManifests(reason: "apps.reload")
                return b.answerOnceLaunchesChecked()
            },
        ]
        var table: [String: MethodSpec] = [:]
        for s in specs + eventMethods() + shareMethods() + defaultsMethods() { table[s.name] = s }
        return table
    }

    /// `apps.reload`'s answer, once the launches of the manifests loaded last are checked, off the
    /// loop (their warnings are part of the answer). Overtaken by another reload meanwhile, it
    /// waits for the checks of the manifests now loaded. A broker stopping first answers the
    /// list as loaded (`launchChecksRunning`): the reload itself was done.
    func answerOnceLaunchesChecked() -> MethodResult {
        let checks = launchChecksTask()
        return suspendRequest(
            work: checks.work,
            finish: { b, _ throws(RPCError) in
                // (overtaken: the checks of the manifests now loaded may be done already)
                checks.done() || !b.launchChecksRunning ? .value(b.appsListJSON) : b.answerOnceLaunchesChecked()
            },
            cancel: { _ in _ = checks.done() },  // (its connection closed)
            on: launchWorkers,
            atStop: { b, _ throws(RPCError) in .value(b.appsListJSON) })
    }

    /// `apps.list`: the registry's view plus association documents that failed to load (file, reason).
    var appsListJSON: JSONValue {
        guard case .object(var o) = registry.listJSON else { return registry.listJSON }
        if !launchIssues.isEmpty { o["warnings"] = .array((o["warnings"]?.arrayValue ?? []) + launchIssues.map(\.json)) }
        // (after a reload by SIGHUP: the launch warnings above are the previous manifests' until then)
        if launchChecksRunning { o["launchChecksRunning"] = true }
        o["associationErrors"] = .array(
            associationErrors.sorted(by: { $0.key < $1.key }).map { host, message in
                ["host": .string(host), "message": .string(message)]
            })
        return .object(o)
    }

    /// The names of every served method, sorted.
    public static var servedMethodNames: [String] { methodTable().keys.sorted() }

    func hello(_ conn: Connection, _ p: Params) throws(RPCError) -> JSONValue {
        let roleName = try p.string("role")
        guard let role = SessionRole(rawValue: roleName) else {
            throw .invalidParams("Invalid params: 'role' must be \"app\", \"extension\" or \"tool\", got \"\(roleName)\"")
        }
        let bundleID = try p.optionalString("bundleID")
        let token = try p.optionalString("token")
        if let current = conn.role {
            if current == role && (role == .tool || conn.bundleID == bundleID) {
                // The same identity again: answered only with the same credentials (the session
                // keeps what it has either way).
                if let bundleID, role != .tool { try checkToken(conn, bundleID, token) }
                return helloResult(conn)
            }
            throw RPCError(
                .unauthorized,
                "Unauthorized: this session already said hello as \(conn.identity); open a new connection for another identity")
        }
        var acceptedBundle: String? = nil
        if role == .app || role == .extension {
            guard let bundleID else {
                throw .invalidParams("Invalid params: 'bundleID' is required for role \(role.rawValue)")
            }
            switch registry.lookup(bundleID) {
            case nil:
                // (the state directory's path only for the broker's own user, as in broker.status)
                let own = !Broker.isOtherUser(conn)
                let why = registry.whyUnknown(bundleID) ?? (own ? "no manifest in \(config.stateDirectory)/apps registers it" : "no manifest registers it")
                throw RPCError(.unauthorized, "Unauthorized: unknown bundle ID '\(bundleID)' (\(why))")
            case .app?:
                if role != .app {
                    throw RPCError(
                        .unauthorized, "Unauthorized: '\(bundleID)' is an app, not an extension; use role \"app\"", data: ["role": "app"])
                }
            case .appExtension?:
                if role != .extension {
                    throw RPCError(
                        .unauthorized, "Unauthorized: '\(bundleID)' is an extension, not an app; use role \"extension\"",
                        data: ["role": "extension"])
                }
            }
            // The kernel's word first: a caller the manifest does not allow learns nothing about
            // the token from the answer.
            try checkIdentity(conn, bundleID)
            try checkToken(conn, bundleID, token)
            acceptedBundle = bundleID
        }
        conn.role = role
        conn.bundleID = acceptedBundle
        conn.admitted = acceptedBundle.map { admittedIdentity($0) }
        // A session pinned to an executable keeps checking that every write comes from the process
        // that connected (and was checked); others read plainly from now on.
        conn.checksWriter = conn.admitted?.executable != nil
        if !conn.checksWriter { UnixSocket.stopNamingWriters(conn.fd) }  // (no credentials per message from now on)
        sessionCounts.adjust(role, by: 1)
        log.log(.debug, "hello: \(conn.identity)", connection: conn.id)
        return helloResult(conn)
    }

    /// A caller of the broker's own user, or root: the default of a manifest's `uids`, and who may
    /// have path items read and see every connection in `broker.status`.
    static func isBrokersOwnUser(_ peer: PeerCredentials) -> Bool { isBrokersOwnUID(peer.uid) }

    /// Whether `conn`'s caller is another user than the broker's (and root): what only the
    /// broker's own user may do or learn is refused or hidden. A caller the kernel did not name
    /// counts as another user (fails closed; `hello` as an app or extension refuses it anyway).
    static func isOtherUser(_ conn: Connection) -> Bool { conn.peer.map { !isBrokersOwnUser($0) } ?? true }

    /// "uid N" of `conn`'s caller, for messages ("an unnamed caller" when the kernel did not say).
    static func callerUID(_ conn: Connection) -> String { conn.peer.map { "uid \($0.uid)" } ?? "a caller the kernel did not name" }
    /// The broker's own user or root.
    static func isBrokersOwnUID(_ uid: UInt32) -> Bool { uid == ProcessInfoLite.uid || uid == 0 }

    /// `token` must match the one the bundle's manifest sets, if it sets one (compared in constant time).
    func checkToken(_ conn: Connection, _ bundleID: String, _ token: String?) throws(RPCError) {
        guard case .some(.some(let required)) = registry.requiredToken(for: bundleID) else { return }
        guard let token, constantTimeEquals(token, required) else {
            log.log(.warning, "hello refused for \(bundleID): \(token == nil ? "missing" : "bad") token", connection: conn.id)
            throw RPCError(.unauthorized, "Unauthorized: \(token == nil ? "a token is required" : "bad token") for '\(bundleID)'")
        }
    }

    /// The kernel's word on who is calling must match the manifest: by default only the broker's
    /// own user (and root) may act as an app or extension; `uids` widens that, `executable` pins the
    /// program (through /proc/PID/exe on Linux).
    func checkIdentity(_ conn: Connection, _ bundleID: String) throws(RPCError) {
        guard let peer = conn.peer else {
            throw RPCError(.unauthorized, "Unauthorized: the kernel did not say who is calling; refusing to act as '\(bundleID)'")
        }
        let rule = registry.identityRule(for: bundleID)
        if let uids = rule.uids {
            guard uids.contains(peer.uid) else {
                log.log(.warning, "hello refused for \(bundleID): uid \(peer.uid) is not in its manifest's uids", connection: conn.id)
                throw RPCError(.unauthorized, "Unauthorized: uid \(peer.uid) may not act as '\(bundleID)'")
            }
        } else if !Broker.isBrokersOwnUser(peer) {
            log.log(.warning, "hello refused for \(bundleID): uid \(peer.uid) is another user", connection: conn.id)
            throw RPCError(.unauthorized, "Unauthorized: uid \(peer.uid) is not the broker's user; list it in the manifest's uids to allow it")
        }
        if let exe = rule.executable {
            // The process that connected must be the one that speaks: a process that connects,
            // forks and then execs the pinned program while its child (which kept the socket)
            // says hello would otherwise pass as that program (the kernel names each write's
            // process: SO_PASSCRED; Linux).
            if let other = conn.foreignWriter {
                log.log(.warning, "hello refused for \(bundleID): written by pid \(other), not by pid \(peer.pid) that connected", connection: conn.id)
                throw RPCError(
                    .unauthorized,
                    "Unauthorized: '\(bundleID)' is pinned to \(exe), and this connection's requests were written by pid \(other), not by pid \(peer.pid) that opened it")
            }
            let actual = ProcessInfoLite.executablePath(of: peer.pid)
            guard actual == exe else {
                log.log(.warning, "hello refused for \(bundleID): pid \(peer.pid) runs \(actual ?? "an unknown program")", connection: conn.id)
                throw RPCError(
                    .unauthorized, "Unauthorized: '\(bundleID)' must be \(exe); the calling process runs \(actual ?? "an unknown program")")
            }
        }
    }

    func helloResult(_ conn: Connection) -> JSONValue {
        var o: JSONObject = [
            "protocol": .int(SharebrokerVersion.protocolVersion),
            "broker": ["name": .string(SharebrokerVersion.brokerName), "version": .string(SharebrokerVersion.string)],
            "session": .number(String(conn.id)),
            "role": .string(conn.role?.rawValue ?? "tool"),
            "maxMessage": .int(config.maxMessage),
        ]
        if let b = conn.bundleID { o["bundleID"] = .string(b) }
        return .object(o)
    }

    var launchStatus: JSONValue {
        var o = JSONObject()
        for (app, l) in launches.sorted(by: { $0.key < $1.key }) {
            o[app] = [
                "launches": .int(l.launches), "failures": .int(l.failures), "running": .bool(l.pid != nil || l.starting),
                "retryScheduled": .bool(l.retryAt != nil), "timeouts": .int(l.timeouts),
            ]
        }
        return .object(o)
    }

    /// Every connection with its session and the kernel's peer credentials (`broker.status {verbose: true}`).
    func clientsJSON() -> JSONValue {
        var list: [JSONValue] = []
        for c in connections.values.sorted(by: { $0.id < $1.id }) {
            var o: JSONObject = ["session": .number(String(c.id)), "role": c.role.map { .string($0.rawValue) } ?? .null]
            if let b = c.bundleID { o["bundleID"] = .string(b) }
            if let p = c.peer {
                o["pid"] = .number(String(p.pid))
                o["uid"] = .number(String(p.uid))
                o["gid"] = .number(String(p.gid))
            }
            if let app = c.subscribedApp { o["subscribedTo"] = .string(app) }
            o["requests"] = .number(String(c.requestCount))
            o["pendingOutput"] = .int(c.pendingOutput)
            list.append(.object(o))
        }
        return .array(list)
    }

    /// `broker.status`, encoded straight into bytes (it is the benchmark's round trip: no tree).
    /// `forOtherUser`: a caller of another user than the broker's (the socket's mode let them in)
    /// gets neither the broker's pid nor its paths.
    func encodedStatus(verbose: Bool, forOtherUser: Bool = false) -> [UInt8] {
        let anonymous = connections.count - sessionCounts.app - sessionCounts.extension - sessionCounts.tool
        // The members that never change while the broker runs are written once.
        if statusPrefix.isEmpty {
            var w = JSONObjectWriter(capacity: 256)
            w.string("version", SharebrokerVersion.string)
            w.int("protocol", SharebrokerVersion.protocolVersion)
            w.int("maxMessage", config.maxMessage)
            statusPrefixForOthers = w.bytes
            w.int("pid", Int(brokerPID))
            w.string("socket", config.socketPath)
            w.string("stateDirectory", config.stateDirectory)
            w.int("openFileLimit", openFileLimit)
            statusPrefix = w.bytes
        }
        var w = JSONObjectWriter(continuing: forOtherUser ? statusPrefixForOthers : statusPrefix, capacity: 1024)
        w.int("connections", connections.count)
        w.int("apps", registry.apps.count)
        w.int("subscribers", subscribers.count)
        w.int("pendingEvents", store?.pendingCount ?? 0)
        w.int("pendingShares", pendingShareCount)
        w.decimal("uptimeSeconds", thousandths: (Clock.monotonicNanos() - startedAt + 500_000) / 1_000_000)
        w.object("sessions") { s in
            s.int("app", sessionCounts.app)
            s.int("extension", sessionCounts.extension)
            s.int("tool", sessionCounts.tool)
            s.int("anonymous", anonymous)
        }
        w.uint("requests", UInt64(totalRequests))
        w.uint("droppedSlowClients", UInt64(droppedSlowClients))
        w.uint("rejectedOverQuota", UInt64(rejectedOverQuota))
        w.int("outputBytes", outputMeter.bytes)
        w.uint("commits", nextCommitID - 1)
        w.bool("commitPacing", pacer.enabled)
        w.uint("pacedCommits", pacer.waitedCommits)
        w.uint("commitMicros", (pacer.commitNanos + 500) / 1000)
        w.int("manifestErrors", manifestErrorCount)
        w.int("associationErrors", associationErrors.count)
        w.object("store") { s in
            if let store {
                let r = store.recovery
                s.bool("available", true)
                s.int("recoveredEvents", store.recoveredEvents)
                s.int("quarantinedRecords", r.quarantined)
                s.int("truncatedBytes", r.truncatedBytes)
                s.int("journalSegments", store.journal.segments.count)
                s.int("failedOpens", storeReopen.failures)
            } else {
                s.bool("available", false)
                s.string("error", storeOpenError ?? "unavailable")
                s.int("failedOpens", storeReopen.failures)
                // (when the broker tries again on its own; a request that needs them may sooner)
                let now = Clock.monotonicNanos()
                let due = storeReopen.timerDue
                s.decimal("retryInSeconds", thousandths: due > now ? (due - now + 500_000) / 1_000_000 : 0)
            }
        }
        if launches.isEmpty {
            w.object("launches") { _ in }
        } else {
            w.value("launches", launchStatus)
        }
        w.object("defaults") { writeDefaultsStatus(&$0) }
        w.object("fileWork") { f in
            f.int("running", offLoop.count + resumeAfterCommit.count)
            f.uint("finished", offLoopFinished)
            f.uint("abandoned", offLoopAbandoned)
        }
        if verbose { w.value("clients", clientsJSON()) }
        return w.finishInPlace()
    }

    /// Manifest issues that keep a manifest out (counted for `broker.status`).
    var manifestErrorCount: Int { registry.issues.reduce(0) { $0 + ($1.fatal ? 1 : 0) } }
}
