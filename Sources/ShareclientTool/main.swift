// `shareclient`: the command-line client. Every command connects to the broker's socket
// (`--socket`, else $SHAREBROKER_SOCKET, else the default path), says `hello`, and calls methods.
// Exit codes: 0 ok, 1 the broker answered an error, 64 usage, 69 broker unreachable, 70 internal.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareClient
import ShareCommandLine
import ShareProtocol
import ShareSystem

let globalOptions: [OptionSpec] = [
    .option(
        "socket", valueName: "path", help: "Broker socket (beats $SHAREBROKER_SOCKET).",
        default: "$SHAREBROKER_SOCKET, else $XDG_RUNTIME_DIR/sharebroker.sock, else ${TMPDIR:-/tmp}/sharebroker-UID/sharebroker.sock", global: true),
    .option("as", valueName: "bundle-id", help: "Say hello as this app or extension bundle ID.", global: true),
    .option(
        "role", valueName: "role", help: "Session role: app, extension or tool.",
        default: "tool, or with --as the bundle's own: app or extension", global: true),
    .option(
        "token", valueName: "token", help: "Token for --as, when its manifest sets one.", default: "$SHAREBROKER_TOKEN",
        global: true),
    .flag("json", help: "Print machine-readable JSON (one line).", global: true),
]

/// The identity of the commands that work only as an app or extension.
let bundleDiscussion =
    "The app or extension is --as BUNDLE, else $SHAREBROKER_BUNDLE_ID (set by the broker when it launches an app); the token is --token, else $SHAREBROKER_TOKEN."

let root = CommandSpec(
    name: "shareclient",
    abstract: "Command-line client for the sharebroker daemon.",
    discussion: """
        Exit codes: 0 ok, 1 the broker answered an error, 64 usage error, 66 a file shareclient must read \
        cannot be read or is too large to send inline, 69 broker unreachable, 70 internal error (or the peer \
        on the socket is not a broker), 73 read --output FILE cannot write FILE. \
        Each call waits at most $SHARECLIENT_TIMEOUT seconds (default 60; 0 waits for ever) for the broker's answer.
        """,
    options: globalOptions,
    subcommands: [
        CommandSpec(
            name: "call", abstract: "Call any method and print its result as JSON.",
            discussion: "Says hello first (as a tool, or --as BUNDLE), unless METHOD is hello itself or --no-hello is given.",
            options: [.flag("no-hello", help: "Do not say hello before the call.")],
            arguments: [
                ArgumentSpec("method", help: "The method, e.g. broker.status."),
                ArgumentSpec("params", help: "Params as a JSON object (or array).", kind: .optional),
            ]),
        CommandSpec(name: "status", abstract: "Show the broker's status."),
        CommandSpec(
            name: "open", abstract: "Open a URL: the app that handles it gets an event (url.open).",
            options: [.option("fallback", valueName: "url", help: "Open this instead when nothing handles URL.")],
            arguments: [ArgumentSpec("url", help: "The URL, e.g. deeplinkmyapp://open-from-share.")]),
        CommandSpec(
            name: "can-open", abstract: "Say whether a URL would open, and where (url.canOpen). Exit 1 when it would not.",
            options: [.option("fallback", valueName: "url", help: "A fallback URL, as url.open takes it: whether open would open the URL or it.")],
            arguments: [ArgumentSpec("url", help: "The URL.")]),
        CommandSpec(
            name: "explain", abstract: "Explain, step by step, how the broker routes a URL (url.explain).",
            discussion: "Exit status 0 when the URL (or its fallback) opens an app, 1 when nothing opens it or the broker finds the URL invalid (said on stderr).",
            options: [.option("fallback", valueName: "url", help: "A fallback URL, as url.open takes it.")],
            arguments: [ArgumentSpec("url", help: "The URL.")]),
        CommandSpec(
            name: "listen",
            abstract: "Subscribe as an app and print its events, one JSON object per line (app.subscribe).",
            discussion: """
                The app is --as BUNDLE, else $SHAREBROKER_BUNDLE_ID (set by the broker when it launches an app);
                the token is --token, else $SHAREBROKER_TOKEN. Ends with exit 1 when another connection of the
                app subscribes (its events go there).
                """,
            options: [
                .flag("ack", help: "Acknowledge each event after printing it."),
                .option("count", valueName: "n", help: "Exit after N events."),
                .option(
                    "timeout", valueName: "seconds",
                    help: "Exit when no event arrives for this long (exit 1 when --count events have not all come)."),
            ]),
        CommandSpec(
            name: "send",
            abstract: "Share items: the broker checks the activation rules and stores them for the app (share.send).",
            discussion: """
                As a tool (the share sheet) the broker picks the one extension that accepts the items; when several
                do, they are listed and --to must name one. With --as EXTENSION the extension sends as itself.
                Items keep the order: URLs, then texts, then files.
                """,
            options: [
                .option("url", valueName: "url", help: "Share a link.", repeatable: true),
                .option("text", valueName: "text", help: "Share text.", repeatable: true),
                .option("file", valueName: "path", help: "Share a file (copied by the broker).", repeatable: true),
                .flag(
                    "inline",
                    help: "Send each --file's bytes in the request instead of its path (done anyway when the broker runs as another user and refuses paths)."),
                .option("type", valueName: "uti", help: "The UTI of every item (normally inferred)."),
                .option("to", valueName: "extension", help: "The extension to send to."),
                .option("group", valueName: "group", help: "The app group to store in (default: the extension's first)."),
                .flag("open", help: "Also open SCHEME://open-from-share?share=ID on the containing app."),
                .option("open-url", valueName: "url", help: "Also open this URL (instead of the default one)."),
            ]),
        CommandSpec(
            name: "targets", abstract: "List the share and action extensions that accept the items (share.targets).",
            options: [
                .option("url", valueName: "url", help: "A link.", repeatable: true),
                .option("text", valueName: "text", help: "A text.", repeatable: true),
                .option("file", valueName: "path", help: "A file.", repeatable: true),
                .flag("inline", help: "Send each --file's bytes instead of its path (as for send)."),
                .option("type", valueName: "uti", help: "The UTI of every item (normally inferred)."),
            ]),
        CommandSpec(
            name: "shares", abstract: "List pending shares of your groups, as an app or extension (share.list).",
            discussion: bundleDiscussion,
            options: [.option("group", valueName: "group", help: "Only this group.")]),
        CommandSpec(
            name: "get", abstract: "Show one share, with the paths of its files (share.get).",
            discussion: bundleDiscussion,
            arguments: [ArgumentSpec("share-id", help: "The share's id.")]),
        CommandSpec(
            name: "read", abstract: "Write the bytes of a share's file item to stdout or a file (share.read): for an app that cannot open the item's path itself.",
            discussion: bundleDiscussion,
            options: [
                .option(
                    "output", valueName: "file",
                    help: "Write them to this file instead of stdout (created, or overwritten once the broker answers: a refused read leaves it untouched)."),
            ],
            arguments: [ArgumentSpec("share-id", help: "The share's id."), ArgumentSpec("item", help: "The item's index in the share (0 for the first).")]),
        CommandSpec(
            name: "complete", abstract: "Complete a share: its record and files are deleted (share.complete).",
            discussion: bundleDiscussion,
            arguments: [ArgumentSpec("share-id", help: "The share's id.")]),
        CommandSpec(
            name: "ack", abstract: "Acknowledge events as an app (app.ack).",
            discussion: bundleDiscussion,
            arguments: [ArgumentSpec("ids", help: "Event ids.", kind: .oneOrMore)]),
        CommandSpec(name: "apps", abstract: "List registered apps, manifest errors and conflicts."),
        CommandSpec(
            name: "reload", abstract: "Make the broker re-read its manifests (apps.reload).",
            discussion: "Prints what apps.list shows. Exit 1 when a manifest or association document could not be loaded (each is named)."),
        defaultsCommandSpec,
    ])

