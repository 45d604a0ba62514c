// `sharebroker demo`: the whole idea in a few seconds. Starts a private broker (this same executable,
// `serve`) on a temporary socket and state directory, installs the seed apps, and plays the seed flows,
// printing every message that crosses the socket:
//   1. seed 000: a share extension shares a YouTube link with open: true; the broker launches the app on
//      demand (this executable again, as `sharebroker demo --play-app`), which receives the event, fetches
//      the share, completes it and acknowledges the event (its lines are tailed from its log);
//   2. seed 003: a universal link (continueUserActivity) and an excluded path that goes to the browser;
//   3. seed 004: a group-defaults change, written with compare-and-set and seen by a watching widget.

import Foundation
import ShareClient
import ShareCommandLine
import ShareProtocol
import ShareSystem

/// The `demo` subcommand's description.
let demoCommandSpec = CommandSpec(
    name: "demo",
    abstract: "Play the seed flows on a private broker, printing what crosses the socket (a few seconds).",
    discussion: """
        Starts 'sharebroker serve' on a temporary socket and state directory, installs the seed apps \
        (manifests and an apple-app-site-association document) and plays: a share extension sharing a \
        YouTube link with open: true, the app launched on demand (this program, as 'sharebroker demo \
        --play-app') receiving the event, fetching and completing the share and acknowledging the event; \
        a universal link to rw-universal-links-final.herokuapp.com; and a group-defaults change seen by a \
        watching widget. Lines starting with → are requests, ← answers and notifications (shortened). \
        Exit 0 when every step worked, 1 otherwise (the message names the step), 130 when interrupted. The \
        broker is stopped and the temporary directory removed unless --keep.
        """,
    options: [
        .flag("keep", help: "Leave the broker running and keep its directory, to explore it with shareclient."),
        .option(
            "state", valueName: "dir", help: "State directory to use and keep (empty, or a previous demo's).",
            default: "a temporary directory"),
        .flag("play-app", help: "Internal: act as the demo's app (the broker launches 'sharebroker demo --play-app')."),
    ])

/// Runs `sharebroker demo` (or, with `--play-app`, the demo's app).
func runDemo(_ cmd: ParsedCommand) throws -> Int32 {
    if cmd.flag("play-app") { return DemoApp().run() }
    var stateDirectory: String? = nil
    if let dir = cmd.value("state") {
        let absolute = DemoPaths.absolute(dir)
        if let problem = DemoPaths.unusableState(absolute) { throw cmd.usageError("option '--state': \(problem)") }
        stateDirectory = absolute
    }
    let demo = Demo(keep: cmd.flag("keep"), stateDirectory: stateDirectory)
    return demo.run()
}

// MARK: - Output

/// Line-oriented output to a file descriptor (stdout for the demo, stderr for the app), unbuffered so
/// that lines from the demo and the app's log interleave in the order they happened.
struct DemoOutput {
    let fd: Int32

    func line(_ s: String = "") {
        var bytes = Array((s + "\n").utf8)
        bytes.withUnsafeMutableBytes { buf in
            var off = 0
            while off < buf.count {
                let n = write(fd, buf.baseAddress! + off, buf.count - off)
                if n <= 0 { break }
                off += n
            }
        }
    }
}

/// A JSON value on one line, cut to `limit` characters.
func demoShort(_ v: JSONValue?, limit: Int = 150) -> String {
    guard let v else { return "{}" }
    return demoShort(v.compactText, limit: limit)
}

func demoShort(_ s: String, limit: Int = 150) -> String {
    s.count <= limit ? s : String(s.prefix(limit - 1)) + "…"
}

/// Shared with the signal handler (another thread): whether the demo was interrupted, and the broker's pid.
final class DemoInterrupt: @unchecked Sendable {
    private let lock = NSLock()
    private var interrupted = false
    private var brokerPID: Int32? = nil

    var isSet: Bool {
        lock.lock()
        defer { lock.unlock() }
        return interrupted
    }

    /// Records the interruption; returns the broker's pid when it is known.
    func set() -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        interrupted = true
        return brokerPID
    }

    /// Records the broker's pid; returns whether the demo was already interrupted.
    func started(_ pid: Int32) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        brokerPID = pid
        return interrupted
    }
}

