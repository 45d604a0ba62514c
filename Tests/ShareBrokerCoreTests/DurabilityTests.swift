// Crash safety and launch on demand with the real binaries: events answered before a SIGKILL are
// all delivered after restart, none twice after their ack; apps are launched once, retried with
// backoff; plus the offline routing tools (explain, check-association).

import Foundation
import ShareClient
import ShareProtocol
import XCTest

final class DurabilityTests: XCTestCase {
    func writeManifests(_ dir: TempDir, launch: [String]? = nil) {
        var app: JSONObject = [
            "bundleID": "com.mycompany.myapp", "teamID": "ABCDE12345", "urlSchemes": ["deeplinkmyapp"],
            "associatedDomains": ["applinks:example.com"],
        ]
        if let launch { app["launch"] = .array(launch.map { .string($0) }) }
        dir.write("state/apps/myapp.json", JSONValue.object(app).compactText)
        dir.write(
            "state/associations/example.com.json",
            #"{"applinks":{"details":[{"appIDs":["ABCDE12345.com.mycompany.myapp"],"components":[{"/":"/private/*","exclude":true},{"/":"/*"}]}]}}"#)
    }

    func testEventsSurviveSIGKILLAndAcksStick() throws {
        let dir = TempDir()
        writeManifests(dir)
        let socket = dir.path + "/s.sock"
        var broker = try BrokerProcess(socket: socket, state: dir.path + "/state", logDir: dir.path)
        XCTAssertTrue(broker.waitReady())

        // Four openers race; the broker is killed while they are still sending.
        let answered = Box<[String]>([])
        let lock = NSLock()
        let group = DispatchGroup()
        for t in 0..<4 {
            group.enter()
            Thread {
                defer { group.leave() }
                guard let c = try? BrokerConnection(socketPath: socket), (try? c.hello(role: "tool")) != nil else { return }
                for i in 0..<2000 {
                    guard let r = try? c.call("url.open", ["url": .string("deeplinkmyapp://item?t=\(t)&i=\(i)")]),
                        let id = r["eventID"]?.stringValue
                    else { return }
                    lock.lock()
                    answered.value.append(id)
                    lock.unlock()
                }
            }.start()
        }
        XCTAssertTrue(waitUntil(timeout: 20) {
            lock.lock()
            defer { lock.unlock() }
            return answered.value.count >= 300
        })
        broker.signal(SIGKILL)
        XCTAssertTrue(broker.waitExit())
        group.wait()
        lock.lock()
        let acknowledged = answered.value
        lock.unlock()

        broker = try BrokerProcess(socket: socket, state: dir.path + "/state", logDir: dir.path)
        XCTAssertTrue(broker.waitReady(), broker.stderrText)
        let app = try BrokerConnection(socketPath: socket)
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        let pending = try XCTUnwrap(app.call("app.subscribe")["pending"]?.intValue)
        XCTAssertGreaterThanOrEqual(pending, acknowledged.count)
        var received: [JSONValue] = []
        for _ in 0..<pending { received.append(try XCTUnwrap(app.nextNotification(timeoutMillis: 5000)?.params)) }
        let ids = received.compactMap { $0["id"]?.stringValue }
        XCTAssertEqual(Set(ids).count, ids.count, "no event delivered twice")
        XCTAssertTrue(Set(acknowledged).isSubset(of: Set(ids)), "every answered event is still there")
        let seqs = ids.compactMap { Int($0.dropFirst(3)) }
        XCTAssertEqual(seqs, seqs.sorted(), "oldest first")
        for e in received {  // whole, never half-written
            XCTAssertEqual(e["kind"], "openURL")
            XCTAssertTrue(e["url"]?.stringValue?.hasPrefix("deeplinkmyapp://item?t=") ?? false)
        }

        // Ack the first half, kill right after the answer: the acked never come back.
        let half = Array(ids.prefix(ids.count / 2))
        XCTAssertEqual(try app.call("app.ack", ["ids": .array(half.map { .string($0) })])["acked"]?.intValue, half.count)
        broker.signal(SIGKILL)
        XCTAssertTrue(broker.waitExit())
        broker = try BrokerProcess(socket: socket, state: dir.path + "/state", logDir: dir.path)
        XCTAssertTrue(broker.waitReady(), broker.stderrText)
        let again = try BrokerConnection(socketPath: socket)
        try again.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(try again.call("app.subscribe")["pending"]?.intValue, ids.count - half.count)
        var rest: [String] = []
        for _ in 0..<(ids.count - half.count) {
            rest.append(try XCTUnwrap(again.nextNotification(timeoutMillis: 5000)?.params?["id"]?.stringValue))
        }
        XCTAssertEqual(rest, Array(ids.dropFirst(half.count)))
        broker.signal(SIGTERM)
        XCTAssertTrue(broker.waitExit())
    }

    func testLaunchOnDemandStartsTheAppOnceWithItsEnvironment() throws {
        let dir = TempDir()
        let envFile = dir.path + "/launched.txt"
        let script = """
            echo "$SHAREBROKER_SOCKET $SHAREBROKER_BUNDLE_ID" >> \(envFile)
            exec "\(Products.shareclient)" listen --ack --count 3 --timeout 10
            """
        writeManifests(dir, launch: ["/bin/sh", "-c", script])
        let socket = dir.path + "/s.sock"
        let broker = try BrokerProcess(socket: socket, state: dir.path + "/state", logDir: dir.path)
        XCTAssertTrue(broker.waitReady())
        let tool = try BrokerConnection(socketPath: socket)
        try tool.hello(role: "tool")
        for i in 0..<3 {
            let r = try tool.call("url.open", ["url": .string("deeplinkmyapp://launch/\(i)")])
            // The first waits for the app; the launched app may have subscribed before the later
            // ones (a commit can take milliseconds on a busy disk): then they reach it directly.
            if i == 0 { XCTAssertEqual(r["queued"], true) }
        }
        XCTAssertTrue(
            waitUntil(timeout: 15) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 },
            "the launched app received and acked the events; broker log: \(broker.stderrText)")
        let lines = ((try? String(contentsOfFile: envFile, encoding: .utf8)) ?? "").split(separator: "\n")
        XCTAssertEqual(lines, ["\(socket) com.mycompany.myapp"], "launched exactly once, with its environment")
        let launches = try tool.call("broker.status")["launches"]?["com.mycompany.myapp"]
        XCTAssertEqual(launches?["launches"]?.intValue, 1)
        broker.signal(SIGTERM)
        XCTAssertTrue(broker.waitExit())
    }

