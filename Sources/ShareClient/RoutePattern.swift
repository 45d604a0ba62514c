// RoutePattern: one URL pattern such as `stats://watchlist?id=:id&name=:name&iso=:iso` or
// `https://example.com/computers/:slug`, parsed once; matches URLs (scheme and host compared
// case-insensitively, captures percent-decoded, query parameters in any order, extra ones ignored)
// and builds URLs back from values with correct RFC 3986 percent-encoding.

/// Why a pattern is unusable, a URL cannot be built, or a captured value is missing.
public enum RouterError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The pattern text is not a valid route pattern.
    case invalidPattern(pattern: String, reason: String)
    /// `build` was not given a value for a required parameter.
    case missingValue(name: String, pattern: String)
    /// `build` was given an empty value for a path segment or host, which a URL cannot carry.
    case emptyValue(name: String, pattern: String)
    /// The pattern has a part `build` cannot fill in (a wildcard host).
    case notBuildable(pattern: String, reason: String)
    /// `RouteMatch.require` found no such parameter: neither a capture of the pattern nor a query
    /// item of the URL (a URL that lacks a value the pattern does not require).
    case missingParameter(name: String)
    /// A parameter's value is not of the type asked for (`RouteMatch.requireInt`).
    case invalidParameter(name: String, value: String, expected: String)

    /// A message naming the pattern or parameter and what is wrong.
    public var description: String {
        switch self {
        case .invalidPattern(let p, let why): return "invalid route pattern '\(p)': \(why)"
        case .missingValue(let n, let p): return "no value for ':\(n)' to build '\(p)'"
        case .emptyValue(let n, let p): return "the value for ':\(n)' in '\(p)' must not be empty (it is a path segment or host)"
        case .notBuildable(let p, let why): return "cannot build a URL from '\(p)': \(why)"
        case .missingParameter(let n): return "the URL has no parameter '\(n)' (neither a capture of the route nor a query item)"
        case .invalidParameter(let n, let v, let t): return "parameter '\(n)' is '\(v)', not \(t)"
        }
    }
}

/// One query parameter of a URL, percent-decoded. `value` is nil for `?flag` without `=`.
public struct QueryItem: Sendable, Hashable {
    /// The decoded name.
    public var name: String
    /// The decoded value; nil when the item has no `=`.
    public var value: String?

    /// Creates a query item.
    public init(name: String, value: String?) {
        self.name = name
        self.value = value
    }
}

/// How URLs are matched.
public struct RouteOptions: Sendable, Hashable {
    /// Decode `+` in query names and values as a space (HTML form encoding). Off by default:
    /// RFC 3986 gives `+` no special meaning, and `build` always encodes a space as `%20`.
    public var formDecoding: Bool
    /// Compare literal path segments case-sensitively (default). Scheme and host are always
    /// compared case-insensitively.
    public var caseSensitivePaths: Bool

    /// Creates options.
    public init(formDecoding: Bool = false, caseSensitivePaths: Bool = true) {
        self.formDecoding = formDecoding
        self.caseSensitivePaths = caseSensitivePaths
    }
}

/// A URL pattern: `scheme://host/segment/:capture/*rest?name=:var&opt=:other?&lit=value`.
///
/// - The scheme is literal and matched case-insensitively.
/// - The host is literal (case-insensitive), `:name` (captured) or `*` (any host). Patterns
///   without `//` (such as `myapp:path`) have no host.
/// - Path segments are literal (compared after percent-decoding), `:name` (one segment,
///   captured and decoded) or, last, `*` / `*name` (the rest of the path, zero or more segments,
///   decoded per segment and joined by `/`; captured as `*` or `name`). A trailing `/` is ignored.
/// - Query parameters are `name=:var` (required, captured), `name=:var?` (optional), `name=text`
///   (must be present with that value) or `name` (must be present). Order does not matter and
///   parameters the pattern does not name are ignored (they remain readable from `RouteMatch`).
public struct RoutePattern: Sendable, Hashable, CustomStringConvertible {
    enum Host: Sendable, Hashable {
        case literal(lowercased: String, written: String)
        case capture(String)
        case any
    }

    enum Segment: Sendable, Hashable {
        case literal(String)
        case capture(String)
        case rest(String)
    }

    enum QueryValue: Sendable, Hashable {
        case capture(String, optional: Bool)
        case literal(String)
        case present
    }

    struct QueryPart: Sendable, Hashable {
        var name: String
        var value: QueryValue
    }

    /// The pattern as written.
    public let text: String
    let schemeWritten: String
    let scheme: String
    let host: Host?
    let leadingSlash: Bool
    let trailingSlash: Bool
    let segments: [Segment]
    let query: [QueryPart]

