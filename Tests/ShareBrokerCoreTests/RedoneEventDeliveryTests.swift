// Review (bb3fc2a): a share whose take-back failed has its open event queued again
// (`Compensation.redo`, run inside `compensate`) and appended to `turnEvents`, to be delivered
// after the next commit. But `finishCommit` calls `failAccumulated` for the event queues right
// after `compensate`, and that empties `turnEvents`: the re-queued event is pending (and
// committed with the next commit) but never handed to the app's live subscriber; it gets it only
// when it subscribes again.

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

/// My App's shares (their first items' URLs) and the broker's pending events, after restarting the
/// broker on the same state first when `restart` (its store faults kept).
func sharesAndPendingEvents(_ h: BrokerHarness, _ faults: SyncFaults, restart: Bool) throws -> (urls: [String], pending: Int?) {
    if restart {
        h.stop()
        try h.start { $0.storeFaults = faults.injector }
    }
    let app = try h.connect()
    try app.hello(role: "app", bundleID: "com.mycompany.myapp")
    let shares = try XCTUnwrap(app.call("share.list")["shares"]?.arrayValue)
    let urls = shares.compactMap { $0["items"]?.arrayValue?.first?["url"]?.stringValue }
    return (urls, try h.tool().call("broker.status")["pendingEvents"]?.intValue)
}

