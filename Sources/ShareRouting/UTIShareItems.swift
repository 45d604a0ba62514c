// Shared items as the contract gives them ({url}, {text}, {data, name}, {path}, each with an optional type)
// and the attachment each becomes for activation rules: its registeredTypeIdentifiers, given or inferred
// (web URL, file URL, text, filename extension, content sniffing), and the URLs a text carries.

import ShareProtocol

/// What kind of thing an item is.
public enum ShareItemKind: String, Sendable, Equatable, CaseIterable {
    /// `{"url": ...}`
    case url
    /// `{"text": ...}`
    case text
    /// `{"data": BASE64, "name"?: ...}`: bytes handed over in the request.
    case data
    /// `{"path": "/abs/file"}`: a file the broker reads.
    case file
}

/// A malformed item in a request (-32602 material). `field` names the member, e.g. `items[1].data`.
public struct ShareItemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field, e.g. `items[0].url`.
    public var field: String
    /// What is wrong.
    public var message: String

    /// Creates an error.
    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    /// "field: message".
    public var description: String { "\(field): \(message)" }
}

/// One shared item.
public struct ShareItem: Sendable, Equatable {
    /// The item's content.
    public enum Content: Sendable, Equatable {
        /// A URL, as written.
        case url(String)
        /// A text.
        case text(String)
        /// Bytes and an optional file name.
        case data([UInt8], name: String?)
        /// An absolute path and the file's first bytes (for sniffing; empty until the broker reads them).
        case file(path: String, head: [UInt8])
    }

    /// The content.
    public var content: Content
    /// The type the sender gave (`"type"`), if any.
    public var type: String?

    /// Creates an item.
    public init(_ content: Content, type: String? = nil) {
        self.content = content
        self.type = type
    }

    /// A URL item.
    public static func url(_ url: String, type: String? = nil) -> ShareItem { ShareItem(.url(url), type: type) }
    /// A text item.
    public static func text(_ text: String, type: String? = nil) -> ShareItem { ShareItem(.text(text), type: type) }
    /// A data item.
    public static func data(_ bytes: [UInt8], name: String? = nil, type: String? = nil) -> ShareItem {
        ShareItem(.data(bytes, name: name), type: type)
    }
    /// A file item; `head` is the file's first bytes (4 KiB is plenty for sniffing).
    public static func file(path: String, head: [UInt8] = [], type: String? = nil) -> ShareItem {
        ShareItem(.file(path: path, head: head), type: type)
    }

    /// The item's kind.
    public var kind: ShareItemKind {
        switch content {
        case .url: return .url
        case .text: return .text
        case .data: return .data
        case .file: return .file
        }
    }

    /// The path of a file item.
    public var path: String? { if case .file(let p, _) = content { return p } else { return nil } }

    /// A file item with its first bytes filled in (other items unchanged).
    public func withFileHead(_ head: [UInt8]) -> ShareItem {
        guard case .file(let p, _) = content else { return self }
        return ShareItem(.file(path: p, head: head), type: type)
    }

