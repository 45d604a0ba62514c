// Requests whose work may block (reading the files a share names, copying and fsyncing them)
// run it on the worker pool, never on the loop: a 256-MiB copy, or a read from a hung network
// file system, would otherwise stall every client. The request's connection is suspended
// meanwhile: nothing more of what it sent is read or run (its replies keep their order), while
// every other connection goes on. When the work is done the loop finishes the request (its
// reply, durable like any other, at the next commit) and reads on.

import ShareProtocol
import ShareStore
import ShareSystem

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Work a request hands to the worker pool, and what the loop does with its outcome.
final class OffLoopTask: @unchecked Sendable {  // `work` runs on a pool thread, the rest on the loop
    /// Assigned when submitted.
    var id: UInt64 = 0
    /// The connection whose request it is (set when it suspends).
    weak var conn: Connection? = nil
    /// Runs on a pool thread; keeps its result in what it captured.
    let work: @Sendable () -> Void
    /// Runs on the loop once the work is done, as the rest of the request's handler.
    let finish: (Broker, Connection) throws(RPCError) -> MethodResult
    /// Runs on the loop instead of `finish` when the request will not be finished (its connection
    /// closed): releases what the work made (files written, descriptors opened).
    let cancel: (Broker) -> Void
    /// The threads it runs on (nil: the file-work pool, `workers`).
    let pool: WorkerPool?
    /// Runs on the loop instead of `finish` when the broker stops before the work is done (nil:
    /// the request answers `Broker.stoppedBeforeWorkFinished`, nothing stored).
    let atStop: ((Broker, Connection) throws(RPCError) -> MethodResult)?

    init(
        work: @escaping @Sendable () -> Void, finish: @escaping (Broker, Connection) throws(RPCError) -> MethodResult,
        cancel: @escaping (Broker) -> Void, pool: WorkerPool? = nil,
        atStop: ((Broker, Connection) throws(RPCError) -> MethodResult)? = nil
    ) {
        self.work = work
        self.finish = finish
        self.cancel = cancel
        self.pool = pool
        self.atStop = atStop
    }
}

/// A request of a connection that waits for its off-loop work.
final class SuspendedRequest {
    /// Its id (nil for a notification: it is run but not answered).
    let id: RequestID?
    /// The work it waits for.
    var task: OffLoopTask
    /// The batch it belongs to (what was answered before it, what follows).
    let batch: SuspendedBatch?

    init(id: RequestID?, task: OffLoopTask, batch: SuspendedBatch?) {
        self.id = id
        self.task = task
        self.batch = batch
    }
}

/// A batch stopped at a member that waits for off-loop work: its replies so far and the members
/// still to run.
final class SuspendedBatch {
    let items: [Result<RPCRequest, RPCErrorReply>]
    /// The next member to run.
    var next = 0
    var parts: [HeldReply] = []
    var batchBytes = 0
    /// Members refused so far (-32007): the first refusal says why, the others are short.
    var refused = 0
    /// Work earlier members asked to run after their replies (`Broker.afterReply`), run after
    /// the batch's reply once it is queued.
    var afterReply: [() -> Void] = []
    /// The first part made since the batch last (re)started running.
    var runStart = 0
    /// The commit each still-deferred part waits for (part index, commit id): a commit that ends
    /// while the batch waits decides those parts there and then (a later commit's failure must
    /// not turn an earlier durable change into an error, nor the reverse). They are counted out
    /// of the connection's held requests while the batch waits, and in again when it runs on (a
    /// part decided meanwhile leaves the in-flight count then).
    var awaiting: [(index: Int, commit: UInt64)] = []

    init(items: [Result<RPCRequest, RPCErrorReply>]) { self.items = items }

