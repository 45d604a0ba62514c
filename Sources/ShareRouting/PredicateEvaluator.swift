// Evaluation of parsed predicates over PredicateValue objects, with NSPredicate's semantics for key paths
// (key-value coding maps keys over arrays), aggregates, SUBQUERY, @count and the string operators with [c]/[d].
// Foundation is used only for [d] folding and MATCHES (NSRegularExpression, ICU syntax like NSPredicate's).

import Foundation

/// Why a predicate could not be evaluated (NSPredicate would raise an exception here).
public struct PredicateEvaluationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, e.g. `variable $x is not defined`.
    public var message: String

    /// Creates an error.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}

extension PredicateFormat {
    /// Evaluates the predicate with `object` as `SELF`.
    ///
    /// - Parameters:
    ///   - object: the evaluated object; bare key paths read from it.
    ///   - variables: values for `$name` variables not bound by a SUBQUERY.
    ///   - table: the UTI table for `UTI-CONFORMS-TO`.
    public func evaluate(
        with object: PredicateValue, variables: [String: PredicateValue] = [:], table: UTITable = .system
    ) throws(PredicateEvaluationError) -> Bool {
        let evaluator = PredicateEvaluator(table: table, globals: variables)
        return try evaluator.test(root, object, [])
    }
}

struct PredicateEvaluator {
    typealias Scope = [(name: String, value: PredicateValue)]

    let table: UTITable
    let globals: [String: PredicateValue]

    // MARK: predicates

    func test(_ node: PredicateNode, _ object: PredicateValue, _ scope: Scope) throws(PredicateEvaluationError) -> Bool
    {
        switch node {
        case .constant(let b): return b
        case .not(let p): return !(try test(p, object, scope))
        case .and(let ps):
            for p in ps where !(try test(p, object, scope)) { return false }
            return true
        case .or(let ps):
            for p in ps where try test(p, object, scope) { return true }
            return false
        case .comparison(let c):
            let lhs = try value(c.lhs, object, scope)
            let rhs = try value(c.rhs, object, scope)
            switch c.quantifier {
            case .direct:
                return try compare(c.op, lhs, rhs, c.options)
            case .any, .all, .noneOf:
                let items: [PredicateValue]
                switch lhs {
                case .array(let a): items = a
                case .null: items = []
                case .object(let o): items = Array(o.values)
                default: items = [lhs]  // NSPredicate raises here; a single value is read as a one-element collection
                }
                switch c.quantifier {
                case .all:
                    for item in items where !(try compare(c.op, item, rhs, c.options)) { return false }
                    return true
                case .noneOf:
                    for item in items where try compare(c.op, item, rhs, c.options) { return false }
                    return true
                default:
                    for item in items where try compare(c.op, item, rhs, c.options) { return true }
                    return false
                }
            }
        }
    }

    // MARK: expressions