/// A step that went wrong: the demo prints it and exits 1.
struct DemoFailure: Error, CustomStringConvertible {
    var message: String
    /// The JSON-RPC error code, when the broker answered one.
    var code: Int?
    init(_ message: String, code: Int? = nil) {
        self.message = message
        self.code = code
    }
    var description: String { message }
}

/// One connection that prints each request (→), answer (←) and notification (←) with its speaker's name.
final class DemoPeer {
    let name: String
    let conn: BrokerConnection
    let out: DemoOutput
    let prefix: String
    static let timeoutMillis: Int32 = 5000
    static let width = 150

    init(_ name: String, socket: String, out: DemoOutput, indent: String = "  ") throws(DemoFailure) {
        self.name = name
        self.out = out
        self.prefix = indent + name
        do { conn = try BrokerConnection(socketPath: socket) } catch {
            throw DemoFailure("\(name) cannot connect: \(error)")
        }
    }

    /// One line as this peer, cut to the demo's width.
    func show(_ text: String) {
        out.line(demoShort(prefix + " " + text, limit: DemoPeer.width))
    }

    /// Calls a method, printing the exchange; a JSON-RPC error is printed and thrown.
    @discardableResult
    func call(_ method: String, _ params: JSONValue = [:]) throws(DemoFailure) -> JSONValue {
        show("→ \(method) \(params.compactText)")
        do {
            let r = try conn.call(method, params, timeoutMillis: DemoPeer.timeoutMillis)
            show("← \(r.compactText)")
            return r
        } catch {
            if case .rpc(let e) = error {
                show("← error \(e.code): \(e.message)")
                throw DemoFailure("\(name) \(method): \(error)", code: e.code)
            }
            throw DemoFailure("\(name) \(method): \(error)")
        }
    }

    /// Calls a method that is expected to fail with `code`; prints the exchange.
    func callExpectingError(_ method: String, _ params: JSONValue, code: Int) throws(DemoFailure) -> RPCError {
        show("→ \(method) \(params.compactText)")
        do {
            let r = try conn.call(method, params, timeoutMillis: DemoPeer.timeoutMillis)
            show("← \(r.compactText)")
            throw DemoFailure("\(name) \(method) succeeded; expected error \(code)")
        } catch let e as DemoFailure {
            throw e
        } catch {
            guard case .rpc(let e)? = error as? ClientError, e.code == code else {
                throw DemoFailure("\(name) \(method): \(error); expected error \(code)")
            }
            show("← error \(e.code): \(e.message)")
            return e
        }
    }

    /// Waits for the next notification named `method` and prints it.
    func next(_ method: String, timeoutMillis: Int32 = 5000) throws(DemoFailure) -> JSONValue {
        while true {
            let n: BrokerNotification?
            do { n = try conn.nextNotification(timeoutMillis: timeoutMillis) } catch {
                if case .timeout = error {
                    throw DemoFailure("\(name) received no \(method) within \(timeoutMillis / 1000) s")
                }
                throw DemoFailure("\(name) waiting for \(method): \(error)")
            }
            guard let n else {
                throw DemoFailure("the broker closed \(name)'s connection while it waited for \(method)")
            }
            show("← \(n.method) \(demoShort(n.params, limit: 1000))")
            if n.method == method { return n.params ?? .null }
        }
    }
}

// MARK: - Paths

enum DemoPaths {
    static func absolute(_ p: String) -> String { FileIO.absolutePath(p) }

