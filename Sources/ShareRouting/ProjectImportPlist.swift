// Property lists for the project importer: an order-preserving XML plist reader (errors carry line
// numbers), with binary and old-style (OpenStep) plists read through Foundation's PropertyListSerialization.

import Foundation
import ShareProtocol

/// A property-list value. Dictionaries keep the order their keys were written in (XML plists);
/// for binary and OpenStep plists, whose reader does not report an order, keys are sorted.
public indirect enum PlistValue: Sendable, Equatable {
    /// `<string>`
    case string(String)
    /// `<integer>`, as a decimal lexeme (e.g. `"1"`, `"-42"`).
    case integer(String)
    /// `<real>`
    case real(Double)
    /// `<true/>` / `<false/>`
    case bool(Bool)
    /// `<date>`, as written (ISO 8601).
    case date(String)
    /// `<data>`, decoded.
    case data([UInt8])
    /// `<array>`
    case array([PlistValue])
    /// `<dict>`
    case dict(PlistDictionary)

    /// The plist type name, for messages ("string", "dictionary", ...).
    public var typeName: String {
        switch self {
        case .string: return "string"
        case .integer: return "integer"
        case .real: return "real"
        case .bool: return "boolean"
        case .date: return "date"
        case .data: return "data"
        case .array: return "array"
        case .dict: return "dictionary"
        }
    }

    /// The string, if this is a string.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The dictionary, if this is one.
    public var dictValue: PlistDictionary? { if case .dict(let d) = self { return d } else { return nil } }
    /// The array, if this is one.
    public var arrayValue: [PlistValue]? { if case .array(let a) = self { return a } else { return nil } }

    /// The value as JSON: integers and reals become numbers, booleans booleans, dates their ISO 8601
    /// text, data its base64 text, dictionaries objects in key order.
    public var json: JSONValue {
        switch self {
        case .string(let s): return .string(s)
        case .integer(let n): return .number(n)
        case .real(let d): return .double(d)
        case .bool(let b): return .bool(b)
        case .date(let s): return .string(s)
        case .data(let bytes): return .string(Data(bytes).base64EncodedString())
        case .array(let items): return .array(items.map(\.json))
        case .dict(let d): return .object(JSONObject(d.members.map { ($0.key, $0.value.json) }))
        }
    }
}

/// A plist dictionary: unique keys in order.
public struct PlistDictionary: Sendable, Equatable {
    /// The members, in order.
    public private(set) var members: [(key: String, value: PlistValue)]

    /// A dictionary from members (a later duplicate key replaces the earlier value, in its place).
    public init(_ pairs: [(String, PlistValue)] = []) {
        members = []
        for (k, v) in pairs { self[k] = v }
    }

    /// The keys, in order.
    public var keys: [String] { members.map(\.key) }

    /// Gets or sets a member.
    public subscript(key: String) -> PlistValue? {
        get {
            for m in members where m.key == key { return m.value }
            return nil
        }
        set {
            if let i = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[i].value = newValue } else { members.remove(at: i) }
            } else if let newValue {
                members.append((key, newValue))
            }
        }
    }

    /// Equal when the same keys map to equal values, whatever their order.
    public static func == (a: PlistDictionary, b: PlistDictionary) -> Bool {
        guard a.members.count == b.members.count else { return false }
        return a.members.allSatisfy { m in b[m.key] == m.value }
    }
}

/// Why a property list could not be read.
public struct PropertyListError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based line of the problem in an XML plist, when known.
    public var line: Int?
    /// What is wrong.
    public var reason: String

    /// Creates an error.
    public init(line: Int?, reason: String) {
        self.line = line
        self.reason = reason
    }

    /// "line N: reason" or "reason".
    public var description: String { line.map { "line \($0): \(reason)" } ?? reason }
}