    /// A member's reply: deferred when it changed a store (it waits for the commit), else bytes.
    func add(_ id: RequestID, _ response: Result<MethodResult, RPCError>, broker: Broker, _ conn: Connection) {
        var part: [UInt8] = []
        switch response {
        case .success(let result) where !broker.turn.requestTouched.isEmpty:
            parts.append(broker.deferred(conn, id, result))
            return
        case .success(let result): result.writeResponse(id: id, to: &part)
        case .failure(let error): RPCCodec.writeError(id: id, error: error, to: &part)
        }
        batchBytes += part.count
        parts.append(.bytes(part))
    }
}

extension Broker {
    /// Threads for off-loop work, started as jobs find every started one busy: a file on a hung
    /// network or FUSE file system blocks one of them (until it returns), not the others.
    static let offLoopThreads = 8

    /// Called by a handler: the request continues off the loop with `work` (on `pool`, the
    /// file-work threads by default), then with `finish` on the loop (which may hand over again).
    /// Returns the placeholder the handler returns.
    func suspendRequest(
        work: @escaping @Sendable () -> Void, finish: @escaping (Broker, Connection) throws(RPCError) -> MethodResult,
        cancel: @escaping (Broker) -> Void, on pool: WorkerPool? = nil,
        atStop: ((Broker, Connection) throws(RPCError) -> MethodResult)? = nil
    ) -> MethodResult {
        suspension = OffLoopTask(work: work, finish: finish, cancel: cancel, pool: pool, atStop: atStop)
        return .value(.null)
    }

    /// Submits `task` to the pool; false when the pool cannot run it (then it was cancelled).
    func submitOffLoop(_ task: OffLoopTask) -> Bool {
        task.id = nextOffLoopID
        nextOffLoopID += 1
        var work = task.work
        if let gate = config.offLoopGate, task.pool == nil {  // (file work's: a launch check has its own)
            let run = work
            work = {
                gate()
                run()
            }
        }
        guard (task.pool ?? workers).submit((task.id, work)) else {
            task.cancel(self)
            return false
        }
        offLoop[task.id] = task
        return true
    }

    /// Suspends `conn` on the request the handler just handed over (`suspension`). False when
    /// the work could not be handed over (the request then answers -32603 at once).
    func suspend(_ conn: Connection, id: RequestID?, batch: SuspendedBatch?) -> Bool {
        guard let task = suspension else { return false }
        suspension = nil
        guard submitOffLoop(task) else {
            log.log(.error, "cannot start a worker thread for \(conn.identity)'s request", connection: conn.id)
            return false
        }
        task.conn = conn
        conn.suspended = SuspendedRequest(id: id, task: task, batch: batch)
        conn.inFlight += 1  // (a connection with work in flight closes only after it)
        unwatchPartial(conn)  // (what it holds unread waits for the work, not for the peer)
        updateInterest(conn)
        return true
    }

    /// The error a request gets when its work could not be handed to a thread.
    static let noWorkerError = RPCError(.internalError, "Internal error: no thread to do this request's file work; nothing was stored")

    /// Runs work that belongs to no request on `pool` (the file pool by default: a defaults
    /// snapshot, see `DefaultsStore.backgroundRunner`; `launchWorkers`: a launch's start);
    /// `done` runs on the loop once it has. False when the pool cannot take it.
    func runPoolWork(_ work: @escaping @Sendable () -> Void, on pool: WorkerPool? = nil, then done: @escaping () -> Void) -> Bool {
        let id = nextOffLoopID
        nextOffLoopID += 1
        guard (pool ?? workers).submit((id, work)) else { return false }
        poolWork[id] = done
        return true
    }

