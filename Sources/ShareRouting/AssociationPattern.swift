// Apple's universal-link URL patterns: `*` (zero or more characters, crossing '/'), `?` (exactly one),
// `$(name)` substitution variables, optional case folding. Patterns compile once into a small NFA
// that runs in O(length × pattern size), so no pattern can make matching blow up.

/// A compiled universal-link pattern (one `/`, `?` or `#` value, one query-item value, or one legacy path).
///
/// Semantics (Apple, "applinks.Details.Components"): `*` matches zero or more characters, greedily, and
/// crosses `/` ("/buy/*" "matches any URL whose path starts with /buy/"); `?` matches exactly one
/// character, so `?*` means at least one. `$(name)` stands for any one of the variable's values
/// ("applinks.SubstitutionVariables"); values may contain `?` and `*` but no other variable.
/// "Character" here is a Swift `Character` (a grapheme), which matters only for decoded, non-ASCII text.
public struct AssociationPattern: Sendable, Equatable, CustomStringConvertible {
    enum CharClass: Sendable, Equatable {
        case alpha, upper, lower, alnum, digit, xdigit

        func contains(_ c: Character) -> Bool {
            guard let a = c.asciiValue else { return false }
            let upper = a >= 0x41 && a <= 0x5A
            let lower = a >= 0x61 && a <= 0x7A
            let digit = a >= 0x30 && a <= 0x39
            switch self {
            case .alpha: return upper || lower
            case .upper: return upper
            case .lower: return lower
            case .alnum: return upper || lower || digit
            case .digit: return digit
            case .xdigit: return digit || (a >= 0x41 && a <= 0x46) || (a >= 0x61 && a <= 0x66)
            }
        }
    }

    enum Op: Sendable, Equatable {
        case char(Character)
        case any
        case charClass(CharClass)
        /// One of a set of literal words (the ISO tables), with the word lengths that occur.
        case words(Set<String>, [Int])
        case split(Int, Int)
        case jump(Int)
        case match
    }

    /// The pattern as written in the document.
    public let source: String
    /// Whether matching folds case (`caseSensitive: false`).
    public let foldsCase: Bool
    let ops: [Op]
    /// How far one step moves ahead at most (1, or the longest word of a `.words` op).
    let reach: Int
    /// Fast paths: the pattern is exactly `*`, or has no wildcard or variable at all.
    let matchesEverything: Bool
    let literal: String?

    /// The source text.
    public var description: String { source }

    /// Equal when source and case folding are equal.
    public static func == (a: AssociationPattern, b: AssociationPattern) -> Bool {
        a.source == b.source && a.foldsCase == b.foldsCase
    }

    /// Why a pattern cannot be compiled (the caller adds the document key).
    struct CompileError: Error { var reason: String }

    /// Compiles `pattern`. `variables` are the document's custom substitution variables (they shadow
    /// the predefined ones of the same name); `substitution: false` treats `$` literally (legacy paths).
    init(
        _ pattern: String, foldCase: Bool, variables: [String: [String]], substitution: Bool = true
    ) throws(CompileError) {
        source = pattern
        foldsCase = foldCase
        var b = Builder(fold: foldCase)
        let chars = Array(pattern)
        var i = 0
        var hasSpecial = false
        while i < chars.count {
            let c = chars[i]
            if substitution, c == "$", i + 1 < chars.count, chars[i + 1] == "(" {
                guard let close = chars[(i + 2)...].firstIndex(of: ")") else {
                    throw CompileError(reason: "unterminated substitution variable '\(String(chars[i...]))' (expected '$(NAME)')")
                }
                let name = String(chars[(i + 2)..<close])
                if name.isEmpty { throw CompileError(reason: "empty substitution variable name '$()'") }
                if name.contains("$") || name.contains("(") {
                    throw CompileError(reason: "invalid substitution variable '$(\(name))' (names may not contain '$', '(' or ')')")
                }
                hasSpecial = true
                if let values = variables[name] {
                    try b.alternatives(values, name: name)
                } else if let builtin = AssociationPattern.predefined(name) {
                    b.predefined(builtin)
                } else {
                    let known = (variables.keys.sorted() + AssociationPattern.predefinedNames).map { "$(\($0))" }
                    throw CompileError(
                        reason: "unknown substitution variable '$(\(name))' (defined: \(known.joined(separator: ", ")))")
                }
                i = close + 1
                continue
            }
            if c == "*" || c == "?" { hasSpecial = true }
            b.literalOrWildcard(c)
            i += 1
        }
        b.emit(.match)
        guard b.ops.count <= AssociationPattern.maxStates else {
            throw CompileError(
                reason:
                    "too complex: it compiles to \(b.ops.count) states, over the limit of \(AssociationPattern.maxStates) (use fewer or shorter substitution values)"
            )
        }
        ops = b.ops
        var reach = 1
        for case .words(_, let lengths) in b.ops { reach = max(reach, lengths.max() ?? 1) }
        self.reach = reach
        matchesEverything = pattern == "*"
        literal = hasSpecial ? nil : (foldCase ? pattern.lowercased() : pattern)
    }