enum Exit {
    static let ok: Int32 = 0
    static let remote: Int32 = 1
    static let noInput: Int32 = 66
    static let cannotCreate: Int32 = 73
    static let unavailable: Int32 = 69
    static let software: Int32 = 70
}

/// The broker runs as another user and takes no `path` item from this caller (it says so in
/// `error.data.reason`): the files' bytes are sent instead.
func pathsRefused(_ rpc: RPCError) -> Bool {
    rpc.code == ErrorCode.invalidParams.rawValue && rpc.data?["reason"]?.stringValue == "pathItemsRefused"
}

/// A local file the command needs cannot be read (exit 66), or written (exit 73).
struct CLIError: Error {
    let message: String
    let status: Int32
    init(_ message: String, status: Int32 = Exit.noInput) {
        self.message = message
        self.status = status
    }
}

func writeErr(_ s: String) { Console.err(s) }

func writeOut(_ s: String) { Console.out(s) }

struct Session {
    let conn: BrokerConnection
    let json: Bool
}

/// Where `read --output FILE` writes, in place (as `curl -o` does: the file's owner, mode, links
/// and ACLs stay, a symlink is written through), but only once the broker has answered the first
/// `share.read`: a read refused at once (an unknown share or item, no entitlement) leaves FILE
/// untouched. A failure partway leaves what was written, and removes FILE when this read created
/// it.
final class ReadOutput {
    let path: String
    private(set) var fd: Int32 = -1
    /// FILE did not exist: this read created it.
    private var created = false

    init(path: String) { self.path = path }

    /// Opens FILE (created, or truncated), once, before the first bytes are written.
    func openFile() throws {
        guard fd < 0 else { return }
        var opened = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        created = opened >= 0
        if opened < 0 && errno == EEXIST { opened = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666) }
        guard opened >= 0 else { throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))", status: Exit.cannotCreate) }
        fd = opened
    }

    /// Closes FILE; after a failure (`complete` false) a FILE this read created is removed.
    func closeFile(complete: Bool) {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
        if !complete && created { unlink(path) }
    }
}

