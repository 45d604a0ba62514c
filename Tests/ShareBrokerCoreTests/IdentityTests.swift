// Caller identity from the kernel: manifests restrict who may act as an app or extension (by uid
// and by executable), another user's process cannot act as an app, and broker.status shows peers.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareSystem
import XCTest

final class IdentityTests: XCTestCase {
    /// This test process's executable, as the broker reads it for a peer (/proc/PID/exe on
    /// Linux, proc_pidpath on macOS).
    func selfExecutable() -> String { ProcessInfoLite.executablePath(of: getpid()) ?? "" }

    func testUIDAndExecutableRestrictions() throws {
        let me = selfExecutable()
        let h = BrokerHarness(manifests: [
            "a.json": #"{"bundleID": "com.only.other.uid", "uids": [12345]}"#,
            "b.json": #"{"bundleID": "com.only.false", "executable": "/bin/false"}"#,
            "c.json": JSONValue.object(["bundleID": "com.only.me", "executable": .string(me), "uids": [.int(Int(getuid()))]]).compactText,
            "d.json": #"{"bundleID": "com.bad", "uids": ["root"], "executable": "relative/path"}"#,
        ])
        try h.start()
        let c1 = try h.connect()
        XCTAssertEqual(rpcCode { try c1.hello(role: "app", bundleID: "com.only.other.uid") }, -32001)
        let c2 = try h.connect()
        let e = rpcError { try c2.hello(role: "app", bundleID: "com.only.false") }
        XCTAssertEqual(e?.code, -32001)
        XCTAssertTrue(e?.message.contains("/bin/false") ?? false, "\(String(describing: e))")
        let c3 = try h.connect()
        XCTAssertEqual(try c3.hello(role: "app", bundleID: "com.only.me")["bundleID"], "com.only.me")
        let errors = try c3.call("apps.list")["errors"]?.arrayValue ?? []
        let fields = Set(errors.compactMap { $0["field"]?.stringValue })
        XCTAssertTrue(fields.contains("uids[0]") && fields.contains("executable"), "\(errors)")
        let verbose = try c3.call("broker.status", ["verbose": true])
        let clients = verbose["clients"]?.arrayValue ?? []
        XCTAssertEqual(clients.count, 3)
        let mine = clients.first { $0["bundleID"] == "com.only.me" }
        XCTAssertEqual(mine?["pid"]?.intValue, Int(getpid()))
        XCTAssertEqual(mine?["uid"]?.intValue, Int(getuid()))
        h.stop()
    }

