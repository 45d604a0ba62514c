// Commit pacing through the socket: the next group commit waits for the clients the last one
// answered, when they have come back quickly before, and starts anyway when one of them does not
// come back (the loop wakes at the end of the wait). With pacing off, nothing ever waits.

import CShareSystem
import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareStore
import ShareSystem
import XCTest

/// Whether the kernel keeps nanosecond poll timeouts, asked of it directly (epoll_pwait2 through
/// the C library, without the poller's code): true, false (refused: ENOSYS, or EPERM under a
/// seccomp filter), nil when this C library has no epoll_pwait2 to ask with. Elsewhere (kqueue):
/// true. (A skip decided by the poller's own answer passed a poller that never used them.)
func kernelKeepsNanosecondPollTimeouts() -> Bool? {
    #if os(Linux)
        typealias Create = @convention(c) (Int32) -> Int32
        typealias Wait = @convention(c) (
            Int32, UnsafeMutableRawPointer?, Int32, UnsafeRawPointer?, UnsafeRawPointer?
        ) -> Int32
        let libc = UnsafeMutableRawPointer(bitPattern: 0)  // RTLD_DEFAULT
        guard let create = dlsym(libc, "epoll_create1"), let wait = dlsym(libc, "epoll_pwait2") else { return nil }
        let fd = unsafeBitCast(create, to: Create.self)(0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var zero = timespec(tv_sec: 0, tv_nsec: 0)
        var events = [UInt8](repeating: 0, count: 64)
        let n = events.withUnsafeMutableBytes { buffer in
            withUnsafePointer(to: &zero) { unsafeBitCast(wait, to: Wait.self)(fd, buffer.baseAddress, 1, $0, nil) }
        }
        if n >= 0 { return true }
        return errno == ENOSYS || errno == EPERM ? false : nil
    #else
        return true
    #endif
}

/// Makes every fdatasync of the event journal take `delay` seconds longer (nothing fails).
func slowSyncs(_ delay: Double) -> @Sendable (JournalFaultPoint) -> Int32? {
    { point in
        if point == .sync { usleep(UInt32(delay * 1_000_000)) }
        return nil
    }
}

/// Holds the event journal's fdatasyncs while closed, then makes each take `delay` seconds
/// longer: a commit is being written for as long as a test needs, and the test can wait until one
/// is (`waitUntilHolding`), however slow the machine.
final class SyncGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var closed = false
    private var holding = 0

    func faults(delay: Double) -> @Sendable (JournalFaultPoint) -> Int32? {
        { [self] point in
            guard point == .sync else { return nil }
            condition.lock()
            if closed {
                holding += 1
                condition.broadcast()
                while closed { condition.wait() }
                holding -= 1
            }
            condition.unlock()
            usleep(UInt32(delay * 1_000_000))
            return nil
        }
    }

    func close() {
        condition.lock()
        closed = true
        condition.unlock()
    }

    func open() {
        condition.lock()
        closed = false
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until an fdatasync is held at the closed gate (false after `timeout` seconds).
    func waitUntilHolding(timeout: Double = 10) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while holding == 0 {
            if !condition.wait(until: deadline) { return holding > 0 }
        }
        return true
    }
}

