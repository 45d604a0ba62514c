// `shareclient defaults get|set|remove|list|watch GROUP [KEY] [JSON]`: an app group's shared
// defaults (defaults.*), as an app or extension of the group (--as BUNDLE, --token), values as JSON.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareClient
import ShareCommandLine
import ShareProtocol
import ShareSystem

private let groupArgument = ArgumentSpec("group", help: "The app group, e.g. group.com.mycompany.myapp.")
private let keyArgument = ArgumentSpec("key", help: "The key.")
private let ifVersionOption = OptionSpec.option(
    "if-version", valueName: "n", help: "Only when the group is at version N (compare-and-set); exit 1 otherwise.")

/// The `defaults` command tree (added to shareclient's subcommands).
let defaultsCommandSpec = CommandSpec(
    name: "defaults",
    abstract: "Read, write and watch an app group's shared defaults (like UserDefaults(suiteName:)).",
    discussion: """
        The session is an app or extension whose manifest lists GROUP in its appGroups: --as BUNDLE \
        (its role, app or extension, is the bundle's own), else $SHAREBROKER_BUNDLE_ID; its token is --token, \
        else $SHAREBROKER_TOKEN. Values are JSON. Each group has a version that rises with every change.
        """,
    subcommands: [
        CommandSpec(
            name: "get", abstract: "Print the value of KEY as JSON (exit 1 when there is no such key).",
            arguments: [groupArgument, keyArgument]),
        CommandSpec(
            name: "set", abstract: "Set KEY to a JSON value and print the group's new version.",
            discussion: """
                JSON is JSON text: 42, 1.5e-7, true, null, '"text"', '[1,2]', '{"a":1}'. With --string it is \
                stored as a plain string; '-' reads the value from standard input.
                """,
            options: [.flag("string", help: "Store JSON as a plain string, not as JSON text ('-': stdin without its final newline)."), ifVersionOption],
            arguments: [
                groupArgument, keyArgument, ArgumentSpec("json", help: "The value (JSON text; '-': standard input)."),
            ]),
        CommandSpec(
            name: "remove", abstract: "Remove KEY (nothing changes when there is no such key).",
            options: [ifVersionOption],
            arguments: [groupArgument, keyArgument]),
        CommandSpec(
            name: "list", abstract: "Print every key of the group with its value, as one JSON object, then its version.",
            arguments: [groupArgument]),
        CommandSpec(
            name: "watch",
            abstract: "Print each change of the group (or of the given keys) as one JSON line, until interrupted (or --count, --timeout).",
            discussion: "Each line is a defaults.changed notification: {group, key, value | removed, version}.",
            options: [
                .option("count", valueName: "n", help: "Exit after N changes."),
                .option(
                    "timeout", valueName: "seconds",
                    help: "Exit when no change arrives for this long (exit 1 when --count changes have not all come)."),
            ],
            arguments: [groupArgument, ArgumentSpec("key", help: "Only these keys.", kind: .variadic)]),
    ])

