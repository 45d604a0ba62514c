// Deciding whether an extension's activation rule accepts the shared items as a whole. Predicate rules see
// one extension item whose attachments are the items in order (CONTRACT "Details settled"); dictionary
// rules classify each attachment and apply Apple's counts with strict or fuzzy matching.

import ShareProtocol

/// The verdict of an activation rule on a list of items, with a reason for `explain` and -32003 messages.
public struct ActivationResult: Sendable, Equatable, CustomStringConvertible {
    /// Whether the rule accepts the items.
    public var accepted: Bool
    /// Why, in one sentence.
    public var reason: String

    /// Creates a result.
    public init(accepted: Bool, reason: String) {
        self.accepted = accepted
        self.reason = reason
    }

    static func accept(_ reason: String) -> ActivationResult { ActivationResult(accepted: true, reason: reason) }
    static func refuse(_ reason: String) -> ActivationResult { ActivationResult(accepted: false, reason: reason) }

    /// "accepted: reason" / "not accepted: reason".
    public var description: String { (accepted ? "accepted: " : "not accepted: ") + reason }
}

/// The objects activation predicates are evaluated over.
public enum ActivationContext {
    /// The extension context: `{extensionItems: [{attachments: [{registeredTypeIdentifiers: [...]}, ...]}]}` —
    /// one extension item whose attachments are the shared items, in order.
    public static func extensionContext(_ attachments: [Attachment]) -> PredicateValue {
        .object(["extensionItems": .array([.object(["attachments": .array(attachments.map(\.predicateValue))])])])
    }

    /// `SELF` for `NSExtensionActivationWebURLPredicate`: `{absoluteURL, absoluteString, scheme, host, path,
    /// query, fragment}` of one web URL (absent parts are nil).
    public static func webURL(_ url: String) -> PredicateValue {
        let ref = URLReference.parse(url)
        func s(_ v: String?) -> PredicateValue { v.map { .string($0) } ?? .null }
        return .object([
            "absoluteURL": .string(url), "absoluteString": .string(url), "scheme": s(ref?.scheme), "host": s(ref?.host),
            "path": s(ref?.path), "query": s(ref?.query), "fragment": s(ref?.fragment),
        ])
    }
}

/// Evaluates `rule` on the attachments (the shared items, in order). See `ActivationRule.evaluate(_:table:)`.
public func evaluate(_ rule: ActivationRule, items: [Attachment], table: UTITable = .system) -> ActivationResult {
    rule.evaluate(items, table: table)
}

extension ActivationRule {
    /// Evaluates a rule as a manifest carries it: nil (no `activationRule`) accepts nothing, and so does a rule
    /// that cannot be read (the reason names the problem).
    public static func evaluate(_ json: JSONValue?, attachments: [Attachment], table: UTITable = .system)
        -> ActivationResult
    {
        guard let json else { return .refuse("the extension declares no activationRule, so it accepts nothing") }
        do throws(ActivationRuleError) {
            return try ActivationRule(json: json).evaluate(attachments, table: table)
        } catch {
            return .refuse("its activationRule cannot be read: \(error)")
        }
    }