    /// At shutdown: store work not started is taken back (its `done` runs: a snapshot not written
    /// is tried again after the next start), and the compactions running are waited for, so none
    /// writes or deletes segments once the broker has stopped (and let go of its state directory).
    /// At the stop, after the last commits: the records of a failed commit that could not be
    /// taken off their journal then (only the journal's next commit would) are taken off now;
    /// else they would come back at the next start, answered as not stored.
    func settleOwedCuts() {
        var journals: [(String, () -> Bool)] = []
        if let s = store { journals.append(("event queues", { s.journal.settleOwedCutBack() })) }
        for (g, s) in shareStores { journals.append(("shares of \(g)", { s.settleOwedCutBack() })) }
        for (g, s) in defaults.stores { journals.append(("defaults of \(g)", { s.journal.settleOwedCutBack() })) }
        for (name, settle) in journals where !settle() {
            log.log(.error, "the records of a failed commit could not be taken off the journal of the \(name): they may come back at the next start")
        }
    }

    func finishStoreWork() {
        for (id, done) in poolWork where workers.cancel(id) {
            poolWork[id] = nil
            done()
        }
        for s in defaults.stores.values { s.waitForCompaction() }
        poolWork.removeAll()  // (launch starts' too: a stopped broker records none)
    }

    /// The pool reported finished work: each request finishes on the loop, and its connection
    /// reads on.
    func handleOffLoopDone() { finishPoolWork(workers.takeFinished()) }

    /// Work of a pool finished (`runPoolWork`'s, or a suspended request's).
    func finishPoolWork(_ ids: [UInt64]) {
        for id in ids {
            if let done = poolWork.removeValue(forKey: id) {
                done()
                continue
            }
            guard let task = offLoop.removeValue(forKey: id) else { continue }
            // (the connection may have closed meanwhile, or moved on)
            let conn = task.conn
            guard let conn, !conn.closed, let s = conn.suspended, s.task === task else {
                task.cancel(self)
                offLoopAbandoned += 1
                continue
            }
            offLoopFinished += 1
            if waitsForCommitInFlight(s) {
                resumeAfterCommit.append((conn, task))
                continue
            }
            resume(conn, s)
        }
    }

    /// True when the batch `s` belongs to has members whose changes are in the commit being
    /// written: it runs on (and is answered) once that commit has decided them, so a member is
    /// never decided by a later commit.
    func waitsForCommitInFlight(_ s: SuspendedRequest) -> Bool {
        guard let b = s.batch else { return false }
        return b.awaiting.contains { $0.commit < nextCommitID }
    }

    /// Requests whose work is done and that waited for the commit in flight (end of each turn).
    func resumeWaiting() {
        let list = resumeAfterCommit
        resumeAfterCommit.removeAll()
        for (conn, task) in list {
            guard !conn.closed, let s = conn.suspended, s.task === task else {
                task.cancel(self)
                offLoopAbandoned += 1
                continue
            }
            if waitsForCommitInFlight(s) {
                resumeAfterCommit.append((conn, task))
            } else {
                resume(conn, s)
            }
        }
    }

    /// A suspended connection closed: its work is dropped if it has not started (what started
    /// runs to its end and is taken back then).
    func dropQueuedWork(_ conn: Connection) {
        guard let task = conn.suspended?.task, offLoop[task.id] === task, (task.pool ?? workers).cancel(task.id) else { return }
        offLoop[task.id] = nil
        task.cancel(self)
        offLoopAbandoned += 1
    }

    /// The error a request gets when the broker stops before its off-loop work has finished.
    static let stoppedBeforeWorkFinished = RPCError(
        .storageFailure, "Storage failure: the broker is stopping, and this request's file work did not finish in time: it was not done (nothing was stored)")

    /// At the end of the shutdown grace period: every request still waiting for off-loop work
    /// (running, or not started) is answered `stoppedBeforeWorkFinished` (a batch's later
    /// members: "not run"), as if its work had failed. Nothing of it is recorded; the task
    /// stays listed, so the stop takes back what its work made if it ends before the loop does
    /// (work that ends later closes what it opened itself, `PathProbe`; files it leaves are
    /// removed at the next start, as orphans without a record).
    func answerUnfinishedWork() {
        for task in Array(offLoop.values) {
            guard let conn = task.conn, !conn.closed, let s = conn.suspended, s.task === task else { continue }
            var stopped: (Broker, Connection) throws(RPCError) -> MethodResult = { _, _ throws(RPCError) in
                throw Broker.stoppedBeforeWorkFinished
            }
            if let atStop = task.atStop { stopped = atStop }
            s.task = OffLoopTask(work: {}, finish: stopped, cancel: { _ in })
            resume(conn, s)
        }
    }

