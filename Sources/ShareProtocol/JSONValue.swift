// JSONValue: the one JSON model used on the wire, in manifests and in the store.
// Numbers keep their exact lexeme (large integers and floats survive a round trip byte for byte);
// objects keep member order so output reads the way it was built.

/// A JSON value. Objects keep insertion order; numbers keep the exact text they were parsed from.
public enum JSONValue: Sendable, Equatable {
    /// `null`
    case null
    /// `true` / `false`
    case bool(Bool)
    /// A number, as its JSON lexeme (e.g. `"42"`, `"-1.5e3"`, `"123456789012345678901234567890"`).
    case number(String)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, members in order. Keys are unique (the parser keeps the last duplicate).
    case object(JSONObject)

    /// An integer number.
    @inlinable public static func int(_ value: Int) -> JSONValue { .number(String(value)) }
    /// A floating-point number; non-finite values become `null` (JSON has no NaN/Infinity).
    public static func double(_ value: Double) -> JSONValue {
        guard value.isFinite else { return .null }
        if value == value.rounded(), abs(value) < 1e15 { return .number(String(Int64(value))) }
        return .number(String(value))
    }
}

/// An ordered JSON object: a list of unique keys with their values.
public struct JSONObject: Sendable, Equatable, ExpressibleByDictionaryLiteral, Sequence {
    /// The members, in order.
    public private(set) var members: [(key: String, value: JSONValue)]

    /// An empty object.
    public init() { members = [] }
    /// An object from members given in order (later duplicates replace earlier ones).
    public init(_ pairs: [(String, JSONValue)]) {
        members = []
        members.reserveCapacity(pairs.count)
        for (k, v) in pairs { self[k] = v }
    }
    /// `["a": .int(1)]` builds an object in literal order. A literal's keys must be unique (as with
    /// `Dictionary` literals): debug builds check it, release builds take the members as written,
    /// in linear time (replies are built from literals on every request).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        assert(Set(elements.map(\.0)).count == elements.count, "duplicate key in a JSONObject literal")
        members = elements.map { (key: $0.0, value: $0.1) }
    }
    /// An object from members whose keys are known to be unique (not checked): linear time.
    public init(uniqueMembers: [(key: String, value: JSONValue)]) { members = uniqueMembers }

    /// Number of members.
    public var count: Int { members.count }
    /// True when there are no members.
    public var isEmpty: Bool { members.isEmpty }
    /// The keys, in order.
    public var keys: [String] { members.map(\.key) }

    /// Gets or sets a member; setting `nil` removes it. Lookup is linear (protocol objects are small).
    public subscript(key: String) -> JSONValue? {
        get {
            // Read in place: iterating the array would copy (retain and release) every member.
            members.withUnsafeBufferPointer { ms in
                for i in ms.indices where ExactKey.same(ms[i].key, key) { return ms[i].value }
                return nil
            }
        }
        set {
            if let i = members.firstIndex(where: { ExactKey.same($0.key, key) }) {
                if let newValue { members[i].value = newValue } else { members.remove(at: i) }
            } else if let newValue {
                members.append((key, newValue))
            }
        }
    }

    /// Iterates members in order.
    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> { members.makeIterator() }

    /// Objects are equal when they have the same members, whatever their order.
    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        guard a.members.count == b.members.count else { return false }
        for m in a.members {
            guard let other = b[m.key], other == m.value else { return false }
        }
        return true
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByIntegerLiteral
{
    /// A string literal.
    public init(stringLiteral value: String) { self = .string(value) }
    /// A boolean literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `nil` is JSON `null`.
    public init(nilLiteral: ()) { self = .null }
    /// An array literal.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// A dictionary literal, kept in literal order.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        assert(Set(elements.map(\.0)).count == elements.count, "duplicate key in a JSONObject literal")
        self = .object(JSONObject(uniqueMembers: elements.map { (key: $0.0, value: $0.1) }))
    }
    /// An integer literal.
    public init(integerLiteral value: Int) { self = .int(value) }
}

extension JSONValue {
    /// The member `key` of an object, or nil (also for non-objects).
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
    /// The string, if this is a string.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The boolean, if this is a boolean.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    /// The array, if this is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    /// The object, if this is an object.
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }
    /// True for `null`.
    public var isNull: Bool { if case .null = self { return true } else { return false } }
    /// The number as an integer when it is one exactly: integer lexemes within `Int`'s range, and
    /// float forms (`3.0`, `3e2`) below 9e15 in magnitude, where a Double is still exact.
    public var intValue: Int? {
        guard case .number(let text) = self else { return nil }
        if let i = Int(text) { return i }
        if let d = Double(text), d == d.rounded(), abs(d) < 9.0e15 { return Int(d) }
        return nil
    }
    /// The number as a Double.
    public var doubleValue: Double? {
        guard case .number(let text) = self else { return nil }
        return Double(text)
    }
    /// A short name of the value's JSON type, for error messages ("string", "object", ...).
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}
