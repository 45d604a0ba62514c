// apple-app-site-association documents: strict parsing and validation (every error names its exact key)
// of both the legacy `paths` format and the iOS 13+ `components` format, and matching a URL for one
// app ID with an explanation trail. Apple's rules are cited where they are applied.

import ShareProtocol

/// A parsed document, or why the file was rejected. A rejected document matches nothing.
public typealias AssociationDocumentResult = Result<AssociationDocument, AssociationDocumentError>

/// Why an association document was rejected: the exact key and what is wrong with it.
public struct AssociationDocumentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key path, e.g. `applinks.details[0].components[2].exclude` (empty for the whole file).
    public var key: String
    /// What is wrong, e.g. `expected a boolean, got string`.
    public var reason: String

    /// Creates an error.
    public init(key: String, reason: String) {
        self.key = key
        self.reason = reason
    }

    /// "KEY: REASON" (just REASON for the whole file).
    public var description: String { key.isEmpty ? reason : "\(key): \(reason)" }
}

/// Pattern-matching settings that can be given at domain (`applinks.defaults`), app (`details[i].defaults`)
/// and URL (component) level; the more specific one wins (Apple, "applinks.Defaults").
public struct AssociationOptions: Sendable, Equatable {
    /// `caseSensitive` when given (Apple's default: true).
    public var caseSensitive: Bool?
    /// `percentEncoded` when given (Apple's default: true).
    public var percentEncoded: Bool?

    /// Creates options; nil means "not given at this level".
    public init(caseSensitive: Bool? = nil, percentEncoded: Bool? = nil) {
        self.caseSensitive = caseSensitive
        self.percentEncoded = percentEncoded
    }
}

/// One `"?"` dictionary entry: a query item name and the pattern its value must match.
public struct AssociationQueryItem: Sendable, Equatable {
    /// The query item name, as written in the document.
    public var name: String
    /// The value pattern, as written.
    public var pattern: String
    let compiled: AssociationPattern
    let matchName: String
}

/// The `"?"` key of a component: a pattern for the whole query, or patterns for named query items.
public enum AssociationQuery: Sendable, Equatable {
    /// A pattern matched against the whole query string.
    case pattern(String)
    /// Named query items, every one of which must match.
    case items([AssociationQueryItem])
}

/// One entry of `details[i].components` (iOS 13+).
public struct AssociationComponent: Sendable, Equatable {
    /// The `"/"` path pattern, if given (absent = `*`).
    public var path: String?
    /// The `"?"` query pattern or dictionary, if given (absent = `*`).
    public var query: AssociationQuery?
    /// The `"#"` fragment pattern, if given (absent = `*`).
    public var fragment: String?
    /// `exclude`: a match means "not a universal link" and stops the search.
    public var exclude: Bool
    /// The effective `caseSensitive` (component, else app defaults, else domain defaults, else true).
    public var caseSensitive: Bool
    /// The effective `percentEncoded` (component, else app defaults, else domain defaults, else true).
    public var percentEncoded: Bool
    /// `comment`, ignored by matching.
    public var comment: String?
    let pathPattern: AssociationPathPattern?
    let queryPattern: AssociationPattern?
    let fragmentPattern: AssociationPattern?

    /// The component as compact JSON, for explanations (e.g. `{"/":"/buy/*","exclude":true}`).
    public var summary: String {
        var o = JSONObject()
        if let path { o["/"] = .string(path) }
        switch query {
        case .pattern(let p): o["?"] = .string(p)
        case .items(let items): o["?"] = .object(JSONObject(items.map { ($0.name, JSONValue.string($0.pattern)) }))
        case nil: break
        }
        if let fragment { o["#"] = .string(fragment) }
        if exclude { o["exclude"] = true }
        if !caseSensitive { o["caseSensitive"] = false }
        if !percentEncoded { o["percentEncoded"] = false }
        return JSONValue.object(o).compactText
    }
}