    /// Whether the rule accepts the attachments as a whole.
    ///
    /// - Predicate rules are evaluated with `SELF` = `ActivationContext.extensionContext(attachments)`; an
    ///   evaluation error (NSPredicate would raise) refuses.
    /// - Dictionary rules: see `ActivationDictionary.evaluate(_:table:)`.
    /// An empty list is never accepted: there is nothing to share.
    ///
    /// With `explainAcceptance` false an accepting result has an empty reason (a refusal always
    /// has its reason): the broker's share.send only needs the verdict, and the sentences cost
    /// more than the decision.
    public func evaluate(
        _ attachments: [Attachment], table: UTITable = .system, explainAcceptance: Bool = true
    ) -> ActivationResult {
        guard !attachments.isEmpty else { return .refuse("there are no items to share") }
        switch self {
        case .dictionary(let d): return d.evaluate(attachments, table: table, explainAcceptance: explainAcceptance)
        case .predicate(let p):
            func items() -> String {
                activationPlural(attachments.count, "item") + " "
                    + attachments.map { "[" + $0.registeredTypeIdentifiers.joined(separator: ", ") + "]" }.joined(
                        separator: " ")
            }
            let holds: Bool
            if case .constant(let value) = p.root {  // TRUEPREDICATE / FALSEPREDICATE: no context to build
                holds = value
            } else {
                do throws(PredicateEvaluationError) {
                    holds = try p.evaluate(with: ActivationContext.extensionContext(attachments), table: table)
                } catch {
                    return .refuse("the activation predicate cannot be evaluated for the \(items()): \(error)")
                }
            }
            guard holds else { return .refuse("the activation predicate is false for the \(items())") }
            return .accept(explainAcceptance ? "the activation predicate holds for the \(items())" : "")
        }
    }
}

/// The kinds of data the dictionary keys count.
enum ActivationKind: CaseIterable {
    case image, movie, file, text, webURL, webPage

    var key: ActivationKey {
        switch self {
        case .image: return .imageMaxCount
        case .movie: return .movieMaxCount
        case .file: return .fileMaxCount
        case .text: return .supportsText
        case .webURL: return .webURLMaxCount
        case .webPage: return .webPageMaxCount
        }
    }

    var noun: String {
        switch self {
        case .image: return "image"
        case .movie: return "movie"
        case .file: return "file"
        case .text: return "text"
        case .webURL: return "web URL"
        case .webPage: return "web page"
        }
    }
}

extension ActivationDictionary {
    /// The max count a key gives a kind: nil when absent; 0 when explicitly not supported. Text is 1/0.
    func limit(_ kind: ActivationKind) -> Int? {
        switch kind {
        case .image: return imageMaxCount
        case .movie: return movieMaxCount
        case .file: return fileMaxCount
        case .text: return supportsText.map { $0 ? Int.max : 0 }
        case .webURL: return webURLMaxCount
        case .webPage: return webPageMaxCount
        }
    }

    func supports(_ kind: ActivationKind) -> Bool { (limit(kind) ?? 0) > 0 }

    /// Whether the dictionary supports any kind of data at all.
    public var supportsSomething: Bool {
        (attachmentsMaxCount ?? 0) > 0 || ActivationKind.allCases.contains { supports($0) }
    }

    /// What the rule supports, for messages: "web URLs (up to 1), text".
    var supportSummary: String {
        var parts: [String] = []
        if let n = attachmentsMaxCount, n > 0 { parts.append("any items (up to \(n))") }
        for k in ActivationKind.allCases where supports(k) {
            if k == .text { parts.append("text") } else { parts.append("\(k.noun)s (up to \(limit(k)!))") }
        }
        return parts.isEmpty ? "nothing" : parts.joined(separator: ", ")
    }

    /// How one attachment is classified.
    struct Classification {
        var image = false
        var movie = false
        var fileItem = false
        var text = false
        var webURLType = false
        var webURL = false
        var webPage = false
        var filteredOut: String?
        /// The image/movie/file key it is counted under (the most specific supported one).
        var fileFamily: ActivationKind?
    }

