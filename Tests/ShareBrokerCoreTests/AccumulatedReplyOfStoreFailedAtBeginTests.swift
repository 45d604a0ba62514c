// (Review) A commit whose event journal failed to begin (it still owed the cut of an earlier
// failed commit, and the cut failed again) is written for the group alone; a share.send {open}
// of that commit gets its share taken back by a completion (`compensate`). When that completion
// cannot even be appended, the take-back failed: the replies of the requests that touched the
// event queues and the group become -32603 ("part of this request was stored and the rest could
// not be"). That mapping ran over the replies of the requests accumulated since (the next
// commit's) with the failed commit's stores, so a share.send {open} handled meanwhile, whose share
// and event were both stored (the event queues' failure to begin came before it and undid nothing
// of it), was answered -32603 although it fully succeeded.

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

final class AccumulatedReplyOfStoreFailedAtBeginTests: XCTestCase {
    func testAnAccumulatedRequestIsNotAnsweredAFailedTakeBackOfAStoreThatFailedBeforeItCame() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.journalSpace = (reserveChunk: 1, freeingHeadroom: 0)  // (each record reserves its own bytes)
            $0.commitPacingLongestWait = 0  // (the sync thread writes every commit: the loop goes on meanwhile)
        }
        defer { h.stop() }
        let (first, second) = try twoSharingExtensions(h)
        let watcher = try h.tool()  // (asks whether a request was run)
        // fdatasync 1: the group (the share); 2: the event journal (fails, and its cut too: it
        // owes it); 3: the share's take-back.
        faults.arm(fail: [2])
        faults.cutsFail = true
        first.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/owed"}],"open":true}"#))
        let owed = try XCTUnwrap(first.readJSON(timeout: 10))
        XCTAssertEqual(owed["error"]?["code"], -32603, owed.compactText)
        XCTAssertEqual(faults.syncCalls, 3)
        // The next commit: the event journal cannot begin it (the owed cut fails again), the
        // group's share is written alone (fdatasync 4, held on the sync thread).
        faults.block(at: 4)
        first.send(requestLine(id: "3", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/first"}],"open":true}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the commit waits in the group journal's fdatasync")
        // Meanwhile the disk lets the cut be made again; a share with `open` joins the next commit.
        faults.cutsFail = false
        // (the loop stores it meanwhile: it joins the next commit; waited for, not slept on)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, of: "com.mycompany.myapp.share", asking: watcher) {
                second.send(requestLine(id: "4", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/second"}],"open":true}"#))
            }, "the request was run while the commit is in flight")
        // The first share's take-back (a completion) cannot be appended.
        faults.reservesFail = true
        faults.permit.signal()
        let a = try XCTUnwrap(first.readJSON(timeout: 10))
        XCTAssertEqual(a["error"]?["code"], -32603, "its share stays, its event is gone: \(a.compactText)")
        let b = try XCTUnwrap(second.readJSON(timeout: 10))
        faults.reservesFail = false
        let observer = try h.tool()
        let status = try observer.call("broker.status")
        // warmup, first (could not be taken back), second (owed: its take-back was durable)
        XCTAssertEqual(status["pendingShares"]?.intValue, 3, status.compactText)
        // warmup, second
        XCTAssertEqual(status["pendingEvents"]?.intValue, 2, status.compactText)
        XCTAssertNotNil(
            b["result"]?["eventID"],
            "its share and its event were both stored (the event journal failed to begin the commit before it came): \(b.compactText)")
    }
}