/// One entry of a legacy `paths` array: a pattern, possibly prefixed with `NOT ` (an exclusion).
public struct AssociationLegacyPath: Sendable, Equatable {
    /// The entry as written, e.g. `NOT /e/*`.
    public var source: String
    /// The pattern without `NOT `.
    public var pattern: String
    /// True for `NOT ` entries.
    public var isExclusion: Bool
    let compiled: AssociationPathPattern
}

/// One entry of `applinks.details`: the apps it names and the URLs it gives them.
public struct AssociationDetail: Sendable, Equatable {
    /// Which list of patterns the entry uses.
    public enum Format: String, Sendable, Equatable {
        /// iOS 13+ `components` (when present, `paths` is ignored, as iOS 13+ does).
        case components
        /// Legacy `paths` (path only, case-sensitive, as written).
        case paths
        /// Neither: the entry gives its apps no URLs.
        case none
    }

    /// `appID` and/or `appIDs`, in order (`TEAMID.BUNDLEID`).
    public var appIDs: [String]
    /// Which patterns apply.
    public var format: Format
    /// The components (format `.components`).
    public var components: [AssociationComponent]
    /// The legacy paths (format `.paths`).
    public var paths: [AssociationLegacyPath]
    /// App-level `defaults`.
    public var defaults: AssociationOptions
}

/// How a document answers "may APPID open this URL as a universal link?".
public struct AssociationMatch: Sendable, Equatable {
    /// The answer.
    public enum Outcome: String, Sendable, Equatable {
        /// A pattern for this app matched: the app opens the URL.
        case matched
        /// An `exclude` / `NOT ` pattern for this app matched first: not a universal link for it.
        case excluded
        /// Nothing for this app matched (or the document gives it no URLs).
        case noMatch
    }

    /// The answer.
    public var outcome: Outcome
    /// The `details` index that decided (matched or excluded).
    public var detailIndex: Int?
    /// The `components` / `paths` index that decided.
    public var patternIndex: Int?
    /// The deciding pattern, as shown in explanations (component JSON or the legacy path).
    public var pattern: String?
    /// Human-readable steps: which details were for other apps, which patterns did not match and why,
    /// and which one decided. Empty when the match was computed without an explanation.
    public var trail: [String]
    /// Matching stopped at `AssociationDocument.matchingBudget` steps, before an answer: taken as
    /// `.noMatch` (`url.explain` says so in the trail).
    public var overBudget = false

    /// True for `.matched`.
    public var isMatch: Bool { outcome == .matched }
}

/// A validated apple-app-site-association document (the `applinks` part; other services are ignored).
///
/// Formats: legacy (iOS 9–12) `details: [{appID, paths}]` with `NOT ` exclusions, also the iOS 9
/// dictionary form `details: {APPID: {paths}}`, and the old top-level `apps` array (ignored); and
/// iOS 13+ `details: [{appIDs, components, defaults}]` with `applinks.defaults` and
/// `applinks.substitutionVariables`. Sources: Apple, "applinks", "applinks.Details",
/// "applinks.Details.Components", "applinks.Defaults", "applinks.SubstitutionVariables"; WWDC19 session
/// 717 ("iOS 13 … will ignore [paths] if the components key is present"; repeated query items must all
/// match; absent items count as empty); WWDC20 session 10098 (caseSensitive, percentEncoded for Unicode).
public struct AssociationDocument: Sendable, Equatable {
    /// False when the file has no `applinks` key (e.g. only `webcredentials`): no universal links.
    public var hasApplinks: Bool
    /// `applinks.details`, in order.
    public var details: [AssociationDetail]
    /// `applinks.defaults` (domain level).
    public var defaults: AssociationOptions
    /// `applinks.substitutionVariables`.
    public var substitutionVariables: [String: [String]]
    /// Things accepted but ignored (unknown keys, the legacy `apps` array, `paths` beside `components`).
    public var notes: [String]
    let detailsByAppID: [String: [Int]]

    /// Every app ID the document names, in order of first appearance.
    public var appIDs: [String] {
        var seen = Set<String>()
        var out: [String] = []
        for d in details { for a in d.appIDs where seen.insert(a).inserted { out.append(a) } }
        return out
    }

