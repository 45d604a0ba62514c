// Recursive-descent parser for predicate format strings: OR < AND < NOT < comparisons (with ANY/ALL/NONE and
// [cd] modifiers) over expressions (arithmetic, key paths, $variables, @count, SUBQUERY, {aggregates}, indexes).
// Errors name the position: "expected ')' at position 42".

struct PredicateParser {
    let source: String
    let tokens: [PredicateToken]
    var p = 0
    /// Nesting depth (parentheses, SUBQUERY, NOT, unary minus) and work done, so that a hostile manifest can
    /// neither exhaust the stack nor make the "(" retry below take exponential time.
    var depth = 0
    var steps = 0
    static let maxDepth = 128
    static let maxSteps = 200_000

    init(_ source: String) throws(PredicateParseError) {
        self.source = source
        var lexer = PredicateLexer(source)
        tokens = try lexer.tokenize()
    }

    var current: PredicateToken { tokens[p] }

    func error(_ message: String, at token: PredicateToken? = nil) -> PredicateParseError {
        PredicateParseError(position: (token ?? current).start, message: message, source: source)
    }

    func isKeyword(_ k: String) -> Bool { current.kind == .keyword(k) }
    func isOp(_ o: String) -> Bool { current.kind == .op(o) }
    func isPunct(_ c: Character) -> Bool { current.kind == .punct(c) }

    mutating func advance() { if p < tokens.count - 1 { p += 1 } }

    mutating func expect(_ c: Character, _ context: String = "") throws(PredicateParseError) {
        guard isPunct(c) else {
            throw error("expected '\(c)'\(context.isEmpty ? "" : " " + context), found \(current.display)")
        }
        advance()
    }

    mutating func parseWhole() throws(PredicateParseError) -> PredicateNode {
        if current.kind == .end { throw error("empty predicate") }
        let node = try parsePredicate()
        guard current.kind == .end else {
            if isPunct(")") { throw error("unbalanced ')': no '(' opens it") }
            throw error("expected AND, OR or the end of the predicate, found \(current.display)")
        }
        return node
    }

    // MARK: predicates

    mutating func enter() throws(PredicateParseError) {
        depth += 1
        steps += 1
        if depth > PredicateParser.maxDepth {
            throw error("the predicate is nested too deeply (more than \(PredicateParser.maxDepth) levels)")
        }
        if steps > PredicateParser.maxSteps { throw error("the predicate is too complex to parse") }
    }

    /// Results of `parsePredicate` by start token: the "(" retry may parse the same text twice, and nested
    /// retries would otherwise double the work at every level.
    var memo: [Int: Result<(PredicateNode, Int), PredicateParseError>] = [:]

    mutating func parsePredicate() throws(PredicateParseError) -> PredicateNode {
        let start = p
        if let known = memo[start] {
            switch known {
            case .success(let (node, end)):
                p = end
                return node
            case .failure(let e):
                throw e
            }
        }
        do throws(PredicateParseError) {
            try enter()
            defer { depth -= 1 }
            var parts = [try parseAnd()]
            while isKeyword("OR") || isOp("||") {
                advance()
                parts.append(try parseAnd())
            }
            let node = parts.count == 1 ? parts[0] : .or(parts)
            memo[start] = .success((node, p))
            return node
        } catch {
            memo[start] = .failure(error)
            throw error
        }
    }

