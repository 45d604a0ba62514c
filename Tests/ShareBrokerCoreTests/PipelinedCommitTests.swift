// The pipelined group commit: a commit is written and fdatasync'd by the sync worker while the
// loop goes on; what arrives meanwhile forms the next commit. Replies still wait for their own
// commit, a failure undoes the commit and everything that built on it, and a connection that
// half-closes after its requests still gets every reply.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

/// Holds the first `.sync` it sees for `delay` seconds and fails it with EIO; later syncs pass.
final class SlowFailingSync: @unchecked Sendable {  // guarded by `lock`
    let lock = NSLock()
    var armed = false
    /// Set when the armed fault fired: a commit is in its (slow, failing) fdatasync.
    var fired = false
    let delay: Double
    init(delay: Double) { self.delay = delay }
    var injector: @Sendable (JournalFaultPoint) -> Int32? {
        { [self] p in
            guard p == .sync else { return nil }
            lock.lock()
            let fire = armed
            armed = false
            if fire { fired = true }
            lock.unlock()
            guard fire else { return nil }
            usleep(UInt32(delay * 1_000_000))
            return EIO
        }
    }
}

final class PipelinedCommitTests: XCTestCase {
    func testRequestsArrivingDuringACommitAreAnsweredAfterTheirOwn() throws {
        let slow = SlowFailingSync(delay: 0)
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start { $0.storeFaults = slow.injector }
        // Several connections keep url.open requests flowing: every answer is a durable event.
        let group = DispatchGroup()
        let failures = Counter()
        let socket = h.socket
        for c in 0..<8 {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    let t = try BrokerConnection(socketPath: socket)
                    try t.hello(role: "tool")
                    for i in 0..<50 {
                        let r = try t.call("url.open", ["url": .string("deeplinkmyapp://c\(c)/\(i)")])
                        if r["eventID"]?.stringValue == nil { failures.add(1) }
                    }
                } catch { failures.add(1) }
            }.start()
        }
        group.wait()
        XCTAssertEqual(failures.value, 0)
        let status = try h.tool().call("broker.status")
        XCTAssertEqual(status["pendingEvents"]?.intValue, 400)
        h.stop()
        try h.start()
        XCTAssertEqual(try h.tool().call("broker.status")["pendingEvents"]?.intValue, 400, "all durable")
        h.stop()
    }

    func testAFailedCommitAlsoFailsTheRequestsThatCameDuringIt() throws {
        let slow = SlowFailingSync(delay: 1.0)  // (the window in which the third request must arrive)
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start { $0.storeFaults = slow.injector }
        let first = try RawClient(h.socket)
        first.send(#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"role":"tool"}}"# + "\n")
        XCTAssertNotNil(first.readJSON()?["result"])
        let second = try h.tool()
        slow.lock.lock()
        slow.armed = true
        slow.lock.unlock()
        // Two requests in one turn: handed to the worker, whose fdatasync hangs, then fails.
        first.send(
            #"{"jsonrpc":"2.0","id":1,"method":"url.open","params":{"url":"deeplinkmyapp://a"}}"# + "\n"
                + #"{"jsonrpc":"2.0","id":2,"method":"url.open","params":{"url":"deeplinkmyapp://b"}}"# + "\n")
        // (once their commit is in its fdatasync, however slow the machine)
        XCTAssertTrue(waitUntil(timeout: 10) { slow.lock.lock(); defer { slow.lock.unlock() }; return slow.fired })
        // Meanwhile another request changes the same store: it builds on the failing commit.
        let during = rpcError { try second.call("url.open", ["url": "deeplinkmyapp://c"], timeoutMillis: 5000) }
        XCTAssertEqual(during?.code, -32005, "\(String(describing: during))")
        for _ in 1...2 {
            let r = first.readJSON()
            XCTAssertEqual(r?["error"]?["code"]?.intValue, -32005, "\(String(describing: r))")
        }
        // Nothing of the three is stored, and the broker goes on.
        XCTAssertEqual(try second.call("broker.status")["pendingEvents"]?.intValue, 0)
        XCTAssertNotNil(try second.call("url.open", ["url": "deeplinkmyapp://d"])["eventID"])
        h.stop()
        try h.start()
        let after = try h.tool()
        XCTAssertEqual(try after.call("broker.status")["pendingEvents"]?.intValue, 1, "only the last one")
        h.stop()
    }

    func testAHalfClosedConnectionGetsItsRepliesBeforeItCloses() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start()
        for _ in 0..<20 {
            let c = try RawClient(h.socket)
            c.send(
                #"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"role":"tool"}}"# + "\n"
                    + #"{"jsonrpc":"2.0","id":1,"method":"url.open","params":{"url":"deeplinkmyapp://x"}}"# + "\n")
            c.shutdownWrite()
            XCTAssertNotNil(c.readJSON()?["result"], "hello")
            XCTAssertNotNil(c.readJSON()?["result"]?["eventID"], "url.open answered before the broker closed")
            XCTAssertTrue(c.waitForClose())
        }
        h.stop()
    }
}

/// A thread-safe counter.
final class Counter: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var n = 0
    func add(_ k: Int) { lock.withLock { n += k } }
    var value: Int { lock.withLock { n } }
}