final class RedoneEventDeliveryTests: XCTestCase {
    func testALiveSubscriberGetsTheEventQueuedAgain() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = faults.injector }
        defer { h.stop() }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/first"]], "open": true])
        let app = try h.rawSession(role: "app", bundleID: "com.mycompany.myapp")
        app.send(#"{"jsonrpc":"2.0","id":1,"method":"app.subscribe"}"# + "\n")
        var seen: [String] = []
        func drain(_ timeout: Double) {
            while let m = app.readJSON(timeout: timeout) {
                if m["method"]?.stringValue == "app.event", let id = m["params"]?["id"]?.stringValue { seen.append(id) }
            }
        }
        drain(1)
        XCTAssertEqual(seen.count, 1, "the first share's event")
        // fdatasync 1: the share; 2: the event journal (fails); 3: the take-back (fails).
        faults.arm(fail: [2, 3])
        let refused = rpcError { _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/second"]], "open": true]) }
        XCTAssertEqual(refused?.code, -32603, "\(String(describing: refused))")
        faults.arm(fail: [])
        let tool = try h.tool()
        let later = try tool.call("url.open", ["url": "deeplinkmyapp://later"])["eventID"]?.stringValue
        drain(2)
        let pending = try tool.call("broker.status")["pendingEvents"]?.intValue
        XCTAssertEqual(pending, 3, "the first share's, the second share's (queued again), the url.open's")
        XCTAssertTrue(seen.contains(try XCTUnwrap(later)), "\(seen)")
        XCTAssertEqual(seen.count, 3, "every pending event reaches the live subscriber once: \(seen)")
        XCTAssertEqual(Set(seen).count, seen.count, "no event twice: \(seen)")
    }

    /// The event queued again fails with the next commit of the event queues too: nothing takes
    /// it back nor queues it again (it has no compensation of its own), so once a later event is
    /// committed the share stays, after a restart too, without its event (what bb3fc2a fixed for
    /// one failure, back with two).
    func testAShareLeftByAFailedTakeBackKeepsItsEventWhenTheNextEventCommitFailsToo() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = faults.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/first"]], "open": true])
        faults.arm(fail: [2, 3])
        let refused = rpcError { _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/second"]], "open": true]) }
        XCTAssertEqual(refused?.code, -32603, "\(String(describing: refused))")
        // 4: the event queued again, committed at the end of the turn that answered (the next
        // fault must not hit it instead of the url.open's on a loaded machine).
        XCTAssertTrue(waitUntil(timeout: 10) { faults.syncCalls == 4 }, "\(faults.syncCalls)")
        // The next commit of the event queues (the url.open's) fails.
        faults.arm(fail: [1])
        let tool = try h.tool()
        XCTAssertEqual(rpcError { _ = try tool.call("url.open", ["url": "deeplinkmyapp://failing"]) }?.code, -32005)
        faults.arm(fail: [])
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://later"])
        for restart in [false, true] {
            let (urls, pending) = try sharesAndPendingEvents(h, faults, restart: restart)
            XCTAssertEqual(pending, urls.count + 1, "one open event per share there, plus the url.open's: shares \(urls) (restart: \(restart))")
        }
        h.stop()
    }

    /// The commit of the event queued again (its own, at the end of the turn that answered) fails
    /// too: its compensation takes the share back, so no share is left without its event and no
    /// event without its share.
    func testAShareWhoseEventQueuedAgainFailsToCommitIsTakenBack() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = faults.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/first"]], "open": true])
        // 1: the share; 2: the event journal (fails); 3: the take-back (fails); 4: the event
        // queued again (fails); 5: the share taken back by the event's own compensation.
        faults.arm(fail: [2, 3, 4])
        let refused = rpcError { _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/second"]], "open": true]) }
        XCTAssertEqual(refused?.code, -32603, "\(String(describing: refused))")
        XCTAssertTrue(waitUntil(timeout: 10) { faults.syncCalls == 5 }, "\(faults.syncCalls)")
        faults.arm(fail: [])
        let tool = try h.tool()
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://later"])
        for restart in [false, true] {
            let (urls, pending) = try sharesAndPendingEvents(h, faults, restart: restart)
            XCTAssertEqual(urls, ["https://youtu.be/first"], "restart: \(restart)")
            XCTAssertEqual(pending, 2, "the first share's event and the url.open's (restart: \(restart))")
        }
        h.stop()
    }

    /// The take-back's commit fails and its records cannot be cut off (a cut owed): the completion
    /// may be replayed at the next start, the share then gone. Its event, queued again, is
    /// committed all the same and announces, after a restart, a share that is not there.
    func testNoEventIsQueuedAgainForAShareWhoseTakeBackMayBeReplayed() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = faults.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/first"]], "open": true])
        // fdatasync 1: the share; 2: the event journal (fails); 3: the take-back (fails), whose
        // records cannot be cut off, now or later.
        faults.arm(fail: [2, 3], cutsFailFrom: 3)
        let refused = rpcError { _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/second"]], "open": true]) }
        XCTAssertEqual(refused?.code, -32603, "\(String(describing: refused))")
        let tool = try h.tool()
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://later"])
        let live = try tool.call("broker.status")["pendingEvents"]?.intValue
        h.stop()
        try h.start { $0.storeFaults = faults.injector }
        defer { h.stop() }
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        let shares = try XCTUnwrap(app.call("share.list")["shares"]?.arrayValue)
        let urls = shares.compactMap { $0["items"]?.arrayValue?.first?["url"]?.stringValue }
        let pending = try h.tool().call("broker.status")["pendingEvents"]?.intValue
        XCTAssertEqual(
            pending, urls.count + 1,
            "one open event per share there plus the url.open's: shares \(urls), pending \(String(describing: pending)) (before the restart: \(String(describing: live)))")
    }

    /// The other way: the cut owed is made later (the group's next commit makes it first): the
    /// share stays, and its event is queued then, and there after a restart.
    func testTheEventOfAShareWhoseTakeBackIsCutOffLaterIsQueuedThen() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = faults.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/first"]], "open": true])
        faults.arm(fail: [2, 3], cutsFailFrom: 3)
        let refused = rpcError { _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/second"]], "open": true]) }
        XCTAssertEqual(refused?.code, -32603, "\(String(describing: refused))")
        faults.arm(fail: [])
        let tool = try h.tool()
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://later"])
        // The group's next commit makes the cut owed.
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/third"]]])
        for restart in [false, true] {
            if restart {
                h.stop()
                try h.start { $0.storeFaults = faults.injector }
            }
            let app = try h.connect()
            try app.hello(role: "app", bundleID: "com.mycompany.myapp")
            let shares = try XCTUnwrap(app.call("share.list")["shares"]?.arrayValue)
            let urls = shares.compactMap { $0["items"]?.arrayValue?.first?["url"]?.stringValue }
            XCTAssertEqual(urls, ["https://youtu.be/first", "https://youtu.be/second", "https://youtu.be/third"])
            XCTAssertTrue(
                waitUntil(timeout: 5) { (try? h.tool().call("broker.status")["pendingEvents"]?.intValue) == 3 },
                "the two shares' open events and the url.open's (restart: \(restart)): \(String(describing: try? h.tool().call("broker.status")["pendingEvents"]))")
        }
        h.stop()
    }

    /// The cut owed is made at the stop (the group commits nothing more before): the event is
    /// written then, and there after the restart.
    func testTheEventOfAShareWhoseTakeBackIsCutOffAtTheStopIsWrittenThen() throws {
        let faults = SyncFaults()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = faults.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/first"]], "open": true])
        faults.arm(fail: [2, 3], cutsFailFrom: 3)
        let refused = rpcError { _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/second"]], "open": true]) }
        XCTAssertEqual(refused?.code, -32603, "\(String(describing: refused))")
        faults.arm(fail: [])
        let tool = try h.tool()
        let later = try tool.call("url.open", ["url": "deeplinkmyapp://later"])["eventID"]?.stringValue
        XCTAssertNotEqual(later, "ev-2", "the failed share's event id is not given to another event")
        h.stop()
        try h.start { $0.storeFaults = faults.injector }
        defer { h.stop() }
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        let shares = try XCTUnwrap(app.call("share.list")["shares"]?.arrayValue)
        let urls = shares.compactMap { $0["items"]?.arrayValue?.first?["url"]?.stringValue }
        XCTAssertEqual(urls, ["https://youtu.be/first", "https://youtu.be/second"])
        XCTAssertEqual(try h.tool().call("broker.status")["pendingEvents"]?.intValue, 3)
    }
}
