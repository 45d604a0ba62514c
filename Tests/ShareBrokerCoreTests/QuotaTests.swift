// Quotas: connections per user id and pending events per app fail cleanly, and hitting one
// never affects other apps or other connections.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

final class QuotaTests: XCTestCase {
    /// Two apps, com.a (scheme appa) and com.b (appb).
    static let twoApps = [
        "a.json": #"{"bundleID": "com.a", "urlSchemes": ["appa"]}"#,
        "b.json": #"{"bundleID": "com.b", "urlSchemes": ["appb"]}"#,
    ]

    /// A batch of more members than --max-batch is refused whole: one -32600 (id null), none of
    /// it run, the connection still usable. (Two million `1`s in 4 MiB asked for two million
    /// error replies: 230 MB of output and seconds of the loop.) Up to the limit, a batch runs.
    func testBatchesOverTheMemberLimitAreRefusedWhole() throws {
        let h = BrokerHarness()
        try h.start { $0.maxBatchMembers = 3 }
        defer { h.stop() }
        let c = try RawClient(h.socket)
        c.send("[" + (1...4).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"broker.status"}"# }.joined(separator: ",") + "]\n")
        let refused = try XCTUnwrap(c.readJSON())
        XCTAssertEqual(refused["id"], .null)
        XCTAssertEqual(refused["error"]?["code"], -32600)
        XCTAssertTrue(
            refused["error"]?["message"]?.stringValue?.contains("a batch of more than 3 members is over the limit (--max-batch); none of it was run")
                ?? false, refused.compactText)
        c.send("[" + (1...3).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"broker.status"}"# }.joined(separator: ",") + "]\n")
        XCTAssertEqual(c.readJSON()?.arrayValue?.compactMap { $0["id"]?.intValue }, [1, 2, 3])
        // The default: 10,000.
        let d = BrokerHarness()
        try d.start()
        defer { d.stop() }
        let big = try RawClient(d.socket)
        big.send("[" + Array(repeating: "1", count: 10_001).joined(separator: ",") + "]\n")
        XCTAssertTrue(big.readJSON(timeout: 10)?["error"]?["message"]?.stringValue?.contains("a batch of more than 10000 members") ?? false)
        big.send("[" + Array(repeating: "1", count: 10_000).joined(separator: ",") + "]\n")
        XCTAssertEqual(big.readJSON(timeout: 10)?.arrayValue?.count, 10_000)
    }

    func testConnectionsPerUserAreCapped() throws {
        let h = BrokerHarness()
        try h.start { $0.maxConnectionsPerUID = 3 }
        let a = try h.tool(), b = try h.tool()
        var c: BrokerConnection? = try h.tool()
        let refused = try RawClient(h.socket)
        let reply = refused.readJSON()
        XCTAssertEqual(reply?["error"]?["code"]?.intValue, -32001)
        XCTAssertTrue(reply?["error"]?["message"]?.stringValue?.contains("per-user limit") ?? false, "\(String(describing: reply))")
        XCTAssertTrue(refused.waitForClose())
        XCTAssertEqual(try a.call("broker.status")["connections"]?.intValue, 3, "the others are unaffected")
        _ = b
        XCTAssertNotNil(c)
        c = nil  // closes one: a new connection is accepted again
        XCTAssertTrue(waitUntil {
            (try? BrokerConnection(socketPath: h.socket).call("broker.status", timeoutMillis: 500)) != nil
        })
        h.stop()
    }

    func testPendingEventsPerAppAreCapped() throws {
        let h = BrokerHarness(manifests: Self.twoApps)
        try h.start { $0.maxPendingEventsPerApp = 2 }
        let tool = try h.tool()
        let first = try tool.call("url.open", ["url": "appa://1"])["eventID"]!
        _ = try tool.call("url.open", ["url": "appa://2"])
        let e = rpcError { try tool.call("url.open", ["url": "appa://3"]) }
        XCTAssertEqual(e?.code, -32005)
        XCTAssertTrue(e?.message.contains("quota") ?? false, "\(String(describing: e))")
        XCTAssertNotNil(try tool.call("url.open", ["url": "appb://1"])["eventID"], "another app is not affected")
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.a")
        XCTAssertEqual(try app.call("app.ack", ["ids": [first]])["acked"]?.intValue, 1)
        XCTAssertNotNil(try tool.call("url.open", ["url": "appa://4"])["eventID"], "room again after an ack")
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 3)
        h.stop()
    }

    func testPendingEventBytesPerAppAreCapped() throws {
        let h = BrokerHarness(manifests: Self.twoApps)
        try h.start { $0.maxPendingEventBytesPerApp = 8192 }
        let tool = try h.tool()
        let long = "appa://x?" + String(repeating: "q", count: 3000)
        var ids: [JSONValue] = []
        var refused: RPCError? = nil
        for _ in 0..<10 where refused == nil {
            refused = rpcError { ids.append(try tool.call("url.open", ["url": .string(long)])["eventID"]!) }
        }
        // (the new event counts: the quota is never passed, not even by one event)
        XCTAssertEqual(ids.count, 2, "2 events of ~3 KB fit under 8 KiB, a third would pass it")
        XCTAssertEqual(refused?.code, -32005)
        XCTAssertTrue(refused?.message.contains("and this one about 3264 more (its quota: 8192)") ?? false, "\(String(describing: refused))")
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 2, "nothing stored for the refused one")
        // One event larger than the whole quota is refused too (it was stored when the app had room).
        let huge = "appa://x?" + String(repeating: "h", count: 9000)
        let app2 = try h.connect()
        try app2.hello(role: "app", bundleID: "com.a")
        _ = try app2.call("app.ack", ["ids": .array(ids)])
        XCTAssertEqual(rpcError { try tool.call("url.open", ["url": .string(huge)]) }?.code, -32005)
        ids = [try tool.call("url.open", ["url": .string(long)])["eventID"]!, try tool.call("url.open", ["url": .string(long)])["eventID"]!]
        XCTAssertNotNil(try tool.call("url.open", ["url": "appb://fine"])["eventID"], "another app is unaffected")
        // Acking frees the app's quota, also across a restart (the bytes are recounted at replay).
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.a")
        _ = try app.call("app.ack", ["ids": .array([ids[0]])])
        XCTAssertNotNil(try tool.call("url.open", ["url": .string(long)])["eventID"])
        XCTAssertEqual(rpcError { try tool.call("url.open", ["url": .string(long)]) }?.code, -32005)
        h.stop()
        try h.start { $0.maxPendingEventBytesPerApp = 8192 }
        let again = try h.tool()
        XCTAssertEqual(rpcError { try again.call("url.open", ["url": .string(long)]) }?.code, -32005, "still full after a restart")
        h.stop()
    }

    /// The in-flight quota is back-pressure, never an error: requests read past it wait, in
    /// order, and run once replies have gone out. While a commit is held, only the quota's worth
    /// of what the client sent has run.
    func testRequestsInFlightPerConnectionAreCapped() throws {
        let faults = SyncBlocker()
        let h = BrokerHarness(manifests: ["a.json": #"{"bundleID": "com.a", "urlSchemes": ["appa"]}"#])
        try h.start {
            $0.maxRequestsInFlight = 3
            $0.storeFaults = faults.injector
            $0.commitPacingLongestWait = 0  // (commits on the sync thread: the loop stays free while one is held)
        }
        defer { h.stop() }
        let flooder = try h.rawSession()
        let observer = try h.rawSession()
        func requestsRun() -> Int? {
            observer.send(rpcRequest(99, "broker.status", [:]).compactText + "\n")
            return observer.readJSON()?["result"]?["requests"]?.intValue
        }
        let before = try XCTUnwrap(requestsRun())
        // Ten durable requests in one write: all are read in one turn, three fit the quota.
        faults.lock.withLock { faults.blockNext = true }
        var burst = ""
        for i in 1...10 { burst += rpcRequest(i, "url.open", ["url": .string("appa://\(i)")]).compactText + "\n" }
        flooder.send(burst)
        XCTAssertEqual(faults.entered.wait(timeout: .now() + 5), .success, "the first commit is held")
        XCTAssertEqual(requestsRun(), before + 1 + 3, "only three of the ten ran (the status request counts itself)")
        XCTAssertNil(flooder.readJSON(timeout: 0.2), "nothing is answered before its commit")
        faults.permit.signal()
        var answered: [Int] = []
        for _ in 1...10 {
            guard let r = flooder.readJSON(timeout: 10), let id = r["id"]?.intValue else { return XCTFail("missing reply after \(answered)") }
            XCTAssertNotNil(r["result"]?["eventID"], "\(r)")
            answered.append(id)
        }
        XCTAssertEqual(answered, Array(1...10), "every request answered, in order")
        let status = try h.tool().call("broker.status")
        XCTAssertEqual(status["pendingEvents"]?.intValue, 10)
        XCTAssertEqual(status["rejectedOverQuota"]?.intValue, 0)
        // A batch is run whole, past the quota, and the connection goes on after it.
        var batch: [JSONValue] = []
        for i in 20..<25 { batch.append(rpcRequest(i, "url.open", ["url": .string("appa://\(i)")])) }
        flooder.send(JSONValue.array(batch).compactText + "\n" + rpcRequest(30, "url.open", ["url": "appa://30"]).compactText + "\n")
        guard case .array(let replies)? = flooder.readJSON(timeout: 10) else { return XCTFail("no batch reply") }
        XCTAssertEqual(replies.compactMap { $0["result"]?["eventID"] }.count, 5, "\(replies)")
        XCTAssertEqual(flooder.readJSON(timeout: 10)?["id"], 30)
        XCTAssertEqual(try h.tool().call("broker.status")["pendingEvents"]?.intValue, 16)
    }

    /// A client that pipelines thousands of requests past the default quota in one write, and
    /// reads the answers meanwhile, gets every one of them; other clients are served meanwhile.
    func testThousandsOfPipelinedRequestsAreAllAnswered() throws {
        let h = BrokerHarness(manifests: ["a.json": #"{"bundleID": "com.a", "urlSchemes": ["appa"]}"#])
        try h.start { $0.maxRequestsInFlight = 64 }
        defer { h.stop() }
        let c = try h.rawSession()
        let n = 3000
        var burst = ""
        for i in 1...n { burst += rpcRequest(i, "url.open", ["url": .string("appa://\(i)")]).compactText + "\n" }
        nonisolated(unsafe) let sender = c  // (the thread only writes; this one only reads)
        let bytes = burst
        let writer = Thread { sender.send(bytes) }
        writer.start()
        var answered = 0
        var refused = 0
        while answered + refused < n, let r = c.readJSON(timeout: 20) {
            if r["result"]?["eventID"] != nil { answered += 1 } else { refused += 1 }
            XCTAssertEqual(r["id"]?.intValue, answered + refused, "in order")
            if answered == n / 2 { XCTAssertNotNil(try h.tool().call("broker.status")["connections"], "others are served") }
        }
        XCTAssertEqual(answered, n)
        XCTAssertEqual(refused, 0)
        XCTAssertEqual(try h.tool().call("broker.status")["pendingEvents"]?.intValue, n)
    }

    func testAPipeliningClientGetsEveryAnswer() throws {
        // Requests larger than one read (64 KiB) complete at most one per read, so the broker's
        // stop-reading-at-the-quota back-pressure is what keeps them under it: a client with
        // ten in flight against a quota of two gets ten answers and no -32007.
        let h = BrokerHarness(manifests: ["a.json": #"{"bundleID": "com.a", "urlSchemes": ["appa"]}"#])
        try h.start { $0.maxRequestsInFlight = 2 }
        let c = try RawClient(h.socket)
        c.send(#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"role":"tool"}}"# + "\n")
        XCTAssertNotNil(c.readJSON()?["result"])
        let padding = String(repeating: "x", count: 70 * 1024)
        var burst = ""
        for i in 1...10 {
            burst += #"{"jsonrpc":"2.0","id":\#(i),"method":"url.open","params":{"url":"appa://\#(i)?p=\#(padding)"}}"# + "\n"
        }
        c.send(burst)
        var answered: [Int] = []
        for _ in 1...10 {
            guard let r = c.readJSON(), let id = r["id"]?.intValue else { return XCTFail("missing reply after \(answered)") }
            XCTAssertNotNil(r["result"]?["eventID"], "\(r)")
            answered.append(id)
        }
        XCTAssertEqual(answered.sorted(), Array(1...10))
        let status = try h.tool().call("broker.status")
        XCTAssertEqual(status["rejectedOverQuota"]?.intValue, 0)
        XCTAssertEqual(status["pendingEvents"]?.intValue, 10)
        h.stop()
    }

    /// A client that sends a large part of a message and never finishes it is dropped after the
    /// stall limit (its buffer freed); one holding a small unfinished message is not.
    func testALargeUnfinishedMessageIsDroppedAfterTheStallLimit() throws {
        let h = BrokerHarness()
        try h.start { $0.stalledReaderSeconds = 0.5 }
        defer { h.stop() }
        let big = try RawClient(h.socket)
        big.send(#"{"jsonrpc":"2.0","id":1,"method":"broker.status","params":{"pad":""# + String(repeating: "x", count: 5_000))
        let small = try RawClient(h.socket)
        small.send(#"{"jsonrpc":"2.0","id":1,"method":"broker.st"#)
        XCTAssertTrue(big.waitForClose(timeout: 10), "the connection holding 5 KB (over 4 KiB) of an unfinished message was not closed")
        small.send(#"atus"}"# + "\n")
        XCTAssertNotNil(small.readJSON(timeout: 5)?["result"], "a small unfinished message is kept as long as it takes")
    }
}