    func classify(_ a: Attachment, table: UTITable) -> Classification {
        var c = Classification()
        // (one lookup per type: what `table.conforms(type, to: t)` says for each t below)
        var any: UTITable.WellKnownTypes = []
        for type in a.registeredTypeIdentifiers {
            let m = table.wellKnownConformance(of: type)
            any.formUnion(m)
            if m.contains(.url) && !m.contains(.fileURL) { c.webURLType = true }
        }
        c.image = any.contains(.image)
        c.movie = any.contains(.movie)
        c.fileItem = a.kind == .data || a.kind == .file || any.contains(.fileURL)
        c.text = any.contains(.text)
        c.webURL = c.webURLType
        if c.webURLType, let filter = webURLPredicate {
            let url = a.url ?? a.carriedURLs.first ?? ""
            do throws(PredicateEvaluationError) {
                if !(try filter.evaluate(with: ActivationContext.webURL(url), table: table)) {
                    c.webURL = false
                    c.filteredOut = "\(url) does not satisfy NSExtensionActivationWebURLPredicate"
                }
            } catch {
                c.webURL = false
                c.filteredOut = "NSExtensionActivationWebURLPredicate cannot be evaluated for \(url): \(error)"
            }
        }
        c.webPage = !any.isDisjoint(with: [.propertyList, .html, .webArchive])
        if c.image, supports(.image) {
            c.fileFamily = .image
        } else if c.movie, supports(.movie) {
            c.fileFamily = .movie
        } else if c.fileItem, supports(.file) {
            c.fileFamily = .file
        }
        return c
    }

    /// Whether the dictionary rule accepts the attachments as a whole.
    ///
    /// Each attachment is classified by conformance: image (`public.image`), movie (`public.movie`), file (a data
    /// or path item, or `public.file-url`), text (`public.text`), web URL (`public.url` but not `public.file-url`,
    /// and passing `NSExtensionActivationWebURLPredicate` when set), web page (`com.apple.property-list` — what
    /// Safari hands over for a page — `public.html` or `com.apple.webarchive`). A key with a count above 0
    /// (`NSExtensionActivationSupportsText` true) supports its kind; "If you don't support a particular data
    /// type, use 0 for the value of the corresponding key or remove the key" (App Extension Programming Guide,
    /// "Declaring Supported Data Types for a Share or Action Extension").
    ///
    /// - Counts: each supported kind's attachments must not exceed its max. An image or movie file counts under
    ///   Image/Movie when that key is supported and under File otherwise ("all types of files"); text, web URL and
    ///   web page count every attachment of their type. Text has no maximum. All attachments count for
    ///   `...AttachmentsWithMaxCount`/`MinCount`; a positive AttachmentsWithMaxCount supports any type.
    /// - Strict matching (`strictMatching`): every attachment must be of a supported kind — a URL-only extension
    ///   is not offered a URL plus a PDF.
    /// - Fuzzy matching (DictionaryVersion 2 without UsesStrictMatching): at least one attachment must be of a
    ///   supported kind; an attachment of a kind whose key is present with 0 (or `false`) must still be of some
    ///   supported kind (iOS's builder emits a reject predicate for such keys in non-strict mode only).
    public func evaluate(
        _ attachments: [Attachment], table: UTITable = .system, explainAcceptance: Bool = true
    ) -> ActivationResult {
        let n = attachments.count
        guard n > 0 else { return .refuse("there are no items to share") }
        guard supportsSomething else {
            return .refuse(
                "the rule supports no kind of data (every NSExtensionActivationSupports… key is 0 or absent)")
        }
        if let max = attachmentsMaxCount, max > 0, n > max {
            return .refuse(
                "\(activationPlural(n, "item")), but \(ActivationKey.attachmentsMaxCount.rawValue) is \(max)")
        }
        if let min = attachmentsMinCount, n < min {
            return .refuse(
                "\(activationPlural(n, "item")), but \(ActivationKey.attachmentsMinCount.rawValue) is \(min)")
        }
        let classes = attachments.map { classify($0, table: table) }
        let anyKind = (attachmentsMaxCount ?? 0) > 0

        // Counts per supported kind.
        var counts = ActivationKindCounts()
        for c in classes {
            if let f = c.fileFamily { counts[f] += 1 }
            if c.text { counts[.text] += 1 }
            if c.webURL { counts[.webURL] += 1 }
            if c.webPage { counts[.webPage] += 1 }
        }
        for k in ActivationKind.allCases where supports(k) && k != .text {
            let have = counts[k]
            if have > limit(k)! {
                return .refuse("\(activationPlural(have, k.noun)), but \(k.key.rawValue) is \(limit(k)!)")
            }
        }

        func covered(_ c: Classification) -> Bool {
            anyKind || c.fileFamily != nil || (c.text && supports(.text)) || (c.webURL && supports(.webURL))
                || (c.webPage && supports(.webPage))
        }
        func describe(_ i: Int) -> String {
            let a = attachments[i]
            if let u = a.url, a.kind == .url || a.kind == .text { return "items[\(i)] (\(a.primaryType) \(u))" }
            return "items[\(i)] (\(a.primaryType))"
        }

        if strictMatching {
            for (i, c) in classes.enumerated() where !covered(c) {
                let why = c.filteredOut.map { ": \($0)" } ?? ""
                return .refuse("\(describe(i)) is not a kind this rule supports\(why); it supports \(supportSummary)")
            }
            return .accept(explainAcceptance ? "every item is supported (\(countSummary(counts))); strict matching" : "")
        }
        // Fuzzy matching.
        let supportedCount = classes.filter(covered).count
        guard supportedCount > 0 else {
            let why = classes.compactMap(\.filteredOut).first.map { " (\($0))" } ?? ""
            return .refuse(
                "none of the \(activationPlural(n, "item")) is a kind this rule supports\(why); it supports \(supportSummary)"
            )
        }
        for (i, c) in classes.enumerated() where !covered(c) {
            let zeroKinds: [ActivationKind] = [
                c.image ? .image : nil, c.movie ? .movie : nil, c.fileItem ? .file : nil, c.text ? .text : nil,
                c.webURLType ? .webURL : nil, c.webPage ? .webPage : nil,
            ].compactMap { $0 }.filter { limit($0) == 0 }
            if let k = zeroKinds.first {
                let value = k == .text ? "false" : "0"
                return .refuse("\(describe(i)) is a \(k.noun) and \(k.key.rawValue) is \(value)")
            }
        }
        guard explainAcceptance else { return .accept("") }
        return .accept(
            "\(supportedCount) of \(activationPlural(n, "item")) supported (\(countSummary(counts))); fuzzy matching "
                + "(DictionaryVersion \(dictionaryVersion ?? 1) without UsesStrictMatching) passes the others along")
    }