final class CommitPacingTests: XCTestCase {
    func open(_ c: RawClient, _ id: Int, _ path: String) {
        c.send(#"{"jsonrpc":"2.0","id":\#(id),"method":"url.open","params":{"url":"deeplinkmyapp://\#(path)"}}"# + "\n")
    }

    /// Skips the test where the broker cannot pace (the kernel, or a sandbox, refuses the
    /// nanosecond poll timeout it sleeps with: epoll_pwait2 needs Linux 5.11); elsewhere pacing
    /// must be on.
    func requirePacing(_ h: BrokerHarness) throws {
        guard kernelKeepsNanosecondPollTimeouts() ?? ((try? Poller(capacity: 4))?.hasPreciseTimeouts == true) else {
            throw XCTSkip("commit pacing is off on this system (no nanosecond poll timeouts)")
        }
        XCTAssertEqual(
            (try? Poller(capacity: 4))?.hasPreciseTimeouts, true,
            "the kernel keeps nanosecond poll timeouts: the poller uses them")
        let status = try h.tool().call("broker.status")
        XCTAssertEqual(status["commitPacing"]?.boolValue, true, "pacing is on here: \(status)")
    }

    /// A broker whose fdatasyncs take `sync` seconds longer (and wait at `gate` while it is
    /// closed) and whose pacing waits at most `longestWait` ns, with three tool sessions on it.
    func slowBroker(sync: Double, longestWait: UInt64, gate: SyncGate? = nil) throws -> (BrokerHarness, RawClient, RawClient, RawClient) {
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start {
            $0.storeFaults = gate?.faults(delay: sync) ?? slowSyncs(sync)
            $0.commitPacingLongestWait = longestWait
        }
        try requirePacing(h)
        let clients = try (0..<3).map { _ in try RawClient(h.socket) }
        for c in clients { hello(c) }
        return (h, clients[0], clients[1], clients[2])
    }

    func hello(_ c: RawClient) {
        c.send(#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"role":"tool"}}"# + "\n")
        XCTAssertNotNil(c.readJSON()?["result"])
    }

    /// Two clients in lock step, then one of them stops: the other's request is committed and
    /// answered at the end of the wait, not left waiting for a client that does not come.
    func testACommitWaitingForAClientThatDoesNotComeBackStartsAtTheEndOfTheWait() throws {
        // Commits of some 100 ms and a longest wait of 80 ms (2 ms outside tests): far above the
        // clients' think time here, even under a sanitizer, so both are expected back after each
        // release, and the wait stays open while the test asks for the status in between.
        let (h, a, b, c) = try slowBroker(sync: 0.100, longestWait: 80_000_000)
        // a and b start in one commit: their first requests arrive while c's is being written.
        open(c, 99, "c")
        usleep(20_000)
        var id = 1
        for round in 0..<6 {
            open(a, id, "a\(round)")
            open(b, id + 1, "b\(round)")
            if round == 0 { XCTAssertNotNil(c.readJSON()?["result"]?["eventID"]) }
            XCTAssertNotNil(a.readJSON()?["result"]?["eventID"], "round \(round)")
            XCTAssertNotNil(b.readJSON()?["result"]?["eventID"], "round \(round)")
            id += 2
        }
        let tool = try h.tool()
        let before = try tool.call("broker.status")
        XCTAssertGreaterThan(before["commitMicros"]?.intValue ?? 0, 50_000, "the commits' measured duration")
        // a does not come back; b does, three times: each commit waits for a at most the limit.
        for round in 0..<3 {
            open(b, id, "b-alone\(round)")
            let started = Date()
            let reply = b.readJSON(timeout: 5)
            XCTAssertNotNil(reply?["result"]?["eventID"], "answered without a: \(String(describing: reply))")
            XCTAssertLessThan(Date().timeIntervalSince(started), 2.0, "the wait is bounded")
            id += 1
        }
        let after = try tool.call("broker.status")
        XCTAssertGreaterThan(
            after["pacedCommits"]?.intValue ?? 0, before["pacedCommits"]?.intValue ?? 0,
            "b's first commit alone waited for a: \(after)")
        XCTAssertEqual(after["pendingEvents"]?.intValue, 16)
        // And a, back at last, is answered as usual.
        open(a, id, "a-late")
        XCTAssertNotNil(a.readJSON()?["result"]?["eventID"])
        h.stop()
        try h.start()
        XCTAssertEqual(try h.tool().call("broker.status")["pendingEvents"]?.intValue, 17, "all durable")
        h.stop()
    }

    /// Four clients in a closed loop over commits of some 20 ms: with pacing, a commit holds the
    /// requests of all four almost every time; every request is answered once and is durable.
    /// (The longest wait is raised from 2 to 50 ms so that the test's own think time, slow under
    /// a sanitizer, stays far below the wait limit, which is then the commit's duration.)
    func testClientsInAClosedLoopShareOneCommitPerRound() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start {
            $0.storeFaults = slowSyncs(0.020)
            $0.commitPacingLongestWait = 50_000_000
        }
        try requirePacing(h)
        let clients = try (0..<4).map { _ in try RawClient(h.socket) }
        for c in clients { hello(c) }
        let tool = try h.tool()
        let commitsBefore = try tool.call("broker.status")["commits"]?.intValue ?? 0
        let rounds = 30
        var id = 1
        for round in 0..<rounds {
            for (i, c) in clients.enumerated() { open(c, id + i, "c\(i)/\(round)") }
            for (i, c) in clients.enumerated() {
                let r = c.readJSON()
                XCTAssertEqual(r?["id"]?.intValue, id + i)
                XCTAssertNotNil(r?["result"]?["eventID"], "\(String(describing: r))")
            }
            id += clients.count
        }
        let status = try tool.call("broker.status")
        let commits = (status["commits"]?.intValue ?? 0) - commitsBefore
        // 30 rounds of 4: ideally 30 commits (plus the first rounds, before the clients' think
        // times are known); without pacing a round's requests that arrive in different loop turns
        // go to different commits.
        XCTAssertLessThanOrEqual(commits, rounds + rounds / 2, "commits: \(commits) for \(rounds * 4) requests")
        XCTAssertEqual(status["pendingEvents"]?.intValue, rounds * 4)
        h.stop()
        try h.start()
        XCTAssertEqual(try h.tool().call("broker.status")["pendingEvents"]?.intValue, rounds * 4)
        h.stop()
    }

    /// A client expected back that half-closes: its connection closes while its last replies are
    /// written, and the commit held back for it must still start (it once waited for ever).
    func testAnExpectedClientThatHalfClosesDoesNotHoldOthersBack() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        let gate = SyncGate()
        try h.start { $0.storeFaults = gate.faults(delay: 0.010) }
        defer { gate.open() }  // (a broker held in a sync would not stop)
        try requirePacing(h)
        let tool = try h.tool()
        let y = try h.rawSession()
        for i in 0..<4 {
            open(y, 10 + i, "y\(i)")
            XCTAssertNotNil(y.readJSON()?["result"])
        }
        let x = try h.rawSession()
        open(x, 1, "x0")
        XCTAssertNotNil(x.readJSON()?["result"])
        // y's late request is run while x's two requests are being committed: the gate holds
        // that commit's fdatasync until then, however slow the machine.
        gate.close()
        x.send(
            #"{"jsonrpc":"2.0","id":2,"method":"url.open","params":{"url":"deeplinkmyapp://x1"}}"# + "\n"
                + #"{"jsonrpc":"2.0","id":3,"method":"url.open","params":{"url":"deeplinkmyapp://x2"}}"# + "\n")
        x.shutdownWrite()
        XCTAssertTrue(gate.waitUntilHolding(), "x's requests are being committed")
        XCTAssertTrue(h.sendAndWaitUntilRun(1, on: y, asking: tool) { open(y, 50, "y-late") }, "y's late request was run")
        gate.open()
        // (answered some 10 ms later; a commit left waiting for x is never started: the bound
        // only ends the test)
        let r = y.readJSON(timeout: 10)
        XCTAssertNotNil(r?["result"]?["eventID"], "answered: \(String(describing: r))")
        h.stop()
    }

    /// A client that was expected back and then goes idle is waited for once, not by every later
    /// commit.
    func testAnExpectedClientThatGoesIdleIsWaitedForOnce() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start { $0.storeFaults = slowSyncs(0.003) }
        try requirePacing(h)
        let y = try RawClient(h.socket)
        let z = try RawClient(h.socket)
        hello(y)
        hello(z)
        var id = 1
        for r in 0..<6 {
            open(y, id, "y\(r)")
            open(z, id + 1, "z\(r)")
            XCTAssertNotNil(y.readJSON()?["result"])
            XCTAssertNotNil(z.readJSON()?["result"])
            id += 2
        }
        let tool = try h.tool()
        let before = try tool.call("broker.status")["pacedCommits"]?.intValue ?? 0
        for r in 0..<20 {  // z stays connected and idle
            open(y, id, "ya\(r)")
            XCTAssertNotNil(y.readJSON()?["result"])
            id += 1
        }
        let paced = (try tool.call("broker.status")["pacedCommits"]?.intValue ?? 0) - before
        XCTAssertLessThanOrEqual(paced, 2, "only the first commit after z went idle waits for it")
        h.stop()
    }

