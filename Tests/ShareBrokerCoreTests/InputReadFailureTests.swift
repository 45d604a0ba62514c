// Manifests and association documents that cannot be read for a reason that may pass (an I/O
// error, the open-file table full): a reload keeps what it read of them before (their apps stay
// registered, their sessions and subscribers stay), and the broker reads them again on a timer
// until it can, also when the failure was at start. A reason the user made (no permission, the
// file gone) is not papered over. At the open-file limit, a reload borrows the broker's spare
// descriptor, so thousands of connections do not make every app unknown.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

/// Which input paths fail to read, and with which errno; set from the test, read by the broker.
final class InputFaults: @unchecked Sendable {
    private let lock = NSLock()
    private var failing: [String: Int32] = [:]
    private var hits = 0

    /// Fails reads of paths ending in `suffix` with `code` (nil: no longer).
    func set(_ suffix: String, _ code: Int32?) {
        lock.lock()
        failing[suffix] = code
        lock.unlock()
    }

    /// Reads failed so far.
    var failed: Int {
        lock.lock()
        defer { lock.unlock() }
        return hits
    }

    /// The seam: the errno for `path`, if it is to fail.
    func fault(_ path: String) -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        for (suffix, code) in failing where path.hasSuffix(suffix) {
            hits += 1
            return code
        }
        return nil
    }
}

final class InputReadFailureTests: XCTestCase {
    let appsJSON = ["10-myapp.json": deepLinkApp, "20-browser.json": browserApp]

    func start(_ faults: InputFaults) throws -> BrokerHarness {
        let h = BrokerHarness(manifests: appsJSON, associations: ["example.com": exampleAASA])
        try h.start { $0.inputReadFaults = { path in faults.fault(path) } }
        return h
    }

    func subscribedApp(_ h: BrokerHarness) throws -> BrokerConnection {
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        _ = try app.call("app.subscribe")
        return app
    }

    /// The next `app.event`'s URL (its `url` or `webpageURL`).
    func nextEventURL(_ app: BrokerConnection) throws -> String? {
        while let n = try app.nextNotification(timeoutMillis: 5000) {
            if n.method == "app.event" {
                return n.params?["url"]?.stringValue ?? n.params?["webpageURL"]?.stringValue
            }
        }
        return nil
    }

    /// A manifest whose owner and mode cannot be checked (its stat fails, here for a symlink
    /// loop) is not read: the stat's failure is its read's; the others load. (An input whose
    /// stat fails while it can be opened is not made on demand: ELOOP stands for it.)
    func testAManifestThatCannotBeCheckedIsNotRead() throws {
        let dir = TempDir()
        dir.write("state/apps/10-myapp.json", deepLinkApp)
        XCTAssertEqual(symlink("30-loop.json", dir.path + "/state/apps/30-loop.json"), 0)
        let loaded = StateFiles.load(stateDirectory: dir.path + "/state")
        XCTAssertNotNil(loaded.registry.app("com.mycompany.myapp"))
        let issue = loaded.registry.issues.first { $0.file == "30-loop.json" }
        XCTAssertEqual(issue?.fatal, true)
        XCTAssertTrue(issue?.message.contains("is a symbolic link") ?? false, "(ELOOP, said so) \(String(describing: issue))")
        XCTAssertEqual(StateFiles.untrusted(dir.path + "/state/apps/30-loop.json").map { $0.hasPrefix("cannot be checked (stat: ") }, true)
        XCTAssertNil(StateFiles.untrusted(dir.path + "/state/apps/gone.json"), "a path that is gone is no trust problem")
    }

    func issues(_ tool: BrokerConnection) throws -> String {
        let list = try tool.call("apps.list")
        return ((list["errors"]?.arrayValue ?? []) + (list["warnings"]?.arrayValue ?? [])).map(\.compactText).joined(separator: "\n")
    }

