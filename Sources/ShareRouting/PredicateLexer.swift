// Tokenizer for predicate format strings: keywords (case-insensitive, `#` escapes one), `$variables`,
// `@collection` operators, quoted strings with escapes, numbers (decimal, 0x, 0o, 0b) and operators.
// Positions are offsets in Unicode scalars from 0 ("Parser Basics", Predicate Format String Syntax).

/// A syntax error in a predicate format string.
public struct PredicateParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Offset in Unicode scalars from the start of the string (0-based).
    public var position: Int
    /// What was expected or found, e.g. `expected ')'`.
    public var message: String
    /// 1-based line of `position`.
    public var line: Int
    /// 1-based column of `position`.
    public var column: Int

    /// Creates an error; line and column are computed from `source`.
    public init(position: Int, message: String, source: String) {
        self.position = position
        self.message = message
        var line = 1
        var column = 1
        var i = 0
        for c in source.unicodeScalars {
            if i >= position { break }
            if c == "\n" {
                line += 1
                column = 1
            } else {
                column += 1
            }
            i += 1
        }
        self.line = line
        self.column = column
    }

    /// `expected ')' at position 42`, with `(line L, column C)` added for multi-line predicates.
    public var description: String {
        line > 1
            ? "\(message) at position \(position) (line \(line), column \(column))"
            : "\(message) at position \(position)"
    }
}

struct PredicateToken: Equatable {
    enum Kind: Equatable {
        case identifier(String)
        case keyword(String)
        case variable(String)
        case string(String)
        case number(Double)
        case collectionOperator(String)
        case punct(Character)
        case op(String)
        case end
    }

    var kind: Kind
    var start: Int
    var end: Int
    var text: String

    /// How the token reads in an error message.
    var display: String {
        switch kind {
        case .end: return "end of predicate"
        case .string: return "string \(text)"
        default: return "'\(text)'"
        }
    }
}

struct PredicateLexer {
    static let keywords: Set<String> = [
        "AND", "OR", "NOT", "IN", "ALL", "ANY", "SOME", "NONE", "LIKE", "MATCHES", "CONTAINS", "BEGINSWITH", "ENDSWITH",
        "BETWEEN", "NULL", "NIL", "SELF", "TRUE", "YES", "FALSE", "NO", "FIRST", "LAST", "SIZE", "SUBQUERY",
        "TRUEPREDICATE", "FALSEPREDICATE", "FUNCTION", "CAST", "ANYKEY", "FETCH", "CASEINSENSITIVE", "CI",
    ]

    let source: String
    let s: [Unicode.Scalar]
    var i = 0

    init(_ source: String) {
        self.source = source
        s = Array(source.unicodeScalars)
    }

    func error(_ position: Int, _ message: String) -> PredicateParseError {
        PredicateParseError(position: position, message: message, source: source)
    }

    static func isIdentStart(_ c: Unicode.Scalar) -> Bool { c == "_" || c.properties.isAlphabetic }
    static func isIdentPart(_ c: Unicode.Scalar) -> Bool {
        c == "_" || c.properties.isAlphabetic || (c >= "0" && c <= "9")
    }

    func text(_ a: Int, _ b: Int) -> String {
        var out = ""
        out.unicodeScalars.append(contentsOf: s[a..<b])
        return out
    }

    /// Whether the text at `at` spells `word` (ASCII, case-insensitive).
    func spells(_ word: String, at: Int) -> Bool {
        var k = at
        for w in word.unicodeScalars {
            guard k < s.count else { return false }
            let c = s[k]
            let lower = (c >= "A" && c <= "Z") ? Unicode.Scalar(c.value + 32)! : c
            if lower != w { return false }
            k += 1
        }
        return true
    }

    mutating func tokenize() throws(PredicateParseError) -> [PredicateToken] {
        var out: [PredicateToken] = []
        while true {
            let t = try next()
            out.append(t)
            if t.kind == .end { return out }
        }
    }

