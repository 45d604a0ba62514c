// RPCCodec and RPCIncoming: JSON-RPC 2.0 request validation, batches, response encoding.

import Testing

@testable import ShareProtocol

/// The single request decoded from a frame, or nil.
private func single(_ s: String) -> Result<RPCRequest, RPCErrorReply>? {
    if case .single(let r) = decodeFrame(s) { return r }
    return nil
}

private func request(_ s: String) -> RPCRequest? {
    if case .success(let r)? = single(s) { return r }
    return nil
}

private func failure(_ s: String) -> RPCErrorReply? {
    if case .failure(let e)? = single(s) { return e }
    return nil
}

private func batch(_ s: String) -> [Result<RPCRequest, RPCErrorReply>]? {
    if case .batch(let items) = decodeFrame(s) { return items }
    return nil
}

private func written(_ write: (inout [UInt8]) -> Void) -> [UInt8] {
    var out: [UInt8] = []
    write(&out)
    return out
}

@Suite("RPCCodec: decode")
struct RPCDecodeTests {
    @Test func validRequest() throws {
        let r = try #require(request(#"{"jsonrpc":"2.0","id":1,"method":"share.put","params":{"a":[1]}}"#))
        #expect(r.id == .number("1"))
        #expect(r.method == "share.put")
        #expect(r.params == ["a": [1]])
        #expect(!r.isNotification)
    }

    @Test func memberOrderDoesNotMatter() throws {
        let r = try #require(request(#"{"params":[1],"method":"m","id":"x","jsonrpc":"2.0"}"#))
        #expect(r.id == .string("x"))
        #expect(r.params == [1])
    }

    @Test func notification() throws {
        let r = try #require(request(#"{"jsonrpc":"2.0","method":"event.ping"}"#))
        #expect(r.id == nil)
        #expect(r.isNotification)
        #expect(r.params == nil)
    }

