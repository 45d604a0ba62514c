// NSExtensionActivationRule as manifests carry it: Apple's dictionary form (NSExtensionActivation... keys) or a
// predicate string. Keys: developer.apple.com/documentation/bundleresources/information-property-list/
// nsextension/nsextensionattributes/nsextensionactivationrule; sharebroker adds NSExtensionActivationWebURLPredicate.

import ShareProtocol

/// The dictionary keys of an activation rule.
public enum ActivationKey: String, Sendable, CaseIterable {
    /// Apple: "The version of the parent extension-activation rule dictionary" (iOS 9+).
    case dictionaryVersion = "NSExtensionActivationDictionaryVersion"
    /// Apple: "whether strict or fuzzy matching is used when determining the asset types an app extension handles" (iOS 9+).
    case usesStrictMatching = "NSExtensionActivationUsesStrictMatching"
    /// Apple: "The maximum number of attachments that the app extension supports."
    case attachmentsMaxCount = "NSExtensionActivationSupportsAttachmentsWithMaxCount"
    /// Apple: "The minimum number of attachments that the app extension supports."
    case attachmentsMinCount = "NSExtensionActivationSupportsAttachmentsWithMinCount"
    /// Apple: "The maximum number of all types of files that the app extension supports."
    case fileMaxCount = "NSExtensionActivationSupportsFileWithMaxCount"
    /// Apple: "The maximum number of image files that the app extension supports."
    case imageMaxCount = "NSExtensionActivationSupportsImageWithMaxCount"
    /// Apple: "The maximum number of movie files that the app extension supports."
    case movieMaxCount = "NSExtensionActivationSupportsMovieWithMaxCount"
    /// Apple: "A Boolean value indicating whether the app extension supports text."
    case supportsText = "NSExtensionActivationSupportsText"
    /// Apple: "The maximum number of HTTP URLs that the app extension supports."
    case webURLMaxCount = "NSExtensionActivationSupportsWebURLWithMaxCount"
    /// Apple: "The maximum number of webpages that the app extension supports."
    case webPageMaxCount = "NSExtensionActivationSupportsWebPageWithMaxCount"
    /// Not Apple's: a sharebroker extension (seed 000 uses it; iOS ignores it). A predicate that filters the
    /// shared web URLs: a web URL counts for `NSExtensionActivationSupportsWebURLWithMaxCount` only when it
    /// holds. It is evaluated once per web URL with `SELF` = `{absoluteURL, absoluteString, scheme, host, path,
    /// query, fragment}` (strings; absent parts are nil), so `absoluteURL CONTAINS 'youtu.be'` works, and so does
    /// seed 000's `SUBQUERY(absoluteURL, $url, $url CONTAINS 'youtube.com' OR $url CONTAINS 'youtu.be').@count > 0`
    /// (a SUBQUERY over a single value treats it as a one-element collection).
    case webURLPredicate = "NSExtensionActivationWebURLPredicate"

    /// Whether Apple defines the key.
    public var isApple: Bool { self != .webURLPredicate }
}

/// An activation rule's dictionary form.
public struct ActivationDictionary: Sendable, Equatable {
    /// `NSExtensionActivationDictionaryVersion` (absent = 1).
    public var dictionaryVersion: Int?
    /// `NSExtensionActivationUsesStrictMatching`.
    public var usesStrictMatching: Bool?
    /// `NSExtensionActivationSupportsAttachmentsWithMaxCount`.
    public var attachmentsMaxCount: Int?
    /// `NSExtensionActivationSupportsAttachmentsWithMinCount`.
    public var attachmentsMinCount: Int?
    /// `NSExtensionActivationSupportsFileWithMaxCount`.
    public var fileMaxCount: Int?
    /// `NSExtensionActivationSupportsImageWithMaxCount`.
    public var imageMaxCount: Int?
    /// `NSExtensionActivationSupportsMovieWithMaxCount`.
    public var movieMaxCount: Int?
    /// `NSExtensionActivationSupportsText`.
    public var supportsText: Bool?
    /// `NSExtensionActivationSupportsWebURLWithMaxCount`.
    public var webURLMaxCount: Int?
    /// `NSExtensionActivationSupportsWebPageWithMaxCount`.
    public var webPageMaxCount: Int?
    /// `NSExtensionActivationWebURLPredicate` (sharebroker extension, see `ActivationKey.webURLPredicate`).
    public var webURLPredicate: PredicateFormat?
    /// Keys that are not activation rule keys (kept so validation can name them; they have no effect).
    public var unknownKeys: [String]