    /// Parses and validates the bytes of an apple-app-site-association file (JSON).
    public init(parsing bytes: [UInt8]) throws(AssociationDocumentError) {
        guard bytes.count <= AssociationDocument.maxBytes else {
            throw AssociationDocumentError(
                key: "",
                reason:
                    "the document is \(bytes.count) bytes, over the \(AssociationDocument.maxBytes) (128 KB) that iOS reads: iOS ignores such a file, so it gives no app universal links"
            )
        }
        let value: JSONValue
        do { value = try JSONParser.parse(JSONParser.withoutByteOrderMark(bytes)) } catch {
            throw AssociationDocumentError(key: "", reason: "invalid JSON: \(error)")
        }
        try self.init(json: value)
    }

    /// The largest document iOS takes (128 KB since iOS 9.3.1; a larger file is ignored whole).
    public static let maxBytes = 128 * 1024

    /// Validates an already parsed document.
    public init(json: JSONValue) throws(AssociationDocumentError) {
        var p = Parser()
        try p.parseDocument(json)
        hasApplinks = p.hasApplinks
        details = p.details
        defaults = p.defaults
        substitutionVariables = p.variables
        notes = p.notes
        var index: [String: [Int]] = [:]
        for (i, d) in details.enumerated() {
            for a in Set(d.appIDs) { index[a, default: []].append(i) }
        }
        detailsByAppID = index
    }

    /// Parses bytes into a result (the form `URLRouter` takes).
    public static func load(_ bytes: [UInt8]) -> AssociationDocumentResult {
        do { return .success(try AssociationDocument(parsing: bytes)) } catch { return .failure(error) }
    }

    /// Whether `appID` may open `url` as a universal link according to this document, with the trail.
    ///
    /// `details` are tried in order; inside one, the first matching pattern decides ("The first match
    /// wins", Apple, "applinks.Details.Components"); an `exclude` / `NOT ` match means "not this app" and
    /// ends the search. The URL's scheme and host are not looked at (the caller chose this document).
    public func match(url: URLReference, appID: String) -> AssociationMatch {
        var budget = AssociationDocument.matchingBudget
        return evaluate(url: url, appID: appID, trace: true, budget: &budget)
    }

    /// The most work one URL's matching may take, against every document that could give it to
    /// an app: a step per pattern state visited at a position (`AssociationPattern`'s VM, about 7 ns
    /// each in a release build) and a step per byte of each URL part a pattern looks at. Far beyond
    /// any real document and URL (a few thousand), it bounds what a costly document (long
    /// substitution lists under many `*`, thousands of patterns) and a huge URL can cost the
    /// broker's loop to a few tens of milliseconds (it was 2.4 s for a 100 kB URL, 36 s for a 1 MB one
    /// against 2,000 legacy paths). Past it the URL is no universal link.
    public static let matchingBudget = 4_000_000

