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
    func testAnEventWhoseWithdrawalCannotBeAppendedIsNotStoredAfterNothingWasStored() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.journalSpace = (reserveChunk: 1, freeingHeadroom: 0)  // (each record reserves its own bytes)
            $0.commitPacingLongestWait = 0  // (the sync thread writes every commit: the loop goes on meanwhile)
        }
        defer { h.stop() }
        let (first, second) = try twoSharingExtensions(h)
        let observer = try h.tool()
        XCTAssertEqual(try observer.call("broker.status")["pendingEvents"]?.intValue, 1)
        // fdatasync 1: the group's journal alone (a share without `open`), held on the sync
        // thread and then failing; meanwhile a share with `open` joins the next commit.
        faults.arm(fail: [1], blockAt: 1)
        first.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/first"}]}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the commit waits in the group journal's fdatasync")
        // (the loop stores it meanwhile: it joins the next commit; waited for, not slept on)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, of: "com.mycompany.myapp.share", asking: observer) {
                second.send(requestLine(id: "3", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/second"}],"open":true}"#))
            }, "the request was run while the commit is in flight")
        faults.reservesFail = true  // (the disk is full from now on)
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
}
