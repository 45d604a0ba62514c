// First integration checks through the real socket: hello, status, the pre-hello rule.

import ShareClient
import ShareProtocol
import XCTest

final class SmokeTests: XCTestCase {
    func testStatusBeforeHelloAndAppsAfter() throws {
        let h = BrokerHarness()
        try h.start()
        let c = try h.connect()
        let st = try c.call("broker.status")
        XCTAssertEqual(st["version"]?.stringValue, SharebrokerVersion.string)
        XCTAssertEqual(st["connections"]?.intValue, 1)
        XCTAssertThrowsError(try c.call("apps.list")) { e in
            guard case ClientError.rpc(let rpc) = e else { return XCTFail("\(e)") }
            XCTAssertEqual(rpc.code, -32001)
        }
        let hello = try c.hello(role: "tool")
        XCTAssertEqual(hello["protocol"]?.intValue, 1)
        XCTAssertEqual(hello["role"]?.stringValue, "tool")
        XCTAssertEqual(try c.call("apps.list")["apps"]?.arrayValue?.count, 0)
        h.stop()
    }
}
