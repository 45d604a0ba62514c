// Validation of activation rules for manifest loading and `explain`: read errors, keys Apple does not define
// (NSExtensionActivationWebURLPredicate is sharebroker's), lenient values, rules that accept everything or
// nothing, and predicate key paths or types that the activation context does not have.

import ShareProtocol

/// A finding about an activation rule.
public struct ActivationIssue: Sendable, Equatable, CustomStringConvertible {
    /// How serious it is.
    public enum Severity: String, Sendable, Equatable {
        /// The rule cannot be read; the extension accepts nothing.
        case error
        /// Probably not what the author meant.
        case warning
        /// Worth knowing; the rule works as written.
        case note
    }

    /// How serious it is.
    public var severity: Severity
    /// The dictionary key concerned, or empty for the rule as a whole.
    public var key: String
    /// A plain sentence.
    public var message: String
    /// The position in a predicate string, for syntax errors.
    public var position: Int?

    /// Creates an issue.
    public init(_ severity: Severity, key: String = "", _ message: String, position: Int? = nil) {
        self.severity = severity
        self.key = key
        self.message = message
        self.position = position
    }

    /// "severity: key: message".
    public var description: String { "\(severity.rawValue): " + (key.isEmpty ? message : "\(key): \(message)") }
}

extension ActivationRule {
    /// The exact sentence validation gives for `NSExtensionActivationWebURLPredicate`.
    public static let webURLPredicateNote =
        "NSExtensionActivationWebURLPredicate is not an Apple key (iOS ignores it); sharebroker applies it as an extension that filters shared web URLs"

    /// Everything worth saying about a rule as a manifest carries it (an unreadable rule gives one `.error`).
    public static func validate(_ json: JSONValue, table: UTITable = .system) -> [ActivationIssue] {
        let rule: ActivationRule
        do throws(ActivationRuleError) {
            rule = try ActivationRule(json: json)
        } catch {
            return [ActivationIssue(.error, key: error.key, error.message, position: error.position)]
        }
        var issues: [ActivationIssue] = []
        if case .object(let o) = json { issues += lenientValues(o) }
        return issues + rule.issues(table: table)
    }

    /// Findings about a parsed rule (see `validate(_:table:)`).
    public func issues(table: UTITable = .system) -> [ActivationIssue] {
        switch self {
        case .dictionary(let d): return ActivationRule.dictionaryIssues(d, table: table)
        case .predicate(let p):
            var out: [ActivationIssue] = []
            if p.root == .constant(true) {
                out.append(
                    ActivationIssue(
                        .warning,
                        "TRUEPREDICATE accepts everything; Apple rejects apps whose extensions still use it (App Extension "
                            + "Programming Guide: replace it with a real predicate or NSExtensionActivationRule keys before submitting)"
                    ))
            } else if p.root == .constant(false) {
                out.append(ActivationIssue(.warning, "FALSEPREDICATE accepts nothing: the extension is never offered"))
            }
            out += PredicateShapeChecker(table: table, root: .context).check(p.root)
            return out
        }
    }

    static func lenientValues(_ o: JSONObject) -> [ActivationIssue] {
        var out: [ActivationIssue] = []
        for (k, v) in o {
            guard let key = ActivationKey(rawValue: k) else { continue }
            switch key {
            case .usesStrictMatching, .supportsText:
                if case .bool = v { continue }
                out.append(
                    ActivationIssue(
                        .note, key: k,
                        "expected a Boolean; \(v.compactText) is read as \(((try? flag(v, key)) ?? false) ? "true" : "false")"
                    ))
            case .webURLPredicate:
                continue
            default:
                if case .number = v { continue }
                out.append(
                    ActivationIssue(
                        .note, key: k,
                        "expected an integer; \(v.compactText) is read as \((try? count(v, key)) ?? 0), as iOS's intValue does"
                    ))
            }
        }
        return out
    }