    /// Creates a dictionary rule.
    public init(
        dictionaryVersion: Int? = nil, usesStrictMatching: Bool? = nil, attachmentsMaxCount: Int? = nil,
        attachmentsMinCount: Int? = nil, fileMaxCount: Int? = nil, imageMaxCount: Int? = nil, movieMaxCount: Int? = nil,
        supportsText: Bool? = nil, webURLMaxCount: Int? = nil, webPageMaxCount: Int? = nil,
        webURLPredicate: PredicateFormat? = nil, unknownKeys: [String] = []
    ) {
        self.dictionaryVersion = dictionaryVersion
        self.usesStrictMatching = usesStrictMatching
        self.attachmentsMaxCount = attachmentsMaxCount
        self.attachmentsMinCount = attachmentsMinCount
        self.fileMaxCount = fileMaxCount
        self.imageMaxCount = imageMaxCount
        self.movieMaxCount = movieMaxCount
        self.supportsText = supportsText
        self.webURLMaxCount = webURLMaxCount
        self.webPageMaxCount = webPageMaxCount
        self.webURLPredicate = webURLPredicate
        self.unknownKeys = unknownKeys
    }

    /// Whether every item must be supported (strict) or one supported item is enough (fuzzy).
    ///
    /// Strict unless `NSExtensionActivationDictionaryVersion` is 2 or more and
    /// `NSExtensionActivationUsesStrictMatching` is not true. This is iOS's own rule: ExtensionFoundation's
    /// `_EXExtensionPredicateBuilder` sets `usesStrictMatching = strictMatchingSpecified || version < 2`
    /// (decompiled builder, public runtime-header dumps); Firefox's review of its switch to version 2 put it as
    /// "match this against any attachment", where "the v1 behavior was 'pass if this matches every attachment'"
    /// (github.com/mozilla-mobile/firefox-ios/pull/3203); the v1 behaviour is Tumblr's report that share
    /// extensions "only show up if they explicitly support all of the provided activity items" (rdar://18342403).
    public var strictMatching: Bool { usesStrictMatching == true || (dictionaryVersion ?? 1) < 2 }
}

/// An activation rule: the dictionary form or a predicate string.
public enum ActivationRule: Sendable, Equatable {
    /// Apple's `NSExtensionActivation...` keys.
    case dictionary(ActivationDictionary)
    /// A predicate string in NSPredicate format (`SUBQUERY(extensionItems, ...)`, `TRUEPREDICATE`, ...).
    case predicate(PredicateFormat)

    /// Reads a rule as a manifest carries it: a JSON object (dictionary form) or a string (predicate).
    public init(json: JSONValue) throws(ActivationRuleError) {
        switch json {
        case .string(let text):
            do throws(PredicateParseError) {
                self = .predicate(try PredicateFormat(parsing: text))
            } catch {
                throw ActivationRuleError(key: "", position: error.position, message: error.description)
            }
        case .object(let o):
            self = .dictionary(try ActivationRule.readDictionary(o))
        default:
            throw ActivationRuleError(
                key: "", message: "expected a dictionary or a predicate string, got \(json.typeName)")
        }
    }

