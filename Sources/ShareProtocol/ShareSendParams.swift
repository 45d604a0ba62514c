// The commonest `share.send` params, read straight from the request's bytes: an extension sending
// a link or a text. The general JSON tree of `{"items":[{"url":"…"}]}` costs its parse, four
// allocations, their frees and the lookups (about 3,500 instructions, a tenth of a share.send);
// this reads the same params into one object. Anything outside its narrow shape is left to the
// general parser, which gives the same meaning for every text this accepts (RPCTests and the
// `rpc` fuzz target check that the two agree).

/// The params of a `share.send` in their commonest shape, read without a JSON tree.
///
/// Accepted: an object with `items` (a non-empty array of objects, each with exactly one member,
/// `url` or `text`, a string), and optionally `extension` and `group` (strings) and `open`
/// (`true`, `false` or a string), each at most once, in any order, with JSON whitespace anywhere.
/// Every string must be plain ASCII without escapes. Anything else (another member, `null`, a
/// number, an escape, non-ASCII text, a repeated member) is not read here: `scan` returns nil.
public final class ShareSendParams: Equatable, @unchecked Sendable {
    /// What an item carries.
    public enum ItemKind: Sendable, Equatable {
        /// `{"url": …}`
        case url
        /// `{"text": …}`
        case text
    }

    /// One item: its kind and its string.
    public struct Item: Sendable, Equatable {
        /// `url` or `text`.
        public var kind: ItemKind
        /// The URL or the text.
        public var value: String

        /// An item.
        public init(kind: ItemKind, value: String) {
            self.kind = kind
            self.value = value
        }
    }

    /// The `open` member.
    public enum Open: Sendable, Equatable {
        /// Not given.
        case absent
        /// `true` (open the containing app) or `false`.
        case flag(Bool)
        /// A URL to open.
        case url(String)
    }

    /// The items, in order (never empty).
    public private(set) var items: [Item] = []
    /// `extension`, when given.
    public private(set) var extensionID: String? = nil
    /// `group`, when given.
    public private(set) var group: String? = nil
    /// `open`.
    public private(set) var open: Open = .absent

    init() {}

    public static func == (a: ShareSendParams, b: ShareSendParams) -> Bool {
        a.items == b.items && a.extensionID == b.extensionID && a.group == b.group && a.open == b.open
    }

    /// The same params as the general parser reads them (members in the canonical order; JSON
    /// objects compare without regard to order).
    public var json: JSONValue {
        var o = JSONObject()
        o["items"] = .array(items.map { item in
            .object(JSONObject(uniqueMembers: [(key: item.kind == .url ? "url" : "text", value: .string(item.value))]))
        })
        if let extensionID { o["extension"] = .string(extensionID) }
        if let group { o["group"] = .string(group) }
        switch open {
        case .absent: break
        case .flag(let b): o["open"] = .bool(b)
        case .url(let u): o["open"] = .string(u)
        }
        return .object(o)
    }

    /// Reads params that start at `start` in `buf` (at their `{`). Returns them with the offset
    /// just past their closing `}`, or nil when they are not in the shape described above.
    public static func scan(_ buf: UnsafeRawBufferPointer, from start: Int) -> (params: ShareSendParams, end: Int)? {
        var s = Scanner(buf: buf, pos: start)
        let params = ShareSendParams()
        guard s.take(UInt8(ascii: "{")) else { return nil }
        var seen: UInt8 = 0
        while true {
            s.skipWhitespace()
            let member: UInt8
            if s.match(#""items""#) {
                member = 1
            } else if s.match(#""extension""#) {
                member = 2
            } else if s.match(#""group""#) {
                member = 4
            } else if s.match(#""open""#) {
                member = 8
            } else {
                return nil
            }
            guard seen & member == 0 else { return nil }
            seen |= member
            s.skipWhitespace()
            guard s.take(UInt8(ascii: ":")) else { return nil }
            s.skipWhitespace()
            switch member {
            case 1:
                guard s.take(UInt8(ascii: "[")) else { return nil }
                while true {
                    s.skipWhitespace()
                    guard s.take(UInt8(ascii: "{")) else { return nil }
                    s.skipWhitespace()
                    let kind: ItemKind
                    if s.match(#""url""#) {
                        kind = .url
                    } else if s.match(#""text""#) {
                        kind = .text
                    } else {
                        return nil
                    }
                    s.skipWhitespace()
                    guard s.take(UInt8(ascii: ":")) else { return nil }
                    s.skipWhitespace()
                    guard let value = s.plainString() else { return nil }
                    params.items.append(Item(kind: kind, value: value))
                    s.skipWhitespace()
                    guard s.take(UInt8(ascii: "}")) else { return nil }
                    s.skipWhitespace()
                    if s.take(UInt8(ascii: ",")) { continue }
                    guard s.take(UInt8(ascii: "]")) else { return nil }
                    break
                }
            case 2:
                guard let v = s.plainString() else { return nil }
                params.extensionID = v
            case 4:
                guard let v = s.plainString() else { return nil }
                params.group = v
            default:
                if s.match("true") {
                    params.open = .flag(true)
                } else if s.match("false") {
                    params.open = .flag(false)
                } else if let v = s.plainString() {
                    params.open = .url(v)
                } else {
                    return nil
                }
            }
            s.skipWhitespace()
            if s.take(UInt8(ascii: ",")) { continue }
            guard s.take(UInt8(ascii: "}")) else { return nil }
            break
        }
        guard seen & 1 != 0 else { return nil }
        return (params, s.pos)
    }

    private struct Scanner {
        let buf: UnsafeRawBufferPointer
        var pos: Int

        @inline(__always) mutating func skipWhitespace() {
            while pos < buf.count {
                let c = buf[pos]
                guard c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 else { return }
                pos += 1
            }
        }

        @inline(__always) mutating func take(_ c: UInt8) -> Bool {
            guard pos < buf.count, buf[pos] == c else { return false }
            pos += 1
            return true
        }

        /// True (and past it) when the bytes at `pos` are exactly `word`.
        @inline(__always) mutating func match(_ word: StaticString) -> Bool {
            let n = word.utf8CodeUnitCount
            guard pos + n <= buf.count else { return false }
            let start = word.utf8Start
            for i in 0..<n where buf[pos + i] != start[i] { return false }
            pos += n
            return true
        }

        /// A string of plain ASCII without escapes or control characters; nil for anything else.
        mutating func plainString() -> String? {
            guard take(UInt8(ascii: "\"")), let base = buf.baseAddress else { return nil }
            let start = pos
            while pos + 8 <= buf.count {
                let w = (base + pos).loadUnaligned(as: UInt64.self)
                if JSONValue.escapeFlags(w) | (w & 0x8080_8080_8080_8080) != 0 { break }
                pos += 8
            }
            while pos < buf.count {
                let c = buf[pos]
                if c == UInt8(ascii: "\"") {
                    let text = UnsafeRawBufferPointer(rebasing: buf[start..<pos])
                    pos += 1
                    return String(decoding: text, as: UTF8.self)
                }
                if c < 0x20 || c >= 0x80 || c == UInt8(ascii: "\\") { return nil }
                pos += 1
            }
            return nil
        }
    }
}
