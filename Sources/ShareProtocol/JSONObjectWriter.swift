// Writing a JSON object straight into bytes, without building a `JSONValue` tree first: for
// replies that are built on every request (broker.status) and notifications sent on the hot path.
// The output is byte for byte what `JSONValue.write(to:)` gives for the same members.

/// Appends the members of one JSON object to a byte buffer as they are given.
///
/// Keys are `StaticString`s written as they are: they must not need escaping (checked in debug
/// builds) and must be unique within the object (the caller's responsibility, as with literals).
///
/// ```swift
/// var w = JSONObjectWriter()
/// w.int("connections", 3)
/// w.object("sessions") { $0.int("app", 1) }
/// let bytes = w.finish()   // {"connections":3,"sessions":{"app":1}}
/// ```
public struct JSONObjectWriter {
    /// The bytes written so far (an unterminated object until `finish`).
    public private(set) var bytes: [UInt8]
    private var empty = true

    /// Continues an object whose first members were written earlier (`bytes` of a writer that was
    /// not finished), for replies whose leading members never change.
    public init(continuing prefix: [UInt8], capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(max(capacity, prefix.count + 64))
        bytes.append(contentsOf: prefix)
        empty = prefix.count <= 1
    }

    /// A writer without a buffer, for a nested object written into its parent's (`object`).
    /// (`init(capacity: 0)` allocated one for its `{`, freed at once: two allocator calls per
    /// nested object, about a sixth of a broker.status reply's instructions.)
    private init(nested: ()) { bytes = [] }

    /// Starts an object, reserving `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    @inline(__always) private mutating func key(_ k: StaticString) {
        member(k, digitsOf: nil, negative: false)
    }

    /// `,"key":` and, when `value` is given, its decimal digits (or `boolean`'s literal), assembled on the stack and
    /// appended at once: one append per member (each `Array.append(contentsOf:)` costs about
    /// 65 instructions; a broker.status reply has some 30 integer members).
    @inline(__always) private mutating func member(
        _ k: StaticString, digitsOf value: UInt64?, negative: Bool, boolean: Bool? = nil
    ) {
        assert(!bytes.isEmpty, "a JSONObjectWriter written to after finishInPlace()")
        let comma = !empty
        empty = false
        k.withUTF8Buffer { b in
            assert(!b.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }, "a JSONObjectWriter key needs escaping")
            var scratch: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            let keyLength = b.count + 3 + (comma ? 1 : 0)
            // Room for the longest integer (a sign and 20 digits) after the key.
            guard keyLength + 21 <= MemoryLayout.size(ofValue: scratch) else {
                if comma { bytes.append(UInt8(ascii: ",")) }
                bytes.append(UInt8(ascii: "\""))
                bytes.append(contentsOf: b)
                bytes.append(UInt8(ascii: "\""))
                bytes.append(UInt8(ascii: ":"))
                if let value { JSONValue.writeDigits(value, negative: negative, to: &bytes) }
                if let boolean { JSONValue.appendStatic(boolean ? "true" : "false", to: &bytes) }
                return
            }
            withUnsafeMutableBytes(of: &scratch) { s in
                var i = 0
                if comma {
                    s[0] = UInt8(ascii: ",")
                    i = 1
                }
                s[i] = UInt8(ascii: "\"")
                UnsafeMutableRawBufferPointer(rebasing: s[(i + 1)...]).copyMemory(from: UnsafeRawBufferPointer(b))
                s[i + 1 + b.count] = UInt8(ascii: "\"")
                s[i + 2 + b.count] = UInt8(ascii: ":")
                var total = keyLength
                if let value { total += JSONValue.formatDigits(value, negative: negative, into: s.baseAddress! + total) }
                if let boolean {
                    let word: StaticString = boolean ? "true" : "false"
                    word.withUTF8Buffer { w in
                        UnsafeMutableRawBufferPointer(rebasing: s[total...]).copyMemory(from: UnsafeRawBufferPointer(w))
                        total += w.count
                    }
                }
                Framer.append(UnsafeRawBufferPointer(rebasing: s[0..<total]), to: &bytes)
            }
        }
    }

    /// An integer member.
    public mutating func int(_ k: StaticString, _ v: Int) {
        member(k, digitsOf: UInt64(v.magnitude), negative: v < 0)
    }

    /// An unsigned integer member.
    public mutating func uint(_ k: StaticString, _ v: UInt64) {
        member(k, digitsOf: v, negative: false)
    }

    /// A string member (escaped as JSON requires).
    public mutating func string(_ k: StaticString, _ v: String) {
        assert(!bytes.isEmpty, "a JSONObjectWriter written to after finishInPlace()")
        assert(k.withUTF8Buffer { !$0.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C } }, "a JSONObjectWriter key needs escaping")
        JSONValue.writeString(v, after: k, comma: !empty, quotingHead: true, to: &bytes)
        empty = false
    }

    /// A boolean member.
    public mutating func bool(_ k: StaticString, _ v: Bool) {
        member(k, digitsOf: nil, negative: false, boolean: v)
    }

    /// A floating-point member, written as `JSONValue.double` writes it.
    public mutating func double(_ k: StaticString, _ v: Double) {
        key(k)
        JSONValue.double(v).write(to: &bytes)
    }

    /// A non-negative number with three decimals, given in thousandths (`12345` → `12.345`):
    /// integer arithmetic, under half the instructions of formatting the same `Double`.
    public mutating func decimal(_ k: StaticString, thousandths v: UInt64) {
        member(k, digitsOf: v / 1000, negative: false)
        let f = Int(v % 1000)
        let digits: (UInt8, UInt8, UInt8, UInt8) = (
            UInt8(ascii: "."), UInt8(ascii: "0") &+ UInt8(f / 100), UInt8(ascii: "0") &+ UInt8(f / 10 % 10),
            UInt8(ascii: "0") &+ UInt8(f % 10)
        )
        withUnsafeBytes(of: digits) { Framer.append($0, to: &bytes) }
    }

    /// A member holding any JSON value.
    public mutating func value(_ k: StaticString, _ v: JSONValue) {
        key(k)
        v.write(to: &bytes)
    }

    /// A member holding a nested object written by `body`.
    public mutating func object(_ k: StaticString, _ body: (inout JSONObjectWriter) -> Void) {
        key(k)
        var inner = JSONObjectWriter(nested: ())  // no buffer of its own: it is handed this one
        swap(&inner.bytes, &bytes)  // the nested writer appends to this buffer in place
        inner.bytes.append(UInt8(ascii: "{"))
        body(&inner)
        inner.bytes.append(UInt8(ascii: "}"))
        swap(&inner.bytes, &bytes)
    }

    /// Closes the object and returns its bytes.
    public consuming func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// Closes the object and takes its bytes out of the writer: `finish` for a writer in a
    /// variable. (A consumed writer can arrive as a second reference to the buffer, the caller's
    /// variable still holding it, and the closing brace then copies every byte.) The writer is
    /// spent afterwards: it holds no bytes and must not be written to again.
    public mutating func finishInPlace() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        var out: [UInt8] = []
        swap(&out, &bytes)
        empty = true
        return out
    }
}