/// `--count N` (at least 1) and `--timeout SECONDS` (more than 0, at most 2,000,000 s, about 23
/// days: the milliseconds fit an Int32), checked.
func countAndTimeout(_ cmd: ParsedCommand) throws -> (count: Int?, timeout: Double?) {
    let count = try cmd.int("count", atLeast: 1)
    let timeout = try cmd.double("timeout")
    if let timeout, !(timeout > 0 && timeout <= 2_000_000) {
        throw cmd.usageError("option '--timeout' must be a number of seconds above 0 and at most 2000000, got \(cmd.value("timeout") ?? "\(timeout)")")
    }
    return (count, timeout)
}

/// The end of `listen` / `defaults watch` at --timeout: 0 without --count (the timeout is the
/// end asked for); with --count N and fewer than N seen, 1 and why on stderr (a script waiting
/// for N must be able to tell).
func countNotReached(_ seen: Int, _ count: Int?, _ what: String) -> Int32 {
    guard let count, seen < count else { return Exit.ok }
    writeErr("shareclient: error: timed out after \(seen) of \(count) \(what)\n")
    return Exit.remote
}

func socketPath(_ cmd: ParsedCommand) throws -> String {
    if let s = cmd.value("socket") {
        guard !s.isEmpty else { throw cmd.usageError("option '--socket' needs a path, got an empty one") }
        return s
    }
    return DefaultPaths.socket()
}


/// Seconds a call waits for the broker's answer: $SHARECLIENT_TIMEOUT (0: for ever), else 60 (a
/// broker that accepts the connection but hangs is then reported, exit 69, instead of waited for).
func answerTimeoutSeconds() -> Double {
    if let s = ProcessInfoLite.env("SHARECLIENT_TIMEOUT"), let t = Double(s), t >= 0, t <= 2_000_000 { return t }
    return 60
}

/// A connection to the broker whose calls wait at most `answerTimeoutSeconds()` for an answer.
func openConnection(_ path: String) throws -> BrokerConnection {
    let conn = try BrokerConnection(socketPath: path)
    let t = answerTimeoutSeconds()
    conn.answerTimeoutMillis = t == 0 ? -1 : Int32(max(1, t * 1000))
    return conn
}

/// Connects and says hello as --as BUNDLE with --token, or as a tool. `asBundle`: the command
/// works only as an app or extension (shares, get, complete, ack), so without --as it is
/// $SHAREBROKER_BUNDLE_ID (set by the broker in an app it launches), as for listen and defaults;
/// a bundle's token is --token, else $SHAREBROKER_TOKEN.
func connect(_ cmd: ParsedCommand, hello: Bool = true, asBundle: Bool = false, defaultRoleWithBundle: String = "app") throws -> Session {
    // (--role app or extension speaks as a bundle too: without --as, $SHAREBROKER_BUNDLE_ID's;
    // --role tool as none, whatever the environment says)
    let role = cmd.value("role")
    let actsAsBundle = role != "tool" && (asBundle || role == "app" || role == "extension")
    let bundle = cmd.value("as") ?? (actsAsBundle ? ProcessInfoLite.env("SHAREBROKER_BUNDLE_ID") : nil)
    if hello { try checkRole(cmd, bundle: bundle, actsAsBundle: asBundle) }  // a usage error before any connection
    // (a command that acts as an app or extension says so before it connects, as listen does,
    // rather than getting the broker's "not for role tool")
    if asBundle && hello && bundle == nil && cmd.value("role") == nil {
        throw cmd.usageError("\(cmd.subcommand) acts as an app or extension: it needs --as BUNDLE (or $SHAREBROKER_BUNDLE_ID)")
    }
    let conn = try openConnection(socketPath(cmd))
    if hello {
        let token = tokenFor(cmd, bundle: bundle)
        try sayHello(conn, cmd, bundle: bundle, token: token, roleWithBundle: defaultRoleWithBundle)
    }
    return Session(conn: conn, json: cmd.flag("json"))
}

/// The token for a hello as `bundle`: --token, else $SHAREBROKER_TOKEN unless
/// $SHAREBROKER_BUNDLE_ID names another bundle (a launched app's token is its own: it is not
/// sent for a bundle named with --as).
func tokenFor(_ cmd: ParsedCommand, bundle: String?) -> String? {
    guard let bundle else { return nil }
    if let t = cmd.value("token") { return t }
    if let envBundle = ProcessInfoLite.env("SHAREBROKER_BUNDLE_ID"), envBundle != bundle { return nil }
    return ProcessInfoLite.env("SHAREBROKER_TOKEN")
}