    func value(_ e: PredicateExpr, _ object: PredicateValue, _ scope: Scope) throws(PredicateEvaluationError)
        -> PredicateValue
    {
        switch e {
        case .constant(let v): return v
        case .aggregate(let items):
            var out: [PredicateValue] = []
            out.reserveCapacity(items.count)
            for i in items { out.append(try value(i, object, scope)) }
            return .array(out)
        case .evaluatedObject: return object
        case .variable(let name):
            for entry in scope.reversed() where entry.name == name { return entry.value }
            if let v = globals[name] { return v }
            throw PredicateEvaluationError("variable $\(name) is not defined")
        case .key(let base, let key):
            return try PredicateEvaluator.read(key, of: try value(base, object, scope))
        case .collectionOperator(let base, let op):
            return try PredicateEvaluator.collectionOperator(op, try value(base, object, scope))
        case .index(let base, let index):
            return try self.index(try value(base, object, scope), index, object, scope)
        case .subquery(let collectionExpr, let variable, let predicate):
            let collection = try value(collectionExpr, object, scope)
            let items: [PredicateValue]
            switch collection {
            case .array(let a): items = a
            case .null: items = []
            case .object(let o): items = Array(o.values)
            default: items = [collection]  // a single value is a one-element collection (see ActivationRule: WebURL predicate)
            }
            var out: [PredicateValue] = []
            var inner = scope
            inner.append((variable, .null))
            for item in items {
                inner[inner.count - 1].value = item
                if try test(predicate, object, inner) { out.append(item) }
            }
            return .array(out)
        case .arithmetic(let op, let a, let b):
            let x = try number(try value(a, object, scope), "the left side of \(op.rawValue)")
            let y = try number(try value(b, object, scope), "the right side of \(op.rawValue)")
            switch op {
            case .add: return .number(x + y)
            case .subtract: return .number(x - y)
            case .multiply: return .number(x * y)
            case .divide:
                guard y != 0 else { throw PredicateEvaluationError("division by zero") }
                return .number(x / y)
            case .power: return .number(pow(x, y))
            }
        case .negate(let a):
            return .number(-(try number(try value(a, object, scope), "the operand of unary -")))
        case .function(let name, let args):
            let v = try value(args[0], object, scope)
            switch name {
            case "lowercase":
                guard case .string(let s) = v else {
                    throw PredicateEvaluationError("lowercase() needs a string, got \(v.typeName)")
                }
                return .string(s.lowercased())
            case "uppercase":
                guard case .string(let s) = v else {
                    throw PredicateEvaluationError("uppercase() needs a string, got \(v.typeName)")
                }
                return .string(s.uppercased())
            case "count": return try PredicateEvaluator.collectionOperator("count", v)
            case "sum": return try PredicateEvaluator.collectionOperator("sum", v)
            case "min": return try PredicateEvaluator.collectionOperator("min", v)
            case "max": return try PredicateEvaluator.collectionOperator("max", v)
            case "average": return try PredicateEvaluator.collectionOperator("avg", v)
            case "abs": return .number(abs(try number(v, "abs()")))
            default: throw PredicateEvaluationError("unknown function \(name)")
            }
        }
    }

    func number(_ v: PredicateValue, _ what: String) throws(PredicateEvaluationError) -> Double {
        switch v {
        case .number(let d): return d
        case .bool(let b): return b ? 1 : 0
        default: throw PredicateEvaluationError("\(what) must be a number, got \(v.typeName)")
        }
    }

    /// Key-value coding: an object's member (nil when missing); over an array, the array of each element's value.
    static func read(_ key: String, of v: PredicateValue) throws(PredicateEvaluationError) -> PredicateValue {
        switch v {
        case .object(let o): return o[key] ?? .null
        case .array(let a):
            var out: [PredicateValue] = []
            out.reserveCapacity(a.count)
            for item in a { out.append(try read(key, of: item)) }
            return .array(out)
        case .null: return .null
        case .string(let s) where key == "length": return .number(Double(s.utf16.count))
        default:
            throw PredicateEvaluationError("cannot read key '\(key)' of a \(v.typeName) (\(v))")
        }
    }

    static func collectionOperator(_ op: String, _ v: PredicateValue) throws(PredicateEvaluationError) -> PredicateValue
    {
        let items: [PredicateValue]
        switch v {
        case .array(let a): items = a
        case .object(let o): items = Array(o.values)
        case .null: items = []
        default: throw PredicateEvaluationError("@\(op) needs a collection, got a \(v.typeName) (\(v))")
        }
        switch op.lowercased() {
        case "count": return .number(Double(items.count))
        case "sum", "avg", "average":
            var total = 0.0
            for item in items {
                switch item {
                case .number(let d): total += d
                case .bool(let b): total += b ? 1 : 0
                case .null: continue
                default: throw PredicateEvaluationError("@\(op) needs numbers, got a \(item.typeName)")
                }
            }
            if op.lowercased() == "sum" { return .number(total) }
            return items.isEmpty ? .null : .number(total / Double(items.count))
        case "min", "max":
            var best: PredicateValue = .null
            for item in items where item != .null {
                if best == .null {
                    best = item
                    continue
                }
                guard let order = PredicateEvaluator.order(item, best, []) else {
                    throw PredicateEvaluationError("@\(op) cannot compare a \(item.typeName) with a \(best.typeName)")
                }
                if (op.lowercased() == "min" && order < 0) || (op.lowercased() == "max" && order > 0) { best = item }
            }
            return best
        default:
            throw PredicateEvaluationError(
                "unsupported collection operator @\(op) (supported: @count, @sum, @avg, @min, @max)")
        }
    }