    /// `match` without building the trail (the router's fast path).
    func evaluate(url: URLReference, appID: String, trace: Bool, budget: inout Int) -> AssociationMatch {
        var trail: [String] = []
        func note(_ s: @autoclosure () -> String) { if trace { trail.append(s()) } }
        /// Matching stopped before an answer: no match, said in the trail.
        func overBudget(_ d: Int, _ k: Int) -> AssociationMatch {
            note(
                "matching stopped at details[\(d)] pattern \(k): over \(AssociationDocument.matchingBudget) steps (a very long URL against costly patterns); taken as no match")
            var m = AssociationMatch(outcome: .noMatch, detailIndex: nil, patternIndex: nil, pattern: nil, trail: trail)
            m.overBudget = true
            return m
        }
        guard hasApplinks else {
            note("the document has no 'applinks' section, so it gives no app universal links")
            return AssociationMatch(outcome: .noMatch, detailIndex: nil, patternIndex: nil, pattern: nil, trail: trail)
        }
        guard let indices = detailsByAppID[appID], !indices.isEmpty else {
            note("no details entry lists \(appID) (the document names \(AssociationDocument.list(appIDs)))")
            return AssociationMatch(outcome: .noMatch, detailIndex: nil, patternIndex: nil, pattern: nil, trail: trail)
        }
        if trace {
            let others = (0..<details.count).filter { !indices.contains($0) }
            if !others.isEmpty {
                note("\(AssociationDocument.list(others.map { "details[\($0)]" })) \(others.count == 1 ? "does" : "do") not list \(appID)")
            }
        }
        var parts = URLParts(url)
        for d in indices {
            let detail = details[d]
            switch detail.format {
            case .none:
                note("details[\(d)] lists \(appID) but has neither 'components' nor 'paths', so it gives no URLs")
            case .paths:
                let path = parts.path(decoded: false)
                note("details[\(d)] lists \(appID); legacy paths are matched against the path '\(url.path)'")
                for (k, entry) in detail.paths.enumerated() {
                    let matched = entry.compiled.matches(normalizedPath: path, budget: &budget)
                    if budget < 0 { return overBudget(d, k) }
                    if matched {
                        if entry.isExclusion {
                            note("details[\(d)].paths[\(k)] '\(entry.source)' matches: excluded, not a universal link for \(appID)")
                            return AssociationMatch(
                                outcome: .excluded, detailIndex: d, patternIndex: k, pattern: entry.source, trail: trail)
                        }
                        note("details[\(d)].paths[\(k)] '\(entry.source)' matches: \(appID) opens the URL")
                        return AssociationMatch(
                            outcome: .matched, detailIndex: d, patternIndex: k, pattern: entry.source, trail: trail)
                    }
                    note("details[\(d)].paths[\(k)] '\(entry.source)' does not match")
                }
                note("details[\(d)]: no path pattern matched")
            case .components:
                note("details[\(d)] lists \(appID); trying its \(detail.components.count) components in order")
                for (k, c) in detail.components.enumerated() {
                    let mismatch = AssociationDocument.mismatch(c, &parts, trace: trace, budget: &budget)
                    if budget < 0 { return overBudget(d, k) }
                    if let why = mismatch {
                        note("details[\(d)].components[\(k)] \(c.summary) does not match: \(why)")
                        continue
                    }
                    if c.exclude {
                        note("details[\(d)].components[\(k)] \(c.summary) matches and excludes: not a universal link for \(appID)")
                        return AssociationMatch(
                            outcome: .excluded, detailIndex: d, patternIndex: k, pattern: c.summary, trail: trail)
                    }
                    note("details[\(d)].components[\(k)] \(c.summary) matches: \(appID) opens the URL")
                    return AssociationMatch(
                        outcome: .matched, detailIndex: d, patternIndex: k, pattern: c.summary, trail: trail)
                }
                note("details[\(d)]: no component matched")
            }
        }
        return AssociationMatch(outcome: .noMatch, detailIndex: nil, patternIndex: nil, pattern: nil, trail: trail)
    }

    /// Nil when `c` matches the URL; otherwise why not (a non-empty placeholder when not tracing).
    /// Within `budget` steps (below zero after it: the answer is then meaningless).
    static func mismatch(_ c: AssociationComponent, _ parts: inout URLParts, trace: Bool, budget: inout Int) -> String? {
        let decoded = !c.percentEncoded
        if let pp = c.pathPattern {
            let path = parts.path(decoded: decoded)
            if !pp.matches(normalizedPath: path, budget: &budget) {
                return trace ? "path '\(parts.rawOrDecodedPath(decoded))' does not match '\(c.path ?? "")'" : ""
            }
        }
        if let qp = c.queryPattern {
            let q = parts.query(decoded: decoded)
            if !qp.matches(q, budget: &budget) { return trace ? "query '\(q)' does not match '\(qp.source)'" : "" }
        }
        if case .items(let items) = c.query {
            let all = parts.items(decoded: decoded, folded: !c.caseSensitive)
            for item in items {
                var found = false
                for (name, value) in all where name == item.matchName {
                    found = true
                    if !item.compiled.matches(value ?? "", budget: &budget) {
                        return trace
                            ? "query item '\(item.name)' value '\(value ?? "")' does not match '\(item.pattern)' (every occurrence must match)"
                            : ""
                    }
                }
                if !found, !item.compiled.matches("", budget: &budget) {
                    return trace
                        ? "query item '\(item.name)' is absent (counts as empty) and '' does not match '\(item.pattern)'" : ""
                }
            }
        }
        if let fp = c.fragmentPattern {
            let f = parts.fragment(decoded: decoded)
            if !fp.matches(f, budget: &budget) { return trace ? "fragment '\(f)' does not match '\(fp.source)'" : "" }
        }
        return nil
    }