/// `--role`, when given, is app, extension or tool, and fits the bundle the session speaks as:
/// an app or extension needs one (`bundle`: --as, else $SHAREBROKER_BUNDLE_ID), a tool has none
/// (an --as would be dropped unsaid), and a command that `actsAsBundle` cannot be one.
func checkRole(_ cmd: ParsedCommand, bundle: String?, actsAsBundle: Bool) throws {
    guard let role = cmd.value("role") else { return }
    guard ["app", "extension", "tool"].contains(role) else {
        throw cmd.usageError("option '--role' must be app, extension or tool; got '\(role)'")
    }
    if actsAsBundle && role == "tool" {
        let command = cmd.path.dropFirst().first ?? cmd.subcommand  // (defaults, for defaults list)
        throw cmd.usageError("\(command) acts as an app or extension: option '--role' cannot be tool")
    }
    if role != "tool" && bundle == nil {
        throw cmd.usageError("option '--role \(role)' speaks as an \(role): it needs --as BUNDLE (or $SHAREBROKER_BUNDLE_ID)")
    }
    if role == "tool", let named = cmd.value("as") {
        throw cmd.usageError("option '--role tool' says hello without a bundle ID: drop --as '\(named)' (or use --role app or extension)")
    }
}

/// Says hello as --role (checked by `checkRole` before connecting); without it, as a tool, or with
/// a bundle as `roleWithBundle` and then, if the broker answers that the bundle is the other kind
/// (its error's `data.role`), as that.
func sayHello(_ conn: BrokerConnection, _ cmd: ParsedCommand, bundle: String?, token: String?, roleWithBundle: String) throws {
    if let role = cmd.value("role") {
        _ = try conn.hello(role: role, bundleID: bundle, token: token)
        return
    }
    guard let bundle else {
        _ = try conn.hello(role: "tool")
        return
    }
    do {
        _ = try conn.hello(role: roleWithBundle, bundleID: bundle, token: token)
    } catch {
        guard case .rpc(let e) = error, e.code == ErrorCode.unauthorized.rawValue,
            let other = e.data?["role"]?.stringValue, other != roleWithBundle
        else { throw error }
        _ = try conn.hello(role: other, bundleID: bundle, token: token)
    }
}

/// `result` when it has each member with its JSON type ("string", "boolean"); else what answered
/// is no broker of this protocol (exit 70), rather than a line of "?" and exit 0.
func expecting(_ members: KeyValuePairs<String, String>, from result: JSONValue, _ method: String) throws -> JSONValue {
    for (key, type) in members {
        let ok: Bool
        switch (type, result[key]) {
        case ("string", .string?): ok = true
        case ("boolean", .bool?): ok = true
        default: ok = false
        }
        if !ok {
            throw ClientError.protocolError(
                "its answer to '\(method)' has no \(type) '\(key)': \(String(result.compactText.prefix(200)))")
        }
    }
    return result
}

func printJSON(_ v: JSONValue, compact: Bool) {
    writeOut((compact ? v.compactText : v.prettyText()) + "\n")
}