    func index(
        _ base: PredicateValue, _ index: PredicateIndex, _ object: PredicateValue, _ scope: Scope
    ) throws(PredicateEvaluationError) -> PredicateValue {
        switch base {
        case .array(let a):
            switch index {
            case .first: return a.first ?? .null
            case .last: return a.last ?? .null
            case .size: return .number(Double(a.count))
            case .expression(let e):
                let i = try number(try value(e, object, scope), "an array index")
                guard i == i.rounded(), i >= 0, i < Double(a.count) else {
                    throw PredicateEvaluationError(
                        "index \(PredicateValue.format(i)) is out of range for \(a.count) element\(a.count == 1 ? "" : "s")"
                    )
                }
                return a[Int(i)]
            }
        case .object(let o):
            if case .size = index { return .number(Double(o.count)) }
            guard case .expression(let e) = index, case .string(let k) = try value(e, object, scope) else {
                throw PredicateEvaluationError("an object is indexed by a key string")
            }
            return o[k] ?? .null
        case .null: return .null
        default: throw PredicateEvaluationError("cannot index a \(base.typeName)")
        }
    }

    // MARK: comparisons

    func compare(
        _ op: PredicateOperator, _ l: PredicateValue, _ r: PredicateValue, _ options: PredicateOptions
    ) throws(PredicateEvaluationError) -> Bool {
        switch op {
        case .equal: return PredicateEvaluator.equal(l, r, options)
        case .notEqual: return !PredicateEvaluator.equal(l, r, options)
        case .less: return PredicateEvaluator.order(l, r, options).map { $0 < 0 } ?? false
        case .lessOrEqual: return PredicateEvaluator.order(l, r, options).map { $0 <= 0 } ?? false
        case .greater: return PredicateEvaluator.order(l, r, options).map { $0 > 0 } ?? false
        case .greaterOrEqual: return PredicateEvaluator.order(l, r, options).map { $0 >= 0 } ?? false
        case .beginsWith, .endsWith:
            guard case .string(let a) = l, case .string(let b) = r else { return false }
            let (x, y) = (PredicateEvaluator.fold(a, options), PredicateEvaluator.fold(b, options))
            return op == .beginsWith ? x.hasPrefix(y) : x.hasSuffix(y)
        case .contains:
            switch (l, r) {
            case (.string(let a), .string(let b)):
                let y = PredicateEvaluator.fold(b, options)
                return y.isEmpty || PredicateEvaluator.fold(a, options).contains(y)
            case (.array(let a), _): return a.contains { PredicateEvaluator.equal($0, r, options) }
            case (.object(let o), _): return o.values.contains { PredicateEvaluator.equal($0, r, options) }
            default: return false
            }
        case .in:
            switch r {
            case .array(let a): return a.contains { PredicateEvaluator.equal(l, $0, options) }
            case .object(let o): return o.values.contains { PredicateEvaluator.equal(l, $0, options) }
            case .string(let b):
                guard case .string(let a) = l else { return false }
                let x = PredicateEvaluator.fold(a, options)
                return x.isEmpty || PredicateEvaluator.fold(b, options).contains(x)
            default: return false
            }
        case .between:
            guard case .array(let bounds) = r, bounds.count == 2 else {
                throw PredicateEvaluationError("BETWEEN needs {lower, upper}, got \(r)")
            }
            guard let lo = PredicateEvaluator.order(l, bounds[0], options),
                let hi = PredicateEvaluator.order(l, bounds[1], options)
            else { return false }
            return lo >= 0 && hi <= 0
        case .like:
            guard case .string(let a) = l, case .string(let b) = r else { return false }
            return PredicateEvaluator.like(PredicateEvaluator.fold(a, options), PredicateEvaluator.fold(b, options))
        case .matches:
            guard case .string(let a) = l, case .string(let b) = r else { return false }
            return try PredicateEvaluator.matches(a, pattern: b, options)
        case .utiConformsTo:
            guard case .string(let a) = l else { return false }
            switch r {
            case .string(let b): return table.conforms(a, to: b)
            case .array(let bs):
                return bs.contains {
                    if case .string(let b) = $0 { return table.conforms(a, to: b) } else { return false }
                }
            default: return false
            }
        case .utiEquals:
            guard case .string(let a) = l else { return false }
            switch r {
            case .string(let b): return UTITable.key(a) == UTITable.key(b)
            case .array(let bs):
                return bs.contains {
                    if case .string(let b) = $0 { return UTITable.key(a) == UTITable.key(b) } else { return false }
                }
            default: return false
            }
        }
    }

