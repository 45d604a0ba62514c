// Quotas: connections per user id and pending events per app fail cleanly, and hitting one
// never affects other apps or other connections.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

final class QuotaTests: XCTestCase {
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
        let h = BrokerHarness(manifests: [
            "a.json": #"{"bundleID": "com.a", "urlSchemes": ["appa"]}"#,
            "b.json": #"{"bundleID": "com.b", "urlSchemes": ["appb"]}"#,
        ])
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
}