    static func list(_ items: [String], limit: Int = 8) -> String {
        if items.isEmpty { return "no apps" }
        if items.count <= limit { return items.joined(separator: ", ") }
        return items.prefix(limit).joined(separator: ", ") + " and \(items.count - limit) more"
    }
}

/// The parts of a URL that patterns look at, computed once per URL and encoding.
///
/// `percentEncoded: true` (the default) compares patterns with the component as written; `false`
/// percent-decodes the component first and leaves the pattern alone, so patterns can be written in
/// Unicode (WWDC20 10098: `{"/": "/哈哈/?*", "percentEncoded": false}`; Apple: "whether URLs are
/// percent-encoded"). A missing query or fragment reads as the empty string.
struct URLParts {
    let url: URLReference
    private var rawPath: String?
    private var decodedPath: String?
    /// The query and fragment as written, read from the URL once (it makes a string per read).
    private let rawQuery: String?
    private let rawFragment: String?
    private var decodedQuery: String?
    private var decodedFragment: String?
    private var rawItems: [(String, String?)]?
    private var cache: [Int: [(String, String?)]] = [:]

    init(_ url: URLReference) {
        self.url = url
        rawQuery = url.query
        rawFragment = url.fragment
    }

    mutating func path(decoded: Bool) -> String {
        if decoded {
            if let decodedPath { return decodedPath }
            let p = AssociationPathPattern.normalize(URLReference.percentDecoded(url.path))
            decodedPath = p
            return p
        }
        if let rawPath { return rawPath }
        let p = AssociationPathPattern.normalize(url.path)
        rawPath = p
        return p
    }

    func rawOrDecodedPath(_ decoded: Bool) -> String { decoded ? URLReference.percentDecoded(url.path) : url.path }

    mutating func query(decoded: Bool) -> String {
        guard let q = rawQuery else { return "" }
        if !decoded { return q }
        if let decodedQuery { return decodedQuery }
        let d = URLReference.percentDecoded(q)
        decodedQuery = d
        return d
    }

    mutating func fragment(decoded: Bool) -> String {
        guard let f = rawFragment else { return "" }
        if !decoded { return f }
        if let decodedFragment { return decodedFragment }
        let d = URLReference.percentDecoded(f)
        decodedFragment = d
        return d
    }

    /// Query items (name, value), names decoded/folded as the component's settings say; values decoded
    /// when asked (folding of values is the pattern's job).
    mutating func items(decoded: Bool, folded: Bool) -> [(String, String?)] {
        let key = (decoded ? 1 : 0) | (folded ? 2 : 0)
        if let hit = cache[key] { return hit }
        if rawItems == nil { rawItems = url.queryItems.map { ($0.name, $0.value) } }
        let out: [(String, String?)] = rawItems!.map { item in
            var name = decoded ? URLReference.percentDecoded(item.0) : item.0
            if folded { name = name.lowercased() }
            return (name, decoded ? item.1.map(URLReference.percentDecoded) : item.1)
        }
        cache[key] = out
        return out
    }
}

// MARK: - Parsing

extension AssociationDocument {
    /// The validating parser. Every error carries the exact key path.
    struct Parser {
        var hasApplinks = false
        var details: [AssociationDetail] = []
        var defaults = AssociationOptions()
        var variables: [String: [String]] = [:]
        var notes: [String] = []

        static let componentKeys: Set<String> = ["/", "?", "#", "exclude", "caseSensitive", "percentEncoded", "comment"]
        static let detailKeys: Set<String> = ["appID", "appIDs", "components", "paths", "defaults", "comment"]
        static let applinksKeys: Set<String> = ["apps", "details", "defaults", "substitutionVariables"]