    mutating func next() throws(PredicateParseError) -> PredicateToken {
        while i < s.count, s[i].properties.isWhitespace { i += 1 }
        let start = i
        guard i < s.count else { return PredicateToken(kind: .end, start: i, end: i, text: "") }
        let c = s[i]
        func tok(_ k: PredicateToken.Kind, _ len: Int) -> PredicateToken {
            i = start + len
            return PredicateToken(kind: k, start: start, end: i, text: text(start, i))
        }
        func peek(_ k: Int) -> Unicode.Scalar? { start + k < s.count ? s[start + k] : nil }

        switch c {
        case "(", ")", "{", "}", "[", "]", ",": return tok(.punct(Character(c)), 1)
        case ".":
            if let d = peek(1), d >= "0" && d <= "9" { return try number() }
            return tok(.punct("."), 1)
        case "=":
            if peek(1) == "=" { return tok(.op("=="), 2) }
            if peek(1) == ">" { return tok(.op(">="), 2) }
            if peek(1) == "<" { return tok(.op("<="), 2) }
            return tok(.op("=="), 1)
        case "!":
            if peek(1) == "=" { return tok(.op("!="), 2) }
            return tok(.op("!"), 1)
        case "<":
            if peek(1) == "=" { return tok(.op("<="), 2) }
            if peek(1) == ">" { return tok(.op("!="), 2) }
            return tok(.op("<"), 1)
        case ">":
            if peek(1) == "=" { return tok(.op(">="), 2) }
            return tok(.op(">"), 1)
        case "&":
            if peek(1) == "&" { return tok(.op("&&"), 2) }
            throw error(start, "'&' is not an operator (did you mean '&&'?)")
        case "|":
            if peek(1) == "|" { return tok(.op("||"), 2) }
            throw error(start, "'|' is not an operator (did you mean '||'?)")
        case "+", "-", "/": return tok(.op(String(c)), 1)
        case "*":
            if peek(1) == "*" { return tok(.op("**"), 2) }
            return tok(.op("*"), 1)
        case "\"", "'": return try string(quote: c)
        case "$":
            i += 1
            let nameStart = i
            while i < s.count, PredicateLexer.isIdentPart(s[i]) { i += 1 }
            guard i > nameStart else { throw error(start, "expected a variable name after '$'") }
            return PredicateToken(kind: .variable(text(nameStart, i)), start: start, end: i, text: text(start, i))
        case "@":
            i += 1
            let nameStart = i
            while i < s.count, PredicateLexer.isIdentPart(s[i]) { i += 1 }
            guard i > nameStart else { throw error(start, "expected a collection operator such as @count after '@'") }
            return PredicateToken(
                kind: .collectionOperator(text(nameStart, i)), start: start, end: i, text: text(start, i))
        case "#":
            i += 1
            let nameStart = i
            while i < s.count, PredicateLexer.isIdentPart(s[i]) { i += 1 }
            guard i > nameStart else { throw error(start, "expected a key name after '#'") }
            return PredicateToken(kind: .identifier(text(nameStart, i)), start: start, end: i, text: text(start, i))
        case "%":
            throw error(start, "format specifiers such as %@ and %K have no arguments in an Info.plist predicate")
        case "?":
            throw error(start, "'?' is not a valid predicate token")
        default:
            if c >= "0" && c <= "9" { return try number() }
            if PredicateLexer.isIdentStart(c) {
                // UTI-CONFORMS-TO and UTI-EQUALS are the only keywords with hyphens.
                if spells("uti-conforms-to", at: start),
                    !(start + 15 < s.count && PredicateLexer.isIdentPart(s[start + 15]))
                {
                    return tok(.keyword("UTI-CONFORMS-TO"), 15)
                }
                if spells("uti-equals", at: start), !(start + 10 < s.count && PredicateLexer.isIdentPart(s[start + 10]))
                {
                    return tok(.keyword("UTI-EQUALS"), 10)
                }
                i += 1
                while i < s.count, PredicateLexer.isIdentPart(s[i]) { i += 1 }
                let word = text(start, i)
                let upper = word.uppercased()
                if PredicateLexer.keywords.contains(upper) {
                    return PredicateToken(kind: .keyword(upper), start: start, end: i, text: word)
                }
                return PredicateToken(kind: .identifier(word), start: start, end: i, text: word)
            }
            throw error(start, "unexpected character '\(c.escaped(asASCII: false))'")
        }
    }

