// (Review) A share.send {open} handled while a commit of its group's journal is being written
// joins the next commit. When the commit in flight fails, the group undoes the pending share and
// the request is answered -32005 ("nothing was stored"); its event, pending in the event queues,
// is taken back by an ack (`Compensation.withdraw`). When that ack cannot be appended (no space:
// the journal's headroom for space-freeing records used up), the event stayed pending: it was
// committed with the next commit and delivered, announcing a share that does not exist, after
// "nothing was stored". (Now the event queues' next commit fails instead: rolled back, it is not
// stored.)

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

final class WithdrawnEventTests: XCTestCase {
    /// Two extension connections and an observer, with one event pending (the warm-up's); the
    /// first connection's share (no `open`) is in a commit held in its group journal's fdatasync,
    /// which fails once `faults.permit` is signalled; the second's share with `open` was run
    /// meanwhile (it joined the next commit). From then on the disk is full (`reservesFail`).
    func shareWithOpenBehindAFailingCommit(
        _ h: BrokerHarness, _ faults: SyncFaults, file: StaticString = #filePath, line: UInt = #line
    ) throws -> (RawClient, RawClient, BrokerConnection) {
        let (first, second) = try twoSharingExtensions(h)
        let observer = try h.tool()
        XCTAssertEqual(try observer.call("broker.status")["pendingEvents"]?.intValue, 1, file: file, line: line)
        // fdatasync 1: the group's journal alone (a share without `open`), held on the sync
        // thread and then failing; meanwhile a share with `open` joins the next commit.
        faults.arm(fail: [1], blockAt: 1)
        first.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/first"}]}"#))
        XCTAssertEqual(
            faults.entered.wait(timeout: .now() + 10), .success, "the commit waits in the group journal's fdatasync", file: file, line: line)
        // (the loop stores it meanwhile: it joins the next commit; waited for, not slept on)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, of: "com.mycompany.myapp.share", asking: observer) {
                second.send(requestLine(id: "3", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/second"}],"open":true}"#))
            }, "the request was run while the commit is in flight", file: file, line: line)
        faults.reservesFail = true  // (the disk is full from now on)
        return (first, second, observer)
    }

    func testAnEventWhoseWithdrawalCannotBeAppendedIsNotStoredAfterNothingWasStored() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.journalSpace = (reserveChunk: 1, freeingHeadroom: 0)  // (each record reserves its own bytes)
            $0.commitPacingLongestWait = 0  // (the sync thread writes every commit: the loop goes on meanwhile)
        }
        defer { h.stop() }
        let (first, second, observer) = try shareWithOpenBehindAFailingCommit(h, faults)
        faults.permit.signal()
        let a = try XCTUnwrap(first.readJSON(timeout: 10))
        XCTAssertEqual(a["error"]?["code"], -32005, a.compactText)
        // (b is released by the commit after the failed one, which the event queues failed to
        // begin (their turn rolled back) before it took b's reply: nothing is left to wait for)
        let b = try XCTUnwrap(second.readJSON(timeout: 10))
        faults.reservesFail = false
        let status = try observer.call("broker.status")
        XCTAssertEqual(status["pendingShares"]?.intValue, 1, status.compactText)
        XCTAssertEqual(b["error"]?["code"], -32005, b.compactText)
        XCTAssertEqual(
            status["pendingEvents"]?.intValue, 1,
            "answered 'nothing was stored' (its share is gone), but its event was stored: \(status.compactText)")
        faults.arm(fail: [])
        h.stop()
        try h.start()
        let again = try h.tool().call("broker.status")
        XCTAssertEqual(again["pendingEvents"]?.intValue, 1, "after a restart: \(again.compactText)")
    }

    /// (Review) The same withdrawal that cannot be appended, and an app subscribing in the time
    /// between the failed commit and the next commit's start (the one made to fail): the event,
    /// still pending in memory until that commit rolls it back but no longer among the turn's
    /// events, was sent in the subscriber's backlog, announcing a share that was answered
    /// "nothing was stored" (and is gone). Commit pacing can stretch that time over turns; here a
    /// test seam holds the next commit back. Now the event stays among the turn's events: the
    /// backlog leaves it out, and the failed commit delivers none of them.
    func testAnAppSubscribingBeforeTheFailingCommitStartsIsNotSentTheWithdrawnEvent() throws {
        let faults = SyncFaults()
        let hold = HoldFlag()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.journalSpace = (reserveChunk: 1, freeingHeadroom: 0)
            $0.commitPacingLongestWait = 0
            $0.holdCommit = { hold.value }
        }
        defer { h.stop() }
        let (first, second, observer) = try shareWithOpenBehindAFailingCommit(h, faults)
        hold.value = true  // (the commit after the failed one waits until the app has subscribed)
        faults.permit.signal()
        let a = try XCTUnwrap(first.readJSON(timeout: 10))
        XCTAssertEqual(a["error"]?["code"], -32005, a.compactText)
        // The app subscribes now, and asks something after: its backlog comes before that answer.
        let app = try RawClient(h.socket)
        app.send(requestLine(id: "1", method: "hello", params: #"{"role":"app","bundleID":"com.mycompany.myapp"}"#))
        XCTAssertNotNil(app.readJSON(timeout: 10)?["result"], "hello")
        app.send(requestLine(id: "2", method: "app.subscribe", params: "{}"))
        app.send(requestLine(id: "3", method: "broker.status", params: "{}"))
        var events: [JSONValue] = []
        var replies = 0
        while replies < 2, let m = app.readJSON(timeout: 10) {
            if m["method"]?.stringValue == "app.event" { events.append(m) } else { replies += 1 }
        }
        XCTAssertEqual(replies, 2, "both replies came")
        XCTAssertEqual(
            events.count, 1,
            "only the warm-up's event, not the one of the share answered 'nothing was stored': \(events.map(\.compactText))")
        // (the second share's request still waits for the held commit: the window was open)
        XCTAssertNil(second.readJSON(timeout: 0.05), "the second share is not answered before the next commit")
        hold.value = false
        _ = try observer.call("broker.status")  // (a turn ends: the held commit starts, and fails)
        let b = try XCTUnwrap(second.readJSON(timeout: 10))
        XCTAssertEqual(b["error"]?["code"], -32005, b.compactText)
        faults.reservesFail = false
        let status = try observer.call("broker.status")
        XCTAssertEqual(status["pendingEvents"]?.intValue, 1, status.compactText)
        // Nothing else comes to the app (the failed commit delivered none of its events).
        app.send(requestLine(id: "4", method: "broker.status", params: "{}"))
        let next = try XCTUnwrap(app.readJSON(timeout: 10))
        XCTAssertEqual(next["id"]?.intValue, 4, "no event before the answer: \(next.compactText)")
    }
}

/// A flag the test sets and the broker's loop reads (`BrokerConfiguration.holdCommit`).
final class HoldFlag: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var held = false
    var value: Bool {
        get { lock.withLock { held } }
        set { lock.withLock { held = newValue } }
    }
}
