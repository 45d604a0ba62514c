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
    public internal(set) var items: [Item] = []
    /// `extension`, when given.
    public internal(set) var extensionID: String? = nil
    /// `group`, when given.
    public internal(set) var group: String? = nil
    /// `open`.
    public internal(set) var open: Open = .absent

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
        var p = Parser(buf: buf)
        p.pos = start
        guard let params = p.readShareSendParams() else { return nil }
        return (params, p.pos)
    }
}

extension Parser {
    /// `ShareSendParams.scan` at the parser's position: past the params when it returns them,
    /// left where it was after nil (the general parser then reads them).
    mutating func readShareSendParams() -> ShareSendParams? {
        let start = pos
        guard let params = scanShareSendParams() else {
            pos = start
            return nil
        }
        return params
    }

    private mutating func take(_ c: UInt8) -> Bool {
        guard peek() == c else { return false }
        pos += 1
        return true
    }

    /// A string of plain ASCII without escapes or control characters; nil for anything else.
    private mutating func plainString() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = pos
        skipPlainASCIIWords()
        while let c = peek() {
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

    private mutating func scanShareSendParams() -> ShareSendParams? {
        typealias Item = ShareSendParams.Item
        let params = ShareSendParams()
        guard take(UInt8(ascii: "{")) else { return nil }
        var seen: UInt8 = 0
        while true {
            skipWhitespace()
            let member: UInt8
            if match(#""items""#) {
                member = 1
            } else if match(#""extension""#) {
                member = 2
            } else if match(#""group""#) {
                member = 4
            } else if match(#""open""#) {
                member = 8
            } else {
                return nil
            }
            guard seen & member == 0 else { return nil }
            seen |= member
            skipWhitespace()
            guard take(UInt8(ascii: ":")) else { return nil }
            skipWhitespace()
            switch member {
            case 1:
                guard take(UInt8(ascii: "[")) else { return nil }
                while true {
                    skipWhitespace()
                    guard take(UInt8(ascii: "{")) else { return nil }
                    skipWhitespace()
                    let kind: ShareSendParams.ItemKind
                    if match(#""url""#) {
                        kind = .url
                    } else if match(#""text""#) {
                        kind = .text
                    } else {
                        return nil
                    }
                    skipWhitespace()
                    guard take(UInt8(ascii: ":")) else { return nil }
                    skipWhitespace()
                    guard let value = plainString() else { return nil }
                    params.items.append(Item(kind: kind, value: value))
                    skipWhitespace()
                    guard take(UInt8(ascii: "}")) else { return nil }
                    skipWhitespace()
                    if take(UInt8(ascii: ",")) { continue }
                    guard take(UInt8(ascii: "]")) else { return nil }
                    break
                }
            case 2:
                guard let v = plainString() else { return nil }
                params.extensionID = v
            case 4:
                guard let v = plainString() else { return nil }
                params.group = v
            default:
                if match("true") {
                    params.open = .flag(true)
                } else if match("false") {
                    params.open = .flag(false)
                } else if let v = plainString() {
                    params.open = .url(v)
                } else {
                    return nil
                }
            }
            skipWhitespace()
            if take(UInt8(ascii: ",")) { continue }
            guard take(UInt8(ascii: "}")) else { return nil }
            break
        }
        guard seen & 1 != 0 else { return nil }
        return params
    }
}