    /// The names of the captures, in pattern order (host, path, then query).
    public let parameterNames: [String]

    /// The pattern as written.
    public var description: String { text }

    /// Parses a pattern; throws `RouterError.invalidPattern` naming what is wrong.
    public init(_ text: String) throws(RouterError) {
        self.text = text
        func invalid(_ why: String) -> RouterError { .invalidPattern(pattern: text, reason: why) }
        guard let parts = URLParts(text) else {
            throw invalid("it must start with a scheme followed by ':' (e.g. 'myapp://host/path')")
        }
        if parts.fragment != nil { throw invalid("fragments ('#') are not matched; leave them out") }
        schemeWritten = String(parts.scheme)
        scheme = schemeWritten.lowercased()
        var names: [String] = []
        func addName(_ n: Substring, _ what: String) throws(RouterError) -> String {
            guard !n.isEmpty, n.utf8.allSatisfy({ PercentEncoding.isUnreserved($0) && $0 != UInt8(ascii: "~") })
            else { throw invalid("\(what) name '\(n)' must be letters, digits, '_', '-' or '.'") }
            let s = String(n)
            if names.contains(s) { throw invalid("the name '\(s)' is used twice") }
            names.append(s)
            return s
        }
        if let authority = parts.authority {
            if authority.contains("@") { throw invalid("user info ('@') is not allowed in a pattern's host") }
            if authority == "*" {
                host = .any
            } else if authority.hasPrefix(":") {
                host = .capture(try addName(authority.dropFirst(), "host capture"))
            } else if authority.isEmpty {
                host = .literal(lowercased: "", written: "")
            } else {
                host = .literal(lowercased: PercentEncoding.decode(authority).lowercased(), written: String(authority))
            }
        } else {
            host = nil
        }
        let split = URLParts.splitPath(parts.path)
        leadingSlash = split.leadingSlash
        trailingSlash = split.trailingSlash
        var segs: [Segment] = []
        for (i, raw) in split.segments.enumerated() {
            if raw.hasPrefix(":") {
                segs.append(.capture(try addName(raw.dropFirst(), "path capture")))
            } else if raw.hasPrefix("*") {
                guard i == split.segments.count - 1 else { throw invalid("'\(raw)' (the rest of the path) must be the last segment") }
                if raw == "*" {
                    if names.contains("*") { throw invalid("the name '*' is used twice") }
                    names.append("*")
                    segs.append(.rest("*"))
                } else {
                    segs.append(.rest(try addName(raw.dropFirst(), "rest capture")))
                }
            } else if raw.isEmpty {
                throw invalid("empty path segment ('//')")
            } else {
                segs.append(.literal(PercentEncoding.decode(raw)))
            }
        }
        segments = segs
        var q: [QueryPart] = []
        if let query = parts.query {
            for item in query.split(separator: "&", omittingEmptySubsequences: true) {
                let name: Substring
                let value: Substring?
                if let eq = item.firstIndex(of: "=") {
                    name = item[..<eq]
                    value = item[item.index(after: eq)...]
                } else {
                    name = item
                    value = nil
                }
                let decodedName = PercentEncoding.decode(name)
                guard !decodedName.isEmpty else { throw invalid("a query parameter has no name") }
                if q.contains(where: { $0.name == decodedName }) { throw invalid("query parameter '\(decodedName)' appears twice") }
                let part: QueryValue
                if let value {
                    if value.hasPrefix(":") {
                        let optional = value.hasSuffix("?")
                        let n = optional ? value.dropFirst().dropLast() : value.dropFirst()
                        part = .capture(try addName(n, "query capture"), optional: optional)
                    } else {
                        part = .literal(PercentEncoding.decode(value))
                    }
                } else {
                    part = .present
                }
                q.append(QueryPart(name: decodedName, value: part))
            }
        }
        query = q
        parameterNames = names
    }

    // MARK: Matching

