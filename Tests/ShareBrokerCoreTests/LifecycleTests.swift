// Lifecycle through the real binaries (sharebroker serve, shareclient): start-up, socket file mode,
// the live-broker / stale-socket rule, signals, CLI help/version/usage/exit codes, socket
// selection; plus in-process checks of slow-client dropping and many concurrent connections.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareSystem
import XCTest

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

final class LifecycleTests: XCTestCase {

    /// A started `sharebroker serve` on a fresh temporary directory.
    func startBroker(_ dir: TempDir, state: String? = nil, extraArgs: [String] = [], file: StaticString = #filePath, line: UInt = #line)
        throws -> BrokerProcess
    {
        let p = try BrokerProcess(
            socket: dir.path + "/b.sock", state: state ?? dir.path + "/state", extraArgs: extraArgs, logDir: dir.path)
        XCTAssertTrue(p.waitReady(), "broker did not start; stderr: \(p.stderrText)", file: file, line: line)
        return p
    }

    // MARK: serve

    func testServeStartsWithPrivateSocketAndCreatesStateDirectory() throws {
        let dir = TempDir()
        let state = dir.path + "/deep/state/dir"
        let p = try startBroker(dir, state: state)
        let mode = try XCTUnwrap(fileMode(p.socket))
        XCTAssertEqual(mode & S_IFMT, S_IFSOCK, "not a socket")
        XCTAssertEqual(mode & 0o777, 0o600, String(format: "socket mode is %o", mode & 0o777))
        var isDir: ObjCBool = false
        XCTAssertTrue(FileManager.default.fileExists(atPath: state, isDirectory: &isDir) && isDir.boolValue)
        XCTAssertTrue(FileManager.default.fileExists(atPath: state + "/apps"))
        let st = try BrokerConnection(socketPath: p.socket).call("broker.status")
        XCTAssertEqual(st["version"]?.stringValue, SharebrokerVersion.string)
        XCTAssertEqual(st["connections"]?.intValue, 1)
        // Commit pacing is on by default wherever the kernel keeps nanosecond poll timeouts.
        // (asked of the kernel, not of the poller whose answer turns pacing on)
        let precise = kernelKeepsNanosecondPollTimeouts() ?? ((try? Poller(capacity: 4))?.hasPreciseTimeouts ?? false)
        XCTAssertEqual(st["commitPacing"]?.boolValue, precise, "\(st)")
        p.signal(SIGTERM)
        XCTAssertTrue(p.waitExit())
    }

    /// `--socket-mode` and `--socket-group` open the socket to other users (without them no
    /// manifest's `uids` could ever matter: nobody else could connect): missing directories of
    /// the socket's path are created passable for them (0711 for 666), and a directory on the
    /// way that stops them is warned about at start.
    func testSocketModeAndGroupLetOtherUsersIn() throws {
        let dir = TempDir()
        chmod(dir.path, 0o755)
        let socket = dir.path + "/run/deep/b.sock"
        let p = try BrokerProcess(
            socket: socket, state: dir.path + "/state", extraArgs: ["--socket-mode", "666"], logDir: dir.path)
        XCTAssertTrue(p.waitReady(), p.stderrText)
        XCTAssertEqual(try XCTUnwrap(fileMode(socket)) & 0o777, 0o666)
        for d in [dir.path + "/run", dir.path + "/run/deep"] {
            XCTAssertEqual(try XCTUnwrap(fileMode(d)) & 0o777, 0o711, d)
        }
        XCTAssertFalse(p.stderrText.contains("warning"), p.stderrText)
        if getuid() == 0 {
            let r = try runProcess(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", Products.shareclient, "--socket", socket, "status"])
            XCTAssertEqual(r.status, 0, "another user reaches the socket: \(r.err)")
        }
        p.signal(SIGTERM)
        XCTAssertTrue(p.waitExit())
        XCTAssertFalse(FileManager.default.fileExists(atPath: socket))
        // The group, and a private directory on the way: warned about.
        let privateDir = dir.path + "/private"
        mkdir(privateDir, 0o700)
        let gid = getuid() == 0 ? "65534" : String(getgid())
        let q = try BrokerProcess(
            socket: privateDir + "/b.sock", state: dir.path + "/state", extraArgs: ["--socket-mode", "0660", "--socket-group", gid],
            logDir: dir.path)
        XCTAssertTrue(q.waitReady(), q.stderrText)
        var st = stat()
        XCTAssertEqual(lstat(privateDir + "/b.sock", &st), 0)
        XCTAssertEqual(String(st.st_gid), gid)
        XCTAssertEqual(st.st_mode & 0o777, 0o660)
        XCTAssertTrue(
            q.stderrText.contains("the socket's mode is 660, but \(privateDir) (mode 700) does not let the socket's group through"),
            q.stderrText)
        q.signal(SIGTERM)
        XCTAssertTrue(q.waitExit())
        // Directories it creates for a socket of a group are that group's (the review: they
        // were 0710 with the broker's group, so the group could not pass).
        if getuid() == 0 {
            let groupSocket = dir.path + "/by-group/run/b.sock"
            let g = try BrokerProcess(
                socket: groupSocket, state: dir.path + "/state", extraArgs: ["--socket-mode", "660", "--socket-group", "65534"],
                logDir: dir.path)
            XCTAssertTrue(g.waitReady(), g.stderrText)
            for d in [dir.path + "/by-group", dir.path + "/by-group/run"] {
                XCTAssertEqual(lstat(d, &st), 0)
                XCTAssertEqual(st.st_mode & 0o777, 0o710, d)
                XCTAssertEqual(st.st_gid, 65534, d)
            }
            XCTAssertFalse(g.stderrText.contains("warning"), g.stderrText)
            let r = try runProcess(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", Products.shareclient, "--socket", groupSocket, "status"])
            XCTAssertEqual(r.status, 0, "a member of the group reaches the socket: \(r.err)")
            g.signal(SIGTERM)
            XCTAssertTrue(g.waitExit())
        }
    }

    /// A client refused at a limit that tries again and again gets one log line a second, the
    /// next one counting those left out (the robustness audit: one line per refusal).
    func testRefusedConnectionsAreLoggedAtMostOnceASecond() throws {
        let dir = TempDir()
        let p = try startBroker(dir, extraArgs: ["--max-connections-per-user", "1"])
        let kept = try RawClient(p.socket)
        kept.send(#"{"jsonrpc":"2.0","id":1,"method":"broker.status"}"# + "\n")
        XCTAssertNotNil(kept.readJSON())
        for _ in 0..<50 {
            let refused = try RawClient(p.socket)
            XCTAssertEqual(refused.readJSON()?["error"]?["code"]?.intValue, -32001)
        }
        func refusals() -> [Substring] { p.stderrText.split(separator: "\n").filter { $0.contains("refusing a connection from uid") } }
        XCTAssertEqual(refusals().count, 1, p.stderrText)
        usleep(1_100_000)
        _ = try RawClient(p.socket).readJSON()
        XCTAssertTrue(waitUntil(timeout: 5) { refusals().count == 2 }, p.stderrText)
        XCTAssertTrue(refusals().last?.contains("(and 49 more like it since the last such line, not logged)") ?? false, p.stderrText)
        p.signal(SIGTERM)
        XCTAssertTrue(p.waitExit())
    }

    func testServeWithoutCommitPacingAnswersEveryRequestAndNeverWaits() throws {
        let dir = TempDir()
        dir.write("state/apps/10-myapp.json", deepLinkApp)
        let p = try startBroker(dir, extraArgs: ["--no-commit-pacing"])
        let clients = try (0..<3).map { _ in try RawClient(p.socket) }
        for c in clients {
            c.send(#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"role":"tool"}}"# + "\n")
            XCTAssertNotNil(c.readJSON()?["result"])
        }
        for round in 0..<20 {
            for (i, c) in clients.enumerated() {
                c.send(#"{"jsonrpc":"2.0","id":1,"method":"url.open","params":{"url":"deeplinkmyapp://\#(i)/\#(round)"}}"# + "\n")
            }
            for c in clients { XCTAssertNotNil(c.readJSON()?["result"]?["eventID"]) }
        }
        let st = try BrokerConnection(socketPath: p.socket).call("broker.status")
        XCTAssertEqual(st["pendingEvents"]?.intValue, 60)
        XCTAssertEqual(st["commitPacing"]?.boolValue, false, "the flag turned pacing off: \(st)")
        XCTAssertEqual(st["pacedCommits"]?.intValue, 0)
        XCTAssertGreaterThanOrEqual(st["commits"]?.intValue ?? 0, 20)
        p.signal(SIGTERM)
        XCTAssertTrue(p.waitExit())
    }

    func testSecondServeOnSameSocketRefusesAndFirstKeepsWorking() throws {
        let dir = TempDir()
        let p = try startBroker(dir)
        let inode = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: p.socket)[.systemFileNumber] as? UInt64)
        let before = try BrokerConnection(socketPath: p.socket)
        XCTAssertNotNil(try before.call("broker.status")["version"])
        let r = try runProcess(
            Products.sharebroker, ["serve", "--socket", p.socket, "--state", dir.path + "/state2"], timeout: 10)
        XCTAssertNotEqual(r.status, 0, "a second broker on a live socket must fail")
        XCTAssertTrue(
            r.err.contains("another broker (pid \(p.process.processIdentifier)) is already running on \(p.socket)"),
            "stderr should say a broker is already running, with its pid, naming the socket: \(r.err)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/state2"), "the refused broker left no state directory")
        // The first broker and its socket file are untouched.
        XCTAssertTrue(isSocketFile(p.socket))
        XCTAssertEqual(
            try FileManager.default.attributesOfItem(atPath: p.socket)[.systemFileNumber] as? UInt64, inode,
            "the live broker's socket file was replaced")
        XCTAssertNotNil(try before.call("broker.status", timeoutMillis: 2000)["version"])
        XCTAssertNotNil(try BrokerConnection(socketPath: p.socket).call("broker.status", timeoutMillis: 2000)["version"])
        XCTAssertTrue(p.process.isRunning)
        p.signal(SIGTERM)
        XCTAssertTrue(p.waitExit())
    }

    /// A program that listens on the socket path but is no broker is not called one; the broker
    /// refuses and leaves its socket alone.
    func testServeOnASocketAnotherProgramListensOnSaysSo() throws {
        let dir = TempDir()
        let path = dir.path + "/other.sock"
        let listener = try UnixSocket.listen(path: path)
        defer { FD.close(listener) }
        // Silent (it never accepts): said to be that.
        let silent = try runProcess(Products.sharebroker, ["serve", "--socket", path, "--state", dir.path + "/state"], timeout: 10)
        XCTAssertEqual(silent.status, 1, silent.err)
        XCTAssertTrue(silent.err.contains("something is already listening on \(path) but did not answer within 1 s"), silent.err)
        XCTAssertTrue(isSocketFile(path))
        // Talking, but not as a broker (another socket: the first one's backlog holds the probe).
        let path2 = dir.path + "/talking.sock"
        let listener2 = try UnixSocket.listen(path: path2)
        defer { FD.close(listener2) }
        _ = fcntl(listener2, F_SETFL, fcntl(listener2, F_GETFL) & ~O_NONBLOCK)
        let server = Thread {
            for _ in 0..<2 {  // (the broker's liveness check, then its probe)
                let fd = accept(listener2, nil, nil)
                guard fd >= 0 else { return }
                #if canImport(Darwin)
                    // (no MSG_NOSIGNAL on Darwin: the accepted socket itself must not raise SIGPIPE)
                    var one: Int32 = 1
                    _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
                #endif
                _ = "HTTP/1.1 400 Bad Request\r\n\r\n".withCString { rawSend(fd, $0, strlen($0)) }
                close(fd)
            }
        }
        server.start()
        let talking = try runProcess(Products.sharebroker, ["serve", "--socket", path2, "--state", dir.path + "/state"], timeout: 10)
        XCTAssertEqual(talking.status, 1, talking.err)
        XCTAssertTrue(
            talking.err.contains("another program is already listening on \(path2) (it does not answer as a broker)"), talking.err)
        XCTAssertTrue(isSocketFile(path2))
    }

    func testSecondServeOnSameStateRefusesAndFirstKeepsItsEvents() throws {
        let dir = TempDir()
        dir.write("state/apps/myapp.json", #"{"bundleID": "com.mycompany.myapp", "urlSchemes": ["deeplinkmyapp"]}"#)
        chmod(dir.path + "/state", 0o700)
        let p = try startBroker(dir)
        let tool = try BrokerConnection(socketPath: p.socket)
        try tool.hello(role: "tool")
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://a"])["eventID"]?.stringValue, "ev-1")
        let r = try runProcess(
            Products.sharebroker, ["serve", "--socket", dir.path + "/other.sock", "--state", dir.path + "/state"], timeout: 10)
        XCTAssertEqual(r.status, 1, "a second broker on a state directory in use must fail: \(r.err)")
        XCTAssertTrue(r.err.contains("already running on the state directory"), r.err)
        XCTAssertTrue(r.err.contains("pid \(p.process.processIdentifier)"), r.err)
        XCTAssertFalse(isSocketFile(dir.path + "/other.sock"), "the refused broker never listened")
        let same = try runProcess(Products.sharebroker, ["serve", "--socket", p.socket, "--state", dir.path + "/state"], timeout: 10)
        XCTAssertEqual(same.status, 1, same.err)
        XCTAssertTrue(same.err.contains("already running on \(p.socket)"), "the same socket too: named: \(same.err)")
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://b"])["eventID"]?.stringValue, "ev-2")
        // The lock dies with the broker, even by SIGKILL: the next one starts on the same state.
        p.signal(SIGKILL)
        XCTAssertTrue(p.waitExit())
        let next = try startBroker(dir)
        XCTAssertEqual(try BrokerConnection(socketPath: next.socket).call("broker.status")["pendingEvents"]?.intValue, 2)
        next.signal(SIGTERM)
        XCTAssertTrue(next.waitExit())
    }

    /// STATE/format: written at the first start (0600); a directory a newer broker marked with a
    /// higher format, or a file that says no format, is refused before anything in it is read;
    /// one without the file (written before it existed) is marked and served.
    func testTheStateFormatIsMarkedAndANewerOneRefused() throws {
        let dir = TempDir()
        dir.write("state/apps/myapp.json", #"{"bundleID": "com.mycompany.myapp", "urlSchemes": ["deeplinkmyapp"]}"#)
        chmod(dir.path + "/state", 0o700)
        let format = dir.path + "/state/format"
        var p = try startBroker(dir)
        XCTAssertEqual(try String(contentsOfFile: format, encoding: .utf8), "sharebroker-state \(Broker.stateFormat)\n")
        XCTAssertEqual(try XCTUnwrap(fileMode(format)) & 0o777, 0o600)
        let tool = try BrokerConnection(socketPath: p.socket)
        try tool.hello(role: "tool")
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://kept"])
        p.signal(SIGTERM)
        XCTAssertTrue(p.waitExit())
        func serve() throws -> (status: Int32, out: String, err: String) {
            try runProcess(Products.sharebroker, ["serve", "--socket", dir.path + "/b.sock", "--state", dir.path + "/state"], timeout: 10)
        }
        dir.write("state/format", "sharebroker-state \(Broker.stateFormat + 1)\n")
        chmod(format, 0o600)
        var r = try serve()
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("was written by a newer sharebroker (state format \(Broker.stateFormat + 1)"), r.err)
        dir.write("state/format", "something else\n")
        chmod(format, 0o600)
        r = try serve()
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("does not say the state directory's format"), r.err)
        // Written before the file existed: marked, and what it holds is served.
        try FileManager.default.removeItem(atPath: format)
        p = try startBroker(dir)
        XCTAssertEqual(try String(contentsOfFile: format, encoding: .utf8), "sharebroker-state \(Broker.stateFormat)\n")
        XCTAssertEqual(try BrokerConnection(socketPath: p.socket).call("broker.status")["pendingEvents"]?.intValue, 1)
        p.signal(SIGTERM)
        XCTAssertTrue(p.waitExit())
    }

    func testStaleSocketFileIsReplaced() throws {
        let dir = TempDir()
        let first = try startBroker(dir)
        first.signal(SIGKILL)
        XCTAssertTrue(first.waitExit())
        XCTAssertTrue(isSocketFile(first.socket), "a SIGKILLed broker leaves its socket file behind")
        XCTAssertFalse(UnixSocketProbe.isLive(first.socket))

        let second = try startBroker(dir)
        XCTAssertTrue(second.process.isRunning, "stderr: \(second.stderrText)")
        XCTAssertNotNil(try BrokerConnection(socketPath: second.socket).call("broker.status")["version"])
        second.signal(SIGTERM)
        XCTAssertTrue(second.waitExit())
    }

    func testServeRefusesToReplaceANonSocketFile() throws {
        let dir = TempDir()
        let path = dir.path + "/b.sock"
        _ = FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8))
        let r = try runProcess(Products.sharebroker, ["serve", "--socket", path, "--state", dir.path + "/state"], timeout: 10)
        XCTAssertNotEqual(r.status, 0)
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "keep me")
    }

