// share.send {open} stores the share in its group's journal and the announcing event in the event
// journal; the group's commit goes first. When the event journal's commit then fails, the share
// (durable already) is taken back by a completion. The reply -32005 ("nothing was stored") used to
// go out before that completion was durable: a crash, or a disk refusing it, kept the share, and
// recovery re-created its event (found by scripts/fault-injection: sticky N=56, and N=56 with a
// SIGKILL at call 59). The completion is now made durable before the reply; when it cannot be,
// the answer is -32603, saying the share may be there.

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

/// Counts `.sync` calls from `arm`: fails the listed ones, blocks the one named until `permit`,
/// and from sync number `cutsFailFrom` on fails every cut (and its zeros) too, and from sync number
/// `reservesFailFrom` on every reservation (ENOSPC). A test may also switch cut and reservation
/// failures on and off (`cutsFail`, `reservesFail`) and move the blocked sync (`block(at:)`).
final class SyncFaults: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var armed = false
    private var syncs = 0
    private var failing: Set<Int> = []
    private var blockAt = 0
    private var cutsFailFrom = Int.max
    private var reservesFailFrom = Int.max
    private var cutsFailing = false
    private var reservesFailing = false
    let entered = DispatchSemaphore(value: 0)
    let permit = DispatchSemaphore(value: 0)

    func arm(fail: Set<Int>, blockAt: Int = 0, cutsFailFrom: Int = .max, reservesFailFrom: Int = .max) {
        lock.lock()
        armed = true
        syncs = 0
        failing = fail
        self.blockAt = blockAt
        self.cutsFailFrom = cutsFailFrom
        self.reservesFailFrom = reservesFailFrom
        lock.unlock()
    }

    func block(at n: Int) {
        lock.lock()
        blockAt = n
        lock.unlock()
    }

    var cutsFail: Bool {
        get { lock.withLock { cutsFailing } }
        set { lock.withLock { cutsFailing = newValue } }
    }

    var reservesFail: Bool {
        get { lock.withLock { reservesFailing } }
        set { lock.withLock { reservesFailing = newValue } }
    }

    var syncCalls: Int {
        lock.lock()
        defer { lock.unlock() }
        return syncs
    }

    var injector: @Sendable (JournalFaultPoint) -> Int32? {
        { [self] p in
            lock.lock()
            guard armed else {
                lock.unlock()
                return nil
            }
            switch p {
            case .sync:
                syncs += 1
                let n = syncs
                let block = n == blockAt
                let fail = failing.contains(n)
                lock.unlock()
                if block {
                    entered.signal()
                    permit.wait()
                }
                return fail ? EIO : nil
            case .cutBack, .cutBackZeros:
                let fail = syncs >= cutsFailFrom || cutsFailing
                lock.unlock()
                return fail ? EIO : nil
            case .reserve:
                let fail = syncs >= reservesFailFrom || reservesFailing
                lock.unlock()
                return fail ? ENOSPC : nil
            default:
                lock.unlock()
                return nil
            }
        }
    }
}