    /// This executable's absolute path (what the demo runs as `serve`, and what the app's `launch` names).
    static func executable() -> String {
        #if os(Linux)
            if let p = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return p }
        #endif
        if let p = Bundle.main.executableURL?.resolvingSymlinksInPath().path,
            FileManager.default.isExecutableFile(atPath: p)
        {
            return p
        }
        let arg0 = CommandLine.arguments[0]
        if arg0.contains("/") { return absolute(arg0) }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let candidate = "\(dir)/\(arg0)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return absolute(candidate) }
        }
        return arg0
    }

    /// Why `dir` cannot be the demo's state directory (nil when it can): it must be empty, missing, or a
    /// previous demo's (its apps/ holds only demo-*.json), so the demo never mixes with a real broker's state.
    static func unusableState(_ dir: String) -> String? {
        let fm = FileManager.default
        var isDir: ObjCBool = false
        guard fm.fileExists(atPath: dir, isDirectory: &isDir) else { return nil }
        guard isDir.boolValue else { return "'\(dir)' is not a directory" }
        let entries = (try? fm.contentsOfDirectory(atPath: dir)) ?? []
        if entries.isEmpty { return nil }
        let apps = (try? fm.contentsOfDirectory(atPath: dir + "/apps")) ?? []
        if !apps.isEmpty && apps.allSatisfy({ $0.hasPrefix("demo-") }) { return nil }
        return "'\(dir)' is not empty and not a previous demo's state directory; give a new or empty directory"
    }

    /// A new private directory (0700) in `$TMPDIR`, else /tmp; /tmp too when `$TMPDIR` is so
    /// long that the socket's path in it would not fit (about 108 bytes).
    static func makeTemporaryDirectory() throws(DemoFailure) -> String {
        var base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        if !base.hasPrefix("/") || base.utf8.count > 60 { base = "/tmp" }  // (+ /sbdemo-XXXXXX/s.sock, and room to spare)
        var template = Array("\(base)/sbdemo-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw DemoFailure("cannot create a temporary directory in \(base): \(String(cString: strerror(errno)))")
        }
        return String(cString: p)
    }
}

// MARK: - The seed apps

enum DemoSeeds {
    static let app = "com.mycompany.myapp"
    static let shareExtension = "com.mycompany.myapp.share"
    static let group = "group.com.mycompany.myapp"
    static let youTube = "https://youtu.be/dQw4w9WgXcQ"
    static let ulApp = "com.razeware.UniversalLinksTutorial"
    static let ulHost = "rw-universal-links-final.herokuapp.com"
    static let browser = "com.example.browser"
    static let statsApp = "com.junyeongpark.Covid19Stats"
    static let widget = "com.junyeongpark.Covid19Stats.WatchlistStatsWidget"
    static let statsGroup = "group.junyeongPark.Covid19Stats"

    /// File name under STATE/apps → manifest. `launch` runs this executable as the demo's app.
    static func manifests(executable: String) -> [(String, JSONValue)] {
        [
            (
                "demo-000-myapp.json",
                [
                    "bundleID": .string(app), "name": "My App", "urlSchemes": ["deeplinkmyapp"],
                    "appGroups": [.string(group)],
                    "launch": [.string(executable), "demo", "--play-app"],
                    "extensions": [
                        [
                            "bundleID": .string(shareExtension), "point": "com.apple.share-services",
                            "name": "Send to My App",
                            "appGroups": [.string(group)],
                            "activationRule": [
                                "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
                                "NSExtensionActivationWebURLPredicate":
                                    "SUBQUERY(absoluteURL, $url, $url CONTAINS 'youtube.com' OR $url CONTAINS 'youtu.be').@count > 0",
                            ],
                        ]
                    ],
                ]
            ),
            (
                "demo-003-universallinks.json",
                [
                    "bundleID": .string(ulApp), "teamID": "KFCNEC27GU", "name": "UniversalLinks",
                    "associatedDomains": [.string("applinks:" + ulHost)],
                ]
            ),
            (
                "demo-004-covid19stats.json",
                [
                    "bundleID": .string(statsApp), "name": "Covid19Stats", "urlSchemes": ["stats"],
                    "appGroups": [.string(statsGroup)],
                    "extensions": [
                        [
                            "bundleID": .string(widget), "point": "com.apple.widgetkit-extension", "name": "Watchlist",
                            "appGroups": [.string(statsGroup)],
                        ]
                    ],
                ]
            ),
            ("demo-browser.json", ["bundleID": .string(browser), "name": "Browser", "urlSchemes": ["https", "http"]]),
        ]
    }

