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
        default: "$SHAREBROKER_SOCKET, else $XDG_RUNTIME_DIR/sharebroker.sock", global: true),
    .option("as", valueName: "bundle-id", help: "Say hello as this app or extension bundle ID.", global: true),
    .option("role", valueName: "role", help: "Session role: app, extension or tool.", default: "tool, or app with --as", global: true),
    .option("token", valueName: "token", help: "Token for --as, when its manifest sets one.", global: true),
    .flag("json", help: "Print machine-readable JSON (one line).", global: true),
]

let root = CommandSpec(
    name: "shareclient",
    abstract: "Command-line client for the sharebroker daemon.",
    discussion: "Exit codes: 0 ok, 1 the broker answered an error, 64 usage error, 69 broker unreachable, 70 internal error.",
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
            arguments: [ArgumentSpec("url", help: "The URL.")]),
        CommandSpec(
            name: "explain", abstract: "Explain, step by step, how the broker routes a URL (url.explain).",
            options: [.option("fallback", valueName: "url", help: "A fallback URL, as url.open takes it.")],
            arguments: [ArgumentSpec("url", help: "The URL.")]),
        CommandSpec(
            name: "listen",
            abstract: "Subscribe as an app and print its events, one JSON object per line (app.subscribe).",
            discussion: """
                The app is --as BUNDLE, else $SHAREBROKER_BUNDLE_ID (set by the broker when it launches an app);
                the token is --token, else $SHAREBROKER_TOKEN.
                """,
            options: [
                .flag("ack", help: "Acknowledge each event after printing it."),
                .option("count", valueName: "n", help: "Exit after N events."),
                .option("timeout", valueName: "seconds", help: "Exit when no event arrives for this long."),
            ]),
        CommandSpec(
            name: "ack", abstract: "Acknowledge events as an app (app.ack).",
            arguments: [ArgumentSpec("ids", help: "Event ids.", kind: .oneOrMore)]),
        CommandSpec(name: "apps", abstract: "List registered apps, manifest errors and conflicts."),
        CommandSpec(name: "reload", abstract: "Make the broker re-read its manifests (apps.reload)."),
    ])

enum Exit {
    static let ok: Int32 = 0
    static let remote: Int32 = 1
    static let unavailable: Int32 = 69
    static let software: Int32 = 70
}

func writeErr(_ s: String) {
    var b = Array(s.utf8)
    b.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
}

func writeOut(_ s: String) {
    var b = Array(s.utf8)
    b.withUnsafeMutableBytes { buf in
        var off = 0
        while off < buf.count {
            let n = write(1, buf.baseAddress! + off, buf.count - off)
            if n <= 0 { break }
            off += n
        }
    }
}

struct Session {
    let conn: BrokerConnection
    let json: Bool
}

func socketPath(_ cmd: ParsedCommand) -> String { cmd.value("socket") ?? DefaultPaths.socket() }

func connect(_ cmd: ParsedCommand, hello: Bool = true) throws -> Session {
    let conn = try BrokerConnection(socketPath: socketPath(cmd))
    if hello {
        let bundle = cmd.value("as")
        let role = cmd.value("role") ?? (bundle == nil ? "tool" : "app")
        guard ["app", "extension", "tool"].contains(role) else {
            throw cmd.usageError("option '--role' must be app, extension or tool; got '\(role)'")
        }
        try conn.hello(role: role, bundleID: bundle, token: cmd.value("token"))
    }
    return Session(conn: conn, json: cmd.flag("json"))
}

func printJSON(_ v: JSONValue, compact: Bool) {
    writeOut((compact ? v.compactText : v.prettyText()) + "\n")
}

func run(_ cmd: ParsedCommand) throws -> Int32 {
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
            field("pending events", "pendingEvents")
            field("pending shares", "pendingShares")
            field("manifest errors", "manifestErrors")
            writeOut(lines.joined(separator: "\n") + "\n")
        }
        return Exit.ok
    case "open":
        let s = try connect(cmd)
        var p: JSONObject = ["url": .string(cmd.argument("url")!)]
        if let f = cmd.value("fallback") { p["fallback"] = .string(f) }
        let r = try s.conn.call("url.open", .object(p))
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
        let r = try s.conn.call("url.canOpen", ["url": .string(cmd.argument("url")!)])
        if s.json {
            printJSON(r, compact: true)
        } else if r["canOpen"] == .bool(true) {
            writeOut("yes: \(r["app"]?.stringValue ?? "?") via \(r["via"]?.stringValue ?? "?")\n")
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
        return Exit.ok
    case "listen":
        let bundle = cmd.value("as") ?? ProcessInfoLite.env("SHAREBROKER_BUNDLE_ID")
        guard let bundle else { throw cmd.usageError("listen needs --as BUNDLE (or $SHAREBROKER_BUNDLE_ID)") }
        let count = try cmd.int("count")
        let timeout = try cmd.double("timeout")
        let conn = try BrokerConnection(socketPath: socketPath(cmd))
        try conn.hello(role: "app", bundleID: bundle, token: cmd.value("token") ?? ProcessInfoLite.env("SHAREBROKER_TOKEN"))
        try conn.call("app.subscribe")
        var seen = 0
        while count == nil || seen < count! {
            let result = Result { () throws(ClientError) -> BrokerNotification? in
                try conn.nextNotification(timeoutMillis: timeout.map { Int32($0 * 1000) } ?? -1)
            }
            if case .failure(.timeout) = result { break }
            let n = try result.get()
            guard let n else { throw ClientError.connection("the broker closed the connection") }
            guard n.method == "app.event", let params = n.params else { continue }
            writeOut(params.compactText + "\n")
            if cmd.flag("ack"), let id = params["id"] { try conn.call("app.ack", ["ids": [id]]) }
            seen += 1
        }
        return Exit.ok
    case "ack":
        let s = try connect(cmd)
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
        return Exit.ok
    default:
        throw cmd.usageError("unknown command '\(cmd.subcommand)'")
    }
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
        for ext in app["extensions"]?.arrayValue ?? [] {
            out += "    extension \(ext["bundleID"]?.stringValue ?? "?") (\(ext["point"]?.stringValue ?? "?"))\n"
        }
    }
    for e in result["errors"]?.arrayValue ?? [] {
        out += "error: \(e["file"]?.stringValue ?? ""): \(e["field"]?.stringValue ?? ""): \(e["message"]?.stringValue ?? "")\n"
    }
    for c in result["conflicts"]?.arrayValue ?? [] {
        out += "conflict: \(c.compactText)\n"
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
        case .connection, .timeout:
            writeErr("shareclient: error: \(e)\n")
            return Exit.unavailable
        }
    } catch let e as UsageError {
        throw e
    } catch {
        writeErr("shareclient: internal error: \(error)\n")
        return Exit.software
    }
}
