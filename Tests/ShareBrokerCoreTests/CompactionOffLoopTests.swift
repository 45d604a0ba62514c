// Compaction of the event journal through the broker: the copies of an app's old events (carried
// forward while the sealed segments are mostly dead) go to disk with a commit the sync worker
// writes, never one the loop writes itself (the loop writes a lone request's commit inline; a
// commit of up to 4,096 copies no request waits for would stall every client). The old segment
// goes, and the events survive a restart.

import Foundation
@testable import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

final class CompactionOffLoopTests: XCTestCase {
    func testCompactionCopiesAreCommittedOffTheLoopAndSurviveARestart() throws {
        final class Commits: @unchecked Sendable {
            let lock = NSLock()
            var seen: [(inline: Bool, upkeep: Bool)] = []
            var observer: @Sendable (Bool, Bool) -> Void {
                { [self] inline, upkeep in
                    lock.lock()
                    seen.append((inline, upkeep))
                    lock.unlock()
                }
            }
            var snapshot: [(inline: Bool, upkeep: Bool)] {
                lock.lock()
                defer { lock.unlock() }
                return seen
            }
        }
        let commits = Commits()
        let h = BrokerHarness(manifests: [
            "10-stuck.json": #"{"bundleID":"com.example.stuck","urlSchemes":["stuck"]}"#,
            "20-busy.json": #"{"bundleID":"com.example.busy","urlSchemes":["busy"]}"#,
        ])
        let configure: (inout BrokerConfiguration) -> Void = {
            $0.journalSegmentLimit = 4096
            $0.commitStarted = commits.observer
            // The loop writes a commit itself only while commits take at most the pacer's longest
            // wait (2 ms outside tests): on a loaded machine every commit can take longer, no
            // commit is written inline, and the check that compaction's never is means nothing.
            // Raised so that the test's own slowness does not decide that.
            $0.commitPacingLongestWait = 1_000_000_000
        }
        try h.start(configure)
        let tool = try h.tool()
        // Events of an app that is not running stay in the first segment.
        let stuckURLs = (0..<5).map { "stuck://item/\($0)" }
        for url in stuckURLs { XCTAssertEqual(try tool.call("url.open", ["url": .string(url)])["queued"], true) }
        // Another app's events, each delivered and acked, fill segments behind them.
        let busy = try h.connect()
        try busy.hello(role: "app", bundleID: "com.example.busy")
        _ = try busy.call("app.subscribe")
        let first = h.state + "/queues/events-000001.log"
        var n = 0
        while FileManager.default.fileExists(atPath: first) && n < 2000 {
            _ = try tool.call("url.open", ["url": .string("busy://event/\(n)/with/a/longer/path")])
            let event = try XCTUnwrap(busy.nextNotification(timeoutMillis: 5000))
            let id = try XCTUnwrap(event.params?["id"])
            _ = try busy.call("app.ack", ["ids": [id]])
            n += 1
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: first), "the first segment was compacted away (\(n) events)")
        XCTAssertGreaterThan(n, 10, "\((try? FileManager.default.contentsOfDirectory(atPath: h.state + "/queues")) ?? [])")
        let seen = commits.snapshot
        XCTAssertTrue(seen.contains { $0.upkeep }, "a commit carried compaction's copies")
        XCTAssertTrue(seen.contains { $0.inline }, "lone requests' commits are written by the loop (the check below means something)")
        XCTAssertFalse(seen.contains { $0.upkeep && $0.inline }, "the loop wrote compaction's copies itself")
        h.stop()
        try h.start(configure)
        defer { h.stop() }
        let stuck = try h.connect()
        try stuck.hello(role: "app", bundleID: "com.example.stuck")
        _ = try stuck.call("app.subscribe")
        var urls: [String] = []
        for _ in stuckURLs { urls.append(try XCTUnwrap(stuck.nextNotification(timeoutMillis: 5000)?.params?["url"]?.stringValue)) }
        XCTAssertEqual(urls, stuckURLs, "carried forward, in order, after a restart")
        XCTAssertEqual(try h.tool().call("broker.status")["pendingEvents"], 5)
    }
}
