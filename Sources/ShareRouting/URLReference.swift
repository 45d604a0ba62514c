// URLReference: strict RFC 3986 parsing of absolute URLs, without Foundation's URL (no lenient
// fix-ups, no normalization). Keeps the text as written and splits it into its components;
// every rejection says exactly what is wrong and where.

/// Why a string is not a URL. `message` is the full text the broker sends with -32602.
public struct URLParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The string that was given, unchanged.
    public var input: String
    /// What is wrong, e.g. "space at position 3 must be percent-encoded".
    public var reason: String
    /// 0-based position (in Unicode scalars) of the offending character, when there is one.
    public var position: Int?

    /// Creates an error.
    public init(input: String, reason: String, position: Int? = nil) {
        self.input = input
        self.reason = reason
        self.position = position
    }

    /// "invalid URL 'INPUT': REASON" (control characters in INPUT shown escaped, long input shortened).
    public var message: String { "invalid URL '\(URLParseError.display(input))': \(reason)" }
    /// Same as `message`.
    public var description: String { message }

    /// The input as it is safe to show on one line: control characters escaped, at most 200 scalars.
    static func display(_ s: String) -> String {
        var out = ""
        var n = 0
        for u in s.unicodeScalars {
            n += 1
            if n > 200 {
                out += "…"
                break
            }
            switch u.value {
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case 0..<0x20, 0x7F: out += "\\u{\(String(u.value, radix: 16, uppercase: true))}"
            default: out.unicodeScalars.append(u)
            }
        }
        return out
    }
}

/// An absolute URL (RFC 3986 `URI`: `scheme ":" hier-part [ "?" query ] [ "#" fragment ]`), parsed strictly.
///
/// Every component is kept exactly as written (still percent-encoded); only `normalizedScheme` and
/// `host` are lowercased, for matching. Parsing rejects what RFC 3986 does not allow raw (spaces,
/// control characters, non-ASCII, `"<>\^`{|}`, malformed `%XX`), a missing or invalid scheme, an
/// invalid port, and `http`/`https` URLs without a host.
public struct URLReference: Sendable, Equatable, Hashable, CustomStringConvertible {
    // Stored: the text as given, the lowercased scheme and the port; every other component is a
    // range of `original`'s bytes (the text is ASCII once parsed), made into a string when asked
    // for. Routing a URL reads little more than its scheme, so parsing allocates no strings for
    // the rest, and a copy of the value is one reference. Equality and hashing follow from
    // `original` (everything else is derived from it).

    /// The string as given, unchanged.
    public let original: String
    /// The scheme lowercased (schemes compare case-insensitively, RFC 3986 §3.1).
    public let normalizedScheme: String
    /// The port, when one is written and not empty (`http://h:/` has none).
    public let port: Int?
    /// Byte ranges in `original` (start, end; start -1 when the component is absent).
    private let parts: Parts

    struct Parts: Sendable, Hashable {
        var schemeEnd: Int32 = 0
        var authorityStart: Int32 = -1, authorityEnd: Int32 = -1
        var userinfoStart: Int32 = -1, userinfoEnd: Int32 = -1
        var hostStart: Int32 = -1, hostEnd: Int32 = -1
        var pathStart: Int32 = 0, pathEnd: Int32 = 0
        var queryStart: Int32 = -1, queryEnd: Int32 = -1
        var fragmentStart: Int32 = -1, fragmentEnd: Int32 = -1
    }

    /// The bytes `start..<end` of `original` as a string (nil when `start` is -1).
    @inline(__always) private func slice(_ start: Int32, _ end: Int32) -> String? {
        guard start >= 0 else { return nil }
        return text(start, end)
    }

    private func text(_ start: Int32, _ end: Int32) -> String {
        let u = original.utf8
        let from = u.index(u.startIndex, offsetBy: Int(start))
        let to = u.index(from, offsetBy: Int(end - start))
        return String(Substring(u[from..<to]))
    }

