// Review reproduction: url.open answered (its commit's fdatasync failed, and so did taking its
// record off the journal: the cut, then the zeros); the broker stops before any other event is
// committed. The event used to come back at the next start although the client was told nothing
// was stored: the owed cut was only ever made by the journal's next commit. It is made at the stop
// now; and while it cannot be made the answer is -32603 (the outcome is not known), not -32005.

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
        let refused = rpcError { _ = try tool.call("url.open", ["url": "deeplinkmyapp://refused"]) }
        XCTAssertEqual(refused?.code, -32603, "not -32005 (nothing stored): the outcome is not known")
        // (told the truth: while the disk refuses, the record may stay)
        XCTAssertTrue(refused?.message.contains("the change may be there after a restart") ?? false, "\(String(describing: refused))")
        for p in [JournalFaultPoint.sync, .cutBack, .cutBackZeros] { faults.set(p, nil) }  // (the fault is over)
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 1)
        h.stop()
        try h.start()
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(try app.call("app.subscribe")["pending"], 1, "the event answered -32005 came back after the restart")
        XCTAssertEqual(try app.nextNotification(timeoutMillis: 5000)?.params?["url"], "deeplinkmyapp://stored")
        app.assertNothingMore(timeoutMillis: 500, "no other event")
        h.stop()
    }

    /// A failed commit whose records were taken off (the cut worked) says nothing was stored.
    func testAFailedCommitWhoseRecordsWereTakenOffSaysNothingWasStored() throws {
        let faults = FaultSwitch()
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start { $0.storeFaults = faults.injector }
        defer { h.stop() }
        let tool = try h.tool()
        faults.set(.sync, EIO)
        let refused = rpcError { _ = try tool.call("url.open", ["url": "deeplinkmyapp://refused"]) }
        faults.set(.sync, nil)
        XCTAssertEqual(refused?.code, -32005)
        XCTAssertTrue(refused?.message.hasSuffix("; nothing was stored") ?? false, "\(String(describing: refused))")
    }
}
