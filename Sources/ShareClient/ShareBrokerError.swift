// ShareBrokerError: the typed errors of `ShareBrokerClient`, one case per contract error code
// (-32001 … -32007 and the JSON-RPC ones) plus the transport's own failures.

import ShareProtocol
import ShareSystem

/// What a `ShareBrokerClient` call can fail with.
public enum ShareBrokerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// -32001: no `hello` yet, unknown bundle ID, wrong role, not entitled to the group, bad token.
    case unauthorized(message: String)
    /// -32002: the share, app, event or key does not exist.
    case notFound(message: String)
    /// -32003: no extension's activation rule accepts the items. `candidates` lists the extensions
    /// that would when more than one would and none was named (a tool's `share.send`).
    case notAccepted(message: String, candidates: [ShareTarget])
    /// -32004: nothing can open the URL and no fallback was given.
    case noHandler(message: String)
    /// -32005: storage failure (disk full, permission); nothing was stored.
    case storageFailure(message: String)
    /// -32006: `ifVersion` is not the group's version; `current` is the version it is at.
    case versionConflict(current: Int, message: String)
    /// -32007: the connection's unread replies were over the broker's limit; this one was not
    /// run. Read the replies (or send fewer at once) and retry.
    case tooManyRequests(message: String)
    /// -32602: a parameter is missing or wrong; the message names it. The client also throws it
    /// itself, without sending anything, for a value `JSONEncoder` cannot encode
    /// (`defaultsSet(group:key:encoding:)`) and for an empty `keys` array (`defaultsWatch`).
    case invalidParams(message: String)
    /// -32601: the broker has no such method.
    case methodNotFound(message: String)
    /// -32700: the broker could not parse what was sent.
    case parseError(message: String)
    /// -32600: not a valid request (also: a message over the broker's size limit, which the client
    /// refuses itself without sending it, the connection staying usable).
    case invalidRequest(message: String)
    /// -32603: the broker failed internally.
    case internalError(message: String)
    /// Any other JSON-RPC error code.
    case rpc(code: Int, message: String, data: JSONValue?)
    /// The connection broke while the call was in flight (or before it could be sent). The call
    /// may or may not have taken effect; it is not retried.
    case connectionLost(reason: String)
    /// Nothing answers on the socket path.
    case unreachable(path: String, reason: String)
    /// `connect()` has not been called, or the connection dropped with `reconnect` off (call
    /// `connect()` again), or the client gave up reconnecting.
    case notConnected
    /// The client was closed with `close()`.
    case closed
    /// The calling task was cancelled while waiting for the answer.
    case cancelled
    /// No answer within the client's `requestTimeout`.
    case timeout(method: String)
    /// The app's event stream ended because another connection of the app subscribed and took
    /// its events over (a second instance of the app; `reason` is the broker's). Not a connection
    /// failure: this client stays connected, and `subscribe()` again takes the events back.
    case subscriptionEnded(reason: String)
    /// The broker answered with something this client does not understand; also: a stored
    /// defaults value does not decode as the type `defaultsGet(group:key:as:)` asked for.
    case unexpectedResponse(String)

    /// Maps a JSON-RPC error object to its case.
    public init(_ e: RPCError) {
        switch e.code {
        case -32001: self = .unauthorized(message: e.message)
        case -32002: self = .notFound(message: e.message)
        case -32003:
            let list = e.data?["candidates"]?.arrayValue ?? []
            self = .notAccepted(message: e.message, candidates: list.compactMap(ShareTarget.init(json:)))
        case -32004: self = .noHandler(message: e.message)
        case -32005: self = .storageFailure(message: e.message)
        case -32006: self = .versionConflict(current: e.data?["version"]?.intValue ?? -1, message: e.message)
        case -32007: self = .tooManyRequests(message: e.message)
        case -32602: self = .invalidParams(message: e.message)
        case -32601: self = .methodNotFound(message: e.message)
        case -32700: self = .parseError(message: e.message)
        case -32600: self = .invalidRequest(message: e.message)
        case -32603: self = .internalError(message: e.message)
        default: self = .rpc(code: e.code, message: e.message, data: e.data)
        }
    }

    /// Maps an error of the blocking `BrokerConnection`.
    public init(_ e: ClientError) {
        switch e {
        case .unreachable(let path, let cause): self = .unreachable(path: path, cause: cause)
        case .rpc(let r): self = ShareBrokerError(r)
        case .connection(let why): self = .connectionLost(reason: why)
        case .protocolError(let why): self = .connectionLost(reason: "the peer does not speak sharebroker's protocol: \(why)")
        case .timeout: self = .timeout(method: "")
        }
    }

    /// The JSON-RPC error code, for the cases the broker answers with (also when the client threw
    /// such a case itself: `.invalidParams`, `.invalidRequest`); nil for the transport's cases.
    public var code: Int? {
        switch self {
        case .unauthorized: return -32001
        case .notFound: return -32002
        case .notAccepted: return -32003
        case .noHandler: return -32004
        case .storageFailure: return -32005
        case .versionConflict: return -32006
        case .tooManyRequests: return -32007
        case .invalidParams: return -32602
        case .methodNotFound: return -32601
        case .parseError: return -32700
        case .invalidRequest: return -32600
        case .internalError: return -32603
        case .rpc(let code, _, _): return code
        default: return nil
        }
    }

    /// `.unreachable` for a connect that failed with `cause`: its reason names the cause and what
    /// to check (permission, or whether a broker runs there), decided by the cause's errno.
    static func unreachable(path: String, cause: SystemError) -> ShareBrokerError {
        .unreachable(path: path, reason: "\(cause) \(ClientError.unreachableHint(errno: cause.errno))")
    }

    /// The message: the broker's (which names the cause), or one naming the local failure.
    public var message: String {
        switch self {
        case .unauthorized(let m), .notFound(let m), .noHandler(let m), .storageFailure(let m), .tooManyRequests(let m),
            .invalidParams(let m),
            .methodNotFound(let m), .parseError(let m), .invalidRequest(let m), .internalError(let m):
            return m
        case .notAccepted(let m, _), .versionConflict(_, let m), .rpc(_, let m, _): return m
        case .connectionLost(let why): return "the connection to the broker was lost: \(why)"
        case .unreachable(let path, let why): return "cannot reach the broker at \(path): \(why)"
        case .notConnected:
            return "not connected to the broker (connect() not called yet, the connection dropped with reconnect off, or reconnecting gave up): call connect()"
        case .subscriptionEnded(let why): return "the app's events went to another subscriber: \(why)"
        case .closed: return "the client was closed"
        case .cancelled: return "the call was cancelled"
        case .timeout(let method):
            return method.isEmpty ? "no answer from the broker in time" : "no answer from the broker to '\(method)' in time"
        case .unexpectedResponse(let why): return "unexpected answer from the broker: \(why)"
        }
    }

    /// "message (code)" for broker errors, the message otherwise.
    public var description: String {
        if let code { return "\(message) (\(code))" }
        return message
    }

    /// True for failures of the connection itself (lost, unreachable, not connected), after
    /// which a retry on a new connection may succeed.
    public var isConnectionError: Bool {
        switch self {
        case .connectionLost, .unreachable, .notConnected: return true
        default: return false
        }
    }

    /// True for a refusal that may pass by itself, so that trying again later makes sense: the
    /// broker's storage failing (`-32005`: a store it cannot open now, a full disk), too many
    /// requests (`-32007`), no answer in time.
    public var mayPass: Bool {
        switch self {
        case .storageFailure, .tooManyRequests, .timeout: return true
        default: return false
        }
    }
}