    /// The scheme as written (e.g. `DeepLinkingDemo`).
    public var scheme: String { text(0, parts.schemeEnd) }
    /// The authority as written (`userinfo@host:port`), nil when the URL has no `//`.
    public var authority: String? { slice(parts.authorityStart, parts.authorityEnd) }
    /// The userinfo as written (before `@`), if any.
    public var userinfo: String? { slice(parts.userinfoStart, parts.userinfoEnd) }
    /// The host lowercased (ASCII), for matching; nil without an authority. May be empty (`file:///x`).
    public var host: String? { originalHost.map(URLReference.asciiLowercased) }
    /// The host exactly as written.
    public var originalHost: String? { slice(parts.hostStart, parts.hostEnd) }
    /// The path as written (percent-encoded); may be empty.
    public var path: String { text(parts.pathStart, parts.pathEnd) }
    /// The query as written (without `?`); nil when there is no `?`, empty for a bare `?`.
    public var query: String? { slice(parts.queryStart, parts.queryEnd) }
    /// The fragment as written (without `#`); nil when there is no `#`, empty for a bare `#`.
    public var fragment: String? { slice(parts.fragmentStart, parts.fragmentEnd) }

    /// The original string.
    public var description: String { original }

    /// True for `http` and `https`.
    public var isWeb: Bool { normalizedScheme == "http" || normalizedScheme == "https" }

    /// The port, or the scheme's default (80 for http, 443 for https), or nil.
    public var effectivePort: Int? {
        if let port { return port }
        switch normalizedScheme {
        case "http": return 80
        case "https": return 443
        default: return nil
        }
    }

    /// The query split into items at `&`, each at its first `=` (raw, still percent-encoded;
    /// `value` is nil for an item without `=`). Empty pieces (`a&&b`) are skipped.
    public var queryItems: [(name: String, value: String?)] {
        guard let query, !query.isEmpty else { return [] }
        var items: [(name: String, value: String?)] = []
        for piece in query.split(separator: "&", omittingEmptySubsequences: true) {
            if let eq = piece.firstIndex(of: "=") {
                items.append((String(piece[..<eq]), String(piece[piece.index(after: eq)...])))
            } else {
                items.append((String(piece), nil))
            }
        }
        return items
    }

    /// Parses `text` as an absolute URL.
    public init(parsing text: String) throws(URLParseError) {
        if text.isEmpty { throw URLParseError(input: text, reason: "the URL is empty") }
        if text.utf8.count > Int(Int32.max) {
            throw URLParseError(input: text, reason: "the URL is too long (more than 2 GiB)")
        }
        // The bytes in place (no array copy) when the string has contiguous storage.
        typealias Parsed = Result<(parts: Parts, scheme: String, port: Int?), URLParseError>
        let parsed: Parsed =
            text.utf8.withContiguousStorageIfAvailable { b in
                Parsed { () throws(URLParseError) in try URLReference.split(b, text: text) }
            }
            ?? Array(text.utf8).withUnsafeBufferPointer { b in
                Parsed { () throws(URLParseError) in try URLReference.split(b, text: text) }
            }
        let result = try parsed.get()
        original = text
        normalizedScheme = result.scheme
        port = result.port
        parts = result.parts
    }