    @Test(arguments: [
        (#""abc""#, RequestID.string("abc")),
        (#""""#, RequestID.string("")),
        ("7", RequestID.number("7")),
        ("-1", RequestID.number("-1")),
        ("1.5", RequestID.number("1.5")),
        ("123456789012345678901234567890", RequestID.number("123456789012345678901234567890")),
        ("null", RequestID.null),
    ])
    func idKinds(_ idText: String, _ expected: RequestID) throws {
        let r = try #require(request(#"{"jsonrpc":"2.0","id":\#(idText),"method":"m"}"#))
        #expect(r.id == expected)
        #expect(!r.isNotification)  // "id":null is a request, not a notification
    }

    @Test(arguments: ["{}", "{\"a\":1}", "true", "false", "[1]", "[]"])
    func idOfWrongTypeIsInvalidWithNullID(_ idText: String) throws {
        let e = try #require(failure(#"{"jsonrpc":"2.0","id":\#(idText),"method":"m"}"#))
        #expect(e.id == .null)
        #expect(e.error.code == ErrorCode.invalidRequest.rawValue)
    }

    @Test func missingJsonrpc() throws {
        let e = try #require(failure(#"{"id":5,"method":"m"}"#))
        #expect(e.error.code == -32600)
        #expect(e.id == .number("5"))  // the id was readable, so the reply uses it
    }

    @Test(arguments: [#""1.0""#, #""2""#, "2.0", "null", #""2.0 ""#, "[\"2.0\"]"])
    func wrongVersion(_ version: String) throws {
        let e = try #require(failure(#"{"jsonrpc":\#(version),"id":"q","method":"m"}"#))
        #expect(e.error.code == -32600)
        #expect(e.id == .string("q"))
    }

    @Test func missingMethod() throws {
        let e = try #require(failure(#"{"jsonrpc":"2.0","id":3}"#))
        #expect(e.error.code == -32600)
        #expect(e.id == .number("3"))
    }

    @Test(arguments: ["1", "null", "true", "[]", "{}", "[\"m\"]"])
    func methodNotString(_ method: String) throws {
        let e = try #require(failure(#"{"jsonrpc":"2.0","id":3,"method":\#(method)}"#))
        #expect(e.error.code == -32600)
        #expect(e.id == .number("3"))
    }

    @Test(arguments: [#""str""#, "1", "true", "false"])
    func paramsMustBeStructured(_ params: String) throws {
        let e = try #require(failure(#"{"jsonrpc":"2.0","id":4,"method":"m","params":\#(params)}"#))
        #expect(e.error.code == -32600)
        #expect(e.id == .number("4"))
    }

    /// A byte order mark before a message is ignored (RFC 8259 lets a parser).
    @Test func byteOrderMarkBeforeAMessageIsIgnored() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array(#"{"jsonrpc":"2.0","id":3,"method":"m"}"#.utf8)
        let decoded = bytes.withUnsafeBytes { RPCCodec.decode($0) }
        guard case .single(.success(let r)) = decoded else {
            Issue.record("\(decoded)")
            return
        }
        #expect(r.method == "m" && r.id == .number("3"))
    }

    /// Null params are taken as omitted (Go's sourcegraph/jsonrpc2 sends them by default).
    @Test func nullParamsAreOmittedParams() throws {
        let r = try #require(request(#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#))
        #expect(r.params == nil)
        #expect(r.id == .number("1"))
    }

    @Test func paramsArrayAndObjectOK() throws {
        #expect(try #require(request(#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1,"x"]}"#)).params == [1, "x"])
        #expect(try #require(request(#"{"jsonrpc":"2.0","id":1,"method":"m","params":[]}"#)).params == [])
        #expect(try #require(request(#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}"#)).params == .object(JSONObject()))
    }

    @Test(arguments: ["1", #""req""#, "null", "true", "[1]"])
    func nonObjectIsInvalid(_ frame: String) throws {
        // A non-empty array is a batch; everything else that is not an object is one invalid request.
        if frame.hasPrefix("[") {
            let items = try #require(batch(frame))
            guard case .failure(let e) = try #require(items.first) else {
                Issue.record("expected failure")
                return
            }
            #expect(e.error.code == -32600)
            #expect(e.id == .null)
        } else {
            let e = try #require(failure(frame))
            #expect(e.error.code == -32600)
            #expect(e.id == .null)
        }
    }

    @Test(arguments: ["", "{", #"{"jsonrpc":"2.0","id":1,"method":"m""#, "[1,]", "{'a':1}", "\u{FF}"])
    func invalidJSONIsParseError(_ frame: String) throws {
        let e = try #require(failure(frame))
        #expect(e.error.code == ErrorCode.parseError.rawValue)
        #expect(e.id == .null)
    }

    @Test func invalidUTF8FrameIsParseError() throws {
        let msg: IncomingMessage = [UInt8]([0x7B, 0xFF, 0x7D]).withUnsafeBytes { RPCCodec.decode($0) }
        guard case .single(.failure(let e)) = msg else {
            Issue.record("expected a single failure")
            return
        }
        #expect(e.error.code == -32700)
        #expect(e.id == .null)
    }

    @Test func emptyBatchIsSingleInvalidRequest() throws {
        for frame in ["[]", " [ ] "] {
            let e = try #require(failure(frame))
            #expect(e.error.code == -32600)
            #expect(e.id == .null)
        }
    }

    @Test func batchKeepsOrderAndPerMemberErrors() throws {
        let items = try #require(
            batch(
                #"[{"jsonrpc":"2.0","id":1,"method":"a"},1,{"jsonrpc":"2.0","method":"b"},{"jsonrpc":"1.0","id":"x","method":"c"},{"jsonrpc":"2.0","id":true,"method":"d"},{"jsonrpc":"2.0","id":"z","method":"e","params":[3]}]"#
            ))
        #expect(items.count == 6)
        guard items.count == 6 else { return }
        #expect(try items[0].get().method == "a")
        #expect(try items[0].get().id == .number("1"))
        guard case .failure(let e1) = items[1] else { Issue.record("item 1"); return }
        #expect(e1.error.code == -32600)
        #expect(e1.id == .null)
        #expect(try items[2].get().method == "b")
        #expect(try items[2].get().isNotification)
        guard case .failure(let e3) = items[3] else { Issue.record("item 3"); return }
        #expect(e3.id == .string("x"))
        #expect(e3.error.code == -32600)
        guard case .failure(let e4) = items[4] else { Issue.record("item 4"); return }
        #expect(e4.id == .null)
        #expect(try items[5].get().id == .string("z"))
        #expect(try items[5].get().params == [3])
    }

    @Test func nestedBatchMemberIsInvalid() throws {
        let items = try #require(batch(#"[[{"jsonrpc":"2.0","id":1,"method":"a"}]]"#))
        #expect(items.count == 1)
        guard case .failure(let e)? = items.first else { Issue.record("expected failure"); return }
        #expect(e.error.code == -32600)
    }

    @Test func decodeParsedValue() throws {
        let v: JSONValue = ["jsonrpc": "2.0", "id": 9, "method": "m"]
        guard case .single(.success(let r)) = RPCCodec.decode(v) else {
            Issue.record("expected success")
            return
        }
        #expect(r.id == .number("9"))
        guard case .success(let r2) = RPCCodec.decodeRequest(v) else {
            Issue.record("expected success")
            return
        }
        #expect(r2.method == "m")
    }
}

@Suite("RPCCodec: encode")
struct RPCEncodeTests {
    static let ids: [RequestID] = [.number("1"), .number("-3.5e2"), .number("123456789012345678901234567890"), .string("abc"),
        .string("we\"ird\\id\n😀"), .string(""), .null,
        // Past the 128 bytes a reply's head is assembled in (the plain path).
        .number(String(repeating: "9", count: 200)), .string(String(repeating: "x", count: 300))]

    @Test(arguments: ids)
    func writeResultParsesBack(_ id: RequestID) throws {
        let result: JSONValue = ["ok": true, "list": [1, "two\n", nil], "t": "é"]
        let bytes = written { RPCCodec.writeResult(id: id, result: result, to: &$0) }
        #expect(!bytes.contains(0x0A))
        let v = try JSONParser.parse(bytes)
        #expect(v["jsonrpc"] == "2.0")
        #expect(v["id"] == id.json)
        #expect(v["result"] == result)
        #expect(v["error"] == nil)
        // And a client decodes it as the same response.
        guard case .response(let rid, .success(let r))? = RPCIncoming.decode(v) else {
            Issue.record("not decoded as a success response")
            return
        }
        #expect(rid == id)
        #expect(r == result)
    }

    @Test(arguments: ids)
    func writeErrorParsesBack(_ id: RequestID) throws {
        let error = RPCError(.notFound, "share \"x\" not found", data: ["share": "x"])
        let bytes = written { RPCCodec.writeError(id: id, error: error, to: &$0) }
        #expect(!bytes.contains(0x0A))
        let v = try JSONParser.parse(bytes)
        #expect(v["jsonrpc"] == "2.0")
        #expect(v["id"] == id.json)
        #expect(v["result"] == nil)
        #expect(v["error"]?["code"] == .int(-32002))
        #expect(v["error"]?["message"] == .string("share \"x\" not found"))
        #expect(v["error"]?["data"] == ["share": "x"])
        guard case .response(let rid, .failure(let e))? = RPCIncoming.decode(v) else {
            Issue.record("not decoded as an error response")
            return
        }
        #expect(rid == id)
        #expect(e == error)
    }

    @Test func writeErrorWithoutData() throws {
        let bytes = written { RPCCodec.writeError(id: .null, error: RPCError(.parseError), to: &$0) }
        #expect(text(bytes) == #"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#)
    }

    @Test(arguments: ids)
    func encodedResultMatchesTheTreeResult(_ id: RequestID) {
        let result: JSONValue = ["shareID": "sh-1", "n": 2]
        let tree = written { RPCCodec.writeResult(id: id, result: result, to: &$0) }
        let encoded = written { RPCCodec.writeResult(id: id, encodedResult: Array(result.compactText.utf8), to: &$0) }
        #expect(text(encoded) == text(tree))
        var reference = Array(#"{"jsonrpc":"2.0","id":"#.utf8)
        id.json.write(to: &reference)
        reference += Array(#","result":"#.utf8) + Array(result.compactText.utf8) + [UInt8(ascii: "}")]
        #expect(text(tree) == text(reference))
    }

    @Test func writeResultExactBytes() {
        let bytes = written { RPCCodec.writeResult(id: .number("1"), result: ["a": 1], to: &$0) }
        #expect(text(bytes) == #"{"jsonrpc":"2.0","id":1,"result":{"a":1}}"#)
    }

    @Test func writeRequestAndNotificationRoundTrip() throws {
        let req = written { RPCCodec.writeRequest(id: .string("r1"), method: "share.get", params: ["id": "s"], to: &$0) }
        #expect(text(req) == #"{"jsonrpc":"2.0","id":"r1","method":"share.get","params":{"id":"s"}}"#)
        let r = try #require(request(text(req)))
        #expect(r.id == .string("r1"))
        #expect(r.method == "share.get")
        #expect(r.params == ["id": "s"])

        let note = written { RPCCodec.writeRequest(id: nil, method: "event\n\"x\"", params: nil, to: &$0) }
        #expect(!note.contains(0x0A))
        let n = try #require(request(text(note)))
        #expect(n.isNotification)
        #expect(n.method == "event\n\"x\"")
        #expect(n.params == nil)
    }

    @Test func writersAppend() throws {
        var out = utf8("Content-Length: 0\r\n\r\n")
        RPCCodec.writeResult(id: .number("1"), result: nil, to: &out)
        #expect(text(out) == "Content-Length: 0\r\n\r\n" + #"{"jsonrpc":"2.0","id":1,"result":null}"#)
    }

    @Test func requestIDDescriptionAndJSON() {
        #expect(RequestID.string("a\"b").description == #""a\"b""#)
        #expect(RequestID.number("42").description == "42")
        #expect(RequestID.null.description == "null")
        #expect(RequestID.number("42").json == .number("42"))
    }

    @Test func errorCodesAndMessages() {
        #expect(ErrorCode.parseError.rawValue == -32700)
        #expect(ErrorCode.invalidRequest.rawValue == -32600)
        #expect(ErrorCode.methodNotFound.rawValue == -32601)
        #expect(ErrorCode.invalidParams.rawValue == -32602)
        #expect(ErrorCode.internalError.rawValue == -32603)
        for c in ErrorCode.allCases { #expect(!c.defaultMessage.isEmpty) }
        #expect(RPCError(.methodNotFound).message == "Method not found")
        #expect(RPCError.invalidParams("bad").code == -32602)
        #expect(RPCError.invalidParams("bad").message == "bad")
        #expect(RPCError(code: 7, message: "m").description == "m (7)")
        #expect(RPCError(.internalError).json == ["code": -32603, "message": "Internal error"])
    }

    @Test func rpcErrorFromJSON() {
        #expect(RPCError(json: ["code": -32601, "message": "nope"]) == RPCError(code: -32601, message: "nope"))
        #expect(RPCError(json: ["code": .number("-32601.0"), "message": "x"])?.code == -32601)
        #expect(RPCError(json: ["code": -1, "message": "x", "data": [1]])?.data == [1])
        #expect(RPCError(json: ["code": "1", "message": "x"]) == nil)
        #expect(RPCError(json: ["code": 1]) == nil)
        #expect(RPCError(json: ["message": "x"]) == nil)
        #expect(RPCError(json: ["code": .number("1.5"), "message": "x"]) == nil)
        #expect(RPCError(json: "x") == nil)
    }
}

@Suite("RPCIncoming")
struct RPCIncomingTests {
    private func incoming(_ s: String) throws -> RPCIncoming? {
        RPCIncoming.decode(try JSONParser.parse(s))
    }

    @Test func successResponse() throws {
        guard case .response(let id, .success(let result))? = try incoming(#"{"jsonrpc":"2.0","id":3,"result":{"ok":true}}"#) else {
            Issue.record("expected success response")
            return
        }
        #expect(id == .number("3"))
        #expect(result == ["ok": true])
    }

    @Test func nullResultIsStillASuccess() throws {
        guard case .response(let id, .success(let result))? = try incoming(#"{"jsonrpc":"2.0","id":"s","result":null}"#) else {
            Issue.record("expected success response")
            return
        }
        #expect(id == .string("s"))
        #expect(result == .null)
    }

    @Test func errorResponse() throws {
        guard
            case .response(let id, .failure(let e))? = try incoming(
                #"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":{"why":"x"}}}"#)
        else {
            Issue.record("expected error response")
            return
        }
        #expect(id == .null)
        #expect(e.code == -32600)
        #expect(e.message == "Invalid Request")
        #expect(e.data == ["why": "x"])
    }

    @Test func notification() throws {
        guard case .notification(let method, let params)? = try incoming(#"{"jsonrpc":"2.0","method":"share.changed","params":{"id":"a"}}"#)
        else {
            Issue.record("expected notification")
            return
        }
        #expect(method == "share.changed")
        #expect(params == ["id": "a"])
        guard case .notification(let m2, let p2)? = try incoming(#"{"jsonrpc":"2.0","method":"tick"}"#) else {
            Issue.record("expected notification")
            return
        }
        #expect(m2 == "tick")
        #expect(p2 == nil)
    }

    @Test(arguments: ["1", "[]", #""x""#, "null", #"{"jsonrpc":"2.0","id":1}"#, #"{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}"#])
    func notAMessage(_ s: String) throws {
        #expect(try incoming(s) == nil)
    }

    @Test func roundTripThroughWriters() throws {
        let note = written { RPCCodec.writeRequest(id: nil, method: "n", params: [1, 2], to: &$0) }
        guard case .notification(let m, let p)? = RPCIncoming.decode(try JSONParser.parse(note)) else {
            Issue.record("expected notification")
            return
        }
        #expect(m == "n")
        #expect(p == [1, 2])
    }
}

/// The envelope fast path (`JSONParser.parseRequestEnvelope`) accepts the usual requests, and
/// whatever it accepts the general path (tree + `decodeRequest`) decodes to the same request.
@Suite struct RequestEnvelopeFastPathTests {
    static let usual = [
        #"{"jsonrpc":"2.0","id":1,"method":"broker.status"}"#,
        #"{"jsonrpc":"2.0","id":"a-1","method":"url.open","params":{"url":"benchapp://x?i=1"}}"#,
        #"{"method":"app.ack","params":[1,2],"id":-0.5e3,"jsonrpc":"2.0"}"#,
        #"  { "jsonrpc" : "2.0" , "method" : "m\u00e9\n" , "id" : null }  "#,
        #"{"jsonrpc":"2.0","method":"notify","params":{}}"#,
        #"{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":{"b":[{"c":null}]}}}"#,
    ]
    static let unusual = [
        #"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,  // repeated member: last wins
        #"{"jsonrpc":"2.0","id":1,"method":"a","extra":true}"#,
        #"{"json\u0072pc":"2.0","id":1,"method":"a"}"#,
        #"{"jsonrpc":"2\u002e0","id":1,"method":"a"}"#,
        #"{"jsonrpc":"2.0","id":true,"method":"a"}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"a","params":3}"#,
        #"{"jsonrpc":"1.0","id":1,"method":"a"}"#,
        #"{"id":1,"method":"a"}"#,
        #"{"jsonrpc":"2.0","id":1}"#,
        #"{"jsonrpc":"2.0","id":01,"method":"a"}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"a"} x"#,
        #"{"jsonrpc":"2.0","id":1,"method":"a""#,
        #"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#,
        #"{}"#, "", "null",
    ]

    /// The general path's answer for a frame.
    static func general(_ frame: [UInt8]) -> Result<RPCRequest, RPCErrorReply>? {
        let parsed = frame.withUnsafeBytes { buf in
            Result { () throws(JSONParseError) -> JSONValue in try JSONParser.parseBuffer(buf) }
        }
        guard case .success(let value) = parsed else { return nil }
        return RPCCodec.decodeRequest(value)
    }

    static func fast(_ frame: [UInt8]) -> RPCRequest? {
        frame.withUnsafeBytes { JSONParser.parseRequestEnvelope($0) }
    }

    static func agree(_ frame: [UInt8]) -> Bool {
        guard let f = fast(frame) else { return true }
        guard case .success(let g)? = general(frame) else { return false }
        return f.id == g.id && f.method == g.method && f.params == g.params
    }

    @Test func usualRequestsTakeTheFastPathAndAgree() {
        for s in Self.usual {
            let frame = Array(s.utf8)
            #expect(Self.fast(frame) != nil, "\(s)")
            #expect(Self.agree(frame), "\(s)")
        }
    }

    @Test func unusualFramesTakeTheGeneralPath() {
        for s in Self.unusual {
            #expect(Self.fast(Array(s.utf8)) == nil, "\(s)")
        }
        // ... which still decodes them as before (last member wins, an extra member is ignored).
        if case .success(let r)? = Self.general(Array(Self.unusual[0].utf8)) { #expect(r.method == "b") }
        else { Issue.record("a repeated method is decoded by the general path") }
    }

    @Test func mutatedFramesNeverDisagree() {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]":,0123456789.-eE "\u00 nultrejsoidmpa2"#.utf8)
        for _ in 0..<20_000 {
            let usual = Array(Self.usual[Int.random(in: 0..<Self.usual.count, using: &rng)].utf8)
            let frame = mutated(usual, alphabet: alphabet, edits: 1...3, using: &rng)
            #expect(Self.agree(frame), "\(String(decoding: frame, as: UTF8.self))")
        }
    }
}

/// share.send's params read without a tree (`ShareSendParams`) mean what the general parser reads.
@Suite("RPCCodec: share.send params without a tree")
struct ShareSendParamsTests {
    static let usual = [
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[{"url":"https://youtu.be/abc"}]}}"#,
        #"{"jsonrpc":"2.0","id":"x","method":"share.send","params":{"items":[{"text":"hello"},{"url":"a:b"}],"extension":"com.e.share","group":"group.com.e","open":true}}"#,
        #"{ "method" : "share.send" , "params" : { "open" : "myapp://x?y=1" , "items" : [ { "url" : "https://e.com/" } ] } , "jsonrpc" : "2.0" , "id" : 7 }"#,
        #"{"jsonrpc":"2.0","id":2,"method":"share.send","params":{"open":false,"items":[{"text":""}]}}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"share.send\",\"params\":{\n\t\"items\":[{\"url\":\"https://a.example/very/long/path/that/goes/past/several/words?q=1&r=2#frag\"}]\r}}",
    ]
    /// Read by the general parser only (the request still decodes, with a tree).
    static let unusual = [
        #"{"jsonrpc":"2.0","id":1,"params":{"items":[{"url":"https://e.com"}]},"method":"share.send"}"#,  // params before method
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[{"url":"https://e.com","type":"public.url"}]}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[{"url":"https:\/\/e.com"}]}}"#,  // an escape
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[{"text":"héllo"}]}}"#,  // non-ASCII
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[]}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[{"url":"a:b"}],"group":null}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[{"url":"a:b"}],"items":[{"url":"c:d"}]}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[{"url":"a:b"}],"extra":1}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"items":[{"url":"a:b","text":"t"}]}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":{"open":"x"}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"share.send","params":[]}"#,
    ]

    static func decode(_ frame: [UInt8], fast: Bool) -> IncomingMessage {
        frame.withUnsafeBytes { RPCCodec.decode($0, readingShareSend: fast) }
    }

    /// The two decodings of `frame` agree: the same outcome, and read params equal to the tree.
    static func agree(_ frame: [UInt8]) -> (agree: Bool, read: Bool) {
        switch (decode(frame, fast: true), decode(frame, fast: false)) {
        case (.single(.success(let f)), .single(.success(let g))):
            guard f.id == g.id, f.method == g.method, g.shareSendParams == nil else { return (false, false) }
            if let read = f.shareSendParams {
                return (f.params == nil && f.method == "share.send" && g.params == read.json, true)
            }
            return (f.params == g.params, false)
        case (.single(.failure(let f)), .single(.failure(let g))):
            return (f.id == g.id && f.error == g.error, false)
        case (.batch(let f), .batch(let g)):
            return (f.count == g.count, false)
        default:
            return (false, false)
        }
    }

    @Test func usualParamsAreReadWithoutATreeAndAgree() throws {
        for s in Self.usual {
            let result = Self.agree(Array(s.utf8))
            #expect(result.read, "\(s)")
            #expect(result.agree, "\(s)")
        }
        // The fields, for the first two.
        guard case .single(.success(let r)) = Self.decode(Array(Self.usual[1].utf8), fast: true), let p = r.shareSendParams else {
            Issue.record("not read")
            return
        }
        #expect(p.items == [.init(kind: .text, value: "hello"), .init(kind: .url, value: "a:b")])
        #expect(p.extensionID == "com.e.share" && p.group == "group.com.e" && p.open == .flag(true))
    }

    @Test func unusualParamsAreLeftToTheGeneralParser() {
        for s in Self.unusual {
            let result = Self.agree(Array(s.utf8))
            #expect(!result.read, "\(s)")
            #expect(result.agree, "\(s)")
        }
        // Another method's params are never read this way.
        let other = Array(#"{"jsonrpc":"2.0","id":1,"method":"share.targets","params":{"items":[{"url":"a:b"}]}}"#.utf8)
        guard case .single(.success(let r)) = Self.decode(other, fast: true) else {
            Issue.record("not decoded")
            return
        }
        #expect(r.shareSendParams == nil && r.params != nil)
    }

    @Test func mutatedFramesNeverDisagree() {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]":,0123456789.-eE "\u00 nultrejsoidmpa2xgf/:é"#.utf8)
        var read = 0
        for _ in 0..<30_000 {
            let usual = Array(Self.usual[Int.random(in: 0..<Self.usual.count, using: &rng)].utf8)
            let frame = mutated(usual, alphabet: alphabet, edits: 0...3, using: &rng)
            let result = Self.agree(frame)
            if result.read { read += 1 }
            #expect(result.agree, "\(String(decoding: frame, as: UTF8.self))")
        }
        #expect(read > 3_000, "mutations that keep the shape are still read without a tree")
    }
}
