// (Review) A share.send {open} handled while a commit of its group's journal is being written
// joins the next commit: its share in the group (pending), its event in the event queues
// (pending). When the commit in flight fails, the group undoes everything not durable, the
// pending share included, and the request is answered -32005 ("nothing was stored"); but its
// event stayed in the event queues, was committed with the next commit and delivered: an event
// announcing a share that does not exist, after "nothing was stored".

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

final class AccumulatedEventOfFailedShareTests: XCTestCase {
    func testAnEventIsNotStoredWhenItsShareIsRolledBackByTheGroupsFailedCommitInFlight() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
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
        faults.permit.signal()
        let a = try XCTUnwrap(first.readJSON(timeout: 10))
        XCTAssertEqual(a["error"]?["code"], -32005, a.compactText)
        // (b is released by the commit after the failed one, durable by then: its event was
        // taken back before that commit took b's reply; nothing is left to wait for)
        let b = try XCTUnwrap(second.readJSON(timeout: 10))
        XCTAssertEqual(b["error"]?["code"], -32005, b.compactText)
        let status = try observer.call("broker.status")
        XCTAssertEqual(status["pendingShares"]?.intValue, 1, status.compactText)
        XCTAssertEqual(status["pendingEvents"]?.intValue, 1, "answered 'nothing was stored' (its share is gone), but its event was stored: \(status.compactText)")
        // And after a restart.
        faults.arm(fail: [])
        h.stop()
        try h.start()
        let again = try h.tool().call("broker.status")
        XCTAssertEqual(again["pendingEvents"]?.intValue, 1, again.compactText)
    }
}
