// `sharebroker`: runs the broker (`serve`) and the offline tools that work on its state.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareBrokerCore
import ShareCommandLine
import ShareProtocol
import ShareRouting
import ShareSystem

let root = CommandSpec(
    name: "sharebroker",
    abstract: "A local share-and-deep-link broker: JSON-RPC 2.0 over a Unix domain socket.",
    discussion: """
        Apps, share extensions and tools connect to the broker's socket. It loads app manifests from
        STATE/apps/*.json and association documents from STATE/associations/HOST.json.
        """,
    subcommands: [
        CommandSpec(
            name: "serve",
            abstract: "Run the broker in the foreground until SIGTERM or SIGINT (SIGHUP reloads manifests).",
            options: [
                .option(
                    "socket", valueName: "path", help: "Unix socket to listen on.",
                    default: "$SHAREBROKER_SOCKET, else $XDG_RUNTIME_DIR/sharebroker.sock, else ${TMPDIR:-/tmp}/sharebroker-UID/sharebroker.sock"),
                .option(
                    "state", valueName: "dir", help: "State directory (apps/, associations/, groups/).",
                    default: "$SHAREBROKER_STATE, else $XDG_STATE_HOME/sharebroker, else ~/.local/state/sharebroker"),
                .option(
                    "socket-mode", valueName: "mode",
                    help: "Permission bits of the socket, in octal: 600 (your user), 660 (and the socket's group), 666 (every user; manifests' uids decide who may act as an app). Missing directories of the socket's path are created passable for them.",
                    default: "600"),
                .option(
                    "socket-group", valueName: "group",
                    help: "Group the socket belongs to, a name or a number (you must be root or in the group); with --socket-mode 660 its members may connect.",
                    default: "your primary group"),
                .option("max-message", valueName: "bytes", help: "Largest accepted message (1024 to 1073741824).", default: "4194304"),
                .option(
                    "max-output", valueName: "bytes",
                    help: "Unread output a client may have (at least 4096): past it its requests get -32007, and a client that does not read is dropped.",
                    default: "2 x max-message + 1 MiB"),
                .option(
                    "max-total-output", valueName: "bytes",
                    help: "Unread output all clients together may have (at least 65536): past it, a client holding more than its fair share unread (1/1024 of it, at most 1 MiB, at least its event window plus 64 KiB) gets -32007, and one over its --max-output that does not read for 1 s is dropped.",
                    default: "1073741824"),
                .option("log-level", valueName: "level", help: "trace, debug, info, warning or error.", default: "info"),
                .option(
                    "max-connections-per-user", valueName: "n", help: "Connections one user id may hold open (at least 1).",
                    default: "16384"),
                .option(
                    "max-pending-events", valueName: "n", help: "Pending (unacked) events one app may have (at least 1).",
                    default: "1000000"),
                .option(
                    "max-pending-event-bytes", valueName: "bytes",
                    help: "Journal bytes one app's pending events may take (at least 4096; then url.open for it is -32005).",
                    default: "134217728"),
                .option(
                    "max-group-share-bytes", valueName: "bytes",
                    help: "Bytes one app group's pending shares may hold together, files included (at least 4096; then share.send to it is -32005).",
                    default: "4294967296"),
                .option(
                    "max-requests-in-flight", valueName: "n",
                    help: "Requests one connection may have waiting for their replies, at least 1 (then it is not read until replies go out).", default: "4096"),
                .option(
                    "max-batch", valueName: "n",
                    help: "Most members of one JSON-RPC batch, at least 1 (a larger batch gets one -32600 and none of it runs).",
                    default: "10000"),
                .option(
                    "journal-segment-size", valueName: "bytes",
                    help: "Size at which a journal starts a new segment file, 4096 to 1073741824 (smaller: old records go sooner, more files).",
                    default: "16777216"),
                .option(
                    "launch-timeout", valueName: "seconds",
                    help: "How long an app launched on demand may run without subscribing before it is stopped (SIGTERM, then SIGKILL 5 s later) and relaunched with backoff; 0 to 86400, 0: never stopped.",
                    default: "30"),
                .option(
                    "launch-grace", valueName: "seconds",
                    help: "How long after its start the broker waits before launching apps for events a previous run left pending, so that apps still running reconnect first instead of being started twice; 0 to 3600, 0: at once.",
                    default: "2"),
                .flag(
                    "no-commit-pacing",
                    help: "Start each group commit as soon as the previous one is durable, without waiting for the clients it just answered."),
            ]),
        CommandSpec(
            name: "explain",
            abstract: "Explain, step by step, which app a URL opens, from the manifests and association documents in the state directory.",
            discussion: "Works offline (no broker needed). Exit 0 when the URL opens, 1 when nothing handles it, 64 for an invalid URL, 66 when the state directory is missing.",
            options: [
                .option("state", valueName: "dir", help: "State directory to read.", default: "as for serve"),
                .option("fallback", valueName: "url", help: "A fallback URL, as url.open takes it."),
                .flag("json", help: "Print the explanation as JSON."),
            ],
            arguments: [ArgumentSpec("url", help: "The URL to explain.")]),
        CommandSpec(
            name: "check-association",
            abstract: "Validate an apple-app-site-association document and show what URLs it gives to which app.",
            discussion:
                "Exit 0 when the document is valid, 1 when it is malformed (said on stderr, naming the exact key; with --json on stdout) or cannot be read, 64 on a usage error such as an invalid --url. A --url is matched only when it could be a universal link by this document: https, on the document's domain (or a subdomain, for apps whose entry is applinks:*.DOMAIN).",
            options: [
                .option("url", valueName: "url", help: "Show which app IDs the document gives this URL to.", repeatable: true),
                .option(
                    "domain", valueName: "host",
                    help: "The domain the document is served by (HOST or HOST:PORT, as an applinks: entry names it); a --url on another host is not matched.",
                    default: "the file name without .json, when it names a host, as in STATE/associations/HOST.json"),
                .flag("json", help: "Print the result as JSON."),
            ],
            arguments: [ArgumentSpec("file", help: "The document (e.g. STATE/associations/example.com.json).")]),
        installCommandSpec,
        demoCommandSpec,
    ])

