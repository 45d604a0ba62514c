// JSON-RPC 2.0 envelopes: request ids, requests, error objects, the decoding of one incoming
// frame into requests (single or batch) and the encoding of responses and notifications.

/// A JSON-RPC request id: a string, a number (kept as its lexeme) or null.
public enum RequestID: Sendable, Hashable, CustomStringConvertible {
    /// A string id.
    case string(String)
    /// A numeric id, as sent.
    case number(String)
    /// `null` (allowed by the spec, discouraged).
    case null

    /// The id as a JSON value.
    public var json: JSONValue {
        switch self {
        case .string(let s): return .string(s)
        case .number(let n): return .number(n)
        case .null: return .null
        }
    }

    /// The id as shown in logs.
    public var description: String { json.compactText }
}

/// The error codes of JSON-RPC 2.0 and of the sharebroker contract.
public enum ErrorCode: Int, Sendable, CaseIterable {
    /// Invalid JSON was received.
    case parseError = -32700
    /// The JSON sent is not a valid Request object (or a message is over the size limit).
    case invalidRequest = -32600
    /// The method does not exist.
    case methodNotFound = -32601
    /// Invalid method parameters.
    case invalidParams = -32602
    /// Internal JSON-RPC error.
    case internalError = -32603
    /// No `hello` yet, unknown bundle ID, wrong role, not entitled to the group, bad token.
    case unauthorized = -32001
    /// Share, app, event or key not found.
    case notFound = -32002
    /// No extension's activation rule accepts the items.
    case notAccepted = -32003
    /// Nothing can open the URL and no fallback was given.
    case noHandler = -32004
    /// Storage failure (disk full, permission): nothing was stored.
    case storageFailure = -32005
    /// Version conflict: `ifVersion` is not the group's current version (a sharebroker addition).
    case versionConflict = -32006
    /// Too many replies unread on one connection (or, over the broker's output budget, more than
    /// its fair share): the request was not run (a sharebroker addition).
    case tooManyRequests = -32007

    /// The standard message for the code.
    public var defaultMessage: String {
        switch self {
        case .parseError: return "Parse error"
        case .invalidRequest: return "Invalid Request"
        case .methodNotFound: return "Method not found"
        case .invalidParams: return "Invalid params"
        case .internalError: return "Internal error"
        case .unauthorized: return "Unauthorized"
        case .notFound: return "Not found"
        case .notAccepted: return "Not accepted"
        case .noHandler: return "No handler"
        case .storageFailure: return "Storage failure"
        case .versionConflict: return "Version conflict"
        case .tooManyRequests: return "Too many unread replies"
        }
    }
}

/// A JSON-RPC error object.
public struct RPCError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The numeric code (see `ErrorCode`).
    public var code: Int
    /// A short human-readable message that names the cause.
    public var message: String
    /// Optional structured detail.
    public var data: JSONValue?

    /// Creates an error with a known code.
    public init(_ code: ErrorCode, _ message: String? = nil, data: JSONValue? = nil) {
        self.code = code.rawValue
        self.message = message ?? code.defaultMessage
        self.data = data
    }

    /// Creates an error with any code (e.g. one received from a broker).
    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    /// The error object as JSON.
    public var json: JSONValue {
        var o: JSONObject = ["code": .int(code), "message": .string(message)]
        if let data { o["data"] = data }
        return .object(o)
    }

    /// Decodes an error object.
    public init?(json: JSONValue) {
        guard let code = json["code"]?.intValue, let message = json["message"]?.stringValue else { return nil }
        self.init(code: code, message: message, data: json["data"])
    }

    /// "message (code)".
    public var description: String { "\(message) (\(code))" }

    /// Shorthand for -32602 with a message.
    public static func invalidParams(_ message: String) -> RPCError { RPCError(.invalidParams, message) }
}

/// One decoded request or notification.
public struct RPCRequest: Sendable {
    /// The id; nil for a notification (no reply is sent).
    public var id: RequestID?
    /// The method name.
    public var method: String
    /// The params: an object, an array, or nil when absent (or read into `shareSendParams`: a
    /// request decoded that way re-encodes with `shareSendParams.json` as its params).
    public var params: JSONValue?
    /// A `share.send`'s params read without a tree (`RPCCodec.decode(_:readingShareSend:)` with
    /// `true`); `params` is then nil. Never set otherwise.
    public var shareSendParams: ShareSendParams?