    mutating func parseAnd() throws(PredicateParseError) -> PredicateNode {
        var parts = [try parseNot()]
        while isKeyword("AND") || isOp("&&") {
            advance()
            parts.append(try parseNot())
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    mutating func parseNot() throws(PredicateParseError) -> PredicateNode {
        if isKeyword("NOT") || isOp("!") {
            advance()
            try enter()
            defer { depth -= 1 }
            return .not(try parseNot())
        }
        return try parsePrimaryPredicate()
    }

    mutating func parsePrimaryPredicate() throws(PredicateParseError) -> PredicateNode {
        if isKeyword("TRUEPREDICATE") {
            advance()
            return .constant(true)
        }
        if isKeyword("FALSEPREDICATE") {
            advance()
            return .constant(false)
        }
        if isPunct("(") {
            // "(" opens either a parenthesized predicate or an expression such as "(a + b) > 3": try the
            // predicate first; keep it when what follows the ")" cannot continue an expression.
            let save = p
            advance()
            let predicateError: PredicateParseError
            do throws(PredicateParseError) {
                let inner = try parsePredicate()
                if isPunct(")") {
                    advance()
                    if !continuesExpression { return inner }
                    predicateError = error("expected AND, OR or ')' after a predicate, found \(current.display)")
                } else {
                    predicateError = error("expected ')', found \(current.display)")
                }
            } catch {
                predicateError = error
            }
            p = save
            do throws(PredicateParseError) {
                return try parseComparison()
            } catch {
                // Report whichever reading got further into the text.
                throw predicateError.position >= error.position ? predicateError : error
            }
        }
        return try parseComparison()
    }

    /// Whether the current token can continue an expression (so a parenthesized part was an expression).
    var continuesExpression: Bool {
        switch current.kind {
        case .op(let o): return ["==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "**"].contains(o)
        case .punct(let c): return c == "." || c == "["
        case .keyword(let k):
            return [
                "IN", "LIKE", "MATCHES", "CONTAINS", "BEGINSWITH", "ENDSWITH", "BETWEEN", "UTI-CONFORMS-TO",
                "UTI-EQUALS",
            ]
            .contains(k)
        default: return false
        }
    }

    mutating func parseComparison() throws(PredicateParseError) -> PredicateNode {
        var quantifier = PredicateQuantifier.direct
        if isKeyword("ANY") || isKeyword("SOME") {
            quantifier = .any
            advance()
        } else if isKeyword("ALL") {
            quantifier = .all
            advance()
        } else if isKeyword("NONE") {
            quantifier = .noneOf
            advance()
        }
        let lhs = try parseExpression()
        let opToken = current
        let op: PredicateOperator
        switch current.kind {
        case .op("=="): op = .equal
        case .op("!="): op = .notEqual
        case .op("<"): op = .less
        case .op("<="): op = .lessOrEqual
        case .op(">"): op = .greater
        case .op(">="): op = .greaterOrEqual
        case .keyword("BEGINSWITH"): op = .beginsWith
        case .keyword("ENDSWITH"): op = .endsWith
        case .keyword("CONTAINS"): op = .contains
        case .keyword("LIKE"): op = .like
        case .keyword("MATCHES"): op = .matches
        case .keyword("IN"): op = .in
        case .keyword("BETWEEN"): op = .between
        case .keyword("UTI-CONFORMS-TO"): op = .utiConformsTo
        case .keyword("UTI-EQUALS"): op = .utiEquals
        default:
            throw error(
                "expected a comparison operator (==, !=, <, <=, >, >=, BEGINSWITH, ENDSWITH, CONTAINS, LIKE, MATCHES, IN, "
                    + "BETWEEN, UTI-CONFORMS-TO, UTI-EQUALS), found \(current.display)")
        }
        advance()
        let options = try parseOptions()
        let rhs = try parseExpression()
        if op == .between, case .aggregate(let items) = rhs, items.count != 2 {
            throw error(
                "BETWEEN needs {lower, upper}, got \(items.count) value\(items.count == 1 ? "" : "s")", at: opToken)
        }
        return .comparison(PredicateComparison(quantifier, lhs, op, rhs, options: options))
    }

    /// `[c]`, `[d]`, `[cd]`, `[n]` right after an operator.
    mutating func parseOptions() throws(PredicateParseError) -> PredicateOptions {
        guard isPunct("["), p + 2 < tokens.count, case .identifier(let letters) = tokens[p + 1].kind,
            tokens[p + 2].kind == .punct("]")
        else { return [] }
        var options: PredicateOptions = []
        for c in letters.lowercased() {
            switch c {
            case "c": options.insert(.caseInsensitive)
            case "d": options.insert(.diacriticInsensitive)
            case "n": options.insert(.normalized)
            default:
                throw error("unknown comparison modifier '[\(letters)]' (use [c], [d], [cd] or [n])", at: tokens[p + 1])
            }
        }
        p += 3
        return options
    }

    // MARK: expressions

    mutating func parseExpression() throws(PredicateParseError) -> PredicateExpr { try parseBinary(1) }

    /// Precedence climbing over + - (1), * / (2), ** (3, right-associative).
    mutating func parseBinary(_ minPrecedence: Int) throws(PredicateParseError) -> PredicateExpr {
        var lhs = try parseUnary()
        while case .op(let o) = current.kind, let op = PredicateArithmetic(rawValue: o), op.precedence >= minPrecedence
        {
            advance()
            let rhs = try parseBinary(op == .power ? op.precedence : op.precedence + 1)
            lhs = .arithmetic(op, lhs, rhs)
        }
        return lhs
    }

    mutating func parseUnary() throws(PredicateParseError) -> PredicateExpr {
        try enter()
        defer { depth -= 1 }
        if isOp("-") {
            advance()
            let e = try parseUnary()
            if case .constant(.number(let n)) = e { return .constant(.number(-n)) }
            return .negate(e)
        }
        if isOp("+") {
            advance()
            return try parseUnary()
        }
        return try parsePostfix()
    }

    mutating func parsePostfix() throws(PredicateParseError) -> PredicateExpr {
        var e = try parsePrimaryExpression()
        while true {
            if isPunct(".") {
                advance()
                switch current.kind {
                case .identifier(let name):
                    e = .key(e, name)
                case .keyword:
                    e = .key(e, current.text)  // a reserved word after '.' is read as a key
                case .collectionOperator(let name):
                    advance()
                    // KVC's "items.@sum.price": the operator applies to the key path that follows it.
                    var path = e
                    while isPunct("."), p + 1 < tokens.count, case .identifier(let k) = tokens[p + 1].kind {
                        advance()
                        advance()
                        path = .key(path, k)
                    }
                    e = .collectionOperator(path, name)
                    continue
                default:
                    throw error("expected a key or @operator after '.', found \(current.display)")
                }
                advance()
            } else if isPunct("[") {
                advance()
                let index: PredicateIndex
                if isKeyword("FIRST") {
                    index = .first
                    advance()
                } else if isKeyword("LAST") {
                    index = .last
                    advance()
                } else if isKeyword("SIZE") {
                    index = .size
                    advance()
                } else {
                    index = .expression(try parseExpression())
                }
                try expect("]", "to close the index")
                e = .index(e, index)
            } else {
                return e
            }
        }
    }

    static let functions: [String: ClosedRange<Int>] = [
        "lowercase": 1...1, "uppercase": 1...1, "count": 1...1, "sum": 1...1, "min": 1...1, "max": 1...1,
        "average": 1...1, "abs": 1...1,
    ]

    mutating func parsePrimaryExpression() throws(PredicateParseError) -> PredicateExpr {
        let t = current
        switch t.kind {
        case .string(let v):
            advance()
            return .constant(.string(v))
        case .number(let v):
            advance()
            return .constant(.number(v))
        case .variable(let name):
            advance()
            return .variable(name)
        case .collectionOperator(let name):
            advance()
            return .collectionOperator(.evaluatedObject, name)
        case .identifier(let name):
            advance()
            if isPunct("(") {
                guard let arity = PredicateParser.functions[name.lowercased()] else {
                    throw error(
                        "unknown function '\(name)' (supported: lowercase, uppercase, count, sum, min, max, average, abs)",
                        at: t)
                }
                advance()
                var args: [PredicateExpr] = []
                if !isPunct(")") {
                    args.append(try parseExpression())
                    while isPunct(",") {
                        advance()
                        args.append(try parseExpression())
                    }
                }
                try expect(")", "to close the arguments of \(name)")
                guard arity.contains(args.count) else {
                    throw error("\(name) takes \(arity.lowerBound) argument\(arity.lowerBound == 1 ? "" : "s")", at: t)
                }
                return .function(name.lowercased(), args)
            }
            return .key(.evaluatedObject, name)
        case .punct("{"):
            advance()
            var items: [PredicateExpr] = []
            if !isPunct("}") {
                items.append(try parseExpression())
                while isPunct(",") {
                    advance()
                    items.append(try parseExpression())
                }
            }
            try expect("}", "to close the aggregate")
            return .aggregate(items)
        case .punct("("):
            advance()
            let e = try parseExpression()
            try expect(")")
            return e
        case .keyword(let k):
            switch k {
            case "TRUE", "YES":
                advance()
                return .constant(.bool(true))
            case "FALSE", "NO":
                advance()
                return .constant(.bool(false))
            case "NULL", "NIL":
                advance()
                return .constant(.null)
            case "SELF":
                advance()
                return .evaluatedObject
            case "SUBQUERY":
                return try parseSubquery()
            case "FUNCTION", "CAST", "FETCH", "ANYKEY":
                throw error("\(k) is not supported in activation rules", at: t)
            default:
                throw error(
                    "expected an expression, found the keyword \(k) (write #\(t.text) to use it as a key)", at: t)
            }
        case .end:
            throw error("expected an expression, found the end of the predicate")
        default:
            throw error("expected an expression, found \(t.display)")
        }
    }

    mutating func parseSubquery() throws(PredicateParseError) -> PredicateExpr {
        advance()  // SUBQUERY
        try expect("(", "after SUBQUERY")
        let collection = try parseExpression()
        try expect(",", "after the SUBQUERY collection")
        guard case .variable(let name) = current.kind else {
            throw error(
                "expected a variable such as $item as the second argument of SUBQUERY, found \(current.display)")
        }
        advance()
        try expect(",", "after the SUBQUERY variable")
        let predicate = try parsePredicate()
        try expect(")", "to close SUBQUERY")
        return .subquery(collection: collection, variable: name, predicate: predicate)
    }
}