/// Reading property lists in any of Apple's three formats.
public enum PropertyList {
    /// The format a plist was read from.
    public enum Format: String, Sendable, Equatable {
        /// `<?xml ...?><plist>` text, read by sharebroker's own reader (key order kept).
        case xml
        /// `bplist00`, read through Foundation (keys sorted).
        case binary
        /// Old-style `{ key = value; }` text, read through Foundation (keys sorted).
        case openStep
    }

    /// Parses plist bytes. XML is read directly; binary and OpenStep plists go through Foundation's
    /// `PropertyListSerialization` (which reads both on Linux).
    public static func parse(_ bytes: [UInt8]) throws(PropertyListError) -> (value: PlistValue, format: Format) {
        if bytes.starts(with: Array("bplist".utf8)) {
            return (try parseWithFoundation(bytes, expect: "binary"), .binary)
        }
        var start = 0
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) {
            // UTF-16 XML: rare; let Foundation decode it.
            return (try parseWithFoundation(bytes, expect: "UTF-16"), .xml)
        }
        while start < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[start]) { start += 1 }
        if start < bytes.count, bytes[start] == UInt8(ascii: "<") {
            var parser = XMLPlistReader(bytes: bytes, position: start)
            return (try parser.document(), .xml)
        }
        if start == bytes.count { throw PropertyListError(line: nil, reason: "the file is empty") }
        return (try parseWithFoundation(bytes, expect: "old-style (OpenStep)"), .openStep)
    }

    static func parseWithFoundation(_ bytes: [UInt8], expect: String) throws(PropertyListError) -> PlistValue {
        let any: Any
        var format = PropertyListSerialization.PropertyListFormat.xml
        do {
            any = try PropertyListSerialization.propertyList(from: Data(bytes), options: [], format: &format)
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            throw PropertyListError(line: nil, reason: "not a valid \(expect) property list" + (detail.map { ": \($0)" } ?? ""))
        }
        // (a damaged binary plist is not a binary one that Foundation then reads as old-style
        // text: "bplist00garbage" would be one string)
        if expect == "binary" && format != .binary {
            throw PropertyListError(line: nil, reason: "not a valid binary property list (it starts with 'bplist' but does not parse as one)")
        }
        guard let value = fromFoundation(any) else {
            throw PropertyListError(line: nil, reason: "unsupported value of type \(type(of: any)) in a \(expect) property list")
        }
        return value
    }

    /// Converts what `PropertyListSerialization` returns (NSNumber, Bool, String, Date, Data, arrays, dictionaries).
    static func fromFoundation(_ v: Any) -> PlistValue? {
        if type(of: v) == Bool.self, let b = v as? Bool { return .bool(b) }
        if let s = v as? String { return .string(s) }
        if let n = v as? NSNumber {
            // On Apple platforms a plist Boolean arrives as a CFBoolean NSNumber (type "c"), not a Bool.
            #if canImport(Darwin)
                if CFGetTypeID(n) == CFBooleanGetTypeID() { return .bool(n.boolValue) }
            #endif
            let kind = String(cString: n.objCType)
            if kind == "f" || kind == "d" { return .real(n.doubleValue) }
            if kind == "Q" || kind == "L" || kind == "I" { return .integer(String(n.uint64Value)) }
            return .integer(String(n.int64Value))
        }
        if let d = v as? Date {
            let f = ISO8601DateFormatter()
            return .date(f.string(from: d))
        }
        if let d = v as? Data { return .data([UInt8](d)) }
        if let a = v as? [Any] {
            var out: [PlistValue] = []
            for item in a {
                guard let x = fromFoundation(item) else { return nil }
                out.append(x)
            }
            return .array(out)
        }
        if let d = v as? [AnyHashable: Any] {
            var pairs: [(String, PlistValue)] = []
            for (k, item) in d {
                guard let key = k.base as? String, let x = fromFoundation(item) else { return nil }
                pairs.append((key, x))
            }
            pairs.sort { $0.0 < $1.0 }
            return .dict(PlistDictionary(pairs))
        }
        return nil
    }
}

