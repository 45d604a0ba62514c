// A blocking client connection to the broker: JSON-RPC calls with newline framing, and the
// notifications the broker pushes. Used by shareclient, the tests and the benchmark.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareProtocol
import ShareSystem

/// Errors a client sees.
public enum ClientError: Error, Sendable, CustomStringConvertible {
    /// The broker could not be reached on the socket path.
    case unreachable(path: String, cause: SystemError)
    /// The broker answered with a JSON-RPC error.
    case rpc(RPCError)
    /// The connection broke.
    case connection(String)
    /// What answered on the socket sent something that is not JSON-RPC (it is not a broker, or
    /// not this protocol's).
    case protocolError(String)
    /// No answer within the time allowed.
    case timeout

    /// What to check when the socket cannot be reached: permission (the socket's mode or
    /// group, or a directory on the way), else whether a broker runs there at all.
    static func unreachableHint(errno: Int32) -> String {
        if errno == EAGAIN || errno == EWOULDBLOCK {
            return "(the broker takes no new connection now: it is overloaded or stuck)"
        }
        return errno == EACCES || errno == EPERM
            ? "(this user may not use that socket: its mode or group, or a directory on the way, keeps them out; see sharebroker serve --socket-mode)"
            : "(is 'sharebroker serve' running?)"
    }

    /// A message naming the cause.
    public var description: String {
        switch self {
        case .unreachable(let path, let cause):
            return "cannot reach the broker at \(path): \(cause) \(ClientError.unreachableHint(errno: cause.errno))"
        case .rpc(let e): return "\(e.message) (\(e.code))"
        case .connection(let why): return "connection to the broker failed: \(why)"
        case .protocolError(let why): return "the peer on the socket does not speak sharebroker's protocol: \(why)"
        case .timeout: return "timed out waiting for the broker"
        }
    }
}

/// A notification pushed by the broker.
public struct BrokerNotification: Sendable {
    /// The method, e.g. `app.event`.
    public var method: String
    /// Its params.
    public var params: JSONValue?
}

/// One blocking connection. Not thread-safe: use it from one thread (or one task) at a time.
/// The socket is closed when the connection is released (there is no `close()`).
public final class BrokerConnection {
    /// The socket path it is connected to.
    public let socketPath: String
    let fd: Int32
    var inbox: [UInt8] = []
    var inboxOffset = 0
    /// `inbox` holds no newline before this index (a long message is searched once, not again
    /// after every read).
    var searchedTo = 0
    var nextID = 1
    /// Read buffer, reused across reads (no allocation per message).
    var readBuffer = [UInt8](repeating: 0, count: 65536)
    /// Notifications received while waiting for responses, oldest first.
    public private(set) var notifications: [BrokerNotification] = []
    /// How long `call` waits for its answer when not told (milliseconds; -1: for ever). A broker
    /// that accepted the connection but hangs then gives `ClientError.timeout`.
    public var answerTimeoutMillis: Int32 = -1

    /// Connects to the broker's socket. Throws `.unreachable` (with the system error) when
    /// nothing listens there or this user may not connect.
    public init(socketPath: String) throws(ClientError) {
        self.socketPath = socketPath
        do { fd = try UnixSocket.connect(path: socketPath) } catch {
            throw .unreachable(path: socketPath, cause: error)
        }
    }

    deinit { FD.close(fd) }

    /// The raw descriptor (for poll-based callers).
    public var fileDescriptor: Int32 { fd }

    /// Sends raw bytes as they are (for protocol tests). Throws `.connection` when the write
    /// fails (the broker closed the connection).
    public func sendRaw(_ bytes: [UInt8]) throws(ClientError) {
        do { try FD.sendAll(fd, bytes) } catch { throw .connection("\(error)") }
    }

    /// Reads the next JSON line the broker sends (response or notification); nil at end of stream.
    /// `timeoutMillis` bounds the whole wait (-1: for ever), however the message trickles in; what
    /// has already arrived is read even past it (0: only that, without waiting).
    /// Throws `.timeout` past it, `.connection` when the read fails or the stream ends inside a
    /// message, `.protocolError` when the line is not JSON.
    public func readMessage(timeoutMillis: Int32 = -1) throws(ClientError) -> JSONValue? {
        try readMessage(until: Self.deadline(timeoutMillis))
    }

