// share.send {open} stores a share in its group's journal and its event in the event journal:
// the share commits first and carries the event, so a failure or crash between the two commits
// never leaves an event without its share, and an answered share always gets its event.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

/// Lets the first `passing` sync calls through, then fails the next `failing` ones.
final class SyncCounter: @unchecked Sendable {  // guarded by `lock`
    let lock = NSLock()
    var armed = false
    var passing = 0
    var failing = 0
    func arm(passing: Int, failing: Int) {
        lock.lock()
        armed = true
        self.passing = passing
        self.failing = failing
        lock.unlock()
    }
    func disarm() {
        lock.lock()
        armed = false
        lock.unlock()
    }
    var injector: @Sendable (JournalFaultPoint) -> Int32? {
        { [self] p in
            guard p == .sync else { return nil }
            lock.lock()
            defer { lock.unlock() }
            guard armed else { return nil }
            if passing > 0 {
                passing -= 1
                return nil
            }
            if failing > 0 {
                failing -= 1
                return EIO
            }
            return nil
        }
    }
}

final class ShareAtomicityTests: XCTestCase {
    func testEventCommitFailureUndoesTheShare() throws {
        let counter = SyncCounter()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = counter.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/warmup"]]])  // opens the group
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(try app.call("share.complete", ["shareID": .string(try app.call("share.list")["shares"]!.arrayValue![0]["shareID"]!.stringValue!)])["completed"], true)
        counter.arm(passing: 1, failing: 1)  // the share journal's sync passes, the event journal's fails
        XCTAssertEqual(rpcCode { try ext.call("share.send", ["items": [["url": "https://youtu.be/x"]], "open": true]) }, -32005)
        counter.disarm()
        XCTAssertEqual(try app.call("share.list")["shares"]?.arrayValue?.count, 0, "the share was undone")
        XCTAssertEqual(try app.call("broker.status")["pendingEvents"]?.intValue, 0)
        h.stop()
        try h.start()
        let again = try h.connect()
        try again.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(try again.call("share.list")["shares"]?.arrayValue?.count, 0, "still absent after a restart")
        XCTAssertEqual(try again.call("broker.status")["pendingEvents"]?.intValue, 0, "and no event was re-created")
        h.stop()
    }

    func testCrashBetweenTheTwoCommitsReCreatesTheEvent() throws {
        let counter = SyncCounter()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = counter.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/warmup"]]])
        // The share's commit passes; the event's and the compensation's fail: on disk this is the
        // state a crash between the two commits leaves (the share with its announced event).
        counter.arm(passing: 1, failing: 2)
        // (-32603 since the take-back is committed before the answer: it failed, the share may be there)
        XCTAssertEqual(rpcCode { try ext.call("share.send", ["items": [["url": "https://youtu.be/crash"]], "open": true]) }, -32603)
        h.stop()
        try h.start()
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        let shares = try app.call("share.list")["shares"]?.arrayValue ?? []
        let crashed = shares.first { $0["items"]?.arrayValue?.first?["url"] == "https://youtu.be/crash" }
        let shareID = try XCTUnwrap(crashed?["shareID"]?.stringValue, "the durable share is there")
        XCTAssertEqual(try app.call("app.subscribe")["pending"]?.intValue, 1)
        let event = try XCTUnwrap(app.nextNotification(timeoutMillis: 5000)?.params)
        XCTAssertEqual(event["url"]?.stringValue, "deeplinkmyapp://open-from-share?share=\(shareID)", "its event was re-created")
        XCTAssertEqual(event["shareID"]?.stringValue, shareID)
        // Acked, it does not come back on the next restart.
        XCTAssertEqual(try app.call("app.ack", ["ids": [event["id"]!]])["acked"]?.intValue, 1)
        h.stop()
        try h.start()
        let again = try h.connect()
        try again.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(try again.call("broker.status")["pendingEvents"]?.intValue, 0)
        h.stop()
    }

    func testARefusedEventLeavesNoTraceOfTheShare() throws {
        // The event journal has no room left (its reservation is used up and the disk refuses
        // more): share.send {open} answers -32005 and its share is taken back without writing
        // anything: not the share's record, not a completion record (which a full share journal
        // could not hold either).
        let reserveFails = ReserveSwitch()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = reserveFails.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        let tool = try h.tool()
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/warmup"]]])  // opens the group
        reserveFails.on = true
        // Use up the event journal's reservation, from big URLs down to small ones.
        for size in [512 * 1024, 128 * 1024, 32 * 1024, 8 * 1024, 2048, 512, 128, 16] {
            let url = JSONValue.string("deeplinkmyapp://fill?p=" + String(repeating: "x", count: size))
            while rpcCode({ try tool.call("url.open", ["url": url]) }) == nil {}
        }
        let pending = try tool.call("broker.status")["pendingEvents"]?.intValue
        let journal = h.state + "/groups/group.com.mycompany.myapp/shares-000001.log"
        let before = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: journal)[.size] as? Int)
        XCTAssertEqual(rpcCode { try ext.call("share.send", ["items": [["url": "https://youtu.be/refused"]], "open": true]) }, -32005)
        let after = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: journal)[.size] as? Int)
        XCTAssertEqual(after, before, "nothing was written to the share journal")
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(try app.call("share.list")["shares"]?.arrayValue?.count, 1, "only the warm-up share")
        reserveFails.on = false
        h.stop()
        try h.start()
        let again = try h.connect()
        try again.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(try again.call("share.list")["shares"]?.arrayValue?.count, 1, "still only the warm-up share")
        XCTAssertEqual(try again.call("broker.status")["pendingEvents"]?.intValue, pending, "no event was re-created")
        h.stop()
    }
}

/// Fails every space reservation (ENOSPC) while `on`.
final class ReserveSwitch: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var value = false
    var on: Bool {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
    var injector: @Sendable (JournalFaultPoint) -> Int32? {
        { [self] p in p == .reserve && on ? ENOSPC : nil }
    }
}
