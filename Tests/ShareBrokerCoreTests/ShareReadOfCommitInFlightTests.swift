// An answer that shows a share whose record is still being committed (share.list, share.get,
// share.read) waits for that commit and fails with it, as a defaults read does: an app is never
// shown a share that a failed commit then takes back.

import Foundation
import ShareClient
import ShareProtocol
import XCTest

@testable import ShareBrokerCore

final class ShareReadOfCommitInFlightTests: XCTestCase {
    let group = "group.com.example.pdf"

    /// The PDF reader's extension (its group opened by a warm-up share) and its app, raw clients.
    func start(_ faults: SyncFaults) throws -> (BrokerHarness, ext: RawClient, app: RawClient, warmup: String) {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0  // (the sync thread writes every commit: the loop goes on meanwhile)
        }
        let ext = try RawClient(h.socket)
        let app = try RawClient(h.socket)
        ext.send(requestLine(id: "0", method: "hello", params: #"{"role":"extension","bundleID":"com.example.pdfreader.share"}"#))
        XCTAssertNotNil(ext.readJSON()?["result"])
        app.send(requestLine(id: "0", method: "hello", params: #"{"role":"app","bundleID":"com.example.pdfreader"}"#))
        XCTAssertNotNil(app.readJSON()?["result"])
        ext.send(requestLine(id: "1", method: "share.send", params: #"{"items":[{"data":"\#(base64(pdfBytes))","name":"warmup.pdf"}]}"#))
        let warmup = try XCTUnwrap(ext.readJSON(timeout: 10)?["result"]?["shareID"]?.stringValue, "the warm-up share")
        return (h, ext, app, warmup)
    }

    /// Sends a PDF share whose journal commit is held on the sync thread (fdatasync 1 of the
    /// armed faults), and returns its id, read from the record already written to the journal.
    func sendHeldShare(_ h: BrokerHarness, _ ext: RawClient, _ faults: SyncFaults, warmup: String) throws -> String {
        ext.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"data":"\#(base64(pdfBytes))","name":"second.pdf"}]}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the share's commit is in flight")
        let dir = h.state + "/groups/" + group
        var ids = Set<String>()
        for name in try FileManager.default.contentsOfDirectory(atPath: dir) where name.hasPrefix("shares-") && name.hasSuffix(".log") {
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: dir + "/" + name)), as: UTF8.self)
            var rest = text[...]
            while let r = rest.range(of: #""id":"sh-"#) {
                ids.insert("sh-" + String(text[r.upperBound...].prefix(24)))
                rest = text[r.upperBound...]
            }
        }
        ids.remove(warmup)
        XCTAssertEqual(ids.count, 1, "\(ids)")
        return try XCTUnwrap(ids.first)
    }

    func testReadsOfAShareWhoseCommitFailsFailWithIt() throws {
        let faults = SyncFaults()
        let (h, ext, app, warmup) = try start(faults)
        defer { h.stop() }
        faults.arm(fail: [1], blockAt: 1)
        let held = try sendHeldShare(h, ext, faults, warmup: warmup)
        let watcher = try h.tool()  // (asks whether a request was run)
        let filesRead = try XCTUnwrap(watcher.call("broker.status")["fileWork"]?["finished"]?.intValue)
        // (run before the commit fails, the read's file work done too: waited for, not slept on;
        // a read whose file work ends after the failure is another case)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(3, of: "com.example.pdfreader", asking: watcher) {
                app.send(requestLine(id: "3", method: "share.list", params: #"{"group":"\#(group)"}"#))
                app.send(requestLine(id: "4", method: "share.get", params: #"{"shareID":"\#(held)"}"#))
                app.send(requestLine(id: "5", method: "share.read", params: #"{"shareID":"\#(held)","item":0}"#))
            }, "the reads were run while the commit is in flight")
        XCTAssertTrue(
            waitUntil(timeout: 10) { ((try? watcher.call("broker.status")["fileWork"]?["finished"]?.intValue) ?? 0) > filesRead },
            "the read's file work is done")
        faults.permit.signal()
        XCTAssertEqual(ext.readJSON(timeout: 10)?["error"]?["code"], -32005)
        for id in ["3", "4", "5"] {
            let r = try XCTUnwrap(app.readJSON(timeout: 10), id)
            XCTAssertEqual(r["id"]?.compactText, id)
            XCTAssertEqual(r["error"]?["code"], -32005, "\(id): showed a share whose commit failed: \(r.compactText)")
        }
        // Only the warm-up is there; the failed share is not found.
        app.send(requestLine(id: "6", method: "share.list", params: #"{"group":"\#(group)"}"#))
        let list = try XCTUnwrap(app.readJSON(timeout: 10)?["result"]?["shares"]?.arrayValue)
        XCTAssertEqual(list.map { $0["shareID"]?.stringValue }, [warmup])
        app.send(requestLine(id: "7", method: "share.get", params: #"{"shareID":"\#(held)"}"#))
        XCTAssertEqual(app.readJSON(timeout: 10)?["error"]?["code"], -32002)
    }

    func testReadsOfAShareBeingCommittedAreAnsweredOnceItIsDurable() throws {
        let faults = SyncFaults()
        let (h, ext, app, warmup) = try start(faults)
        defer { h.stop() }
        faults.arm(fail: [], blockAt: 1)
        let held = try sendHeldShare(h, ext, faults, warmup: warmup)
        app.send(requestLine(id: "3", method: "share.list", params: #"{"group":"\#(group)"}"#))
        app.send(requestLine(id: "4", method: "share.get", params: #"{"shareID":"\#(held)"}"#))
        app.send(requestLine(id: "5", method: "share.read", params: #"{"shareID":"\#(held)","item":0}"#))
        // (the warm-up, durable, is no reason to wait: another app connection gets it at once)
        let other = try RawClient(h.socket)
        other.send(requestLine(id: "0", method: "hello", params: #"{"role":"app","bundleID":"com.example.pdfreader"}"#))
        other.send(requestLine(id: "1", method: "share.get", params: #"{"shareID":"\#(warmup)"}"#))
        XCTAssertNotNil(other.readJSON(timeout: 10)?["result"])
        XCTAssertEqual(other.readJSON(timeout: 10)?["result"]?["shareID"]?.stringValue, warmup)
        XCTAssertNil(app.readJSON(timeout: 0.3), "nothing showing the share goes out before it is durable")
        faults.permit.signal()
        XCTAssertEqual(ext.readJSON(timeout: 10)?["result"]?["shareID"]?.stringValue, held)
        var answers: [String: JSONValue] = [:]
        for _ in 0..<3 {
            let r = try XCTUnwrap(app.readJSON(timeout: 10))
            answers[r["id"]?.compactText ?? "?"] = r
        }
        XCTAssertEqual(answers["3"]?["result"]?["shares"]?.arrayValue?.map { $0["shareID"]?.stringValue }, [warmup, held])
        XCTAssertEqual(answers["4"]?["result"]?["shareID"]?.stringValue, held)
        XCTAssertEqual(answers["5"]?["result"]?["data"]?.stringValue, base64(pdfBytes))
    }

    /// A list that leaves out a share whose completion is being committed fails with that commit.
    func testAListLeavingOutACompletionThatFailsFailsWithIt() throws {
        let faults = SyncFaults()
        let (h, _, app, warmup) = try start(faults)
        defer { h.stop() }
        faults.arm(fail: [1], blockAt: 1)
        app.send(requestLine(id: "2", method: "share.complete", params: #"{"shareID":"\#(warmup)"}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the completion's commit is in flight")
        let other = try RawClient(h.socket)
        other.send(requestLine(id: "0", method: "hello", params: #"{"role":"app","bundleID":"com.example.pdfreader"}"#))
        XCTAssertNotNil(other.readJSON(timeout: 10)?["result"])
        let watcher = try h.tool()  // (asks whether a request was run)
        // (run before the commit fails: waited for, not slept on)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, of: "com.example.pdfreader", asking: watcher) {
                other.send(requestLine(id: "1", method: "share.list", params: #"{"group":"\#(group)"}"#))
            }, "the list was run while the commit is in flight")
        faults.permit.signal()
        XCTAssertEqual(app.readJSON(timeout: 10)?["error"]?["code"], -32005)
        let r = try XCTUnwrap(other.readJSON(timeout: 10))
        XCTAssertEqual(r["error"]?["code"], -32005, "left out a share whose completion failed: \(r.compactText)")
        other.send(requestLine(id: "2", method: "share.list", params: #"{"group":"\#(group)"}"#))
        let list = try XCTUnwrap(other.readJSON(timeout: 10)?["result"]?["shares"]?.arrayValue)
        XCTAssertEqual(list.map { $0["shareID"]?.stringValue }, [warmup])
    }

    /// A share not found because its completion is being committed: share.get, share.read and
    /// share.complete of it wait for that commit; -32005 when it fails (the share is back), else
    /// -32002.
    func testNotFoundForACompletionInFlightWaitsForItsCommit() throws {
        for failing in [true, false] {
            let faults = SyncFaults()
            let (h, _, app, warmup) = try start(faults)
            defer { h.stop() }
            faults.arm(fail: failing ? [1] : [], blockAt: 1)
            app.send(requestLine(id: "2", method: "share.complete", params: #"{"shareID":"\#(warmup)"}"#))
            XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the completion's commit is in flight")
            let other = try RawClient(h.socket)
            other.send(requestLine(id: "0", method: "hello", params: #"{"role":"app","bundleID":"com.example.pdfreader"}"#))
            XCTAssertNotNil(other.readJSON(timeout: 10)?["result"])
            let watcher = try h.tool()  // (asks whether a request was run)
            // (run before the commit is decided: waited for, not slept on)
            XCTAssertTrue(
                h.sendAndWaitUntilRun(3, of: "com.example.pdfreader", asking: watcher) {
                    other.send(requestLine(id: "1", method: "share.get", params: #"{"shareID":"\#(warmup)"}"#))
                    other.send(requestLine(id: "2", method: "share.read", params: #"{"shareID":"\#(warmup)","item":0}"#))
                    other.send(requestLine(id: "3", method: "share.complete", params: #"{"shareID":"\#(warmup)"}"#))
                }, "the requests were run while the commit is in flight")
            XCTAssertNil(other.readJSON(timeout: 0.3), "not answered 'not found' before the completion is durable")
            faults.permit.signal()
            let completed = try XCTUnwrap(app.readJSON(timeout: 10))
            XCTAssertEqual(failing ? completed["error"]?["code"] : completed["result"]?["completed"], failing ? -32005 : true, completed.compactText)
            for id in ["1", "2", "3"] {
                let r = try XCTUnwrap(other.readJSON(timeout: 10), id)
                XCTAssertEqual(r["id"]?.compactText, id)
                XCTAssertEqual(r["error"]?["code"], failing ? -32005 : -32002, "\(id) (failing: \(failing)): \(r.compactText)")
            }
            // The share is there again after the failed completion, gone after the other.
            other.send(requestLine(id: "4", method: "share.get", params: #"{"shareID":"\#(warmup)"}"#))
            let now = try XCTUnwrap(other.readJSON(timeout: 10))
            XCTAssertEqual(failing ? now["result"]?["shareID"] : now["error"]?["code"], failing ? .string(warmup) : -32002, now.compactText)
        }
    }

    /// The share's own commit succeeds but its event's fails: the share is taken back (a
    /// completion, committed out of band). A list that showed it while its commit was in flight
    /// must not then be answered as a success (it lists a share that is gone).
    func testAListShowingAShareTakenBackBecauseItsEventFailedIsNotASuccess() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0
        }
        defer { h.stop() }
        let ext = try RawClient(h.socket)
        let app = try RawClient(h.socket)
        ext.send(requestLine(id: "0", method: "hello", params: #"{"role":"extension","bundleID":"com.mycompany.myapp.share"}"#))
        XCTAssertNotNil(ext.readJSON()?["result"])
        app.send(requestLine(id: "0", method: "hello", params: #"{"role":"app","bundleID":"com.mycompany.myapp"}"#))
        XCTAssertNotNil(app.readJSON()?["result"])
        ext.send(requestLine(id: "1", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/warmup"}],"open":true}"#))
        XCTAssertNotNil(ext.readJSON(timeout: 10)?["result"], "the warm-up share")
        // fdatasync 1: the group's journal (held); 2: the event journal (fails); 3: the take-back.
        faults.arm(fail: [2], blockAt: 1)
        ext.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://youtu.be/second"}],"open":true}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the share's commit is in flight")
        let watcher = try h.tool()  // (asks whether a request was run)
        XCTAssertTrue(
            h.sendAndWaitUntilRun(1, of: "com.mycompany.myapp", asking: watcher) {
                app.send(requestLine(id: "3", method: "share.list", params: #"{"group":"group.com.mycompany.myapp"}"#))
            }, "the list was run while the commit is in flight")
        faults.permit.signal()
        XCTAssertEqual(ext.readJSON(timeout: 10)?["error"]?["code"], -32005)
        let r = try XCTUnwrap(app.readJSON(timeout: 10))
        let urls = r["result"]?["shares"]?.arrayValue?.compactMap { $0["items"]?.arrayValue?.first?["url"]?.stringValue }
        XCTAssertFalse(urls?.contains("https://youtu.be/second") ?? false, "listed a share that was taken back: \(r.compactText)")
        app.send(requestLine(id: "4", method: "share.list", params: #"{"group":"group.com.mycompany.myapp"}"#))
        let now = try XCTUnwrap(app.readJSON(timeout: 10)?["result"]?["shares"]?.arrayValue)
        XCTAssertEqual(now.count, 1, "only the warm-up is there")
    }

    /// A share.read whose file work runs while the share's commit fails: the share was not
    /// completed but rolled back, -32005 (as when the read finishes before the failure).
    func testAReadOfAShareRolledBackWhileItIsReadFailsWithItsCommit() throws {
        final class Hold: @unchecked Sendable {
            let lock = NSLock()
            var on = false
            let entered = DispatchSemaphore(value: 0)
            let permit = DispatchSemaphore(value: 0)
            var gate: @Sendable () -> Void {
                { [self] in
                    guard lock.withLock({ on }) else { return }
                    entered.signal()
                    permit.wait()
                }
            }
        }
        let hold = Hold()
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0
            $0.offLoopGate = hold.gate
        }
        defer { h.stop() }
        let ext = try RawClient(h.socket)
        let app = try RawClient(h.socket)
        ext.send(requestLine(id: "0", method: "hello", params: #"{"role":"extension","bundleID":"com.example.pdfreader.share"}"#))
        XCTAssertNotNil(ext.readJSON()?["result"])
        app.send(requestLine(id: "0", method: "hello", params: #"{"role":"app","bundleID":"com.example.pdfreader"}"#))
        XCTAssertNotNil(app.readJSON()?["result"])
        ext.send(requestLine(id: "1", method: "share.send", params: #"{"items":[{"data":"\#(base64(pdfBytes))","name":"warmup.pdf"}]}"#))
        let warmup = try XCTUnwrap(ext.readJSON(timeout: 10)?["result"]?["shareID"]?.stringValue, "the warm-up share")
        faults.arm(fail: [1], blockAt: 1)
        let held = try sendHeldShare(h, ext, faults, warmup: warmup)
        hold.lock.withLock { hold.on = true }
        app.send(requestLine(id: "5", method: "share.read", params: #"{"shareID":"\#(held)","item":0}"#))
        XCTAssertEqual(hold.entered.wait(timeout: .now() + 10), .success, "the read's work is held")
        faults.permit.signal()
        XCTAssertEqual(ext.readJSON(timeout: 10)?["error"]?["code"], -32005)
        hold.lock.withLock { hold.on = false }
        hold.permit.signal()
        let r = try XCTUnwrap(app.readJSON(timeout: 10))
        XCTAssertEqual(r["error"]?["code"], -32005, r.compactText)
    }
}