func run(_ cmd: ParsedCommand) throws -> Int32 {
    if let s = ProcessInfoLite.env("SHARECLIENT_TIMEOUT"), Double(s).map({ $0 >= 0 && $0 <= 2_000_000 }) != true {
        throw cmd.usageError("$SHARECLIENT_TIMEOUT must be a number of seconds from 0 (wait for ever) to 2000000, got '\(s)'")
    }
    if cmd.path.count > 1 && cmd.path[1] == "defaults" { return try runDefaults(cmd, socket: socketPath(cmd)) }
    switch cmd.subcommand {
    case "call":
        let method = cmd.argument("method")!
        var params: JSONValue? = nil
        if let text = cmd.argument("params") {
            do { params = try JSONParser.parse(text) } catch {
                throw cmd.usageError("PARAMS is not valid JSON: \(error)")
            }
            switch params! {
            case .object, .array: break
            default: throw cmd.usageError("PARAMS must be a JSON object or array, got \(params!.typeName)")
            }
        }
        let s = try connect(cmd, hello: method != "hello" && !cmd.flag("no-hello"))
        printJSON(try s.conn.call(method, params), compact: s.json)
        return Exit.ok
    case "status":
        let s = try connect(cmd)
        let st = try s.conn.call("broker.status")
        if s.json {
            printJSON(st, compact: true)
        } else {
            var lines: [String] = []
            func field(_ label: String, _ key: String) {
                if let v = st[key] { lines.append(label.padding(16) + (v.stringValue ?? v.compactText)) }
            }
            field("version", "version")
            field("socket", "socket")
            field("state", "stateDirectory")
            field("pid", "pid")
            field("uptime (s)", "uptimeSeconds")
            field("connections", "connections")
            field("apps", "apps")
            field("subscribers", "subscribers")
            if st["store"]?["available"] == .bool(false) {
                lines.append("pending events".padding(16) + "unknown (the event store is unavailable)")
            } else {
                field("pending events", "pendingEvents")
            }
            field("pending shares", "pendingShares")
            field("manifest errors", "manifestErrors")
            field("assoc. errors", "associationErrors")
            if let store = st["store"] {
                if store["available"] == .bool(false) {
                    lines.append("event store".padding(16) + "UNAVAILABLE: " + (store["error"]?.stringValue ?? "?"))
                } else if let q = store["quarantinedRecords"]?.intValue, q > 0 {
                    lines.append("event store".padding(16) + "\(q) damaged records quarantined at start")
                }
            }
            writeOut(lines.joined(separator: "\n") + "\n")
        }
        return Exit.ok
    case "open":
        let s = try connect(cmd)
        var p: JSONObject = ["url": .string(cmd.argument("url")!)]
        if let f = cmd.value("fallback") { p["fallback"] = .string(f) }
        let r = try expecting(["app": "string", "via": "string", "eventID": "string"], from: s.conn.call("url.open", .object(p)), "url.open")
        if s.json {
            printJSON(r, compact: true)
        } else {
            let state = r["delivered"] == .bool(true) ? "delivered" : "queued"
            writeOut(
                "\(r["app"]?.stringValue ?? "?") via \(r["via"]?.stringValue ?? "?"): event \(r["eventID"]?.stringValue ?? "?") \(state)\n")
        }
        return Exit.ok
    case "can-open":
        let s = try connect(cmd)
        var params: JSONObject = ["url": .string(cmd.argument("url")!)]
        if let fallback = cmd.value("fallback") { params["fallback"] = .string(fallback) }
        let r = try expecting(["canOpen": "boolean"], from: s.conn.call("url.canOpen", .object(params)), "url.canOpen")
        if s.json {
            printJSON(r, compact: true)
        } else if r["canOpen"] == .bool(true) {
            let via = r["via"]?.stringValue ?? "?"
            writeOut("yes: \(r["app"]?.stringValue ?? "?") via \(via)\(via == "fallback" ? " (\(cmd.value("fallback") ?? "?"))" : "")\n")
        } else if let fallback = cmd.value("fallback") {
            writeOut("no: nothing opens \(cmd.argument("url")!), nor its fallback \(fallback)\n")
        } else {
            writeOut("no: nothing opens \(cmd.argument("url")!)\n")
        }
        return r["canOpen"] == .bool(true) ? Exit.ok : Exit.remote
    case "explain":
        let s = try connect(cmd)
        var p: JSONObject = ["url": .string(cmd.argument("url")!)]
        if let f = cmd.value("fallback") { p["fallback"] = .string(f) }
        let r = try s.conn.call("url.explain", .object(p))
        if s.json {
            printJSON(r, compact: true)
        } else {
            writeOut((r["text"]?.stringValue ?? r.prettyText()) + "\n")
        }
        // As `sharebroker explain` and `can-open`: 1 when nothing opens it; an invalid URL is an
        // error (said on stderr too).
        if let error = r["decision"]?["error"], error["code"]?.intValue != ErrorCode.noHandler.rawValue {
            writeErr("shareclient: error: \(error["message"]?.stringValue ?? error.compactText)\n")
        }
        return r["decision"]?["app"]?.stringValue != nil ? Exit.ok : Exit.remote
    case "listen":
        let bundle = cmd.value("as") ?? ProcessInfoLite.env("SHAREBROKER_BUNDLE_ID")
        guard let bundle else { throw cmd.usageError("listen needs --as BUNDLE (or $SHAREBROKER_BUNDLE_ID)") }
        let (count, timeout) = try countAndTimeout(cmd)
        if let role = cmd.value("role"), role != "app" {
            throw cmd.usageError("listen subscribes as an app: option '--role' can only be app, got '\(role)'")
        }
        let conn = try openConnection(socketPath(cmd))
        try conn.hello(role: "app", bundleID: bundle, token: tokenFor(cmd, bundle: bundle))
        try conn.call("app.subscribe", ["takeoverNotice": true])  // (stops when taken over)
        var seen = 0
        while count == nil || seen < count! {
            let result = Result { () throws(ClientError) -> BrokerNotification? in
                try conn.nextNotification(timeoutMillis: timeout.map { Int32($0 * 1000) } ?? -1)
            }
            if case .failure(.timeout) = result { return countNotReached(seen, count, "events") }
            let n = try result.get()
            guard let n else { throw ClientError.connection("the broker closed the connection") }
            if n.method == "app.subscriptionEnded" {
                // Another connection of the app subscribed: no more events come here.
                let why = n.params?["reason"]?.stringValue ?? "another connection of the app subscribed"
                writeErr("shareclient: error: the app's events went to another subscriber after \(seen) events: \(why)\n")
                return Exit.remote
            }
            guard n.method == "app.event", let params = n.params else { continue }
            writeOut(params.compactText + "\n")
            if cmd.flag("ack"), let id = params["id"] { try conn.call("app.ack", ["ids": [id]]) }
            seen += 1
        }
        return Exit.ok
    case "send", "targets":
        var items: [JSONValue] = []
        let type = cmd.value("type")
        func add(_ o: JSONObject) {
            var o = o
            if let type { o["type"] = .string(type) }
            items.append(.object(o))
        }
        for u in cmd.values("url") { add(["url": .string(u)]) }
        for t in cmd.values("text") { add(["text": .string(t)]) }
        let files = cmd.values("file").map(FileIO.absolutePath)
        for f in files { add(["path": .string(f)]) }
        guard !items.isEmpty else { throw cmd.usageError("give at least one item: --url, --text or --file") }
        /// The items with each file's bytes instead of its path (`--inline`, or a broker of
        /// another user that takes no path from this caller). They must fit in one message of the
        /// broker (`broker.status.maxMessage`): files too large are refused here, before reading
        /// them, with the limit named (the broker would close the connection).
        func inlined(_ s: Session, pathsRefused: Bool = false) throws -> [JSONValue] {
            let limit = try s.conn.call("broker.status")["maxMessage"]?.intValue ?? Int.max
            var encoded = 1024
            do { encoded += try FileInlining.encodedSize(ofFiles: files) } catch { throw CLIError("cannot read \(error.path): \(error.reason)") }
            if encoded > limit {
                throw CLIError(
                    pathsRefused
                        ? "the files take about \(encoded) bytes sent inline, over the broker's message limit of \(limit) bytes (sharebroker serve --max-message); this broker runs as another user and takes no path from you, so its limit must be raised to share them"
                        : "the files take about \(encoded) bytes sent inline, over the broker's message limit of \(limit) bytes (sharebroker serve --max-message); send them by path, or raise the limit")
            }
            var out = items
            let first = items.count - files.count
            for (i, f) in files.enumerated() {
                do { out[first + i] = try FileInlining.dataItem(path: f, type: type, limit: limit).json } catch {
                    throw CLIError("cannot read \(error.path): \(error.reason)")
                }
            }
            return out
        }
        if cmd.value("open-url") != nil && cmd.flag("open") {
            throw cmd.usageError("--open and --open-url are alternatives: give one")
        }
        /// Calls `method` with the items in `params` (`--inline`: as bytes); a broker of another
        /// user takes no path from this caller: then the bytes are sent instead.
        func callWithItems(_ s: Session, _ method: String, _ params: JSONObject) throws -> Result<JSONValue, ClientError> {
            var p = params
            let inline = cmd.flag("inline") && !files.isEmpty
            if inline { p["items"] = .array(try inlined(s)) }
            var result = Result { () throws(ClientError) -> JSONValue in try s.conn.call(method, .object(p)) }
            if case .failure(.rpc(let rpc)) = result, pathsRefused(rpc), !files.isEmpty, !inline {
                p["items"] = .array(try inlined(s, pathsRefused: true))
                result = Result { () throws(ClientError) -> JSONValue in try s.conn.call(method, .object(p)) }
            }
            return result
        }
        if cmd.subcommand == "targets" {
            let s = try connect(cmd)
            let r = try callWithItems(s, "share.targets", ["items": .array(items)]).get()
            if s.json {
                printJSON(r, compact: true)
            } else {
                let list = r["targets"]?.arrayValue ?? []
                if list.isEmpty { writeOut("no extension accepts these items\n") }
                for t in list {
                    writeOut("\(t["extension"]?.stringValue ?? "?")  \(t["name"]?.stringValue ?? "")  (app \(t["app"]?.stringValue ?? "?"))\n")
                }
            }
            return Exit.ok
        }
        var p: JSONObject = ["items": .array(items)]
        if let to = cmd.value("to") { p["extension"] = .string(to) }
        if let g = cmd.value("group") { p["group"] = .string(g) }
        if let u = cmd.value("open-url") { p["open"] = .string(u) } else if cmd.flag("open") { p["open"] = true }
        let s = try connect(cmd, defaultRoleWithBundle: "extension")
        let result = try callWithItems(s, "share.send", p)
        if case .failure(.rpc(let rpc)) = result, rpc.code == ErrorCode.notAccepted.rawValue,
            let c = rpc.data?["candidates"]?.arrayValue
        {
            var msg = "shareclient: several extensions accept these items; choose one with --to:\n"
            for t in c { msg += "  \(t["extension"]?.stringValue ?? "?")  \(t["name"]?.stringValue ?? "")  (app \(t["app"]?.stringValue ?? "?"))\n" }
            writeErr(msg)
            return Exit.remote
        }
        let r = try expecting(
            ["shareID": "string", "extension": "string", "app": "string", "group": "string"], from: result.get(), "share.send")
        if s.json {
            printJSON(r, compact: true)
        } else {
            var line = "share \(r["shareID"]?.stringValue ?? "?") sent to \(r["extension"]?.stringValue ?? "?") (app \(r["app"]?.stringValue ?? "?"), group \(r["group"]?.stringValue ?? "?"))"
            if let ev = r["eventID"]?.stringValue { line += "; event \(ev) queued for the app" }
            writeOut(line + "\n")
        }
        return Exit.ok
    case "shares":
        let s = try connect(cmd, asBundle: true)
        var p = JSONObject()
        if let g = cmd.value("group") { p["group"] = .string(g) }
        let r = try s.conn.call("share.list", .object(p))
        if s.json {
            printJSON(r, compact: true)
        } else {
            let list = r["shares"]?.arrayValue ?? []
            if list.isEmpty { writeOut("no pending shares\n") }
            for sh in list {
                writeOut("\(sh["shareID"]?.stringValue ?? "?")  \(sh["created"]?.stringValue ?? "")  from \(sh["extension"]?.stringValue ?? "?")\n")
                for item in sh["items"]?.arrayValue ?? [] { writeOut("    \(describeItem(item))\n") }
            }
        }
        return Exit.ok
    case "get", "complete":
        let s = try connect(cmd, asBundle: true)
        let id = cmd.argument("share-id")!
        let r = try s.conn.call(cmd.subcommand == "get" ? "share.get" : "share.complete", ["shareID": .string(id)])
        if cmd.subcommand == "complete" && !s.json {
            writeOut("share \(id) completed: its record and files are deleted\n")
        } else {
            printJSON(r, compact: s.json)
        }
        return Exit.ok
    case "read":
        guard let item = Int(cmd.argument("item")!), item >= 0 else {
            throw cmd.usageError("ITEM must be an item's index (0 for the first), got '\(cmd.argument("item")!)'")
        }
        if cmd.flag("json") && cmd.value("output") == nil {
            throw cmd.usageError("read writes the item's bytes to stdout; --json applies with --output FILE (it then prints what was written)")
        }
        let s = try connect(cmd, asBundle: true)
        let output = cmd.value("output").map { ReadOutput(path: $0) }
        var complete = false
        defer { output?.closeFile(complete: complete) }
        var offset = 0
        while true {
            let chunk = try ShareChunk(
                json: s.conn.call("share.read", ["shareID": .string(cmd.argument("share-id")!), "item": .int(item), "offset": .int(offset)]))
            try output?.openFile()  // (once the broker has answered: a refusal leaves FILE untouched)
            let fd = output?.fd ?? 1
            var written = 0
            while written < chunk.data.count {
                let n = chunk.data.withUnsafeBytes { write(fd, $0.baseAddress! + written, chunk.data.count - written) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    throw CLIError("cannot write \(cmd.value("output") ?? "stdout"): \(String(cString: strerror(errno)))", status: Exit.cannotCreate)
                }
                written += n
            }
            offset += chunk.data.count
            if chunk.eof || chunk.data.isEmpty { break }
        }
        complete = true
        if let output, s.json { printJSON(["file": .string(output.path), "bytes": .int(offset)], compact: true) }
        return Exit.ok
    case "ack":
        let s = try connect(cmd, asBundle: true)
        let r = try s.conn.call("app.ack", ["ids": .array(cmd.arguments("ids").map { .string($0) })])
        if s.json { printJSON(r, compact: true) } else { writeOut("acked \(r["acked"]?.intValue ?? 0)\n") }
        return Exit.ok
    case "apps", "reload":
        let s = try connect(cmd)
        let result = try s.conn.call(cmd.subcommand == "apps" ? "apps.list" : "apps.reload")
        if s.json {
            printJSON(result, compact: true)
        } else {
            writeOut(describeApps(result))
        }
        // A reload that left manifests or association documents out says so in its exit status
        // too (a script installing an app learns that it did not load).
        let errors = (result["errors"]?.arrayValue?.count ?? 0) + (result["associationErrors"]?.arrayValue?.count ?? 0)
        if cmd.subcommand == "reload" && errors > 0 {
            writeErr("shareclient: error: reloaded with \(errors) error\(errors == 1 ? "" : "s"): what they name was not loaded\n")
            return Exit.remote
        }
        return Exit.ok
    default:
        throw cmd.usageError("unknown command '\(cmd.subcommand)'")
    }
}

