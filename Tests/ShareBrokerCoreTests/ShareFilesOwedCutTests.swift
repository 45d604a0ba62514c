// A share.send whose commit failed and whose record the journal could not take back is answered
// -32603 ("the change may be there after a restart"). If it is there after the restart, it must
// be whole: its files must not have been removed while its record stayed in the journal.

import Foundation
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

@testable import ShareBrokerCore

final class ShareFilesOwedCutTests: XCTestCase {
    func testAShareWhoseRecordMayRemainKeepsItsFiles() throws {
        let faults = FaultSwitch()
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start { $0.storeFaults = faults.injector }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.example.pdfreader.share")
        _ = try ext.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "warmup.pdf"]]])  // opens the group
        // The disk refuses the commit and then every way of taking its record back (a kill -9
        // would follow: here the stop's own try fails too).
        for p in [JournalFaultPoint.sync, .cutBack, .cutBackZeros] { faults.set(p, EIO) }
        let refused = rpcError { _ = try ext.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "kept.pdf"]]]) }
        XCTAssertEqual(refused?.code, -32603, "\(String(describing: refused))")
        h.stop()
        for p in [JournalFaultPoint.sync, .cutBack, .cutBackZeros] { faults.set(p, nil) }
        try h.start()
        defer { h.stop() }
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        let shares = try XCTUnwrap(app.call("share.list")["shares"]?.arrayValue)
        // Every share listed after the restart can be read whole.
        for s in shares {
            let id = try XCTUnwrap(s["shareID"]?.stringValue)
            let read = rpcError { _ = try app.call("share.read", ["shareID": .string(id), "item": 0]) }
            XCTAssertNil(read, "share \(id) came back without its files: \(String(describing: read))")
        }
        XCTAssertEqual(shares.count, 2, "(the record did remain: the cut was never made)")
    }
}