/// A strict reader for Apple's XML plist format (the DTD's elements, comments, CDATA, entities).
struct XMLPlistReader {
    let bytes: [UInt8]
    var position: Int
    static let maxDepth = 256

    struct Tag {
        var name: String
        var closing: Bool
        var empty: Bool
        var offset: Int
    }

    func line(at offset: Int) -> Int {
        var n = 1
        for i in 0..<min(offset, bytes.count) where bytes[i] == 0x0A { n += 1 }
        return n
    }

    func error(_ reason: String, at offset: Int? = nil) -> PropertyListError {
        PropertyListError(line: line(at: offset ?? position), reason: reason)
    }

    func starts(with s: String, at offset: Int) -> Bool {
        let u = Array(s.utf8)
        guard offset + u.count <= bytes.count else { return false }
        return Array(bytes[offset..<(offset + u.count)]) == u
    }

    mutating func skipWhitespace() {
        while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
    }

    /// Skips `<!-- ... -->` at the current position.
    mutating func skipComment() throws(PropertyListError) {
        let start = position
        position += 4
        while position + 2 < bytes.count {
            if bytes[position] == UInt8(ascii: "-"), starts(with: "-->", at: position) {
                position += 3
                return
            }
            position += 1
        }
        throw error("unterminated comment", at: start)
    }

    /// Skips whitespace, comments, `<?...?>` and `<!DOCTYPE ...>`.
    mutating func skipMisc() throws(PropertyListError) {
        while true {
            skipWhitespace()
            if starts(with: "<!--", at: position) {
                try skipComment()
            } else if starts(with: "<?", at: position) {
                let start = position
                while position + 1 < bytes.count, !(bytes[position] == UInt8(ascii: "?") && bytes[position + 1] == UInt8(ascii: ">")) {
                    position += 1
                }
                guard position + 1 < bytes.count else { throw error("unterminated <? ... ?>", at: start) }
                position += 2
            } else if starts(with: "<!DOCTYPE", at: position) {
                let start = position
                var depth = 0
                while position < bytes.count {
                    let c = bytes[position]
                    if c == UInt8(ascii: "[") { depth += 1 }
                    if c == UInt8(ascii: "]") { depth -= 1 }
                    position += 1
                    if c == UInt8(ascii: ">") && depth <= 0 { break }
                }
                guard position <= bytes.count, bytes[position - 1] == UInt8(ascii: ">") else {
                    throw error("unterminated <!DOCTYPE", at: start)
                }
            } else {
                return
            }
        }
    }