        /// `base.name`, or `base["name"]` when the name is not identifier-like.
        static func key(_ base: String, _ name: String) -> String {
            let identifier =
                !name.isEmpty
                && name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_") }
                && !("0"..."9").contains(name.unicodeScalars.first!)
            if identifier { return base.isEmpty ? name : "\(base).\(name)" }
            return "\(base)[\(JSONValue.string(name).compactText)]"
        }

        static func fail(_ key: String, _ reason: String) -> AssociationDocumentError {
            AssociationDocumentError(key: key, reason: reason)
        }

        static func expect(_ what: String, _ v: JSONValue) -> String { "expected \(what), got \(v.typeName)" }

        mutating func parseDocument(_ root: JSONValue) throws(AssociationDocumentError) {
            guard case .object(let top) = root else {
                throw Parser.fail("", "an association document must be a JSON object, got \(root.typeName)")
            }
            guard let applinksValue = top["applinks"] else {
                hasApplinks = false
                notes.append(top.isEmpty ? "no 'applinks' section (the document is empty): no universal links" : "no 'applinks' section (keys: \(top.keys.joined(separator: ", "))): no universal links")
                return
            }
            hasApplinks = true
            guard case .object(let applinks) = applinksValue else {
                throw Parser.fail("applinks", Parser.expect("an object", applinksValue))
            }
            for k in applinks.keys where !Parser.applinksKeys.contains(k) {
                notes.append("\(Parser.key("applinks", k)): unknown key, ignored")
            }
            if let apps = applinks["apps"] {
                guard case .array(let list) = apps else { throw Parser.fail("applinks.apps", Parser.expect("an array", apps)) }
                notes.append(
                    "applinks.apps: legacy key, ignored" + (list.isEmpty ? "" : " (it should be empty; \(list.count) entries)"))
            }
            if let d = applinks["defaults"] { defaults = try Parser.options(d, "applinks.defaults", &notes) }
            if let sv = applinks["substitutionVariables"] { try parseVariables(sv) }
            guard let detailsValue = applinks["details"] else {
                throw Parser.fail("applinks.details", "required key is missing (an array of {appIDs, components})")
            }
            switch detailsValue {
            case .array(let list):
                for (i, item) in list.enumerated() {
                    details.append(try parseDetail(item, "applinks.details[\(i)]", legacyAppID: nil))
                }
            case .object(let dict):
                // iOS 9 form: {"TEAMID.BUNDLEID": {"paths": [...]}}.
                notes.append("applinks.details: iOS 9 dictionary form (keyed by app ID)")
                for (appID, item) in dict {
                    details.append(try parseDetail(item, Parser.key("applinks.details", appID), legacyAppID: appID))
                }
            default:
                throw Parser.fail("applinks.details", Parser.expect("an array", detailsValue))
            }
        }

        static func options(_ v: JSONValue, _ key: String, _ notes: inout [String]) throws(AssociationDocumentError)
            -> AssociationOptions
        {
            guard case .object(let o) = v else { throw fail(key, expect("an object", v)) }
            var out = AssociationOptions()
            for (k, value) in o {
                switch k {
                case "caseSensitive", "percentEncoded":
                    guard case .bool(let b) = value else { throw fail(Parser.key(key, k), expect("a boolean", value)) }
                    if k == "caseSensitive" { out.caseSensitive = b } else { out.percentEncoded = b }
                default:
                    notes.append("\(Parser.key(key, k)): ignored (defaults apply caseSensitive and percentEncoded)")
                }
            }
            return out
        }