    /// Matches `url` against the pattern; nil when it does not match. Captured values are
    /// percent-decoded (`+` too when `options.formDecoding`).
    public func match(_ url: String, options: RouteOptions = RouteOptions()) -> RouteMatch? {
        guard let parts = URLParts(url), parts.scheme.lowercased() == scheme else { return nil }
        var params: [String: String] = [:]
        switch (host, parts.authority) {
        case (nil, nil): break
        case (nil, _?), (_?, nil): return nil
        case (let h?, let authority?):
            let urlHost = PercentEncoding.decode(URLParts.hostAndPort(authority))
            switch h {
            case .any: break
            case .literal(let lower, _): guard urlHost.lowercased() == lower else { return nil }
            case .capture(let name):
                guard !urlHost.isEmpty else { return nil }
                params[name] = urlHost
            }
        }
        let urlSegments = URLParts.splitPath(parts.path).segments
        var index = 0
        for seg in segments {
            switch seg {
            case .literal(let lit):
                guard index < urlSegments.count else { return nil }
                let value = PercentEncoding.decode(urlSegments[index])
                if options.caseSensitivePaths {
                    guard value == lit else { return nil }
                } else {
                    guard value.lowercased() == lit.lowercased() else { return nil }
                }
                index += 1
            case .capture(let name):
                guard index < urlSegments.count, !urlSegments[index].isEmpty else { return nil }
                params[name] = PercentEncoding.decode(urlSegments[index])
                index += 1
            case .rest(let name):
                params[name] = urlSegments[index...].map { PercentEncoding.decode($0) }.joined(separator: "/")
                index = urlSegments.count
            }
        }
        guard index == urlSegments.count else { return nil }
        let items = URLParts.queryItems(parts.query, plusAsSpace: options.formDecoding)
        for part in query {
            let found = items.first(where: { $0.name == part.name })
            switch part.value {
            case .present:
                guard found != nil else { return nil }
            case .literal(let v):
                guard let found, (found.value ?? "") == v else { return nil }
            case .capture(let name, let optional):
                if let found {
                    params[name] = found.value ?? ""
                } else if !optional {
                    return nil
                }
            }
        }
        return RouteMatch(
            pattern: self, url: url, parameters: params, queryItems: items,
            fragment: parts.fragment.map { PercentEncoding.decode($0) })
    }

    // MARK: Building

    /// Builds a URL from the pattern, percent-encoding every value (RFC 3986: all but unreserved
    /// characters), so that `match` on the result gives back exactly `values`.
    ///
    /// Throws `.missingValue` when a required capture has no value, `.emptyValue` for an empty
    /// path segment or host. Optional query captures without a value are left out; values
    /// whose names the pattern does not have are ignored. A `*` rest value keeps its `/`s as
    /// segment separators (each segment is encoded on its own).
    public func build(_ values: [String: String]) throws(RouterError) -> String {
        var out = schemeWritten + ":"
        if let host {
            out += "//"
            switch host {
            case .literal(_, let written): out += written
            case .any: throw .notBuildable(pattern: text, reason: "the host is a wildcard ('*')")
            case .capture(let name):
                guard let v = values[name] else { throw .missingValue(name: name, pattern: text) }
                guard !v.isEmpty else { throw .emptyValue(name: name, pattern: text) }
                out += PercentEncoding.encode(v)
            }
        }
        var pieces: [String] = []
        for seg in segments {
            switch seg {
            case .literal(let lit):
                pieces.append(PercentEncoding.encode(lit, allowing: PercentEncoding.isPathChar))
            case .capture(let name):
                guard let v = values[name] else { throw .missingValue(name: name, pattern: text) }
                guard !v.isEmpty else { throw .emptyValue(name: name, pattern: text) }
                pieces.append(PercentEncoding.encodeComponent(v))
            case .rest(let name):
                let v = values[name] ?? ""
                if !v.isEmpty {
                    for part in v.split(separator: "/", omittingEmptySubsequences: false) {
                        guard !part.isEmpty else { throw .emptyValue(name: name, pattern: text) }
                        pieces.append(PercentEncoding.encodeComponent(part))
                    }
                }
            }
        }
        if leadingSlash || (host != nil && !pieces.isEmpty) { out += "/" }
        out += pieces.joined(separator: "/")
        if trailingSlash && !pieces.isEmpty { out += "/" }
        var q: [String] = []
        for part in query {
            let name = PercentEncoding.encode(part.name)
            switch part.value {
            case .present: q.append(name)
            case .literal(let v): q.append(name + "=" + PercentEncoding.encode(v))
            case .capture(let varName, let optional):
                if let v = values[varName] {
                    q.append(name + "=" + PercentEncoding.encode(v))
                } else if !optional {
                    throw .missingValue(name: varName, pattern: text)
                }
            }
        }
        if !q.isEmpty { out += "?" + q.joined(separator: "&") }
        return out
    }
}

/// What a matched URL carried: the captures, every query item and the fragment.
public struct RouteMatch: Sendable {
    /// The pattern that matched.
    public let pattern: RoutePattern
    /// The URL, as given.
    public let url: String
    /// The captured values by name, percent-decoded.
    public let parameters: [String: String]
    /// Every query item of the URL, decoded, in order (also those the pattern does not name).
    public let queryItems: [QueryItem]
    /// The URL's fragment, decoded, if it has one.
    public let fragment: String?