/// Two raw connections of My App's share extension (`hello` said); the first has sent a warm-up
/// `share.send {open}` (id 1), which opened the group and the event queues. Next ids: 2 and up.
func twoSharingExtensions(_ h: BrokerHarness, file: StaticString = #filePath, line: UInt = #line) throws -> (RawClient, RawClient) {
    let first = try RawClient(h.socket)
    let second = try RawClient(h.socket)
    for c in [first, second] {
        c.send(requestLine(id: "0", method: "hello", params: #"{"role":"extension","bundleID":"com.mycompany.myapp.share"}"#))
        XCTAssertNotNil(c.readJSON()?["result"], "hello", file: file, line: line)
    }
    first.send(requestLine(id: "1", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/warmup"}],"open":true}"#))
    XCTAssertNotNil(first.readJSON()?["result"], "the warm-up share", file: file, line: line)
    return (first, second)
}

final class CompensationCommitTests: XCTestCase {
    func start(_ faults: SyncFaults) throws -> BrokerHarness {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = faults.injector }
        return h
    }

    func sendOpen(_ ext: BrokerConnection, _ url: String) throws -> JSONValue {
        try ext.call("share.send", ["items": [["url": .string(url)]], "open": true])
    }

    func shareURLs(_ h: BrokerHarness) throws -> [String] {
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        let shares = try XCTUnwrap(app.call("share.list")["shares"]?.arrayValue)
        return shares.compactMap { $0["items"]?.arrayValue?.first?["url"]?.stringValue }
    }

    /// The event's commit fails, and so does the share's take-back: -32603, not -32005, and the
    /// share is there after a restart, its event re-created (as the answer allowed).
    func testATakeBackThatCannotBeMadeDurableIsNotAnsweredNothingStored() throws {
        let faults = SyncFaults()
        let h = try start(faults)
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try sendOpen(ext, "https://youtu.be/first")  // (opens the group and the queues)
        // fdatasync 1: the group's journal (the share); 2: the event journal; 3: the take-back.
        faults.arm(fail: [2, 3])
        let refused = rpcError { _ = try self.sendOpen(ext, "https://youtu.be/second") }
        // (at least: 4, the share's event queued again, may follow the reply before this is read)
        XCTAssertGreaterThanOrEqual(faults.syncCalls, 3, "the take-back was committed before the reply")
        XCTAssertEqual(refused?.code, -32603, "\(String(describing: refused))")
        XCTAssertTrue(refused?.message.contains("it may be there after a restart") ?? false, "\(String(describing: refused))")
        faults.arm(fail: [])
        h.stop()
        try h.start { $0.storeFaults = faults.injector }
        defer { h.stop() }
        XCTAssertEqual(try shareURLs(h), ["https://youtu.be/first", "https://youtu.be/second"])
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 2, "its event re-created with it")
    }

    /// The event's commit fails, and the take-back's completion cannot even be appended: its
    /// journal keeps no headroom for it (the seam; normally 64 KiB are kept behind every record)
    /// and the disk refuses the reservation. -32603, saying the share may be there; it is, after
    /// a restart, its event re-created.
    func testATakeBackThatCannotBeAppendedIsNotAnsweredNothingStored() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        let configure: (inout BrokerConfiguration) -> Void = {
            $0.storeFaults = faults.injector
            $0.journalSpace = (reserveChunk: 1, freeingHeadroom: 0)  // (each record reserves its own bytes)
        }
        try h.start(configure)
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try sendOpen(ext, "https://youtu.be/first")
        // fdatasync 1: the group's journal (the share); 2: the event journal (fails); from then on
        // no space can be reserved, and the completion needs some.
        faults.arm(fail: [2], reservesFailFrom: 2)
        let refused = rpcError { _ = try self.sendOpen(ext, "https://youtu.be/second") }
        XCTAssertEqual(refused?.code, -32603, "\(String(describing: refused))")
        XCTAssertTrue(refused?.message.contains("it may be there after a restart") ?? false, "\(String(describing: refused))")
        XCTAssertTrue(refused?.message.contains("No space left on device") ?? false, "names why the take-back failed: \(String(describing: refused))")
        XCTAssertEqual(try shareURLs(h), ["https://youtu.be/first", "https://youtu.be/second"], "the share stays")
        faults.arm(fail: [])
        h.stop()
        try h.start(configure)
        defer { h.stop() }
        XCTAssertEqual(try shareURLs(h), ["https://youtu.be/first", "https://youtu.be/second"])
        XCTAssertEqual(try h.tool().call("broker.status")["pendingEvents"]?.intValue, 2, "its event re-created with it")
    }

    /// The event's commit fails once: the take-back is durable before the -32005, so nothing of
    /// the share is there, also after a restart.
    func testATakeBackIsDurableBeforeTheReply() throws {
        let faults = SyncFaults()
        let h = try start(faults)
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try sendOpen(ext, "https://youtu.be/first")
        faults.arm(fail: [2])
        let refused = rpcError { _ = try self.sendOpen(ext, "https://youtu.be/second") }
        XCTAssertEqual(refused?.code, -32005, "\(String(describing: refused))")
        XCTAssertGreaterThanOrEqual(faults.syncCalls, 3, "the take-back's fdatasync came before the reply")
        XCTAssertEqual(try shareURLs(h), ["https://youtu.be/first"])
        h.stop()
        // (counted once the broker has written everything: a commit started after the reply
        // went out may still be running when it is read)
        XCTAssertEqual(faults.syncCalls, 3, "the share, its event (failed) and the take-back: nothing else")
        try h.start { $0.storeFaults = faults.injector }
        defer { h.stop() }
        XCTAssertEqual(try shareURLs(h), ["https://youtu.be/first"])
        XCTAssertEqual(try h.tool().call("broker.status")["pendingEvents"]?.intValue, 1)
    }

    /// The PDF reader's extension, its group opened by a first share with `open` (the warmup's
    /// file is written off the loop), as a raw client for batches; and a PDF file to share by path.
    func pdfExtensionSendingBatches(_ h: BrokerHarness) throws -> (RawClient, String) {
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.example.pdfreader.share")
        _ = try ext.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "warmup.pdf"]], "open": true])
        let file = h.dir.path + "/report.pdf"
        _ = FileManager.default.createFile(atPath: file, contents: Data(pdfBytes))
        let raw = try RawClient(h.socket)
        raw.send(requestLine(id: "1", method: "hello", params: #"{"role":"extension","bundleID":"com.example.pdfreader.share"}"#))
        XCTAssertNotNil(raw.readJSON()?["result"])
        return (raw, file)
    }

    /// The same inside a batch whose share reads a file off the loop (the batch waits for its
    /// commit): the member is answered -32603 too.
    func testABatchMemberWhoseTakeBackFailsIsNotAnsweredNothingStored() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start { $0.storeFaults = faults.injector }
        defer { h.stop() }
        let (raw, file) = try pdfExtensionSendingBatches(h)
        faults.arm(fail: [2, 3])
        raw.send(#"[{"jsonrpc":"2.0","id":2,"method":"share.send","params":{"items":[{"path":"\#(file)"}],"open":true}},{"jsonrpc":"2.0","id":3,"method":"broker.status"}]"# + "\n")
        let reply = try XCTUnwrap(raw.readJSON(timeout: 10), "the batch's reply")
        let member = try XCTUnwrap(reply.arrayValue?.first { $0["id"] == 2 }, reply.compactText)
        XCTAssertEqual(member["error"]?["code"], -32603, member.compactText)
        // 3: the take-back (fails); 4: the share's event, queued again for the share that stays.
        XCTAssertTrue(waitUntil(timeout: 10) { faults.syncCalls == 4 }, "\(faults.syncCalls)")
    }

    /// A batch whose first member's commit is decided while a later member still reads its file
    /// off the loop (the batch waits, its first part decided at that commit).
    func testAWaitingBatchMemberWhoseTakeBackFailsIsNotAnsweredNothingStored() throws {
        let faults = SyncFaults()
        let gate = DispatchSemaphore(value: 0)
        let works = Box(0)
        let lock = NSLock()
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.offLoopGate = {
                lock.lock()
                works.value += 1
                let n = works.value
                lock.unlock()
                if n == 3 { gate.wait() }  // (the second member's file: the first one's is read, then written)
            }
        }
        defer { h.stop() }
        let (raw, file) = try pdfExtensionSendingBatches(h)
        faults.arm(fail: [2, 3])
        lock.lock()
        works.value = 0  // (the warmup's file was written off the loop too)
        lock.unlock()
        raw.send(
            #"[{"jsonrpc":"2.0","id":2,"method":"share.send","params":{"items":[{"path":"\#(file)"}],"open":true}},"#
                + #"{"jsonrpc":"2.0","id":3,"method":"share.send","params":{"items":[{"path":"\#(file)"}]}}]"# + "\n")
        XCTAssertTrue(waitUntil(timeout: 10) { faults.syncCalls >= 3 }, "the first member's commit and take-back, while the second waits (syncs \(faults.syncCalls), off-loop works \(works.value))")
        gate.signal()
        let reply = try XCTUnwrap(raw.readJSON(timeout: 10), "the batch's reply")
        let first = try XCTUnwrap(reply.arrayValue?.first { $0["id"] == 2 }, reply.compactText)
        XCTAssertEqual(first["error"]?["code"], -32603, first.compactText)
        let second = try XCTUnwrap(reply.arrayValue?.first { $0["id"] == 3 }, reply.compactText)
        XCTAssertNotNil(second["result"]?["shareID"], second.compactText)
    }

    /// Another request's share, stored in the group while the failed commit was in flight, goes
    /// to disk with the take-back; when that write fails and cannot be taken off the journal
    /// either, its answer is -32603 (its record was written and may remain), not -32005.
    func testARequestWrittenWithAFailedTakeBackIsNotAnsweredNothingStored() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0  // (the sync thread writes every commit: the loop goes on meanwhile)
        }
        defer { h.stop() }
        let (first, second) = try twoSharingExtensions(h)
        let watcher = try h.tool()  // (asks whether a request was run)
        // fdatasync 1: the share (passes); 2: its event (held on the sync thread, then fails);
        // 3: the take-back, with the second share (fails); no cut can be made meanwhile.
        faults.arm(fail: [2, 3], blockAt: 2, cutsFailFrom: 1)
        first.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/first"}],"open":true}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the commit waits in the event journal's fdatasync")
        // (the loop stores it meanwhile: it joins the next commit; waited for, not slept on)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, of: "com.mycompany.myapp.share", asking: watcher) {
                second.send(requestLine(id: "3", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/second"}]}"#))
            }, "the request was run while the commit is in flight")
        faults.permit.signal()
        let a = try XCTUnwrap(first.readJSON(timeout: 10))
        XCTAssertEqual(a["error"]?["code"], -32603, a.compactText)
        let b = try XCTUnwrap(second.readJSON(timeout: 10))
        XCTAssertEqual(b["error"]?["code"], -32603, "written with the take-back, which could not be taken off: \(b.compactText)")
        XCTAssertEqual(faults.syncCalls, 3)
    }

    /// (Review) The group's journal owes a cut it cannot make (a failed commit, the disk refusing
    /// the cut and the zeros), so its next commit fails before it is handed over (`beginCommit`).
    /// A share.send {open} then is answered -32005 ("nothing was stored"), and its share is not
    /// stored; its event must not be either (stores are written in order, a later one not when an
    /// earlier one failed): it was, and stayed pending, pointing at a share that does not exist.
    func testAnEventIsNotStoredWhenItsSharesStoreFailsBeforeItsCommitIsHandedOver() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0
        }
        defer { h.stop() }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/first"]], "open": true])
        let observer = try h.tool()
        XCTAssertEqual(try observer.call("broker.status")["pendingEvents"]?.intValue, 1)
        // fdatasync 1 (the group's journal) fails, and no cut can be made from then on.
        faults.arm(fail: [1], cutsFailFrom: 1)
        let owed = rpcError { _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/second"]]]) }
        XCTAssertEqual(owed?.code, -32603, "\(String(describing: owed))")
        let refused = rpcError { _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/third"]], "open": true]) }
        XCTAssertEqual(refused?.code, -32005, "\(String(describing: refused))")
        XCTAssertEqual(try observer.call("broker.status")["pendingShares"]?.intValue, 1)
        XCTAssertEqual(
            try observer.call("broker.status")["pendingEvents"]?.intValue, 1,
            "answered 'nothing was stored', but its event was committed")
    }
}