    /// Reads an item in the contract's shape: exactly one of `url`, `text`, `data` (base64), `path` (absolute),
    /// plus optional `name` (data items) and `type` (a UTI). `field` prefixes error fields, e.g. `items[2]`.
    /// A path item comes back with an empty head: the broker reads the file and calls `withFileHead(_:)`.
    public static func parse(_ json: JSONValue, field: String = "item") throws(ShareItemError) -> ShareItem {
        guard case .object(let o) = json else {
            throw ShareItemError(field: field, message: "expected an object, got \(json.typeName)")
        }
        let present = ["url", "text", "data", "path"].filter { o[$0] != nil }
        guard present.count == 1, let which = present.first else {
            let found = present.isEmpty ? "none" : present.joined(separator: ", ")
            throw ShareItemError(
                field: field, message: "exactly one of url, text, data, path is required (found \(found))")
        }
        func string(_ key: String, allowEmpty: Bool) throws(ShareItemError) -> String? {
            guard let v = o[key] else { return nil }
            guard case .string(let s) = v else {
                throw ShareItemError(field: "\(field).\(key)", message: "expected a string, got \(v.typeName)")
            }
            if !allowEmpty, s.isEmpty { throw ShareItemError(field: "\(field).\(key)", message: "must not be empty") }
            return s
        }
        var type = try string("type", allowEmpty: false)
        if let t = type {
            let trimmed = Substring(t).utiTrimmingASCIIWhitespace()
            guard UTITable.isValidIdentifier(trimmed) else {
                throw ShareItemError(
                    field: "\(field).type", message: "'\(t)' is not a type identifier (e.g. public.url, com.adobe.pdf)")
            }
            type = trimmed
        }
        let name = try string("name", allowEmpty: false)
        if name != nil, which != "data" {
            throw ShareItemError(field: "\(field).name", message: "name goes with a data item only")
        }
        switch which {
        case "url":
            let u = try string("url", allowEmpty: false)!
            let ref: URLReference
            do { ref = try URLReference(parsingLeniently: u) } catch {
                throw ShareItemError(field: "\(field).url", message: error.message)
            }
            return .url(ref.original, type: type)
        case "text":
            return .text(try string("text", allowEmpty: true)!, type: type)
        case "data":
            let encoded = try string("data", allowEmpty: true)!
            guard let bytes = Base64.decode(encoded) else {
                throw ShareItemError(field: "\(field).data", message: "not valid base64")
            }
            if let name, name.contains("/") || name == "." || name == ".." {
                throw ShareItemError(
                    field: "\(field).name", message: "'\(name)' is not a file name (no '/', not '.' or '..')")
            }
            return .data(bytes, name: name, type: type)
        default:
            let p = try string("path", allowEmpty: false)!
            guard p.hasPrefix("/") else {
                throw ShareItemError(field: "\(field).path", message: "'\(p)' is not an absolute path")
            }
            return .file(path: p, type: type)
        }
    }
}

/// Where an attachment's primary type came from.
public enum TypeSource: String, Sendable, Equatable {
    /// The item's `type`.
    case given
    /// A URL item: `public.url`, or `public.file-url` for `file:` URLs.
    case url
    /// A text item: `public.plain-text`.
    case text
    /// The file name's extension.
    case filenameExtension
    /// Content sniffing.
    case content
    /// Nothing else applied: `public.data`.
    case fallback
}

/// An item as activation rules see it: one attachment of the single extension item.
///
/// `registeredTypeIdentifiers` is the item's type (given or inferred), primary first. A text item that is
/// exactly a URL (after trimming whitespace, the way the seeds' extension read it) also carries `public.url`,
/// as the contract says; a text that merely contains URLs keeps `public.plain-text` only and lists them in
/// `carriedURLs`, which the broker can store with the share (rules do not see them, as on iOS, where a
/// host app shares such a URL as a separate `public.url` attachment).
public struct Attachment: Sendable, Equatable {
    /// The item's kind.
    public var kind: ShareItemKind
    /// The attachment's types, primary first.
    public var registeredTypeIdentifiers: [String]
    /// The URL of a URL item, or of a text item that is exactly a URL (trimmed).
    public var url: String?
    /// URLs found in a text item (in order, without duplicates); empty for other items.
    public var carriedURLs: [String]
    /// Where the primary type came from.
    public var typeSource: TypeSource

    /// Creates an attachment.
    public init(
        kind: ShareItemKind, registeredTypeIdentifiers: [String], url: String? = nil, carriedURLs: [String] = [],
        typeSource: TypeSource = .given
    ) {
        self.kind = kind
        self.registeredTypeIdentifiers = registeredTypeIdentifiers
        self.url = url
        self.carriedURLs = carriedURLs
        self.typeSource = typeSource
    }

    /// The primary type.
    public var primaryType: String { registeredTypeIdentifiers.first ?? "public.data" }