    static func dictionaryIssues(_ d: ActivationDictionary, table: UTITable) -> [ActivationIssue] {
        var out: [ActivationIssue] = []
        for k in d.unknownKeys {
            if k.hasPrefix("NSExtensionActivation") {
                var message =
                    "\(k) is not an activation rule key Apple defines; iOS ignores it, and so does sharebroker"
                if let s = suggestion(for: k) {
                    message += " (did you mean \(s)?)"
                } else if k.contains("TypeIdentifier") || k.contains("UTI") {
                    message +=
                        " (to accept particular types, write the rule as a predicate string with UTI-CONFORMS-TO)"
                }
                out.append(ActivationIssue(.warning, key: k, message))
            } else {
                out.append(ActivationIssue(.warning, key: k, "\(k) is not an activation rule key; ignored"))
            }
        }
        if d.webURLPredicate != nil {
            out.append(ActivationIssue(.warning, key: ActivationKey.webURLPredicate.rawValue, webURLPredicateNote))
            if (d.webURLMaxCount ?? 0) == 0 {
                out.append(
                    ActivationIssue(
                        .warning, key: ActivationKey.webURLPredicate.rawValue,
                        "has no effect: the rule supports no web URLs (NSExtensionActivationSupportsWebURLWithMaxCount is 0 or absent)"
                    ))
            }
            if let p = d.webURLPredicate {
                out += PredicateShapeChecker(table: table, root: .webURL).check(p.root).map {
                    var i = $0
                    i.key = ActivationKey.webURLPredicate.rawValue
                    return i
                }
            }
        }
        if !d.supportsSomething {
            out.append(
                ActivationIssue(
                    .warning,
                    "the rule supports no kind of data (every NSExtensionActivationSupports… key is 0 or absent): the extension is never offered"
                ))
        }
        if let min = d.attachmentsMinCount, let max = d.attachmentsMaxCount, max > 0, min > max {
            out.append(
                ActivationIssue(
                    .warning, key: ActivationKey.attachmentsMinCount.rawValue,
                    "is \(min), more than NSExtensionActivationSupportsAttachmentsWithMaxCount (\(max)): nothing can satisfy both"
                ))
        }
        if let v = d.dictionaryVersion, v != 1, v != 2 {
            out.append(
                ActivationIssue(
                    .warning, key: ActivationKey.dictionaryVersion.rawValue,
                    "Apple defines versions 1 and 2; \(v) is treated like \(v < 1 ? "1" : "2")"))
        }
        if d.usesStrictMatching != nil, (d.dictionaryVersion ?? 1) < 2 {
            out.append(
                ActivationIssue(
                    .note, key: ActivationKey.usesStrictMatching.rawValue,
                    "matching is strict before NSExtensionActivationDictionaryVersion 2 whatever this key says"))
        }
        if !d.strictMatching {
            out.append(
                ActivationIssue(
                    .note, key: ActivationKey.dictionaryVersion.rawValue,
                    "version 2 without NSExtensionActivationUsesStrictMatching matches fuzzily: the extension is offered "
                        + "items of which at least one is supported; set NSExtensionActivationUsesStrictMatching to true to require every item"
                ))
        }
        return out
    }

    /// The Apple key an unknown key was probably meant to be.
    static func suggestion(for key: String) -> String? {
        func words(_ s: String) -> Set<String> {
            var out: Set<String> = []
            var w = ""
            for c in s {
                if c.isUppercase, !w.isEmpty, !(w.last?.isUppercase ?? false) {
                    out.insert(w.lowercased())
                    w = ""
                }
                w.append(c)
            }
            if !w.isEmpty { out.insert(w.lowercased()) }
            return out
        }
        let kw = words(key)
        var best: (String, Double)?
        for candidate in ActivationKey.allCases.map(\.rawValue) {
            let distance = editDistance(key.lowercased(), candidate.lowercased())
            let cw = words(candidate)
            let jaccard = Double(kw.intersection(cw).count) / Double(max(kw.union(cw).count, 1))
            let score = distance <= 3 ? 1.0 + Double(3 - distance) : jaccard
            if score >= 0.75, score > (best?.1 ?? 0) { best = (candidate, score) }
        }
        return best?.0
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var prev = Array(0...y.count)
        var cur = Array(repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            cur[0] = i
            for j in 1...y.count {
                cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
            }
            swap(&prev, &cur)
        }
        return prev[y.count]
    }
}

/// Walks a predicate and names key paths the activation context does not have (they read as nil) and type
/// identifiers the UTI table does not know.
struct PredicateShapeChecker {
    enum Shape: Equatable {
        case context, items, item, attachments, attachment, types, webURL, unknown
    }

