// Table-driven tests for predicate evaluation: every comparison operator and its spellings, [c]/[d]/[cd]
// modifiers, ANY/ALL/NONE, key paths over arrays, aggregates, SUBQUERY, @count and friends, and evaluation errors.

import ShareRouting
import XCTest

final class PredicateEvaluatorTests: XCTestCase {
    let object: PredicateValue = .object([
        "name": .string("Café Déjà"),
        "n": .number(5),
        "flag": .bool(true),
        "tags": .array([.string("a"), .string("b")]),
        "empty": .array([]),
        "items": .array([
            .object(["k": .number(1), "t": .string("x")]), .object(["k": .number(2), "t": .string("y")]),
        ]),
        "url": .string("https://www.youtube.com/watch?v=1"),
        "star": .string("a*b"),
        "nested": .object(["x": .object(["y": .string("z")])]),
        "type": .string("public.jpeg"),
        "types": .array([.string("public.plain-text"), .string("public.url")]),
    ])

    func check(_ text: String, _ expected: Bool, variables: [String: PredicateValue] = [:], line: UInt = #line) {
        do {
            let p = try PredicateFormat(parsing: text)
            XCTAssertEqual(try p.evaluate(with: object, variables: variables), expected, text, line: line)
        } catch {
            XCTFail("\(text): \(error)", line: line)
        }
    }