func serve(_ cmd: ParsedCommand) throws -> Int32 {
    for name in ["socket", "state"] where cmd.value(name)?.isEmpty == true {
        throw cmd.usageError("option '--\(name)' needs a path, got an empty one")
    }
    var config = BrokerConfiguration(socketPath: cmd.value("socket"), stateDirectory: cmd.value("state"))
    if let given = cmd.value("socket"), given.utf8.count > UnixSocket.maxPathLength {
        throw cmd.usageError("option '--socket': \(Broker.socketPathTooLong(given))")
    }
    if let text = cmd.value("socket-mode") {
        var digits = Substring(text)
        if digits.hasPrefix("0o") { digits = digits.dropFirst(2) }
        guard (3...4).contains(digits.count), digits.allSatisfy({ ("0"..."7").contains($0) }), let mode = UInt32(digits, radix: 8),
            mode <= 0o777, mode & 0o600 == 0o600
        else {
            throw cmd.usageError(
                "option '--socket-mode' must be octal permission bits that let your user read and write, such as 600, 660 or 666 (no setuid, setgid or sticky bits); got '\(text)'")
        }
        // Connecting to a Unix socket takes its write bit: a group or others bit without it
        // (644, 640) would seem to let them in and not.
        for (bits, who) in [((mode >> 3) & 7, "the group"), (mode & 7, "other users")] where bits != 0 && bits & 2 == 0 {
            throw cmd.usageError(
                "option '--socket-mode' \(text) gives \(who) some permission but not write, which connecting needs: use 600 (your user), 660 (and the group) or 666 (every user)")
        }
        config.socketMode = mode
    }
    if let name = cmd.value("socket-group") {
        if let g = getgrnam(name) {
            config.socketGroup = UInt32(g.pointee.gr_gid)
        } else if let gid = UInt32(name), gid != UInt32.max {
            config.socketGroup = gid
        } else {
            throw cmd.usageError("option '--socket-group': there is no group '\(name)' (give a group name or number)")
        }
        guard config.socketMode & 0o060 != 0 else {
            throw cmd.usageError("option '--socket-group' needs a --socket-mode that lets the group in, such as 660 (the socket is \(String(config.socketMode, radix: 8)))")
        }
    }
    // (Upper bounds far above any real use keep the sums made from them from overflowing.)
    let bytesCap = 1 << 50, countCap = Int(Int32.max)
    if let n = try cmd.int("max-message", atLeast: 1024, atMost: BrokerConfiguration.largestMaxMessage, unit: "bytes") {
        config.maxMessage = n
    }
    if let n = try cmd.int("max-total-output", atLeast: 65536, atMost: bytesCap, unit: "bytes") { config.maxTotalOutput = n }
    if let n = try cmd.int("max-output", atLeast: 4096, atMost: bytesCap, unit: "bytes") { config.maxOutputBuffer = n }
    if let n = try cmd.int("max-connections-per-user", atLeast: 1, atMost: countCap) { config.maxConnectionsPerUID = n }
    if let n = try cmd.int("max-pending-events", atLeast: 1, atMost: countCap) { config.maxPendingEventsPerApp = n }
    if let n = try cmd.int("max-pending-event-bytes", atLeast: 4096, atMost: bytesCap, unit: "bytes") {
        config.maxPendingEventBytesPerApp = n
    }
    if let n = try cmd.int("max-group-share-bytes", atLeast: 4096, atMost: bytesCap, unit: "bytes") { config.maxGroupShareBytes = n }
    if let n = try cmd.int("max-requests-in-flight", atLeast: 1, atMost: countCap) { config.maxRequestsInFlight = n }
    if let n = try cmd.int("max-batch", atLeast: 1, atMost: countCap) { config.maxBatchMembers = n }
    if let n = try cmd.int("journal-segment-size") {
        guard n >= 4096 && n <= 1 << 30 else {
            throw cmd.usageError("option '--journal-segment-size' must be between 4096 and 1073741824 bytes (1 GiB), got \(n)")
        }
        config.journalSegmentLimit = n
    }
    if let t = try cmd.double("launch-timeout") {
        guard t >= 0 && t <= 86_400 else {
            throw cmd.usageError("option '--launch-timeout' must be between 0 and 86400 seconds, got \(cmd.value("launch-timeout") ?? "\(t)")")
        }
        config.launchTimeoutSeconds = t
    }
    if let t = try cmd.double("launch-grace") {
        guard t >= 0 && t <= 3600 else {
            throw cmd.usageError("option '--launch-grace' must be between 0 and 3600 seconds, got \(cmd.value("launch-grace") ?? "\(t)")")
        }
        config.launchGraceAtStartSeconds = t
    }
    if cmd.flag("no-commit-pacing") { config.commitPacing = false }
    if let name = cmd.value("log-level") {
        guard let level = LogLevel(name: name) else {
            throw cmd.usageError("option '--log-level' must be one of trace, debug, info, warning, error; got '\(name)'")
        }
        config.logLevel = level
    }
    let broker: Broker
    do { broker = try Broker(config: config) } catch {
        Console.err("sharebroker: error: \(error)\n")
        return 1
    }
    broker.run()
    return 0
}