    /// The monotonic time `timeoutMillis` from now (nil for a negative timeout: none).
    static func deadline(_ timeoutMillis: Int32) -> UInt64? {
        timeoutMillis < 0 ? nil : Clock.monotonicNanos() + UInt64(timeoutMillis) * 1_000_000
    }

    /// The next JSON line, waiting until `deadline` (monotonic nanoseconds) at most.
    /// (`late`: whether what has arrived is still read past the deadline, as `readMessage` and
    /// `nextNotification` do; `call` does not, so that a peer sending notifications without end
    /// cannot hold it past its deadline.)
    func readMessage(until deadline: UInt64?, late: Bool = true) throws(ClientError) -> JSONValue? {
        // Reads made past the deadline without waiting (what had already arrived), at most: a
        // peer that keeps sending a line without its end does not hold the caller longer.
        var lateReads = late ? 0 : 64
        while true {
            if let nl = inbox[max(inboxOffset, searchedTo)...].firstIndex(of: 0x0A) {
                let line = inbox[inboxOffset..<nl]
                inboxOffset = nl + 1
                searchedTo = inboxOffset
                if inboxOffset == inbox.count {
                    inbox.removeAll(keepingCapacity: true)
                    inboxOffset = 0
                    searchedTo = 0
                }
                do { return try JSONParser.parse(line) } catch {
                    throw .protocolError("it sent invalid JSON: \(error)")
                }
            }
            if let deadline {
                // Past the deadline what has arrived is still read, without waiting: a zero
                // timeout returns a message that is there (a poll-based caller's case), not
                // `.timeout`.
                let now = Clock.monotonicNanos()
                var wait: Int32 = 0
                if now < deadline {
                    wait = Int32(min((deadline - now + 999_999) / 1_000_000, UInt64(Int32.max)))
                } else {
                    lateReads += 1
                    if lateReads > 64 { throw .timeout }
                }
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let r = poll(&pfd, 1, wait)
                if r == 0 { throw .timeout }
                if r < 0 {
                    if currentErrno() == EINTR { continue }  // (a signal: wait again for what is left)
                    throw .connection("poll: \(String(cString: strerror(currentErrno())))")
                }
            }
            let n: Int
            do {
                n = try readBuffer.withUnsafeMutableBytes { b in
                    Result { () throws(SystemError) -> Int in try FD.readBlocking(fd, into: b) }
                }.get()
            } catch { throw .connection("\(error)") }
            if n == 0 {
                if inboxOffset < inbox.count { throw .connection("broker closed the connection mid-message") }
                return nil
            }
            searchedTo = inbox.count
            if inboxOffset > 0 {
                inbox.removeSubrange(0..<inboxOffset)
                searchedTo -= inboxOffset
                inboxOffset = 0
            }
            inbox.append(contentsOf: readBuffer[0..<n])
        }
    }

    /// Sends a request and waits for its response; notifications that arrive meanwhile are kept.
    /// Throws `.rpc` with the broker's error (also an error without an id: why the broker closes
    /// the connection), `.timeout` past `timeoutMillis` (else `answerTimeoutMillis`; the time to
    /// write the request counts: a request cut off by it leaves the connection closed),
    /// `.connection` when the connection fails or closes before the answer, `.protocolError` when
    /// the peer sends something that is not JSON-RPC.
    @discardableResult
    public func call(_ method: String, _ params: JSONValue? = nil, timeoutMillis: Int32? = nil) throws(ClientError) -> JSONValue {
        // (One deadline for the whole call: notifications arriving meanwhile do not extend it.)
        let deadline = Self.deadline(timeoutMillis ?? answerTimeoutMillis)
        let id = nextID
        nextID += 1
        var out: [UInt8] = []
        RPCCodec.writeRequest(id: .number(String(id)), method: method, params: params, to: &out)
        out.append(0x0A)
        do { try send(out, until: deadline) } catch {
            if case .timeout = error { throw .timeout }
            // The peer hung up: what it said before, if anything, tells more than the broken pipe
            // (not JSON: it is no broker; an error without an id: the broker's reason).
            // Notifications on the way are kept.
            let until = Clock.monotonicNanos() + 100_000_000
            while true {
                let said = Result { () throws(ClientError) -> JSONValue? in try readMessage(until: until) }
                guard case .success(let msg?) = said else {
                    if case .failure(.protocolError(let why)) = said { throw .protocolError(why) }
                    break
                }
                switch RPCIncoming.decode(msg) {
                case .response(.null, .failure(let e))?: throw .rpc(e)
                case .notification(let m, let p)?: notifications.append(BrokerNotification(method: m, params: p))
                default: continue
                }
            }
            throw error
        }
        while true {
            guard let msg = try readMessage(until: deadline, late: false) else {
                throw .connection("broker closed the connection before answering '\(method)'")
            }
            switch RPCIncoming.decode(msg) {
            case .notification(let m, let p)?:
                notifications.append(BrokerNotification(method: m, params: p))
            case .response(let rid, let result)?:
                guard rid == .number(String(id)) else {
                    if case .failure(let e) = result, rid == .null { throw .rpc(e) }
                    continue
                }
                switch result {
                case .success(let v): return v
                case .failure(let e): throw .rpc(e)
                }
            case nil:
                throw .protocolError("it sent something that is not JSON-RPC: \(msg.compactText)")
            }
        }
    }