    /// The attachment as the activation predicate sees it: `{registeredTypeIdentifiers: [...]}`.
    public var predicateValue: PredicateValue {
        .object(["registeredTypeIdentifiers": .array(registeredTypeIdentifiers.map { .string($0) })])
    }
}

extension UTITable {
    /// The attachment of a URL item whose URL the caller has parsed already (`isFile`: its
    /// scheme is `file`): as `attachment(for: .url(u, type: type))`, without parsing it again.
    public func urlAttachment(_ u: String, isFile: Bool, type: String?) -> Attachment {
        if let t = type {
            return Attachment(kind: .url, registeredTypeIdentifiers: [t], url: u, typeSource: .given)
        }
        return Attachment(
            kind: .url, registeredTypeIdentifiers: isFile ? UTITable.fileURLTypes : UTITable.urlTypes, url: u, typeSource: .url)
    }

    /// The types of a URL item without a given type (shared arrays: one allocation saved per item).
    static let urlTypes = ["public.url"]
    static let fileURLTypes = ["public.file-url"]

    /// The attachment for an item: its registeredTypeIdentifiers (primary first) and URLs.
    ///
    /// - URL items: the given type, else `public.file-url` for `file:` URLs and `public.url` for any other scheme.
    /// - Text items: the given type, else `public.plain-text`; plus `public.url` when the whole text (trimmed)
    ///   is a URL (see `exactURL(in:)`).
    /// - Data and file items: the given type, else the name's extension, else sniffing the bytes, else `public.data`.
    public func attachment(for item: ShareItem) -> Attachment {
        switch item.content {
        case .url(let u):
            // Only a text starting "file:" (any case) can parse with the scheme `file`: skip the
            // parse for the rest.
            let isFile = URLReference.startsWithScheme(u, "file") && URLReference.parse(u)?.normalizedScheme == "file"
            return urlAttachment(u, isFile: isFile, type: item.type)
        case .text(let text):
            let exact = exactURL(in: text)
            var types = [item.type ?? "public.plain-text"]
            if exact != nil, !conforms(types[0], to: "public.url") { types.append("public.url") }
            return Attachment(
                kind: .text, registeredTypeIdentifiers: types, url: exact, carriedURLs: urlsFoundIn(text),
                typeSource: item.type == nil ? .text : .given)
        case .data(let bytes, let name):
            let (t, source) = fileType(given: item.type, name: name, head: bytes)
            return Attachment(kind: .data, registeredTypeIdentifiers: [t], typeSource: source)
        case .file(let path, let head):
            let (t, source) = fileType(given: item.type, name: path, head: head)
            return Attachment(kind: .file, registeredTypeIdentifiers: [t], typeSource: source)
        }
    }

    /// The attachments for items, in order.
    public func attachments(for items: [ShareItem]) -> [Attachment] { items.map { attachment(for: $0) } }

    private func fileType(given: String?, name: String?, head: [UInt8]) -> (String, TypeSource) {
        if let given { return (given, .given) }
        if let name, let t = type(forFilename: name) { return (t, .filenameExtension) }
        if let t = sniffType(of: head.count > 8192 ? Array(head[0..<8192]) : head) { return (t, .content) }
        return ("public.data", .fallback)
    }
}