    /// Reads a tag at the current position (which must be `<`).
    mutating func tag() throws(PropertyListError) -> Tag {
        let start = position
        guard position < bytes.count, bytes[position] == UInt8(ascii: "<") else {
            if position >= bytes.count { throw error("unexpected end of file", at: start) }
            throw error("expected an element, found text", at: start)
        }
        position += 1
        var closing = false
        if position < bytes.count, bytes[position] == UInt8(ascii: "/") {
            closing = true
            position += 1
        }
        let nameStart = position
        while position < bytes.count {
            let c = bytes[position]
            if c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == UInt8(ascii: "/") || c == UInt8(ascii: ">") { break }
            position += 1
        }
        let name = String(decoding: bytes[nameStart..<position], as: UTF8.self)
        if name.isEmpty { throw error("malformed tag", at: start) }
        var empty = false
        var quote: UInt8? = nil
        while position < bytes.count {
            let c = bytes[position]
            if let q = quote {
                if c == q { quote = nil }
            } else if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") {
                quote = c
            } else if c == UInt8(ascii: ">") {
                position += 1
                return Tag(name: name, closing: closing, empty: empty, offset: start)
            } else if c == UInt8(ascii: "/") {
                empty = true
            } else if c != 0x20 && c != 0x09 && c != 0x0A && c != 0x0D {
                empty = false
            }
            position += 1
        }
        throw error("unterminated <\(closing ? "/" : "")\(name)> tag", at: start)
    }

    /// The next tag, skipping whitespace and comments; text in between is an error.
    mutating func nextTag(inside parent: String) throws(PropertyListError) -> Tag {
        while true {
            skipWhitespace()
            if starts(with: "<!--", at: position) {
                try skipComment()
                continue
            }
            if position >= bytes.count { throw error("unexpected end of file inside <\(parent)>") }
            if bytes[position] != UInt8(ascii: "<") { throw error("unexpected text inside <\(parent)>") }
            return try tag()
        }
    }

    mutating func document() throws(PropertyListError) -> PlistValue {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]), position < 3 { position = 3 }
        try skipMisc()
        let first = try tag()
        let value: PlistValue
        if first.name == "plist" && !first.closing {
            if first.empty { throw error("<plist/> holds no value", at: first.offset) }
            let inner = try nextTag(inside: "plist")
            if inner.closing { throw error("<plist> holds no value", at: inner.offset) }
            value = try self.value(inner, depth: 0)
            let end = try nextTag(inside: "plist")
            guard end.closing, end.name == "plist" else {
                throw error("expected </plist> after the value, found <\(end.closing ? "/" : "")\(end.name)>", at: end.offset)
            }
        } else {
            value = try self.value(first, depth: 0)
        }
        try skipMisc()
        if position < bytes.count { throw error("unexpected content after the end of the property list") }
        return value
    }

    /// Text content up to `</name>` (entities decoded, CDATA copied, comments skipped, CR LF → LF).
    mutating func text(until name: String) throws(PropertyListError) -> String {
        var out: [UInt8] = []
        let start = position
        while position < bytes.count {
            let c = bytes[position]
            if c == UInt8(ascii: "<") {
                if starts(with: "<![CDATA[", at: position) {
                    position += 9
                    while position < bytes.count, !starts(with: "]]>", at: position) {
                        out.append(bytes[position])
                        position += 1
                    }
                    guard position < bytes.count else { throw error("unterminated CDATA section") }
                    position += 3
                    continue
                }
                if starts(with: "<!--", at: position) {
                    try skipComment()
                    continue
                }
                let t = try tag()
                guard t.closing, t.name == name else {
                    throw error("unexpected <\(t.closing ? "/" : "")\(t.name)> inside <\(name)>", at: t.offset)
                }
                return normalizeNewlines(out)
            } else if c == UInt8(ascii: "&") {
                out.append(contentsOf: try entity())
            } else {
                out.append(c)
                position += 1
            }
        }
        throw error("unterminated <\(name)>", at: start)
    }

    func normalizeNewlines(_ b: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(b.count)
        var i = 0
        while i < b.count {
            if b[i] == 0x0D {
                out.append(0x0A)
                if i + 1 < b.count, b[i + 1] == 0x0A { i += 1 }
            } else {
                out.append(b[i])
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    mutating func entity() throws(PropertyListError) -> [UInt8] {
        let start = position
        guard let semi = bytes[position...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
            throw error("'&' must start an entity such as &amp;", at: start)
        }
        let name = String(decoding: bytes[(position + 1)..<semi], as: UTF8.self)
        position = semi + 1
        switch name {
        case "lt": return [UInt8(ascii: "<")]
        case "gt": return [UInt8(ascii: ">")]
        case "amp": return [UInt8(ascii: "&")]
        case "quot": return [UInt8(ascii: "\"")]
        case "apos": return [UInt8(ascii: "'")]
        default:
            var scalar: UInt32? = nil
            if name.hasPrefix("#x") || name.hasPrefix("#X") {
                scalar = UInt32(name.dropFirst(2), radix: 16)
            } else if name.hasPrefix("#") {
                scalar = UInt32(name.dropFirst(), radix: 10)
            }
            guard let s = scalar, let u = Unicode.Scalar(s) else { throw error("unknown entity &\(name);", at: start) }
            return Array(String(Character(u)).utf8)
        }
    }

    mutating func value(_ open: Tag, depth: Int) throws(PropertyListError) -> PlistValue {
        if open.closing { throw error("unexpected </\(open.name)>", at: open.offset) }
        if depth > XMLPlistReader.maxDepth { throw error("nested too deeply", at: open.offset) }
        switch open.name {
        case "dict":
            var dict = PlistDictionary()
            if open.empty { return .dict(dict) }
            while true {
                let t = try nextTag(inside: "dict")
                if t.closing {
                    guard t.name == "dict" else { throw error("unexpected </\(t.name)> inside <dict>", at: t.offset) }
                    return .dict(dict)
                }
                guard t.name == "key" else { throw error("expected <key> inside <dict>, found <\(t.name)>", at: t.offset) }
                let key = t.empty ? "" : try text(until: "key")
                let v = try nextTag(inside: "dict")
                if v.closing {
                    throw error("value missing for key '\(key)' inside <dict>", at: v.offset)
                }
                if v.name == "key" { throw error("value missing for key '\(key)' inside <dict>", at: v.offset) }
                dict[key] = try value(v, depth: depth + 1)
            }
        case "array":
            var items: [PlistValue] = []
            if open.empty { return .array(items) }
            while true {
                let t = try nextTag(inside: "array")
                if t.closing {
                    guard t.name == "array" else { throw error("unexpected </\(t.name)> inside <array>", at: t.offset) }
                    return .array(items)
                }
                items.append(try value(t, depth: depth + 1))
            }
        case "string":
            return .string(open.empty ? "" : try text(until: "string"))
        case "integer":
            let raw = open.empty ? "" : try text(until: "integer")
            let s = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let n = XMLPlistReader.integerLexeme(s) else { throw error("'\(s)' is not an integer", at: open.offset) }
            return .integer(n)
        case "real":
            let raw = open.empty ? "" : try text(until: "real")
            let s = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let d = Double(s) else { throw error("'\(s)' is not a real number", at: open.offset) }
            return .real(d)
        case "true", "false":
            if !open.empty {
                let rest = try text(until: open.name)
                if !rest.allSatisfy(\.isWhitespace) { throw error("<\(open.name)> must be empty", at: open.offset) }
            }
            return .bool(open.name == "true")
        case "date":
            let raw = open.empty ? "" : try text(until: "date")
            return .date(raw.trimmingCharacters(in: .whitespacesAndNewlines))
        case "data":
            let raw = open.empty ? "" : try text(until: "data")
            guard let d = Data(base64Encoded: raw.filter { !$0.isWhitespace }) else {
                throw error("<data> is not valid base64", at: open.offset)
            }
            return .data([UInt8](d))
        case "key":
            throw error("<key> outside a <dict>", at: open.offset)
        default:
            throw error("unknown element <\(open.name)>", at: open.offset)
        }
    }

    /// Decimal lexeme of a plist integer (decimal or 0x hex, optional sign), or nil.
    static func integerLexeme(_ s: String) -> String? {
        var body = Substring(s)
        var negative = false
        if body.hasPrefix("-") {
            negative = true
            body = body.dropFirst()
        } else if body.hasPrefix("+") {
            body = body.dropFirst()
        }
        let magnitude: UInt64?
        if body.hasPrefix("0x") || body.hasPrefix("0X") {
            magnitude = UInt64(body.dropFirst(2), radix: 16)
        } else {
            magnitude = body.allSatisfy(\.isASCII) ? UInt64(body, radix: 10) : nil
        }
        guard let m = magnitude else { return nil }
        if negative {
            guard m <= UInt64(Int64.max) + 1 else { return nil }
            return m == 0 ? "0" : "-\(m)"
        }
        return String(m)
    }
}