    /// The most states a compiled pattern may have: real patterns have tens (a substitution
    /// variable adds about its values' length in all, each time it is used).
    static let maxStates = 4096

    /// True when `text` matches the whole pattern.
    public func matches(_ text: String) -> Bool {
        var unlimited = Int.max
        return matches(text, budget: &unlimited)
    }

    /// `matches`, spending at most `budget` steps (one per pattern state visited at a position):
    /// false with `budget` below zero when it ran out before an answer. A document whose patterns
    /// are costly (long substitution lists, many `*`) and a huge URL could otherwise hold the
    /// broker's loop for seconds.
    func matches(_ text: String, budget: inout Int) -> Bool {
        if matchesEverything { return true }
        // Folding and splitting the text into characters cost a few steps' worth per byte before
        // any VM step: charged first, so a huge URL against many patterns that fail at once (or
        // one text too long to prepare within the budget) runs out too.
        budget -= 4 * text.utf8.count
        if budget < 0 { return false }
        let t = foldsCase ? text.lowercased() : text
        if let literal { return t == literal }
        let chars = Array(t)
        let n = chars.count
        // A Pike VM: the threads at each position, each pattern state at most once per position
        // (`mark`), so the work is O(length × pattern size) whatever the pattern. Threads only move
        // ahead, by at most `reach` characters (one, or a `$(lang)`-style word's length), so a ring
        // of reach + 1 queues holds them all: memory O(pattern size), nothing allocated per position.
        let ring = reach + 1
        var queues = [[Int]](repeating: [], count: ring)
        for q in queues.indices { queues[q].reserveCapacity(8) }
        queues[0].append(0)
        var pending = 1  // threads queued at positions after the current one
        var mark = [Int](repeating: -1, count: ops.count)
        var stack: [Int] = []
        var pos = 0
        while pos <= n {
            let slot = pos % ring
            if queues[slot].isEmpty {
                if pending == 0 { return false }
                pos += 1
                continue
            }
            swap(&stack, &queues[slot])
            pending -= stack.count
            budget -= stack.count + 1
            if budget < 0 { return false }
            while let pc = stack.popLast() {
                if mark[pc] == pos { continue }
                mark[pc] = pos
                switch ops[pc] {
                case .split(let a, let b):
                    budget -= 2
                    if budget < 0 { return false }
                    stack.append(b)
                    stack.append(a)
                case .jump(let a):
                    budget -= 1
                    if budget < 0 { return false }
                    stack.append(a)
                case .match: if pos == n { return true }
                case .char(let c):
                    if pos < n, chars[pos] == c {
                        queues[(pos + 1) % ring].append(pc + 1)
                        pending += 1
                    }
                case .any:
                    if pos < n {
                        queues[(pos + 1) % ring].append(pc + 1)
                        pending += 1
                    }
                case .charClass(let k):
                    if pos < n, k.contains(chars[pos]) {
                        queues[(pos + 1) % ring].append(pc + 1)
                        pending += 1
                    }
                case .words(let set, let lengths):
                    // (each length tried makes and hashes a string: about ten steps' worth)
                    budget -= 10 * lengths.count
                    if budget < 0 { return false }
                    for len in lengths where len > 0 && pos + len <= n && set.contains(String(chars[pos..<(pos + len)])) {
                        queues[(pos + len) % ring].append(pc + 1)
                        pending += 1
                    }
                }
            }
            pos += 1
        }
        return false
    }

    // MARK: - Predefined variables

    enum Predefined {
        case charClass(CharClass)
        case words(Set<String>, foldedSet: Set<String>, lengths: [Int])
    }

    /// The predefined variable names, in Apple's order.
    static let predefinedNames = ["alpha", "upper", "lower", "alnum", "digit", "xdigit", "region", "lang"]

    static let regionWords: Predefined = words(AssociationISOTables.regions)
    static let languageWords: Predefined = words(AssociationISOTables.languages)

    static func words(_ list: [String]) -> Predefined {
        let set = Set(list)
        return .words(set, foldedSet: Set(list.map { $0.lowercased() }), lengths: Array(Set(list.map(\.count))).sorted())
    }