    /// The value of `name`: a capture, else the first query item with that name (so
    /// `match.string("share")` works for `deeplinkmyapp://open-from-share?share=42` even when the
    /// pattern is just `deeplinkmyapp://open-from-share`). Nil when there is neither.
    public func string(_ name: String) -> String? {
        if let v = parameters[name] { return v }
        for item in queryItems where item.name == name { return item.value ?? "" }
        return nil
    }

    /// Same as `string(name)`.
    public subscript(name: String) -> String? { string(name) }

    /// The value of `name` as an integer, or nil when absent or not an integer.
    public func int(_ name: String) -> Int? { string(name).flatMap { Int($0) } }

    /// The value of `name` as a Double, or nil when absent or not a number.
    public func double(_ name: String) -> Double? { string(name).flatMap { Double($0) } }

    /// The value of `name` as a Bool (`true`/`1`/`yes`, `false`/`0`/`no`, any case), else nil.
    public func bool(_ name: String) -> Bool? {
        switch string(name)?.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: return nil
        }
    }

    /// The value of `name`; throws `.missingParameter` when there is none.
    public func require(_ name: String) throws(RouterError) -> String {
        guard let v = string(name) else { throw .missingParameter(name: name) }
        return v
    }

    /// The value of `name` as an integer; throws `.missingParameter` when absent,
    /// `.invalidParameter` when not an integer.
    public func requireInt(_ name: String) throws(RouterError) -> Int {
        let v = try require(name)
        guard let i = Int(v) else { throw .invalidParameter(name: name, value: v, expected: "an integer") }
        return i
    }
}

/// An RFC 3986 split of a URL into its components, lenient about characters that should have
/// been encoded (a raw space or unicode in a query value is taken as it is).
struct URLParts {
    var scheme: Substring
    var authority: Substring?
    var path: Substring
    var query: Substring?
    var fragment: Substring?

    init?(_ s: String) {
        guard let colon = s.firstIndex(of: ":") else { return nil }
        let scheme = s[..<colon]
        guard let first = scheme.utf8.first, (first | 0x20) >= UInt8(ascii: "a"), (first | 0x20) <= UInt8(ascii: "z") else {
            return nil
        }
        for b in scheme.utf8 {
            let ok = PercentEncoding.isUnreserved(b) && b != UInt8(ascii: "_") && b != UInt8(ascii: "~") || b == UInt8(ascii: "+")
            if !ok { return nil }
        }
        self.scheme = scheme
        var rest = s[s.index(after: colon)...]
        if let hash = rest.firstIndex(of: "#") {
            fragment = rest[rest.index(after: hash)...]
            rest = rest[..<hash]
        }
        if let q = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: q)...]
            rest = rest[..<q]
        }
        if rest.hasPrefix("//") {
            let afterSlashes = rest.dropFirst(2)
            let end = afterSlashes.firstIndex(of: "/") ?? afterSlashes.endIndex
            authority = afterSlashes[..<end]
            path = afterSlashes[end...]
        } else {
            path = rest
        }
    }

    /// The host (with port) of an authority, without user info.
    static func hostAndPort(_ authority: Substring) -> Substring {
        if let at = authority.lastIndex(of: "@") { return authority[authority.index(after: at)...] }
        return authority
    }

    /// Path segments, raw (still encoded); one leading and one trailing `/` are not segments.
    static func splitPath(_ path: Substring) -> (segments: [Substring], leadingSlash: Bool, trailingSlash: Bool) {
        if path.isEmpty { return ([], false, false) }
        var segs = path.split(separator: "/", omittingEmptySubsequences: false)
        let leading = segs.first?.isEmpty ?? false
        if leading { segs.removeFirst() }
        let trailing = segs.last?.isEmpty ?? false
        if trailing { segs.removeLast() }
        return (segs, leading, trailing)
    }

    /// The query items, decoded; empty pieces (`a=1&&b=2`) are skipped.
    static func queryItems(_ query: Substring?, plusAsSpace: Bool) -> [QueryItem] {
        guard let query, !query.isEmpty else { return [] }
        var out: [QueryItem] = []
        for item in query.split(separator: "&", omittingEmptySubsequences: true) {
            if let eq = item.firstIndex(of: "=") {
                out.append(
                    QueryItem(
                        name: PercentEncoding.decode(item[..<eq], plusAsSpace: plusAsSpace),
                        value: PercentEncoding.decode(item[item.index(after: eq)...], plusAsSpace: plusAsSpace)))
            } else {
                out.append(QueryItem(name: PercentEncoding.decode(item, plusAsSpace: plusAsSpace), value: nil))
            }
        }
        return out
    }
}