    /// Checks the URL's bytes and finds its components (`text` is the same URL, for messages).
    static func split(
        _ b: UnsafeBufferPointer<UInt8>, text: String
    ) throws(URLParseError) -> (parts: Parts, scheme: String, port: Int?) {
        var r = Parts()
        let port: Int?
        func fail(_ reason: String, at position: Int? = nil) -> URLParseError {
            URLParseError(input: text, reason: reason, position: position)
        }
        // Pass 1: every character must be one RFC 3986 allows raw, and every '%' must start '%XX'.
        // Positions count Unicode scalars; for ASCII text (the usual case) they are the bytes.
        if b.contains(where: { $0 >= 0x80 }) {
            let scalars = Array(text.unicodeScalars)
            try URLReference.checkRawCharacters(count: scalars.count, { scalars[$0].value }, input: text)
        } else {
            // The common case first: every byte allowed raw and no '%'. Else the general pass
            // goes on from the first other byte (it checks escapes and explains errors).
            var k = 0
            while k < b.count, b[k] != UInt8(ascii: "%"), URLReference.allowedRaw(b[k]) { k += 1 }
            if k < b.count {
                try URLReference.checkRawCharacters(from: k, count: b.count, { UInt32(b[$0]) }, input: text)
            }
        }

        // From here on the text is ASCII: work on bytes.
        let n = b.count

        // Scheme: everything before the first ':' that comes before any '/', '?', '#'.
        var colon: Int? = nil
        for (k, c) in b.enumerated() {
            if c == UInt8(ascii: ":") {
                colon = k
                break
            }
            if c == UInt8(ascii: "/") || c == UInt8(ascii: "?") || c == UInt8(ascii: "#") { break }
        }
        guard let colon else { throw fail(URLReference.missingScheme) }
        if colon == 0 { throw fail(URLReference.missingSchemeBeforeColon, at: 0) }
        let schemeText = String(decoding: b[0..<colon], as: UTF8.self)
        if !URLScheme.isValid(bytes: b[0..<colon]) { throw fail(URLReference.invalidScheme(schemeText), at: 0) }
        r.schemeEnd = Int32(colon)
        let normalizedScheme = URLReference.asciiLowercased(schemeText)  // URLScheme.normalize for ASCII

        // Split off fragment and query (the first '#' ends everything; the first '?' before it starts the query).
        var p = colon + 1
        var hierEnd = n
        var queryStart: Int? = nil
        var fragmentStart: Int? = nil
        for k in p..<n {
            if b[k] == UInt8(ascii: "#") {
                fragmentStart = k + 1
                if hierEnd == n { hierEnd = k }
                break
            }
            if b[k] == UInt8(ascii: "?"), queryStart == nil {
                queryStart = k + 1
                hierEnd = k
            }
        }
        let queryEnd = fragmentStart.map { $0 - 1 } ?? n
        if let qs = queryStart {
            for k in qs..<queryEnd where !URLReference.isQueryOrFragmentChar(b[k]) {
                throw fail("'\(URLReference.char(b[k]))' at position \(k) is not allowed in the query and must be percent-encoded (%\(URLReference.hex2(b[k])))", at: k)
            }
            r.queryStart = Int32(qs)
            r.queryEnd = Int32(queryEnd)
        }
        if let fs = fragmentStart {
            for k in fs..<n where !URLReference.isQueryOrFragmentChar(b[k]) {
                throw fail("'\(URLReference.char(b[k]))' at position \(k) is not allowed in the fragment and must be percent-encoded (%\(URLReference.hex2(b[k])))", at: k)
            }
            r.fragmentStart = Int32(fs)
            r.fragmentEnd = Int32(n)
        }

        // Authority.
        if hierEnd - p >= 2, b[p] == UInt8(ascii: "/"), b[p + 1] == UInt8(ascii: "/") {
            let aStart = p + 2
            var aEnd = aStart
            while aEnd < hierEnd, b[aEnd] != UInt8(ascii: "/") { aEnd += 1 }
            r.authorityStart = Int32(aStart)
            r.authorityEnd = Int32(aEnd)
            var hostStart = aStart
            if let at = b[aStart..<aEnd].lastIndex(of: UInt8(ascii: "@")) {
                if let first = b[aStart..<at].firstIndex(of: UInt8(ascii: "@")) {
                    throw fail("'@' at position \(first) in the authority must be percent-encoded (%40)", at: first)
                }
                for k in aStart..<at where !(URLReference.isUnreservedOrSubDelim(b[k]) || b[k] == UInt8(ascii: ":") || b[k] == UInt8(ascii: "%")) {
                    throw fail("'\(URLReference.char(b[k]))' at position \(k) is not allowed in the userinfo", at: k)
                }
                r.userinfoStart = Int32(aStart)
                r.userinfoEnd = Int32(at)
                hostStart = at + 1
            }
            // Host: IP-literal in brackets, or reg-name / IPv4 up to ':'.
            var hostEnd = hostStart
            if hostStart < aEnd, b[hostStart] == UInt8(ascii: "[") {
                guard let close = b[hostStart..<aEnd].firstIndex(of: UInt8(ascii: "]")) else {
                    throw fail("unterminated IP literal: '[' at position \(hostStart) has no ']'", at: hostStart)
                }
                let inner = b[(hostStart + 1)..<close]
                let innerOK =
                    !inner.isEmpty
                    && inner.allSatisfy {
                        URLReference.isHex(Unicode.Scalar($0)) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".")
                            || $0 == UInt8(ascii: "v") || $0 == UInt8(ascii: "V")
                            || URLReference.isUnreservedOrSubDelim($0)
                    }
                if !innerOK || !inner.contains(UInt8(ascii: ":")) && inner.first != UInt8(ascii: "v") && inner.first != UInt8(ascii: "V") {
                    throw fail("invalid IP literal '\(String(decoding: b[hostStart...close], as: UTF8.self))'", at: hostStart)
                }
                hostEnd = close + 1
                if hostEnd < aEnd, b[hostEnd] != UInt8(ascii: ":") {
                    throw fail("unexpected '\(URLReference.char(b[hostEnd]))' at position \(hostEnd) after the IP literal", at: hostEnd)
                }
            } else {
                while hostEnd < aEnd, b[hostEnd] != UInt8(ascii: ":") {
                    let c = b[hostEnd]
                    if !(URLReference.isUnreservedOrSubDelim(c) || c == UInt8(ascii: "%")) {
                        throw fail("'\(URLReference.char(c))' at position \(hostEnd) is not allowed in a host name", at: hostEnd)
                    }
                    hostEnd += 1
                }
            }
            r.hostStart = Int32(hostStart)
            r.hostEnd = Int32(hostEnd)
            if hostEnd < aEnd {  // ':' port
                let portStart = hostEnd + 1
                let portBytes = b[portStart..<aEnd]
                let portText = String(decoding: portBytes, as: UTF8.self)
                if portBytes.isEmpty {
                    port = nil
                } else if !portBytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                    throw fail("invalid port '\(portText)' (expected a number from 0 to 65535)", at: portStart)
                } else if portBytes.count > 5 || Int(portText)! > 65535 {
                    throw fail("invalid port '\(portText)' (must be at most 65535)", at: portStart)
                } else {
                    port = Int(portText)!
                }
            } else {
                port = nil
            }
            p = aEnd
        } else {
            port = nil
        }

        // Path: pchar / "/".
        for k in p..<hierEnd where !(URLReference.isPChar(b[k]) || b[k] == UInt8(ascii: "/")) {
            throw fail("'\(URLReference.char(b[k]))' at position \(k) is not allowed in the path and must be percent-encoded (%\(URLReference.hex2(b[k])))", at: k)
        }
        r.pathStart = Int32(p)
        r.pathEnd = Int32(hierEnd)
        if normalizedScheme == "http" || normalizedScheme == "https" {
            if r.hostStart < 0 || r.hostEnd == r.hostStart {
                throw fail("an \(normalizedScheme) URL needs a host (e.g. '\(normalizedScheme)://example.com/')")
            }
        }
        return (r, normalizedScheme, port)
    }

    /// Pass 1 of parsing: `value(i)` is the i-th Unicode scalar of the text.
    @inline(__always)
    static func checkRawCharacters(
        from start: Int = 0, count: Int, _ value: (Int) -> UInt32, input: String
    ) throws(URLParseError) {
        func fail(_ reason: String, _ position: Int) -> URLParseError {
            URLParseError(input: input, reason: reason, position: position)
        }
        var i = start
        while i < count {
            let v = value(i)
            if v > 0x20 && v < 0x7F && v != 0x25 && URLReference.allowedRaw(UInt8(v)) {  // the common case
                i += 1
                continue
            }
            let u = Unicode.Scalar(v)!
            if v == 0x20 { throw fail("space at position \(i) must be percent-encoded (%20)", i) }
            if v < 0x20 || v == 0x7F {
                let hex = String(v, radix: 16, uppercase: true)
                throw fail(
                    "control character U+\(String(repeating: "0", count: max(0, 4 - hex.count)))\(hex) at position \(i) must be percent-encoded",
                    i)
            }
            if v > 0x7F {
                let encoded = String(u).utf8.map { "%" + URLReference.hex2($0) }.joined()
                throw fail("non-ASCII character '\(u)' at position \(i) must be percent-encoded (\(encoded))", i)
            }
            let c = UInt8(v)
            if c == UInt8(ascii: "%") {
                let ok =
                    i + 2 < count && URLReference.isHex(Unicode.Scalar(value(i + 1))!)
                    && URLReference.isHex(Unicode.Scalar(value(i + 2))!)
                if !ok {
                    let shown = String(String.UnicodeScalarView((i..<min(i + 3, count)).map { Unicode.Scalar(value($0))! }))
                    throw fail(
                        "invalid percent-escape '\(shown)' at position \(i) ('%' must be followed by two hex digits; write '%25' for a literal '%')",
                        i)
                }
                i += 3
                continue
            }
            if !URLReference.allowedRaw(c) {
                throw fail("character '\(u)' at position \(i) is not allowed in a URL and must be percent-encoded (%\(URLReference.hex2(c)))", i)
            }
            i += 1
        }
    }

    /// Parses without throwing: nil when `text` is not a valid URL.
    public static func parse(_ text: String) -> URLReference? { try? URLReference(parsing: text) }

    /// True when `text` begins with `scheme` (lowercase ASCII) followed by ':', in any case.
    /// A cheap test before parsing: a URL whose scheme is `scheme` must begin so.
    public static func startsWithScheme(_ text: String, _ scheme: StaticString) -> Bool {
        var it = text.utf8.makeIterator()
        for i in 0..<scheme.utf8CodeUnitCount {
            guard let c = it.next(), c | 0x20 == scheme.utf8Start[i] else { return false }
        }
        return it.next() == UInt8(ascii: ":")
    }

    // MARK: - Percent decoding

    /// `text` with every `%XX` replaced by its byte, read as UTF-8 (invalid sequences become U+FFFD).
    /// `+` is left alone (it is form encoding, not RFC 3986).
    public static func percentDecoded(_ text: String) -> String {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        let b = Array(text.utf8)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "%"), i + 2 < b.count, let h = hexValue(b[i + 1]), let l = hexValue(b[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(b[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: - Character classes (RFC 3986 §2)

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }
    static func isHex(_ u: Unicode.Scalar) -> Bool { u.isASCII && hexValue(UInt8(u.value)) != nil }
    static func hex2(_ c: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(c >> 4)], digits[Int(c & 0xF)]])
    }
    static func char(_ c: UInt8) -> String { String(UnicodeScalar(c)) }

    static func isUnreserved(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2E
            || c == 0x5F || c == 0x7E
    }
    static func isSubDelim(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="):
            return true
        default: return false
        }
    }
    // The classes below are bit sets over ASCII (bit c of lo for c < 64, bit c - 64 of hi), the
    // same sets as isUnreserved/isSubDelim spell out; URLReferenceTests checks them byte by byte.
    @inline(__always) static func inSet(_ c: UInt8, _ lo: UInt64, _ hi: UInt64) -> Bool {
        c < 64 ? (lo >> UInt64(c)) & 1 != 0 : c < 128 ? (hi >> UInt64(c - 64)) & 1 != 0 : false
    }
    /// unreserved / sub-delims.
    @inline(__always) static func isUnreservedOrSubDelim(_ c: UInt8) -> Bool {
        inSet(c, 0x2BFF_7FD2_0000_0000, 0x47FF_FFFE_87FF_FFFE)
    }
    /// pchar = unreserved / pct-encoded / sub-delims / ":" / "@" ('%' validated in pass 1).
    @inline(__always) static func isPChar(_ c: UInt8) -> Bool {
        inSet(c, 0x2FFF_7FF2_0000_0000, 0x47FF_FFFE_87FF_FFFF)
    }
    /// query / fragment = *( pchar / "/" / "?" ).
    @inline(__always) static func isQueryOrFragmentChar(_ c: UInt8) -> Bool {
        inSet(c, 0xAFFF_FFF2_0000_0000, 0x47FF_FFFE_87FF_FFFF)
    }
    /// Characters that may appear raw somewhere in a URI: unreserved, reserved, '%'.
    @inline(__always) static func allowedRaw(_ c: UInt8) -> Bool {
        inSet(c, 0xAFFF_FFFA_0000_0000, 0x47FF_FFFE_AFFF_FFFF)
    }
    /// `s` with ASCII capitals lowercased (hosts, schemes and UTIs compare so); `s` itself when
    /// it has none, found by scanning its bytes in place.
    /// What a text without a usable scheme is told (by the strict and the lenient parse alike).
    static let missingScheme = "missing scheme (expected SCHEME:..., e.g. 'https://example.com/' or 'myapp://open')"
    static let missingSchemeBeforeColon = "missing scheme before ':'"
    static func invalidScheme(_ scheme: some StringProtocol) -> String {
        "invalid scheme '\(scheme)' (a letter, then letters, digits, '+', '-' or '.')"
    }

    /// `s` with its ASCII letters lowercased (other characters as they are).
    public static func asciiLowercased(_ s: String) -> String {
        func isCapital(_ c: UInt8) -> Bool { c >= 0x41 && c <= 0x5A }
        let hasCapital = s.utf8.withContiguousStorageIfAvailable { $0.contains(where: isCapital) }
            ?? s.utf8.contains(where: isCapital)
        guard hasCapital else { return s }
        return String(decoding: s.utf8.map { isCapital($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    /// Equal when the original strings are equal.
    public static func == (a: URLReference, b: URLReference) -> Bool { a.original == b.original }
    /// Hashes the original string.
    public func hash(into hasher: inout Hasher) { hasher.combine(original) }
}
