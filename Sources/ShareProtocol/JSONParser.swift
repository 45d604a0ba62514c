// A strict RFC 8259 JSON parser over UTF-8 bytes: no Foundation round trip, bounded nesting,
// errors that give the byte offset. Used for every message, manifest and journal record.

/// Why a JSON text could not be parsed.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset of the problem.
    public var offset: Int
    /// What was wrong.
    public var reason: String
    /// True when the text was not found wrong but a top-level array had more items than the
    /// caller's limit (`JSONParser.parseBuffer(_:topLevelItemLimit:)`): the parse stopped there.
    public var isOverItemLimit: Bool
    /// Creates an error.
    public init(offset: Int, reason: String, isOverItemLimit: Bool = false) {
        self.offset = offset
        self.reason = reason
        self.isOverItemLimit = isOverItemLimit
    }
    /// "reason at byte N".
    public var description: String { "\(reason) at byte \(offset)" }
}

/// Parses JSON texts.
public enum JSONParser {
    /// Deepest nesting of arrays and objects accepted.
    public static let maxDepth = 256

    /// A file's bytes without a leading UTF-8 byte order mark, which some editors write and which a
    /// JSON parser may ignore (RFC 8259, section 8.1). For files read from disk (manifests,
    /// association documents), never for the wire, where a BOM stays an error.
    public static func withoutByteOrderMark(_ bytes: [UInt8]) -> [UInt8] {
        bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
    }

    /// Parses one JSON value that must fill `bytes` (surrounding white space allowed). Throws a
    /// `JSONParseError` (with the byte offset) for text that is not JSON (invalid UTF-8
    /// included), data after the value, or nesting deeper than `maxDepth`.
    public static func parse<C: Collection>(_ bytes: C) throws(JSONParseError) -> JSONValue where C.Element == UInt8 {
        let result: Result<JSONValue, JSONParseError>? = bytes.withContiguousStorageIfAvailable { buf in
            Result { () throws(JSONParseError) -> JSONValue in try parseBuffer(UnsafeRawBufferPointer(buf)) }
        }
        if let result { return try result.get() }
        let array = Array(bytes)
        return try array.withUnsafeBytes { buf in
            Result { () throws(JSONParseError) -> JSONValue in try parseBuffer(buf) }
        }.get()
    }

    /// Parses one JSON value from a string. Throws as `parse(_:)` on bytes.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var copy = text
        return try copy.withUTF8 { buf in
            Result { () throws(JSONParseError) -> JSONValue in try parseBuffer(UnsafeRawBufferPointer(buf)) }
        }.get()
    }

    /// Parses one JSON value filling the buffer. A top-level array of more than
    /// `topLevelItemLimit` items stops the parse at the first item past it, before the rest is
    /// built, with an error whose `isOverItemLimit` is true. Otherwise throws as `parse(_:)`.
    public static func parseBuffer(_ buf: UnsafeRawBufferPointer, topLevelItemLimit: Int = .max) throws(JSONParseError) -> JSONValue {
        var p = Parser(buf: buf)
        p.topLevelItemLimit = topLevelItemLimit
        p.skipWhitespace()
        let value = try p.parseValue(depth: 0)
        p.skipWhitespace()
        if p.pos != buf.count { throw JSONParseError(offset: p.pos, reason: "unexpected data after the JSON value") }
        return value
    }
}

extension JSONParser {
    /// The fast path for the usual request frame: one object holding only `"jsonrpc":"2.0"`,
    /// `id` (a string, number or null), `method` (a string) and `params` (an object or an array),
    /// each at most once, with plain (unescaped) keys. It reads the envelope without building
    /// a tree for it. Nil for anything else, including any error: the caller then takes the
    /// general path (`parseBuffer` + `RPCCodec.decodeRequest`), which gives the same request for
    /// every frame this accepts (RPCTests checks the two agree) and the right error otherwise.
    static func parseRequestEnvelope(_ buf: UnsafeRawBufferPointer, readingShareSend: Bool = false) -> RPCRequest? {
        var p = Parser(buf: buf)
        return (try? p.requestEnvelope(readingShareSend: readingShareSend)) ?? nil
    }
}

/// The parser's state over one buffer (internal: `ShareSendParams` reads with it too).
struct Parser {
    let buf: UnsafeRawBufferPointer
    var pos = 0
    /// Most items of an array at the top level (a JSON-RPC batch's members).
    var topLevelItemLimit = Int.max