    /// An EIO reading an app's manifest at a reload: the app stays registered as read before, its
    /// subscriber keeps its session and gets what is opened for it, apps.list says why; once the
    /// manifest reads again, the timer's reload takes it in (changes included) with no request.
    func testAManifestThatCannotBeReadAtAReloadStaysAsReadBefore() throws {
        let faults = InputFaults()
        let h = try start(faults)
        defer { h.stop() }
        let app = try subscribedApp(h)
        let tool = try h.tool()

        faults.set("/10-myapp.json", EIO)
        _ = try tool.call("apps.reload")
        XCTAssertGreaterThan(faults.failed, 0)
        let opened = try tool.call("url.open", ["url": "deeplinkmyapp://during/1"])
        XCTAssertEqual(opened["app"], "com.mycompany.myapp", opened.compactText)
        XCTAssertEqual(opened["delivered"], true, "the subscriber kept its session: \(opened.compactText)")
        XCTAssertEqual(try nextEventURL(app), "deeplinkmyapp://during/1")
        let said = try issues(tool)
        XCTAssertTrue(said.contains("10-myapp.json") && said.contains("the version read before is kept"), said)
        XCTAssertEqual(try tool.call("broker.status")["manifestErrors"], 0)

        // Changed meanwhile, and readable again: taken in without a request (1 s, then 2 s...).
        h.dir.write(
            "state/apps/10-myapp.json",
            deepLinkApp.replacingOccurrences(of: #"["deeplinkmyapp"]"#, with: #"["deeplinkmyapp", "secondscheme"]"#))
        faults.set("/10-myapp.json", nil)
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? tool.call("url.canOpen", ["url": "secondscheme://x"])["app"]) == "com.mycompany.myapp" },
            "read again on the timer")
        XCTAssertFalse(try issues(tool).contains("the version read before is kept"))
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://after/1"])
        XCTAssertEqual(try nextEventURL(app), "deeplinkmyapp://after/1", "the same session, still subscribed")
    }

    /// A broker with the browser's manifest and My App imported from its built bundle
    /// (`STATE/apps/MyApp.app`), its input reads failing as `faults` says.
    func startWithImportedApp(_ faults: InputFaults) throws -> BrokerHarness {
        let h = BrokerHarness(manifests: ["20-browser.json": browserApp])
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/ios/bundle/MyApp.app").path
        try FileManager.default.copyItem(atPath: fixture, toPath: h.state + "/apps/MyApp.app")
        try h.start { $0.inputReadFaults = { path in faults.fault(path) } }
        return h
    }

    /// An imported app folder (a built .app bundle) whose Info.plist cannot be read at a reload
    /// (EIO) stays as imported before: its app stays registered, its subscriber keeps its session;
    /// once the file reads, the timer's reload imports it again. A reason the user made (no
    /// permission) takes the app out, as for a manifest file.
    func testAnImportedFolderThatCannotBeReadAtAReloadStaysAsImportedBefore() throws {
        let faults = InputFaults()
        let h = try startWithImportedApp(faults)
        defer { h.stop() }
        let app = try subscribedApp(h)
        let tool = try h.tool()

        faults.set("/MyApp.app/Info.plist", EIO)
        _ = try tool.call("apps.reload")
        XCTAssertGreaterThan(faults.failed, 0)
        let opened = try tool.call("url.open", ["url": "deeplinkmyapp://during/1"])
        XCTAssertEqual(opened["app"], "com.mycompany.myapp", opened.compactText)
        XCTAssertEqual(opened["delivered"], true, "the subscriber kept its session: \(opened.compactText)")
        XCTAssertEqual(try nextEventURL(app), "deeplinkmyapp://during/1")
        let said = try issues(tool)
        XCTAssertTrue(said.contains("MyApp.app") && said.contains("the import read before is kept"), said)
        _ = try tool.call("apps.reload")  // (a second failure says it once)
        let again = try issues(tool)
        XCTAssertEqual(again.components(separatedBy: "the import read before is kept").count, 2, again)

        faults.set("/MyApp.app/Info.plist", nil)
        XCTAssertTrue(waitUntil(timeout: 10) { !((try? self.issues(tool))?.contains("read before is kept") ?? true) }, "read again on the timer")
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://after/1"])
        XCTAssertEqual(try nextEventURL(app), "deeplinkmyapp://after/1", "the same session, still subscribed")

        faults.set("/MyApp.app/Info.plist", EACCES)
        _ = try tool.call("apps.reload")
        XCTAssertEqual(rpcCode { _ = try tool.call("url.open", ["url": "deeplinkmyapp://gone"]) }, -32004)
        let denied = try issues(tool)
        XCTAssertTrue(denied.contains("Permission denied"), denied)
    }

    /// A folder (or an extension folder inside it) whose stat fails for a reason that may pass is
    /// not taken as gone: the app stays as imported before, with its extension.
    func testAnImportedFolderThatCannotBeLookedAtStaysAsImportedBefore() throws {
        let faults = InputFaults()
        let h = try startWithImportedApp(faults)
        defer { h.stop() }
        let tool = try h.tool()
        func targets() throws -> Int { try tool.call("share.targets", ["items": [["url": "https://youtu.be/x"]]])["targets"]?.arrayValue?.count ?? 0 }
        XCTAssertEqual(try targets(), 1)
        for path in ["/state/apps/MyApp.app", "/MyApp.app/PlugIns/Share.appex"] {
            faults.set(path, EIO)
            _ = try tool.call("apps.reload")
            XCTAssertEqual(try tool.call("url.canOpen", ["url": "deeplinkmyapp://x"])["app"], "com.mycompany.myapp", path)
            XCTAssertEqual(try targets(), 1, "its extension too: \(path)")
            let said = try issues(tool)
            XCTAssertTrue(said.contains("the import read before is kept"), said)
            faults.set(path, nil)
            XCTAssertTrue(waitUntil(timeout: 10) { !((try? self.issues(tool))?.contains("read before is kept") ?? true) }, "read again: \(path)")
        }
    }

    /// An imported folder that cannot be read at start is imported once it can be, with no reload.
    func testAnImportedFolderThatCannotBeReadAtStartIsImportedOnceItCanBe() throws {
        let faults = InputFaults()
        faults.set("/MyApp.app/PlugIns", EMFILE)
        let h = try startWithImportedApp(faults)
        defer { h.stop() }
        let tool = try h.tool()
        let before = try tool.call("share.targets", ["items": [["url": "https://youtu.be/x"]]])
        XCTAssertEqual(before["targets"]?.arrayValue?.count ?? 0, 0, "its extension was not listed: \(before.compactText)")
        faults.set("/MyApp.app/PlugIns", nil)
        XCTAssertTrue(
            waitUntil(timeout: 10) {
                ((try? tool.call("share.targets", ["items": [["url": "https://youtu.be/x"]]]))?["targets"]?.arrayValue?.count ?? 0) == 1
            }, "imported with its extension once the folder lists")
    }

    /// STATE/apps itself cannot be listed (the open-file table full): every manifest stays.
    func testAnAppsDirectoryThatCannotBeListedKeepsEveryManifest() throws {
        let faults = InputFaults()
        let h = try start(faults)
        defer { h.stop() }
        let app = try subscribedApp(h)
        let tool = try h.tool()
        faults.set("/state/apps", EMFILE)
        _ = try tool.call("apps.reload")
        XCTAssertEqual(try tool.call("url.canOpen", ["url": "https://example.org/"])["app"], "org.example.browser")
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://kept"])["delivered"], true)
        XCTAssertEqual(try nextEventURL(app), "deeplinkmyapp://kept")
        XCTAssertTrue(try issues(tool).contains("the manifests read before are kept"))
        faults.set("/state/apps", nil)
        XCTAssertTrue(waitUntil(timeout: 10) { !((try? self.issues(tool))?.contains("read before are kept") ?? true) })
        XCTAssertEqual(try tool.call("url.canOpen", ["url": "https://example.org/"])["app"], "org.example.browser")
    }

    /// An association document that cannot be read at a reload keeps routing universal links.
    func testAnAssociationDocumentThatCannotBeReadKeepsRouting() throws {
        let faults = InputFaults()
        let h = try start(faults)
        defer { h.stop() }
        let tool = try h.tool()
        let before = try tool.call("url.canOpen", ["url": "https://example.com/computers/1"])
        XCTAssertEqual(before["app"], "com.mycompany.myapp", before.compactText)
        faults.set("/associations/example.com.json", EIO)
        _ = try tool.call("apps.reload")
        XCTAssertEqual(try tool.call("url.canOpen", ["url": "https://example.com/computers/1"]), before)
        faults.set("/associations/example.com.json", nil)
        faults.set("/state/associations", ENFILE)
        _ = try tool.call("apps.reload")
        XCTAssertEqual(try tool.call("url.canOpen", ["url": "https://example.com/computers/1"]), before)
        let status = try tool.call("broker.status")
        XCTAssertEqual(status["associationErrors"]?.intValue ?? 0, 0, status.compactText)
    }

    /// A manifest that cannot be read at start (nothing read before): its app is unknown, and
    /// registered once it reads, with no reload asked for; events opened meanwhile fall back
    /// as for any unknown scheme, and a pending backlog waits for it.
    func testAManifestThatCannotBeReadAtStartIsReadOnceItCanBe() throws {
        let faults = InputFaults()
        faults.set("/10-myapp.json", EIO)
        let h = try start(faults)
        defer { h.stop() }
        let tool = try h.tool()
        XCTAssertEqual(rpcCode { _ = try tool.call("url.open", ["url": "deeplinkmyapp://early"]) }, -32004)
        XCTAssertTrue(try issues(tool).contains("10-myapp.json"))
        faults.set("/10-myapp.json", nil)
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? tool.call("url.canOpen", ["url": "deeplinkmyapp://x"])["app"]) == "com.mycompany.myapp" },
            "registered once its manifest reads")
        let app = try subscribedApp(h)
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://later"])
        XCTAssertEqual(try nextEventURL(app), "deeplinkmyapp://later")
    }

    /// A reason the user made is not papered over: a manifest that cannot be read for want of
    /// permission takes its app out at the reload, as a removed one does.
    func testAManifestThatIsNotPermittedIsNotKept() throws {
        let faults = InputFaults()
        let h = try start(faults)
        defer { h.stop() }
        let app = try subscribedApp(h)
        let tool = try h.tool()
        faults.set("/10-myapp.json", EACCES)
        _ = try tool.call("apps.reload")
        XCTAssertEqual(rpcCode { _ = try tool.call("url.open", ["url": "deeplinkmyapp://gone"]) }, -32004)
        XCTAssertTrue(try issues(tool).contains("Permission denied"))
        XCTAssertThrowsError(try app.call("broker.status"), "its session ended: the bundle is no longer registered")
    }

    /// A real broker at its open-file limit (a few dozen descriptors, all taken by connections):
    /// SIGHUP reads the manifests with the spare descriptor, and the app keeps its session.
    func testAReloadAtTheOpenFileLimitKeepsEveryApp() throws {
        let (dir, broker) = try brokerUnderFileLimit(48, manifests: ["10-myapp.json": deepLinkApp])
        let socket = broker.socket
        let app = try BrokerConnection(socketPath: socket)
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        _ = try app.call("app.subscribe")
        let tool = try BrokerConnection(socketPath: socket)
        try tool.hello(role: "tool")
        // Every descriptor left is taken by idle connections (the broker sheds the ones past it).
        let idle = idleConnections(socket, 80)
        XCTAssertTrue(
            waitUntil(timeout: 10) { broker.stderrText.contains("open-file limit (48) reached") }, broker.stderrText)
        broker.signal(SIGHUP)
        XCTAssertTrue(waitUntil(timeout: 10) { broker.stderrText.contains("(SIGHUP)") }, broker.stderrText)
        XCTAssertTrue(broker.stderrText.contains("loaded 1 apps (SIGHUP); 0 manifest errors"), broker.stderrText)
        XCTAssertFalse(broker.stderrText.contains("could not read"), "read, not kept from before: \(broker.stderrText)")
        let opened = try tool.call("url.open", ["url": "deeplinkmyapp://at-the-limit"])
        XCTAssertEqual(opened["delivered"], true, opened.compactText)
        XCTAssertEqual(try nextEventURL(app), "deeplinkmyapp://at-the-limit")
        withExtendedLifetime((dir, idle)) {}
    }

    /// A real broker (`sharebroker serve`) whose open-file limit is `limit`, on a new state
    /// directory with `manifests`; the directory lives as long as the caller keeps it.
    func brokerUnderFileLimit(_ limit: Int, manifests: [String: String]) throws -> (TempDir, BrokerProcess) {
        let dir = TempDir()
        for (name, text) in manifests { dir.write("state/apps/" + name, text) }
        let broker = try BrokerProcess(
            socket: dir.path + "/s.sock", state: dir.path + "/state", logDir: dir.path,
            runVia: ["/bin/sh", "-c", #"ulimit -n \#(limit) && exec "$0" "$@""#])
        XCTAssertTrue(broker.waitReady(), broker.stderrText)
        return (dir, broker)
    }

    /// Up to `count` connections that never say hello (the broker sheds or refuses those past
    /// its limits).
    func idleConnections(_ socket: String, _ count: Int) -> [RawClient] {
        (0..<count).compactMap { _ in try? RawClient(socket) }
    }

    /// Connections, the broker's own user's included, leave the broker the descriptors its own
    /// work needs: with every other descriptor taken by idle connections, a share with a file
    /// is still stored (its file written), a new group's journal opened, and the connections past
    /// the budget are refused with a reason instead of the broker's files failing.
    func testConnectionsLeaveTheBrokerTheDescriptorsItsFilesNeed() throws {
        let (dir, broker) = try brokerUnderFileLimit(256, manifests: ["20-pdf.json": pdfApp, "10-myapp.json": youtubeApp])
        let socket = broker.socket
        let pdf = try BrokerConnection(socketPath: socket)
        try pdf.hello(role: "extension", bundleID: "com.example.pdfreader.share")
        let yt = try BrokerConnection(socketPath: socket)
        try yt.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        let idle = idleConnections(socket, 400)
        // (the refused ones are told why, and closed by the broker)
        XCTAssertTrue(
            waitUntil(timeout: 10) { broker.stderrText.contains("kept for the broker's own files") }, broker.stderrText)
        for _ in 0..<3 {
            let sent = try pdf.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "report.pdf"]]])
            XCTAssertNotNil(sent["shareID"], sent.compactText)
        }
        // A group whose journal was not open yet (its first share).
        let url = try yt.call("share.send", ["items": [["url": "https://youtu.be/dQw4w9WgXcQ"]]])
        XCTAssertNotNil(url["shareID"], url.compactText)
        XCTAssertFalse(broker.stderrText.contains("Too many open files"), broker.stderrText)
        withExtendedLifetime((dir, idle)) {}
    }

    /// A FIFO in an imported folder (its Info.plist) or among the manifests is not read: the load
    /// does not wait for a writer (it runs on the loop at a reload, and at start before the
    /// socket is bound), it names the file as unreadable.
    func testAFIFOAmongTheInputsDoesNotBlockTheLoad() throws {
        let dir = TempDir()
        let state = dir.path + "/state"
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/ios/bundle/MyApp.app").path
        try FileManager.default.createDirectory(atPath: state + "/apps", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fixture, toPath: state + "/apps/MyApp.app")
        let fifos = [state + "/apps/MyApp.app/Info.plist", state + "/apps/30-fifo.json"]
        for f in fifos {
            unlink(f)
            XCTAssertEqual(mkfifo(f, 0o600), 0)
        }
        let done = DispatchSemaphore(value: 0)
        let issues = NSLock()
        nonisolated(unsafe) var text = ""
        Thread.detachNewThread {
            let loaded = StateFiles.load(stateDirectory: state)
            issues.withLock { text = loaded.registry.issues.map(\.description).joined(separator: "\n") }
            done.signal()
        }
        if done.wait(timeout: .now() + 5) == .timedOut {
            XCTFail("the load waits for a writer on a FIFO")
            // (let it go: a writer opening each FIFO ends the reader's open)
            for _ in 0..<100 {
                for f in fifos {
                    let fd = open(f, O_WRONLY | O_NONBLOCK)
                    if fd >= 0 { close(fd) }
                }
                if done.wait(timeout: .now() + 0.1) == .success { break }
            }
            return
        }
        let said = issues.withLock { text }
        XCTAssertTrue(said.contains("Info.plist"), said)
        XCTAssertTrue(said.contains("30-fifo.json"), said)
    }
}