    /// The connections whose batch waits for off-loop work (running, or done and waiting).
    var waitingBatches: [(Connection, SuspendedBatch)] {
        var out: [(Connection, SuspendedBatch)] = []
        for task in offLoop.values {
            if let conn = task.conn, let b = conn.suspended?.batch { out.append((conn, b)) }
        }
        for (conn, _) in resumeAfterCommit {
            if let b = conn.suspended?.batch { out.append((conn, b)) }
        }
        return out
    }

    func resume(_ conn: Connection, _ s: SuspendedRequest) {
        turn.beginRequest()
        var outcome: Result<MethodResult, RPCError>
        do { outcome = .success(try s.task.finish(self, conn)) } catch { outcome = .failure(error) }
        if let next = suspension {  // more work off the loop (the copy, after reading the files)
            suspension = nil
            next.conn = conn
            if submitOffLoop(next) {
                s.task = next
                return
            }
            outcome = .failure(Broker.noWorkerError)
        }
        conn.suspended = nil
        conn.inFlight -= 1
        if let b = s.batch {
            // Its parts still deferred wait for the next commit, as any held reply: they count
            // as held again (and no commit decides them while they are in the batch's list).
            conn.heldRequests += b.awaiting.count
            // (should the batch stop again, they are listed again from here)
            if let first = b.awaiting.map(\.index).min() { b.runStart = min(b.runStart, first) }
            b.awaiting.removeAll()
            if let id = s.id { b.add(id, outcome, broker: self, conn) }
            _ = runBatch(conn, b)
        } else if let id = s.id {
            reply(conn, id, outcome)
            markDirty(conn)
            runAfterReply(conn)
        }
        if conn.suspended == nil, !conn.closed { readOn(conn) }
    }

    /// After a suspension (or a stop at the in-flight quota): the frames read before it are run,
    /// then the connection is read again.
    func readOn(_ conn: Connection) {
        // (at the in-flight quota already, e.g. after a batch that passed it: nothing more runs yet)
        if !conn.closing, !conn.throttled, conn.inFlight >= config.maxRequestsInFlight {
            _ = throttle(conn)
            return
        }
        if !conn.closing {
            do {
                try conn.framer.resume { frame, mode in
                    conn.outputMode = mode
                    return conn.closing || self.handleFrame(conn, frame)
                }
            } catch {
                framingFailed(conn, error)
                return
            }
        }
        if conn.suspended == nil && !conn.throttled {
            if conn.closing {
                if conn.drained { closeDrained(conn) }
            } else {
                updateInterest(conn)
                if conn.framer.bufferedByteCount >= Broker.partialWatchBytes { watchPartial(conn) }
            }
        }
    }

    /// A commit ended while batches wait for off-loop work: their parts that waited for it are
    /// decided now (an error when a store they changed failed).
    func decideWaitingBatches(commit: UInt64, failed: [ObjectIdentifier: StoreError]) {
        settleAwaiting(failed) { a, _ in a.commit == commit }
    }

    /// A commit of `store` failed: the waiting batches' parts that were to join the next commit
    /// and changed `store` answer -32005 (see `failAccumulated`).
    func failWaitingBatches(_ store: ObjectIdentifier, _ error: StoreError) {
        let next = nextCommitID
        settleAwaiting([store: error]) { a, part in
            guard a.commit == next, case .deferred(_, _, let touched) = part else { return false }
            return touched.contains(store)
        }
    }