    init(buf: UnsafeRawBufferPointer) { self.buf = buf }

    @inline(__always) func peek() -> UInt8? { pos < buf.count ? buf[pos] : nil }

    @inline(__always) mutating func skipWhitespace() {
        while pos < buf.count {
            let c = buf[pos]
            if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { pos += 1 } else { break }
        }
    }

    /// Moves past whole 8-byte words of plain string text: no quote, backslash, control
    /// character or non-ASCII byte (the byte-by-byte loop that follows finds which one stopped it).
    @inline(__always) mutating func skipPlainASCIIWords() {
        guard let base = buf.baseAddress else { return }
        while pos + 8 <= buf.count {
            let w = (base + pos).loadUnaligned(as: UInt64.self)
            if JSONValue.escapeFlags(w) | (w & 0x8080_8080_8080_8080) != 0 { return }
            pos += 8
        }
    }

    func fail(_ reason: String, at: Int? = nil) -> JSONParseError {
        JSONParseError(offset: at ?? pos, reason: reason)
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard let c = peek() else { throw fail("unexpected end of input") }
        switch c {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character '\(printable(c))'")
        }
    }

    func printable(_ c: UInt8) -> String {
        c >= 0x20 && c < 0x7F ? String(UnicodeScalar(c)) : "\\u{\(String(c, radix: 16))}"
    }

