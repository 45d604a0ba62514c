// The syntax tree of NSPredicate format strings as Info.plist activation rules use them, and its printed
// form. Grammar and operators: Apple's "Predicate Format String Syntax" (Predicate Programming Guide,
// developer.apple.com/library/archive/documentation/Cocoa/Conceptual/Predicates/Articles/pSyntax.html).

/// A parsed predicate format string: `try PredicateFormat(parsing: "...")`, then `evaluate(with:)`.
public struct PredicateFormat: Sendable, Equatable, CustomStringConvertible {
    /// The text it was parsed from.
    public let source: String
    /// The syntax tree.
    public let root: PredicateNode

    /// Parses a predicate format string; errors name the position (Unicode scalars from 0).
    public init(parsing source: String) throws(PredicateParseError) {
        self.source = source
        var parser = try PredicateParser(source)
        root = try parser.parseWhole()
    }

    /// Wraps an already built tree (its printed form becomes the source).
    public init(root: PredicateNode) {
        self.root = root
        source = root.description
    }

    /// The canonical printed form (parses back to the same tree).
    public var description: String { root.description }

    /// Predicates are equal when their trees are.
    public static func == (a: PredicateFormat, b: PredicateFormat) -> Bool { a.root == b.root }
}

/// A predicate: something true or false of an object.
public indirect enum PredicateNode: Sendable, Equatable, CustomStringConvertible {
    /// `TRUEPREDICATE` / `FALSEPREDICATE`.
    case constant(Bool)
    /// `NOT p`, `!p`.
    case not(PredicateNode)
    /// `p AND q AND ...`, `&&`.
    case and([PredicateNode])
    /// `p OR q OR ...`, `||`.
    case or([PredicateNode])
    /// A comparison, e.g. `ANY $a.registeredTypeIdentifiers UTI-CONFORMS-TO "public.url"`.
    case comparison(PredicateComparison)

    /// The canonical printed form.
    public var description: String { print(0) }

    /// Precedence: OR 1, AND 2, NOT/primary 3.
    func print(_ context: Int) -> String {
        switch self {
        case .constant(let b): return b ? "TRUEPREDICATE" : "FALSEPREDICATE"
        case .not(let p): return "NOT " + p.print(3)
        case .and(let ps):
            let s = ps.map { $0.print(2) }.joined(separator: " AND ")
            return context > 2 ? "(\(s))" : s
        case .or(let ps):
            let s = ps.map { $0.print(1) }.joined(separator: " OR ")
            return context > 1 ? "(\(s))" : s
        case .comparison(let c):
            return c.description
        }
    }
}

/// `ANY`, `ALL`, `NONE` or nothing before a comparison's left side.
public enum PredicateQuantifier: String, Sendable, Equatable {
    /// No quantifier: compare the values themselves.
    case direct = ""
    /// `ANY` / `SOME`: some element of the left collection satisfies the comparison.
    case any = "ANY"
    /// `ALL`: every element does (true for an empty collection).
    case all = "ALL"
    /// `NONE`: no element does.
    case noneOf = "NONE"
}

/// The comparison operators.
public enum PredicateOperator: String, Sendable, Equatable, CaseIterable {
    /// `==`, `=`
    case equal = "=="
    /// `!=`, `<>`
    case notEqual = "!="
    /// `<`
    case less = "<"
    /// `<=`, `=<`
    case lessOrEqual = "<="
    /// `>`
    case greater = ">"
    /// `>=`, `=>`
    case greaterOrEqual = ">="
    /// `BEGINSWITH`
    case beginsWith = "BEGINSWITH"
    /// `ENDSWITH`
    case endsWith = "ENDSWITH"
    /// `CONTAINS` (substring, or element of a collection)
    case contains = "CONTAINS"
    /// `LIKE` (`*` and `?` wildcards, whole string)
    case like = "LIKE"
    /// `MATCHES` (ICU regular expression, whole string)
    case matches = "MATCHES"
    /// `IN` (element of a collection, or substring of a string)
    case `in` = "IN"
    /// `BETWEEN {lower, upper}` (inclusive)
    case between = "BETWEEN"
    /// `UTI-CONFORMS-TO` (type conformance through the UTI table)
    case utiConformsTo = "UTI-CONFORMS-TO"
    /// `UTI-EQUALS` (same type identifier, case-insensitively)
    case utiEquals = "UTI-EQUALS"
}

/// Comparison modifiers: `[c]` case-insensitive, `[d]` diacritic-insensitive, `[n]` normalized (no effect here).
public struct PredicateOptions: OptionSet, Sendable, Equatable, Hashable {
    /// The raw bits.
    public let rawValue: UInt8
    /// Creates options from bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// `[c]`
    public static let caseInsensitive = PredicateOptions(rawValue: 1)
    /// `[d]`
    public static let diacriticInsensitive = PredicateOptions(rawValue: 2)
    /// `[n]`
    public static let normalized = PredicateOptions(rawValue: 4)

    var text: String {
        var s = ""
        if contains(.caseInsensitive) { s += "c" }
        if contains(.diacriticInsensitive) { s += "d" }
        if contains(.normalized) { s += "n" }
        return s.isEmpty ? "" : "[\(s)]"
    }
}

/// `lhs OP[options] rhs`, optionally quantified.
public struct PredicateComparison: Sendable, Equatable, CustomStringConvertible {
    /// `ANY` / `ALL` / `NONE` or `.direct`.
    public var quantifier: PredicateQuantifier
    /// The left side.
    public var lhs: PredicateExpr
    /// The operator.
    public var op: PredicateOperator
    /// The modifiers.
    public var options: PredicateOptions
    /// The right side.
    public var rhs: PredicateExpr

