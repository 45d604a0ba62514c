// The pipelined group commit: at the end of a loop turn the broker hands each dirty store's batch
// to one worker thread, which writes it and makes it durable (write + fdatasync), store after
// store in commit order, while the loop goes on reading and handling requests. What arrives
// meanwhile forms the next batch; it is handed over when the first one is done. So the loop never
// waits for the disk, and the disk is busy back to back under load.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Dispatch
import ShareSystem

/// What one store hands over at the end of a turn: directories to fsync first (new share file
/// directories), then its journal batch.
public struct SyncJob: @unchecked Sendable {  // owned by whoever holds it: the loop, then the worker
    /// Directories whose entries must be durable before the batch (fsync of the directory).
    public var directories: [String] = []
    /// The journal records.
    public var batch: JournalBatch?
    /// The store the job writes (set by `TurnLog.beginAll`; nil: none named).
    public var owner: ObjectIdentifier? = nil
    /// Stores of the same commit whose jobs must be durable before this one is written: a request
    /// changed them together with this store (a share's record before the event announcing it).
    /// When one of them fails, this job is not written and fails too.
    public var after: [ObjectIdentifier] = []

    /// Creates a job.
    public init(directories: [String] = [], batch: JournalBatch?) {
        self.directories = directories
        self.batch = batch
    }

    /// The error of a job not written because a store it must follow failed.
    public static let notWritten = "not written: a request changed it together with another store, whose commit failed"

    /// True when there is nothing to write or sync.
    public var isEmpty: Bool { directories.isEmpty && batch == nil }

    func run() -> StoreError? {
        // (the directories' new entries must be durable before the records naming them are)
        for d in directories {
            if let e = batch?.faults?(.directorySync) ?? FD.syncDirectory(d) { return StoreError("cannot make the entries of \(d) durable", SystemError("fsync", errno: e)) }
        }
        return batch?.writeAndSync()
    }
}

/// One worker thread that runs commits handed to it, in order, and reports each through a pipe
/// the loop polls (`wakeDescriptor`).
public final class SyncWorker: @unchecked Sendable {  // state guarded by `lock`
    /// One commit: the jobs of the stores in commit order. A failed job stops those that must come
    /// after it (`SyncJob.after`: a share's record before its event); the others are written.
    public typealias Commit = (id: UInt64, jobs: [SyncJob])
    /// What happened to a commit: one error (or nil) per job, in order.
    public typealias Outcome = (id: UInt64, errors: [StoreError?])

    private let lock = Lock()
    /// Signalled for waitForOutcomes (shutdown) when an outcome is ready. On the heap, as the
    /// lock's mutex: a C condition variable must not move either.
    private let cond: UnsafeMutablePointer<pthread_cond_t> = {
        let c = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        c.initialize(to: pthread_cond_t())
        return c
    }()
    /// One count per commit handed over (and one for stop): the worker's only wake-up. A
    /// semaphore costs one futex wake and one futex wait per hand-over; a condition variable
    /// took three (glibc's signal, wait and a wake of its own after waking).
    private let work = DispatchSemaphore(value: 0)
    private var queue: [Commit] = []
    private var done: [Outcome] = []
    private var busy = false  // a commit is being run
    private var thread: pthread_t? = nil
    private let wakeRead: Int32
    private let wakeWrite: Int32

    /// The descriptor that becomes readable when outcomes are ready (`takeOutcomes`).
    public var wakeDescriptor: Int32 { wakeRead }

    /// Starts the worker thread.
    public init() throws(SystemError) {
        (wakeRead, wakeWrite) = try FD.pipe()  // non-blocking, close-on-exec
        pthread_cond_init(cond, nil)
        let unmanaged = Unmanaged.passRetained(self)
        #if canImport(Darwin)
            var t: pthread_t? = nil
            let r = pthread_create(
                &t, nil,
                { arg in
                    let worker = Unmanaged<SyncWorker>.fromOpaque(arg).takeRetainedValue()
                    worker.loop()
                    return nil
                }, unmanaged.toOpaque())
        #else
            var t = pthread_t()
            let r = pthread_create(
                &t, nil,
                { arg in
                    let worker = Unmanaged<SyncWorker>.fromOpaque(arg!).takeRetainedValue()
                    worker.loop()
                    return nil
                }, unmanaged.toOpaque())
        #endif
        guard r == 0 else {
            unmanaged.release()
            FD.close(wakeRead)
            FD.close(wakeWrite)
            throw SystemError("pthread_create", errno: r)
        }
        thread = t
    }

    /// Hands a commit to the worker.
    public func submit(_ commit: Commit) {
        lock.lock()
        queue.append(commit)
        lock.unlock()
        work.signal()
    }

    /// The outcomes ready so far (drains the wake pipe).
    public func takeOutcomes() -> [Outcome] {
        // One byte per finished commit, and one commit is in flight at a time: one read (into
        // the stack) drains it; a byte left over only causes a wake that finds no outcome.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { _ = read(wakeRead, $0.baseAddress, $0.count) }
        lock.lock()
        let out = done
        done.removeAll()
        lock.unlock()
        return out
    }

    /// Blocks until the worker has an outcome ready (used at shutdown), then returns them.
    public func waitForOutcomes() -> [Outcome] {
        lock.lock()
        while done.isEmpty && !(queue.isEmpty && !busy) { pthread_cond_wait(cond, lock.mutex) }
        lock.unlock()
        return takeOutcomes()
    }

    /// Runs a commit's jobs in order on the calling thread. A job whose `after` names a store that
    /// failed (or was not written) is not written and fails too: a later store's records are never
    /// durable without those of an earlier one a request changed with it. Other jobs are written,
    /// whatever failed before them (one group's journal failing does not fail other groups'
    /// shares, nor the `url.open`s of the same commit). The worker does this off the loop; the
    /// loop does it itself when waiting costs less than handing over (a lone request on an idle
    /// broker).
    public static func run(_ jobs: [SyncJob]) -> [StoreError?] {
        var errors: [StoreError?] = []
        errors.reserveCapacity(jobs.count)
        var failed: [ObjectIdentifier] = []  // (owners of the jobs that failed so far: rare)
        for job in jobs {
            if !failed.isEmpty, !job.after.isEmpty, job.after.contains(where: { failed.contains($0) }) {
                if let owner = job.owner { failed.append(owner) }
                errors.append(StoreError(SyncJob.notWritten))
                continue
            }
            let e = job.run()
            if e != nil, let owner = job.owner { failed.append(owner) }
            errors.append(e)
        }
        return errors
    }

    /// Stops the thread after the commits already handed over (their outcomes stay readable).
    /// Calling it again does nothing; commits submitted after it are never run.
    public func stop() {
        guard let t = thread else { return }
        work.signal()  // a count with an empty queue: the worker returns
        _ = pthread_join(t, nil)
        thread = nil
    }

    deinit {
        FD.close(wakeRead)
        FD.close(wakeWrite)
        pthread_cond_destroy(cond)
        cond.deallocate()
    }

    private func loop() {
        while true {
            work.wait()
            lock.lock()
            if queue.isEmpty {  // stop()
                lock.unlock()
                return
            }
            let commit = queue.removeFirst()
            busy = true
            lock.unlock()

            let errors = SyncWorker.run(commit.jobs)

            lock.lock()
            done.append((commit.id, errors))
            busy = false
            pthread_cond_broadcast(cond)  // for waitForOutcomes (without a waiter, no system call)
            lock.unlock()
            var b: UInt8 = 1
            _ = write(wakeWrite, &b, 1)
        }
    }
}
