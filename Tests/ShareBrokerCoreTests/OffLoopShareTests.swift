// Files a share names are read, copied and fsynced off the event loop: while that work runs,
// every other connection is served, the sending connection reads nothing more (its replies keep
// their order), and a request that will not be answered (its connection gone, its extension
// removed by a reload) leaves no file behind. `offLoopGate` holds the work back deterministically.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

/// Holds each piece of off-loop work at its start until the test lets it go.
final class WorkGate: @unchecked Sendable {
    let entered = DispatchSemaphore(value: 0)
    let permits = DispatchSemaphore(value: 0)
    var gate: @Sendable () -> Void {
        { [self] in
            entered.signal()
            permits.wait()
        }
    }
    /// Waits until a piece of work is held at the gate.
    func waitForWork(_ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(entered.wait(timeout: .now() + 10 * sanitizerSlowdown), .success, "\(what) never started", file: file, line: line)
    }
    func release() { permits.signal() }
}

/// Sees the threads that called `note` end: each is given a thread-specific value whose
/// destructor POSIX runs as the thread exits.
final class ThreadsSeen: @unchecked Sendable {  // counts guarded by `lock`
    private let lock = NSLock()
    private var noted = 0
    private var ended = 0
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let r = pthread_key_create(&key) { value in
            guard let value = value as UnsafeMutableRawPointer? else { return }
            let seen = Unmanaged<ThreadsSeen>.fromOpaque(value).takeRetainedValue()
            seen.lock.withLock { seen.ended += 1 }
        }
        precondition(r == 0, "pthread_key_create: \(r)")
        return key
    }()

    /// Notes the calling thread (once).
    func note() {
        guard pthread_getspecific(ThreadsSeen.key) == nil else { return }
        lock.withLock { noted += 1 }
        pthread_setspecific(ThreadsSeen.key, Unmanaged.passRetained(self).toOpaque())
    }
    /// Threads noted.
    var count: Int { lock.withLock { noted } }
    /// True once every thread noted has ended.
    var allEnded: Bool { lock.withLock { ended == noted } }
}

final class OffLoopShareTests: XCTestCase {
    let group = "group.com.example.pdf"

    func start(_ gate: WorkGate, _ configure: @escaping (inout BrokerConfiguration) -> Void = { _ in }) throws -> BrokerHarness {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": pdfApp])
        try h.start { c in
            c.offLoopGate = gate.gate
            configure(&c)
        }
        return h
    }

    func pdfFile(_ dir: TempDir, _ name: String = "Report.pdf", bytes: [UInt8] = pdfBytes) -> String {
        let path = dir.path + "/" + name
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        return path
    }

    func sendLine(_ c: RawClient, _ id: Int, _ method: String, _ params: JSONValue) {
        c.send(rpcRequest(id, method, params).compactText + "\n")
    }

