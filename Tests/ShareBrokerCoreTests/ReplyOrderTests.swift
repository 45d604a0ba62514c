// Replies keep their requests' order on a connection, whatever waits: a reply made while an
// earlier one is in a commit being written waits behind it; a batch whose file work ends while
// its earlier members' commit is being written is answered once that commit decided them (never
// by a later one); a subscribe's backlog, in a batch that waits for file work, comes after the
// batch's reply. `SyncBlocker` holds a commit in flight; `WorkGate` holds the file work.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

/// Blocks the next `.sync` (a commit in flight) until released; can fail the sync after.
final class SyncBlocker: @unchecked Sendable {
    let lock = NSLock()
    var blockNext = false
    var failNext = false
    let entered = DispatchSemaphore(value: 0)
    let permit = DispatchSemaphore(value: 0)
    var injector: @Sendable (JournalFaultPoint) -> Int32? {
        { [self] p in
            guard p == .sync else { return nil }
            lock.lock()
            if blockNext {
                blockNext = false
                lock.unlock()
                entered.signal()
                permit.wait()
                return nil
            }
            if failNext {
                failNext = false
                lock.unlock()
                return EIO
            }
            lock.unlock()
            return nil
        }
    }
}

final class ReplyOrderTests: XCTestCase {
    func start(_ gate: WorkGate, _ faults: SyncBlocker) throws -> BrokerHarness {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": pdfApp])
        try h.start { c in
            c.offLoopGate = gate.gate
            c.storeFaults = faults.injector
        }
        return h
    }