    func testComparisonsAndModifiers() {
        let cases: [(String, Bool, UInt)] = [
            ("name == 'Café Déjà'", true, #line),
            ("name == 'café déjà'", false, #line),
            ("name ==[c] 'café déjà'", true, #line),
            ("name ==[d] 'Cafe Deja'", true, #line),
            ("name ==[cd] 'CAFE DEJA'", true, #line),
            ("name !=[cd] 'CAFE DEJA'", false, #line),
            ("name BEGINSWITH 'Caf'", true, #line),
            ("name BEGINSWITH 'caf'", false, #line),
            ("name BEGINSWITH[c] 'caf'", true, #line),
            ("name ENDSWITH 'Déjà'", true, #line),
            ("name ENDSWITH[d] 'Deja'", true, #line),
            ("name CONTAINS 'é D'", true, #line),
            ("name CONTAINS[cd] 'E DE'", true, #line),
            ("name CONTAINS 'xyz'", false, #line),
            ("name LIKE 'Caf* D?j?'", true, #line),
            ("name LIKE 'Caf'", false, #line),
            ("name LIKE[c] 'caf*'", true, #line),
            ("name LIKE[cd] '*deja'", true, #line),
            ("star LIKE 'a\\\\*b'", true, #line),
            ("'axb' LIKE 'a\\\\*b'", false, #line),
            ("'axb' LIKE 'a*b'", true, #line),
            ("url MATCHES 'https://(www\\\\.)?youtube\\\\.com/.*'", true, #line),
            ("url MATCHES 'https://(www\\.)?youtube\\.com/.*'", true, #line),  // single backslashes, as plists carry them
            ("url MATCHES 'youtube'", false, #line),  // MATCHES is whole-string
            ("url MATCHES[c] 'HTTPS://.*'", true, #line),
            ("url MATCHES 'HTTPS://.*'", false, #line),
            ("n == 5", true, #line),
            ("n = 5", true, #line),
            ("n != 4", true, #line),
            ("n <> 5", false, #line),
            ("n < 6", true, #line),
            ("n < 5", false, #line),
            ("n <= 5", true, #line),
            ("n =< 5", true, #line),
            ("n > 4", true, #line),
            ("n >= 5", true, #line),
            ("n => 6", false, #line),
            ("'b' > 'a'", true, #line),
            ("n BETWEEN {1, 5}", true, #line),
            ("n BETWEEN {6, 9}", false, #line),
            ("n IN {1, 5}", true, #line),
            ("n IN {1, 2}", false, #line),
            ("'a' IN tags", true, #line),
            ("'c' IN tags", false, #line),
            ("'Déj' IN name", true, #line),
            ("'DEJ' IN[cd] name", true, #line),
            ("tags CONTAINS 'b'", true, #line),
            ("tags CONTAINS[c] 'B'", true, #line),
            ("flag == YES", true, #line),
            ("flag == TRUE AND flag == 1", true, #line),
            ("flag == NO", false, #line),
            ("missing == nil", true, #line),
            ("nil == missing.deeper", true, #line),
            ("missing != nil", false, #line),
            ("missing == 0", false, #line),
            ("missing > 0 OR missing < 0", false, #line),
            ("nested.x.y == 'z'", true, #line),
            ("nested.x == nil", false, #line),
            ("type UTI-CONFORMS-TO 'public.image'", true, #line),
            ("type UTI-CONFORMS-TO 'public.text'", false, #line),
            ("type UTI-EQUALS 'PUBLIC.JPEG'", true, #line),
            ("type UTI-EQUALS 'public.image'", false, #line),
            ("type UTI-CONFORMS-TO {'public.text', 'public.image'}", true, #line),
            ("TRUEPREDICATE", true, #line),
            ("FALSEPREDICATE", false, #line),
            ("NOT FALSEPREDICATE AND (FALSEPREDICATE OR TRUEPREDICATE)", true, #line),
            ("!(n == 5) || n == 5 && FALSEPREDICATE", false, #line),
        ]
        for (text, expected, line) in cases { check(text, expected, line: line) }
    }

    func testCollections() {
        let cases: [(String, Bool, UInt)] = [
            ("ANY tags == 'b'", true, #line),
            ("SOME tags BEGINSWITH 'a'", true, #line),
            ("ALL tags == 'a'", false, #line),
            ("ALL tags IN {'a', 'b'}", true, #line),
            ("NONE tags == 'c'", true, #line),
            ("NONE tags == 'a'", false, #line),
            ("ALL empty == 1", true, #line),
            ("ANY empty == 1", false, #line),
            ("ANY types UTI-CONFORMS-TO 'public.url'", true, #line),
            ("ALL types UTI-CONFORMS-TO 'public.text'", false, #line),
            ("ANY name == 'Café Déjà'", true, #line),  // a single value reads as a one-element collection
            ("tags.@count == 2", true, #line),
            ("empty.@count == 0", true, #line),
            ("missing.@count == 0", true, #line),
            ("items.k == {1, 2}", true, #line),  // key paths map over arrays
            ("ANY items.k > 1", true, #line),
            ("ALL items.k > 1", false, #line),
            ("items.@count == 2", true, #line),
            ("items.@sum.k == 3", true, #line),
            ("items.k.@avg == 1.5", true, #line),
            ("items.@max.k == 2 AND items.@min.k == 1", true, #line),
            ("tags.@max == 'b'", true, #line),
            ("tags[FIRST] == 'a' AND tags[LAST] == 'b' AND tags[SIZE] == 2 AND tags[1] == 'b'", true, #line),
            ("nested['x'].y == 'z'", true, #line),
            ("SUBQUERY(items, $i, $i.k > 1).@count == 1", true, #line),
            ("SUBQUERY(items, $i, $i.t == 'x' OR $i.t == 'y').@count == items.@count", true, #line),
            ("SUBQUERY(tags, $t, SUBQUERY(items, $i, $i.t == $t).@count > 0).@count == 0", true, #line),
            ("SUBQUERY(url, $u, $u CONTAINS 'youtube.com').@count > 0", true, #line),  // single value as a collection
            ("SUBQUERY(missing, $u, TRUEPREDICATE).@count == 0", true, #line),
            ("(n + 1) * 2 == 12", true, #line),
            ("n ** 2 == 25 AND n / 2 == 2.5 AND n - 6 == -1 AND -n == -5", true, #line),
            ("2 ** 3 ** 2 == 512", true, #line),
            ("lowercase(name) == 'café déjà' AND uppercase('a') == 'A'", true, #line),
            ("count(tags) == 2 AND sum(items.k) == 3 AND abs(-2) == 2 AND average({1, 3}) == 2", true, #line),
            ("SELF.n == 5", true, #line),
            ("name.length == 9", true, #line),
            ("$v == 3", true, #line),
        ]
        for (text, expected, line) in cases {
            check(text, expected, variables: ["v": .number(3)], line: line)
        }
    }

    func testEvaluationErrors() {
        let cases: [(String, String, UInt)] = [
            ("$undefined == 1", "variable $undefined is not defined", #line),
            ("url MATCHES '('", "invalid regular expression for MATCHES: \"(\"", #line),
            ("name.first == 1", "cannot read key 'first' of a string (\"Café Déjà\")", #line),
            ("n / 0 == 1", "division by zero", #line),
            ("n.@count == 1", "@count needs a collection, got a number (5)", #line),
            ("tags[5] == 1", "index 5 is out of range for 2 elements", #line),
            ("name + 1 == 2", "the left side of + must be a number, got string", #line),
            (
                "tags.@distinctUnionOfObjects == 1",
                "unsupported collection operator @distinctUnionOfObjects (supported: @count, @sum, @avg, @min, @max)",
                #line
            ),
        ]
        for (text, message, line) in cases {
            do {
                let p = try PredicateFormat(parsing: text)
                XCTAssertThrowsError(try p.evaluate(with: object), text, line: line) { error in
                    XCTAssertEqual((error as? PredicateEvaluationError)?.message, message, text, line: line)
                }
            } catch {
                XCTFail("\(text): \(error)", line: line)
            }
        }
    }

    func testDeclaredTypesReachUTIConformsTo() throws {
        let table = UTITable.system.adding([DeclaredType("com.example.board", conformsTo: ["public.json"])])
        let p = try PredicateFormat(parsing: "SELF UTI-CONFORMS-TO 'public.text'")
        XCTAssertTrue(try p.evaluate(with: .string("com.example.board"), table: table))
        XCTAssertFalse(try p.evaluate(with: .string("com.example.board")))
    }
}