    /// A process that connects, forks, and execs the pinned program while its child (which kept
    /// the socket) speaks cannot pass as that program: the kernel names each write's process.
    func testAnExecutablePinIsNotPassedByExecingAfterConnecting() throws {
        #if os(Linux)
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw XCTSkip("needs /usr/bin/python3") }
            let pinned = URL(fileURLWithPath: "/usr/bin/sleep").resolvingSymlinksInPath().path
            let h = BrokerHarness(manifests: ["p.json": JSONValue.object(["bundleID": "com.pinned", "executable": .string(pinned)]).compactText])
            try h.start()
            defer { h.stop() }
            // The child speaks once the parent runs the pinned program: the parent's end of a
            // pipe is closed on exec (os.pipe's are close-on-exec), after the kernel has switched
            // its executable. The parent runs it until the child has the answer (and kills it).
            let script = """
                import os, signal, socket, sys
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                r, w = os.pipe()
                parent = os.getpid()
                if os.fork() == 0:
                    try:
                        os.close(w)
                        os.read(r, 1)  # end of file: the parent is the pinned program
                        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"role":"app","bundleID":"com.pinned"}}\\n')
                        print(s.makefile().readline(), flush=True)
                    finally:
                        os.kill(parent, signal.SIGKILL)
                        os._exit(0)
                os.execv(sys.argv[2], [sys.argv[2], "60"])
                """
            let r = try runProcess("/usr/bin/python3", ["-c", script, h.socket, pinned], timeout: 20)
            let answer = try JSONParser.parse(r.out.trimmingCharacters(in: .whitespacesAndNewlines))
            XCTAssertEqual(answer["error"]?["code"]?.intValue, -32001, r.out + r.err)
            XCTAssertTrue(answer["error"]?["message"]?.stringValue?.contains("written by pid") ?? false, r.out)
            XCTAssertEqual(try h.tool().call("broker.status")["sessions"]?["app"]?.intValue, 0)
        #endif
    }

    /// A user the socket's mode keeps out is told so, not asked whether the broker runs (the
    /// newcomer's trial).
    func testAUserTheSocketKeepsOutIsToldWhy() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run a client as another user") }
        let h = BrokerHarness()
        try h.start()
        defer { h.stop() }
        chmod(h.dir.path, 0o755)
        let r = try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", Products.shareclient, "--socket", h.socket, "status"])
        XCTAssertEqual(r.status, 69, r.err)
        XCTAssertTrue(r.err.contains("this user may not use that socket") && r.err.contains("--socket-mode"), r.err)
    }

    func testAnotherUsersProcessCannotActAsAnApp() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run a client as another user") }
        let h = BrokerHarness(manifests: [
            "myapp.json": #"{"bundleID": "com.mycompany.myapp", "urlSchemes": ["deeplinkmyapp"]}"#,
            "shared.json": #"{"bundleID": "com.shared.app", "uids": [0, 65534]}"#,
            "secret.json": #"{"bundleID": "com.mycompany.secret", "token": "s3cret"}"#,
        ])
        try h.start { $0.socketMode = 0o666 }  // let another user reach the socket at all
        chmod(h.dir.path, 0o755)
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", Products.shareclient, "--socket", h.socket]
        let refused = try runProcess("/usr/bin/setpriv", asNobody + ["call", "app.subscribe", "--as", "com.mycompany.myapp"])
        XCTAssertEqual(refused.status, 1, refused.err)
        XCTAssertTrue(refused.err.contains("uid 65534"), refused.err)
        let allowed = try runProcess("/usr/bin/setpriv", asNobody + ["call", "app.subscribe", "--as", "com.shared.app"])
        XCTAssertEqual(allowed.status, 0, allowed.err)
        let tool = try runProcess("/usr/bin/setpriv", asNobody + ["status", "--json"])
        XCTAssertEqual(tool.status, 0, "a tool session is fine for anyone who can reach the socket: \(tool.err)")
        // ... without the broker's pid and paths (the audit), which its own user gets.
        let theirs = try JSONParser.parse(tool.out)
        XCTAssertNotNil(theirs["pendingEvents"], tool.out)
        for key in ["pid", "socket", "stateDirectory", "openFileLimit"] {
            XCTAssertNil(theirs[key], "\(key): \(tool.out)")
            XCTAssertNotNil(try h.tool().call("broker.status")[key], key)
        }
        // ... but the list of every connection's pid, uid and bundle ID is not.
        let verbose = try runProcess("/usr/bin/setpriv", asNobody + ["call", "broker.status", #"{"verbose":true}"#])
        XCTAssertEqual(verbose.status, 1, verbose.out)
        XCTAssertTrue(verbose.err.contains("own user"), verbose.err)
        XCTAssertNotNil(try h.tool().call("broker.status", ["verbose": true])["clients"], "the broker's own user gets it")
        // Nor the state directory through a refused hello (the review), nor a reload at will.
        let unknown = try runProcess("/usr/bin/setpriv", asNobody + ["call", "app.subscribe", "--as", "com.nobody.such"])
        XCTAssertTrue(unknown.err.contains("no manifest registers it") && !unknown.err.contains(h.state), unknown.err)
        let reload = try runProcess("/usr/bin/setpriv", asNobody + ["reload"])
        XCTAssertEqual(reload.status, 1, reload.out)
        XCTAssertTrue(reload.err.contains("apps.reload is for the broker's own user"), reload.err)
        // A caller the manifest does not allow hears about its uid, never about the token.
        let tokenApp = try runProcess("/usr/bin/setpriv", asNobody + ["call", "app.subscribe", "--as", "com.mycompany.secret"])
        XCTAssertTrue(tokenApp.err.contains("uid 65534") && !tokenApp.err.contains("token"), tokenApp.err)
        h.stop()
    }

    /// Other users' connections together may not take the descriptors kept for the broker's own
    /// user (an eighth of the open-file limit, at least 64): another user holding connections up
    /// to the limit does not lock this user's apps out (the security audit).
    func testOtherUsersCannotTakeTheDescriptorsKeptForThisUser() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run a client as another user") }
        let h = BrokerHarness()
        try h.start {
            $0.socketMode = 0o666
            $0.openFileLimitForBudget = 132  // 64 kept, and 32 for the broker's own: other users may hold 36
        }
        defer { h.stop() }
        chmod(h.dir.path, 0o755)
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw XCTSkip("needs /usr/bin/python3") }
        let script = """
            import socket, select, sys, time
            socks = []
            for _ in range(40):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); socks.append(s)
            refused, deadline = set(), time.time() + 10
            while len(refused) < 4 and time.time() < deadline:
                r, _, _ = select.select([s for s in socks if s not in refused], [], [], 0.5)
                for s in r:
                    if b"other users' connections" in s.recv(4096): refused.add(s)
            time.sleep(0.3)  # (no more refusals come)
            r, _, _ = select.select([s for s in socks if s not in refused], [], [], 0)
            print(len(refused) + len(r), flush=True)
            time.sleep(30)
            """
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        holder.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, h.socket]
        let out = Pipe()
        holder.standardOutput = out
        try holder.run()
        defer { if holder.isRunning { holder.terminate() } }
        var line = ""
        while !line.contains("\n"), let byte = try out.fileHandleForReading.read(upToCount: 1), !byte.isEmpty {
            line += String(decoding: byte, as: UTF8.self)
        }
        XCTAssertEqual(line.trimmingCharacters(in: .whitespacesAndNewlines), "4", "36 of 40 other-user connections held, 4 refused")
        // While they are held, this user's clients still get in.
        XCTAssertNotNil(try h.tool().call("broker.status")["version"])
        XCTAssertNotNil(try h.tool().call("broker.status")["version"])
    }

    func testAReloadThatRevokesAUIDEndsItsOpenSessions() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run a client as another user") }
        let h = BrokerHarness(manifests: ["shared.json": #"{"bundleID": "com.shared.app", "uids": [0, 65534]}"#])
        try h.start { $0.socketMode = 0o666 }
        chmod(h.dir.path, 0o755)
        let listener = Process()
        listener.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        listener.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", Products.shareclient, "--socket", h.socket,
                              "listen", "--as", "com.shared.app", "--timeout", "60"]
        listener.standardOutput = FileHandle.nullDevice
        let stderrPipe = Pipe()
        listener.standardError = stderrPipe
        try listener.run()
        defer { if listener.isRunning { listener.terminate() } }
        let tool = try h.tool()
        XCTAssertTrue(waitUntil(timeout: 10) { (try? tool.call("broker.status"))?["subscribers"]?.intValue == 1 }, "nobody subscribed")
        h.dir.write("state/apps/shared.json", #"{"bundleID": "com.shared.app", "uids": [0]}"#)
        _ = try tool.call("apps.reload")
        XCTAssertTrue(waitUntil(timeout: 10) { !listener.isRunning }, "the revoked session was closed (its listener ended)")
        let said = String(decoding: stderrPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(said.contains("Unauthorized: session ended by a manifest reload: uid 65534"), said)
        XCTAssertFalse(said.contains("reload: Unauthorized"), "one 'Unauthorized' is enough: \(said)")
        XCTAssertEqual(try tool.call("broker.status")["subscribers"]?.intValue, 0)
        XCTAssertEqual(try tool.call("broker.status")["sessions"]?["app"]?.intValue, 0)
        h.stop()
    }

    /// A reload that changes a bundle's token ends its sessions: the reload's own reply still
    /// reaches the caller, requests it sent after it are not run, and the connection closes.
    func testAReloadThatChangesATokenEndsItsSessions() throws {
        let h = BrokerHarness(manifests: ["s.json": #"{"bundleID": "com.secret", "token": "old"}"#])
        try h.start()
        defer { h.stop() }
        let raw = try RawClient(h.socket)
        raw.send(#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"role":"app","bundleID":"com.secret","token":"old"}}"# + "\n")
        XCTAssertNotNil(raw.readJSON()?["result"])
        h.dir.write("state/apps/s.json", #"{"bundleID": "com.secret", "token": "new"}"#)
        raw.send(#"{"jsonrpc":"2.0","id":2,"method":"apps.reload"}"# + "\n" + #"{"jsonrpc":"2.0","id":3,"method":"app.subscribe"}"# + "\n")
        let reload = raw.readJSON()
        XCTAssertEqual(reload?["id"]?.intValue, 2)
        XCTAssertNotNil(reload?["result"], "the reload's own reply arrives: \(String(describing: reload))")
        let notice = raw.readJSON()
        XCTAssertEqual(notice?["id"], .null, "then the reason, not an answer to id 3: \(String(describing: notice))")
        XCTAssertEqual(notice?["error"]?["code"], -32001, "\(String(describing: notice))")
        XCTAssertTrue(
            notice?["error"]?["message"]?.stringValue?.contains("token changed") == true, "\(String(describing: notice))")
        XCTAssertTrue(raw.waitForClose(), "the session opened under the old token ends")
        XCTAssertEqual(try h.tool().call("broker.status")["subscribers"]?.intValue, 0, "the request after the reload was not run")
    }

    /// A reload that leaves a pinned bundle's rule as it was does not check its sessions again:
    /// the program's file may have been replaced since (an upgrade), and /proc then names it
    /// "(deleted)".
    func testAnUnrelatedReloadKeepsAPinnedSessionWhoseProgramWasReplaced() throws {
        #if os(Linux)
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw XCTSkip("needs /usr/bin/python3") }
            let dir = TempDir()
            let python = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path
            let pinned = dir.path + "/app-python"
            try FileManager.default.copyItem(atPath: python, toPath: pinned)
            let h = BrokerHarness(manifests: ["p.json": JSONValue.object(["bundleID": "com.pinned", "executable": .string(pinned)]).compactText])
            try h.start()
            defer { h.stop() }
            let script = """
                import socket, sys, time
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile()
                s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"role":"app","bundleID":"com.pinned"}}\\n')
                print(f.readline(), flush=True)
                s.sendall(b'{"jsonrpc":"2.0","id":2,"method":"app.subscribe"}\\n')
                print(f.readline(), flush=True)
                print("closed" if f.readline() == "" else "event", flush=True)
                """
            let app = Process()
            app.executableURL = URL(fileURLWithPath: pinned)
            app.arguments = ["-c", script, h.socket]
            let out = Pipe()
            app.standardOutput = out
            try app.run()
            defer { if app.isRunning { app.terminate() } }
            let tool = try h.tool()
            XCTAssertTrue(waitUntil(timeout: 10) { (try? tool.call("broker.status"))?["subscribers"]?.intValue == 1 }, "the pinned app subscribed")
            // An upgrade replaces the program's file; another app's manifest arrives; reload.
            try FileManager.default.copyItem(atPath: python, toPath: pinned + ".new")
            XCTAssertEqual(rename(pinned + ".new", pinned), 0)
            h.dir.write("state/apps/q.json", #"{"bundleID": "com.other", "urlSchemes": ["other"]}"#)
            _ = try tool.call("apps.reload")
            usleep(200_000)
            XCTAssertTrue(app.isRunning, "the pinned session was ended")
            XCTAssertEqual(try tool.call("broker.status")["subscribers"]?.intValue, 1)
        #endif
    }

    func testACallerOfAnotherUserCannotSharePathItems() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run a client as another user") }
        let h = BrokerHarness(manifests: [
            "files.json": #"""
                {"bundleID": "com.example.files", "appGroups": ["group.files"],
                 "extensions": [{"bundleID": "com.example.files.share", "point": "com.apple.share-services",
                                 "appGroups": ["group.files"], "activationRule": "TRUEPREDICATE"}]}
                """#
        ])
        try h.start { $0.socketMode = 0o666 }  // let another user reach the socket at all
        chmod(h.dir.path, 0o755)
        let files = TempDir()
        chmod(files.path, 0o755)
        let rootsFile = files.path + "/roots.txt"  // readable by everyone, but root's
        let ownFile = files.path + "/own.txt"
        let link = files.path + "/link.txt"
        _ = FileManager.default.createFile(atPath: rootsFile, contents: Data("root".utf8), attributes: [.posixPermissions: 0o644])
        _ = FileManager.default.createFile(atPath: ownFile, contents: Data("own".utf8), attributes: [.posixPermissions: 0o600])
        XCTAssertEqual(chown(ownFile, 65534, 65534), 0)
        XCTAssertEqual(symlink(ownFile, link), 0)
        let secretFile = files.path + "/secret.txt"  // root's only
        _ = FileManager.default.createFile(atPath: secretFile, contents: Data("secret".utf8), attributes: [.posixPermissions: 0o600])
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", Products.shareclient, "--socket", h.socket]
        func sendPath(_ path: String) throws -> (status: Int32, out: String, err: String) {
            let params: JSONValue = ["items": [["path": .string(path)]], "extension": "com.example.files.share"]
            return try runProcess("/usr/bin/setpriv", asNobody + ["call", "share.send", params.compactText])
        }
        // The broker (root) would resolve the path with its own rights: another user's caller
        // gets no path item at all, not even its own file (it sends the bytes as data instead).
        for path in [rootsFile, link, ownFile] {
            let refused = try sendPath(path)
            XCTAssertEqual(refused.status, 1, refused.err)
            XCTAssertTrue(refused.err.contains("another user") && refused.err.contains("data item"), refused.err)
            XCTAssertTrue(refused.err.contains(#""reason":"pathItemsRefused""#), "said in error.data too: \(refused.err)")
        }
        let targets = try runProcess("/usr/bin/setpriv", asNobody + ["targets", "--file", link])
        XCTAssertEqual(targets.status, 0, targets.err)
        XCTAssertTrue(targets.out.contains("com.example.files.share"), "targets sends the bytes too: \(targets.out)")
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("broker.status")["pendingShares"]?.intValue, 0)
        // `shareclient send --file` does that by itself: it reads the file with the caller's own
        // rights and sends its bytes; a file the caller cannot read stays unread.
        let sent = try runProcess("/usr/bin/setpriv", asNobody + ["send", "--file", link, "--to", "com.example.files.share", "--json"])
        XCTAssertEqual(sent.status, 0, sent.err)
        let shareID = try XCTUnwrap(try JSONParser.parse(Array(sent.out.utf8))["shareID"]?.stringValue, sent.out)
        let notMine = try runProcess("/usr/bin/setpriv", asNobody + ["send", "--file", secretFile, "--to", "com.example.files.share"])
        XCTAssertEqual(notMine.status, 66, notMine.err)
        XCTAssertTrue(notMine.err.contains("cannot read") && notMine.err.contains(secretFile), notMine.err)
        // A caller of the broker's own user: the symlink is followed.
        let sentByRoot = try tool.call("share.send", ["items": [["path": .string(link)]], "extension": "com.example.files.share"])
        XCTAssertNotNil(sentByRoot["shareID"]?.stringValue)
        XCTAssertEqual(try tool.call("broker.status")["pendingShares"]?.intValue, 2)
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.files")
        let item = try XCTUnwrap(app.call("share.get", ["shareID": .string(shareID)])["items"]?.arrayValue?.first)
        XCTAssertEqual(item["name"], "link.txt")
        XCTAssertEqual(try String(contentsOfFile: try XCTUnwrap(item["path"]?.stringValue), encoding: .utf8), "own", "the bytes the caller read")
        h.stop()
    }

    func testABrokerOnAStateDirectoryItCannotWriteStillServes() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run the broker as another user") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { throw XCTSkip("needs setpriv") }
        let dir = TempDir()
        chmod(dir.path, 0o755)
        let state = dir.path + "/state"
        let run = dir.path + "/run"
        for d in [state, state + "/apps", state + "/associations", run] {
            try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
            XCTAssertEqual(chown(d, 65534, 65534), 0)
        }
        chmod(run, 0o700)
        chmod(state, 0o500)  // its owner may read it, not write it
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        p.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", Products.sharebroker, "serve",
                       "--socket", run + "/s.sock", "--state", state]
        p.standardError = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        defer {
            if p.isRunning { kill(p.processIdentifier, SIGKILL) }
            p.waitUntilExit()
        }
        var status: JSONValue? = nil
        for _ in 0..<100 where status == nil {
            status = try? BrokerConnection(socketPath: run + "/s.sock").call("broker.status", timeoutMillis: 1000)
            if status == nil { usleep(50_000) }
        }
        XCTAssertEqual(status?["store"]?["available"], .bool(false), "reads are served; writes answer -32005")
        XCTAssertFalse(FileManager.default.fileExists(atPath: state + "/broker.lock"))
    }

    func testStateDirectoryMustBePrivate() throws {
        let dir = TempDir()
        let state = dir.path + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        chmod(state, 0o777)
        var config = BrokerConfiguration(socketPath: dir.path + "/s.sock", stateDirectory: state)
        config.handleSignals = false
        config.logLevel = .error
        XCTAssertThrowsError(try Broker(config: config)) { e in
            XCTAssertTrue("\(e)".contains("writable by other users"), "\(e)")
        }
        chmod(state, 0o700)
        if getuid() == 0 {
            chown(state, 65534, 65534)
            XCTAssertThrowsError(try Broker(config: config)) { e in
                XCTAssertTrue("\(e)".contains("belongs to uid 65534"), "\(e)")
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/s.sock"), "no socket was created")
    }

    /// The directories above the state directory must be ours too: another user who may write
    /// in one could put a state directory of their own in its place (whose manifests' launch
    /// commands the broker runs: the security audit). A sticky one (/tmp) is fine.
    func testADirectoryAboveTheStateThatOthersMayWriteIsRefused() throws {
        let dir = TempDir()
        let open = dir.path + "/open"
        try FileManager.default.createDirectory(atPath: open + "/state", withIntermediateDirectories: true)
        chmod(open, 0o777)
        chmod(open + "/state", 0o700)
        var config = BrokerConfiguration(socketPath: dir.path + "/s.sock", stateDirectory: open + "/state")
        config.handleSignals = false
        config.logLevel = .error
        XCTAssertThrowsError(try Broker(config: config)) { e in
            XCTAssertTrue("\(e)".contains("\(open), on the way to the state directory"), "\(e)")
            XCTAssertTrue("\(e)".contains("is writable by group or others (mode 777)"), "\(e)")
        }
        // A state directory still to be made there is refused before anything is made.
        config.stateDirectory = open + "/new/state"
        XCTAssertThrowsError(try Broker(config: config)) { e in
            XCTAssertTrue("\(e)".contains("\(open), on the way to the state directory \(open)/new/state"), "\(e)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: open + "/new"))
        // Through a symlink to it, too.
        XCTAssertEqual(symlink(open + "/state", dir.path + "/link"), 0)
        config.stateDirectory = dir.path + "/link"
        XCTAssertThrowsError(try Broker(config: config)) { e in XCTAssertTrue("\(e)".contains("on the way to the state directory"), "\(e)") }
        // Sticky, as /tmp: fine.
        chmod(open, 0o1777)
        config.stateDirectory = open + "/state"
        XCTAssertNoThrow(try Broker(config: config))
        // A symbolic link on the way, or the state directory's own, that another user owns (they
        // could point it elsewhere at any time): refused (the review).
        if getuid() == 0 {
            for (link, state) in [(dir.path + "/theirs", dir.path + "/theirs/state"), (dir.path + "/their-state", dir.path + "/their-state")] {
                XCTAssertEqual(symlink(state.hasSuffix("/state") ? open : open + "/state", link), 0)
                XCTAssertEqual(lchown(link, 65534, 65534), 0)
                config.stateDirectory = state
                XCTAssertThrowsError(try Broker(config: config), state) { e in
                    XCTAssertTrue("\(e)".contains("\(link), on the way to the state directory \(state), is a symbolic link that belongs to uid 65534"), "\(e)")
                }
            }
        }
    }

    /// A message limit past 1 GiB (a library caller's setting; the CLI refuses it with 64) is
    /// refused at start: limits derived from it overflowed on the first connection.
    func testAHugeMessageLimitIsRefusedAtStart() throws {
        let dir = TempDir()
        for limit in [Int.max, BrokerConfiguration.largestMaxMessage + 1, 1023] {
            var config = BrokerConfiguration(socketPath: dir.path + "/s.sock", stateDirectory: dir.path + "/state")
            config.handleSignals = false
            config.logLevel = .error
            config.maxMessage = limit
            XCTAssertThrowsError(try Broker(config: config)) { e in
                XCTAssertTrue("\(e)".contains("between 1024 and 1073741824 bytes, got \(limit)"), "\(e)")
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/s.sock"), "no socket was created")
    }
}