    mutating func expectLiteral(_ word: StaticString) throws(JSONParseError) {
        let n = word.utf8CodeUnitCount
        let start = word.utf8Start
        guard pos + n <= buf.count else { throw fail("invalid literal") }
        for i in 0..<n where buf[pos + i] != start[i] { throw fail("invalid literal") }
        pos += n
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        if depth > JSONParser.maxDepth { throw fail("nesting deeper than \(JSONParser.maxDepth)") }
        pos += 1  // {
        var members: [(key: String, value: JSONValue)] = []
        var index: [ExactKey: Int]? = nil  // built only for large objects, to keep duplicate checks linear
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            pos += 1
            return .object(JSONObject(uniqueMembers: members))
        }
        members.reserveCapacity(6)  // a request envelope or its params: no regrowth on the way
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString(interning: true)
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw fail("expected ':' after key") }
            pos += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            if let existing = duplicateIndex(of: key, in: members, index: &index) {
                members[existing].value = value
            } else {
                index?[ExactKey(key)] = members.count
                members.append((key, value))
            }
            skipWhitespace()
            guard let c = peek() else { throw fail("unterminated object") }
            pos += 1
            if c == UInt8(ascii: ",") { continue }
            if c == UInt8(ascii: "}") { break }
            throw fail("expected ',' or '}' in object", at: pos - 1)
        }
        return .object(JSONObject(uniqueMembers: members))
    }

    /// The member with the same key bytes, if any (keys that are merely canonically equivalent,
    /// "é" and "e" + U+0301, are two members, as in NSDictionary: `ExactKey`).
    func duplicateIndex(
        of key: String, in members: [(key: String, value: JSONValue)], index: inout [ExactKey: Int]?
    ) -> Int? {
        if let index { return index[ExactKey(key)] }
        if members.count < 16 {
            for i in members.indices where ExactKey.same(members[i].key, key) { return i }
            return nil
        }
        var built: [ExactKey: Int] = [:]
        for (i, m) in members.enumerated() { built[ExactKey(m.key)] = i }
        index = built
        return built[ExactKey(key)]
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        if depth > JSONParser.maxDepth { throw fail("nesting deeper than \(JSONParser.maxDepth)") }
        pos += 1  // [
        var items: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            pos += 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            if depth == 1 && items.count == topLevelItemLimit {
                throw JSONParseError(offset: pos, reason: "too many items in the top-level array", isOverItemLimit: true)
            }
            items.append(try parseValue(depth: depth))
            skipWhitespace()
            guard let c = peek() else { throw fail("unterminated array") }
            pos += 1
            if c == UInt8(ascii: ",") { continue }
            if c == UInt8(ascii: "]") { break }
            throw fail("expected ',' or ']' in array", at: pos - 1)
        }
        return .array(items)
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = pos
        if peek() == UInt8(ascii: "-") { pos += 1 }
        guard let first = peek(), isDigit(first) else { throw fail("invalid number") }
        if first == UInt8(ascii: "0") {
            pos += 1
            if let c = peek(), isDigit(c) { throw fail("leading zeros are not allowed") }
        } else {
            while let c = peek(), isDigit(c) { pos += 1 }
        }
        if peek() == UInt8(ascii: ".") {
            pos += 1
            guard let c = peek(), isDigit(c) else { throw fail("expected a digit after '.'") }
            while let c = peek(), isDigit(c) { pos += 1 }
        }
        if let e = peek(), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            pos += 1
            if let s = peek(), s == UInt8(ascii: "+") || s == UInt8(ascii: "-") { pos += 1 }
            guard let c = peek(), isDigit(c) else { throw fail("expected a digit in exponent") }
            while let c = peek(), isDigit(c) { pos += 1 }
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: buf[start..<pos]), as: UTF8.self)
        return .number(text)
    }

    @inline(__always) func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    /// True (and past it) when the bytes at `pos` are exactly `word`.
    @inline(__always) mutating func match(_ word: StaticString) -> Bool {
        let n = word.utf8CodeUnitCount
        guard pos + n <= buf.count else { return false }
        let start = word.utf8Start
        for i in 0..<n where buf[pos + i] != start[i] { return false }
        pos += n
        return true
    }

    /// See `JSONParser.parseRequestEnvelope`: nil when the frame is not of that usual shape.
    mutating func requestEnvelope(readingShareSend: Bool = false) throws(JSONParseError) -> RPCRequest? {
        skipWhitespace()
        guard peek() == UInt8(ascii: "{") else { return nil }
        pos += 1
        var seen: UInt8 = 0
        var id: RequestID? = nil
        var method: String? = nil
        var params: JSONValue? = nil
        var shareSend: ShareSendParams? = nil
        while true {
            skipWhitespace()
            let member: UInt8
            if match(#""method""#) {
                member = 1
            } else if match(#""params""#) {
                member = 2
            } else if match(#""id""#) {
                member = 4
            } else if match(#""jsonrpc""#) {
                member = 8
            } else {
                return nil
            }
            if seen & member != 0 { return nil }  // a repeated member: the general path decides
            seen |= member
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { return nil }
            pos += 1
            skipWhitespace()
            switch member {
            case 1:
                guard peek() == UInt8(ascii: "\"") else { return nil }
                method = try parseString(interning: true)
            case 2:
                guard let c = peek(), c == UInt8(ascii: "{") || c == UInt8(ascii: "[") else { return nil }
                if readingShareSend, method == "share.send", let read = readShareSendParams() {
                    shareSend = read
                } else {
                    params = try parseValue(depth: 1)  // as deep as inside the envelope's object
                }
            case 4:
                guard let c = peek() else { return nil }
                switch c {
                case UInt8(ascii: "\""): id = .string(try parseString())
                case UInt8(ascii: "n"):
                    try expectLiteral("null")
                    id = .null
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    guard case .number(let n) = try parseNumber() else { return nil }
                    id = .number(n)
                default: return nil
                }
            default:
                guard match(#""2.0""#) else { return nil }
            }
            skipWhitespace()
            guard let c = peek() else { return nil }
            pos += 1
            if c == UInt8(ascii: ",") { continue }
            if c == UInt8(ascii: "}") { break }
            return nil
        }
        skipWhitespace()
        guard pos == buf.count, seen & 9 == 9, let method else { return nil }
        return RPCRequest(id: id, method: method, params: params, shareSendParams: shareSend)
    }

    /// A string; with `interning`, a member name or method name the protocol uses is returned
    /// as its literal (no UTF-8 validation, no allocation: about 250 instructions per key).
    mutating func parseString(interning: Bool = false) throws(JSONParseError) -> String {
        pos += 1  // opening quote
        let start = pos
        // Fast path: no escapes, plain bytes until the closing quote; plain ASCII 8 bytes at a time.
        skipPlainASCIIWords()
        var sawHigh = false
        while pos < buf.count {
            let c = buf[pos]
            if c == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: buf[start..<pos])
                pos += 1
                if interning && !sawHigh, let known = KnownStrings.lookup(slice) { return known }
                if !sawHigh { return String(decoding: slice, as: UTF8.self) }
                guard let s = UTF8Text.validated(slice) else {
                    throw fail("invalid UTF-8 in string", at: start)
                }
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw fail("unescaped control character in string") }
            if c >= 0x80 { sawHigh = true }
            pos += 1
        }
        if pos >= buf.count { throw fail("unterminated string", at: start - 1) }
        // Slow path with escapes.
        var bytes: [UInt8] = Array(UnsafeRawBufferPointer(rebasing: buf[start..<pos]))
        while true {
            guard pos < buf.count else { throw fail("unterminated string", at: start - 1) }
            let c = buf[pos]
            if c == UInt8(ascii: "\"") {
                pos += 1
                break
            }
            if c < 0x20 { throw fail("unescaped control character in string") }
            if c != UInt8(ascii: "\\") {
                bytes.append(c)
                pos += 1
                continue
            }
            pos += 1
            guard let e = peek() else { throw fail("unterminated escape") }
            pos += 1
            switch e {
            case UInt8(ascii: "\""): bytes.append(0x22)
            case UInt8(ascii: "\\"): bytes.append(0x5C)
            case UInt8(ascii: "/"): bytes.append(0x2F)
            case UInt8(ascii: "b"): bytes.append(0x08)
            case UInt8(ascii: "f"): bytes.append(0x0C)
            case UInt8(ascii: "n"): bytes.append(0x0A)
            case UInt8(ascii: "r"): bytes.append(0x0D)
            case UInt8(ascii: "t"): bytes.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    // High surrogate: must be followed by \uDC00-\uDFFF.
                    guard pos + 1 < buf.count, buf[pos] == UInt8(ascii: "\\"), buf[pos + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate in \\u escape")
                    }
                    pos += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw fail("unpaired surrogate in \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw fail("unpaired surrogate in \\u escape")
                }
                appendUTF8(scalar, to: &bytes)
            default:
                throw fail("invalid escape '\\\(printable(e))'", at: pos - 2)
            }
        }
        guard let s = UTF8Text.validated(bytes) else {
            throw fail("invalid UTF-8 in string", at: start)
        }
        return s
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard pos + 4 <= buf.count else { throw fail("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = buf[pos]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw fail("invalid hex digit in \\u escape")
            }
            v = v << 4 | d
            pos += 1
        }
        return v
    }

    func appendUTF8(_ scalar: UInt32, to bytes: inout [UInt8]) {
        switch scalar {
        case 0..<0x80:
            bytes.append(UInt8(scalar))
        case 0x80..<0x800:
            bytes.append(UInt8(0xC0 | (scalar >> 6)))
            bytes.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            bytes.append(UInt8(0xE0 | (scalar >> 12)))
            bytes.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            bytes.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            bytes.append(UInt8(0xF0 | (scalar >> 18)))
            bytes.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            bytes.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            bytes.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }
}