    /// The apple-app-site-association document rw-universal-links-final.herokuapp.com serves.
    static let association: JSONValue = [
        "applinks": [
            "details": [
                [
                    "appIDs": [.string("KFCNEC27GU." + ulApp)],
                    "components": [
                        ["/": "/computers/*/buy", "exclude": true, "comment": "checkout stays on the web"],
                        ["/": "/computers/*"],
                    ],
                ]
            ]
        ]
    ]
}

// MARK: - The demo

final class Demo {
    let keep: Bool
    let out = DemoOutput(fd: 1)
    let executable = DemoPaths.executable()
    let userState: String?
    var tmp = ""
    var socket = ""
    var state = ""
    var brokerLog = ""
    var broker: Process? = nil
    var signalSources: [any DispatchSourceSignal] = []
    let interrupt = DemoInterrupt()
    var appLogOffset: UInt64 = 0
    let started = Date()

    init(keep: Bool, stateDirectory: String?) {
        self.keep = keep
        self.userState = stateDirectory
    }

    func run() -> Int32 {
        signal(SIGPIPE, SIG_IGN)  // output piped into `head`: keep going, and still clean up
        stopOnInterrupt()
        out.line("sharebroker demo: the iOS share-extension and deep-link flows, through a private broker")
        do {
            try setUp()
            try checkInterrupt()
            try playShare()
            try checkInterrupt()
            try playUniversalLink()
            try checkInterrupt()
            try playDefaults()
        } catch {
            out.line()
            if interrupt.isSet {
                out.line("sharebroker demo: interrupted")
                finish(passed: false)
                return 130
            }
            out.line("sharebroker demo: FAILED: \(error)")
            showLogs()
            finish(passed: false)
            return 1
        }
        let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
        out.line()
        out.line(
            "demo passed in \(seconds) s: share sent, app launched, event received, share completed, universal link, defaults changed"
        )
        finish(passed: true)
        return 0
    }

    // MARK: Setting up

    func setUp() throws(DemoFailure) {
        tmp = try DemoPaths.makeTemporaryDirectory()
        socket = tmp + "/s.sock"
        state = userState ?? tmp + "/state"
        brokerLog = tmp + "/broker.log"
        out.line()
        out.line("• installing the seed apps into \(state)")
        try write(JSONValue.object([:]), to: nil)  // creates apps/ and associations/
        for (file, manifest) in DemoSeeds.manifests(executable: executable) {
            try write(manifest, to: "apps/\(file)")
        }
        try write(DemoSeeds.association, to: "associations/\(DemoSeeds.ulHost).json")
        out.line(
            "  apps/demo-000-myapp.json           \(DemoSeeds.app): scheme deeplinkmyapp, launch: sharebroker demo --play-app"
        )
        out.line(
            "                                     + extension \(DemoSeeds.shareExtension): one web URL on youtube.com or youtu.be"
        )
        out.line("  apps/demo-003-universallinks.json  \(DemoSeeds.ulApp): applinks:\(DemoSeeds.ulHost)")
        out.line("  apps/demo-004-covid19stats.json    \(DemoSeeds.statsApp) + widget, group \(DemoSeeds.statsGroup)")
        out.line("  apps/demo-browser.json             \(DemoSeeds.browser): schemes https, http")
        out.line("  associations/\(DemoSeeds.ulHost).json: /computers/* except /computers/*/buy")

        out.line()
        out.line("• starting a private broker")
        out.line("  \(executable) serve --socket \(socket) --state \(state) --log-level warning")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = ["serve", "--socket", socket, "--state", state, "--log-level", "warning"]
        _ = FileManager.default.createFile(atPath: brokerLog, contents: nil)
        guard let log = FileHandle(forWritingAtPath: brokerLog) else { throw DemoFailure("cannot write \(brokerLog)") }
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = log
        p.standardError = log
        var env = ProcessInfo.processInfo.environment
        env["SHAREBROKER_SOCKET"] = nil
        env["SHAREBROKER_STATE"] = nil
        p.environment = env
        do { try p.run() } catch { throw DemoFailure("cannot start the broker (\(executable)): \(error)") }
        try? log.close()
        broker = p
        if interrupt.started(p.processIdentifier) { throw DemoFailure("interrupted") }
        let deadline = Date().addingTimeInterval(10)
        while true {
            if !p.isRunning {
                throw DemoFailure("the broker exited at start with status \(p.terminationStatus)")
            }
            if (try? BrokerConnection(socketPath: socket)) != nil { break }
            if Date() > deadline { throw DemoFailure("the broker did not listen on \(socket) within 10 s") }
            usleep(20_000)
        }
        out.line("  broker pid \(p.processIdentifier) is listening on \(socket)")
        let tool = try DemoPeer("[tool]", socket: socket, out: out)
        try tool.call("hello", ["role": "tool"])
        let apps = try tool.call("apps.list")
        let errors = apps["errors"]?.arrayValue ?? []
        guard errors.isEmpty else { throw DemoFailure("the broker refused a demo manifest: \(errors[0].compactText)") }
        let loaded = (apps["apps"]?.arrayValue ?? []).compactMap { $0["bundleID"]?.stringValue }
        for bundle in [DemoSeeds.app, DemoSeeds.ulApp, DemoSeeds.statsApp, DemoSeeds.browser]
        where !loaded.contains(bundle) {
            throw DemoFailure("the broker did not load \(bundle) (apps: \(loaded))")
        }
    }