    func countSummary(_ counts: ActivationKindCounts) -> String {
        var parts: [String] = []
        for k in ActivationKind.allCases where supports(k) {
            let have = counts[k]
            if have == 0 { continue }
            parts.append(
                k == .text
                    ? activationPlural(have, "text") : "\(activationPlural(have, k.noun)) of at most \(limit(k)!)")
        }
        if parts.isEmpty, let max = attachmentsMaxCount, max > 0 { parts.append("any items, at most \(max)") }
        return parts.isEmpty ? "no counted kinds" : parts.joined(separator: ", ")
    }
}

/// How many attachments count under each kind (a share's activation check makes one per share:
/// no dictionary, no allocation).
struct ActivationKindCounts {
    private var values: (Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0)

    subscript(kind: ActivationKind) -> Int {
        get {
            switch kind {
            case .image: return values.0
            case .movie: return values.1
            case .file: return values.2
            case .text: return values.3
            case .webURL: return values.4
            case .webPage: return values.5
            }
        }
        set {
            switch kind {
            case .image: values.0 = newValue
            case .movie: values.1 = newValue
            case .file: values.2 = newValue
            case .text: values.3 = newValue
            case .webURL: values.4 = newValue
            case .webPage: values.5 = newValue
            }
        }
    }
}

/// "1 item", "3 items", "2 texts".
func activationPlural(_ n: Int, _ noun: String) -> String { n == 1 ? "1 \(noun)" : "\(n) \(noun)s" }