/// `s` with its control characters (ESC, CR, ...) written as `\u{1B}`: shared text printed to a
/// terminal cannot move the cursor or rewrite what was printed.
func visible(_ s: String) -> String {
    func isControl(_ u: Unicode.Scalar) -> Bool { u.value < 0x20 || (u.value >= 0x7F && u.value < 0xA0) }
    guard s.unicodeScalars.contains(where: isControl) else { return s }
    var out = ""
    for u in s.unicodeScalars {
        if isControl(u) {
            out += "\\u{" + String(u.value, radix: 16, uppercase: true) + "}"
        } else {
            out.unicodeScalars.append(u)
        }
    }
    return out
}

/// One share item for people: its type, then its URL, its text (cut at 60 characters) or its
/// file's name and size.
func describeItem(_ item: JSONValue) -> String {
    let type = item["type"]?.stringValue ?? "?"
    if let url = item["url"]?.stringValue { return "\(type)  \(visible(url))" }
    if let text = item["text"]?.stringValue {
        let line = visible(text.replacingOccurrences(of: "\n", with: " "))
        return "\(type)  \"\(line.count > 60 ? line.prefix(59) + "…" : line)\""
    }
    var out = type
    if let name = item["name"]?.stringValue { out += "  \(visible(name))" }
    if let size = item["size"]?.intValue { out += "  (\(size) bytes)" }
    return out
}