func writeOut(_ s: String) { Console.out(s) }

func explain(_ cmd: ParsedCommand) throws -> Int32 {
    let state = cmd.value("state") ?? DefaultPaths.state()
    var st = stat()
    guard stat(state, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
        Console.err("sharebroker: error: the state directory \(state) \(FileIO.exists(state) ? "is not a directory" : "does not exist") (pass --state DIR)\n")
        return 66  // (EX_NOINPUT: not "nothing opens the URL")
    }
    let files = StateFiles.load(stateDirectory: state)
    let url = cmd.argument("url")!
    let e = files.router.explain(url, fallback: cmd.value("fallback"))
    if cmd.flag("json") {
        writeOut(e.json.compactText + "\n")
    } else {
        let malformed = files.router.associations.values.filter { if case .failure = $0 { return true } else { return false } }.count
        let documents = files.router.associations.count - malformed
        var header = "state: \(state) (\(files.registry.apps.count) apps, \(documents) association documents\(malformed > 0 ? ", \(malformed) malformed" : ""))\n"
        for issue in files.registry.issues where issue.fatal { header += "manifest error: \(issue)\n" }
        for (_, err) in files.associationErrors.sorted(by: { $0.key < $1.key }) { header += "association error: \(err)\n" }
        writeOut(header + e.text + "\n")
    }
    switch e.decision {
    case .routed: return 0
    case .noHandler: return 1
    case .invalidURL, .invalidFallback:
        Console.err("sharebroker: error: \(e.decision.errorMessage ?? "invalid URL")\n")
        return 64
    }
}

