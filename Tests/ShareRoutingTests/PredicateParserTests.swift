// Table-driven tests for the predicate format parser: canonical printed forms (which parse back to the same
// tree), operator spellings from the Predicate Format String Syntax, and error messages with positions.

import ShareRouting
import XCTest

final class PredicateParserTests: XCTestCase {
    func testCanonicalForms() throws {
        let cases: [(String, String, UInt)] = [
            ("TRUEPREDICATE", "TRUEPREDICATE", #line),
            ("falsepredicate", "FALSEPREDICATE", #line),
            ("a == 1", "a == 1", #line),
            ("a = 1", "a == 1", #line),
            ("a != 1", "a != 1", #line),
            ("a <> 1", "a != 1", #line),
            ("a >= 1 and a => 1", "a >= 1 AND a >= 1", #line),
            ("a <= 1 && a =< 1", "a <= 1 AND a <= 1", #line),
            ("a < 1 || a > 2", "a < 1 OR a > 2", #line),
            ("!(a == 1)", "NOT a == 1", #line),
            ("NOT (a == 1 OR b == 2)", "NOT (a == 1 OR b == 2)", #line),
            ("NOT a == 1 OR b == 2", "NOT a == 1 OR b == 2", #line),
            ("a == 1 AND (b == 2 OR c == 3)", "a == 1 AND (b == 2 OR c == 3)", #line),
            ("(a == 1 AND b == 2) OR c == 3", "a == 1 AND b == 2 OR c == 3", #line),
            ("name BEGINSWITH[cd] 'ab'", "name BEGINSWITH[cd] \"ab\"", #line),
            ("name endswith[c] \"z\"", "name ENDSWITH[c] \"z\"", #line),
            ("name CONTAINS[d] 'é'", "name CONTAINS[d] \"é\"", #line),
            ("name LIKE[n] 'a*?'", "name LIKE[n] \"a*?\"", #line),
            ("name MATCHES '^a.*$'", "name MATCHES \"^a.*$\"", #line),
            ("x IN {1, 2, 3}", "x IN {1, 2, 3}", #line),
            ("x BETWEEN {1, 5}", "x BETWEEN {1, 5}", #line),
            ("ANY tags == 'a'", "ANY tags == \"a\"", #line),
            ("SOME tags == 'a'", "ANY tags == \"a\"", #line),
            ("ALL tags != 'a'", "ALL tags != \"a\"", #line),
            ("NONE tags == 'a'", "NONE tags == \"a\"", #line),
            (
                "$x.registeredTypeIdentifiers uti-conforms-to 'public.url'",
                "$x.registeredTypeIdentifiers UTI-CONFORMS-TO \"public.url\"", #line
            ),
            ("t UTI-EQUALS 'public.png'", "t UTI-EQUALS \"public.png\"", #line),
            ("#AND == 1", "#AND == 1", #line),
            ("a.#size == 2", "a.#size == 2", #line),
            ("a.size == 2", "a.#size == 2", #line),  // a reserved word after '.' is a key
            ("(a + b) * 2 > c", "(a + b) * 2 > c", #line),
            ("a + b * 2 > c", "a + b * 2 > c", #line),
            ("2 ** 3 ** 2 == 512", "2 ** 3 ** 2 == 512", #line),
            ("-3 < x", "-3 < x", #line),
            ("-x < 3", "-x < 3", #line),
            (
                "0x1F == 31 AND 0b101 == 5 AND 0o17 == 15 AND 1.5e3 == 1500",
                "31 == 31 AND 5 == 5 AND 15 == 15 AND 1500 == 1500", #line
            ),
            ("items.@count == 2", "items.@count == 2", #line),
            ("@count > 1", "@count > 1", #line),
            ("items.@sum.price > 10", "items.price.@sum > 10", #line),
            (
                "items[FIRST] == 1 AND items[LAST] == 2 AND items[SIZE] == 2 AND items[0] == 1",
                "items[FIRST] == 1 AND items[LAST] == 2 AND items[SIZE] == 2 AND items[0] == 1", #line
            ),
            ("SELF == nil", "SELF == nil", #line),
            ("a == NULL AND b == YES AND c == FALSE", "a == nil AND b == YES AND c == NO", #line),
            ("lowercase(name) == 'x'", "lowercase(name) == \"x\"", #line),
            ("a == 'it\\'s \\\"q\\\" \\u00e9\\x41'", "a == \"it's \\\"q\\\" éA\"", #line),
            (
                "SUBQUERY(extensionItems, $e, $e.attachments.@count > 0).@count == 1",
                "SUBQUERY(extensionItems, $e, $e.attachments.@count > 0).@count == 1", #line
            ),
        ]
        for (input, canonical, line) in cases {
            let p = try PredicateFormat(parsing: input)
            XCTAssertEqual(p.description, canonical, input, line: line)
            XCTAssertEqual(try PredicateFormat(parsing: canonical), p, "round trip of \(canonical)", line: line)
        }
    }

    func testAppleExampleTree() throws {
        let p = try PredicateFormat(
            parsing: """
                SUBQUERY (
                    extensionItems,
                    $extensionItem,
                    SUBQUERY (
                        $extensionItem.attachments,
                        $attachment,
                        ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "com.adobe.pdf"
                    ).@count == $extensionItem.attachments.@count
                ).@count == 1
                """)
        let inner = PredicateNode.comparison(
            PredicateComparison(
                .any, .key(.variable("attachment"), "registeredTypeIdentifiers"), .utiConformsTo,
                .constant(.string("com.adobe.pdf"))))
        let attachments = PredicateExpr.key(.variable("extensionItem"), "attachments")
        let middle = PredicateNode.comparison(
            PredicateComparison(
                .direct,
                .collectionOperator(
                    .subquery(collection: attachments, variable: "attachment", predicate: inner), "count"),
                .equal, .collectionOperator(attachments, "count")))
        let expected = PredicateNode.comparison(
            PredicateComparison(
                .direct,
                .collectionOperator(
                    .subquery(
                        collection: .key(.evaluatedObject, "extensionItems"), variable: "extensionItem",
                        predicate: middle),
                    "count"),
                .equal, .constant(.number(1))))
        XCTAssertEqual(p.root, expected)
    }

    func testErrorPositions() {
        let cases: [(String, Int, String, UInt)] = [
            ("", 0, "empty predicate", #line),
            ("   ", 3, "empty predicate", #line),
            (
                "SUBQUERY(extensionItems, $e, TRUEPREDICATE", 42,
                "expected ')' to close SUBQUERY, found end of predicate", #line
            ),
            ("(a == 1", 7, "expected ')', found end of predicate", #line),
            ("a ==", 4, "expected an expression, found the end of the predicate", #line),
            ("a === 1", 4, "expected an expression, found '='", #line),
            ("a == 'abc", 5, "unterminated string (no closing ')", #line),
            ("a BEGINSWITH[x] 'b'", 13, "unknown comparison modifier '[x]' (use [c], [d], [cd] or [n])", #line),
            ("a == 1 b == 2", 7, "expected AND, OR or the end of the predicate, found 'b'", #line),
            ("a == 1)", 6, "unbalanced ')': no '(' opens it", #line),
            (
                "a LIKES 'x'", 2,
                "expected a comparison operator (==, !=, <, <=, >, >=, BEGINSWITH, ENDSWITH, CONTAINS, LIKE, MATCHES, IN, BETWEEN, UTI-CONFORMS-TO, UTI-EQUALS), found 'LIKES'",
                #line
            ),
            ("a == $", 5, "expected a variable name after '$'", #line),
            ("a == %@", 5, "format specifiers such as %@ and %K have no arguments in an Info.plist predicate", #line),
            ("a & b", 2, "'&' is not an operator (did you mean '&&'?)", #line),
            ("a == ?", 5, "'?' is not a valid predicate token", #line),
            (
                "SUBQUERY(items, x, x == 1).@count > 0", 16,
                "expected a variable such as $item as the second argument of SUBQUERY, found 'x'", #line
            ),
            ("x BETWEEN {1}", 2, "BETWEEN needs {lower, upper}, got 1 value", #line),
            (
                "foo(1) == 1", 0,
                "unknown function 'foo' (supported: lowercase, uppercase, count, sum, min, max, average, abs)", #line
            ),
            ("a == AND", 5, "expected an expression, found the keyword AND (write #AND to use it as a key)", #line),
            ("a.@ == 1", 2, "expected a collection operator such as @count after '@'", #line),
            ("a[1 == 2", 4, "expected ']' to close the index, found '=='", #line),
            ("{1, 2 == x", 6, "expected '}' to close the aggregate, found '=='", #line),
            ("a == 1 AND", 10, "expected an expression, found the end of the predicate", #line),
            ("a == 12abc", 7, "unexpected 'a' after the number 12", #line),
        ]
        for (input, position, message, line) in cases {
            XCTAssertThrowsError(try PredicateFormat(parsing: input), input, line: line) { error in
                guard let e = error as? PredicateParseError else { return XCTFail("\(error)", line: line) }
                XCTAssertEqual(e.message, message, input, line: line)
                XCTAssertEqual(e.position, position, input, line: line)
                XCTAssertEqual(e.description, "\(message) at position \(position)", line: line)
            }
        }
    }

    func testMultilineErrorsGiveLineAndColumn() {
        // Seed 002's rule with the last ')' of the outer SUBQUERY missing.
        let text = """
            SUBQUERY (
                extensionItems,
                $extensionItem,
                    SUBQUERY (
                        $extensionItem.attachments,
                        $attachment,
                        ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "com.adobe.pdf"
                    ).@count == $extensionItem.attachments.@count
            @count >= 1
            """
        XCTAssertThrowsError(try PredicateFormat(parsing: text)) { error in
            let e = error as! PredicateParseError
            XCTAssertEqual(e.message, "expected ')' to close SUBQUERY, found '@count'")
            XCTAssertEqual(e.line, 9)
            XCTAssertEqual(e.column, 1)
            XCTAssertEqual(e.description, "\(e.message) at position \(e.position) (line 9, column 1)")
        }
    }

    func testHostileNestingIsBoundedAndRetriesStayLinear() throws {
        let deep = String(repeating: "(", count: 300) + "a == 1" + String(repeating: ")", count: 300)
        XCTAssertThrowsError(try PredicateFormat(parsing: deep)) { error in
            XCTAssertEqual(
                (error as? PredicateParseError)?.message, "the predicate is nested too deeply (more than 128 levels)")
        }
        // Each "(" is first read as a predicate, then re-read as an expression: without memoizing, 30 levels
        // would take 2^30 steps.
        var text = "a == 1"
        for _ in 0..<30 { text = "(SUBQUERY(x, $v, \(text)).@count + 1) > 0" }
        let start = Date()
        let p = try PredicateFormat(parsing: text)
        XCTAssertLessThan(Date().timeIntervalSince(start), 2)
        XCTAssertEqual(try PredicateFormat(parsing: p.description), p)
        XCTAssertTrue(try p.evaluate(with: .object([:])))
    }
}