func describeApps(_ result: JSONValue) -> String {
    var out = ""
    for app in result["apps"]?.arrayValue ?? [] {
        out += "\(app["bundleID"]?.stringValue ?? "?")  \(app["name"]?.stringValue ?? "")  [\(app["file"]?.stringValue ?? "")]\n"
        let schemes = (app["urlSchemes"]?.arrayValue ?? []).compactMap(\.stringValue)
        if !schemes.isEmpty { out += "    schemes: \(schemes.joined(separator: ", "))\n" }
        let domains = (app["associatedDomains"]?.arrayValue ?? []).compactMap(\.stringValue)
        if !domains.isEmpty { out += "    domains: \(domains.joined(separator: ", "))\n" }
        let groups = (app["appGroups"]?.arrayValue ?? []).compactMap(\.stringValue)
        if !groups.isEmpty { out += "    groups:  \(groups.joined(separator: ", "))\n" }
        if let uids = app["uids"]?.arrayValue { out += "    uids:    \(uids.map(\.compactText).joined(separator: ", "))\n" }
        if let launch = app["launch"]?.arrayValue {
            let user = app["launchUser"]?.stringValue.map { "  (as \($0))" } ?? ""
            out += "    launch:  \(launch.compactMap(\.stringValue).joined(separator: " "))\(user)\n"
        }
        for ext in app["extensions"]?.arrayValue ?? [] {
            out += "    extension \(ext["bundleID"]?.stringValue ?? "?") (\(ext["point"]?.stringValue ?? "?"))\n"
        }
    }
    func issue(_ e: JSONValue) -> String {
        let field = e["field"]?.stringValue ?? ""
        return "\(e["file"]?.stringValue ?? "")\(field.isEmpty ? "" : ": " + field): \(e["message"]?.stringValue ?? "")"
    }
    for e in result["errors"]?.arrayValue ?? [] { out += "error: \(issue(e))\n" }
    for e in result["warnings"]?.arrayValue ?? [] { out += "warning: \(issue(e))\n" }
    if result["launchChecksRunning"] == true {
        out += "note: the launches of the manifests just reloaded are still being checked (launch warnings above may be the previous manifests')\n"
    }
    for e in result["associationErrors"]?.arrayValue ?? [] {
        out += "association error: \(e["host"]?.stringValue ?? "?"): \(e["message"]?.stringValue ?? "")\n"
    }
    for c in result["conflicts"]?.arrayValue ?? [] {
        if c["kind"] == "urlScheme", let scheme = c["scheme"]?.stringValue, let winner = c["winner"]?.stringValue {
            let claimants = (c["claimants"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
            out += "conflict: URL scheme '\(scheme)' is claimed by \(claimants): \(winner) handles it (first manifest in file-name order)\n"
        } else {
            out += "conflict: \(c.compactText)\n"
        }
    }
    if out.isEmpty { out = "no apps registered\n" }
    return out
}

extension String {
    func padding(_ n: Int) -> String { count >= n ? self + " " : self + String(repeating: " ", count: n - count) }
}

runMain(root: root, version: "shareclient \(SharebrokerVersion.string)") { cmd in
    do {
        return try run(cmd)
    } catch let e as ClientError {
        switch e {
        case .unreachable:
            writeErr("shareclient: error: \(e)\n")
            return Exit.unavailable
        case .rpc(let rpc):
            writeErr("shareclient: error: \(rpc.message) (code \(rpc.code))\n")
            if let data = rpc.data { writeErr("shareclient: details: \(data.compactText)\n") }
            return Exit.remote
        case .timeout:
            let path = (try? socketPath(cmd)) ?? "the socket"
            let t = answerTimeoutSeconds()
            let shown = t.rounded() == t ? String(Int(t)) : String(t)
            writeErr(
                "shareclient: error: the broker at \(path) did not answer within \(shown) s (is it hung or stopped? $SHARECLIENT_TIMEOUT sets the wait; 0 waits for ever)\n")
            return Exit.unavailable
        case .connection(let why):
            let path = (try? socketPath(cmd)) ?? "the socket"
            writeErr("shareclient: error: connection to the broker at \(path) failed: \(why)\n")
            return Exit.unavailable
        case .protocolError:
            // Something answers on the socket, but not a broker: not "unreachable".
            writeErr("shareclient: error: \(e)\n")
            return Exit.software
        }
    } catch let e as UsageError {
        throw e
    } catch let e as CLIError {
        writeErr("shareclient: error: \(e.message)\n")
        return e.status
    } catch {
        writeErr("shareclient: internal error: \(error)\n")
        return Exit.software
    }
}
