// CommitPacer: whom the next group commit waits for, and for how long.

import XCTest

@testable import ShareBrokerCore

final class CommitPacerTests: XCTestCase {
    func connection(_ id: UInt64) -> Connection { Connection(id: id, fd: -1, peer: nil, maxMessage: 1 << 20) }

    /// A pacer that has measured commits of `nanos` each.
    func pacer(commitNanos nanos: UInt64) -> CommitPacer {
        var p = CommitPacer()
        var t: UInt64 = 1_000_000
        for _ in 0..<64 {
            p.commitStarted(at: t)
            t += nanos
            p.commitFinished(at: t)
        }
        return p
    }

    func testTheWaitLimitIsTheRecentCommitDurationCappedAtTwoMilliseconds() {
        XCTAssertEqual(CommitPacer().waitLimit, 0, "nothing measured: no wait")
        let p = pacer(commitNanos: 200_000)
        XCTAssertEqual(Double(p.commitNanos), 200_000, accuracy: 2_000)
        XCTAssertEqual(pacer(commitNanos: 50_000_000).waitLimit, CommitPacer.maximumWait)
        // One slow commit moves the average by an eighth of the difference, not to itself.
        var q = pacer(commitNanos: 100_000)
        q.commitStarted(at: 10_000_000_000)
        q.commitFinished(at: 10_000_000_000 + 900_000)
        XCTAssertEqual(Double(q.commitNanos), 200_000, accuracy: 2_000)
    }

    func testTheLoopWritesCommitsItselfOnlyWhileTheyTakeAtMostTheLongestWait() {
        XCTAssertFalse(CommitPacer().inlineAllowed, "nothing measured yet: the worker writes it")
        XCTAssertTrue(pacer(commitNanos: 300_000).inlineAllowed)
        XCTAssertTrue(pacer(commitNanos: CommitPacer.maximumWait).inlineAllowed)
        XCTAssertFalse(pacer(commitNanos: 5_000_000).inlineAllowed, "a slow disk: the worker writes")
        // When the disk is fast again the average comes back under the limit.
        var p = pacer(commitNanos: 5_000_000)
        var t: UInt64 = 100_000_000_000
        for _ in 0..<40 {
            p.commitStarted(at: t)
            t += 200_000
            p.commitFinished(at: t)
        }
        XCTAssertTrue(p.inlineAllowed)
    }

    func testDisablingEndsAWaitAndExpectsNobody() {
        var p = pacer(commitNanos: 200_000)
        let c = connection(1)
        let now: UInt64 = 5_000_000_000
        p.released(c, at: now)
        p.requestArrived(from: c)  // came back at once: expected after its next release
        p.released(c, at: now + 10_000)
        XCTAssertTrue(c.expectedBack)
        XCTAssertGreaterThan(p.remainingWait(at: now + 20_000), 0)
        p.disable()
        XCTAssertFalse(c.expectedBack)
        XCTAssertEqual(p.remainingWait(at: now + 20_000), 0, "the wait ends now")
        p.released(c, at: now + 30_000)
        XCTAssertFalse(c.expectedBack, "nobody is expected any more")
    }

    func testAClientSeenComingBackQuicklyIsWaitedForUntilItIsBack() {
        var p = pacer(commitNanos: 200_000)
        let c = connection(1)
        let now: UInt64 = 5_000_000_000
        // Its first release: nothing is known of it yet, so nothing waits.
        p.released(c, at: now)
        XCTAssertFalse(c.expectedBack)
        XCTAssertEqual(p.remainingWait(at: now + 1), 0)
        p.pollReturned(enteredAt: now + 1_000, at: now + 30_000)  // it woke the loop 30 µs later
        p.requestArrived(from: c)
        XCTAssertEqual(c.thinkNanos, 30_000)
        XCTAssertEqual(c.releasedAt, 0)

        let later = now + 1_000_000
        p.commitStarted(at: later)
        p.released(c, at: later)
        XCTAssertTrue(c.expectedBack)
        XCTAssertEqual(p.expectedBack, 1)
        XCTAssertFalse(p.batchComplete)
        let wait = p.remainingWait(at: later + 10_000)
        XCTAssertGreaterThan(wait, 0)
        XCTAssertLessThanOrEqual(wait, p.waitLimit)
        p.requestArrived(from: c)
        XCTAssertEqual(p.expectedBack, 0)
        XCTAssertTrue(p.batchComplete, "every client expected back is in the batch")
        XCTAssertEqual(p.remainingWait(at: later + 10_000), 0)
        p.commitStarted(at: later + 20_000)
        XCTAssertFalse(p.batchComplete, "a new batch starts empty")
    }

