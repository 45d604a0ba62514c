// When the next group commit starts. A commit is written and fdatasync'ed off the loop (the sync
// worker); what arrives meanwhile waits for the next one. Starting that next one the moment the
// worker is free is right when requests keep coming from many independent clients, but a client
// whose reply the last commit just released usually sends its next request a few microseconds
// later: if the next commit has already started without it, that request waits for a whole
// commit and then its own. The pacer lets the next commit wait for such clients, and only them:
//
// - a connection is *expected back* when its reply was just released and, the last time, its next
//   request came sooner than the wait would last (a client that thinks for milliseconds between
//   requests, like the paced opener or a subscriber acking now and then, is never waited for);
// - the wait ends as soon as every expected connection has sent its next request (or closed), and
//   at the latest one commit's duration after the release (the commits' recent average, measured
//   on the loop from hand-over to outcome): waiting longer than a commit would cost a request
//   already in hand more than it saves the ones coming back.
//
// PostgreSQL's commit_delay/commit_siblings and MySQL's binlog_group_commit_sync_delay make the
// same trade with fixed settings; here both the limit and who is waited for are measured.

import ShareSystem

/// Decides whether the next commit waits for connections whose replies were just released.
/// Loop-owned.
struct CommitPacer {
    /// Off: no connection is ever expected back, every commit starts at once.
    var enabled = true
    /// The recent commits' duration (hand-over to outcome, ns): an average over about eight.
    private(set) var commitNanos: UInt64 = 0
    /// Released connections expected back that have not sent their next request yet.
    private(set) var expectedBack = 0
    /// Until when (monotonic ns) the next commit may wait for them.
    private(set) var waitUntil: UInt64 = 0
    /// Commits that waited (for broker.status).
    private(set) var waitedCommits: UInt64 = 0
    /// When the commit in flight was handed over.
    private var submittedAt: UInt64 = 0
    /// The longest wait (ns), however slow the disk: a commit that takes longer than this is an
    /// outlier, not a pace.
    static let maximumWait: UInt64 = 2_000_000
    /// `maximumWait` in force (`Configuration.commitPacingLongestWait`; tests raise it so that
    /// their own slowness, under a sanitizer say, does not decide who is expected back).
    var longestWait: UInt64 = CommitPacer.maximumWait

    /// The longest a commit waits after a release: the recent commit duration.
    var waitLimit: UInt64 { min(commitNanos, longestWait) }

    /// Whether the loop may write a commit itself (see `Broker.startCommitUnlessPaced`): only
    /// while commits take no longer than the longest wait. On a disk slower than that, a commit
    /// written on the loop would keep every other connection (a status call, a route lookup)
    /// waiting for the whole flush; the worker writes it and the loop goes on serving them.
    /// (Until a commit has been measured, the worker writes them: the first commit on a slow disk
    /// does not stall the loop either.)
    var inlineAllowed: Bool { commitNanos != 0 && commitNanos <= longestWait }

    /// Expected connections that came back since the last commit started.
    private var returned = 0
    /// The connections marked expected since the last commit started.
    private var expected: [Connection] = []

    /// The next commit holds every connection expected back (and at least one): nothing else is
    /// expected while it is written.
    var batchComplete: Bool { returned > 0 && expectedBack == 0 }

    /// A commit was handed to the worker (or run inline) at `now`.
    mutating func commitStarted(at now: UInt64) {
        submittedAt = now
        returned = 0
        // Expectations last until the next commit starts: a client that did not come back by
        // then (gone idle, or slower this time) is not waited for again until it has.
        forgetExpected()
    }

    /// Nobody is expected back any more.
    private mutating func forgetExpected() {
        for c in expected { c.expectedBack = false }
        expected.removeAll(keepingCapacity: true)
        expectedBack = 0
    }

    /// The commit started last finished at `now`.
    mutating func commitFinished(at now: UInt64) {
        guard submittedAt != 0, now > submittedAt else { return }
        let d = now - submittedAt
        submittedAt = 0
        // An average over about eight commits, so one slow flush does not set the pace.
        commitNanos = commitNanos == 0 ? d : commitNanos - commitNanos / 8 + d / 8
    }

    /// `conn`'s held replies were released at `now` (its commit is durable).
    mutating func released(_ conn: Connection, at now: UInt64) {
        conn.releasedAt = now
        // Not a closing connection (it sends nothing more) nor one that already has a request in
        // the next batch (a pipelining client is back already).
        if enabled, !conn.expectedBack, !conn.closing, conn.heldRequests == 0, conn.thinkNanos < waitLimit {
            conn.expectedBack = true
            expectedBack += 1
            expected.append(conn)
            waitUntil = now + waitLimit
        }
    }

    /// The earliest a request read this turn may have arrived (monotonic ns): when the poll that
    /// began the turn woke up, if it slept (what woke it arrived then); else when the turn before
    /// began, since anything there at that time would have been read then. Reading the clock when
    /// the request is read instead would count, as the client's, the time the loop spent on other
    /// work meanwhile (a whole commit written inline), and a client kept waiting once would never
    /// be waited for again.
    private var arrivalFloor: UInt64 = 0
    /// When the previous poll returned.
    private var lastPollReturn: UInt64 = 0
    /// A poll longer than this slept (it found nothing ready at once).
    static let sleptPoll: UInt64 = 20_000

    /// The loop's poll, entered at `enteredAt`, returned events at `now`.
    mutating func pollReturned(enteredAt: UInt64, at now: UInt64) {
        arrivalFloor = now - enteredAt > CommitPacer.sleptPoll ? now : lastPollReturn
        lastPollReturn = now
    }

    /// `conn` sent a request (its first since its last release, when `releasedAt` is set).
    mutating func requestArrived(from conn: Connection) {
        guard conn.releasedAt != 0 else { return }
        conn.thinkNanos = arrivalFloor > conn.releasedAt ? arrivalFloor - conn.releasedAt : 0
        conn.releasedAt = 0
        if conn.expectedBack {
            conn.expectedBack = false
            expectedBack -= 1
            returned += 1
        }
    }

    /// `conn` closed: it will not be back.
    mutating func closed(_ conn: Connection) {
        if conn.expectedBack {
            conn.expectedBack = false
            expectedBack -= 1
        }
    }

    /// How long (ns) the next commit should still wait at `now`; 0 when it should start.
    func remainingWait(at now: UInt64) -> UInt64 {
        guard expectedBack > 0, now < waitUntil else { return 0 }
        return waitUntil - now
    }

    /// The next commit starts now after having waited.
    mutating func countWaited() { waitedCommits += 1 }

    /// Turns pacing off for good (the poller lost its nanosecond timeouts): nobody is expected
    /// back any more, and a wait in progress ends now.
    mutating func disable() {
        enabled = false
        forgetExpected()
        returned = 0
        waitUntil = 0
    }
}