    /// On a disk slower than the pacer's longest wait, the loop does not write commits itself,
    /// neither a complete paced batch nor a lone request: other connections are served while the
    /// sync thread flushes.
    func testCommitsSlowerThanTheLongestWaitAreNotWrittenOnTheLoop() throws {
        // Commits of some 300 ms, a longest wait of 250 ms: a and b are expected back (they
        // come back far sooner than 250 ms), but every commit is longer than the longest wait.
        let gate = SyncGate()
        let (h, a, b, c) = try slowBroker(sync: 0.300, longestWait: 250_000_000, gate: gate)
        defer { gate.open() }  // (a broker held in a sync would not stop)
        let tool = try h.tool()
        // Twice, a and b share one commit: their requests arrive while c's is being written.
        // After the second, both have come back quickly once, so both are expected back.
        for warm in 0..<2 {
            open(c, 90 + warm, "c\(warm)")
            usleep(20_000)
            open(a, 1 + warm, "a\(warm)")
            open(b, 3 + warm, "b\(warm)")
            XCTAssertNotNil(c.readJSON(timeout: 10)?["result"]?["eventID"])
            XCTAssertNotNil(a.readJSON(timeout: 10)?["result"]?["eventID"])
            XCTAssertNotNil(b.readJSON(timeout: 10)?["result"]?["eventID"])
        }
        let before = try tool.call("broker.status")
        XCTAssertGreaterThan(before["commitMicros"]?.intValue ?? 0, 250_000)
        // Round 0: a and b together, a complete paced batch; round 1: a alone, a lone request
        // (after waiting up to 250 ms for b). The gate holds the commit's fdatasync until the
        // status is answered: a commit the loop wrote itself would hold the loop there too, and
        // the status call would time out (not merely be late).
        for round in 0..<2 {
            gate.close()
            open(a, 10 + round, "a-again\(round)")
            if round == 0 { open(b, 20, "b-again") }
            XCTAssertTrue(gate.waitUntilHolding(), "the commit is being written (round \(round))")
            let status = try? tool.call("broker.status", timeoutMillis: 10_000)
            XCTAssertNotNil(status?["pendingEvents"], "status is answered while the commit is written (round \(round))")
            XCTAssertNil(a.readJSON(timeout: 0.01), "the commit is still being written")
            gate.open()
            XCTAssertNotNil(a.readJSON(timeout: 10)?["result"]?["eventID"], "and answered when durable")
            if round == 0 { XCTAssertNotNil(b.readJSON(timeout: 10)?["result"]?["eventID"]) }
        }
        // Round 0 was one commit of both (a complete batch), round 1 waited for b.
        let after = try tool.call("broker.status")
        XCTAssertEqual((after["commits"]?.intValue ?? 0) - (before["commits"]?.intValue ?? 0), 2, "\(after)")
        XCTAssertGreaterThanOrEqual((after["pacedCommits"]?.intValue ?? 0) - (before["pacedCommits"]?.intValue ?? 0), 1)
        h.stop()
    }