    /// Creates a request.
    public init(id: RequestID?, method: String, params: JSONValue?, shareSendParams: ShareSendParams? = nil) {
        self.id = id
        self.method = method
        self.params = params
        self.shareSendParams = shareSendParams
    }

    /// True when no reply is expected.
    public var isNotification: Bool { id == nil }
}

/// What one incoming frame holds.
public enum IncomingMessage: Sendable {
    /// A single message: a valid request, or an error to answer with (id if it could be read).
    case single(Result<RPCRequest, RPCErrorReply>)
    /// A non-empty batch; each member is decoded independently.
    case batch([Result<RPCRequest, RPCErrorReply>])
}

/// An error reply to send for a message that could not be used as a request.
public struct RPCErrorReply: Error, Sendable {
    /// The id to answer with (null when it could not be read).
    public var id: RequestID
    /// The error.
    public var error: RPCError
    /// Creates a reply.
    public init(id: RequestID, error: RPCError) {
        self.id = id
        self.error = error
    }
}

/// Decoding and encoding of JSON-RPC 2.0 messages.
public enum RPCCodec {
    /// Decodes one frame. Invalid JSON → -32700 (id null); an empty batch → -32600 (id null).
    ///
    /// With `readingShareSend`, a `share.send` whose params are in the commonest shape (see
    /// `ShareSendParams`) and come after its method gets them in `shareSendParams`, not as a tree
    /// in `params` (the broker's hot path). Other requests decode the same either way.
    public static func decode(
        _ frame: UnsafeRawBufferPointer, readingShareSend: Bool = false, maxBatchMembers: Int = .max
    ) -> IncomingMessage {
        // A UTF-8 byte order mark before a message is ignored (RFC 8259 lets a parser; a client
        // that encodes each message with a preamble sends one every time).
        if frame.count >= 3, frame[0] == 0xEF, frame[1] == 0xBB, frame[2] == 0xBF {
            return decode(
                UnsafeRawBufferPointer(rebasing: frame[3...]), readingShareSend: readingShareSend, maxBatchMembers: maxBatchMembers)
        }
        // The usual request, read without a tree for its envelope; anything else (batches,
        // errors, unusual shapes) goes the general way below.
        if let request = JSONParser.parseRequestEnvelope(frame, readingShareSend: readingShareSend) {
            return .single(.success(request))
        }
        let value: JSONValue
        do {
            value = try JSONParser.parseBuffer(frame, topLevelItemLimit: maxBatchMembers)
        } catch {
            if error.isOverItemLimit {
                // (found at the first member past the limit: the rest is neither parsed nor run)
                return .single(
                    .failure(
                        RPCErrorReply(
                            id: .null,
                            error: RPCError(
                                .invalidRequest,
                                "Invalid Request: a batch of more than \(maxBatchMembers) members is over the limit (--max-batch); none of it was run"
                            ))))
            }
            return .single(.failure(RPCErrorReply(id: .null, error: RPCError(.parseError, "Parse error: \(error)"))))
        }
        return decode(value)
    }

    /// Decodes a parsed JSON value as a message or batch.
    public static func decode(_ value: JSONValue) -> IncomingMessage {
        if case .array(let items) = value {
            if items.isEmpty {
                return .single(
                    .failure(RPCErrorReply(id: .null, error: RPCError(.invalidRequest, "Invalid Request: empty batch"))))
            }
            return .batch(items.map(decodeRequest))
        }
        return .single(decodeRequest(value))
    }