    func testSIGTERMExitsZeroAndRemovesSocket() throws {
        try checkGracefulStop(SIGTERM)
    }

    func testSIGINTExitsZeroAndRemovesSocket() throws {
        try checkGracefulStop(SIGINT)
    }

    func checkGracefulStop(_ sig: Int32, file: StaticString = #filePath, line: UInt = #line) throws {
        let dir = TempDir()
        let p = try startBroker(dir)
        // An idle open connection must not hold the shutdown up.
        let idle = try BrokerConnection(socketPath: p.socket)
        try idle.hello(role: "tool")
        let start = Date()
        p.signal(sig)
        XCTAssertTrue(p.waitExit(timeout: 5), "broker did not exit within 5 s after signal \(sig)", file: file, line: line)
        guard !p.process.isRunning else { return }
        XCTAssertLessThan(Date().timeIntervalSince(start), 5, file: file, line: line)
        XCTAssertEqual(p.process.terminationReason, .exit, file: file, line: line)
        XCTAssertEqual(p.process.terminationStatus, 0, "stderr: \(p.stderrText)", file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: p.socket), "socket file left behind", file: file, line: line)
        // The idle client sees the connection end (EOF or reset, not silence).
        do {
            let m = try idle.readMessage(timeoutMillis: 2000)
            XCTAssertNil(m, "unexpected message after shutdown", file: file, line: line)
        } catch ClientError.timeout {
            XCTFail("the idle connection was not closed", file: file, line: line)
        } catch {}
    }

    /// Started with SIGTERM, SIGINT and SIGHUP blocked (the mask is inherited across exec: some
    /// supervisors, and Foundation's Process at times, start children so), the broker still
    /// stops on SIGTERM: it unblocks the signals it handles.
    func testSIGTERMStopsABrokerStartedWithTheSignalsBlocked() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw XCTSkip("needs /usr/bin/python3") }
        let dir = TempDir()
        let socket = dir.path + "/b.sock"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = [
            "-c",
            "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]); os.execv(sys.argv[1], sys.argv[1:])",
            Products.sharebroker, "serve", "--socket", socket, "--state", dir.path + "/state",
        ]
        p.standardError = FileHandle.nullDevice
        try p.run()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        XCTAssertTrue(waitUntil(timeout: 10) { (try? BrokerConnection(socketPath: socket).call("broker.status")) != nil }, "the broker did not start")
        kill(p.processIdentifier, SIGTERM)
        XCTAssertTrue(waitUntil(timeout: 5) { !p.isRunning }, "SIGTERM stayed pending")
        if !p.isRunning { XCTAssertEqual(p.terminationStatus, 0) }
    }

    /// A SIGHUP sent as soon as STATE/broker.lock names the new broker's pid (as a script that
    /// reads it to reload would) reloads instead of killing the broker that is still starting
    /// (it died in nine of ten starts); a SIGTERM then still stops it with status 0.
    func testSIGHUPAsSoonAsTheLockNamesThePidDoesNotKillTheBroker() throws {
        for round in 0..<5 {
            let dir = TempDir()
            let socket = dir.path + "/b.sock"
            let lock = dir.path + "/state/broker.lock"
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Products.sharebroker)
            p.arguments = ["serve", "--socket", socket, "--state", dir.path + "/state"]
            p.standardError = FileHandle.nullDevice
            try p.run()
            defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
            let pid = String(p.processIdentifier)
            var sent = false
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline && p.isRunning {
                if let text = try? String(contentsOfFile: lock, encoding: .utf8), text.contains(pid) {
                    kill(p.processIdentifier, SIGHUP)
                    sent = true
                    break
                }
                usleep(200)
            }
            XCTAssertTrue(sent, "round \(round): the lock never named pid \(pid)")
            XCTAssertTrue(
                waitUntil(timeout: 10) { (try? BrokerConnection(socketPath: socket).call("broker.status")) != nil },
                "round \(round): the broker did not survive an early SIGHUP (running: \(p.isRunning))")
            kill(p.processIdentifier, SIGTERM)
            XCTAssertTrue(waitUntil(timeout: 5) { !p.isRunning })
            if !p.isRunning { XCTAssertEqual(p.terminationStatus, 0, "round \(round)") }
        }
    }

    func testSIGHUPReloadsManifests() throws {
        let dir = TempDir()
        let p = try startBroker(dir)
        let c = try BrokerConnection(socketPath: p.socket)
        try c.hello(role: "tool")
        XCTAssertEqual(try c.call("apps.list")["apps"]?.arrayValue?.count, 0)
        dir.write("state/apps/late.json", manifestJSON("com.example.late", schemes: ["late"]))
        p.signal(SIGHUP)
        XCTAssertTrue(
            waitUntil {
                (try? c.call("apps.list", timeoutMillis: 1000)["apps"]?.arrayValue?.first?["bundleID"]?.stringValue)
                    == "com.example.late"
            }, "SIGHUP did not reload manifests")
        XCTAssertTrue(p.process.isRunning, "SIGHUP must not stop the broker")
        p.signal(SIGTERM)
        XCTAssertTrue(p.waitExit())
        XCTAssertEqual(p.process.terminationStatus, 0)
    }

    // MARK: CLI: help, version, usage errors

    func testHelpAndVersionExitZero() throws {
        let cases: [(String, [String], String)] = [
            (Products.sharebroker, ["--help"], "sharebroker"),
            (Products.sharebroker, ["serve", "--help"], "--socket"),
            (Products.shareclient, ["--help"], "shareclient"),
            (Products.shareclient, ["call", "--help"], "method"),
            (Products.shareclient, ["status", "--help"], "status"),
        ]
        for (tool, args, word) in cases {
            let r = try runProcess(tool, args, timeout: 10)
            let name = (tool as NSString).lastPathComponent + " " + args.joined(separator: " ")
            XCTAssertEqual(r.status, 0, "\(name): \(r.err)")
            XCTAssertTrue(r.out.lowercased().contains("usage"), "\(name) prints usage: \(r.out)")
            XCTAssertTrue(r.out.contains(word), "\(name) mentions \(word)")
        }
        let versions: [(String, [String])] = [
            (Products.sharebroker, ["--version"]),
            (Products.sharebroker, ["serve", "--version"]),
            (Products.shareclient, ["--version"]),
            (Products.shareclient, ["call", "--version"]),
            (Products.shareclient, ["status", "--version"]),
        ]
        for (tool, args) in versions {
            let r = try runProcess(tool, args, timeout: 10)
            let name = (tool as NSString).lastPathComponent + " " + args.joined(separator: " ")
            XCTAssertEqual(r.status, 0, "\(name): \(r.err)")
            XCTAssertTrue(r.out.contains(SharebrokerVersion.string), "\(name) prints the version: \(r.out)")
        }
    }

    func testRelativeStateAndSocketPathsAreAnsweredAbsolute() throws {
        let dir = TempDir()
        let envFile = dir.path + "/launched-env"
        dir.write(
            "state/apps/t.json",
            JSONValue.object([
                "bundleID": "com.t.app", "urlSchemes": ["tapp"], "appGroups": ["group.t"],
                "launch": .array(["/bin/sh", "-c", .string("echo \"$SHAREBROKER_SOCKET\" > \(envFile)")]),
                "extensions": [
                    [
                        "bundleID": "com.t.app.share", "point": "com.apple.share-services", "appGroups": ["group.t"],
                        "activationRule": "TRUEPREDICATE",
                    ]
                ],
            ]).compactText)
        dir.write("doc.pdf", "%PDF-1.4 x")
        // Started from `dir` with relative paths; clients elsewhere use the absolute ones.
        let broker = try BrokerProcess(socket: "s.sock", state: "./state", logDir: dir.path, cwd: dir.path)
        defer {
            broker.signal(SIGTERM)
            _ = broker.waitExit()
        }
        let socket = dir.path + "/s.sock"
        let real = URL(fileURLWithPath: dir.path).resolvingSymlinksInPath().path  // what getcwd says (macOS: /private/tmp/...)
        XCTAssertTrue(waitUntil(timeout: 10) { (try? BrokerConnection(socketPath: socket)) != nil }, broker.stderrText)
        let tool = try BrokerConnection(socketPath: socket)
        _ = try tool.hello(role: "tool")
        let status = try tool.call("broker.status")
        XCTAssertEqual(status["stateDirectory"]?.stringValue, real + "/state")
        XCTAssertEqual(status["socket"]?.stringValue, real + "/s.sock")
        let ext = try BrokerConnection(socketPath: socket)
        _ = try ext.hello(role: "extension", bundleID: "com.t.app.share")
        let shareID = try XCTUnwrap(ext.call("share.send", ["items": [["path": .string(dir.path + "/doc.pdf")]]])["shareID"]?.stringValue)
        let app = try BrokerConnection(socketPath: socket)
        _ = try app.hello(role: "app", bundleID: "com.t.app")
        let path = try XCTUnwrap(app.call("share.get", ["shareID": .string(shareID)])["items"]?.arrayValue?.first?["path"]?.stringValue)
        XCTAssertEqual(path, real + "/state/groups/group.t/files/\(shareID)/doc.pdf")
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "%PDF-1.4 x")
        // An app launched on demand is told the absolute socket path.
        _ = try tool.call("url.open", ["url": "tapp://x"])
        XCTAssertTrue(waitUntil(timeout: 10) { FileManager.default.fileExists(atPath: envFile) })
        XCTAssertTrue(
            waitUntil(timeout: 5) { (try? String(contentsOfFile: envFile, encoding: .utf8)) == real + "/s.sock\n" },
            (try? String(contentsOfFile: envFile, encoding: .utf8)) ?? "")
    }

    func testASocketDirectoryAnotherUserMayWriteIsRefused() throws {
        let dir = TempDir()
        chmod(dir.path, 0o755)
        let open = dir.path + "/open"
        let sticky = dir.path + "/sticky"
        let foreign = dir.path + "/foreign"
        let under = open + "/mine"  // a private directory under one anyone may write in
        let groupWritable = dir.path + "/group"
        for d in [open, sticky, foreign, under, groupWritable] {
            try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        }
        chmod(open, 0o777)
        chmod(under, 0o700)
        chmod(sticky, 0o1777)
        chmod(groupWritable, 0o770)
        var cases = [(open, open, "writable by group or others"), (under, open, "writable by group or others")]
        if getuid() == 0 {
            XCTAssertEqual(chown(foreign, 65534, 65534), 0)
            cases.append((foreign, foreign, "belongs to uid 65534"))
            XCTAssertEqual(chown(groupWritable, 0, 65534), 0)  // writable by a group other users are in
            cases.append((groupWritable, groupWritable, "writable by group or others"))
        }
        for (d, named, why) in cases {
            let r = try runProcess(Products.sharebroker, ["serve", "--socket", d + "/s.sock", "--state", dir.path + "/state"], timeout: 10)
            XCTAssertEqual(r.status, 1, r.err)
            XCTAssertTrue(r.err.contains(why) && r.err.contains(named + " "), r.err)
            XCTAssertFalse(FileManager.default.fileExists(atPath: d + "/s.sock"))
            XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/state"), "nothing created for a broker that refuses to start")
        }
        // A socket directory to be made under one another user may write is refused before it is
        // made (nor is the state directory created).
        let r = try runProcess(Products.sharebroker, ["serve", "--socket", open + "/new/s.sock", "--state", dir.path + "/state"], timeout: 10)
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("writable by group or others") && r.err.contains(open + " "), r.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: open + "/new"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/state"))
        // A sticky directory (as /tmp) is fine: nobody can remove or rename another's socket there.
        // So is one writable by this user's own group when nobody else is in it (umask 002).
        let ownGroup = dir.path + "/own-group"
        try FileManager.default.createDirectory(atPath: ownGroup, withIntermediateDirectories: true)
        chmod(ownGroup, 0o770)
        var fine = [sticky]
        if Broker.groupIsThisUsersAlone(getgid()) { fine.append(ownGroup) }
        for d in fine {
            let p = try BrokerProcess(socket: d + "/s.sock", state: dir.path + "/state", logDir: dir.path)
            XCTAssertTrue(p.waitReady(), "\(d): \(p.stderrText)")
            p.signal(SIGTERM)
            XCTAssertTrue(p.waitExit())
        }
    }

    func testBadOptionsExit64WithMessageOnStderr() throws {
        let cases: [(String, [String], String)] = [
            (Products.sharebroker, ["serve", "--bogus"], "--bogus"),
            (Products.sharebroker, ["frobnicate"], "frobnicate"),
            (Products.sharebroker, ["serve", "--max-message", "lots"], "max-message"),
            (Products.sharebroker, ["serve", "--max-message", "10"], "max-message"),
            // (a limit whose derived sums overflowed started, then died on the first client)
            (Products.sharebroker, ["serve", "--max-message", "4611686018427387904"], "at most 1073741824"),
            (Products.sharebroker, ["serve", "--max-output", "9223372036854775807"], "max-output"),
            (Products.sharebroker, ["serve", "--max-requests-in-flight", "9223372036854775807"], "max-requests-in-flight"),
            (Products.sharebroker, ["serve", "--launch-timeout", "-1"], "launch-timeout"),
            (Products.sharebroker, ["serve", "--launch-timeout", "soon"], "launch-timeout"),
            (Products.sharebroker, ["serve", "--journal-segment-size", "100"], "journal-segment-size"),
            (Products.sharebroker, ["serve", "--socket-mode", "0644x"], "socket-mode"),
            (Products.sharebroker, ["serve", "--socket-mode", "066"], "socket-mode"),  // (the owner locked out)
            (Products.sharebroker, ["serve", "--socket-mode", "4666"], "socket-mode"),
            (Products.sharebroker, ["serve", "--socket-mode", "0400"], "socket-mode"),
            (Products.sharebroker, ["serve", "--socket-mode", "644"], "the group some permission but not write"),
            (Products.sharebroker, ["serve", "--socket-mode", "640"], "the group some permission but not write"),
            (Products.sharebroker, ["serve", "--socket-mode", "0604"], "other users some permission but not write"),
            (Products.sharebroker, ["serve", "--socket-group", "no-such-group-here"], "no group 'no-such-group-here'"),
            (Products.sharebroker, ["serve", "--socket-group", "0"], "needs a --socket-mode that lets the group in"),
            (Products.shareclient, ["status", "--bogus"], "--bogus"),
            (Products.shareclient, ["call"], "method"),
            (Products.shareclient, ["call", "broker.status", "not-json"], "json"),
        ]
        for (tool, args, word) in cases {
            let r = try runProcess(tool, args, env: ["SHAREBROKER_SOCKET": "/nonexistent/x.sock"], timeout: 10)
            let name = (tool as NSString).lastPathComponent + " " + args.joined(separator: " ")
            XCTAssertEqual(r.status, 64, "\(name): stderr \(r.err)")
            XCTAssertTrue(r.err.lowercased().contains(word.lowercased()), "\(name): stderr should mention \(word): \(r.err)")
            XCTAssertTrue(r.out.isEmpty, "\(name): nothing on stdout: \(r.out)")
        }
    }

    // MARK: CLI: talking to a broker

    func testShareclientAgainstMissingSocketExits69NamingThePath() throws {
        let dir = TempDir()
        let path = dir.path + "/missing.sock"
        for args in [["status", "--socket", path], ["--socket", path, "call", "apps.list"]] {
            let r = try runProcess(Products.shareclient, args, timeout: 10)
            XCTAssertEqual(r.status, 69, "\(args): \(r.err)")
            XCTAssertTrue(r.err.contains(path), "stderr should name the socket path: \(r.err)")
        }
    }

    func testShareclientCommandsAgainstALiveBroker() throws {
        let dir = TempDir()
        dir.write("state/apps/cli.json", manifestJSON("com.example.cli", schemes: ["cliapp"]))
        let p = try startBroker(dir)
        defer {
            p.signal(SIGTERM)
            _ = p.waitExit()
        }
        // --socket before and after the subcommand.
        for args in [["--socket", p.socket, "call", "apps.list"], ["call", "apps.list", "--socket", p.socket], ["call", "--socket", p.socket, "apps.list"]] {
            let r = try runProcess(Products.shareclient, args, env: ["SHAREBROKER_SOCKET": dir.path + "/wrong.sock"], timeout: 10)
            XCTAssertEqual(r.status, 0, "\(args): \(r.err)")
            let v = try? JSONParser.parse(r.out)
            XCTAssertEqual(v?["apps"]?.arrayValue?.first?["bundleID"]?.stringValue, "com.example.cli", "\(args): \(r.out)")
        }

        // Params as JSON.
        let hello = try runProcess(Products.shareclient, ["call", "hello", #"{"role":"tool"}"#, "--socket", p.socket, "--json"], timeout: 10)
        XCTAssertEqual(hello.status, 0, hello.err)
        XCTAssertEqual((try? JSONParser.parse(hello.out))?["role"]?.stringValue, "tool")

        // An unknown method: exit 1, stderr names it.
        let bad = try runProcess(Products.shareclient, ["call", "no.such.method", "--socket", p.socket], timeout: 10)
        XCTAssertEqual(bad.status, 1, bad.err)
        XCTAssertTrue(bad.err.contains("no.such.method"), "stderr should mention the method: \(bad.err)")
        XCTAssertTrue(bad.err.contains("-32601"), "stderr should give the code: \(bad.err)")

        // A JSON-RPC error from hello is also exit 1.
        let unknown = try runProcess(Products.shareclient, ["status", "--socket", p.socket, "--as", "com.example.nobody"], timeout: 10)
        XCTAssertEqual(unknown.status, 1, unknown.err)
        XCTAssertTrue(unknown.err.contains("com.example.nobody"), unknown.err)

        // --json: exactly one line of JSON.
        let json = try runProcess(Products.shareclient, ["call", "broker.status", "--json", "--socket", p.socket], timeout: 10)
        XCTAssertEqual(json.status, 0, json.err)
        XCTAssertTrue(json.out.hasSuffix("\n"))
        let lines = json.out.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.isEmpty }
        XCTAssertEqual(lines.count, 1, "one line: \(json.out)")
        let st = try? JSONParser.parse(String(lines.first ?? ""))
        XCTAssertEqual(st?["version"]?.stringValue, SharebrokerVersion.string)

        // status, human and JSON.
        let status = try runProcess(Products.shareclient, ["status", "--socket", p.socket], timeout: 10)
        XCTAssertEqual(status.status, 0, status.err)
        XCTAssertTrue(status.out.contains(SharebrokerVersion.string), status.out)
        let statusJSON = try runProcess(Products.shareclient, ["status", "--json", "--socket", p.socket], timeout: 10)
        XCTAssertEqual(statusJSON.status, 0)
        XCTAssertEqual((try? JSONParser.parse(statusJSON.out))?["apps"]?.intValue, 1)
    }

    func testEnvironmentSocketAndSocketOptionPrecedence() throws {
        let dir = TempDir()
        let p = try startBroker(dir)
        defer {
            p.signal(SIGTERM)
            _ = p.waitExit()
        }
        let missing = dir.path + "/nothing-here.sock"
        // $SHAREBROKER_SOCKET alone is honoured.
        let viaEnv = try runProcess(Products.shareclient, ["status", "--json"], env: ["SHAREBROKER_SOCKET": p.socket], timeout: 10)
        XCTAssertEqual(viaEnv.status, 0, viaEnv.err)
        XCTAssertEqual((try? JSONParser.parse(viaEnv.out))?["version"]?.stringValue, SharebrokerVersion.string)
        // --socket beats the environment, both ways.
        let optionWins = try runProcess(
            Products.shareclient, ["status", "--socket", p.socket], env: ["SHAREBROKER_SOCKET": missing], timeout: 10)
        XCTAssertEqual(optionWins.status, 0, optionWins.err)
        let optionWins2 = try runProcess(
            Products.shareclient, ["status", "--socket", missing], env: ["SHAREBROKER_SOCKET": p.socket], timeout: 10)
        XCTAssertEqual(optionWins2.status, 69, "--socket must beat $SHAREBROKER_SOCKET")
        XCTAssertTrue(optionWins2.err.contains(missing), optionWins2.err)
    }

    func testServeHonoursEnvironmentSocketAndState() throws {
        let dir = TempDir()
        let sock = dir.path + "/env.sock"
        let state = dir.path + "/envstate"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Products.sharebroker)
        p.arguments = ["serve"]
        var env = ProcessInfo.processInfo.environment
        env["SHAREBROKER_SOCKET"] = sock
        env["SHAREBROKER_STATE"] = state
        p.environment = env
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        defer {
            if p.isRunning {
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
            }
        }
        XCTAssertTrue(waitUntil(timeout: 10) { (try? BrokerConnection(socketPath: sock).call("broker.status", timeoutMillis: 1000)) != nil })
        XCTAssertTrue(FileManager.default.fileExists(atPath: state + "/apps"))
        kill(p.processIdentifier, SIGTERM)
        XCTAssertTrue(waitUntil(timeout: 5) { !p.isRunning })
        XCTAssertEqual(p.terminationStatus, 0)
    }

    /// Relative XDG_RUNTIME_DIR and XDG_STATE_HOME are ignored, as the XDG Base Directory
    /// Specification says: the socket goes in TMPDIR's private directory and the state under HOME.
    func testRelativeXDGDirectoriesAreIgnored() throws {
        let dir = TempDir()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Products.sharebroker)
        p.arguments = ["serve"]
        var env = ProcessInfo.processInfo.environment
        env["SHAREBROKER_SOCKET"] = nil
        env["SHAREBROKER_STATE"] = nil
        env["XDG_RUNTIME_DIR"] = "relative/run"
        env["XDG_STATE_HOME"] = "relative/state"
        env["HOME"] = dir.path + "/home"
        env["TMPDIR"] = dir.path + "/tmp"
        p.environment = env
        p.currentDirectoryURL = URL(fileURLWithPath: dir.path)
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try FileManager.default.createDirectory(atPath: dir.path + "/tmp", withIntermediateDirectories: true)
        try p.run()
        defer {
            if p.isRunning {
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
            }
        }
        let sock = dir.path + "/tmp/sharebroker-\(getuid())/sharebroker.sock"
        XCTAssertTrue(waitUntil(timeout: 10) { (try? BrokerConnection(socketPath: sock).call("broker.status", timeoutMillis: 1000)) != nil })
        XCTAssertEqual(
            try BrokerConnection(socketPath: sock).call("broker.status")["stateDirectory"]?.stringValue,
            dir.path + "/home/.local/state/sharebroker")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/relative"), "nothing made under the working directory")
        kill(p.processIdentifier, SIGTERM)
        XCTAssertTrue(waitUntil(timeout: 5) { !p.isRunning })
    }

    // MARK: Slow clients and many connections (in-process broker)

    /// A broker with a 64-KiB output cap and 1,500 pending shares (a `share.list` of ~300 KB), and a
    /// raw app session of their app.
    func appWith1500SharesAndA64KiBCap() throws -> (BrokerHarness, RawClient) {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.maxOutputBuffer = 65536 }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        for i in 0..<1500 { _ = try ext.call("share.send", ["items": [["url": .string("https://youtu.be/\(i)")]]]) }
        let a = try RawClient(h.socket)
        a.send(#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"role":"app","bundleID":"com.mycompany.myapp"}}"# + "\n")
        XCTAssertNotNil(a.readJSON()?["result"])
        return (h, a)
    }

    /// A reply larger than the output cap still reaches a client that reads it; a request read while
    /// more than the cap waits unread gets -32007 instead of another reply (it is not run).
    func testAReplyLargerThanTheOutputCapReachesAReaderAndFurtherRequestsWait() throws {
        let (h, a) = try appWith1500SharesAndA64KiBCap()
        defer { h.stop() }
        // Both requests in one write: the second is read while the first's ~300 KB wait unread.
        a.send(#"{"jsonrpc":"2.0","id":2,"method":"share.list"}"# + "\n" + #"{"jsonrpc":"2.0","id":3,"method":"broker.status"}"# + "\n")
        let list = try XCTUnwrap(a.readJSON(timeout: 10))
        XCTAssertEqual(list["id"]?.intValue, 2)
        XCTAssertEqual(list["result"]?["shares"]?.arrayValue?.count, 1500)
        let refused = try XCTUnwrap(a.readJSON())
        XCTAssertEqual(refused["id"]?.intValue, 3)
        XCTAssertEqual(refused["error"]?["code"]?.intValue, -32007)
        XCTAssertTrue(refused["error"]?["message"]?.stringValue?.contains("--max-output") ?? false, "\(refused)")
        // Read: served again.
        a.send(#"{"jsonrpc":"2.0","id":4,"method":"broker.status"}"# + "\n")
        let status = try XCTUnwrap(a.readJSON())
        XCTAssertEqual(status["result"]?["droppedSlowClients"]?.intValue, 0)
    }

    /// Replies held behind one that waits for its commit count as unread output too: after a
    /// durable request, a large reply and then another request in the same write, the last one
    /// gets -32007.
    func testRepliesHeldForACommitCountTowardsTheOutputCap() throws {
        let (h, a) = try appWith1500SharesAndA64KiBCap()
        defer { h.stop() }
        a.send(
            #"{"jsonrpc":"2.0","id":2,"method":"defaults.set","params":{"group":"group.com.mycompany.myapp","key":"k","value":1}}"# + "\n"
                + #"{"jsonrpc":"2.0","id":3,"method":"share.list"}"# + "\n" + #"{"jsonrpc":"2.0","id":4,"method":"broker.status"}"# + "\n")
        XCTAssertNotNil(a.readJSON(timeout: 10)?["result"]?["version"])
        XCTAssertEqual(a.readJSON(timeout: 10)?["result"]?["shares"]?.arrayValue?.count, 1500)
        let refused = try XCTUnwrap(a.readJSON())
        XCTAssertEqual(refused["id"]?.intValue, 4)
        XCTAssertEqual(refused["error"]?["code"]?.intValue, -32007)
    }

    /// In one JSON-RPC batch, the replies of the earlier members count towards the output cap:
    /// once they pass it, the later members get -32007 instead of running.
    func testABatchsOwnRepliesCountTowardsTheOutputCap() throws {
        let (h, a) = try appWith1500SharesAndA64KiBCap()
        defer { h.stop() }
        a.send("[" + (2...4).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"share.list"}"# }.joined(separator: ",") + "]\n")
        let replies = try XCTUnwrap(a.readJSON(timeout: 10)?.arrayValue)
        XCTAssertEqual(replies.count, 3)
        XCTAssertEqual(replies.first?["result"]?["shares"]?.arrayValue?.count, 1500)
        XCTAssertEqual(replies.dropFirst().map { $0["error"]?["code"]?.intValue }, [-32007, -32007])
    }

    func testClientThatNeverReadsIsDroppedWhileOthersAreServed() throws {
        let h = BrokerHarness()
        try h.start { $0.maxOutputBuffer = 65536 }
        defer { h.stop() }
        let observer = try h.connect()
        XCTAssertEqual(try observer.call("broker.status")["droppedSlowClients"]?.intValue, 0)

        let hog = try RawClient(h.socket)
        defer { withExtendedLifetime(hog) {} }  // keep the descriptor open until the flooding thread ends
        let fd = hog.fd
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        let stop = Box(false)
        let lock = NSLock()
        let outcome = Box<(sent: Int, error: Int32)>((0, 0))
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            var chunk: [UInt8] = []
            for i in 0..<1000 { chunk += Array(#"{"jsonrpc":"2.0","id":\#(i),"method":"broker.status"}"#.utf8) + [0x0A] }
            var sent = 0
            var err: Int32 = 0
            var off = 0
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                lock.lock()
                let s = stop.value
                lock.unlock()
                if s { break }
                let n = chunk.withUnsafeBytes { rawSend(fd, $0.baseAddress! + off, chunk.count - off) }
                if n > 0 {
                    sent += n
                    off = (off + n) % chunk.count
                    continue
                }
                let e = errno
                if e == EAGAIN || e == EWOULDBLOCK || e == EINTR {
                    var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&pfd, 1, 20)
                    continue
                }
                err = e  // EPIPE / ECONNRESET: the broker dropped us
                break
            }
            lock.lock()
            outcome.value = (sent, err)
            lock.unlock()
            finished.signal()
        }
        thread.start()
        let joined = Box(false)
        defer {
            lock.lock()
            stop.value = true
            lock.unlock()
            if !joined.value { _ = finished.wait(timeout: .now() + 12) }
        }

        // While the hog floods, another client is answered promptly.
        var slowest = 0.0
        var dropped = 0
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let t0 = Date()
            let st = try observer.call("broker.status", timeoutMillis: Int32(2000 * sanitizerSlowdown))
            slowest = max(slowest, Date().timeIntervalSince(t0))
            dropped = st["droppedSlowClients"]?.intValue ?? -1
            if dropped >= 1 { break }
            usleep(5_000)
        }
        XCTAssertEqual(dropped, 1, "the client that never reads was not dropped")
        XCTAssertLessThan(slowest, 1.0 * sanitizerSlowdown, "the other client waited \(slowest) s for an answer")
        let ended = finished.wait(timeout: .now() + 5)
        joined.value = ended == .success
        XCTAssertEqual(ended, .success, "the flooding client never saw the connection end")
        lock.lock()
        let (sent, err) = outcome.value
        lock.unlock()
        XCTAssertGreaterThan(sent, 10_000, "the flood did not get going")
        XCTAssertTrue(err == EPIPE || err == ECONNRESET, "expected EPIPE/ECONNRESET after the drop, got errno \(err)")
        // The broker no longer counts it and still answers.
        XCTAssertTrue(waitUntil { (try? observer.call("broker.status", timeoutMillis: 2000)["connections"]?.intValue) == 1 })
        XCTAssertNotNil(try h.tool().call("apps.list")["apps"])
    }

    func testTwoHundredConcurrentConnectionsAllAnswered() throws {
        let h = BrokerHarness()
        try h.start()
        defer { h.stop() }
        let n = 200
        var conns: [RawClient] = []
        for _ in 0..<n { conns.append(try RawClient(h.socket)) }
        // Every connection sends before any reads: all are open and in flight at once.
        for (i, c) in conns.enumerated() {
            c.send(requestLine(id: String(i), method: "hello", params: #"{"role":"tool"}"#) + requestLine(id: "\"s\(i)\"", method: "broker.status"))
        }
        var answered = 0
        var maxConnections = 0
        for (i, c) in conns.enumerated() {
            let hello = c.readJSON(timeout: 10)
            let status = c.readJSON(timeout: 10)
            if hello?["id"] == .int(i), hello?["result"]?["role"] == "tool", status?["id"] == .string("s\(i)"),
                let count = status?["result"]?["connections"]?.intValue
            {
                answered += 1
                maxConnections = max(maxConnections, count)
            }
        }
        XCTAssertEqual(answered, n)
        XCTAssertEqual(maxConnections, n, "broker.status should count all \(n) open connections")
        let st = try h.connect().call("broker.status")
        XCTAssertEqual(st["connections"]?.intValue, n + 1)
        XCTAssertEqual(st["sessions"]?["tool"]?.intValue, n)
    }
}

/// Liveness probe without the broker's own code: connect() succeeds only if something listens.
enum UnixSocketProbe {
    static func isLive(_ path: String) -> Bool { (try? RawClient(path)) != nil }
}