    /// A broker running as root starts an app whose manifest admits only other users as the
    /// first of them (else the app could not even say hello), or as its `launchUser`: with that
    /// user's uid, gid and groups, a login's environment (not root's `HOME` or the broker's other
    /// variables), in their home directory ("/" when it is missing); the app then subscribes as
    /// that user through a socket opened with --socket-mode. A `launchUser` the system does not
    /// know is a failed launch (logged; the event waits).
    func testARootBrokerLaunchesAnAppAsItsUser() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to launch as another user") }
        let dir = TempDir()
        chmod(dir.path, 0o755)
        let out = dir.path + "/out"
        mkdir(out, 0o777)
        chmod(out, 0o777)
        func script(_ name: String) -> [String] {
            let file = "\(out)/\(name)"
            return [
                "/bin/sh", "-c",
                """
                { id -u; id -g; id -G; pwd; echo "$HOME $USER $LOGNAME ${FOO-unset} $SHAREBROKER_BUNDLE_ID"; echo "$PATH"; } > \(file).tmp
                if [ -e /dev/fd/9 ]; then echo "fd 9 reached the app" >> \(file).tmp; fi
                mv \(file).tmp \(file)
                exec "\(Products.shareclient)" listen --ack --count 1 --timeout 10
                """,
            ]
        }
        func app(_ id: String, _ scheme: String, _ extra: JSONObject) -> String {
            var o: JSONObject = ["bundleID": .string(id), "urlSchemes": [.string(scheme)], "launch": .array(script(id).map { .string($0) })]
            for (k, v) in extra { o[k] = v }
            return JSONValue.object(o).compactText
        }
        dir.write("state/apps/a.json", app("com.nobody.app", "nobodyapp", ["uids": [65534, 1000]]))
        // (root first in uids would be root's launch: launchUser says otherwise)
        dir.write("state/apps/b.json", app("com.named.app", "namedapp", ["uids": [0, 65534], "launchUser": "nobody"]))
        // (no uids: as root)
        dir.write("state/apps/c.json", app("com.root.app", "rootapp", [:]))
        // (root among the uids: as the first other user; the newcomer's trial: it ran as root)
        dir.write("state/apps/e.json", app("com.first.app", "firstapp", ["uids": [0, 65534]]))
        dir.write("state/apps/d.json", app("com.ghost.app", "ghostapp", ["launchUser": "no-such-user-here"]))
        let socket = dir.path + "/s.sock"
        let broker = try BrokerProcess(
            socket: socket, state: dir.path + "/state", extraArgs: ["--socket-mode", "666"], env: ["FOO": "bar", "HOME": "/root"],
            logDir: dir.path,
            // (groups the app must not keep; a descriptor the broker inherits, not close-on-exec,
            // that must not reach the app either: the review)
            runVia: ["/bin/sh", "-c", #"exec 9</etc/hostname; exec /usr/bin/setpriv --groups 4,24 "$0" "$@""#])
        XCTAssertTrue(broker.waitReady(), broker.stderrText)
        let tool = try BrokerConnection(socketPath: socket)
        try tool.hello(role: "tool")
        for scheme in ["nobodyapp", "namedapp", "rootapp", "ghostapp", "firstapp"] {
            XCTAssertNotNil(try tool.call("url.open", ["url": .string("\(scheme)://x")])["eventID"])
        }
        XCTAssertTrue(
            waitUntil(timeout: 20) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 1 },
            "the four launched apps subscribed and acked; broker log: \(broker.stderrText)")
        let groups = try runProcess("/usr/bin/id", ["-G", "nobody"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        for id in ["com.nobody.app", "com.named.app", "com.first.app"] {
            let text = try String(contentsOfFile: "\(out)/\(id)", encoding: .utf8)
            let home = FileManager.default.fileExists(atPath: "/nonexistent") ? "/nonexistent" : "/"
            // (a login's PATH, not the broker's: the newcomer's trial found root's there)
            XCTAssertEqual(
                text, "65534\n65534\n\(groups)\n\(home)\n/nonexistent nobody nobody unset \(id)\n/usr/local/bin:/usr/bin:/bin\n", id)
        }
        let asRoot = try String(contentsOfFile: "\(out)/com.root.app", encoding: .utf8)
        XCTAssertTrue(asRoot.hasPrefix("0\n0\n"), asRoot)
        XCTAssertFalse(asRoot.contains("fd 9"), "launched as the broker's own user: \(asRoot)")
        XCTAssertTrue(asRoot.hasSuffix("/root root root bar com.root.app\n") || asRoot.contains(" bar com.root.app"), asRoot)
        XCTAssertTrue(broker.stderrText.contains("launched com.nobody.app (pid "), broker.stderrText)
        XCTAssertTrue(broker.stderrText.contains(" as nobody (uid 65534)"), broker.stderrText)
        XCTAssertTrue(
            broker.stderrText.contains("cannot launch com.ghost.app: its manifest's launchUser, 'no-such-user-here', is no user this system knows"),
            broker.stderrText)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(out)/com.ghost.app"))
        broker.signal(SIGTERM)
        XCTAssertTrue(broker.waitExit())
    }

    /// A launch program (or a directory above it) that someone else than the user it runs as
    /// (or root) could change is not run, and is named when the manifests are loaded (the
    /// newcomer's trial: a root broker ran a user's own script as root, and another user's
    /// script as that user). So is a launch user whom the app's uids do not admit.
    func testALaunchProgramSomeoneElseCouldChangeIsNotRun() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to own files as other users") }
        let dir = TempDir()
        chmod(dir.path, 0o755)
        let bin = dir.path + "/bin"
        mkdir(bin, 0o755)
        func script(_ name: String, owner: uid_t, mode: mode_t = 0o755, in directory: String? = nil) -> String {
            let path = (directory ?? bin) + "/" + name
            _ = FileManager.default.createFile(atPath: path, contents: Data("#!/bin/sh\nexit 0\n".utf8))
            chmod(path, mode)
            chown(path, owner, owner)
            return path
        }
        let open = dir.path + "/open"
        mkdir(open, 0o777)
        chmod(open, 0o777)
        let theirs = dir.path + "/theirs"
        mkdir(theirs, 0o755)
        chown(theirs, 1, 1)
        XCTAssertEqual(symlink("/bin/true", theirs + "/lnk"), 0)
        lchown(theirs + "/lnk", 1, 1)
        let chain = bin + "/chain"
        XCTAssertEqual(symlink(theirs + "/lnk", chain), 0)
        let cases: [(String, [String: JSONValue], String)] = [
            ("own", ["uids": [65534], "launch": [.string(script("own.sh", owner: 65534))]], ""),
            ("rootowned", ["uids": [65534], "launch": [.string(script("root.sh", owner: 0))]], ""),
            ("foreign", ["uids": [65534], "launch": [.string(script("foreign.sh", owner: 1))]], "belongs to uid 1"),
            ("asroot", ["launch": [.string(script("users.sh", owner: 65534))]], "belongs to uid 65534"),
            ("writable", ["uids": [65534], "launch": [.string(script("w.sh", owner: 0, mode: 0o777))]], "is writable by every user"),
            ("opendir", ["uids": [65534], "launch": [.string(script("o.sh", owner: 0, in: open))]], "\(open) is writable by every user"),
            ("unadmitted", ["uids": [65534], "launchUser": "root", "launch": ["/bin/true"]], "whom its uids do not admit"),
            // (the docs audit: without uids only the broker's user is admitted)
            ("unlisted", ["launchUser": "nobody", "launch": ["/bin/true"]], "whom the manifest does not admit"),
            // (the review: a link in the middle of a chain of links, in another user's directory)
            ("chain", ["uids": [65534], "launch": [.string(chain)]], "\(theirs) belongs to uid 1"),
            // (a program missing at the check could be put back before the exec: refused too)
            ("missing", ["uids": [65534], "launch": ["/nonexistent/app"]], "/nonexistent/app does not exist"),
        ]
        for (name, fields, _) in cases {
            var o: JSONObject = ["bundleID": .string("com.\(name).app"), "urlSchemes": [.string(name)]]
            for (k, v) in fields { o[k] = v }
            dir.write("state/apps/\(name).json", JSONValue.object(o).compactText)
        }
        let socket = dir.path + "/s.sock"
        let broker = try BrokerProcess(socket: socket, state: dir.path + "/state", extraArgs: ["--socket-mode", "666"], logDir: dir.path)
        XCTAssertTrue(broker.waitReady(), broker.stderrText)
        let tool = try BrokerConnection(socketPath: socket)
        try tool.hello(role: "tool")
        let warnings = (try tool.call("apps.list")["warnings"]?.arrayValue ?? []).compactMap { $0["message"]?.stringValue }
        for (name, _, expected) in cases {
            let mine = warnings.filter { $0.hasPrefix("com.\(name).app: ") }
            if expected.isEmpty {
                XCTAssertEqual(mine, [], name)
            } else {
                XCTAssertTrue(mine.contains { $0.contains(expected) }, "\(name): \(warnings)")
            }
            _ = try tool.call("url.open", ["url": .string("\(name)://x")])
        }
        for (name, _, expected) in cases where !expected.isEmpty && name != "unadmitted" && name != "unlisted" {
            XCTAssertTrue(
                waitUntil(timeout: 10) {
                    broker.stderrText.contains("cannot launch com.\(name).app: its launch program is not run: ")
                }, "\(name): \(broker.stderrText)")
        }
        for name in ["own", "rootowned"] {
            XCTAssertTrue(waitUntil(timeout: 10) { broker.stderrText.contains("launched com.\(name).app (pid ") }, "\(name): \(broker.stderrText)")
        }
        broker.signal(SIGTERM)
        XCTAssertTrue(broker.waitExit())
    }

    /// A reload ends the backoff of an app whose launch failed: the fixed manifest's launch is
    /// due at once, not 20 or 40 s later (the newcomer's trial); the broken one was named in
    /// apps.list at load.
    func testAReloadEndsTheBackoffOfAFailedLaunch() throws {
        let h = BrokerHarness(manifests: [
            "a.json": #"{"bundleID": "com.a.app", "urlSchemes": ["aapp"], "launchUser": "no-such-user-here", "launch": ["/bin/true"]}"#
        ])
        try h.start { $0.launchRetryBase = 30 }
        defer { h.stop() }
        let tool = try h.tool()
        let warnings = try tool.call("apps.list")["warnings"]?.arrayValue?.compactMap { $0["message"]?.stringValue } ?? []
        XCTAssertTrue(warnings.contains { $0.contains("'no-such-user-here', is no user this system knows") }, "\(warnings)")
        _ = try tool.call("url.open", ["url": "aapp://x"])
        XCTAssertTrue(waitUntil { (try? tool.call("broker.status"))?["launches"]?["com.a.app"]?["failures"]?.intValue == 1 })
        let out = h.dir.path + "/launched"
        h.dir.write("state/apps/a.json", #"{"bundleID": "com.a.app", "urlSchemes": ["aapp"], "launch": ["/bin/sh", "-c", "echo x >> \#(out)"]}"#)
        XCTAssertEqual(try tool.call("apps.reload")["warnings"]?.arrayValue?.count, 0)
        XCTAssertTrue(waitUntil(timeout: 5) { FileManager.default.fileExists(atPath: out) }, "launched at once after the reload")
    }

    /// The socket a launched user cannot reach is warned about when the app is launched.
    func testALaunchAsAUserWhoCannotReachTheSocketIsWarnedAbout() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to launch as another user") }
        let dir = TempDir()
        dir.write(
            "state/apps/a.json",
            #"{"bundleID": "com.nobody.app", "urlSchemes": ["nobodyapp"], "uids": [65534], "launch": ["/bin/true"]}"#)
        let broker = try BrokerProcess(socket: dir.path + "/s.sock", state: dir.path + "/state", logDir: dir.path)
        XCTAssertTrue(broker.waitReady(), broker.stderrText)
        let tool = try BrokerConnection(socketPath: dir.path + "/s.sock")
        try tool.hello(role: "tool")
        _ = try tool.call("url.open", ["url": "nobodyapp://x"])
        XCTAssertTrue(
            waitUntil(timeout: 10) { broker.stderrText.contains("com.nobody.app runs as nobody, who cannot reach \(dir.path)/s.sock") },
            broker.stderrText)
        broker.signal(SIGTERM)
        XCTAssertTrue(broker.waitExit())
    }

    func testFailedLaunchIsRetriedWithBackoffAndTheEventWaits() throws {
        for launch in [["/nonexistent/myapp"], ["/bin/true"]] {
            let h = BrokerHarness(
                manifests: [
                    "myapp.json": JSONValue.object([
                        "bundleID": "com.mycompany.myapp", "urlSchemes": ["deeplinkmyapp"],
                        "launch": .array(launch.map { .string($0) }),
                    ]).compactText
                ])
            try h.start { $0.launchRetryBase = 0.2 }
            let tool = try h.tool()
            XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://x"])["queued"], true)
            XCTAssertTrue(
                waitUntil(timeout: 10) {
                    ((try? tool.call("broker.status"))?["launches"]?["com.mycompany.myapp"]?["failures"]?.intValue ?? 0) >= 2
                }, "\(launch) retried")
            usleep(500_000)
            let status = try tool.call("broker.status")
            let launches = status["launches"]?["com.mycompany.myapp"]?["launches"]?.intValue ?? 0
            // 0.2 s, 0.4 s, 0.8 s ... backoff: a handful of attempts in ~1-2 s, never a tight loop.
            XCTAssertLessThanOrEqual(launches, 6, "\(launch): \(status.compactText)")
            XCTAssertEqual(status["pendingEvents"]?.intValue, 1, "a failed launch leaves the event queued")
            h.stop()
        }
    }

    /// An in-process broker with one app, `com.mycompany.myapp` (scheme deeplinkmyapp), launched by `launch`.
    private func launchHarness(_ launch: [String]) -> BrokerHarness {
        BrokerHarness(manifests: [
            "myapp.json": JSONValue.object([
                "bundleID": "com.mycompany.myapp", "urlSchemes": ["deeplinkmyapp"], "launch": .array(launch.map { .string($0) }),
            ]).compactText
        ])
    }

    /// The launch timeout these tests use: 0.5 s, stretched under a sanitizer (a sanitized
    /// shareclient can take longer than 0.5 s to start and subscribe on a busy 2-core machine:
    /// the watchdog then stopped apps the tests expect to be left alone).
    private var shortLaunchTimeout: Double { 0.5 * sanitizerSlowdown }

    /// Starts `h` with a short launch timeout, 0.4 s (stretched likewise) between SIGTERM and
    /// SIGKILL, retries from 0.2 s.
    private func startWithAShortLaunchWatchdog(_ h: BrokerHarness) throws {
        let timeout = shortLaunchTimeout
        try h.start {
            $0.launchTimeoutSeconds = timeout
            $0.launchStopGraceSeconds = 0.4 * sanitizerSlowdown
            $0.launchRetryBase = 0.2
        }
    }

    /// The pids a launch script wrote to `file`, one per line.
    private func launchedPIDs(_ file: String) -> [Int32] {
        ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { Int32($0) }
    }

    func testLaunchedAppThatNeverSubscribesIsStoppedAndLaunchedAgain() throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        // Ignores SIGTERM (inherited through exec), so only the SIGKILL after the grace period stops it.
        let h = launchHarness(["/bin/sh", "-c", "echo $$ >> \(pidFile); trap '' TERM; exec sleep 60"])
        try startWithAShortLaunchWatchdog(h)
        defer { for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) } }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://hung"])["queued"], true)
        XCTAssertTrue(
            waitUntil(timeout: 20) {
                ((try? tool.call("broker.status"))?["launches"]?["com.mycompany.myapp"]?["timeouts"]?.intValue ?? 0) >= 2
                    && self.launchedPIDs(pidFile).count >= 2
            }, "stopped and launched again: \((try? tool.call("broker.status"))?.compactText ?? "")")
        let first = try XCTUnwrap(launchedPIDs(pidFile).first)
        errno = 0
        XCTAssertEqual(kill(first, 0), -1, "the first launched process (pid \(first)) was killed and reaped")
        XCTAssertEqual(errno, ESRCH)
        let status = try tool.call("broker.status")
        let launch = status["launches"]?["com.mycompany.myapp"]
        XCTAssertGreaterThanOrEqual(launch?["failures"]?.intValue ?? 0, 1, status.compactText)
        XCTAssertEqual(status["pendingEvents"]?.intValue, 1, "the event still waits for its app")
        h.stop()
    }

    func testALaunchedAppThatStopsListeningWhileEventsWaitIsStoppedAndLaunchedAgain() throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        // Takes one event, then keeps running without a subscription (the same process).
        let h = launchHarness([
            "/bin/sh", "-c", "echo $$ >> \(pidFile); \"\(Products.shareclient)\" listen --ack --count 1 --timeout 20; exec sleep 60",
        ])
        try startWithAShortLaunchWatchdog(h)
        defer { for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) } }
        let tool = try h.tool()
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://one"])
        XCTAssertTrue(waitUntil(timeout: 15) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 }, "the first was acked")
        usleep(useconds_t(2.4 * shortLaunchTimeout * 1e6))  // idle without a subscription and nothing waiting: not stopped
        XCTAssertEqual(try tool.call("broker.status")["launches"]?["com.mycompany.myapp"]?["timeouts"]?.intValue, 0)
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://two"])
        XCTAssertTrue(
            waitUntil(timeout: 20) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 },
            "stopped and launched again, and the second event delivered: \((try? tool.call("broker.status"))?.compactText ?? "")")
        let launch = try tool.call("broker.status")["launches"]?["com.mycompany.myapp"]
        XCTAssertEqual(launch?["timeouts"]?.intValue, 1, launch?.compactText ?? "")
        XCTAssertEqual(launch?["launches"]?.intValue, 2)
        h.stop()
    }

    func testLaunchedAppThatSubscribedIsNotStopped() throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        let h = launchHarness(["/bin/sh", "-c", "echo $$ >> \(pidFile); exec \"\(Products.shareclient)\" listen --ack --timeout 30"])
        let timeout = shortLaunchTimeout
        try h.start { $0.launchTimeoutSeconds = timeout }
        defer { for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) } }
        let tool = try h.tool()
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://fine"])
        XCTAssertTrue(
            waitUntil(timeout: 15) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 }, "the launched app acked")
        usleep(useconds_t(3 * shortLaunchTimeout * 1e6))  // three launch timeouts
        let launch = try tool.call("broker.status")["launches"]?["com.mycompany.myapp"]
        XCTAssertEqual(launch?["timeouts"]?.intValue, 0, launch?.compactText ?? "")
        XCTAssertEqual(launch?["running"], true)
        XCTAssertEqual(launch?["launches"]?.intValue, 1)
        XCTAssertEqual(launchedPIDs(pidFile).count, 1)
        XCTAssertEqual(kill(try XCTUnwrap(launchedPIDs(pidFile).first), 0), 0, "still running")
        h.stop()
    }

    /// The manifest of `com.mycompany.myapp` (scheme deeplinkmyapp), with `launch` when given.
    private func myAppManifest(launch: [String]?) -> String {
        var o: JSONObject = ["bundleID": "com.mycompany.myapp", "urlSchemes": ["deeplinkmyapp"]]
        if let launch { o["launch"] = .array(launch.map { .string($0) }) }
        return JSONValue.object(o).compactText
    }

    /// A launch command that records its pid in `pidFile`, then takes and acks every event for 20 s.
    private func ackingApp(_ pidFile: String) -> [String] {
        ["/bin/sh", "-c", "echo $$ >> \(pidFile); exec \"\(Products.shareclient)\" listen --ack --timeout 20"]
    }

    /// Events left pending by a previous run launch their app when the broker starts again (they
    /// waited for the next url.open before), and events queued before a reload gave the app a
    /// launch command launch it at the reload.
    func testEventsWaitingAtStartOrAtAReloadLaunchTheirApp() throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        let h = launchHarness([])
        h.dir.write("state/apps/myapp.json", myAppManifest(launch: nil))
        try h.start()
        defer { for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) } }
        var tool = try h.tool()
        for i in 0..<3 { XCTAssertEqual(try tool.call("url.open", ["url": .string("deeplinkmyapp://before/\(i)")])["queued"], true) }
        // The reload gives the app a launch command: the three waiting events launch it.
        h.dir.write("state/apps/myapp.json", myAppManifest(launch: ackingApp(pidFile)))
        _ = try tool.call("apps.reload")
        XCTAssertTrue(
            waitUntil(timeout: 15) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 },
            "launched at the reload: \((try? tool.call("broker.status"))?.compactText ?? "")")
        XCTAssertEqual(launchedPIDs(pidFile).count, 1)
        for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) }
        h.stop()

        // Events left pending by a run without the launch command, then a start with it.
        h.dir.write("state/apps/myapp.json", myAppManifest(launch: nil))
        try h.start()
        tool = try h.tool()
        for i in 0..<2 { _ = try tool.call("url.open", ["url": .string("deeplinkmyapp://left/\(i)")]) }
        h.stop()
        h.dir.write("state/apps/myapp.json", myAppManifest(launch: ackingApp(pidFile)))
        try h.start()
        tool = try h.tool()
        XCTAssertTrue(
            waitUntil(timeout: 15) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 },
            "launched at the start, without another url.open: \((try? tool.call("broker.status"))?.compactText ?? "")")
        XCTAssertEqual(launchedPIDs(pidFile).count, 2)
        XCTAssertEqual(try tool.call("broker.status")["launches"]?["com.mycompany.myapp"]?["launches"]?.intValue, 1)
        h.stop()
    }

    /// A subscriber the broker did not launch that goes away with events unacked leaves them
    /// waiting with no live subscriber: its app is launched for them.
    func testASubscriberThatLeavesWithEventsUnackedGetsItsAppLaunched() throws {
        try subscriberStopsWithAnEventUnacked { app in _ = shutdown(app.fd, Int32(SHUT_RDWR)) }
    }

    /// So does one that unsubscribes (and stays connected), as if it had gone.
    func testASubscriberThatUnsubscribesWithEventsUnackedGetsItsAppLaunched() throws {
        try subscriberStopsWithAnEventUnacked { app in
            app.send(#"{"jsonrpc":"2.0","id":3,"method":"app.unsubscribe"}"# + "\n")
            XCTAssertEqual(app.readJSON()?["result"]?["unsubscribed"], true)
        } then: { app in
            app.assertNothingMore(timeout: 0.3, "the unsubscribed connection got nothing more")
        }
    }

    /// A raw subscriber of the app gets an event, then `stop`s taking them without acking it: the
    /// app's launch command is run for it (once) and acks it.
    private func subscriberStopsWithAnEventUnacked(
        _ stop: (RawClient) -> Void, then: (RawClient) -> Void = { _ in }, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        let h = launchHarness(ackingApp(pidFile))
        try h.start()
        defer { for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) } }
        let app = try h.rawSession(role: "app", bundleID: "com.mycompany.myapp")
        app.send(#"{"jsonrpc":"2.0","id":2,"method":"app.subscribe"}"# + "\n")
        XCTAssertEqual(app.readJSON()?["result"]?["pending"], 0, file: file, line: line)
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://unacked"])["delivered"], true, file: file, line: line)
        XCTAssertEqual(app.readJSON()?["method"], "app.event", file: file, line: line)
        XCTAssertTrue(launchedPIDs(pidFile).isEmpty, "a live subscriber: nothing launched", file: file, line: line)
        stop(app)
        XCTAssertTrue(
            waitUntil(timeout: 15) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 },
            "the app was launched for the unacked event: \((try? tool.call("broker.status"))?.compactText ?? "")", file: file, line: line)
        XCTAssertEqual(launchedPIDs(pidFile).count, 1, file: file, line: line)
        then(app)
        h.stop()
    }

    /// Events a previous run left pending launch their app only after the launch grace, in which
    /// an app still running (a client reconnecting after the broker's restart) subscribes: then
    /// no second instance is started.
    func testEventsLeftPendingWaitForTheLaunchGraceAndAReconnectingAppIsNotStartedTwice() throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        let h = launchHarness(ackingApp(pidFile))
        h.dir.write("state/apps/myapp.json", myAppManifest(launch: nil))
        h.dir.write("state/apps/myapp.json", myAppManifest(launch: nil))
        try h.start()
        defer { for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) } }
        var tool = try h.tool()
        for i in 0..<2 { _ = try tool.call("url.open", ["url": .string("deeplinkmyapp://left/\(i)")]) }
        h.stop()
        h.dir.write("state/apps/myapp.json", myAppManifest(launch: ackingApp(pidFile)))
        // 1. The app reconnects within the grace: it gets the events, nothing is launched.
        let grace = 1.5 * sanitizerSlowdown
        try h.start { $0.launchGraceAtStartSeconds = grace }
        let app = try h.rawSession(role: "app", bundleID: "com.mycompany.myapp")
        app.send(#"{"jsonrpc":"2.0","id":2,"method":"app.subscribe"}"# + "\n")
        XCTAssertEqual(app.readJSON()?["result"]?["pending"], 2)
        usleep(useconds_t((grace + 1) * 1e6))
        tool = try h.tool()
        XCTAssertTrue(launchedPIDs(pidFile).isEmpty, "the app reconnected within the grace: not started again")
        XCTAssertNil(try tool.call("broker.status")["launches"]?["com.mycompany.myapp"]?["launches"]?.intValue)
        h.stop()
        // 2. Nobody reconnects: launched once the grace is over, not before.
        try h.start { $0.launchGraceAtStartSeconds = grace }
        tool = try h.tool()
        usleep(useconds_t(grace / 3 * 1e6))
        XCTAssertTrue(launchedPIDs(pidFile).isEmpty, "not launched within the grace")
        XCTAssertTrue(
            waitUntil(timeout: 15) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 },
            "launched after the grace: \((try? tool.call("broker.status"))?.compactText ?? "")")
        XCTAssertEqual(launchedPIDs(pidFile).count, 1)
        h.stop()
    }

    /// A manifest reload within the launch grace (SIGHUP, apps.reload: an installer's) does not
    /// launch the apps whose events a previous run left pending before the grace is over: they
    /// launch at its end as without the reload.
    func testAReloadWithinTheLaunchGraceDoesNotCutItShort() throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        let h = launchHarness(ackingApp(pidFile))
        h.dir.write("state/apps/myapp.json", myAppManifest(launch: nil))
        try h.start()
        defer { for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) } }
        var tool = try h.tool()
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://left"])
        h.stop()
        h.dir.write("state/apps/myapp.json", myAppManifest(launch: ackingApp(pidFile)))
        let grace = 3 * sanitizerSlowdown
        try h.start { $0.launchGraceAtStartSeconds = grace }
        tool = try h.tool()
        _ = try tool.call("apps.reload")
        usleep(useconds_t(grace / 2 * 1e6))
        XCTAssertTrue(launchedPIDs(pidFile).isEmpty, "launched within the grace, by the reload")
        XCTAssertTrue(
            waitUntil(timeout: 15) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 },
            "launched after the grace: \((try? tool.call("broker.status"))?.compactText ?? "")")
        XCTAssertEqual(launchedPIDs(pidFile).count, 1)
        h.stop()
    }

    /// A launched app that subscribes, then exits without acking (a crash on an event) is launched
    /// again with a growing backoff, never every retry-base seconds for ever.
    func testALaunchedAppThatCrashesAfterSubscribingBacksOff() throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        let h = launchHarness(["/bin/sh", "-c", "echo $$ >> \(pidFile); exec \"\(Products.shareclient)\" listen --count 1 --timeout 20"])
        try h.start { $0.launchRetryBase = 0.2 }
        defer { for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) } }
        let tool = try h.tool()
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://crashes"])
        let start = Date()
        XCTAssertTrue(
            waitUntil(timeout: 20) {
                ((try? tool.call("broker.status"))?["launches"]?["com.mycompany.myapp"]?["failures"]?.intValue ?? 0) >= 4
            }, "relaunched after each crash: \((try? tool.call("broker.status"))?.compactText ?? "")")
        // Four ends mean waits of 0.2 + 0.4 + 0.8 s between them: a fixed 0.2 s retry takes 0.6 s.
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 1.4, "the backoff grows")
        let launch = try tool.call("broker.status")["launches"]?["com.mycompany.myapp"]
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 1, "never acked: still waiting")
        XCTAssertGreaterThanOrEqual(launch?["launches"]?.intValue ?? 0, 4, launch?.compactText ?? "")
        h.stop()
    }

    /// A launch command that hands the app off and returns at once (`open -a`, `systemd-run`,
    /// `cmd &`), whose app then crashes on an event without acking, is not run in a tight loop:
    /// each time the app goes away with the event unacked counts, and the backoff grows.
    func testAnAppHandedOffByItsLaunchCommandThatCrashesBacksOff() throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        let h = launchHarness([
            "/bin/sh", "-c",
            "(echo $$ >> \(pidFile); sleep 0.4; exec \"\(Products.shareclient)\" listen --count 1 --timeout 20) >/dev/null 2>&1 &",
        ])
        try h.start { $0.launchRetryBase = 1.0 }
        defer { for pid in launchedPIDs(pidFile) { kill(pid, SIGKILL) } }
        let tool = try h.tool()
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://crashes"])
        usleep(2_500_000)
        let launch = try tool.call("broker.status")["launches"]?["com.mycompany.myapp"]
        let launches = launch?["launches"]?.intValue ?? 0
        // The app subscribes 0.4 s after its wrapper returned (counted once the wrapper is
        // reaped), then crashes (counted again): the second launch waits a second, the third
        // longer. Relaunching at each crash made one every half second (five in 2.5 s).
        XCTAssertGreaterThanOrEqual(launches, 1, launch?.compactText ?? "")
        XCTAssertLessThanOrEqual(launches, 3, launch?.compactText ?? "")
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 1)
        h.stop()
    }

    func testExplainAndCheckAssociationTools() throws {
        let dir = TempDir()
        writeManifests(dir)
        let state = dir.path + "/state"
        let ok = try runProcess(Products.sharebroker, ["explain", "--state", state, "https://example.com/computers/1"])
        XCTAssertEqual(ok.status, 0, ok.err)
        XCTAssertTrue(ok.out.contains("via universalLink"), ok.out)
        let excluded = try runProcess(Products.sharebroker, ["explain", "--state", state, "https://example.com/private/1"])
        XCTAssertEqual(excluded.status, 1)
        XCTAssertTrue(excluded.out.contains("excludes"), excluded.out)
        let bad = try runProcess(Products.sharebroker, ["explain", "--state", state, "not a url"])
        XCTAssertEqual(bad.status, 64)
        let json = try runProcess(Products.sharebroker, ["explain", "--json", "--state", state, "deeplinkmyapp://x"])
        XCTAssertEqual(try JSONParser.parse(json.out.trimmingCharacters(in: .whitespacesAndNewlines))["decision"]?["via"], "scheme")

        let doc = state + "/associations/example.com.json"
        let check = try runProcess(
            Products.sharebroker, ["check-association", doc, "--url", "https://example.com/private/a", "--url", "https://example.com/b"])
        XCTAssertEqual(check.status, 0, check.err)
        XCTAssertTrue(check.out.contains("excluded"), check.out)
        XCTAssertTrue(check.out.contains("opens ABCDE12345.com.mycompany.myapp"), check.out)
        dir.write("bad.json", #"{"applinks":{"details":[{"appIDs":["A.b"],"components":[{"/":"/x","exclude":"yes"}]}]}}"#)
        let malformed = try runProcess(Products.sharebroker, ["check-association", dir.path + "/bad.json"])
        XCTAssertEqual(malformed.status, 1)
        XCTAssertTrue(malformed.err.contains("applinks.details[0].components[0].exclude"), malformed.err)
        XCTAssertEqual(malformed.out, "", "a failure is said on stderr")
        let badURL = try runProcess(Products.sharebroker, ["check-association", doc, "--url", "https://example.com/b", "--url", "not a url"])
        XCTAssertEqual(badURL.status, 64, badURL.err)
        XCTAssertTrue(badURL.err.contains("--url 'not a url' is not a valid URL"), badURL.err)
        XCTAssertEqual(badURL.out, "", "nothing on stdout that reads as a verdict")
    }

    /// `check-association --url` matches only a URL that could be a universal link by the
    /// document, as the broker routes it: https, on the document's domain (its file name, or
    /// `--domain`), or a subdomain (for `applinks:*.` entries, said).
    func testCheckAssociationMatchesOnlyHttpsURLsOfItsDomain() throws {
        let dir = TempDir()
        writeManifests(dir)
        let doc = dir.path + "/state/associations/example.com.json"
        func verdicts(_ file: String, _ extra: [String] = [], _ urls: [String]) throws -> [String: JSONValue] {
            let r = try runProcess(Products.sharebroker, ["check-association", file, "--json"] + extra + urls.flatMap { ["--url", $0] })
            XCTAssertEqual(r.status, 0, r.err)
            let out = try JSONParser.parse(r.out.trimmingCharacters(in: .whitespacesAndNewlines))
            var byURL: [String: JSONValue] = [:]
            for u in out["urls"]?.arrayValue ?? [] { byURL[u["url"]?.stringValue ?? ""] = u }
            return byURL
        }
        let app = JSONValue.string("ABCDE12345.com.mycompany.myapp")
        let v = try verdicts(doc, [], [
            "https://example.com/computers/1", "https://EXAMPLE.com:443/computers/1", "http://example.com/computers/1",
            "deeplinkmyapp://computers/1", "https://other.org/computers/1", "https://example.com:8443/computers/1",
            "https://a.example.com/computers/1",
        ])
        XCTAssertEqual(v["https://example.com/computers/1"]?["opens"], app)
        XCTAssertEqual(v["https://EXAMPLE.com:443/computers/1"]?["opens"], app, "the default port and the host's case do not matter")
        for u in ["http://example.com/computers/1", "deeplinkmyapp://computers/1", "https://other.org/computers/1", "https://example.com:8443/computers/1"] {
            XCTAssertEqual(v[u]?["opens"], .null, u)
            XCTAssertNotNil(v[u]?["reason"]?.stringValue, u)
        }
        XCTAssertTrue(v["http://example.com/computers/1"]?["reason"]?.stringValue?.contains("https only") == true)
        XCTAssertTrue(v["https://other.org/computers/1"]?["reason"]?.stringValue?.contains("associations/other.org.json") == true)
        XCTAssertEqual(v["https://a.example.com/computers/1"]?["opens"], app)
        // A host with an empty label has no document of its own to send to (the broker routes
        // it to no app: no applinks: entry covers it).
        let empty = try verdicts(doc, [], ["https://example.com./computers/1", "https://.example.com/computers/1", "https://a..example.com/computers/1"])
        for (u, verdict) in empty {
            XCTAssertEqual(verdict["opens"], .null, u)
            let reason = verdict["reason"]?.stringValue ?? ""
            XCTAssertTrue(reason.contains("empty label") && !reason.contains("associations/"), "\(u): \(reason)")
        }
        XCTAssertTrue(v["https://a.example.com/computers/1"]?["note"]?.stringValue?.contains("applinks:*.example.com") == true)
        // A document whose file name names no host: --domain says it, else the host is not checked.
        let plain = dir.path + "/apple-app-site-association"
        XCTAssertEqual(link(doc, plain), 0)
        XCTAssertEqual(try verdicts(plain, [], ["https://other.org/computers/1"])["https://other.org/computers/1"]?["opens"], app)
        let given = try verdicts(plain, ["--domain", "other.org:8443"], ["https://other.org/computers/1", "https://other.org:8443/computers/1"])
        XCTAssertEqual(given["https://other.org/computers/1"]?["opens"], .null)
        XCTAssertEqual(given["https://other.org:8443/computers/1"]?["opens"], app)
        let text = try runProcess(Products.sharebroker, ["check-association", plain, "--url", "https://other.org/computers/1"])
        XCTAssertTrue(text.out.contains("--domain"), text.out)
        // localhost (with a port) names a host too, as the broker reads associations/localhost:8443.json.
        let local = dir.path + "/localhost:8443.json"
        XCTAssertEqual(link(doc, local), 0)
        let l = try verdicts(local, [], ["https://localhost:8443/computers/1", "https://localhost/computers/1"])
        XCTAssertEqual(l["https://localhost:8443/computers/1"]?["opens"], app)
        XCTAssertEqual(l["https://localhost/computers/1"]?["opens"], .null)
        let badDomain = try runProcess(Products.sharebroker, ["check-association", plain, "--domain", "*.other.org"])
        XCTAssertEqual(badDomain.status, 64, badDomain.err)
    }
}
