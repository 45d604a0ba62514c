// The value model predicates are evaluated over: JSON-like values standing in for the Foundation objects
// NSPredicate sees (NSExtensionContext's extensionItems → attachments → registeredTypeIdentifiers).

import ShareProtocol

/// A value a predicate reads or computes: the key-value-coding world of NSPredicate, without Objective-C.
public indirect enum PredicateValue: Sendable, Equatable, CustomStringConvertible {
    /// `nil` / `NSNull`.
    case null
    /// A Boolean.
    case bool(Bool)
    /// A number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array (ordered collection).
    case array([PredicateValue])
    /// A dictionary-like object whose keys are read by key paths.
    case object([String: PredicateValue])

    /// Converts a JSON value (objects become key-value objects, numbers Doubles).
    public init(json: JSONValue) {
        switch json {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .number(let n): self = .number(Double(n) ?? 0)
        case .string(let s): self = .string(s)
        case .array(let a): self = .array(a.map(PredicateValue.init(json:)))
        case .object(let o):
            var d: [String: PredicateValue] = [:]
            for m in o { d[m.key] = PredicateValue(json: m.value) }
            self = .object(d)
        }
    }

    /// The elements of a collection; nil for non-collections.
    var elements: [PredicateValue]? {
        switch self {
        case .array(let a): return a
        default: return nil
        }
    }

    /// A short type name for messages.
    var typeName: String {
        switch self {
        case .null: return "nil"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// The value written the way a predicate literal would be (strings quoted, arrays in braces).
    public var description: String {
        switch self {
        case .null: return "nil"
        case .bool(let b): return b ? "YES" : "NO"
        case .number(let d): return PredicateValue.format(d)
        case .string(let s): return PredicateValue.quote(s)
        case .array(let a): return "{" + a.map(\.description).joined(separator: ", ") + "}"
        case .object(let o):
            return "{" + o.keys.sorted().map { "\($0): \(o[$0]!.description)" }.joined(separator: ", ") + "}"
        }
    }

    static func format(_ d: Double) -> String {
        if d.isInfinite { return d < 0 ? "-1e999" : "1e999" }  // reads back as infinity
        if d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
        return String(d)
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default: out.unicodeScalars.append(c)
            }
        }
        return out + "\""
    }
}
