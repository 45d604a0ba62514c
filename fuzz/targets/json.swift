// Fuzz target: JSONParser and JSONWriter (Sources/ShareProtocol/JSONParser.swift, JSONWriter.swift).
// Properties: the three parse entry points agree; a parsed value written compactly has no raw newline and
// parses back to an equal value whose compact text is byte-identical; the pretty text parses back too.

import ShareProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = inputBuffer(data, size)
    let bytes = Array(input)
    let viaBuffer = Result { () throws(JSONParseError) -> JSONValue in try JSONParser.parseBuffer(input) }
    let viaCollection = Result { () throws(JSONParseError) -> JSONValue in try JSONParser.parse(bytes) }
    fuzzCheck(viaBuffer == viaCollection, "parse([UInt8]) and parseBuffer disagree")
    if let text = String(validating: bytes, as: UTF8.self) {
        let viaString = Result { () throws(JSONParseError) -> JSONValue in try JSONParser.parse(text) }
        fuzzCheck(viaBuffer == viaString, "parse(String) and parseBuffer disagree")
    }
    guard case .success(let value) = viaBuffer else { return 0 }

    let compact = value.bytes
    fuzzCheck(!compact.contains(0x0A), "compact JSON contains a raw newline")
    let reparsed: JSONValue
    do {
        reparsed = try JSONParser.parse(compact)
    } catch {
        fuzzCheck(false, "compact output does not parse: \(error): \(lossyString(compact))")
        return 0
    }
    fuzzCheck(reparsed == value, "round trip changed the value: \(lossyString(compact))")
    fuzzCheck(
        reparsed.bytes == compact, "writing is not idempotent: \(lossyString(compact)) vs \(reparsed.compactText)")

    let pretty = value.prettyText()
    do {
        let fromPretty = try JSONParser.parse(pretty)
        fuzzCheck(fromPretty == value, "pretty text parses to a different value: \(pretty)")
    } catch {
        fuzzCheck(false, "pretty text does not parse: \(error): \(pretty)")
    }

    // Accessors used on every message must not trap.
    var stack = [value]
    var visited = 0
    while let v = stack.popLast(), visited < 10_000 {
        visited += 1
        _ = v.intValue
        _ = v.doubleValue
        _ = v.typeName
        switch v {
        case .array(let items): stack.append(contentsOf: items)
        case .object(let o):
            for m in o {
                fuzzCheck(o[m.key] != nil, "object member '\(m.key)' cannot be looked up")
                stack.append(m.value)
            }
        default: break
        }
    }
    return 0
}
