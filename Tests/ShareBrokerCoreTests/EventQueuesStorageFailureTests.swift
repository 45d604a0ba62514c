// The event queues when they cannot be opened at start (an I/O error on STATE/queues or one of
// its segments): the broker runs without them, says so (app.subscribe and the writes answer
// -32005, broker.status has store.available false), and opens them once it can, without a
// restart: at the next request that needs them, or on its own (apps whose events wait are then
// launched, and events shares announced but never written are re-created).

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

final class EventQueuesStorageFailureTests: XCTestCase {
    /// Makes the event journal unreadable: a directory where its next segment would be (reading
    /// it fails, as root too). Removing it (one rmdir: no moment where the broker could find
    /// another state) makes the journal readable again, as it was.
    func blockEventJournal(_ h: BrokerHarness) throws {
        try FileManager.default.createDirectory(atPath: h.state + "/queues/events-000099.log", withIntermediateDirectories: true)
    }

    func unblockEventJournal(_ h: BrokerHarness) {
        XCTAssertEqual(rmdir(h.state + "/queues/events-000099.log"), 0)
    }

    func status(_ c: BrokerConnection) throws -> JSONValue { try c.call("broker.status") }

    /// Events acknowledged before a restart are not hidden by a journal that cannot be read at
    /// start: app.subscribe is -32005 (not `pending: 0`), url.open and app.ack are -32005, and
    /// broker.status says the queues are unavailable; once the fault is gone, the next requests
    /// open them (no restart) and the events are delivered, acked and opened again as usual.
    func testEventQueuesThatCannotBeOpenedAtStartOpenOnceTheyCan() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start()
        var tool = try h.tool()
        var ids: [String] = []
        for i in 0..<2 { ids.append(try XCTUnwrap(try tool.call("url.open", ["url": .string("deeplinkmyapp://before/\(i)")])["eventID"]?.stringValue)) }
        h.stop()

        try blockEventJournal(h)
        try h.start()
        tool = try h.tool()
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        let refused = rpcError { _ = try app.call("app.subscribe") }
        XCTAssertEqual(refused?.code, -32005, "app.subscribe does not answer pending: 0 for a backlog it cannot read: \(String(describing: refused))")
        XCTAssertTrue(refused?.message.contains("event queues cannot be opened") ?? false, "\(String(describing: refused))")
        XCTAssertTrue(refused?.message.contains("events-000099.log") ?? false, "names what failed: \(String(describing: refused))")
        XCTAssertEqual(rpcError { _ = try tool.call("url.open", ["url": "deeplinkmyapp://during"]) }?.code, -32005)
        XCTAssertEqual(rpcError { _ = try app.call("app.ack", ["ids": .array(ids.map { .string($0) })]) }?.code, -32005)
        var st = try status(tool)
        XCTAssertEqual(st["store"]?["available"], false, st.compactText)
        XCTAssertTrue(st["store"]?["error"]?.stringValue?.contains("events-000099.log") ?? false, st.compactText)
        let failed = try XCTUnwrap(st["store"]?["failedOpens"]?.intValue, st.compactText)
        XCTAssertGreaterThanOrEqual(failed, 2, "at start, then again for the first request: \(st.compactText)")
        XCTAssertNotNil(st["store"]?["retryInSeconds"], st.compactText)
        let said = try runProcess(Products.shareclient, ["status", "--socket", h.socket], timeout: 20)
        XCTAssertTrue(said.out.contains("pending events  unknown (the event store is unavailable)"), said.out)
        XCTAssertTrue(said.out.contains("event store     UNAVAILABLE: "), said.out)

        // While it keeps failing, requests do not try it again each time (at most once a second).
        let began = Date()
        for _ in 0..<50 { _ = rpcError { _ = try tool.call("url.open", ["url": "deeplinkmyapp://during"]) } }
        st = try status(tool)
        let tries = (st["store"]?["failedOpens"]?.intValue ?? 0) - failed
        XCTAssertLessThanOrEqual(tries, Int(Date().timeIntervalSince(began)) + 2, "50 requests, \(tries) tries: \(st.compactText)")

