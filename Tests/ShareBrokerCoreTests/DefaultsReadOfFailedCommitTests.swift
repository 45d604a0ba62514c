// Found by scripts/fault-injection --concurrent (sticky EIO, CI seed 1, N=161): a defaults.remove
// that found nothing to remove (removed: false) was answered at once from changes still being
// committed (a remove of the same key, in flight on the sync thread). That commit failed, the key
// came back, and the answer "removed: false, version 11" described a state that never was durable
// (the group was back at version 9, the key there). An answer built from uncommitted changes waits
// for their commit, also when they are in flight (not only pending), and is -32005 when it fails.

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

final class DefaultsReadOfFailedCommitTests: XCTestCase {
    let group = "group.com.mycompany.myapp"

    func testAnAnswerReadFromAChangeInFlightWaitsForItsCommit() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0  // (the sync thread writes every commit: the loop goes on meanwhile)
        }
        defer { h.stop() }
        let writer = try RawClient(h.socket)
        let reader = try RawClient(h.socket)
        for c in [writer, reader] {
            c.send(requestLine(id: "0", method: "hello", params: #"{"role":"app","bundleID":"com.mycompany.myapp"}"#))
            XCTAssertNotNil(c.readJSON()?["result"])
        }
        let watcher = try h.tool()  // (asks whether a request was run)
        writer.send(requestLine(id: "1", method: "defaults.set", params: #"{"group":"\#(group)","key":"k","value":1}"#))
        XCTAssertEqual(writer.readJSON()?["result"]?["version"], 1)
        // fdatasync 1: the remove's commit, held on the sync thread, then failing.
        faults.arm(fail: [1], blockAt: 1)
        writer.send(requestLine(id: "2", method: "defaults.remove", params: #"{"group":"\#(group)","key":"k"}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the remove's commit is in flight")
        // Meanwhile: what finds k gone, at version 2, reads the change in flight.
        // (run before the commit fails: waited for, not slept on)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(3, of: "com.mycompany.myapp", asking: watcher) {
                reader.send(requestLine(id: "3", method: "defaults.remove", params: #"{"group":"\#(group)","key":"k","ifVersion":2}"#))
                reader.send(requestLine(id: "4", method: "defaults.get", params: #"{"group":"\#(group)","key":"k"}"#))
                reader.send(requestLine(id: "5", method: "defaults.list", params: #"{"group":"\#(group)"}"#))
            }, "the reads were run while the commit is in flight")
        faults.permit.signal()
        XCTAssertEqual(writer.readJSON(timeout: 10)?["error"]?["code"], -32005)
        for id in ["3", "4", "5"] {
            let r = try XCTUnwrap(reader.readJSON(timeout: 10), id)
            XCTAssertEqual(r["id"]?.compactText, id)
            XCTAssertEqual(r["error"]?["code"], -32005, "\(id): built from a change whose commit failed: \(r.compactText)")
        }
        // The key is there, at version 1, as before the failed remove.
        reader.send(requestLine(id: "6", method: "defaults.get", params: #"{"group":"\#(group)","key":"k"}"#))
        let now = try XCTUnwrap(reader.readJSON(timeout: 10))
        XCTAssertEqual(now["result"]?["value"], 1, now.compactText)
        XCTAssertEqual(now["result"]?["version"], 1, now.compactText)
    }
}
