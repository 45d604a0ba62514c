// SocketTransport: one newline-framed connection to the broker for the async client. A dedicated
// reader thread blocks in read(2) (no polling) and hands each parsed message, then the close, to an
// AsyncStream in order; writes are blocking sends made in order on a serial queue, never on the
// caller's thread (a broker that stops reading must not block the client's actor: its timeouts
// and `close()` go on). Only the reader thread closes the descriptor, once no write is under way,
// so a write never reaches a descriptor number the process has reused.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import ShareProtocol
import ShareSystem

final class SocketTransport: @unchecked Sendable {
    /// What the reader thread delivers, in arrival order; `.closed` is the last element.
    enum Inbound: Sendable {
        /// A message and the size of its frame in bytes.
        case message(JSONValue, size: Int)
        case closed(reason: String)
    }

    /// The messages and the close, in order.
    let inbound: AsyncStream<Inbound>
    private let continuation: AsyncStream<Inbound>.Continuation
    private let lock = NSLock()
    /// Held while a write is under way (never with `lock` held first); the reader thread takes
    /// it before closing the descriptor.
    private let writeLock = NSLock()
    /// Where the writes are made, in the order they were queued.
    private let writer = DispatchQueue(label: "sharebroker-client-writer")
    /// The descriptor; -1 once the reader thread closed it. Guarded by `lock`.
    private var fd: Int32
    /// Set once `close()` or the reader ended the connection. Guarded by `lock`.
    private var ended = false
    /// Set by `close()`. Guarded by `lock`.
    private var closedByClient = false
    /// The descriptor the reader thread reads (valid until the reader itself closes it).
    private let readFD: Int32
    /// The client's flow control: the reader waits on its condition (see `waitUntilReadable`).
    private let flow: FlowControl
    /// Bytes of messages handed to `inbound` that the client has not handled yet (it says so
    /// with `handled(_:)`). Guarded by `flow.condition`.
    private var queuedBytes = 0
    /// Requests sent on this connection whose reply has not come yet (the client says so with
    /// `setAwaiting(_:)`): while any does, the reader goes on reading. Guarded by `flow.condition`.
    private var awaiting = 0
    /// Set when the connection ends: the reader stops waiting. Guarded by `flow.condition`.
    private var stopWaiting = false
    /// Past this many bytes handed to `inbound` and not handled yet the reader waits.
    static let inboundLimit = 256 << 10

    /// Connects to the socket at `path` (blocking: a Unix socket answers at once, unless the
    /// listener's queue is full; use `open` not to block the caller).
    convenience init(path: String, flow: FlowControl = FlowControl()) throws(ShareBrokerError) {
        let fd: Int32
        do { fd = try UnixSocket.connect(path: path) } catch {
            throw .unreachable(path: path, cause: error)
        }
        self.init(fd: fd, flow: flow)
    }

    /// Connects to the socket at `path` on a thread of its own, so that neither the caller's
    /// thread nor its actor waits: a broker whose listen queue is full (overloaded, stuck) makes
    /// the connect wait for room, for `timeout` at most (then `.unreachable`, `EAGAIN`).
    static func open(path: String, flow: FlowControl, timeout: Duration) async throws(ShareBrokerError) -> SocketTransport {
        let c = timeout.components
        let millis = Int(clamping: c.seconds) &* 1000 &+ Int(c.attoseconds / 1_000_000_000_000_000)
        let r: Result<Int32, SystemError> = await withCheckedContinuation { done in
            let thread = Thread {
                do throws(SystemError) {
                    done.resume(returning: .success(try UnixSocket.connect(path: path, timeoutMillis: max(1, millis))))
                } catch {
                    done.resume(returning: .failure(error))
                }
            }
            thread.name = "sharebroker-client-connect"
            thread.start()
        }
        switch r {
        case .success(let fd): return SocketTransport(fd: fd, flow: flow)
        case .failure(let error): throw .unreachable(path: path, cause: error)
        }
    }

    private init(fd: Int32, flow: FlowControl) {
        self.flow = flow
        #if canImport(Darwin)
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        self.fd = fd
        readFD = fd
        (inbound, continuation) = AsyncStream<Inbound>.makeStream(bufferingPolicy: .unbounded)
    }

    /// Starts the reader thread.
    func start() {
        let thread = Thread { [self] in readLoop() }
        thread.name = "sharebroker-client-reader"
        thread.start()
    }

    /// Queues bytes (a whole frame) to be sent after those queued before. Fails with
    /// `.connectionLost` once the connection has ended; a write that fails later ends the
    /// connection (the reader then reports `.closed`, failing the calls in flight).
    func send(_ bytes: [UInt8]) throws(ShareBrokerError) {
        lock.lock()
        let over = ended || fd < 0
        lock.unlock()
        if over { throw .connectionLost(reason: "the connection is closed") }
        writer.async { self.write(bytes) }
    }