    /// Creates a comparison.
    public init(
        _ quantifier: PredicateQuantifier = .direct, _ lhs: PredicateExpr, _ op: PredicateOperator,
        _ rhs: PredicateExpr, options: PredicateOptions = []
    ) {
        self.quantifier = quantifier
        self.lhs = lhs
        self.op = op
        self.options = options
        self.rhs = rhs
    }

    /// The printed form.
    public var description: String {
        let q = quantifier == .direct ? "" : quantifier.rawValue + " "
        return "\(q)\(lhs) \(op.rawValue)\(options.text) \(rhs)"
    }
}

/// Arithmetic operators in expressions.
public enum PredicateArithmetic: String, Sendable, Equatable {
    /// `+`
    case add = "+"
    /// `-`
    case subtract = "-"
    /// `*`
    case multiply = "*"
    /// `/`
    case divide = "/"
    /// `**`
    case power = "**"

    var precedence: Int {
        switch self {
        case .add, .subtract: return 1
        case .multiply, .divide: return 2
        case .power: return 3
        }
    }
}

/// An array index: `[0]`, `[FIRST]`, `[LAST]`, `[SIZE]`, or a key for a dictionary.
public indirect enum PredicateIndex: Sendable, Equatable {
    /// `FIRST`
    case first
    /// `LAST`
    case last
    /// `SIZE` (the count)
    case size
    /// An expression: a number for arrays, a string for objects.
    case expression(PredicateExpr)
}

/// An expression: a value computed from the evaluated object and variables.
public indirect enum PredicateExpr: Sendable, Equatable, CustomStringConvertible {
    /// A literal: string, number, `TRUE`/`YES`, `FALSE`/`NO`, `NIL`/`NULL`.
    case constant(PredicateValue)
    /// `{a, b, c}`
    case aggregate([PredicateExpr])
    /// `SELF`: the object being evaluated.
    case evaluatedObject
    /// `$name`
    case variable(String)
    /// `base.key`; a bare `key` is `.key(.evaluatedObject, "key")`.
    case key(PredicateExpr, String)
    /// `base.@count`, `@sum`, `@avg`, `@min`, `@max`.
    case collectionOperator(PredicateExpr, String)
    /// `base[index]`
    case index(PredicateExpr, PredicateIndex)
    /// `SUBQUERY(collection, $variable, predicate)`: the elements for which the predicate holds.
    case subquery(collection: PredicateExpr, variable: String, predicate: PredicateNode)
    /// `a + b`, `a * b`, ...
    case arithmetic(PredicateArithmetic, PredicateExpr, PredicateExpr)
    /// `-a`
    case negate(PredicateExpr)
    /// `name(args)`: `lowercase`, `uppercase`, `count`, `sum`, `min`, `max`, `average`, `abs`.
    case function(String, [PredicateExpr])

    /// The printed form.
    public var description: String { print(0) }

    static let reservedWords: Set<String> = [
        "AND", "OR", "IN", "NOT", "ALL", "ANY", "SOME", "NONE", "LIKE", "CASEINSENSITIVE", "CI", "MATCHES", "CONTAINS",
        "BEGINSWITH", "ENDSWITH", "BETWEEN", "NULL", "NIL", "SELF", "TRUE", "YES", "FALSE", "NO", "FIRST", "LAST",
        "SIZE",
        "ANYKEY", "SUBQUERY", "FETCH", "CAST", "TRUEPREDICATE", "FALSEPREDICATE", "FUNCTION", "UTI",
    ]

    /// A key as it must be written to read back as the same key: reserved words and keys that start
    /// with a digit are escaped with `#`.
    static func keyText(_ k: String) -> String {
        if reservedWords.contains(k.uppercased()) { return "#" + k }
        if let f = k.unicodeScalars.first, ("0"..."9").contains(f) { return "#" + k }
        return k
    }

    func print(_ context: Int) -> String {
        switch self {
        case .constant(let v): return v.description
        case .aggregate(let items): return "{" + items.map { $0.print(0) }.joined(separator: ", ") + "}"
        case .evaluatedObject: return "SELF"
        case .variable(let n): return "$" + n
        case .key(let base, let k):
            if case .evaluatedObject = base { return PredicateExpr.keyText(k) }
            // `a.@count.k` would read back as `@count` of `a.k`: keep the operator's result grouped.
            if case .collectionOperator = base { return "(" + base.print(0) + ")." + PredicateExpr.keyText(k) }
            return base.print(9) + "." + PredicateExpr.keyText(k)
        case .collectionOperator(let base, let op):
            if case .evaluatedObject = base { return "@" + op }
            return base.print(9) + ".@" + op
        case .index(let base, let i):
            let inner: String
            switch i {
            case .first: inner = "FIRST"
            case .last: inner = "LAST"
            case .size: inner = "SIZE"
            case .expression(let e): inner = e.print(0)
            }
            return base.print(9) + "[" + inner + "]"
        case .subquery(let c, let v, let p): return "SUBQUERY(\(c.print(0)), $\(v), \(p.print(0)))"
        case .arithmetic(let op, let a, let b):
            // Left-associative except **, which groups to the right.
            let (l, r) = op == .power ? (op.precedence + 1, op.precedence) : (op.precedence, op.precedence + 1)
            let s = a.print(l) + " " + op.rawValue + " " + b.print(r)
            return context > op.precedence ? "(\(s))" : s
        case .negate(let e):
            let s = "-" + e.print(4)
            return context > 4 ? "(\(s))" : s
        case .function(let n, let args): return n + "(" + args.map { $0.print(0) }.joined(separator: ", ") + ")"
        }
    }
}
