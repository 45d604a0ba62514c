// Serializes JSONValue to compact UTF-8 (one line, safe for newline framing) or indented text.
// Appends into a caller-owned byte buffer so the loop can reuse its output storage.

extension JSONValue {
    /// Appends the compact JSON text of this value to `out`. Never emits a raw newline.
    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: JSONValue.appendStatic("null", to: &out)
        case .bool(let b): JSONValue.appendStatic(b ? "true" : "false", to: &out)
        case .number(let n):
            var lexeme = n
            lexeme.withUTF8 { out.append(contentsOf: $0) }
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            // Elements read in place through the buffer (iterating the array copies each one:
            // a retain and a release per element).
            items.withUnsafeBufferPointer { items in
                for i in items.indices {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    items[i].write(to: &out)
                }
            }
            out.append(UInt8(ascii: "]"))
        case .object(let obj):
            out.append(UInt8(ascii: "{"))
            obj.members.withUnsafeBufferPointer { members in
                for i in members.indices {
                    if case .string(let s) = members[i].value {
                        // The common case, without the recursion, in one append when short.
                        JSONValue.writeMember(key: members[i].key, string: s, comma: i > 0, to: &out)
                        continue
                    }
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    JSONValue.writeString(members[i].key, to: &out)
                    out.append(UInt8(ascii: ":"))
                    members[i].value.write(to: &out)
                }
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Compact JSON bytes.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        write(to: &out)
        return out
    }

    /// Compact JSON text.
    public var compactText: String { String(decoding: bytes, as: UTF8.self) }

    /// Indented JSON text (two spaces), for people.
    public func prettyText(indent: Int = 0) -> String {
        var out: [UInt8] = []
        writePretty(to: &out, level: indent)
        return String(decoding: out, as: UTF8.self)
    }