func checkAssociation(_ cmd: ParsedCommand) throws -> Int32 {
    let path = cmd.argument("file")!
    // Every --url is checked first: a usage error, before anything is read or printed.
    var refs: [(text: String, ref: URLReference)] = []
    for u in cmd.values("url") {
        do { refs.append((u, try URLReference(parsingLeniently: u))) } catch {
            throw cmd.usageError("--url '\(u)' is not a valid URL: \(error.reason)")
        }
    }
    // The document's domain: a URL on another host is matched against that host's document, not
    // this one (as the broker does).
    let domain: String?
    if let given = cmd.value("domain") {
        guard let host = AssociatedDomainEntry.documentDomain(given) else {
            throw cmd.usageError("--domain '\(given)' is not a host (HOST or HOST:PORT, as an applinks: entry names it)")
        }
        domain = URLRouter.domainKey(host)
    } else {
        domain = associationDomain(fileName: path)
    }
    let bytes: [UInt8]
    do { bytes = try FileIO.readFile(path, limit: 8 * 1024 * 1024) } catch {
        Console.err("sharebroker: error: cannot read \(path): \(error)\n")
        return 1  // as for a document with errors: the file cannot be checked
    }
    let doc: AssociationDocument
    switch AssociationDocument.load(bytes) {
    case .failure(let err):
        if cmd.flag("json") {
            writeOut(JSONValue.object(["valid": false, "file": .string(path), "key": .string(err.key), "reason": .string(err.reason)]).compactText + "\n")
        } else {
            Console.err("sharebroker: error: \(path): malformed: \(err)\n")
        }
        return 1
    case .success(let d): doc = d
    }
    var results: [JSONValue] = []
    var text = "\(path): valid; app IDs: \(doc.appIDs.isEmpty ? "(none)" : doc.appIDs.joined(separator: ", "))\n"
    for note in doc.notes { text += "note: \(note)\n" }
    if !refs.isEmpty && domain == nil {
        text += "note: the document's domain is not known from its file name (give --domain): the URLs' hosts are not checked\n"
    }
    for (u, ref) in refs {
        var opens: [String] = []
        var perApp: [JSONValue] = []
        text += "\(u):\n"
        // Only an https URL on the document's domain (or, for an applinks:*.DOMAIN entry, a
        // subdomain) can be a universal link by this document.
        var notMatched: String? = nil
        var scope: String? = nil
        let urlHost = ref.host ?? ""
        if ref.normalizedScheme != "https" {
            notMatched = "not https: universal links are https only, so this document gives it to no app"
        } else if urlHost.isEmpty || urlHost.hasPrefix(".") || urlHost.hasSuffix(".") || urlHost.contains("..") {
            // (as the broker routes: a host with an empty label is no applinks: entry's host nor
            // a subdomain of one, so no document decides for it, its "own" included)
            notMatched = "the host '\(urlHost)' has an empty label: no applinks: entry covers it, so no document makes it a universal link"
        } else if let domain {
            let host = ref.host ?? ""
            let hostKey = URLRouter.domainKey((URLReference.idnaHost(host) ?? host) + (ref.port.map { ":\($0)" } ?? ""))
            let (docHost, docPort) = splitPort(domain)
            let (urlHost, urlPort) = splitPort(hostKey)
            let isSubdomain = urlPort == docPort && urlHost.hasSuffix("." + docHost) && !urlHost.hasPrefix(".") && !urlHost.contains("..")
            if isSubdomain {
                scope = "a subdomain of \(domain): this document decides only for apps whose entry is 'applinks:*.\(domain)'"
            } else if hostKey != domain {
                notMatched = "the host '\(hostKey)' is not \(domain), whose document this is: its own document decides (associations/\(hostKey).json)"
            }
        }
        if let why = notMatched {
            text += "  \(why)\n  → no app\n"
            results.append(["url": .string(u), "opens": .null, "apps": .array([]), "reason": .string(why)])
            continue
        }
        if let scope { text += "  note: \(scope)\n" }
        for appID in doc.appIDs {
            let m = doc.match(url: ref, appID: appID)
            if m.outcome == .matched { opens.append(appID) }
            text += "  \(appID): \(m.outcome.rawValue)\(m.pattern.map { " by \($0)" } ?? "")\n"
            for step in m.trail { text += "    \(step)\n" }
            perApp.append(["appID": .string(appID), "outcome": .string(m.outcome.rawValue), "trail": .array(m.trail.map { .string($0) })])
        }
        text += "  → \(opens.isEmpty ? "no app: this document makes it no universal link" : "opens " + opens[0])\n"
        var entry: JSONObject = ["url": .string(u), "opens": opens.first.map { .string($0) } ?? .null, "apps": .array(perApp)]
        if let scope { entry["note"] = .string(scope) }
        results.append(.object(entry))
    }
    if cmd.flag("json") {
        writeOut(JSONValue.object(["valid": true, "file": .string(path), "domain": domain.map { .string($0) } ?? .null, "appIDs": .array(doc.appIDs.map { .string($0) }), "notes": .array(doc.notes.map { .string($0) }), "urls": .array(results)]).compactText + "\n")
    } else {
        writeOut(text)
    }
    return 0
}