        mutating func parseVariables(_ v: JSONValue) throws(AssociationDocumentError) {
            let key = "applinks.substitutionVariables"
            guard case .object(let o) = v else { throw Parser.fail(key, Parser.expect("an object", v)) }
            for (name, values) in o {
                let vkey = Parser.key(key, name)
                if name.isEmpty { throw Parser.fail(vkey, "a variable name may not be empty") }
                if name.contains("$") || name.contains("(") || name.contains(")") {
                    throw Parser.fail(vkey, "a variable name may not contain '$', '(' or ')'")
                }
                guard case .array(let list) = values else {
                    throw Parser.fail(vkey, Parser.expect("an array of strings", values))
                }
                var strings: [String] = []
                for (i, item) in list.enumerated() {
                    guard case .string(let s) = item else { throw Parser.fail("\(vkey)[\(i)]", Parser.expect("a string", item)) }
                    if s.contains("$(") {
                        throw Parser.fail("\(vkey)[\(i)]", "a value may not use another substitution variable ('\(s)')")
                    }
                    strings.append(s)
                }
                if AssociationPattern.predefined(name) != nil {
                    notes.append("\(vkey): replaces the predefined $(\(name))")
                }
                variables[name] = strings
            }
        }

        static func appID(_ v: JSONValue, _ key: String) throws(AssociationDocumentError) -> String {
            guard case .string(let s) = v else { throw fail(key, expect("an app ID string", v)) }
            guard let dot = s.firstIndex(of: "."), dot != s.startIndex, s.index(after: dot) != s.endIndex,
                !s.contains(where: { $0 == " " || $0 == "/" })
            else {
                throw fail(key, "'\(s)' is not an app ID (expected TEAMID.BUNDLEID, e.g. ABCDE12345.com.example.app)")
            }
            return s
        }

        mutating func parseDetail(_ v: JSONValue, _ key: String, legacyAppID: String?) throws(AssociationDocumentError)
            -> AssociationDetail
        {
            guard case .object(let o) = v else { throw Parser.fail(key, Parser.expect("an object", v)) }
            for k in o.keys where !Parser.detailKeys.contains(k) {
                notes.append("\(Parser.key(key, k)): unknown key, ignored")
            }
            var ids: [String] = []
            if let legacyAppID {
                ids.append(try Parser.appID(.string(legacyAppID), key))
            }
            if let one = o["appID"] { ids.append(try Parser.appID(one, "\(key).appID")) }
            if let many = o["appIDs"] {
                guard case .array(let list) = many else { throw Parser.fail("\(key).appIDs", Parser.expect("an array", many)) }
                for (i, item) in list.enumerated() { ids.append(try Parser.appID(item, "\(key).appIDs[\(i)]")) }
            }
            if ids.isEmpty {
                throw Parser.fail(key, "names no app: needs 'appID' or a non-empty 'appIDs'")
            }
            var appDefaults = AssociationOptions()
            if let d = o["defaults"] { appDefaults = try Parser.options(d, "\(key).defaults", &notes) }
            let caseSensitive = appDefaults.caseSensitive ?? defaults.caseSensitive ?? true
            let percentEncoded = appDefaults.percentEncoded ?? defaults.percentEncoded ?? true

            if let comps = o["components"] {
                guard case .array(let list) = comps else {
                    throw Parser.fail("\(key).components", Parser.expect("an array", comps))
                }
                if o["paths"] != nil {
                    notes.append("\(key).paths: ignored because 'components' is present (iOS 13 and later)")
                }
                var components: [AssociationComponent] = []
                for (i, item) in list.enumerated() {
                    components.append(
                        try parseComponent(
                            item, "\(key).components[\(i)]", caseSensitive: caseSensitive, percentEncoded: percentEncoded))
                }
                return AssociationDetail(
                    appIDs: ids, format: .components, components: components, paths: [], defaults: appDefaults)
            }
            if let pathsValue = o["paths"] {
                guard case .array(let list) = pathsValue else {
                    throw Parser.fail("\(key).paths", Parser.expect("an array of strings", pathsValue))
                }
                var paths: [AssociationLegacyPath] = []
                for (i, item) in list.enumerated() {
                    let pkey = "\(key).paths[\(i)]"
                    guard case .string(let s) = item else { throw Parser.fail(pkey, Parser.expect("a string", item)) }
                    let exclusion = s.hasPrefix("NOT ")
                    let pattern = exclusion ? String(s.dropFirst(4)) : s
                    do {
                        // Legacy paths: path only, case-sensitive, as written, no substitution variables.
                        let compiled = try AssociationPathPattern(pattern, foldCase: false, variables: [:], substitution: false)
                        paths.append(
                            AssociationLegacyPath(source: s, pattern: pattern, isExclusion: exclusion, compiled: compiled))
                    } catch {
                        throw Parser.fail(pkey, error.reason)
                    }
                }
                return AssociationDetail(appIDs: ids, format: .paths, components: [], paths: paths, defaults: appDefaults)
            }
            notes.append("\(key): neither 'components' nor 'paths': gives its apps no URLs")
            return AssociationDetail(appIDs: ids, format: .none, components: [], paths: [], defaults: appDefaults)
        }

