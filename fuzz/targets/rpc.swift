// Fuzz target: JSON-RPC decoding (Sources/ShareProtocol/RPC.swift, RPCCodec.decode of one frame).
// Properties: every decoded request re-encodes (writeRequest) to a frame that decodes to the same request;
// every error reply and every result the broker would write parses back (RPCIncoming) with the same id;
// the broker's decoding (share.send params read without a tree) means what the general one means.

import ShareProtocol

private func sameRequest(_ a: RPCRequest, _ b: RPCRequest) -> Bool {
    a.id == b.id && a.method == b.method && a.params == b.params
}

private func checkReply(_ bytes: [UInt8], id: RequestID, _ expected: Result<JSONValue, RPCError>) {
    guard let value = try? JSONParser.parse(bytes), let incoming = RPCIncoming.decode(value) else {
        fuzzCheck(false, "a reply the broker writes does not decode: \(lossyString(bytes))")
        return
    }
    guard case .response(let gotID, let result) = incoming else {
        fuzzCheck(false, "a reply decodes as a notification: \(lossyString(bytes))")
        return
    }
    fuzzCheck(gotID == id, "reply id \(gotID) != \(id)")
    switch (result, expected) {
    case (.success(let a), .success(let b)): fuzzCheck(a == b, "result changed in a reply")
    case (.failure(let a), .failure(let b)): fuzzCheck(a == b, "error changed in a reply: \(a) vs \(b)")
    default: fuzzCheck(false, "reply kind changed: \(lossyString(bytes))")
    }
}

private func check(_ member: Result<RPCRequest, RPCErrorReply>) {
    switch member {
    case .success(let request):
        var out: [UInt8] = []
        RPCCodec.writeRequest(id: request.id, method: request.method, params: request.params, to: &out)
        let again = out.withUnsafeBytes { RPCCodec.decode($0) }
        guard case .single(.success(let decoded)) = again else {
            fuzzCheck(false, "a re-encoded request does not decode: \(lossyString(out))")
            return
        }
        fuzzCheck(sameRequest(decoded, request), "a re-encoded request decodes differently: \(lossyString(out))")
        if let id = request.id {
            var reply: [UInt8] = []
            let result = request.params ?? .null
            RPCCodec.writeResult(id: id, result: result, to: &reply)
            checkReply(reply, id: id, .success(result))
        }
    case .failure(let reply):
        fuzzCheck(
            [-32700, -32600].contains(reply.error.code), "decode produced error code \(reply.error.code)")
        var out: [UInt8] = []
        RPCCodec.writeError(id: reply.id, error: reply.error, to: &out)
        checkReply(out, id: reply.id, .failure(reply.error))
    }
}

/// The broker's decoding (share.send params read without a tree when they have the commonest
/// shape) means what the general decoding means: the same outcome, and read params equal to
/// the tree the general parser builds for them.
private func checkShareSendReading(_ input: UnsafeRawBufferPointer, _ general: IncomingMessage) {
    switch (RPCCodec.decode(input, readingShareSend: true), general) {
    case (.single(.success(let f)), .single(.success(let g))):
        fuzzCheck(f.id == g.id && f.method == g.method, "share.send reading changed the id or method")
        if let read = f.shareSendParams {
            fuzzCheck(f.method == "share.send" && f.params == nil, "params read for \(f.method)")
            fuzzCheck(g.params == read.json, "share.send params read differently: \(read.json) vs \(String(describing: g.params))")
        } else {
            fuzzCheck(f.params == g.params, "params changed when not read without a tree")
        }
    case (.single(.failure(let f)), .single(.failure(let g))):
        fuzzCheck(f.id == g.id && f.error == g.error, "share.send reading changed an error")
    case (.batch(let f), .batch(let g)):
        fuzzCheck(f.count == g.count, "share.send reading changed a batch")
    default:
        fuzzCheck(false, "share.send reading changed the outcome")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = inputBuffer(data, size)
    let decoded = RPCCodec.decode(input)
    switch decoded {
    case .single(let member): check(member)
    case .batch(let members):
        fuzzCheck(!members.isEmpty, "an empty batch was decoded as a batch")
        for m in members { check(m) }
    }
    checkShareSendReading(input, decoded)
    if let value = try? JSONParser.parseBuffer(input) { _ = RPCIncoming.decode(value) }
    return 0
}