extension JSONValue {
    /// Appends the bytes of a static string.
    @inline(__always) public static func appendStatic(_ s: StaticString, to out: inout [UInt8]) {
        s.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    /// Appends the decimal digits of `v` (no allocation).
    public static func writeInteger<T: FixedWidthInteger>(_ v: T, to out: inout [UInt8]) {
        let negative = v < 0
        writeDigits(negative ? UInt64(v.magnitude) : UInt64(v), negative: negative, to: &out)
    }

    /// Appends the decimal digits of `v` (the common case, without the generic's witness calls).
    public static func writeInteger(_ v: Int, to out: inout [UInt8]) {
        writeDigits(UInt64(v.magnitude), negative: v < 0, to: &out)
    }

    /// Appends the decimal digits of `v`.
    public static func writeInteger(_ v: UInt64, to out: inout [UInt8]) {
        writeDigits(v, negative: false, to: &out)
    }

    static func writeDigits(_ value: UInt64, negative: Bool, to out: inout [UInt8]) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: enough for 20 digits and a sign
        withUnsafeMutableBytes(of: &digits) { buf in
            let n = formatDigits(value, negative: negative, into: buf.baseAddress!)
            Framer.append(UnsafeRawBufferPointer(start: buf.baseAddress, count: n), to: &out)
        }
    }

    /// Writes the decimal digits of `value` (after a `-` when `negative`) at `p`, which has room
    /// for 21 bytes; returns how many it wrote.
    @inline(__always) static func formatDigits(_ value: UInt64, negative: Bool, into p: UnsafeMutableRawPointer) -> Int {
        var count = 1
        var rest = value / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        var start = 0
        if negative {
            p.storeBytes(of: UInt8(ascii: "-"), as: UInt8.self)
            start = 1
        }
        var at = start + count
        var magnitude = value
        repeat {
            at -= 1
            p.storeBytes(of: UInt8(ascii: "0") &+ UInt8(magnitude % 10), toByteOffset: at, as: UInt8.self)
            magnitude /= 10
        } while magnitude > 0
        return start + count
    }
}