    /// Writes the waiting batches' deferred parts that `match` picks as `failed` decides them
    /// (each leaves the batch's list and its connection's requests in flight).
    func settleAwaiting(
        _ failed: [ObjectIdentifier: StoreError], _ match: ((index: Int, commit: UInt64), HeldReply) -> Bool
    ) {
        if offLoop.isEmpty && resumeAfterCommit.isEmpty { return }
        for (conn, b) in waitingBatches where !b.awaiting.isEmpty {
            b.awaiting.removeAll { a in
                guard match(a, b.parts[a.index]) else { return false }
                var out: [UInt8] = []
                Broker.writeHeld(b.parts[a.index], failed: failed, to: &out)
                b.parts[a.index] = .bytes(out)
                conn.inFlight -= 1
                return true
            }
        }
    }

    /// Runs a batch's members from `b.next`; false when one of them suspended the connection
    /// (the batch goes on when its work is done). Otherwise its reply is queued or held.
    @discardableResult
    func runBatch(_ conn: Connection, _ b: SuspendedBatch) -> Bool {
        while b.next < b.items.count {
            let item = b.items[b.next]
            b.next += 1
            var part: [UInt8] = []
            if conn.closing, case .success(let request) = item {
                // Its session ended while the batch waited (a reload, the broker stopping): the
                // rest is not run.
                guard let id = request.id else { continue }
                RPCCodec.writeError(
                    id: id,
                    error: stopping
                        ? RPCError(.internalError, "Internal error: the broker is stopping; not run")
                        : RPCError(.unauthorized, "Unauthorized: the session ended (a manifest reload no longer admits it); not run"),
                    to: &part)
                b.batchBytes += part.count
                b.parts.append(.bytes(part))
                continue
            }
            switch item {
            case .failure(let reply):
                RPCCodec.writeError(id: reply.id, error: reply.error, to: &part)
            case .success(let request):
                if overQuota(conn, pending: b.batchBytes) {
                    guard let reply = refuseOverQuota(conn, request, batchBytes: b.batchBytes, briefly: b.refused > 0) else { continue }
                    b.refused += 1
                    part = reply
                    break
                }
                batchPendingOutput = b.batchBytes  // (what the batch's earlier members will write: share.read's room)
                let response = dispatch(conn, request)
                batchPendingOutput = 0
                if suspension != nil {
                    if suspend(conn, id: request.id, batch: b) {
                        // Its parts so far wait for the commit that takes this turn's changes.
                        var n = 0
                        for i in b.runStart..<b.parts.count {
                            if case .deferred = b.parts[i] {
                                b.awaiting.append((i, nextCommitID))
                                n += 1
                            }
                        }
                        conn.heldRequests -= n
                        b.runStart = b.parts.count
                        // What earlier members asked to run after their replies (a subscribe's
                        // backlog) runs after the batch's reply.
                        b.afterReply += afterReply
                        afterReply.removeAll()
                        return false
                    }
                    guard let id = request.id else { continue }
                    RPCCodec.writeError(id: id, error: Broker.noWorkerError, to: &part)
                    break
                }
                guard let response else { continue }
                b.add(request.id!, response, broker: self, conn)
                continue
            }
            b.batchBytes += part.count
            b.parts.append(.bytes(part))
        }
        if !b.parts.isEmpty {  // a batch of notifications gets no reply
            // (parts a commit decided while the batch waited are plain bytes now)
            if b.parts.contains(where: { if case .deferred = $0 { return true } else { return false } }) {
                hold(conn, .batch(b.parts))
            } else {
                emitReply(conn) { out in Broker.writeHeld(.batch(b.parts), failed: [:], to: &out) }
            }
            markDirty(conn)
        }
        if !b.afterReply.isEmpty {
            afterReply = b.afterReply + afterReply
            b.afterReply.removeAll()
        }
        runAfterReply(conn)
        return true
    }
}