    /// epoll_pwait2 refused after start-up (a seccomp filter installed later): waits would round
    /// up to a millisecond, so pacing turns itself off at the next commit and says so.
    func testPacingTurnsOffWhenNanosecondTimeoutsAreRefusedLater() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start()
        try requirePacing(h)
        defer { sb_poller_set_precise_for_testing(1) }
        let a = try RawClient(h.socket)
        hello(a)
        sb_poller_set_precise_for_testing(0)
        open(a, 1, "x")
        XCTAssertNotNil(a.readJSON()?["result"]?["eventID"])
        let status = try h.tool().call("broker.status")
        XCTAssertEqual(status["commitPacing"]?.boolValue, false, "\(status)")
        sb_poller_set_precise_for_testing(1)
        h.stop()
    }

    func testWithPacingOffNoCommitWaits() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": deepLinkApp])
        try h.start {
            $0.storeFaults = slowSyncs(0.002)
            $0.commitPacing = false
        }
        let clients = try (0..<3).map { _ in try RawClient(h.socket) }
        for c in clients { hello(c) }
        var id = 1
        for round in 0..<10 {
            for (i, c) in clients.enumerated() { open(c, id + i, "c\(i)/\(round)") }
            for c in clients { XCTAssertNotNil(c.readJSON()?["result"]?["eventID"]) }
            id += clients.count
        }
        let status = try h.tool().call("broker.status")
        XCTAssertEqual(status["commitPacing"]?.boolValue, false)
        XCTAssertEqual(status["pacedCommits"]?.intValue, 0)
        XCTAssertEqual(status["pendingEvents"]?.intValue, 30)
        h.stop()
    }
}