    /// True once the connection has ended (`close()`, a failed write, or the reader saw its end),
    /// possibly before the reader's `.closed` has been handled: nothing can be sent any more.
    var isEnded: Bool {
        lock.lock()
        defer { lock.unlock() }
        return ended || fd < 0
    }

    private func write(_ bytes: [UInt8]) {
        writeLock.lock()
        defer { writeLock.unlock() }
        lock.lock()
        let fd = self.fd
        let over = ended || fd < 0
        lock.unlock()
        if over { return }
        // (Without `lock`: `close()` may shut the socket down meanwhile, which ends this write;
        // the descriptor stays open, as the reader closes it only under `writeLock`.)
        do { try FD.sendAll(fd, bytes) } catch {
            lock.lock()
            ended = true
            shutdownLocked()
            lock.unlock()
            wakeReader()
        }
    }

    /// Ends the connection: the reader thread wakes up, closes the descriptor and reports
    /// `.closed`. Safe to call more than once and from any thread.
    func close() {
        lock.lock()
        ended = true
        closedByClient = true
        shutdownLocked()
        lock.unlock()
        wakeReader()
    }

    /// The reader stops waiting (the connection ended): it reads, finds the end and reports it.
    private func wakeReader() {
        flow.condition.lock()
        stopWaiting = true
        flow.condition.broadcast()
        flow.condition.unlock()
    }

    /// The client handled a message of `size` bytes from `inbound`.
    func handled(_ size: Int) {
        flow.condition.lock()
        queuedBytes -= size
        flow.condition.broadcast()
        flow.condition.unlock()
    }

    /// How many requests sent on this connection wait for their reply.
    func setAwaiting(_ count: Int) {
        flow.condition.lock()
        if awaiting != count {
            awaiting = count
            flow.condition.broadcast()
        }
        flow.condition.unlock()
    }

    /// Whether the reader is waiting now (for tests).
    var isPaused: Bool { flow.condition.withLock { paused } }
    /// Guarded by `flow.condition`.
    private var paused = false

    /// Blocks the reader thread while reading more would only buffer more for a consumer that does
    /// not read: while a stream's buffer is over its limit and no request waits for its reply, or
    /// while the client has not handled what was already read (over `inboundLimit`). A request
    /// sent meanwhile lets it read again (until its reply is in: what comes before the reply is
    /// buffered past the limit, bounded by what the broker had queued for this connection), so
    /// that calls are not held behind events nobody reads.
    private func waitUntilReadable() {
        flow.condition.lock()
        while !stopWaiting
            && (queuedBytes > Self.inboundLimit || (flow.buffersOverLimit > 0 && awaiting == 0))
        {
            paused = true
            flow.condition.wait()
        }
        paused = false
        flow.condition.unlock()
    }

    private func shutdownLocked() {
        guard fd >= 0 else { return }
        #if canImport(Glibc)
            _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
        #else
            _ = Darwin.shutdown(fd, SHUT_RDWR)
        #endif
    }

    private func readLoop() {
        var buffer: [UInt8] = []
        var scanFrom = 0
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var reason = "the broker closed the connection"
        reading: while true {
            let n: Int
            do {
                n = try chunk.withUnsafeMutableBytes { b in
                    try Result { () throws(SystemError) -> Int in try FD.readBlocking(readFD, into: b) }.get()
                }
            } catch {
                reason = "reading from the broker failed: \(error)"
                break
            }
            if n == 0 { break }
            buffer.append(contentsOf: chunk[0..<n])
            var start = 0
            while let nl = buffer[scanFrom...].firstIndex(of: 0x0A) {
                var end = nl
                if end > start && buffer[end - 1] == 0x0D { end -= 1 }
                if end > start {
                    do {
                        let value = try JSONParser.parse(buffer[start..<end])
                        let size = nl + 1 - start
                        flow.condition.lock()
                        queuedBytes += size
                        flow.condition.unlock()
                        continuation.yield(.message(value, size: size))
                    } catch {
                        reason = "the broker sent invalid JSON: \(error)"
                        break reading
                    }
                }
                start = nl + 1
                scanFrom = start
            }
            if start > 0 {
                buffer.removeSubrange(0..<start)
            }
            scanFrom = buffer.count
            waitUntilReadable()
        }
        lock.lock()
        ended = true
        shutdownLocked()  // (ends a write under way, so that `writeLock` comes free)
        lock.unlock()
        writeLock.lock()
        lock.lock()
        let byUs = closedByClient
        if fd >= 0 {
            FD.close(fd)
            fd = -1
        }
        lock.unlock()
        writeLock.unlock()
        continuation.yield(.closed(reason: byUs ? "the connection was closed" : reason))
        continuation.finish()
    }
}
