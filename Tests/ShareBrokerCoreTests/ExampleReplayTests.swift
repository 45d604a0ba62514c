// Replays Protocol/examples/*.json against a fresh broker: each exchange sends a message and
// checks the reply against the expected shape ("*" matches any value; objects may have more keys).

import Foundation
import ShareProtocol
import XCTest

final class ExampleReplayTests: XCTestCase {
    static var examplesDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Protocol/examples").path
    }

    /// True when `actual` has every member of `expected` (recursively); "*" matches anything.
    func matches(_ expected: JSONValue, _ actual: JSONValue) -> Bool {
        if expected == .string("*") { return true }
        switch (expected, actual) {
        case (.object(let e), .object(let a)):
            return e.allSatisfy { m in a[m.key].map { matches(m.value, $0) } ?? false }
        case (.array(let e), .array(let a)):
            return e.count == a.count && zip(e, a).allSatisfy { matches($0, $1) }
        default:
            return expected == actual
        }
    }

    func testReplayEveryExample() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.examplesDirectory).filter { $0.hasSuffix(".json") }
        XCTAssertGreaterThanOrEqual(files.count, 2)
        for file in files.sorted() {
            let doc = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: Self.examplesDirectory + "/" + file))))
            let h = BrokerHarness()
            try h.start()
            let raw = try RawClient(h.socket)
            for (i, ex) in (doc["exchanges"]?.arrayValue ?? []).enumerated() {
                if let text = ex["sendRaw"]?.stringValue {
                    raw.send(text + "\n")
                } else {
                    raw.send(ex["send"]!.compactText + "\n")
                }
                if ex["expectNothing"] == .bool(true) {
                    // A request right after must be answered first: nothing was queued before it.
                    raw.send(#"{"jsonrpc":"2.0","id":"probe","method":"broker.status"}"# + "\n")
                    XCTAssertEqual(raw.readJSON()?["id"], .string("probe"), "\(file) #\(i): expected no reply")
                    continue
                }
                guard let reply = raw.readJSON() else {
                    XCTFail("\(file) #\(i): no reply")
                    continue
                }
                XCTAssertTrue(matches(ex["expect"]!, reply), "\(file) #\(i): got \(reply.compactText)")
            }
            h.stop()
        }
    }
}
