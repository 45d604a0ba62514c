// A few threads for blocking work the event loop must not wait for (reading a file a share
// names, copying and fsyncing it): the loop hands a job over and goes on; the pool reports each
// finished job's id through a pipe the loop polls, and the loop picks the job's result up there.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Dispatch

/// A fixed number of threads running jobs in submission order (a job may block: on a slow or
/// hung file system it blocks only its own thread). The threads start with the first job.
public final class WorkerPool: @unchecked Sendable {  // state guarded by `lock`
    /// One job: an id the loop knows it by, and the work (run on a pool thread; it hands its
    /// result over through objects it captured, read by the loop after the id is reported).
    public typealias Job = (id: UInt64, work: @Sendable () -> Void)

    private let lock = Lock()
    private let work = DispatchSemaphore(value: 0)
    private var queue: [Job] = []
    private var queueHead = 0
    private var done: [UInt64] = []
    private var stopped = false
    private var started = 0
    private var running = 0  // jobs being run
    private let threads: Int
    private let wakeRead: Int32
    private let wakeWrite: Int32

    /// The descriptor that becomes readable when jobs have finished (`takeFinished`).
    public var wakeDescriptor: Int32 { wakeRead }

    /// A pool of `threads` threads (at least one), none started yet.
    public init(threads: Int) throws(SystemError) {
        self.threads = max(1, threads)
        (wakeRead, wakeWrite) = try FD.pipe()  // non-blocking, close-on-exec
    }

    /// Jobs handed over and not yet reported finished.
    public var outstanding: Int {
        lock.lock()
        defer { lock.unlock() }
        return queue.count - queueHead + running + done.count
    }

    /// Hands a job over. Returns false when no thread could be started (the job is not run).
    public func submit(_ job: Job) -> Bool {
        lock.lock()
        if stopped {
            lock.unlock()
            return false
        }
        queue.append(job)
        // A thread more when every started one is busy (up to the limit).
        let needThread = started < threads && running + (queue.count - queueHead) > started
        if needThread { started += 1 }
        lock.unlock()
        if needThread, !startThread() {
            lock.lock()
            started -= 1
            let none = started == 0
            if none { queue.removeLast() }
            lock.unlock()
            if none { return false }
        }
        work.signal()
        return true
    }

    /// Takes back a job that has not started; false when it has (it runs to its end).
    public func cancel(_ id: UInt64) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let i = queue[queueHead...].firstIndex(where: { $0.id == id }) else { return false }
        queue.remove(at: i)
        return true
    }

    /// The ids of the jobs finished since the last call (drains the wake pipe).
    public func takeFinished() -> [UInt64] {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 256) { buf in
            while read(wakeRead, buf.baseAddress, buf.count) == buf.count {}
        }
        lock.lock()
        let out = done
        done.removeAll()
        lock.unlock()
        return out
    }

    /// Lets the threads end; jobs not yet started are never run (their ids are returned). Does
    /// not wait for a job being run (it may be blocked on a hung file system): its thread ends
    /// after it. The pool object lives until its last thread has ended.
    @discardableResult
    public func stop() -> [UInt64] {
        lock.lock()
        stopped = true
        let unrun = queue[queueHead...].map(\.id)
        queue.removeAll()
        queueHead = 0
        let n = started
        lock.unlock()
        for _ in 0..<n { work.signal() }
        return unrun
    }

    deinit {
        FD.close(wakeRead)
        FD.close(wakeWrite)
    }

    private func startThread() -> Bool {
        let unmanaged = Unmanaged.passRetained(self)  // released by the thread when it ends
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        defer { pthread_attr_destroy(&attr) }
        #if canImport(Darwin)
            var t: pthread_t? = nil
            let r = pthread_create(
                &t, &attr,
                { arg in
                    Unmanaged<WorkerPool>.fromOpaque(arg).takeRetainedValue().loop()
                    return nil
                }, unmanaged.toOpaque())
        #else
            var t = pthread_t()
            let r = pthread_create(
                &t, &attr,
                { arg in
                    Unmanaged<WorkerPool>.fromOpaque(arg!).takeRetainedValue().loop()
                    return nil
                }, unmanaged.toOpaque())
        #endif
        if r != 0 { unmanaged.release() }
        return r == 0
    }

    private func loop() {
        while true {
            work.wait()
            lock.lock()
            if stopped || queueHead == queue.count {
                let end = stopped  // (read under the lock)
                lock.unlock()
                if end { return }
                continue
            }
            let job = queue[queueHead]
            queueHead += 1
            if queueHead == queue.count {
                queue.removeAll(keepingCapacity: true)
                queueHead = 0
            }
            running += 1
            lock.unlock()

            job.work()

            lock.lock()
            running -= 1
            done.append(job.id)
            lock.unlock()
            var one: UInt8 = 1
            _ = write(wakeWrite, &one, 1)  // (a full pipe already wakes the loop)
        }
    }
}
