// An error without an id that the broker says last, as it closes a connection, carries
// `data: {"closing": true}`; one that answers a message it could not tie to a request (the
// connection stays open) carries no such data. Clients tell the two apart by it.

import Foundation
@testable import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

final class ClosingErrorTests: XCTestCase {
    func assertClosing(_ reply: JSONValue?, code: Int, _ text: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(reply?["id"], .null, file: file, line: line)
        XCTAssertEqual(reply?["error"]?["code"]?.intValue, code, "\(String(describing: reply))", file: file, line: line)
        XCTAssertTrue(reply?["error"]?["message"]?.stringValue?.contains(text) == true, "\(String(describing: reply))", file: file, line: line)
        XCTAssertEqual(reply?["error"]?["data"], ["closing": true], file: file, line: line)
    }

    func testEveryErrorSaidOnClosingSaysSoAndAnAnswerDoesNot() throws {
        let h = BrokerHarness(manifests: ["10-app.json": #"{"bundleID":"com.example.app","urlSchemes":["ex"]}"#])
        try h.start {
            $0.maxConnectionsPerUID = 6
            $0.maxMessage = 4096
        }
        defer { h.stop() }
        // Answers to messages with no request to tie them to: the connection stays open.
        let open = try h.rawSession()
        open.send("{not json\n")
        let parse = open.readJSON()
        XCTAssertEqual(parse?["error"]?["code"], -32700)
        XCTAssertNil(parse?["error"]?["data"], "\(String(describing: parse))")
        open.send("[]\n")
        let empty = open.readJSON()
        XCTAssertEqual(empty?["error"]?["code"], -32600)
        XCTAssertNil(empty?["error"]?["data"], "\(String(describing: empty))")
        open.send(rpcRequest(1, "broker.status", .object([:])).compactText + "\n")
        XCTAssertNotNil(open.readJSON()?["result"], "still open")

        // A message over the size limit.
        let big = try RawClient(h.socket)
        big.send("[" + String(repeating: "1,", count: 3000) + "1]\n")
        assertClosing(big.readJSON(), code: -32600, "larger than the limit of 4096 bytes")
        XCTAssertTrue(big.waitForClose())

        // A malformed header section.
        let header = try RawClient(h.socket)
        header.send("Content-Length: abc\r\n\r\n")
        while header.fill() {}  // (to the end: the answer comes in header framing)
        let framed = String(decoding: header.buffer, as: UTF8.self)
        XCTAssertTrue(framed.hasPrefix("Content-Length: "), framed)
        let body = framed.components(separatedBy: "\r\n\r\n").last ?? ""
        assertClosing(try? JSONParser.parse(Array(body.utf8)), code: -32700, "closing the connection")

        // A session a manifest reload ends.
        let app = try h.rawSession(role: "app", bundleID: "com.example.app")
        h.dir.write("state/apps/10-app.json", #"{"bundleID":"com.example.other","urlSchemes":["ex"]}"#)
        _ = try h.tool().call("apps.reload")
        assertClosing(app.readJSON(), code: -32001, "session ended by a manifest reload")
        XCTAssertTrue(app.waitForClose())

        // A connection refused at once (the per-user limit: the harness's tool above is gone).
        var held: [RawClient] = [open]
        while held.count < 6 { held.append(try h.rawSession()) }
        let refused = try RawClient(h.socket)
        assertClosing(refused.readJSON(), code: -32001, "per-user limit")
        XCTAssertTrue(refused.waitForClose())
    }
}