    /// A durable request, then a path request read in the same turn: the path request's work
    /// ends while the first one's commit is still being written.
    func testAFileRequestsReplyWaitsBehindAnEarlierReplyInACommitBeingWritten() throws {
        let gate = WorkGate()
        let faults = SyncBlocker()
        let h = try start(gate, faults)
        let dir = TempDir()
        let path = dir.path + "/a.pdf"
        _ = FileManager.default.createFile(atPath: path, contents: Data(pdfBytes))
        let sender = try h.rawSession()
        faults.lock.withLock { faults.blockNext = true }
        sender.send(
            rpcRequest(1, "share.send", ["items": [["url": "https://youtu.be/a"]], "extension": "com.mycompany.myapp.share"]).compactText + "\n"
                + rpcRequest(2, "share.targets", ["items": [["path": .string(path)]]]).compactText + "\n")
        gate.waitForWork("probe")
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success, "commit in flight")
        gate.release()
        let first = sender.readJSON(timeout: 2)
        faults.permit.signal()
        let second = sender.readJSON(timeout: 5)
        XCTAssertEqual(first?["id"], nil, "nothing before the first reply's commit is durable: \(String(describing: first))")
        XCTAssertEqual(second?["id"], 1)
        XCTAssertEqual(sender.readJSON(timeout: 5)?["id"], 2)
        h.stop()
    }

    /// A batch [durable A, path B]: B's work ends while A's commit X is being written; the next
    /// commit Y, on the same store, fails: A's durable share is answered as stored.
    func testABatchMemberIsDecidedByItsOwnCommitNotALaterOne() throws {
        let gate = WorkGate()
        let faults = SyncBlocker()
        let h = try start(gate, faults)
        let dir = TempDir()
        let path = dir.path + "/a.pdf"
        _ = FileManager.default.createFile(atPath: path, contents: Data(pdfBytes))
        let sender = try h.rawSession()
        let observer = try h.tool()
        let other = try h.rawSession()
        faults.lock.withLock { faults.blockNext = true }
        let batch: JSONValue = .array([
            rpcRequest(1, "share.send", ["items": [["url": "https://youtu.be/a"]], "extension": "com.mycompany.myapp.share"]),
            rpcRequest(2, "share.targets", ["items": [["path": .string(path)]]]),
        ])
        sender.send(batch.compactText + "\n")
        gate.waitForWork("probe")
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success, "commit X in flight")
        gate.release()
        XCTAssertTrue(waitUntil { (try? observer.call("broker.status")["fileWork"]?["finished"]?.intValue) == 1 })
        // Another share to the same group joins the next commit (Y), which will fail.
        other.send(rpcRequest(9, "share.send", ["items": [["url": "https://youtu.be/c"]], "extension": "com.mycompany.myapp.share"]).compactText + "\n")
        XCTAssertTrue(waitUntil { (try? observer.call("broker.status")["pendingShares"]?.intValue) == 2 })
        faults.lock.withLock { faults.failNext = true }
        faults.permit.signal()  // X succeeds
        let reply = try XCTUnwrap(sender.readJSON(timeout: 10)?.arrayValue)
        XCTAssertEqual(other.readJSON(timeout: 10)?["error"]?["code"], -32005, "the share whose commit failed")
        // (read once Y's outcome is in: Y may be written by the worker after X's replies went out)
        let pending = try observer.call("broker.status")["pendingShares"]
        XCTAssertEqual(pending, 1, "A's share is durable, the other one's commit failed")
        XCTAssertNotNil(reply[0]["result"]?["shareID"], "A is answered as stored: \(reply[0])")
        XCTAssertNotNil(reply[1]["result"]?["targets"], "\(reply[1])")
        h.stop()
    }

    /// An app's batch [app.subscribe, share.targets{path}]: while it waits for the file work,
    /// another connection's request must not send the subscribe's backlog.
    func testASubscribesBacklogComesAfterItsBatchsReply() throws {
        let gate = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": pdfApp])
        try h.start { c in c.offLoopGate = gate.gate }
        let tool = try h.tool()
        let opened = try tool.call("url.open", ["url": "deeplinkmyapp://x"])
        let dir = TempDir()
        let path = dir.path + "/a.pdf"
        _ = FileManager.default.createFile(atPath: path, contents: Data(pdfBytes))
        let app = try h.rawSession(role: "app", bundleID: "com.mycompany.myapp")
        let batch: JSONValue = .array([
            ["jsonrpc": "2.0", "id": 1, "method": "app.subscribe"],
            ["jsonrpc": "2.0", "id": 2, "method": "share.targets", "params": ["items": [["path": .string(path)]]]],
        ])
        app.send(batch.compactText + "\n")
        gate.waitForWork("probe")
        _ = try tool.call("broker.status")  // another connection's request runs `afterReply`
        let first = app.readJSON(timeout: 1)
        XCTAssertNil(first, "nothing before the batch reply: \(String(describing: first))")
        gate.release()
        let reply = try XCTUnwrap(app.readJSON(timeout: 5)?.arrayValue, "the batch reply first")
        XCTAssertEqual(reply.first?["result"]?["pending"], 1)
        let event = app.readJSON(timeout: 5)
        XCTAssertEqual(event?["method"], "app.event")
        XCTAssertEqual(event?["params"]?["id"], opened["eventID"])
        h.stop()
    }

    func testAReplyMadeWhileAnEarlierOnesCommitIsWrittenWaitsBehindIt() throws {
        let faults = SyncBlocker()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": pdfApp])
        try h.start { c in c.storeFaults = faults.injector }
        let c = try h.rawSession()
        faults.lock.withLock { faults.blockNext = true }
        c.send(#"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[{"url":"https://youtu.be/a"}],"extension":"com.mycompany.myapp.share"}}"# + "\n")
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success)
        c.send(#"{"jsonrpc":"2.0","id":2,"method":"broker.status"}"# + "\n")
        let first = c.readJSON(timeout: 1)
        XCTAssertNil(first, "the status reply waits behind the share's: \(String(describing: first))")
        faults.permit.signal()
        XCTAssertEqual(c.readJSON(timeout: 5)?["id"], 1)
        XCTAssertEqual(c.readJSON(timeout: 5)?["id"], 2)
        h.stop()
    }
}