    mutating func number() throws(PredicateParseError) -> PredicateToken {
        let start = i
        func digits(_ ok: (Unicode.Scalar) -> Bool) {
            while i < s.count, ok(s[i]) || s[i] == "_" { i += 1 }
        }
        if s[i] == "0", i + 1 < s.count, "xXoObB".unicodeScalars.contains(s[i + 1]) {
            let radixChar = s[i + 1]
            let radix = (radixChar == "x" || radixChar == "X") ? 16 : (radixChar == "o" || radixChar == "O") ? 8 : 2
            i += 2
            let bodyStart = i
            digits { c in
                switch radix {
                case 16: return (c >= "0" && c <= "9") || (c >= "a" && c <= "f") || (c >= "A" && c <= "F")
                case 8: return c >= "0" && c <= "7"
                default: return c == "0" || c == "1"
                }
            }
            let body = text(bodyStart, i).replacingUnderscores()
            guard !body.isEmpty, let v = UInt64(body, radix: radix) else {
                throw error(start, "malformed number '\(text(start, i))'")
            }
            return PredicateToken(kind: .number(Double(v)), start: start, end: i, text: text(start, i))
        }
        digits { $0 >= "0" && $0 <= "9" }
        if i < s.count, s[i] == ".", i + 1 < s.count, s[i + 1] >= "0" && s[i + 1] <= "9" {
            i += 1
            digits { $0 >= "0" && $0 <= "9" }
        }
        if i < s.count, s[i] == "e" || s[i] == "E" {
            var j = i + 1
            if j < s.count, s[j] == "+" || s[j] == "-" { j += 1 }
            if j < s.count, s[j] >= "0" && s[j] <= "9" {
                i = j
                digits { $0 >= "0" && $0 <= "9" }
            }
        }
        if i < s.count, PredicateLexer.isIdentStart(s[i]) {
            throw error(i, "unexpected '\(s[i])' after the number \(text(start, i))")
        }
        let lexeme = text(start, i).replacingUnderscores()
        guard let v = Double(lexeme) else { throw error(start, "malformed number '\(text(start, i))'") }
        return PredicateToken(kind: .number(v), start: start, end: i, text: text(start, i))
    }

    mutating func string(quote: Unicode.Scalar) throws(PredicateParseError) -> PredicateToken {
        let start = i
        i += 1
        var value = ""
        func hex(_ count: Int) throws(PredicateParseError) -> UInt32 {
            var v: UInt32 = 0
            for _ in 0..<count {
                guard i < s.count, let d = Int(String(s[i]), radix: 16) else {
                    throw error(i, "expected \(count) hexadecimal digits in an escape")
                }
                v = v * 16 + UInt32(d)
                i += 1
            }
            return v
        }
        while true {
            guard i < s.count else {
                throw error(start, "unterminated string (no closing \(quote == "\"" ? "\"" : "'"))")
            }
            let c = s[i]
            if c == quote {
                i += 1
                return PredicateToken(kind: .string(value), start: start, end: i, text: text(start, i))
            }
            if c == "\\" {
                let escStart = i
                i += 1
                guard i < s.count else { throw error(escStart, "unterminated escape at the end of the string") }
                let e = s[i]
                i += 1
                switch e {
                case "n": value += "\n"
                case "t": value += "\t"
                case "r": value += "\r"
                case "a": value += "\u{07}"
                case "b": value += "\u{08}"
                case "f": value += "\u{0C}"
                case "v": value += "\u{0B}"
                case "x":
                    value.unicodeScalars.append(Unicode.Scalar(try hex(2))!)
                case "u":
                    let v = try hex(4)
                    guard let sc = Unicode.Scalar(v) else {
                        throw error(escStart, "\\u\(String(v, radix: 16)) is not a character")
                    }
                    value.unicodeScalars.append(sc)
                case "0"..."7":
                    var v = e.value - 48
                    var n = 1
                    while n < 3, i < s.count, s[i] >= "0" && s[i] <= "7" {
                        v = v * 8 + (s[i].value - 48)
                        i += 1
                        n += 1
                    }
                    guard let sc = Unicode.Scalar(v) else { throw error(escStart, "bad octal escape") }
                    value.unicodeScalars.append(sc)
                case "\"", "'", "\\":
                    value.unicodeScalars.append(e)
                default:
                    // Any other escape is kept as written, so `\.` reaches MATCHES and `\*` reaches LIKE intact.
                    value += "\\"
                    value.unicodeScalars.append(e)
                }
                continue
            }
            value.unicodeScalars.append(c)
            i += 1
        }
    }
}

extension String {
    fileprivate func replacingUnderscores() -> String {
        String(unicodeScalars.filter { $0 != "_" }.map(Character.init))
    }
}