/// The domain a document's file name gives (`example.com.json` → `example.com`, as the broker
/// reads `STATE/associations/`); nil when the name is no host (`apple-app-site-association`).
func associationDomain(fileName path: String) -> String? {
    let name = path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
    guard name.hasSuffix(".json") else { return nil }
    // (a name with a dot, or localhost: a bare word such as `aasa.json` names a file, not a host)
    guard let host = AssociatedDomainEntry.documentDomain(String(name.dropLast(5))) else { return nil }
    let bare = splitPort(host).host
    return bare.contains(".") || bare == "localhost" ? URLRouter.domainKey(host) : nil
}

/// `host:port` split at the port's colon ("" when there is none).
func splitPort(_ key: String) -> (host: String, port: String) {
    guard let colon = key.lastIndex(of: ":"), !key.hasSuffix("]") else { return (key, "") }
    return (String(key[..<colon]), String(key[key.index(after: colon)...]))
}

runMain(root: root, version: "sharebroker \(SharebrokerVersion.string)") { cmd in
    switch cmd.subcommand {
    case "serve": return try serve(cmd)
    case "explain": return try explain(cmd)
    case "check-association": return try checkAssociation(cmd)
    case "install": return try runInstall(cmd)
    case "demo": return try runDemo(cmd)
    default: throw cmd.usageError("unknown command")
    }
}