    /// Validates one request object.
    public static func decodeRequest(_ value: JSONValue) -> Result<RPCRequest, RPCErrorReply> {
        guard case .object(let obj) = value else {
            return .failure(
                RPCErrorReply(id: .null, error: RPCError(.invalidRequest, "Invalid Request: expected an object, got \(value.typeName)")))
        }
        var id: RequestID? = nil
        var idValid = true
        if let rawID = obj["id"] {
            switch rawID {
            case .string(let s): id = .string(s)
            case .number(let n): id = .number(n)
            case .null: id = .null
            default: idValid = false
            }
        }
        func invalid(_ why: String) -> Result<RPCRequest, RPCErrorReply> {
            .failure(RPCErrorReply(id: idValid ? (id ?? .null) : .null, error: RPCError(.invalidRequest, "Invalid Request: \(why)")))
        }
        if !idValid { return invalid("id must be a string, a number or null") }
        guard obj["jsonrpc"] == .string("2.0") else { return invalid("\"jsonrpc\" must be \"2.0\"") }
        guard let methodValue = obj["method"] else { return invalid("missing \"method\"") }
        guard case .string(let method) = methodValue else { return invalid("\"method\" must be a string") }
        var params = obj["params"]
        if let p = params {
            switch p {
            case .object, .array: break
            // (JSON-RPC 2.0 says "MAY be omitted"; some client libraries send null for no
            // params, e.g. Go's sourcegraph/jsonrpc2 by default: taken as omitted)
            case .null: params = nil
            default: return invalid("\"params\" must be an object or an array")
            }
        }
        return .success(RPCRequest(id: id, method: method, params: params))
    }

    /// Appends the bytes of a success response.
    public static func writeResult(id: RequestID, result: JSONValue, to out: inout [UInt8]) {
        writeHead(id: id, then: #","result":"#, to: &out)
        result.write(to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// `{"jsonrpc":"2.0","id":<id>` and `tail`, a numeric id's in one append (one per reply saved
    /// or two: each costs some 65 instructions).
    @inline(__always) static func writeHead(id: RequestID, then tail: StaticString, to out: inout [UInt8]) {
        switch id {
        case .number(let n):
            let done: Void? = n.utf8.withContiguousStorageIfAvailable { digits in
                JSONValue.appendJoined(#"{"jsonrpc":"2.0","id":"#, digits, tail, to: &out)
            }
            if done != nil { return }
        case .string(let s):
            JSONValue.writeString(s, after: #"{"jsonrpc":"2.0","id":"#, to: &out)
            JSONValue.appendStatic(tail, to: &out)
            return
        case .null: break
        }
        JSONValue.appendStatic(#"{"jsonrpc":"2.0","id":"#, to: &out)
        id.json.write(to: &out)
        JSONValue.appendStatic(tail, to: &out)
    }

    /// Appends the bytes of a success response whose result is already encoded JSON
    /// (for example by `JSONObjectWriter`).
    public static func writeResult(id: RequestID, encodedResult: [UInt8], to out: inout [UInt8]) {
        writeHead(id: id, then: #","result":"#, to: &out)
        out.append(contentsOf: encodedResult)
        out.append(UInt8(ascii: "}"))
    }

    /// Appends the bytes of an error response.
    public static func writeError(id: RequestID, error: RPCError, to out: inout [UInt8]) {
        writeHead(id: id, then: #","error":"#, to: &out)
        error.json.write(to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// Appends the bytes of a notification (or, with `id`, a request).
    public static func writeRequest(id: RequestID?, method: String, params: JSONValue?, to out: inout [UInt8]) {
        JSONValue.appendStatic(#"{"jsonrpc":"2.0","#, to: &out)
        if let id {
            JSONValue.appendStatic(#""id":"#, to: &out)
            id.json.write(to: &out)
            out.append(UInt8(ascii: ","))
        }
        JSONValue.appendStatic(#""method":"#, to: &out)
        JSONValue.writeString(method, to: &out)
        if let params {
            JSONValue.appendStatic(#","params":"#, to: &out)
            params.write(to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}

/// A response or notification received by a client.
public enum RPCIncoming: Sendable {
    /// A response to request `id`.
    case response(id: RequestID, result: Result<JSONValue, RPCError>)
    /// A notification from the broker.
    case notification(method: String, params: JSONValue?)

    /// Decodes a message sent by the broker.
    public static func decode(_ value: JSONValue) -> RPCIncoming? {
        guard case .object(let obj) = value else { return nil }
        if case .string(let method)? = obj["method"], obj["id"] == nil {
            return .notification(method: method, params: obj["params"])
        }
        let id: RequestID
        switch obj["id"] {
        case .string(let s)?: id = .string(s)
        case .number(let n)?: id = .number(n)
        default: id = .null
        }
        if let err = obj["error"], let e = RPCError(json: err) { return .response(id: id, result: .failure(e)) }
        if let result = obj["result"] { return .response(id: id, result: .success(result)) }
        return nil
    }
}
