// (Review) When a commit's event journal fails, the share.send {open} of that commit has its share
// taken back by a completion that `compensate` commits at once (`commitTurn` of the group). That
// write carries everything else pending in the group: the shares of the requests accumulated
// meanwhile (the next commit's), durable from then on. Their replies still waited for the next
// commit, and were decided by it: when the group's part of it failed (a request run after the
// take-back gave it something to write), they were answered -32005 ("nothing was stored") though
// their shares were durable, and there after a restart. (Now a request that changed nothing else
// is answered success once that write is durable.)

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

final class TakeBackCommitsAccumulatedTests: XCTestCase {
    func testARequestWrittenWithATakeBackIsNotAnsweredNothingStoredByTheNextCommit() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0  // (the sync thread writes every commit: the loop goes on meanwhile)
            $0.maxRequestsInFlight = 1  // (the third client's second request waits for its first's reply)
        }
        defer { h.stop() }
        let second = try RawClient(h.socket)
        let third = try RawClient(h.socket)
        for c in [second, third] {
            c.send(requestLine(id: "0", method: "hello", params: #"{"role":"extension","bundleID":"com.mycompany.myapp.share"}"#))
            XCTAssertNotNil(c.readJSON()?["result"])
        }
        let watcher = try h.tool()  // (asks whether a request was run)
        third.send(requestLine(id: "1", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/warmup"}],"open":true}"#))
        XCTAssertNotNil(third.readJSON()?["result"])
        // fdatasync 1: the group (a share with `open`); 2: its event (held, then fails); 3: the
        // take-back, with the second client's share accumulated meanwhile; 4: the next commit,
        // the third client's next share (fails).
        faults.arm(fail: [2, 4], blockAt: 2)
        third.send(
            requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/first"}],"open":true}"#)
                + requestLine(id: "3", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/third"}]}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the commit waits in the event journal's fdatasync")
        // (the loop stores it meanwhile: it joins the next commit; waited for, not slept on)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, of: "com.mycompany.myapp.share", asking: watcher) {
                second.send(requestLine(id: "4", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/second"}]}"#))
            }, "the request was run while the commit is in flight")
        faults.permit.signal()
        let a = try XCTUnwrap(third.readJSON(timeout: 10))
        XCTAssertEqual(a["error"]?["code"], -32005, a.compactText)
        let c = try XCTUnwrap(third.readJSON(timeout: 10))
        XCTAssertEqual(c["error"]?["code"], -32005, c.compactText)
        let b = try XCTUnwrap(second.readJSON(timeout: 10))
        let shares = try XCTUnwrap(h.tool().call("broker.status")["pendingShares"]?.intValue)
        h.stop()
        // (counted once the broker has written everything: a commit started after a reply went
        // out may still be running when it is read)
        XCTAssertEqual(faults.syncCalls, 4, "the four commits above: nothing else")
        try h.start()
        let after = try XCTUnwrap(h.tool().call("broker.status")["pendingShares"]?.intValue)
        XCTAssertEqual(shares, after)
        XCTAssertNotNil(b["result"]?["shareID"], "its share is durable (written with the take-back): \(b.compactText)")
        XCTAssertEqual(after, 2, "the warmup's share and the second client's")
    }
}