    /// Writes a whole frame, waiting until `deadline` (monotonic nanoseconds; nil: for ever) at
    /// most for the peer to take it: a broker that stopped reading must not hold a call past its
    /// timeout once the socket's buffer is full. Throws `.timeout` past the deadline; a frame
    /// then cut off shuts the connection down (the broker would read the rest of it as the start
    /// of the next request), so later calls fail with `.connection`.
    func send(_ bytes: [UInt8], until deadline: UInt64?) throws(ClientError) {
        guard let deadline else { return try sendRaw(bytes) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { b -> Int in
                #if canImport(Glibc)
                    Glibc.send(fd, b.baseAddress! + offset, b.count - offset, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                #else
                    Darwin.send(fd, b.baseAddress! + offset, b.count - offset, MSG_DONTWAIT)
                #endif
            }
            if n >= 0 {
                offset += n
                continue
            }
            let e = currentErrno()
            if e == EINTR { continue }
            guard e == EAGAIN || e == EWOULDBLOCK else { throw .connection("\(SystemError("send", errno: e))") }
            let now = Clock.monotonicNanos()
            var r: Int32 = 0
            if now < deadline {
                var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                r = poll(&pfd, 1, Int32(min((deadline - now + 999_999) / 1_000_000, UInt64(Int32.max))))
                if r < 0 {
                    if currentErrno() == EINTR { continue }
                    throw .connection("poll: \(String(cString: strerror(currentErrno())))")
                }
            }
            if r == 0 {
                if offset > 0 {
                    #if canImport(Glibc)
                        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
                    #else
                        _ = Darwin.shutdown(fd, SHUT_RDWR)
                    #endif
                }
                throw .timeout
            }
        }
    }

    /// Sends a notification (no response). Throws `.connection` when the write fails.
    public func notify(_ method: String, _ params: JSONValue? = nil) throws(ClientError) {
        var out: [UInt8] = []
        RPCCodec.writeRequest(id: nil, method: method, params: params, to: &out)
        out.append(0x0A)
        try sendRaw(out)
    }

    /// The next notification: one already received, or waits for one (`timeoutMillis` in all,
    /// however many responses arrive meanwhile; -1: for ever). nil at the end of the stream; an
    /// error the broker sends without an id (why it is closing the connection) is thrown.
    public func nextNotification(timeoutMillis: Int32 = -1) throws(ClientError) -> BrokerNotification? {
        if !notifications.isEmpty { return notifications.removeFirst() }
        let deadline = Self.deadline(timeoutMillis)
        while true {
            guard let msg = try readMessage(until: deadline) else { return nil }
            switch RPCIncoming.decode(msg) {
            case .notification(let m, let p)?: return BrokerNotification(method: m, params: p)
            case .response(.null, .failure(let e))?:
                // Without an id: the broker says why it is closing the connection (a message
                // over its limit, a session a manifest reload ended).
                throw .rpc(e)
            default: continue
            }
        }
    }

    /// `hello` with a role, bundle ID and token; returns the broker's answer. Throws as `call`
    /// (`.rpc` with -32001 for an unknown bundle ID, a wrong role or token, -32602 for a
    /// missing bundle ID).
    @discardableResult
    public func hello(role: String, bundleID: String? = nil, token: String? = nil) throws(ClientError) -> JSONValue {
        var p: JSONObject = ["role": .string(role)]
        if let bundleID { p["bundleID"] = .string(bundleID) }
        if let token { p["token"] = .string(token) }
        return try call("hello", .object(p))
    }
}
