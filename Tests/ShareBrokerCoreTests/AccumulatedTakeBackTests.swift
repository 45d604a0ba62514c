// (Review) A share.send {open} handled while a commit is being written joins the next commit.
// When the event journal's commit in flight fails, its share is taken back by a completion; so is
// the in-flight commit's own share, whose completion is made durable at once (`compensate`), the
// accumulated share's completion going to disk in the same write. When that write fails and cannot
// be taken off the journal either, the accumulated request's records (its share, then its
// completion) were in it and may remain (a power cut keeping part of the write keeps the share):
// its answer must be -32603, as for any request written with a failed take-back, not -32005.

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

final class AccumulatedTakeBackTests: XCTestCase {
    func testAnAccumulatedShareWithOpenWrittenWithAFailedTakeBackIsNotAnsweredNothingStored() throws {
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
        // 3: the take-backs, after the second share (fails); no cut can be made meanwhile.
        faults.arm(fail: [2, 3], blockAt: 2, cutsFailFrom: 1)
        first.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/first"}],"open":true}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the commit waits in the event journal's fdatasync")
        // (the loop stores it meanwhile: it joins the next commit; waited for, not slept on)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, of: "com.mycompany.myapp.share", asking: watcher) {
                second.send(requestLine(id: "3", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/second"}],"open":true}"#))
            }, "the request was run while the commit is in flight")
        faults.permit.signal()
        let a = try XCTUnwrap(first.readJSON(timeout: 10))
        XCTAssertEqual(a["error"]?["code"], -32603, a.compactText)
        let b = try XCTUnwrap(second.readJSON(timeout: 10))
        XCTAssertEqual(
            b["error"]?["code"], -32603,
            "its share's record was in the failed write that could not be taken off: \(b.compactText)")
        XCTAssertEqual(faults.syncCalls, 3)
    }
}
