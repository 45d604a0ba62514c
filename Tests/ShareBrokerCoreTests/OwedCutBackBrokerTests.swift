// Review reproduction: url.open answered -32005 (its commit's fdatasync failed, and so did
// taking its record off the journal: the cut, then the zeros); the broker stops before any other
// event is committed. The event must not come back at the next start (nothing was stored, the
// client was told), yet it does: the owed cut is only ever made by the journal's next commit.

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

final class OwedCutBackBrokerTests: XCTestCase {
    func testAnEventAnsweredAsNotStoredDoesNotComeBackAfterAStop() throws {
        let faults = FaultSwitch()
        let h = BrokerHarness(
            manifests: ["10-myapp.json": deepLinkApp, "20-browser.json": browserApp],
            associations: ["example.com": exampleAASA])
        try h.start { $0.storeFaults = faults.injector }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://stored"])["queued"], true)
        for p in [JournalFaultPoint.sync, .cutBack, .cutBackZeros] { faults.set(p, EIO) }
        XCTAssertThrowsError(try tool.call("url.open", ["url": "deeplinkmyapp://refused"]), "expected -32005")
        for p in [JournalFaultPoint.sync, .cutBack, .cutBackZeros] { faults.set(p, nil) }  // (the fault is over)
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 1)
        h.stop()
        try h.start()
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(try app.call("app.subscribe")["pending"], 1, "the event answered -32005 came back after the restart")
        XCTAssertEqual(try app.nextNotification(timeoutMillis: 5000)?.params?["url"], "deeplinkmyapp://stored")
        XCTAssertThrowsError(try app.nextNotification(timeoutMillis: 500), "no other event")
        h.stop()
    }
}