/// A reply held behind a commit (only bytes, no durable change of its own) that the next commit
/// C2 takes still holds what follows: later replies do not overtake it, a half-closed peer still
/// gets it, and a subscribe's backlog does not overtake the subscribe's reply.
final class HeldReplyOrderTests: XCTestCase {
    let share = #"{"jsonrpc":"2.0","id":ID,"method":"share.send","params":{"items":[{"url":"https://youtu.be/a"}],"extension":"com.mycompany.myapp.share"}}"# + "\n"
    func s(_ id: Int) -> String { share.replacingOccurrences(of: "ID", with: String(id)) }
    func status(_ id: Int) -> String { #"{"jsonrpc":"2.0","id":\#(id),"method":"broker.status"}"# + "\n" }

    func setup(noInline: Bool = false) throws -> (BrokerHarness, SyncBlocker, RawClient, RawClient, ShareClientHandle) {
        let faults = SyncBlocker()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": pdfApp])
        try h.start { c in
            c.storeFaults = faults.injector
            if noInline { c.commitPacingLongestWait = 0 }
        }
        let c = try h.rawSession()
        let other = try h.rawSession()
        let observer = try h.tool()
        return (h, faults, c, other, ShareClientHandle(observer))
    }

    /// C1 (c's share) in flight; c's status #2 held as bytes; other's share makes the turn dirty;
    /// C1 ends, C2 takes #2 and blocks; c's status #3 goes out at once, before #2.
    func testALaterReplyDoesNotOvertakeAReplyHeldInTheNextCommit() throws {
        let (h, faults, c, other, obs) = try setup()
        faults.lock.withLock { faults.blockNext = true }
        c.send(s(1))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success)
        // (#2 is run, its reply held behind C1, before C1 ends: waited for, not slept on)
        XCTAssertTrue(h.sendAndWaitUntilRun(1, on: c, asking: obs.c) { c.send(status(2)) }, "#2 was run while C1 is in flight")
        other.send(s(9))
        XCTAssertTrue(waitUntil { (try? obs.c.call("broker.status")["pendingShares"]?.intValue) == 2 })
        faults.lock.withLock { faults.blockNext = true }
        faults.permit.signal()  // C1 ends; C2 (other's share + c's #2) starts and blocks
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success, "C2 in flight")
        XCTAssertEqual(c.readJSON(timeout: 5)?["id"], 1)
        c.send(status(3))
        let next = c.readJSON(timeout: 1)
        faults.permit.signal()
        XCTAssertNil(next, "#3 must not overtake #2: \(String(describing: next?["id"]))")
        XCTAssertEqual(c.readJSON(timeout: 5)?["id"], 2)
        XCTAssertEqual(c.readJSON(timeout: 5)?["id"], 3)
        h.stop()
    }

    /// Same, but c half-closes after #2: it is closed once #1 is written and #2 is lost.
    func testAHalfClosedPeerStillGetsAReplyHeldInTheNextCommit() throws {
        let (h, faults, c, other, obs) = try setup()
        faults.lock.withLock { faults.blockNext = true }
        c.send(s(1))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success)
        // (#2 is run while C1 is in flight: waited for, not slept on; the end of c's stream, sent
        // before other's share, is read by the turn that runs that share or an earlier one)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, on: c, asking: obs.c) {
                c.send(status(2))
                c.shutdownWrite()
            }, "#2 was run while C1 is in flight")
        other.send(s(9))
        XCTAssertTrue(waitUntil { (try? obs.c.call("broker.status")["pendingShares"]?.intValue) == 2 })
        faults.lock.withLock { faults.blockNext = true }
        faults.permit.signal()
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success, "C2 in flight")
        XCTAssertEqual(c.readJSON(timeout: 5)?["id"], 1)
        faults.permit.signal()
        XCTAssertEqual(c.readJSON(timeout: 5)?["id"], 2, "the status reply must not be lost")
        h.stop()
    }

    /// An app acks e1 (C1 in flight), then subscribes (reply held as bytes, backlog e2 queued);
    /// another share makes the turn dirty; C2 takes the subscribe reply; e2 goes out first.
    func testABacklogDoesNotOvertakeASubscribeReplyHeldInTheNextCommit() throws {
        let (h, faults, _, other, obs) = try setup(noInline: true)
        let e1 = try XCTUnwrap(obs.c.call("url.open", ["url": "deeplinkmyapp://x"])["eventID"]?.stringValue)
        _ = try obs.c.call("url.open", ["url": "deeplinkmyapp://y"])
        let app = try h.rawSession(role: "app", bundleID: "com.mycompany.myapp")
        faults.lock.withLock { faults.blockNext = true }
        app.send(#"{"jsonrpc":"2.0","id":1,"method":"app.ack","params":{"ids":["\#(e1)"]}}"# + "\n")
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success)
        // (the subscribe is run, its reply held behind C1 and e2 queued, before C1 ends: waited
        // for, not slept on)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, of: "com.mycompany.myapp", asking: obs.c) {
                app.send(#"{"jsonrpc":"2.0","id":2,"method":"app.subscribe"}"# + "\n")
            }, "the subscribe was run while C1 is in flight")
        other.send(s(9))
        XCTAssertTrue(waitUntil { (try? obs.c.call("broker.status")["pendingShares"]?.intValue) == 1 })
        faults.lock.withLock { faults.blockNext = true }
        faults.permit.signal()
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success, "C2 in flight")
        XCTAssertEqual(app.readJSON(timeout: 5)?["id"], 1)
        let next = app.readJSON(timeout: 1)
        faults.permit.signal()
        XCTAssertNil(next?["method"], "app.event before the subscribe's reply: \(String(describing: next))")
        XCTAssertEqual(app.readJSON(timeout: 5)?["id"], 2, "the subscribe's reply")
        XCTAssertEqual(app.readJSON(timeout: 5)?["method"], "app.event", "then its backlog")
        h.stop()
    }
}

final class ShareClientHandle { let c: BrokerConnection; init(_ c: BrokerConnection) { self.c = c } }