        // The fault goes away: the app's next subscribe (a second later at the latest) gets the backlog.
        unblockEventJournal(h)
        var pending: JSONValue? = nil
        XCTAssertTrue(
            waitUntil(timeout: 10) {
                pending = try? app.call("app.subscribe")["pending"]
                if pending == nil { usleep(200_000) }
                return pending != nil
            }, "the queues were opened again")
        XCTAssertEqual(pending?.intValue, 2)
        var delivered: [String] = []
        while delivered.count < 2, let n = try app.nextNotification(timeoutMillis: 5000) {
            if n.method == "app.event", let id = n.params?["id"]?.stringValue { delivered.append(id) }
        }
        XCTAssertEqual(delivered, ids, "the events acknowledged before the restart")
        st = try status(tool)
        XCTAssertEqual(st["store"]?["available"], true, st.compactText)
        XCTAssertEqual(st["store"]?["recoveredEvents"]?.intValue, 2, st.compactText)
        XCTAssertEqual(st["pendingEvents"]?.intValue, 2, st.compactText)
        XCTAssertEqual(try app.call("app.ack", ["ids": .array(ids.map { .string($0) })])["acked"]?.intValue, 2)
        let opened = try tool.call("url.open", ["url": "deeplinkmyapp://after"])
        XCTAssertEqual(opened["delivered"], true, opened.compactText)
        XCTAssertEqual(app.nextNotificationID(), opened["eventID"]?.stringValue)
        h.stop()
    }

    /// Events waiting when the queues open late launch their app (after the start-up grace) with
    /// no request at all: the broker tries the queues again on its own.
    func testEventsWaitingInQueuesThatOpenLateLaunchTheirAppWithoutARequest() throws {
        let dir = TempDir()
        let pidFile = dir.path + "/pids"
        let manifest = { (launch: [String]?) -> String in
            var o: JSONObject = ["bundleID": "com.mycompany.myapp", "urlSchemes": ["deeplinkmyapp"]]
            if let launch { o["launch"] = .array(launch.map { .string($0) }) }
            return JSONValue.object(o).compactText
        }
        let h = BrokerHarness(manifests: ["myapp.json": manifest(nil)])
        try h.start()
        var tool = try h.tool()
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://waiting"])
        h.stop()
        // A launch command that records its pid, then takes and acks every event.
        h.dir.write(
            "state/apps/myapp.json",
            manifest(["/bin/sh", "-c", "echo $$ >> \(pidFile); exec \"\(Products.shareclient)\" listen --ack --timeout 20"]))
        let launched = { ((try? String(contentsOfFile: pidFile, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { Int32($0) } }
        defer { for pid in launched() { kill(pid, SIGKILL) } }
        try blockEventJournal(h)
        try h.start { $0.launchGraceAtStartSeconds = 0.2 }
        tool = try h.tool()
        XCTAssertEqual(try status(tool)["store"]?["available"], false)
        unblockEventJournal(h)
        // (broker.status does not open them: only the broker's own retry can)
        XCTAssertTrue(
            waitUntil(timeout: 20) { (try? status(tool))?["pendingEvents"]?.intValue == 0 && !launched().isEmpty },
            "opened on their own and the app launched: \((try? status(tool))?.compactText ?? "")")
        let st = try status(tool)
        XCTAssertEqual(st["store"]?["available"], true, st.compactText)
        XCTAssertEqual(st["store"]?["recoveredEvents"]?.intValue, 1, st.compactText)
        XCTAssertEqual(launched().count, 1)
        h.stop()
    }

    /// A share whose event a crash kept from being written gets it re-created when the queues
    /// open late, as at start, and it is durable (there after a restart until acked).
    func testAnEventAShareAnnouncedIsReCreatedWhenTheQueuesOpenLate() throws {
        let counter = SyncCounter()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.storeFaults = counter.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/warmup"]]])
        // The share's commit passes, the event's and the compensation's fail: what a crash
        // between the two commits leaves on disk.
        counter.arm(passing: 1, failing: 2)
        // (-32603 since the take-back is committed before the answer: it failed, the share may be there)
        XCTAssertEqual(rpcCode { try ext.call("share.send", ["items": [["url": "https://youtu.be/crash"]], "open": true]) }, -32603)
        h.stop()
        try blockEventJournal(h)
        try h.start()
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        let shares = try app.call("share.list")["shares"]?.arrayValue ?? []
        let crashed = shares.first { $0["items"]?.arrayValue?.first?["url"] == "https://youtu.be/crash" }
        let shareID = try XCTUnwrap(crashed?["shareID"]?.stringValue, "the durable share is there")
        XCTAssertEqual(rpcError { _ = try app.call("app.subscribe") }?.code, -32005)
        unblockEventJournal(h)
        var pending: JSONValue? = nil
        XCTAssertTrue(
            waitUntil(timeout: 10) {
                pending = try? app.call("app.subscribe")["pending"]
                if pending == nil { usleep(200_000) }
                return pending != nil
            })
        XCTAssertEqual(pending?.intValue, 1, "the announced event was re-created")
        let event = try XCTUnwrap(app.nextNotification(timeoutMillis: 5000)?.params)
        XCTAssertEqual(event["shareID"]?.stringValue, shareID)
        XCTAssertEqual(event["url"]?.stringValue, "deeplinkmyapp://open-from-share?share=\(shareID)")
        h.stop()
        try h.start()
        let again = try h.connect()
        try again.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(try again.call("app.subscribe")["pending"]?.intValue, 1, "written when it was re-created")
        let same = try XCTUnwrap(again.nextNotification(timeoutMillis: 5000)?.params)
        XCTAssertEqual(same["id"], event["id"])
        XCTAssertEqual(try again.call("app.ack", ["ids": [event["id"]!]])["acked"]?.intValue, 1)
        h.stop()
    }
}

extension BrokerConnection {
    /// The id of the next app.event this connection receives (nil after 5 s).
    fileprivate func nextNotificationID() -> String? {
        while let n = try? nextNotification(timeoutMillis: 5000) {
            if n.method == "app.event" { return n.params?["id"]?.stringValue }
        }
        return nil
    }
}