/// The URL a whole text is, after trimming surrounding whitespace and newlines, or nil. A text
/// written as an IRI (`https://bücher.de/`) gives the URL it names, encoded
/// (`URLReference(parsingLeniently:)`).
///
/// The text must parse as an absolute URL (RFC 3986) without inner whitespace, with an authority (`scheme://`)
/// or one of the common opaque schemes (`mailto:`, `tel:`, `sms:`, `facetime:`, `facetime-audio:`, `urn:`,
/// `magnet:`, `geo:`); `http`/`https` URLs need a host. This is how the seeds' share extension dug a URL out of
/// shared text (`URL(string: text.trimmingCharacters(in: .whitespacesAndNewlines))`), made strict so that a
/// sentence such as "Re: lunch" is not a URL.
public func exactURL(in text: String) -> String? {
    var t = Substring(text)
    while let f = t.first, f.isWhitespace { t = t.dropFirst() }
    while let l = t.last, l.isWhitespace { t = t.dropLast() }
    guard !t.isEmpty, !t.contains(where: { $0.isWhitespace }) else { return nil }
    // (an IRI, `https://bücher.de/`, is the URL it names: the encoded form is returned)
    guard let ref = try? URLReference(parsingLeniently: String(t)) else { return nil }
    let opaque: Set<String> = ["mailto", "tel", "sms", "facetime", "facetime-audio", "urn", "magnet", "geo"]
    guard ref.authority != nil || opaque.contains(ref.normalizedScheme) else { return nil }
    if ref.isWeb, (ref.host ?? "").isEmpty { return nil }
    return ref.original
}

/// The URLs a text carries: each `scheme://...` run (ending at whitespace, quotes or angle brackets, without
/// trailing punctuation or an unbalanced closing bracket) that parses as a URL (an IRI's encoded form), in
/// order, without duplicates.
/// `http`/`https` URLs need a host. A text that is exactly a URL yields that URL.
public func urlsFoundIn(_ text: String) -> [String] {
    let s = Array(text.unicodeScalars)
    var out: [String] = []
    var seen = Set<String>()
    func isSchemeChar(_ c: Unicode.Scalar) -> Bool {
        c.isASCII && (c.properties.isAlphabetic || (c >= "0" && c <= "9") || c == "+" || c == "-" || c == ".")
    }
    func isLetter(_ c: Unicode.Scalar) -> Bool { c.isASCII && c.properties.isAlphabetic }
    var i = 0
    while i + 2 < s.count {
        guard s[i] == ":", s[i + 1] == "/", s[i + 2] == "/" else {
            i += 1
            continue
        }
        var start = i
        while start > 0, isSchemeChar(s[start - 1]) { start -= 1 }
        while start < i, !isLetter(s[start]) { start += 1 }  // a scheme starts with a letter
        guard start < i else {
            i += 3
            continue
        }
        var end = i + 3
        while end < s.count {
            let c = s[end]
            if c.properties.isWhitespace || c == "\"" || c == "<" || c == ">" || c == "`" || c.value < 0x20 { break }
            end += 1
        }
        // Trim trailing punctuation and unbalanced closers. The brackets of s[start..<end] are
        // counted once, when the first closer is met, and the counts follow `end` down (only
        // punctuation and closers are trimmed): linear however many closers the run ends with.
        var counted = false
        var unclosed = (paren: 0, square: 0, curly: 0)  // closers minus openers in s[start..<end]
        trim: while end > i + 3 {
            let c = s[end - 1]
            switch c {
            case ".", ",", ";", ":", "!", "?", "'", "*":
                end -= 1
            case ")", "]", "}":
                if !counted {
                    for d in s[start..<end] {
                        switch d {
                        case "(": unclosed.paren -= 1
                        case ")": unclosed.paren += 1
                        case "[": unclosed.square -= 1
                        case "]": unclosed.square += 1
                        case "{": unclosed.curly -= 1
                        case "}": unclosed.curly += 1
                        default: break
                        }
                    }
                    counted = true
                }
                switch c {
                case ")" where unclosed.paren > 0: unclosed.paren -= 1
                case "]" where unclosed.square > 0: unclosed.square -= 1
                case "}" where unclosed.curly > 0: unclosed.curly -= 1
                default: break trim  // a balanced closer ends the URL
                }
                end -= 1
            default:
                break trim
            }
        }
        var candidate = ""
        candidate.unicodeScalars.append(contentsOf: s[start..<end])
        // (an IRI is the URL it names: its encoded form is the one listed)
        if let ref = try? URLReference(parsingLeniently: candidate), !(ref.isWeb && (ref.host ?? "").isEmpty),
            seen.insert(ref.original).inserted
        {
            out.append(ref.original)
        }
        i = max(end, i + 3)
    }
    return out
}