    func filesDirectoryEntries(_ h: BrokerHarness) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: h.state + "/groups/" + group + "/files")) ?? []
    }

    func testOtherClientsAreServedWhileAShareIsCopiedAndTheSenderKeepsItsOrder() throws {
        let gate = WorkGate()
        let h = try start(gate)
        let dir = TempDir()
        let source = pdfFile(dir)
        let sender = try h.rawSession()
        // A share with a path item, then a status request pipelined behind it on the same connection.
        sendLine(sender, 1, "share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"])
        sendLine(sender, 2, "broker.status", [:])
        gate.waitForWork("reading the path item's file")

        // The loop is free: another client's requests, durable ones included, are answered.
        let other = try h.tool()
        XCTAssertNotNil(try other.call("broker.status")["connections"])
        let url = try other.call("share.send", ["items": [["url": "https://youtu.be/x"]], "extension": "com.mycompany.myapp.share"])
        XCTAssertNotNil(url["shareID"]?.stringValue)
        // The sender hears nothing yet: not even the status request it sent after the share.
        XCTAssertNil(sender.readJSON(timeout: 0.3), "nothing is answered before the share's work is done")

        gate.release()
        gate.waitForWork("writing the share's file")
        XCTAssertNotNil(try other.call("broker.status")["connections"])
        XCTAssertNil(sender.readJSON(timeout: 0.2))
        gate.release()

        let first = try XCTUnwrap(sender.readJSON(timeout: 10))
        XCTAssertEqual(first["id"], 1, "replies keep the order of their requests")
        let shareID = try XCTUnwrap(first["result"]?["shareID"]?.stringValue, "\(first)")
        let second = try XCTUnwrap(sender.readJSON(timeout: 10))
        XCTAssertEqual(second["id"], 2)
        XCTAssertNotNil(second["result"]?["connections"])

        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        let item = try XCTUnwrap(app.call("share.get", ["shareID": .string(shareID)])["items"]?.arrayValue?.first)
        XCTAssertEqual(item["type"], "com.adobe.pdf")
        let path = try XCTUnwrap(item["path"]?.stringValue)
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))), pdfBytes)

        // The connection reads on afterwards: a later request is answered as usual.
        sendLine(sender, 3, "broker.status", [:])
        XCTAssertEqual(sender.readJSON(timeout: 10)?["id"], 3)
        h.stop()
    }

    func testDataItemsAreWrittenOffTheLoopToo() throws {
        let gate = WorkGate()
        let h = try start(gate)
        let sender = try h.rawSession()
        sendLine(sender, 1, "share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "a.pdf"]]])
        gate.waitForWork("writing the data item")
        XCTAssertNotNil(try h.tool().call("broker.status")["connections"], "the loop is not blocked by the write")
        gate.release()
        let reply = try XCTUnwrap(sender.readJSON(timeout: 10))
        XCTAssertNotNil(reply["result"]?["shareID"]?.stringValue, "\(reply)")
        XCTAssertEqual(filesDirectoryEntries(h).count, 1)
        h.stop()
    }

    func testASenderThatHangsUpDuringTheCopyLeavesNoShareAndNoFile() throws {
        let gate = WorkGate()
        let h = try start(gate)
        let dir = TempDir()
        let source = pdfFile(dir)
        let observer = try h.tool()
        var sender: RawClient? = try h.rawSession()
        sendLine(sender!, 1, "share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"])
        gate.waitForWork("reading the file")
        gate.release()
        gate.waitForWork("writing the share's file")
        sender = nil  // closed: it cannot hear the reply
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? observer.call("broker.status")["connections"]?.intValue) == 1 },
            "the broker notices the hang-up while the copy runs")
        gate.release()  // the copy is written, then taken back
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? observer.call("broker.status")["fileWork"]?["abandoned"]?.intValue) == 1 },
            "the copy finishes and is dropped")
        let work = try observer.call("broker.status")["fileWork"]
        XCTAssertEqual(work?["finished"], 1, "the read was taken up by the request: \(String(describing: work))")
        XCTAssertEqual(work?["running"], 0)
        XCTAssertEqual(filesDirectoryEntries(h), [], "no file is left")
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        XCTAssertEqual(try app.call("share.list")["shares"]?.arrayValue?.count, 0, "nothing unanswered is stored")
        h.stop()
    }

    func testAReloadThatRemovesTheExtensionDuringTheCopyStoresNothing() throws {
        let gate = WorkGate()
        let h = try start(gate)
        let dir = TempDir()
        let source = pdfFile(dir)
        let sender = try h.rawSession()
        sendLine(sender, 1, "share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"])
        gate.waitForWork("reading the file")
        gate.release()
        gate.waitForWork("writing the share's file")
        // The PDF app goes (its manifest removed) while the file is written.
        try FileManager.default.removeItem(atPath: h.state + "/apps/20-pdf.json")
        _ = try h.tool().call("apps.reload")
        gate.release()
        let reply = try XCTUnwrap(sender.readJSON(timeout: 10))
        XCTAssertEqual(reply["error"]?["code"], -32002, "\(reply)")
        XCTAssertTrue(reply["error"]?["message"]?.stringValue?.contains("reload") == true, "\(reply)")
        XCTAssertTrue(waitUntil { self.filesDirectoryEntries(h).isEmpty }, "no file is left: \(filesDirectoryEntries(h))")
        h.stop()
    }

    func testAFailedReadOffTheLoopIsTheRequestsError() throws {
        let gate = WorkGate()
        let h = try start(gate)
        let sender = try h.rawSession()
        sendLine(sender, 1, "share.send", ["items": [["path": "/nonexistent/x.pdf"]], "extension": "com.example.pdfreader.share"])
        sendLine(sender, 2, "share.targets", ["items": [["path": "/"]]])
        gate.waitForWork("reading the missing file")
        gate.release()
        let first = try XCTUnwrap(sender.readJSON(timeout: 10))
        XCTAssertEqual(first["id"], 1)
        XCTAssertEqual(first["error"]?["code"], -32602)
        XCTAssertTrue(first["error"]?["message"]?.stringValue?.contains("'/nonexistent/x.pdf' cannot be read") == true, "\(first)")
        gate.waitForWork("looking at /")
        gate.release()
        let second = try XCTUnwrap(sender.readJSON(timeout: 10))
        XCTAssertEqual(second["id"], 2)
        XCTAssertTrue(second["error"]?["message"]?.stringValue?.contains("is not a regular file") == true, "\(second)")
        h.stop()
    }

    func testANotificationWithAPathItemIsStoredAndTheNextRequestWaitsForIt() throws {
        let gate = WorkGate()
        let h = try start(gate)
        let dir = TempDir()
        let source = pdfFile(dir)
        let sender = try h.rawSession()
        sender.send(
            (["jsonrpc": "2.0", "method": "share.send", "params": ["items": [["path": .string(source)]]]] as JSONValue).compactText + "\n")
        sendLine(sender, 7, "broker.status", [:])
        gate.waitForWork("reading")
        gate.release()
        gate.waitForWork("writing")
        XCTAssertNil(sender.readJSON(timeout: 0.2))
        gate.release()
        let reply = try XCTUnwrap(sender.readJSON(timeout: 10))
        XCTAssertEqual(reply["id"], 7, "a notification gets no reply; the request after it is run once it is done")
        XCTAssertEqual(reply["result"]?["pendingShares"], 1, "\(reply)")
        h.stop()
    }

    func testABatchWaitsForItsFileWorkAndKeepsItsRepliesInOrder() throws {
        let gate = WorkGate()
        let h = try start(gate)
        let dir = TempDir()
        let source = pdfFile(dir)
        let sender = try h.rawSession()
        let batch: JSONValue = .array([
            rpcRequest(1, "share.send", ["items": [["url": "https://youtu.be/a"]], "extension": "com.mycompany.myapp.share"]),
            rpcRequest(2, "share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"]),
            rpcRequest(3, "share.send", ["items": [["url": "https://youtu.be/b"]], "extension": "com.mycompany.myapp.share"]),
            rpcRequest(4, "broker.status", [:]),
        ])
        sender.send(batch.compactText + "\n")
        gate.waitForWork("reading")
        // The first member's share commits while the batch waits.
        let other = try h.tool()
        XCTAssertTrue(waitUntil { (try? other.call("broker.status")["pendingShares"]?.intValue) == 1 })
        XCTAssertNil(sender.readJSON(timeout: 0.2), "a batch is answered as a whole")
        gate.release()
        gate.waitForWork("writing")
        gate.release()
        let reply = try XCTUnwrap(sender.readJSON(timeout: 10)?.arrayValue)
        XCTAssertEqual(reply.map { $0["id"] }, [1, 2, 3, 4])
        for r in reply.prefix(3) { XCTAssertNotNil(r["result"]?["shareID"]?.stringValue, "\(r)") }
        XCTAssertEqual(reply[3]["result"]?["pendingShares"], 3)
        h.stop()
    }

    func testABatchMemberWhoseCommitFailsWhileTheBatchWaitsAnswersStorageFailure() throws {
        let gate = WorkGate()
        let faults = SyncCounter()
        let h = try start(gate) { $0.storeFaults = faults.injector }
        let dir = TempDir()
        let source = pdfFile(dir)
        let sender = try h.rawSession()
        faults.arm(passing: 0, failing: 1)
        let batch: JSONValue = .array([
            rpcRequest(1, "share.send", ["items": [["url": "https://youtu.be/a"]], "extension": "com.mycompany.myapp.share"]),
            rpcRequest(2, "share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"]),
        ])
        sender.send(batch.compactText + "\n")
        gate.waitForWork("reading")
        // The first member's commit fails while the batch waits (its share is rolled back).
        let other = try h.tool()
        XCTAssertTrue(waitUntil { faults.lock.withLock { faults.failing == 0 } })
        XCTAssertTrue(waitUntil { (try? other.call("broker.status")["pendingShares"]?.intValue) == 0 })
        faults.disarm()
        gate.release()
        gate.waitForWork("writing")
        gate.release()
        let reply = try XCTUnwrap(sender.readJSON(timeout: 10)?.arrayValue)
        XCTAssertEqual(reply.map { $0["id"] }, [1, 2])
        XCTAssertEqual(reply[0]["error"]?["code"], -32005, "the failed commit decides the first member: \(reply[0])")
        XCTAssertNotNil(reply[1]["result"]?["shareID"]?.stringValue, "a later, durable member is not spoiled: \(reply[1])")
        XCTAssertEqual(try other.call("broker.status")["pendingShares"], 1)
        h.stop()
    }

    func testAStopWaitsForFileWorkAndAnswersTheShare() throws {
        let gate = WorkGate()
        let h = try start(gate)
        let dir = TempDir()
        let source = pdfFile(dir)
        let sender = try h.rawSession()
        sendLine(sender, 1, "share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"])
        gate.waitForWork("reading")
        gate.release()
        gate.waitForWork("writing")
        let stopped = DispatchSemaphore(value: 0)
        let harness = Box(h)
        Thread.detachNewThread {
            harness.value.stop()
            stopped.signal()
        }
        XCTAssertEqual(stopped.wait(timeout: .now() + 0.3), .timedOut, "the broker waits for the request's file work")
        gate.release()
        let reply = try XCTUnwrap(sender.readJSON(timeout: 10))
        let shareID = try XCTUnwrap(reply["result"]?["shareID"]?.stringValue, "answered before stopping: \(reply)")
        XCTAssertEqual(stopped.wait(timeout: .now() + 10), .success)
        // Durable: a new broker on the same state has it.
        let again = BrokerHarness()
        try? FileManager.default.removeItem(atPath: again.state)
        try FileManager.default.copyItem(atPath: h.state, toPath: again.state)
        try again.start()
        let app = try again.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        let item = try XCTUnwrap(app.call("share.get", ["shareID": .string(shareID)])["items"]?.arrayValue?.first)
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: try XCTUnwrap(item["path"]?.stringValue)))), pdfBytes)
        again.stop()
    }

    /// File work still running when the stop's grace period ends (a long copy): its request is
    /// answered -32005, nothing stored, instead of the connection closing without a word (the
    /// robustness audit: eight 250 MB shares got EOF at SIGTERM); so is a batch's member, its
    /// later members "not run".
    func testAStopWhoseGracePeriodEndsDuringFileWorkAnswersStorageFailure() throws {
        let gate = WorkGate()
        let workThreads = ThreadsSeen()
        let h = try start(gate) { c in
            c.shutdownGraceSeconds = 0.5
            let held = c.offLoopGate
            c.offLoopGate = {
                workThreads.note()
                held?()
            }
        }
        let dir = TempDir()
        let source = pdfFile(dir)
        let sender = try h.rawSession()
        sendLine(sender, 1, "share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"])
        gate.waitForWork("reading")
        let batcher = try h.rawSession()
        batcher.send(
            JSONValue.array([
                rpcRequest(7, "broker.status", [:]),
                rpcRequest(8, "share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"]),
                rpcRequest(9, "broker.status", [:]),
            ]).compactText + "\n")
        gate.waitForWork("the batch's reading")
        let stopped = DispatchSemaphore(value: 0)
        let harness = Box(h)
        Thread.detachNewThread {
            harness.value.stop()
            stopped.signal()
        }
        let reply = try XCTUnwrap(sender.readJSON(timeout: 10), "answered before the connection closed")
        XCTAssertEqual(reply["id"], 1)
        XCTAssertEqual(reply["error"]?["code"]?.intValue, -32005, reply.compactText)
        XCTAssertTrue(reply["error"]?["message"]?.stringValue?.contains("nothing was stored") ?? false, reply.compactText)
        let batch = try XCTUnwrap(batcher.readJSON(timeout: 10)?.arrayValue, "the batch answered")
        XCTAssertEqual(batch.map { $0["id"] }, [7, 8, 9])
        XCTAssertNotNil(batch[0]["result"])
        XCTAssertEqual(batch[1]["error"]?["code"]?.intValue, -32005)
        XCTAssertTrue(batch[2]["error"]?["message"]?.stringValue?.contains("stopping; not run") ?? false, "\(batch[2])")
        XCTAssertEqual(stopped.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(workThreads.count, 2, "the two held pieces of work ran on two threads")
        gate.release()
        gate.release()
        // The held work runs to its end after the stop (the stopped pool's threads end after it):
        // nothing of either share was recorded.
        XCTAssertTrue(waitUntil(timeout: 10) { workThreads.allEnded }, "the held work ran to its end")
        // The held work opened the source after the stop, and the loop that would have taken its
        // descriptors is gone: they are closed with the work's result, not left open in the
        // process that ran the broker (an embedding one goes on).
        #if os(Linux)
            func openOnSource() -> [String] {
                let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
                return fds.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == source }
            }
            XCTAssertTrue(waitUntil(timeout: 10) { openOnSource().isEmpty }, "descriptors of the shared file left open by work that ended after the stop: \(openOnSource())")
        #endif
        let again = BrokerHarness()
        try? FileManager.default.removeItem(atPath: again.state)
        try FileManager.default.copyItem(atPath: h.state, toPath: again.state)
        try again.start()
        let app = try again.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        XCTAssertEqual(try app.call("share.list")["shares"]?.arrayValue?.count, 0)
        again.stop()
    }

    /// A batch [durable share.send, path share.targets] whose file work has finished but waits
    /// for the first member's commit, still in flight when the grace period ends, is answered
    /// (the review: it was cancelled with the connection, though its first member was stored).
    func testAStopWhoseGracePeriodEndsDuringACommitAnswersTheBatchWaitingForIt() throws {
        let gate = WorkGate()
        let faults = SyncBlocker()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": pdfApp])
        try h.start { c in
            c.offLoopGate = gate.gate
            c.storeFaults = faults.injector
            c.shutdownGraceSeconds = 0.5
        }
        let dir = TempDir()
        let source = pdfFile(dir)
        let sender = try h.rawSession()
        let observer = try h.tool()
        faults.lock.withLock { faults.blockNext = true }
        sender.send(
            JSONValue.array([
                rpcRequest(1, "share.send", ["items": [["url": "https://youtu.be/a"]], "extension": "com.mycompany.myapp.share"]),
                rpcRequest(2, "share.targets", ["items": [["path": .string(source)]]]),
            ]).compactText + "\n")
        gate.waitForWork("reading the path")
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success, "the first member's commit is in flight")
        gate.release()
        XCTAssertTrue(waitUntil { (try? observer.call("broker.status")["fileWork"]?["finished"]?.intValue) == 1 })
        let harness = Box(h)
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            harness.value.stop()
            stopped.signal()
        }
        usleep(1_000_000)  // past the grace period
        faults.permit.signal()  // the commit ends (the stop waits for it)
        let batch = try XCTUnwrap(sender.readJSON(timeout: 5)?.arrayValue, "the batch was answered before the connection closed")
        XCTAssertEqual(batch.map { $0["id"] }, [1, 2])
        XCTAssertNotNil(batch[0]["result"]?["shareID"], "\(batch[0])")
        XCTAssertNotNil(batch[1]["result"]?["targets"], "\(batch[1])")
        XCTAssertEqual(stopped.wait(timeout: .now() + 10), .success)
    }

    // MARK: The group's share quota

    func testAGroupsPendingSharesHaveAByteQuotaThatSparesOtherGroups() throws {
        let gate = WorkGate()
        for _ in 0..<16 { gate.release() }  // (work runs at once here: one permit per piece of work)
        let h = try start(gate) { $0.maxGroupShareBytes = 100 }
        let tool = try h.tool()
        let ext = "com.mycompany.myapp.share"
        let url40 = "https://example.com/" + String(repeating: "a", count: 20)  // 40 bytes
        let first = try tool.call("share.send", ["items": [["url": .string(url40)]], "extension": .string(ext)])
        _ = try tool.call("share.send", ["items": [["url": .string(url40)]], "extension": .string(ext)])
        let refused = rpcError { try tool.call("share.send", ["items": [["url": .string(url40)]], "extension": .string(ext)]) }
        XCTAssertEqual(refused?.code, -32005)
        XCTAssertTrue(refused?.message.contains("--max-group-share-bytes") == true, refused?.message ?? "")
        XCTAssertTrue(refused?.message.contains("group.com.mycompany.myapp") == true, refused?.message ?? "")
        // Another group is not affected.
        let dir = TempDir()
        XCTAssertNotNil(
            try tool.call("share.send", ["items": [["path": .string(pdfFile(dir))]], "extension": "com.example.pdfreader.share"])["shareID"])
        // Completing a share makes room.
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        _ = try app.call("share.complete", ["shareID": try XCTUnwrap(first["shareID"])])
        XCTAssertNotNil(try tool.call("share.send", ["items": [["url": .string(url40)]], "extension": .string(ext)])["shareID"])
        // After a restart the pending shares count again (from the journal).
        h.stop()
        let again = BrokerHarness()
        try? FileManager.default.removeItem(atPath: again.state)
        try FileManager.default.copyItem(atPath: h.state, toPath: again.state)
        try again.start { $0.maxGroupShareBytes = 100 }
        let tool2 = try again.tool()
        XCTAssertEqual(
            rpcError { try tool2.call("share.send", ["items": [["url": .string(url40)]], "extension": .string(ext)]) }?.code, -32005)
        XCTAssertNotNil(
            try tool2.call("share.send", ["items": [["url": "https://example.com/"]], "extension": .string(ext)])["shareID"],
            "a smaller share still fits (exactly up to the quota)")
        again.stop()
    }

    func testSharesBeingWrittenCountForTheGroupsQuota() throws {
        let gate = WorkGate()
        let h = try start(gate) { $0.maxGroupShareBytes = 100 }
        let bytes60 = pdfBytes + [UInt8](repeating: 0x20, count: 60 - pdfBytes.count)
        let sender = try h.rawSession()
        sendLine(sender, 1, "share.send", ["items": [["data": .string(base64(bytes60)), "name": "a.pdf"]]])
        gate.waitForWork("writing the first share")
        let other = try h.rawSession()
        sendLine(other, 2, "share.send", ["items": [["data": .string(base64(bytes60)), "name": "b.pdf"]]])
        let refused = other.readJSON(timeout: 5)
        XCTAssertEqual(refused?["error"]?["code"], -32005, "the share being written holds its bytes already: \(String(describing: refused))")
        gate.release()
        XCTAssertNotNil(sender.readJSON(timeout: 10)?["result"]?["shareID"])
        sendLine(other, 3, "share.send", ["items": [["data": .string(base64(bytes60)), "name": "b.pdf"]]])
        XCTAssertEqual(other.readJSON(timeout: 5)?["error"]?["code"], -32005)
        for _ in 0..<4 { gate.release() }  // (work wrongly let in would wait here forever)
        h.stop()
    }

    func testAShareThatIsNotStoredGivesItsBytesBack() throws {
        let gate = WorkGate()
        let h = try start(gate) { $0.maxGroupShareBytes = 100 }
        let bytes60 = pdfBytes + [UInt8](repeating: 0x20, count: 60 - pdfBytes.count)
        var sender: RawClient? = try h.rawSession()
        sendLine(sender!, 1, "share.send", ["items": [["data": .string(base64(bytes60)), "name": "a.pdf"]]])
        gate.waitForWork("writing")
        sender = nil
        let tool = try h.tool()
        XCTAssertTrue(waitUntil(timeout: 10) { (try? tool.call("broker.status")["connections"]?.intValue) == 1 })
        gate.release()
        XCTAssertTrue(waitUntil(timeout: 10) { (try? tool.call("broker.status")["fileWork"]?["abandoned"]?.intValue) == 1 })
        // The abandoned share's 60 bytes are free again.
        let second = try h.rawSession()
        sendLine(second, 2, "share.send", ["items": [["data": .string(base64(bytes60)), "name": "b.pdf"]]])
        gate.waitForWork("writing the second")
        gate.release()
        let reply = second.readJSON(timeout: 10)
        XCTAssertNotNil(reply?["result"]?["shareID"], "\(String(describing: reply))")
        h.stop()
    }

    // MARK: Threads, dropped work, ended sessions

    func testFileWorkBlockedOnSomeThreadsLeavesTheOthersWorking() throws {
        let gate = WorkGate()
        let h = try start(gate)
        // Three shares whose work hangs (as on a hung network file system)...
        var hung: [RawClient] = []
        for i in 0..<3 {
            let c = try h.rawSession()
            sendLine(c, i, "share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "hung.pdf"]]])
            gate.waitForWork("hung work \(i)")
            hung.append(c)
        }
        // ... and a fourth still gets a thread of its own.
        let fourth = try h.rawSession()
        sendLine(fourth, 9, "share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "ok.pdf"]]])
        gate.waitForWork("a fourth piece of work, beside three blocked ones")
        gate.release()
        for _ in 0..<3 { gate.release() }
        XCTAssertNotNil(fourth.readJSON(timeout: 10)?["result"]?["shareID"])
        for c in hung { XCTAssertNotNil(c.readJSON(timeout: 10)?["result"]?["shareID"]) }
        h.stop()
    }

    func testWorkNotStartedIsDroppedWhenItsConnectionCloses() throws {
        let gate = WorkGate()
        let h = try start(gate)
        var busy: [RawClient] = []
        for i in 0..<8 {  // every thread
            let c = try h.rawSession()
            sendLine(c, i, "share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "a.pdf"]]])
            gate.waitForWork("work \(i)")
            busy.append(c)
        }
        var queued: RawClient? = try h.rawSession()
        sendLine(queued!, 99, "share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "queued.pdf"]]])
        let observer = try h.tool()
        XCTAssertTrue(waitUntil(timeout: 10) { (try? observer.call("broker.status")["fileWork"]?["running"]?.intValue) == 9 })
        queued = nil  // gone before a thread took its work
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? observer.call("broker.status")["fileWork"]?["abandoned"]?.intValue) == 1 },
            "its work is dropped at once, not run later")
        for _ in 0..<8 { gate.release() }
        for c in busy { XCTAssertNotNil(c.readJSON(timeout: 10)?["result"]?["shareID"]) }
        XCTAssertEqual(gate.entered.wait(timeout: .now() + 0.5), .timedOut, "the dropped work never ran")
        XCTAssertEqual(try observer.call("broker.status")["pendingShares"], 8)
        XCTAssertEqual(filesDirectoryEntries(h).count, 8)
        h.stop()
    }

    func testABatchWhoseSessionEndsWhileItWaitsRunsNothingMore() throws {
        let gate = WorkGate()
        let tokenApp = pdfApp.replacingOccurrences(
            of: #""bundleID": "com.example.pdfreader.share","#, with: #""bundleID": "com.example.pdfreader.share", "token": "t1","#)
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": tokenApp])
        try h.start { $0.offLoopGate = gate.gate }
        let dir = TempDir()
        let source = pdfFile(dir)
        let ext = try RawClient(h.socket)
        ext.send(#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"role":"extension","bundleID":"com.example.pdfreader.share","token":"t1"}}"# + "\n")
        XCTAssertNotNil(ext.readJSON()?["result"])
        let batch: JSONValue = .array([
            rpcRequest(1, "share.targets", ["items": [["path": .string(source)]]]),
            rpcRequest(2, "broker.status", [:]),  // (allowed to anyone: only the session's end stops it)
        ])
        ext.send(batch.compactText + "\n")
        gate.waitForWork("reading")
        // The token changes: the session ends while its batch waits.
        h.dir.write("state/apps/20-pdf.json", tokenApp.replacingOccurrences(of: "t1", with: "t2"))
        _ = try h.tool().call("apps.reload")
        gate.release()
        let reply = try XCTUnwrap(ext.readJSON(timeout: 10)?.arrayValue)
        XCTAssertEqual(reply.map { $0["id"] }, [1, 2])
        XCTAssertEqual(reply[0]["error"]?["code"], -32001, "\(reply[0])")
        XCTAssertEqual(reply[1]["error"]?["code"], -32001, "not run after the session ended: \(reply[1])")
        XCTAssertTrue(reply[1]["error"]?["message"]?.stringValue?.contains("session ended") == true, "\(reply[1])")
        let notice = ext.readJSON(timeout: 10)
        XCTAssertEqual(notice?["id"], .null, "why the session ended comes last, after the batch's reply: \(String(describing: notice))")
        XCTAssertTrue(
            notice?["error"]?["message"]?.stringValue?.contains("session ended by a manifest reload: its manifest's token changed") == true,
            "\(String(describing: notice))")
        XCTAssertTrue(ext.waitForClose(timeout: 10))
        h.stop()
    }
}
