// Memory for output stays bounded however clients misbehave: a batch's refusals are short (a
// refusal is output too), and all connections' unread output together has a budget
// (`maxTotalOutput`): past it, a connection holding more than its fair share unread is refused,
// and one over its own cap that does not read is dropped after a second (not the stall limit),
// while connections that read are served.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

final class OutputBudgetTests: XCTestCase {
    /// An app session with a 1-MiB value stored in its group (to ask for without reading).
    func appWithBigValue(_ h: BrokerHarness) throws -> RawClient {
        let app = try h.rawSession(role: "app", bundleID: "com.mycompany.myapp")
        let big = String(repeating: "x", count: 1_000_000)
        app.send(#"{"jsonrpc":"2.0","id":1,"method":"defaults.set","params":{"group":"group.com.mycompany.myapp","key":"big","value":""# + big + "\"}}\n")
        XCTAssertNotNil(app.readJSON(timeout: 10)?["result"])
        return app
    }

    func getBig(_ c: RawClient, _ id: Int) {
        c.send(#"{"jsonrpc":"2.0","id":\#(id),"method":"defaults.get","params":{"group":"group.com.mycompany.myapp","key":"big"}}"# + "\n")
    }

    func testABatchsRefusalsAfterTheFirstAreShort() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.maxOutputBuffer = 4096 }
        let c = try h.rawSession()
        let n = 5000
        let members = (1...n).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"broker.status"}"# }
        c.send("[" + members.joined(separator: ",") + "]\n")
        // The reply is one line: read it whole.
        var line: [UInt8] = []
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let nl = c.buffer.firstIndex(of: 0x0A) {
                line = Array(c.buffer[..<nl])
                break
            }
            if !c.fill(timeout: 5) { break }
        }
        let reply = try XCTUnwrap(try? JSONParser.parse(line).arrayValue, "a batch reply")
        XCTAssertEqual(reply.count, n)
        let refused = reply.filter { $0["error"]?["code"] == -32007 }
        XCTAssertGreaterThan(refused.count, n - 20, "members past the output cap are refused")
        XCTAssertTrue(refused.first?["error"]?["message"]?.stringValue?.contains("--max-output") == true, "the first says why")
        XCTAssertEqual(Set(refused.dropFirst().compactMap { $0["error"]?["message"]?.stringValue }), ["Over quota; not run"])
        XCTAssertLessThan(line.count, 100 * n, "the refusals are short: \(line.count) bytes for \(n) members")
        h.stop()
    }

    func testPastTheBudgetAConnectionHoldingMuchUnreadIsRefusedWhileOthersAreServed() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start { $0.maxTotalOutput = 256 * 1024 }  // (fair share: 4 KiB)
        let hog = try appWithBigValue(h)
        // Asked for 1 MB and never read: most of it stays in the broker.
        getBig(hog, 2)
        let other = try h.tool()
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? other.call("broker.status")["outputBytes"]?.intValue).map { $0 > 256 * 1024 } ?? false },
            "the broker holds the unread output")
        getBig(hog, 3)  // refused: over the budget, and holding far more than its share
        // A connection that reads its replies is served meanwhile, durable requests included.
        XCTAssertNotNil(try other.call("broker.status")["connections"])
        XCTAssertNotNil(try other.call("url.canOpen", ["url": "deeplinkmyapp://x"])["canOpen"])
        // The hog, once it reads, finds its replies then the refusal.
        var replies: [Int: JSONValue] = [:]
        while replies[3] == nil, let r = hog.readJSON(timeout: 10) {
            if let id = r["id"]?.intValue { replies[id] = r }
        }
        XCTAssertEqual(replies[2]?["result"]?["exists"], true)
        XCTAssertEqual(replies[3]?["error"]?["code"], -32007)
        XCTAssertTrue(replies[3]?["error"]?["message"]?.stringValue?.contains("--max-total-output") == true, "\(String(describing: replies[3]))")
        // Once read, it is served again.
        getBig(hog, 4)
        XCTAssertEqual(hog.readJSON(timeout: 10)?["result"]?["exists"], true)
        XCTAssertEqual(try other.call("broker.status")["outputBytes"], 0, "all read: nothing held")
        h.stop()
    }

    func testPastTheBudgetAConnectionOverItsCapThatDoesNotReadIsDroppedAfterASecond() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.maxTotalOutput = 256 * 1024
            $0.maxOutputBuffer = 64 * 1024
            $0.stalledReaderSeconds = 60  // (not the 30-s stall rule)
        }
        let hog = try appWithBigValue(h)
        getBig(hog, 2)
        getBig(hog, 3)
        // (watched from another connection: reading the hog's socket would let its output drain)
        let other = try h.tool()
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? other.call("broker.status")["droppedSlowClients"]?.intValue) == 1 },
            "dropped after a second, not after the stall limit")
        XCTAssertEqual(try other.call("broker.status")["outputBytes"], 0, "its output is freed with it")
        XCTAssertTrue(hog.waitForClose(timeout: 10))
        h.stop()
    }

    /// True once the broker closed `c` (POLLHUP), without reading what waits in its socket.
    func closedByBroker(_ c: RawClient) -> Bool {
        var pfd = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&pfd, 1, 0)
        return pfd.revents & Int16(POLLHUP) != 0
    }

    func testPastTheBudgetAConnectionTimedBeforeItIsDroppedAfterASecondToo() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        try h.start {
            $0.maxTotalOutput = 1_000_000  // (one 1-MB reply unread stays under it; two pass it)
            $0.maxOutputBuffer = 64 * 1024
            $0.stalledReaderSeconds = 60  // (not the 30-s stall rule)
        }
        let other = try h.tool()
        let first = try appWithBigValue(h)
        getBig(first, 10)
        // Over its cap, under the budget: timed at the stall limit (60 s).
        XCTAssertTrue(waitUntil(timeout: 10) { (try? other.call("broker.status")["outputBytes"]?.intValue).map { $0 > 64 * 1024 } ?? false })
        let second = try appWithBigValue(h)
        getBig(second, 11)  // now all output is over the budget
        XCTAssertTrue(waitUntil(timeout: 10) { self.closedByBroker(first) }, "the first, timed before the budget was passed, goes too")
        XCTAssertLessThanOrEqual(try other.call("broker.status")["outputBytes"]?.intValue ?? .max, 1_000_000, "under the budget again")
        h.stop()
    }
}
