// Fuzz target: JSON-RPC decoding (Sources/ShareProtocol/RPC.swift, RPCCodec.decode of one frame).
// Properties: every decoded request re-encodes (writeRequest) to a frame that decodes to the same request;
// every error reply and every result the broker would write parses back (RPCIncoming) with the same id.

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

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = inputBuffer(data, size)
    switch RPCCodec.decode(input) {
    case .single(let member): check(member)
    case .batch(let members):
        fuzzCheck(!members.isEmpty, "an empty batch was decoded as a batch")
        for m in members { check(m) }
    }
    if let value = try? JSONParser.parseBuffer(input) { _ = RPCIncoming.decode(value) }
    return 0
}