    let table: UTITable
    let root: Shape

    func check(_ node: PredicateNode) -> [ActivationIssue] {
        var issues: [ActivationIssue] = []
        var seen = Set<String>()
        walk(node, [:], &issues, &seen)
        return issues
    }

    func walk(
        _ node: PredicateNode, _ vars: [String: Shape], _ issues: inout [ActivationIssue], _ seen: inout Set<String>
    ) {
        switch node {
        case .constant: return
        case .not(let p): walk(p, vars, &issues, &seen)
        case .and(let ps), .or(let ps): for p in ps { walk(p, vars, &issues, &seen) }
        case .comparison(let c):
            _ = shape(c.lhs, vars, &issues, &seen)
            _ = shape(c.rhs, vars, &issues, &seen)
            if c.op == .utiConformsTo || c.op == .utiEquals {
                var literals: [String] = []
                if case .constant(.string(let s)) = c.rhs { literals.append(s) }
                if case .aggregate(let items) = c.rhs {
                    for case .constant(.string(let s)) in items { literals.append(s) }
                }
                for s in literals where !table.isDeclared(s) && seen.insert("uti:" + s).inserted {
                    let message =
                        UTITable.isValidIdentifier(s)
                        ? "\(s) is not a type sharebroker knows (a typo?); only items given exactly this type conform to it"
                        : "\"\(s)\" is not a type identifier"
                    issues.append(ActivationIssue(.note, message))
                }
            }
        }
    }

    func shape(
        _ e: PredicateExpr, _ vars: [String: Shape], _ issues: inout [ActivationIssue], _ seen: inout Set<String>
    ) -> Shape {
        switch e {
        case .evaluatedObject: return root
        case .variable(let v): return vars[v] ?? .unknown
        case .key(let base, let k):
            let b = shape(base, vars, &issues, &seen)
            let (result, known) = PredicateShapeChecker.read(k, of: b)
            if !known, seen.insert("key:" + k).inserted {
                issues.append(
                    ActivationIssue(.warning, "'\(k)' is not in \(PredicateShapeChecker.describe(b)); it reads as nil"))
            }
            return result
        case .subquery(let collection, let variable, let predicate):
            let c = shape(collection, vars, &issues, &seen)
            var inner = vars
            switch c {
            case .items: inner[variable] = .item
            case .attachments: inner[variable] = .attachment
            default: inner[variable] = .unknown
            }
            walk(predicate, inner, &issues, &seen)
            return c == .items ? .items : c == .attachments ? .attachments : .unknown
        case .collectionOperator(let base, _), .index(let base, _), .negate(let base):
            _ = shape(base, vars, &issues, &seen)
            return .unknown
        case .arithmetic(_, let a, let b):
            _ = shape(a, vars, &issues, &seen)
            _ = shape(b, vars, &issues, &seen)
            return .unknown
        case .aggregate(let items), .function(_, let items):
            for i in items { _ = shape(i, vars, &issues, &seen) }
            return .unknown
        case .constant: return .unknown
        }
    }

    /// The shape a key reads and whether the key exists there.
    static func read(_ key: String, of base: Shape) -> (Shape, Bool) {
        switch base {
        case .context: return key == "extensionItems" ? (.items, true) : (.unknown, false)
        case .item, .items:
            if key == "attachments" { return (base == .item ? .attachments : .unknown, true) }
            return (.unknown, ["attributedTitle", "attributedContentText", "userInfo"].contains(key))
        case .attachment, .attachments:
            return key == "registeredTypeIdentifiers"
                ? (base == .attachment ? .types : .unknown, true) : (.unknown, false)
        case .webURL:
            return (
                .unknown,
                ["absoluteURL", "absoluteString", "scheme", "host", "path", "query", "fragment"].contains(key)
            )
        case .types, .unknown: return (.unknown, true)
        }
    }

    static func describe(_ s: Shape) -> String {
        switch s {
        case .context: return "the activation context (it has extensionItems)"
        case .items, .item: return "an extension item (it has attachments)"
        case .attachments, .attachment: return "an attachment (it has registeredTypeIdentifiers)"
        case .webURL: return "a web URL (it has absoluteURL, absoluteString, scheme, host, path, query, fragment)"
        case .types, .unknown: return "the value"
        }
    }
}