    static func predefined(_ name: String) -> Predefined? {
        switch name {
        case "alpha": return .charClass(.alpha)
        case "upper": return .charClass(.upper)
        case "lower": return .charClass(.lower)
        case "alnum": return .charClass(.alnum)
        case "digit": return .charClass(.digit)
        case "xdigit": return .charClass(.xdigit)
        case "region": return regionWords
        case "lang": return languageWords
        default: return nil
        }
    }

    // MARK: - Building the program

    struct Builder {
        var ops: [Op] = []
        let fold: Bool

        init(fold: Bool) { self.fold = fold }

        @discardableResult
        mutating func emit(_ op: Op) -> Int {
            ops.append(op)
            return ops.count - 1
        }

        mutating func literalOrWildcard(_ c: Character) {
            switch c {
            case "*":
                // L: split(L+1, L+3); L+1: any; L+2: jump L; L+3: ...
                let l = ops.count
                emit(.split(l + 1, l + 3))
                emit(.any)
                emit(.jump(l))
            case "?":
                emit(.any)
            default:
                if fold {
                    let lower = String(c).lowercased()
                    for lc in lower { emit(.char(lc)) }
                } else {
                    emit(.char(c))
                }
            }
        }

        mutating func predefined(_ p: Predefined) {
            switch p {
            case .charClass(let k):
                // Under case folding the text is lowercased, so upper/lower/alpha all mean "a letter".
                if fold, k == .upper || k == .lower {
                    emit(.charClass(.alpha))
                } else {
                    emit(.charClass(k))
                }
            case .words(let set, let folded, let lengths):
                emit(.words(fold ? folded : set, lengths))
            }
        }

        /// `$(name)` for a custom variable: one of `values` (each may use `?` and `*`).
        mutating func alternatives(_ values: [String], name: String) throws(CompileError) {
            if values.isEmpty {
                // No value: the variable matches nothing. A split to nowhere is modelled by a char that never occurs.
                emit(.words([], []))
                return
            }
            var jumpsToEnd: [Int] = []
            for (k, value) in values.enumerated() {
                if value.contains("$(") {
                    throw CompileError(reason: "value '\(value)' of $(\(name)) uses another substitution variable")
                }
                let isLast = k == values.count - 1
                var splitAt: Int? = nil
                if !isLast { splitAt = emit(.split(0, 0)) }
                for c in value { literalOrWildcard(c) }
                if !isLast { jumpsToEnd.append(emit(.jump(0))) }
                if let s = splitAt { ops[s] = .split(s + 1, ops.count) }
            }
            let end = ops.count
            for j in jumpsToEnd { ops[j] = .jump(end) }
        }
    }
}

/// A path pattern with Apple's slash rules applied: the leading `/` is optional, a leading run of
/// slashes counts as one, trailing slashes are insignificant, and `X/*` also matches `X` itself.
///
/// Sources: Apple's "applinks.Details.Components" example `{"/": "abc", "?": "def"}` matching
/// `https://www.example.com/abc?def`; the slash rules are those the third-party conformance notes of
/// blazingly-aasa (docs/parity.md) record as checked against Apple's `swcutil`.
struct AssociationPathPattern: Sendable, Equatable {
    let primary: AssociationPattern
    let parent: AssociationPattern?

    init(_ pattern: String, foldCase: Bool, variables: [String: [String]], substitution: Bool = true)
        throws(AssociationPattern.CompileError)
    {
        var p = Substring(pattern)
        // A leading run of slashes counts as one.
        if p.hasPrefix("//") {
            while p.hasPrefix("//") { p = p.dropFirst() }
        }
        // The leading slash is optional when the pattern starts with a literal character.
        if let first = p.first, first != "/", first != "*", first != "?", !(substitution && p.hasPrefix("$(")) {
            p = "/" + p
        }
        // Trailing slashes are insignificant.
        while p.hasSuffix("/") { p = p.dropLast() }
        primary = try AssociationPattern(
            String(p), foldCase: foldCase, variables: variables, substitution: substitution)
        if p.hasSuffix("/*") {
            parent = try AssociationPattern(
                String(p.dropLast(2)), foldCase: foldCase, variables: variables, substitution: substitution)
        } else {
            parent = nil
        }
    }

    /// The URL path with its trailing slashes removed (`/` and the empty path both become empty).
    static func normalize(_ path: String) -> String {
        var p = Substring(path)
        while p.hasSuffix("/") { p = p.dropLast() }
        return String(p)
    }

    /// Matches an already normalized path (within `budget`, as `AssociationPattern.matches`).
    func matches(normalizedPath: String, budget: inout Int) -> Bool {
        if primary.matches(normalizedPath, budget: &budget) { return true }
        return budget >= 0 && (parent?.matches(normalizedPath, budget: &budget) ?? false)
    }
}