    /// Ctrl-C or SIGTERM while the demo runs: the broker is stopped at once (unless --keep), and the demo
    /// notices at its next step and cleans up as at any other end, exiting 130.
    func stopOnInterrupt() {
        let (interrupt, keep) = (self.interrupt, self.keep)
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)  // the broker sets its own handlers for these
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                if let pid = interrupt.set(), !keep { kill(pid, SIGTERM) }
            }
            source.resume()
            signalSources.append(source)
        }
    }

    /// Throws when the demo was interrupted.
    func checkInterrupt() throws(DemoFailure) {
        if interrupt.isSet { throw DemoFailure("interrupted") }
    }

    /// Writes `value` as STATE/`relative` (nil: just creates the directories).
    func write(_ value: JSONValue, to relative: String?) throws(DemoFailure) {
        do {
            // (private, as the broker's own: directories 0700, files 0600)
            for sub in ["apps", "associations"] { _ = try DefaultPaths.makeDirectories(state + "/" + sub) }
            guard let relative else { return }
            try Data((value.prettyText() + "\n").utf8).write(
                to: URL(fileURLWithPath: state + "/" + relative), options: .atomic)
            _ = chmod(state + "/" + relative, 0o600)
        } catch {
            throw DemoFailure("cannot write \(state)/\(relative ?? ""): \(error)")
        }
    }

    // MARK: 1. Seed 000

    func playShare() throws(DemoFailure) {
        out.line()
        out.line("1. seed 000: a share extension hands a YouTube link to its app, which the broker launches on demand")
        let appLog = state + "/logs/\(DemoSeeds.app).log"
        appLogOffset = (try? FileManager.default.attributesOfItem(atPath: appLog)[.size] as? UInt64) ?? 0
        let ext = try DemoPeer("[extension]", socket: socket, out: out)
        try ext.call("hello", ["role": "extension", "bundleID": .string(DemoSeeds.shareExtension)])
        out.line("  the activation rule takes one YouTube URL; anything else is refused and nothing is stored:")
        _ = try ext.callExpectingError(
            "share.send", ["items": [["url": "https://example.com/article"]], "open": true],
            code: ErrorCode.notAccepted.rawValue)
        let sent = try ext.call("share.send", ["items": [["url": .string(DemoSeeds.youTube)]], "open": true])
        guard let shareID = sent["shareID"]?.stringValue, let eventID = sent["eventID"]?.stringValue else {
            throw DemoFailure("share.send answered without shareID/eventID: \(sent.compactText)")
        }
        out.line(
            "  ✓ share sent: \(shareID) is durable in \(sent["group"]?.stringValue ?? "?"); event \(eventID) is queued for \(DemoSeeds.app)"
        )
        out.line(
            "  the app has no subscriber, so the broker runs its manifest's launch command; the app's log (stderr):")

        // Tail the app's log until it says it is done.
        var text = ""
        var shown = 0
        let deadline = Date().addingTimeInterval(15)
        var finished = false
        while !finished {
            text = readLog(appLog, from: appLogOffset)
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            if !lines.isEmpty { lines.removeLast() }  // "" after the last newline, or a line still being written
            for line in lines.dropFirst(shown) {
                out.line("  " + String(line))
                if line.hasPrefix("[app] done") { finished = true }
                if line.hasPrefix("[app] error") { throw DemoFailure("the app failed: \(line)") }
            }
            shown = lines.count
            if finished { break }
            try checkInterrupt()
            if broker?.isRunning == false { throw DemoFailure("the broker stopped while the app was running") }
            if Date() > deadline {
                throw DemoFailure(
                    shown == 0
                        ? "the broker did not launch the app within 15 s (see its log below)"
                        : "the app did not finish within 15 s")
            }
            usleep(20_000)
        }
        guard text.contains("[app] launched by the broker") else {
            throw DemoFailure("the app's log does not show its launch")
        }
        out.line("  ✓ app launched on demand by the broker (\(executable) demo --play-app)")
        guard text.contains("[app] ← app.event {\"id\":\"\(eventID)\"") else {
            throw DemoFailure("the app's log does not show event \(eventID)")
        }
        out.line("  ✓ event received by the app: \(eventID) openURL deeplinkmyapp://open-from-share?share=\(shareID)")
        guard text.contains("[app] ← {\"completed\":true}"), text.contains("[app] ← {\"acked\":1}") else {
            throw DemoFailure("the app did not complete the share and acknowledge the event")
        }
        let tool = try DemoPeer("[tool]", socket: socket, out: out)
        try tool.call("hello", ["role": "tool"])
        let status = try tool.call("broker.status")
        guard status["pendingShares"]?.intValue == 0, status["pendingEvents"]?.intValue == 0 else {
            throw DemoFailure(
                "after the app: \(status["pendingShares"]?.compactText ?? "?") shares and \(status["pendingEvents"]?.compactText ?? "?") events still pending"
            )
        }
        out.line("  ✓ share completed and event acknowledged: the broker holds no pending share or event")
    }

    func readLog(_ path: String, from offset: UInt64) -> String {
        guard let h = FileHandle(forReadingAtPath: path) else { return "" }
        defer { try? h.close() }
        try? h.seek(toOffset: offset)
        let data = (try? h.readToEnd()) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: 2. Seed 003

    func playUniversalLink() throws(DemoFailure) {
        out.line()
        out.line("2. seed 003: universal links for \(DemoSeeds.ulHost)")
        let app = try DemoPeer("[UniversalLinks]", socket: socket, out: out)
        try app.call("hello", ["role": "app", "bundleID": .string(DemoSeeds.ulApp)])
        try app.call("app.subscribe")
        let browser = try DemoPeer("[browser]", socket: socket, out: out)
        try browser.call("hello", ["role": "app", "bundleID": .string(DemoSeeds.browser)])
        try browser.call("app.subscribe")
        let notes = try DemoPeer("[notes]", socket: socket, out: out)
        try notes.call("hello", ["role": "tool"])

        out.line("  a link to a computer's page is tapped: the association document gives it to the app")
        let url = "https://\(DemoSeeds.ulHost)/computers/raspberry-pi"
        let opened = try notes.call("url.open", ["url": .string(url)])
        guard opened["via"]?.stringValue == "universalLink", opened["app"]?.stringValue == DemoSeeds.ulApp else {
            throw DemoFailure("\(url) did not open \(DemoSeeds.ulApp) as a universal link: \(opened.compactText)")
        }
        let ev = try app.next("app.event")
        guard ev["kind"]?.stringValue == "continueUserActivity", ev["webpageURL"]?.stringValue == url,
            let id = ev["id"]
        else { throw DemoFailure("the app got \(ev.compactText), not continueUserActivity for \(url)") }
        out.line(
            "  [UniversalLinks] continueUserActivity(NSUserActivityTypeBrowsingWeb) → ComputerDetailController: Raspberry Pi"
        )
        try app.call("app.ack", ["ids": [id]])
        out.line("  ✓ universal link: \(url) opened the app (continueUserActivity)")

        out.line("  the checkout page is excluded by the document (\"exclude\": true): it stays in the browser")
        let buy = url + "/buy"
        let r = try notes.call("url.open", ["url": .string(buy)])
        guard r["via"]?.stringValue == "browser" else {
            throw DemoFailure("\(buy) did not go to the browser: \(r.compactText)")
        }
        let bev = try browser.next("app.event")
        guard bev["url"]?.stringValue == buy, let bid = bev["id"] else {
            throw DemoFailure("the browser got \(bev.compactText)")
        }
        try browser.call("app.ack", ["ids": [bid]])
        out.line("  ✓ \(buy) opened in the browser (openURL)")
    }

    // MARK: 3. Seed 004

    func playDefaults() throws(DemoFailure) {
        out.line()
        out.line("3. seed 004: a widget watches the group defaults' watchlist; the app writes it with compare-and-set")
        let widget = try DemoPeer("[widget]", socket: socket, out: out)
        try widget.call("hello", ["role": "extension", "bundleID": .string(DemoSeeds.widget)])
        try widget.call("defaults.watch", ["group": .string(DemoSeeds.statsGroup), "keys": ["watchlist"]])
        let app = try DemoPeer("[Covid19Stats]", socket: socket, out: out)
        try app.call("hello", ["role": "app", "bundleID": .string(DemoSeeds.statsApp)])
        let got = try app.call("defaults.get", ["group": .string(DemoSeeds.statsGroup), "key": "watchlist"])
        guard let version = got["version"] else {
            throw DemoFailure("defaults.get answered without a version: \(got.compactText)")
        }
        let watchlist: JSONValue = [["id": 410, "name": "South Korea", "iso": "KR"]]
        let set = try app.call(
            "defaults.set",
            ["group": .string(DemoSeeds.statsGroup), "key": "watchlist", "value": watchlist, "ifVersion": version])
        let change = try widget.next("defaults.changed")
        guard change["key"]?.stringValue == "watchlist", change["value"] == watchlist,
            change["version"] == set["version"]
        else {
            throw DemoFailure(
                "the widget got \(change.compactText), not the new watchlist at version \(set["version"]?.compactText ?? "?")"
            )
        }
        let link: String
        do {
            link = try Router.build(
                "stats://watchlist?id=:id&name=:name&iso=:iso",
                values: ["id": "410", "name": "South Korea", "iso": "KR"])
        } catch { throw DemoFailure("cannot build the widget's link: \(error)") }
        out.line("  [widget] reloadTimelines: Watchlist (1): South Korea (KR) → \(link)")
        out.line("  ✓ defaults changed: the widget saw watchlist at version \(change["version"]?.compactText ?? "?")")
        out.line("  a writer that read an older version is refused, so no update is lost:")
        _ = try app.callExpectingError(
            "defaults.set",
            ["group": .string(DemoSeeds.statsGroup), "key": "watchlist", "value": [], "ifVersion": version],
            code: -32006)
    }

    // MARK: Logs and cleanup

    func showLogs() {
        for (title, path) in [("broker log", brokerLog), ("app log", state + "/logs/\(DemoSeeds.app).log")] {
            let text = readLog(path, from: title == "app log" ? appLogOffset : 0)
            guard !text.isEmpty else { continue }
            out.line("--- \(title) (\(path)), last lines:")
            for line in text.split(separator: "\n").suffix(20) { out.line("  " + line) }
        }
    }

    func finish(passed: Bool) {
        guard let p = broker else {
            if !tmp.isEmpty && !keep { try? FileManager.default.removeItem(atPath: tmp) }
            return
        }
        if keep && p.isRunning {
            out.line()
            out.line("The broker is still running (pid \(p.processIdentifier)) with the demo's apps. Explore it:")
            out.line("  export SHAREBROKER_SOCKET=\(socket)")
            out.line("  shareclient apps")
            out.line("  shareclient explain https://\(DemoSeeds.ulHost)/computers/raspberry-pi/buy")
            out.line("  shareclient send --url https://youtu.be/dQw4w9WgXcQ --as \(DemoSeeds.shareExtension) --open")
            out.line("  shareclient defaults watch \(DemoSeeds.statsGroup) --as \(DemoSeeds.statsApp)")
            out.line("Stop it with: kill \(p.processIdentifier); then: rm -rf \(tmp)")
            return
        }
        out.line()
        out.line("• stopping the broker (SIGTERM)\(keep ? "" : " and removing \(tmp)")")
        if p.isRunning {
            p.terminate()
            let deadline = Date().addingTimeInterval(6)
            while p.isRunning && Date() < deadline { usleep(10_000) }
            if p.isRunning { kill(p.processIdentifier, SIGKILL) }
            p.waitUntilExit()
        }
        if keep {
            out.line("  kept \(tmp)")
        } else {
            try? FileManager.default.removeItem(atPath: tmp)
        }
        if let userState { out.line("  the state directory \(userState) is kept") }
        if passed {
            out.line(
                "Next: the examples in Clients/examples (bash Clients/examples/run-all.sh), 'sharebroker serve', 'shareclient --help'."
            )
        }
    }
}