    static func readDictionary(_ o: JSONObject) throws(ActivationRuleError) -> ActivationDictionary {
        var d = ActivationDictionary()
        for (k, v) in o {
            guard let key = ActivationKey(rawValue: k) else {
                d.unknownKeys.append(k)
                continue
            }
            switch key {
            case .dictionaryVersion: d.dictionaryVersion = try count(v, key)
            case .usesStrictMatching: d.usesStrictMatching = try flag(v, key)
            case .attachmentsMaxCount: d.attachmentsMaxCount = try count(v, key)
            case .attachmentsMinCount: d.attachmentsMinCount = try count(v, key)
            case .fileMaxCount: d.fileMaxCount = try count(v, key)
            case .imageMaxCount: d.imageMaxCount = try count(v, key)
            case .movieMaxCount: d.movieMaxCount = try count(v, key)
            case .supportsText: d.supportsText = try flag(v, key)
            case .webURLMaxCount: d.webURLMaxCount = try count(v, key)
            case .webPageMaxCount: d.webPageMaxCount = try count(v, key)
            case .webURLPredicate:
                guard case .string(let text) = v else {
                    throw ActivationRuleError(key: k, message: "expected a predicate string, got \(v.typeName)")
                }
                do throws(PredicateParseError) {
                    d.webURLPredicate = try PredicateFormat(parsing: text)
                } catch {
                    throw ActivationRuleError(key: k, position: error.position, message: error.description)
                }
            }
        }
        return d
    }

    /// A non-negative integer. Like iOS (which reads these with `intValue`), a Boolean reads as 0/1 and a
    /// string of digits as its number; validation notes both.
    static func count(_ v: JSONValue, _ key: ActivationKey) throws(ActivationRuleError) -> Int {
        switch v {
        case .number:
            guard let n = v.intValue else {
                throw ActivationRuleError(
                    key: key.rawValue,
                    message: "expected a whole number, got \(v.doubleValue.map { String($0) } ?? "a number")")
            }
            guard n >= 0 else {
                throw ActivationRuleError(key: key.rawValue, message: "must not be negative (got \(n))")
            }
            return n
        case .bool(let b): return b ? 1 : 0
        case .string(let s):
            guard let n = Int(Substring(s).utiTrimmingASCIIWhitespace()), n >= 0 else {
                throw ActivationRuleError(
                    key: key.rawValue, message: "expected a non-negative integer, got the string \"\(s)\"")
            }
            return n
        default:
            throw ActivationRuleError(key: key.rawValue, message: "expected a non-negative integer, got \(v.typeName)")
        }
    }

    /// A Boolean; numbers read as nonzero = true and the strings YES/NO/true/false/1/0 as plists spell them.
    static func flag(_ v: JSONValue, _ key: ActivationKey) throws(ActivationRuleError) -> Bool {
        switch v {
        case .bool(let b): return b
        case .number: return (v.doubleValue ?? 0) != 0
        case .string(let s):
            switch s.lowercased() {
            case "yes", "true", "1": return true
            case "no", "false", "0": return false
            default: break
            }
            throw ActivationRuleError(key: key.rawValue, message: "expected a Boolean, got the string \"\(s)\"")
        default:
            throw ActivationRuleError(key: key.rawValue, message: "expected a Boolean, got \(v.typeName)")
        }
    }
}

/// Why an activation rule could not be read: the key (dictionary form) and, for predicate syntax errors,
/// the position in the predicate string.
public struct ActivationRuleError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The dictionary key, or empty for the rule as a whole (a predicate string).
    public var key: String
    /// The position in the predicate string (Unicode scalars from 0), for syntax errors.
    public var position: Int?
    /// What is wrong, e.g. `expected ')', found end of predicate at position 42`.
    public var message: String

    /// Creates an error.
    public init(key: String, position: Int? = nil, message: String) {
        self.key = key
        self.position = position
        self.message = message
    }

    /// "key: message" or the message alone.
    public var description: String { key.isEmpty ? message : "\(key): \(message)" }
}
