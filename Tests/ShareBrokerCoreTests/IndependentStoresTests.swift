// One commit writes every store a turn changed (each group's journal, then the event queues). A
// store whose commit failed used to stop every store after it: one group's failing journal made
// the other groups' shares and every `url.open` of the same commit answer -32005. Now a store is
// not written only when a request of the commit changed it together with the failed one (a
// `share.send {open}`: its event is never durable without its share); the others are written.

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

/// A second app with a group of its own, whose share extension takes a web URL.
let otherURLApp = """
    {"bundleID": "com.other.reader", "urlSchemes": ["otherreader"], "appGroups": ["group.com.other.reader"],
     "extensions": [{"bundleID": "com.other.reader.share", "point": "com.apple.share-services",
                     "appGroups": ["group.com.other.reader"],
                     "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1}}]}
    """

final class IndependentStoresTests: XCTestCase {
    var faults = SyncFaults()
    var h = BrokerHarness()

    override func setUpWithError() throws {
        faults = SyncFaults()
        h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-other.json": otherURLApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0  // (the sync thread writes every commit: the loop goes on meanwhile)
        }
    }

    override func tearDown() { h.stop() }

    func extensionSession(_ bundleID: String) throws -> RawClient {
        let c = try h.rawSession(role: "extension", bundleID: bundleID)
        // (a warm-up share opens the group's journal, so the test's own commit is only writes)
        c.send(requestLine(id: "1", method: "share.send", params: #"{"items":[{"url":"https://example.com/warmup"}]}"#))
        XCTAssertNotNil(c.readJSON(timeout: 10)?["result"], "warm-up share of \(bundleID)")
        return c
    }

    /// Holds a commit (a `url.open` on `opener`, the event queues alone) in its fdatasync, runs
    /// `requests` meanwhile (they join the next commit, in the order given), then lets the held
    /// commit finish: the next one's fdatasync number `failing` fails (1 is the held commit's).
    func runBehindAHeldCommit(opener: RawClient, observer: BrokerConnection, failing: Int, _ requests: [(RawClient, String)]) throws {
        faults.arm(fail: [failing], blockAt: 1)
        opener.send(requestLine(id: "10", method: "url.open", params: #"{"url":"deeplinkmyapp://held"}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the commit waits in its fdatasync")
        for (client, line) in requests {
            XCTAssertTrue(h.sendAndWaitUntilRun(1, on: client, asking: observer) { client.send(line) }, "run while the commit is in flight: \(line)")
        }
        faults.permit.signal()
        let held = try XCTUnwrap(opener.readJSON(timeout: 10))
        XCTAssertNotNil(held["result"]?["eventID"], "the held commit was written: \(held.compactText)")
    }

    /// The URLs of My App's pending events, oldest first (subscribed, not acked).
    func pendingEventURLs() throws -> [String] {
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        let pending = try app.call("app.subscribe")["pending"]?.intValue ?? 0
        var urls: [String] = []
        for _ in 0..<pending {
            guard let e = try app.nextNotification(timeoutMillis: 5000) else { break }
            urls.append(e.params?["url"]?.stringValue ?? e.params?["webpageURL"]?.stringValue ?? "?")
        }
        return urls
    }

    func testAGroupsFailedCommitDoesNotFailTheURLOpensOfTheSameCommit() throws {
        let ext = try extensionSession("com.mycompany.myapp.share")
        let opener = try h.rawSession()
        let observer = try h.tool()
        // Commit 2: the group's journal (the share: fdatasync 2, failing), then the event queues
        // (the url.open: fdatasync 3).
        try runBehindAHeldCommit(
            opener: opener, observer: observer, failing: 2,
            [
                (ext, requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://example.com/lost"}]}"#)),
                (opener, requestLine(id: "11", method: "url.open", params: #"{"url":"deeplinkmyapp://kept"}"#)),
            ])
        let share = try XCTUnwrap(ext.readJSON(timeout: 10))
        XCTAssertEqual(share["error"]?["code"], -32005, share.compactText)
        let open = try XCTUnwrap(opener.readJSON(timeout: 10))
        XCTAssertNotNil(open["result"]?["eventID"], "an open of the event queues alone is not failed by a group's commit: \(open.compactText)")
        XCTAssertEqual(faults.syncCalls, 3, "the event queues were written after the group's failure")
        let status = try observer.call("broker.status")
        XCTAssertEqual(status["pendingShares"]?.intValue, 1, "the warm-up share alone: \(status.compactText)")
        XCTAssertEqual(try pendingEventURLs(), ["deeplinkmyapp://held", "deeplinkmyapp://kept"])
        // Durable as answered.
        faults.arm(fail: [])
        h.stop()
        try h.start()
        XCTAssertEqual(try pendingEventURLs(), ["deeplinkmyapp://held", "deeplinkmyapp://kept"])
        XCTAssertEqual(try h.tool().call("broker.status")["pendingShares"]?.intValue, 1)
    }

    func testAGroupsFailedCommitDoesNotFailAnotherGroupsShares() throws {
        let first = try extensionSession("com.mycompany.myapp.share")
        let second = try extensionSession("com.other.reader.share")
        let opener = try h.rawSession()
        let observer = try h.tool()
        // Commit 2: My App's group (fdatasync 2, failing), then the other app's (fdatasync 3).
        try runBehindAHeldCommit(
            opener: opener, observer: observer, failing: 2,
            [
                (first, requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://example.com/lost"}]}"#)),
                (second, requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://example.com/kept"}]}"#)),
            ])
        let lost = try XCTUnwrap(first.readJSON(timeout: 10))
        XCTAssertEqual(lost["error"]?["code"], -32005, lost.compactText)
        let kept = try XCTUnwrap(second.readJSON(timeout: 10))
        let keptID = try XCTUnwrap(kept["result"]?["shareID"]?.stringValue, "another group's share is not failed by the first's commit: \(kept.compactText)")
        faults.arm(fail: [])
        h.stop()
        try h.start()
        let reader = try h.connect()
        try reader.hello(role: "app", bundleID: "com.other.reader")
        let shares = try reader.call("share.list")["shares"]?.arrayValue ?? []
        XCTAssertTrue(shares.contains { $0["shareID"]?.stringValue == keptID }, "durable as answered: \(shares)")
        XCTAssertEqual(try h.tool().call("broker.status")["pendingShares"]?.intValue, 3, "two warm-ups and the kept share")
    }

    func testAnEventIsStillNotWrittenWhenTheShareItAnnouncesFailed() throws {
        let ext = try extensionSession("com.mycompany.myapp.share")
        let opener = try h.rawSession()
        let observer = try h.tool()
        // Commit 2: the group (the announced share: fdatasync 2, failing); the event queues hold
        // its event, so they are not written: the url.open that shares their commit fails too.
        try runBehindAHeldCommit(
            opener: opener, observer: observer, failing: 2,
            [
                (ext, requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://example.com/lost"}],"open":true}"#)),
                (opener, requestLine(id: "11", method: "url.open", params: #"{"url":"deeplinkmyapp://same-commit"}"#)),
            ])
        let share = try XCTUnwrap(ext.readJSON(timeout: 10))
        XCTAssertEqual(share["error"]?["code"], -32005, share.compactText)
        let open = try XCTUnwrap(opener.readJSON(timeout: 10))
        XCTAssertEqual(open["error"]?["code"], -32005, "its commit of the event queues held the failed share's event: \(open.compactText)")
        XCTAssertEqual(faults.syncCalls, 2, "the event queues were not written")
        XCTAssertEqual(try pendingEventURLs(), ["deeplinkmyapp://held"])
        faults.arm(fail: [])
        h.stop()
        try h.start()
        XCTAssertEqual(try pendingEventURLs(), ["deeplinkmyapp://held"], "no event announcing a share that is not there")
        XCTAssertEqual(try h.tool().call("broker.status")["pendingShares"]?.intValue, 1)
    }
}

/// (Review) `TurnLog.requestTouched` was reset only by the next request: a change made outside
/// any request (here the ack that withdraws the event of a share its group's failed commit took
/// back, `Compensation.withdraw`; likewise compaction's copies, take-backs, events queued again)
/// was linked to the stores the last request run had touched, here another group's. That
/// group's failure in the next commit then stopped the event queues: the url.open of that commit
/// answered -32005 although no request had changed both stores.
final class StaleTouchLinkTests: XCTestCase {
    /// Counts space reservations (each append reserves its own bytes: `journalSpace` below): the
    /// test knows the loop is inside a request once that request's append has reserved.
    final class Reserves: @unchecked Sendable {
        let lock = NSLock()
        var count = 0
        func add() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }

    func testAChangeOutsideARequestLinksNoStores() throws {
        let faults = SyncFaults()
        let reserves = Reserves()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-other.json": otherURLApp])
        try h.start {
            let inject = faults.injector
            $0.storeFaults = { p in
                if case .reserve = p { reserves.add() }
                return inject(p)
            }
            $0.journalSpace = (reserveChunk: 1, freeingHeadroom: 0)
            $0.commitPacingLongestWait = 0
        }
        defer { h.stop() }
        var warm: [RawClient] = []
        for bundle in ["com.mycompany.myapp.share", "com.other.reader.share"] {
            let c = try h.rawSession(role: "extension", bundleID: bundle)
            c.send(requestLine(id: "1", method: "share.send", params: #"{"items":[{"url":"https://example.com/warmup"}]}"#))
            XCTAssertNotNil(c.readJSON(timeout: 10)?["result"], "warm-up share of \(bundle)")
            warm.append(c)
        }
        let (first, second) = (warm[0], warm[1])
        let opener = try h.rawSession()
        opener.send(requestLine(id: "1", method: "url.open", params: #"{"url":"deeplinkmyapp://warmup"}"#))
        XCTAssertNotNil(opener.readJSON(timeout: 10)?["result"], "warm-up open (opens the event queues)")
        let observer = try h.tool()
        // Commit 1: My App's group alone (fdatasync 1, held, then failing).
        faults.arm(fail: [1, 2], blockAt: 1)
        first.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://example.com/lost"}]}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the commit waits in its fdatasync")
        // Commit 2: an announced share in the failing group (undone with it, its event withdrawn)
        // and a url.open; then, the last request run before commit 1 ends, a share of the other
        // group (fdatasync 2, failing).
        let ext = try h.rawSession(role: "extension", bundleID: "com.mycompany.myapp.share")
        XCTAssertTrue(h.sendAndWaitUntilRun(1, on: ext, asking: observer) {
            ext.send(requestLine(id: "3", method: "share.send", params: #"{"items":[{"url":"https://example.com/announced"}],"open":true}"#))
        })
        XCTAssertTrue(h.sendAndWaitUntilRun(1, on: opener, asking: observer) {
            opener.send(requestLine(id: "11", method: "url.open", params: #"{"url":"deeplinkmyapp://kept"}"#))
        })
        // (no request after it: the loop is in it once its record has reserved its space)
        let before = reserves.value
        second.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://example.com/other"}]}"#))
        XCTAssertTrue(waitUntil(timeout: 10) { reserves.value > before }, "the other group's share was run")
        faults.permit.signal()
        XCTAssertEqual(try XCTUnwrap(first.readJSON(timeout: 10))["error"]?["code"], -32005)
        XCTAssertEqual(try XCTUnwrap(ext.readJSON(timeout: 10))["error"]?["code"], -32005, "its share was undone with the failed commit")
        XCTAssertEqual(try XCTUnwrap(second.readJSON(timeout: 10))["error"]?["code"], -32005, "fdatasync 2 failed")
        let open = try XCTUnwrap(opener.readJSON(timeout: 10))
        XCTAssertNotNil(open["result"]?["eventID"], "no request changed the event queues with the other group: \(open.compactText)")
        XCTAssertEqual(faults.syncCalls, 3, "the event queues were written after the other group failed")
        XCTAssertEqual(try observer.call("broker.status")["pendingEvents"]?.intValue, 2, "the warm-up and the kept open; the withdrawn event is not there")
    }
}

/// (Review) A read that waits for the commit of a share not yet durable (`share.list`,
/// `share.get`, `share.read`) touches the share's group and, for a share announced by its event,
/// the event queues (`joinEventCommit`): `TurnLog.touch` took that for a request changing both
/// and linked them, so a failure of the group's journal stopped the event queues' commit too:
/// every `url.open` of that commit answered -32005 although no request had changed both stores.
final class ReadLinksNoStoresTests: XCTestCase {
    var faults = SyncFaults()
    var h = BrokerHarness()

    override func setUpWithError() throws {
        faults = SyncFaults()
        h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0
        }
    }

    override func tearDown() { h.stop() }

    func testAReadOfAnAnnouncedShareDoesNotTieTheURLOpensToItsGroup() throws {
        let ext = try h.rawSession(role: "extension", bundleID: "com.mycompany.myapp.share")
        ext.send(requestLine(id: "1", method: "share.send", params: #"{"items":[{"url":"https://example.com/warmup"}]}"#))
        XCTAssertNotNil(ext.readJSON(timeout: 10)?["result"], "warm-up share (opens the group's journal)")
        let opener = try h.rawSession()
        opener.send(requestLine(id: "1", method: "url.open", params: #"{"url":"deeplinkmyapp://warmup"}"#))
        XCTAssertNotNil(opener.readJSON(timeout: 10)?["result"], "warm-up open (opens the event queues)")
        let app = try h.rawSession(role: "app", bundleID: "com.mycompany.myapp")
        let observer = try h.tool()
        // Commit 1: an announced share (the group: fdatasync 1, held; the event queues: 2).
        faults.arm(fail: [3], blockAt: 1)
        ext.send(requestLine(id: "2", method: "share.send", params: #"{"items":[{"url":"https://example.com/announced"}],"open":true}"#))
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 10), .success, "the commit waits in the group's fdatasync")
        // Commit 2: a list that shows the announced share (it waits for both stores' commit), a
        // share without `open` (the group: fdatasync 3, failing) and a url.open (the queues).
        XCTAssertTrue(h.sendAndWaitUntilRun(1, on: app, asking: observer) {
            app.send(requestLine(id: "5", method: "share.list", params: "{}"))
        })
        XCTAssertTrue(h.sendAndWaitUntilRun(1, on: ext, asking: observer) {
            ext.send(requestLine(id: "3", method: "share.send", params: #"{"items":[{"url":"https://example.com/lost"}]}"#))
        })
        XCTAssertTrue(h.sendAndWaitUntilRun(1, on: opener, asking: observer) {
            opener.send(requestLine(id: "11", method: "url.open", params: #"{"url":"deeplinkmyapp://kept"}"#))
        })
        faults.permit.signal()
        let announced = try XCTUnwrap(ext.readJSON(timeout: 10))
        XCTAssertNotNil(announced["result"]?["eventID"], announced.compactText)
        let lost = try XCTUnwrap(ext.readJSON(timeout: 10))
        XCTAssertEqual(lost["error"]?["code"], -32005, lost.compactText)
        let list = try XCTUnwrap(app.readJSON(timeout: 10))
        XCTAssertEqual(list["error"]?["code"], -32005, "the list showed the lost share: \(list.compactText)")
        let open = try XCTUnwrap(opener.readJSON(timeout: 10))
        XCTAssertNotNil(open["result"]?["eventID"], "a read changed nothing: the url.open is not tied to the group's failure: \(open.compactText)")
        XCTAssertEqual(faults.syncCalls, 4, "the event queues were written after the group's failure")
    }
}