    func testTheWaitEndsAtTheLimitWhenTheClientDoesNotComeBack() {
        var p = pacer(commitNanos: 300_000)
        let c = connection(1)
        c.thinkNanos = 10_000
        let now: UInt64 = 7_000_000_000
        p.released(c, at: now)
        XCTAssertEqual(p.remainingWait(at: now), p.waitLimit)
        XCTAssertEqual(p.remainingWait(at: now + p.waitLimit - 1), 1)
        XCTAssertEqual(p.remainingWait(at: now + p.waitLimit), 0)
        XCTAssertEqual(p.remainingWait(at: now + 10 * p.waitLimit), 0)
        XCTAssertFalse(p.batchComplete, "it never came back")
    }

    func testASlowThinkerOrAClosedConnectionIsNotWaitedFor() {
        var p = pacer(commitNanos: 300_000)
        let slow = connection(1)
        slow.thinkNanos = 2_000_000  // a paced client: one request every 2 ms
        let quick = connection(2)
        quick.thinkNanos = 20_000
        let now: UInt64 = 9_000_000_000
        p.released(slow, at: now)
        XCTAssertFalse(slow.expectedBack)
        XCTAssertEqual(p.remainingWait(at: now + 1), 0)
        p.released(quick, at: now)
        XCTAssertEqual(p.expectedBack, 1)
        XCTAssertGreaterThan(p.remainingWait(at: now + 1), 0)
        p.closed(quick)
        XCTAssertFalse(quick.expectedBack)
        XCTAssertEqual(p.expectedBack, 0)
        XCTAssertEqual(p.remainingWait(at: now + 1), 0)
        XCTAssertFalse(p.batchComplete, "a closed connection is not a returned one")
        // Released twice without coming back (a second commit answered it too): counted once.
        p.released(quick, at: now + 2)
        p.released(quick, at: now + 3)
        XCTAssertEqual(p.expectedBack, 1)
        p.closed(quick)
        XCTAssertEqual(p.expectedBack, 0)
    }

    /// A think time runs from the release to when the request may have arrived, not to when the
    /// loop got round to reading it.
    func testThinkTimesCountFromTheReleaseToTheRequestsArrival() {
        var p = pacer(commitNanos: 300_000)
        let t: UInt64 = 20_000_000_000
        // A paced client: the loop slept from just after the release until its request woke it.
        let paced = connection(1)
        p.released(paced, at: t)
        p.pollReturned(enteredAt: t + 5_000, at: t + 2_000_000)
        p.requestArrived(from: paced)
        XCTAssertEqual(paced.thinkNanos, 2_000_000)
        p.released(paced, at: t + 2_100_000)
        XCTAssertFalse(paced.expectedBack, "not waited for")

        // A quick client whose request came while the loop wrote a commit itself (5 ms): the poll
        // after it returns at once, so the request may have come any time since the turn before.
        let quick = connection(2)
        let u: UInt64 = 30_000_000_000
        p.pollReturned(enteredAt: u - 1_000_000, at: u)  // the turn that releases it
        p.released(quick, at: u + 10_000)
        p.pollReturned(enteredAt: u + 5_000_000, at: u + 5_002_000)  // after the inline commit
        p.requestArrived(from: quick)
        XCTAssertEqual(quick.thinkNanos, 0, "it may have been back at once")
        p.released(quick, at: u + 5_100_000)
        XCTAssertTrue(quick.expectedBack)
    }

    func testAPacerThatIsOffNeverWaits() {
        var p = pacer(commitNanos: 300_000)
        p.enabled = false
        let c = connection(1)
        c.thinkNanos = 1_000
        p.released(c, at: 1_000_000_000)
        XCTAssertFalse(c.expectedBack)
        XCTAssertEqual(p.remainingWait(at: 1_000_000_001), 0)
        XCTAssertFalse(p.batchComplete)
    }
}