/// Standard base64 (RFC 4648 §4), padding optional, whitespace ignored; with `urlSafe` the
/// URL-safe alphabet (§5) is accepted too.
public enum Base64 {
    /// `bytes` in standard base64 with padding (RFC 4648 §4).
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        let digits = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var it = bytes.makeIterator()
        while let a = it.next() {
            let b = it.next(), c = it.next()
            let n = UInt32(a) << 16 | UInt32(b ?? 0) << 8 | UInt32(c ?? 0)
            out.append(digits[Int(n >> 18 & 63)])
            out.append(digits[Int(n >> 12 & 63)])
            out.append(b == nil ? UInt8(ascii: "=") : digits[Int(n >> 6 & 63)])
            out.append(c == nil ? UInt8(ascii: "=") : digits[Int(n & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Per byte: 0...63 a digit of the standard alphabet, 64 / 65 the URL-safe `-` / `_`, 66 `=`,
    /// 67 whitespace, 255 anything else.
    private static let table: [UInt8] = {
        var t = [UInt8](repeating: 255, count: 256)
        for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(UInt8(ascii: "-"))] = 64
        t[Int(UInt8(ascii: "_"))] = 65
        t[Int(UInt8(ascii: "="))] = 66
        for c in [0x20, 0x09, 0x0A, 0x0D] { t[c] = 67 }
        return t
    }()

    /// The decoded bytes, or nil when `text` is not base64.
    public static func decode(_ text: String, urlSafe: Bool = true) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode(bytes: $0, urlSafe: urlSafe) }
    }

    /// `decode` over the text's UTF-8 bytes: four digits at a time while they are plain digits,
    /// one at a time around whitespace and padding.
    static func decode(bytes b: UnsafeBufferPointer<UInt8>, urlSafe: Bool) -> [UInt8]? {
        let n = b.count
        var failed = false
        let out = [UInt8](unsafeUninitializedCapacity: n / 4 * 3 + 3) { buf, written in
            let t = table
            t.withUnsafeBufferPointer { t in
                var o = 0
                var acc: UInt32 = 0
                var bits = 0
                var padding = 0
                var i = 0
                while i < n {
                    if bits == 0 && padding == 0 && i + 4 <= n {
                        let a = t[Int(b[i])], c = t[Int(b[i + 1])], d = t[Int(b[i + 2])], e = t[Int(b[i + 3])]
                        if (a | c | d | e) < 64 {
                            let v = UInt32(a) << 18 | UInt32(c) << 12 | UInt32(d) << 6 | UInt32(e)
                            buf[o] = UInt8(truncatingIfNeeded: v >> 16)
                            buf[o + 1] = UInt8(truncatingIfNeeded: v >> 8)
                            buf[o + 2] = UInt8(truncatingIfNeeded: v)
                            o += 3
                            i += 4
                            continue
                        }
                    }
                    var v = UInt32(t[Int(b[i])])
                    i += 1
                    switch v {
                    case 0..<64: break
                    case 64, 65:
                        guard urlSafe else {
                            failed = true
                            return
                        }
                        v -= 2  // `-` is 62, `_` is 63
                    case 66:
                        padding += 1
                        continue
                    case 67: continue
                    default:
                        failed = true
                        return
                    }
                    if padding > 0 {  // data after padding
                        failed = true
                        return
                    }
                    acc = (acc << 6) | v
                    bits += 6
                    if bits >= 8 {
                        bits -= 8
                        buf[o] = UInt8((acc >> UInt32(bits)) & 0xFF)
                        o += 1
                    }
                }
                // A lone trailing character cannot encode a byte.
                if bits >= 6 || padding > 2 { failed = true }
                written = o
            }
        }
        return failed ? nil : out
    }
}
