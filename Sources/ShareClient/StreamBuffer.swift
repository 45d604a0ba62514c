// StreamBuffer and FlowControl: the bounded buffering of the async client's streams (app events,
// defaults changes). Each stream keeps what its consumer has not taken yet in a StreamBuffer; one
// whose unread messages pass its limit counts in the client's FlowControl, and while any does
// (and no call waits for its reply) the transport's reader stops reading the socket, so that the
// backlog stays in the broker (its output window and slow-subscriber rules apply) instead of in
// this process.

import Foundation

/// Shared by a client's stream buffers and its transports: how many buffers are over their
/// limit. The transport's reader waits on `condition` (see `SocketTransport.waitUntilReadable`).
final class FlowControl: @unchecked Sendable {
    let condition = NSCondition()
    /// Buffers over their limit. Guarded by `condition`.
    private(set) var buffersOverLimit = 0

    func adjust(_ delta: Int) {
        condition.lock()
        buffersOverLimit += delta
        condition.broadcast()
        condition.unlock()
    }
}

/// The elements yielded to one stream that its consumer has not taken yet, and the stream itself:
/// an `AsyncThrowingStream` that takes them out one at a time (so the client knows what is
/// consumed). The stream terminates (`onTermination` runs once) when its consumer's task is
/// cancelled while it waits, or when the stream and its iterator are released, as a
/// continuation-based stream's does.
final class StreamBuffer<Element: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [(element: Element, size: Int)] = []
    private var head = 0
    private var bytes = 0
    private var over = false
    /// nil while open; `.some(nil)` finished normally, `.some(error)` with an error.
    private var end: (any Error)?? = nil
    private var endDelivered = false
    private var terminated = false
    private var waiter: CheckedContinuation<Result<Element?, any Error>, Never>?
    private var terminationHandler: (@Sendable () -> Void)?
    private var drainedHandler: (@Sendable () -> Void)?
    /// Set when an element was dropped at `hardLimit`: every later one is dropped too (so that
    /// what the consumer gets stays in order) until `endOverflow()`.
    private var overflowed = false
    private var drainReported = false
    /// Buffered bytes at which the buffer counts as over its limit (the reader then pauses).
    let limit: Int
    /// Buffered bytes past which elements are dropped (`overflowed`): the reader goes on reading
    /// past `limit` only for a call's reply, and what that brings in stops here.
    let hardLimit: Int
    let flow: FlowControl

    init(limit: Int, flow: FlowControl) {
        self.limit = limit
        hardLimit = limit > Int.max / 4 ? Int.max : limit * 4
        self.flow = flow
    }

    /// Runs once the consumer has taken everything buffered after elements were dropped: the
    /// client then gets them again from the broker (and calls `endOverflow()`).
    var onDrained: (@Sendable () -> Void)? {
        get { lock.withLock { drainedHandler } }
        set { lock.withLock { drainedHandler = newValue } }
    }

    /// Whether elements were dropped and are not got again yet.
    var isOverflowed: Bool { lock.withLock { overflowed } }

    /// Elements are dropped again until `endOverflow()` (getting those dropped failed, and is
    /// tried again).
    func markOverflowed() {
        lock.withLock {
            overflowed = true
            drainReported = true
        }
    }

    /// Elements are taken in again (the client asked the broker for those dropped).
    func endOverflow() {
        lock.withLock {
            overflowed = false
            drainReported = false
        }
    }

    /// Runs once when the stream terminates (cancelled, released); not after `finish`.
    var onTermination: (@Sendable () -> Void)? {
        get { lock.withLock { terminationHandler } }
        set { lock.withLock { terminationHandler = newValue } }
    }

    /// The elements not taken yet, and their size in bytes (as received).
    var buffered: (count: Int, bytes: Int) {
        lock.withLock { (items.count - head, bytes) }
    }

    /// The stream of this buffer (make it once).
    func makeStream() -> AsyncThrowingStream<Element, any Error> {
        let token = Token(self)
        return AsyncThrowingStream(unfolding: { try await token.buffer.next() })
    }

    private final class Token: Sendable {
        let buffer: StreamBuffer
        init(_ b: StreamBuffer) { buffer = b }
        deinit { buffer.terminate() }
    }

    /// Hands `element` (a message of `size` bytes) to the consumer: at once when it waits, else
    /// buffered. Dropped (false) once the stream finished or terminated, and past `hardLimit`
    /// (then every later one too, until `endOverflow()`).
    @discardableResult
    func yield(_ element: Element, size: Int = 0) -> Bool {
        lock.lock()
        guard end == nil, !terminated, !overflowed else {
            lock.unlock()
            return false
        }
        if let w = waiter {
            waiter = nil
            lock.unlock()
            w.resume(returning: .success(element))
            return true
        }
        if head < items.count && bytes + size > hardLimit {
            overflowed = true
            lock.unlock()
            return false
        }
        items.append((element, size))
        bytes += size
        let crossed = !over && bytes >= limit
        if crossed { over = true }
        lock.unlock()
        if crossed { flow.adjust(1) }
        return true
    }

    /// Ends the stream after what is buffered (with `error`, or normally). The buffer no longer
    /// holds the reader back: nothing more comes into it.
    func finish(throwing error: (any Error)? = nil) {
        lock.lock()
        guard end == nil, !terminated else { return lock.unlock() }
        end = .some(error)
        let released = over
        over = false
        var w: CheckedContinuation<Result<Element?, any Error>, Never>? = nil
        if head == items.count, let waiting = waiter {
            waiter = nil
            endDelivered = true
            w = waiting
        }
        lock.unlock()
        if released { flow.adjust(-1) }
        if let w {
            if let error { w.resume(returning: .failure(error)) } else { w.resume(returning: .success(nil)) }
        }
    }

    func next() async throws -> Element? {
        let r: Result<Element?, any Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<Element?, any Error>, Never>) in
                lock.lock()
                if head < items.count {
                    let (element, size) = items[head]
                    head += 1
                    bytes -= size
                    if head == items.count {
                        items.removeAll(keepingCapacity: items.count <= 1024)
                        head = 0
                    } else if head > 1024 && head * 2 > items.count {
                        items.removeSubrange(0..<head)
                        head = 0
                    }
                    let released = over && bytes < limit
                    if released { over = false }
                    var drained: (@Sendable () -> Void)? = nil
                    if overflowed && head == items.count && !drainReported {
                        drainReported = true
                        drained = drainedHandler
                    }
                    lock.unlock()
                    if released { flow.adjust(-1) }
                    drained?()
                    c.resume(returning: .success(element))
                    return
                }
                if let end, !endDelivered {
                    endDelivered = true
                    lock.unlock()
                    if let error = end { c.resume(returning: .failure(error)) } else { c.resume(returning: .success(nil)) }
                    return
                }
                if end != nil || terminated || Task.isCancelled {
                    lock.unlock()
                    c.resume(returning: .success(nil))
                    return
                }
                waiter = c
                lock.unlock()
            }
        } onCancel: {
            self.terminate()
        }
        return try r.get()
    }

    /// The consumer is gone (its task cancelled, the stream released): what is buffered is
    /// dropped and `onTermination` runs (once).
    func terminate() {
        lock.lock()
        guard !terminated else { return lock.unlock() }
        terminated = true
        let finished = end != nil
        items.removeAll()
        head = 0
        bytes = 0
        let released = over
        over = false
        let w = waiter
        waiter = nil
        let handler = terminationHandler
        terminationHandler = nil
        drainedHandler = nil
        lock.unlock()
        if released { flow.adjust(-1) }
        w?.resume(returning: .success(nil))
        if !finished { handler?() }
    }
}