// MARK: - The demo's app (launched by the broker)

/// `sharebroker demo --play-app`: what the broker launches for com.mycompany.myapp. It connects with
/// $SHAREBROKER_SOCKET and $SHAREBROKER_BUNDLE_ID, subscribes, handles one open-from-share event (fetches
/// the share, completes it, acknowledges the event) and exits; every step goes to stderr, which the
/// broker appends to STATE/logs/BUNDLE.log and the demo tails.
struct DemoApp {
    let out = DemoOutput(fd: 2)

    func run() -> Int32 {
        let env = ProcessInfo.processInfo.environment
        guard let socket = env["SHAREBROKER_SOCKET"], let bundle = env["SHAREBROKER_BUNDLE_ID"] else {
            out.line(
                "[app] error: --play-app is run by the demo's broker, which sets SHAREBROKER_SOCKET and SHAREBROKER_BUNDLE_ID"
            )
            return 64
        }
        out.line("[app] launched by the broker: pid \(getpid()), SHAREBROKER_BUNDLE_ID=\(bundle)")
        do {
            let app = try DemoPeer("[app]", socket: socket, out: out, indent: "")
            try app.call("hello", ["role": "app", "bundleID": .string(bundle)])
            // Pending events come first: the share's, and any an earlier run left unacknowledged.
            let pending = try app.call("app.subscribe")["pending"]?.intValue ?? 1
            for _ in 0..<max(1, pending) {
                let ev = try app.next("app.event", timeoutMillis: 10_000)
                guard let id = ev["id"] else { throw DemoFailure("an event without an id: \(ev.compactText)") }
                let url = ev["url"]?.stringValue ?? ""
                if let shareID = Self.query(url, "share") ?? ev["shareID"]?.stringValue {
                    try handleShare(shareID, url: url, app: app)
                } else {
                    out.line("[app] route \(demoShort(url, limit: 80)): nothing to do")
                }
                try app.call("app.ack", ["ids": [id]])
            }
            out.line("[app] done")
            return 0
        } catch {
            out.line("[app] error: \(error)")
            return 1
        }
    }

    /// Router.route(to: .openSharedURL): fetch the share, show its link, complete it (record and files deleted).
    func handleShare(_ shareID: String, url: String, app: DemoPeer) throws(DemoFailure) {
        out.line("[app] route \(demoShort(url, limit: 80)): the share extension's share")
        let share: JSONValue
        do { share = try app.call("share.get", ["shareID": .string(shareID)]) } catch {
            guard error.code == ErrorCode.notFound.rawValue else { throw error }
            out.line("[app] \(shareID) was already completed")
            return
        }
        for item in share["items"]?.arrayValue ?? [] {
            if let link = item["url"]?.stringValue {
                out.line("[app] HomeViewModel: showYoutubeLinkInput = true, inputYoutubeLink = \(link)")
            }
        }
        try app.call("share.complete", ["shareID": .string(shareID)])
    }

    /// The first value of `name` in the URL's query, percent-decoded.
    static func query(_ url: String, _ name: String) -> String? {
        URLComponents(string: url)?.queryItems?.first(where: { $0.name == name })?.value
    }
}