        mutating func parseComponent(_ v: JSONValue, _ key: String, caseSensitive: Bool, percentEncoded: Bool)
            throws(AssociationDocumentError) -> AssociationComponent
        {
            guard case .object(let o) = v else { throw Parser.fail(key, Parser.expect("an object", v)) }
            for k in o.keys where !Parser.componentKeys.contains(k) {
                notes.append("\(Parser.key(key, k)): unknown key, ignored")
            }
            func bool(_ name: String) throws(AssociationDocumentError) -> Bool? {
                guard let value = o[name] else { return nil }
                guard case .bool(let b) = value else { throw Parser.fail(Parser.key(key, name), Parser.expect("a boolean", value)) }
                return b
            }
            func string(_ name: String) throws(AssociationDocumentError) -> String? {
                guard let value = o[name] else { return nil }
                guard case .string(let s) = value else {
                    throw Parser.fail(Parser.key(key, name), Parser.expect("a string pattern", value))
                }
                return s
            }
            let exclude = try bool("exclude") ?? false
            let cs = try bool("caseSensitive") ?? caseSensitive
            let pe = try bool("percentEncoded") ?? percentEncoded
            var comment: String? = nil
            if let c = o["comment"] {
                guard case .string(let s) = c else { throw Parser.fail("\(key).comment", Parser.expect("a string", c)) }
                comment = s
            }
            let vars = variables
            func compile(_ pattern: String, _ k: String) throws(AssociationDocumentError) -> AssociationPattern {
                do { return try AssociationPattern(pattern, foldCase: !cs, variables: vars) } catch {
                    throw Parser.fail(k, error.reason)
                }
            }
            let path = try string("/")
            var pathPattern: AssociationPathPattern? = nil
            if let path {
                do { pathPattern = try AssociationPathPattern(path, foldCase: !cs, variables: vars) } catch {
                    throw Parser.fail(Parser.key(key, "/"), error.reason)
                }
            }
            let fragment = try string("#")
            let fragmentPattern = try fragment.map { (f: String) throws(AssociationDocumentError) in try compile(f, Parser.key(key, "#")) }
            var query: AssociationQuery? = nil
            var queryPattern: AssociationPattern? = nil
            if let q = o["?"] {
                let qkey = Parser.key(key, "?")
                switch q {
                case .string(let s):
                    query = .pattern(s)
                    queryPattern = try compile(s, qkey)
                case .object(let dict):
                    var items: [AssociationQueryItem] = []
                    for (name, pv) in dict {
                        let ikey = Parser.key(qkey, name)
                        guard case .string(let s) = pv else { throw Parser.fail(ikey, Parser.expect("a string pattern", pv)) }
                        let compiled = try compile(s, ikey)
                        // Item names compare exactly, or case-folded under caseSensitive: false (decided).
                        let matchName = cs ? name : name.lowercased()
                        items.append(AssociationQueryItem(name: name, pattern: s, compiled: compiled, matchName: matchName))
                    }
                    query = .items(items)
                default:
                    throw Parser.fail(qkey, Parser.expect("a string or a dictionary of query item patterns", q))
                }
            }
            return AssociationComponent(
                path: path, query: query, fragment: fragment, exclude: exclude, caseSensitive: cs, percentEncoded: pe,
                comment: comment, pathPattern: pathPattern, queryPattern: queryPattern, fragmentPattern: fragmentPattern)
        }
    }
}