    private func writePretty(to out: inout [UInt8], level: Int) {
        func newline(_ l: Int) {
            out.append(0x0A)
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: l * 2))
        }
        switch self {
        case .array(let items) where !items.isEmpty:
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(level + 1)
                item.writePretty(to: &out, level: level + 1)
            }
            newline(level)
            out.append(UInt8(ascii: "]"))
        case .object(let obj) where !obj.isEmpty:
            out.append(UInt8(ascii: "{"))
            for (i, m) in obj.members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(level + 1)
                JSONValue.writeString(m.key, to: &out)
                out.append(contentsOf: ": ".utf8)
                m.value.writePretty(to: &out, level: level + 1)
            }
            newline(level)
            out.append(UInt8(ascii: "}"))
        default:
            write(to: &out)
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `s` as a JSON string literal, escaping quotes, backslashes and control characters.
    public static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // The bytes in place when the string has contiguous storage (no mutable copy: about a
        // third cheaper per call than `withUTF8`), else through a copy.
        if s.utf8.withContiguousStorageIfAvailable({ writeEscaped($0, to: &out) }) == nil {
            var copy = s
            copy.withUTF8 { writeEscaped($0, to: &out) }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends `head`, then `s` as a JSON string; with `comma` a `,` first, with `quotingHead`
    /// the head as a member's key (`"head":`). Short strings that need no escaping are assembled
    /// on the stack and appended at once: each `Array.append` costs some 65 instructions, and
    /// records and replies are mostly such members (`,"app":"com.example.app"`). `head` is
    /// written as it is: it must not need escaping.
    public static func writeString(
        _ s: String, after head: StaticString, comma: Bool = false, quotingHead: Bool = false, to out: inout [UInt8]
    ) {
        let appended: Bool? = s.utf8.withContiguousStorageIfAvailable { value in
            head.withUTF8Buffer { h in appendPair(head: h, value: value, comma: comma, quotingHead: quotingHead, to: &out) }
        }
        if appended == true { return }
        if comma { out.append(UInt8(ascii: ",")) }
        if quotingHead { out.append(UInt8(ascii: "\"")) }
        appendStatic(head, to: &out)
        if quotingHead { appendStatic("\":", to: &out) }
        writeString(s, to: &out)
    }

    /// Appends an object member `"key":"value"` (with `comma`, a `,` first), in one append when
    /// it is short and neither text needs escaping.
    @inline(__always) static func writeMember(key: String, string value: String, comma: Bool, to out: inout [UInt8]) {
        let appended: Bool? = key.utf8.withContiguousStorageIfAvailable { k in
            value.utf8.withContiguousStorageIfAvailable { v in
                !needsEscaping(k) && appendPair(head: k, value: v, comma: comma, quotingHead: true, to: &out)
            } ?? false
        }
        if appended == true { return }
        if comma { out.append(UInt8(ascii: ",")) }
        writeString(key, to: &out)
        out.append(UInt8(ascii: ":"))
        writeString(value, to: &out)
    }

    /// The one-append path of `writeString(_:after:...)`: false (nothing appended) when the
    /// whole does not fit in `assemblyCapacity` or `value` needs escaping. `head` is written as it is.
    @inline(__always) static func appendPair(
        head h: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, comma: Bool, quotingHead: Bool,
        to out: inout [UInt8]
    ) -> Bool {
        let headLength = h.count + (comma ? 1 : 0) + (quotingHead ? 3 : 0)
        let total = headLength + value.count + 2
        guard total <= assemblyCapacity, !needsEscaping(value) else { return false }
        appendAssembled(to: &out) { p in
            var i = 0
            if comma {
                p[0] = UInt8(ascii: ",")
                i = 1
            }
            if quotingHead {
                p[i] = UInt8(ascii: "\"")
                i += 1
            }
            if let base = h.baseAddress { (p + i).update(from: base, count: h.count) }
            i += h.count
            if quotingHead {
                p[i] = UInt8(ascii: "\"")
                p[i + 1] = UInt8(ascii: ":")
                i += 2
            }
            p[i] = UInt8(ascii: "\"")
            if let base = value.baseAddress { (p + i + 1).update(from: base, count: value.count) }
            p[total - 1] = UInt8(ascii: "\"")
            return total
        }
        return true
    }

    /// Appends `head`, `middle` and `tail` (nothing escaped), in one append when together they fit
    /// in `assemblyCapacity`.
    public static func appendJoined(
        _ head: StaticString, _ middle: UnsafeBufferPointer<UInt8>, _ tail: StaticString, to out: inout [UInt8]
    ) {
        head.withUTF8Buffer { h in
            tail.withUTF8Buffer { t in
                guard h.count + middle.count + t.count <= assemblyCapacity else {
                    out.append(contentsOf: h)
                    out.append(contentsOf: middle)
                    out.append(contentsOf: t)
                    return
                }
                appendAssembled(to: &out) { p in
                    if let base = h.baseAddress { p.update(from: base, count: h.count) }
                    if let base = middle.baseAddress { (p + h.count).update(from: base, count: middle.count) }
                    if let base = t.baseAddress { (p + h.count + middle.count).update(from: base, count: t.count) }
                    return h.count + middle.count + t.count
                }
            }
        }
    }

    /// Most bytes `appendAssembled` can assemble.
    static let assemblyCapacity = 128

    /// Lets `fill` write up to `assemblyCapacity` bytes into stack space and appends the count it
    /// returns in one `Array.append` (each costs some 65 instructions, whatever its length).
    @inline(__always) static func appendAssembled(to out: inout [UInt8], _ fill: (UnsafeMutablePointer<UInt8>) -> Int) {
        var scratch: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &scratch) { raw in
            let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let n = fill(p)
            out.append(contentsOf: UnsafeBufferPointer(start: p, count: n))
        }
    }

    /// Appends `buf` with JSON's escapes (no quotes).
    @inline(__always) static func writeEscaped(_ buf: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        // Fast path: most strings (keys, ids, URLs) need no escaping; test 8 bytes at a time.
        if !needsEscaping(buf) {
            out.append(contentsOf: buf)
            return
        }
        var runStart = 0
        for i in 0..<buf.count {
            let c = buf[i]
            if c >= 0x20 && c != 0x22 && c != 0x5C { continue }
            if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart..<i])) }
            runStart = i + 1
            out.append(UInt8(ascii: "\\"))
            switch c {
            case 0x22: out.append(0x22)
            case 0x5C: out.append(0x5C)
            case 0x0A: out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "t"))
            case 0x08: out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "f"))
            default:
                out.append(contentsOf: "u00".utf8)
                out.append(hexDigits[Int(c >> 4)])
                out.append(hexDigits[Int(c & 0xF)])
            }
        }
        if runStart < buf.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart..<buf.count])) }
    }

    /// For 8 bytes read as one word: a high bit set in each byte that is a control character,
    /// `"` or `\\` (borrows can only add flags above a real match, so "any flag" is exact).
    @inline(__always) static func escapeFlags(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let control = (w &- 0x2020_2020_2020_2020) & ~w & highs
        let q = w ^ 0x2222_2222_2222_2222
        let quote = (q &- ones) & ~q & highs
        let b = w ^ 0x5C5C_5C5C_5C5C_5C5C
        let backslash = (b &- ones) & ~b & highs
        return control | quote | backslash
    }

    /// True when some byte of `buf` must be escaped in a JSON string (a control character, `"` or
    /// `\\`), tested a word at a time (`escapeFlags`).
    @inline(__always) static func needsEscaping(_ buf: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = buf.count
        guard let base = buf.baseAddress else { return false }
        var i = 0
        while i + 8 <= n {
            if escapeFlags(UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)) != 0 { return true }
            i += 8
        }
        // The last few bytes of a text of 8 or more: its last 8 bytes as one word (overlapping).
        if i < n && n >= 8 { return escapeFlags(UnsafeRawPointer(base + n - 8).loadUnaligned(as: UInt64.self)) != 0 }
        while i < n {
            let c = base[i]
            if c < 0x20 || c == 0x22 || c == 0x5C { return true }
            i += 1
        }
        return false
    }
}

/// A value prints as its compact JSON text (`print(value)`, `"\(value)"`, test failures), not
/// as the enum's cases.
extension JSONValue: CustomStringConvertible {
    public var description: String { compactText }
}

/// An object prints as its compact JSON text.
extension JSONObject: CustomStringConvertible {
    public var description: String { JSONValue.object(self).compactText }
}