/// The member names and method names of the protocol, so that parsing one returns its literal
/// (a constant: nothing allocated, validated or freed) instead of building a new string.
enum KnownStrings {
    static let names: [String] = [
        "jsonrpc", "id", "method", "params", "result", "error", "code", "message", "data",
        "items", "url", "text", "name", "type", "path", "file", "files", "group", "extension", "open",
        "fallback", "app", "ids", "bundleID", "role", "token", "key", "keys", "value", "shareID",
        "eventID", "limit", "activityType", "webpageURL", "kind", "via", "events",
        "hello", "url.open", "url.canOpen", "url.explain", "share.send", "share.list", "share.get",
        "share.complete", "share.targets", "app.subscribe", "app.ack", "apps.list", "apps.reload",
        "broker.status", "defaults.get", "defaults.set", "defaults.list", "defaults.remove",
        "defaults.watch", "rpc.discover",
    ]

    /// `names` by byte length, with their bytes.
    static let byLength: [[(bytes: [UInt8], string: String)]] = {
        var table = [[(bytes: [UInt8], string: String)]](repeating: [], count: (names.map(\.utf8.count).max() ?? 0) + 1)
        for n in names { table[n.utf8.count].append((Array(n.utf8), n)) }
        return table
    }()

    /// The literal spelled by `bytes`, if it is one of `names`.
    @inline(__always) static func lookup(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard bytes.count < byLength.count, bytes.count > 0, let base = bytes.baseAddress else { return nil }
        let table = byLength[bytes.count]
        for c in table.indices {
            let same = table[c].bytes.withUnsafeBufferPointer { known in
                for i in 0..<known.count where known[i] != base.load(fromByteOffset: i, as: UInt8.self) { return false }
                return true
            }
            if same { return table[c].string }
        }
        return nil
    }
}
