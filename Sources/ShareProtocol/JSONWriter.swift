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
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    JSONValue.writeString(members[i].key, to: &out)
                    out.append(UInt8(ascii: ":"))
                    if case .string(let s) = members[i].value {
                        JSONValue.writeString(s, to: &out)  // the common case, without the recursion
                    } else {
                        members[i].value.write(to: &out)
                    }
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

    /// True when some byte of `buf` must be escaped in a JSON string (a control character, `"` or
    /// `\\`). Word at a time: each test flags a byte's high bit when the byte matches (borrows
    /// can only add flags above a real match, so "any flag" is exact).
    @inline(__always) static func needsEscaping(_ buf: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = buf.count
        guard let base = buf.baseAddress else { return false }
        var i = 0
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        while i + 8 <= n {
            let w = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
            let control = (w &- 0x2020_2020_2020_2020) & ~w & highs
            let q = w ^ 0x2222_2222_2222_2222
            let quote = (q &- ones) & ~q & highs
            let b = w ^ 0x5C5C_5C5C_5C5C_5C5C
            let backslash = (b &- ones) & ~b & highs
            if (control | quote | backslash) != 0 { return true }
            i += 8
        }
        while i < n {
            let c = base[i]
            if c < 0x20 || c == 0x22 || c == 0x5C { return true }
            i += 1
        }
        return false
    }
}