/// Runs `defaults get|set|remove|list|watch` against the broker at `socket`; returns the exit code.
/// Broker errors are thrown as `ClientError` (exit 1 or 69, as for every command).
func runDefaults(_ cmd: ParsedCommand, socket: String) throws -> Int32 {
    let json = cmd.flag("json")
    let group = cmd.argument("group")!
    var params: JSONObject = ["group": .string(group)]
    if let key = cmd.argument("key"), cmd.subcommand != "defaults watch" { params["key"] = .string(key) }
    if let text = cmd.value("if-version") {
        guard let n = UInt64(text) else {
            throw cmd.usageError("option '--if-version' expects a version (a non-negative integer), got '\(text)'")
        }
        params["ifVersion"] = .number(String(n))
    }
    // Check the input before connecting.
    if cmd.subcommand == "defaults set" {
        var text = cmd.argument("json")!
        if text == "-" {
            text = readStandardInput()
            // A plain string read from stdin loses its final newline (one; the shell's $(...)
            // drops them all): `echo hi | ... - --string` stores "hi".
            if cmd.flag("string") {
                if text.hasSuffix("\r\n") { text.removeLast() } else if text.hasSuffix("\n") { text.removeLast() }
            }
        }
        if cmd.flag("string") {
            params["value"] = .string(text)
        } else {
            do { params["value"] = try JSONParser.parse(text) } catch {
                throw cmd.usageError("the value is not valid JSON (\(error)); quote a string ('\"text\"') or pass --string")
            }
        }
    }
    let (count, timeout) = try countAndTimeout(cmd)

    let conn = try defaultsSession(cmd, socket: socket)
    switch cmd.subcommand {
    case "defaults get":
        let r = try conn.call("defaults.get", .object(params))
        let exists = r["exists"] == .bool(true)
        if json {
            writeOut(r.compactText + "\n")
        } else if exists {
            writeOut((r["value"] ?? .null).prettyText() + "\n")
        } else {
            writeErr("shareclient: no key '\(cmd.argument("key")!)' in the defaults of \(group)\n")
        }
        return exists ? Exit.ok : Exit.remote
    case "defaults set":
        let r = try conn.call("defaults.set", .object(params))
        writeOut(json ? r.compactText + "\n" : "version \(r["version"]?.compactText ?? "?")\n")
        return Exit.ok
    case "defaults remove":
        let r = try conn.call("defaults.remove", .object(params))
        if json {
            writeOut(r.compactText + "\n")
        } else {
            let v = r["version"]?.compactText ?? "?"
            let key = cmd.argument("key")!
            writeOut(r["removed"] == .bool(true) ? "removed \(key) (version \(v))\n" : "no key \(key) (version \(v))\n")
        }
        return Exit.ok
    case "defaults list":
        let r = try conn.call("defaults.list", .object(params))
        if json {
            writeOut(r.compactText + "\n")
        } else {
            writeOut((r["values"] ?? [:]).prettyText() + "\n" + "version \(r["version"]?.intValue ?? 0)\n")
        }
        return Exit.ok
    case "defaults watch":
        let keys = cmd.arguments("key")
        if !keys.isEmpty { params["keys"] = .array(keys.map { .string($0) }) }
        try conn.call("defaults.watch", .object(params))
        var seen = 0
        while count == nil || seen < count! {
            let next = Result { () throws(ClientError) -> BrokerNotification? in
                try conn.nextNotification(
                    timeoutMillis: timeout.map { Int32(max(0, min($0 * 1000, 2_000_000_000))) } ?? -1)
            }
            if case .failure(.timeout) = next { return countNotReached(seen, count, "changes") }
            guard let n = try next.get() else { throw ClientError.connection("the broker closed the connection") }
            guard n.method == "defaults.changed", let p = n.params else { continue }
            writeOut(p.compactText + "\n")
            seen += 1
        }
        return Exit.ok
    default:
        throw cmd.usageError("unknown command '\(cmd.subcommand)'")
    }
}

/// Connects and says hello as --as BUNDLE (else $SHAREBROKER_BUNDLE_ID) with --token (else
/// $SHAREBROKER_TOKEN); role --role, else the bundle's own (app or extension), else tool (which
/// the broker refuses).
private func defaultsSession(_ cmd: ParsedCommand, socket: String) throws -> BrokerConnection {
    let bundle = cmd.value("as") ?? ProcessInfoLite.env("SHAREBROKER_BUNDLE_ID")
    try checkRole(cmd, bundle: bundle, actsAsBundle: true)  // a usage error before any connection
    // (group defaults are an app's or extension's: without one it is a usage error, as for
    // the other commands that act as one, not the broker's "not for role tool")
    if bundle == nil && cmd.value("role") == nil {
        throw cmd.usageError(
            "defaults acts as an app or extension: it needs --as BUNDLE, one listing the group (or $SHAREBROKER_BUNDLE_ID)")
    }
    let conn = try openConnection(socket)
    try sayHello(
        conn, cmd, bundle: bundle, token: tokenFor(cmd, bundle: bundle), roleWithBundle: "app")
    return conn
}

/// All of standard input as text.
private func readStandardInput() -> String {
    var bytes: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buf.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
        if n > 0 {
            bytes.append(contentsOf: buf[0..<n])
        } else if n < 0 && errno == EINTR {
            continue
        } else {
            break
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}
