// Regression tests for inputs found by the libFuzzer targets in fuzz/ (fuzz/README.md): each test is a
// minimized input with the property the fuzz target checks. A trap here crashes the test process, as it would
// crash the broker that evaluates the manifest's rule.

import ShareRouting
import XCTest

final class FuzzRegressionTests: XCTestCase {
    /// fuzz/targets/predicate.swift: an array index that is a whole number beyond Int's range (or infinite)
    /// must be an evaluation error ("out of range"), not a trap in `Int(i)` (PredicateEvaluator.index).
    func testHugeArrayIndexIsAnEvaluationErrorNotATrap() throws {
        let items: PredicateValue = .array([.number(1), .number(2)])
        for text in ["SELF[1e20] == 1", "SELF[9223372036854775808] == 1", "SELF[1e999] == 1"] {
            let p = try PredicateFormat(parsing: text)
            XCTAssertThrowsError(try p.evaluate(with: items), text)
        }
        // The same through an activation rule, as a manifest would carry it.
        let rule = try ActivationRule(json: .string("extensionItems[0].attachments[1e19] != nil"))
        let result = rule.evaluate([
            Attachment(kind: .url, registeredTypeIdentifiers: ["public.url"], url: "https://a.example/")
        ])
        XCTAssertFalse(result.accepted)
    }

    /// fuzz/targets/predicate.swift: `description` promises a form that parses back to the same tree. A key
    /// spelled with `#` that starts with a digit (`#2`) is printed bare and reads back as a number (or fails
    /// to parse after a '.').
    func testDigitKeysRoundTrip() throws {
        for text in ["#2 == 1", "a.#1 == 1", "#1OR == 1"] {
            let p = try PredicateFormat(parsing: text)
            XCTAssertEqual(try PredicateFormat(parsing: p.description), p, "\(text) printed as \(p.description)")
        }
    }

    /// fuzz/targets/predicate.swift: a key read from the result of a collection operator, `(a.@count).k`, is
    /// printed `a.@count.k`, which reads back as `@count` of `a.k` (KVC's `items.@sum.price` form).
    func testKeyAfterCollectionOperatorRoundTrips() throws {
        for text in ["(a.@count).k == 1", "items.@avg.@sum.k == 3"] {
            let p = try PredicateFormat(parsing: text)
            XCTAssertEqual(try PredicateFormat(parsing: p.description), p, "\(text) printed as \(p.description)")
        }
    }

    /// fuzz/targets/predicate.swift: a number literal too large for a Double (`8e888`) becomes infinity, printed
    /// `inf`, which reads back as the key `inf`.
    func testOverflowingNumberLiteralRoundTrips() throws {
        for text in ["8e888 < 888", "x == -1e400"] {
            let p = try PredicateFormat(parsing: text)
            XCTAssertEqual(try PredicateFormat(parsing: p.description), p, "\(text) printed as \(p.description)")
        }
    }

    /// fuzz/targets/association.swift: an IRI whose authority has an empty host before a port
    /// (`https://:...`, with something to encode) looped forever in URLReference.encodingIRI (the
    /// host's range was empty, and the loop jumped to its end: where it stood). Hosts with labels
    /// too long for DNS are not Punycoded (bounded cost).
    func testAnEmptyHostInAnIRITerminates() throws {
        XCTAssertEqual(URLReference.encodingIRI("https://://example.exa\u{FFFD}"), "https://://example.exa%EF%BF%BD")
        XCTAssertEqual(URLReference.encodingIRI("notes://:80/ä"), "notes://:80/%C3%A4")
        XCTAssertNil(URLReference.encodingIRI("https://" + String(repeating: "ü", count: 64) + ".de/"))
        let router = URLRouter(apps: [AppManifest(bundleID: "com.b", urlSchemes: ["https"])], associations: [:])
        _ = router.resolve("https\u{FFFD}\u{FFFD}https://://example.exa\u{FFFD}", fallback: "myapp://fallback")
        _ = router.resolve("https://" + String(repeating: "\u{10FFFF}\u{80}", count: 5000) + "/", fallback: nil)
    }
}