    static func fold(_ s: String, _ options: PredicateOptions) -> String {
        var t = s
        if options.contains(.diacriticInsensitive) { t = t.folding(options: [.diacriticInsensitive], locale: nil) }
        if options.contains(.caseInsensitive) { t = t.lowercased() }
        return t
    }

    static func equal(_ l: PredicateValue, _ r: PredicateValue, _ options: PredicateOptions) -> Bool {
        switch (l, r) {
        case (.string(let a), .string(let b)):
            return options.isEmpty ? a == b : fold(a, options) == fold(b, options)
        case (.number(let a), .number(let b)): return a == b
        case (.bool(let a), .bool(let b)): return a == b
        case (.bool(let a), .number(let b)), (.number(let b), .bool(let a)): return (a ? 1.0 : 0.0) == b
        case (.null, .null): return true
        case (.array(let a), .array(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { equal($0, $1, options) }
        case (.object(let a), .object(let b)):
            return a.count == b.count && a.allSatisfy { k, v in b[k].map { equal(v, $0, options) } ?? false }
        default: return false
        }
    }

    /// -1, 0, 1 for comparable values (numbers, Booleans as numbers, strings); nil otherwise.
    static func order(_ l: PredicateValue, _ r: PredicateValue, _ options: PredicateOptions) -> Int? {
        func num(_ v: PredicateValue) -> Double? {
            switch v {
            case .number(let d): return d
            case .bool(let b): return b ? 1 : 0
            default: return nil
            }
        }
        if let a = num(l), let b = num(r) { return a < b ? -1 : a > b ? 1 : 0 }
        if case .string(let a) = l, case .string(let b) = r {
            let (x, y) = (fold(a, options), fold(b, options))
            return x < y ? -1 : x > y ? 1 : 0
        }
        return nil
    }

    /// LIKE: `*` matches any run of characters, `?` one character, over the whole string; `\*` and `\?` are literal.
    static func like(_ text: String, _ pattern: String) -> Bool {
        enum Piece: Equatable {
            case char(Character)
            case one
            case many
        }
        var pieces: [Piece] = []
        var escaped = false
        for c in pattern {
            if escaped {
                pieces.append(.char(c))
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if c == "*" {
                if pieces.last != .many { pieces.append(.many) }
            } else if c == "?" {
                pieces.append(.one)
            } else {
                pieces.append(.char(c))
            }
        }
        if escaped { pieces.append(.char("\\")) }
        let t = Array(text)
        var ti = 0
        var pi = 0
        var starP = -1
        var starT = 0
        while ti < t.count {
            if pi < pieces.count, pieces[pi] == .one || pieces[pi] == .char(t[ti]) {
                ti += 1
                pi += 1
            } else if pi < pieces.count, pieces[pi] == .many {
                starP = pi
                starT = ti
                pi += 1
            } else if starP >= 0 {
                pi = starP + 1
                starT += 1
                ti = starT
            } else {
                return false
            }
        }
        while pi < pieces.count, pieces[pi] == .many { pi += 1 }
        return pi == pieces.count
    }

    /// MATCHES: the whole string matches the ICU regular expression; `[c]` ignores case, `[d]` folds diacritics of the text.
    static func matches(_ text: String, pattern: String, _ options: PredicateOptions) throws(PredicateEvaluationError)
        -> Bool
    {
        let regex: NSRegularExpression
        do {
            regex = try NSRegularExpression(
                pattern: "\\A(?:" + pattern + ")\\z",
                options: options.contains(.caseInsensitive) ? [.caseInsensitive] : [])
        } catch {
            throw PredicateEvaluationError("invalid regular expression for MATCHES: \(PredicateValue.quote(pattern))")
        }
        let subject =
            options.contains(.diacriticInsensitive) ? text.folding(options: [.diacriticInsensitive], locale: nil) : text
        let range = NSRange(subject.startIndex..<subject.endIndex, in: subject)
        return regex.firstMatch(in: subject, options: [], range: range) != nil
    }
}
