// Tests for activation rule validation: seed 000's non-Apple key said plainly, unknown and misspelt keys,
// lenient values, rules that accept everything or nothing, and predicate key paths the context lacks.

import ShareProtocol
import ShareRouting
import XCTest

final class ActivationValidationTests: XCTestCase {
    func messages(_ json: JSONValue) -> [String] { ActivationRule.validate(json).map(\.description) }

    func testSeed000WebURLPredicateIsNamedAsNotApple() {
        let issues = ActivationRule.validate([
            "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
            "NSExtensionActivationWebURLPredicate":
                "SUBQUERY(absoluteURL, $url, $url CONTAINS 'youtube.com' OR $url CONTAINS 'youtu.be').@count > 0",
        ])
        XCTAssertEqual(
            issues,
            [
                ActivationIssue(
                    .warning, key: "NSExtensionActivationWebURLPredicate",
                    "NSExtensionActivationWebURLPredicate is not an Apple key (iOS ignores it); sharebroker applies it as an extension that filters shared web URLs"
                )
            ])
        XCTAssertEqual(issues[0].message, ActivationRule.webURLPredicateNote)

        let useless = messages([
            "NSExtensionActivationWebURLPredicate": "host == 'youtu.be'", "NSExtensionActivationSupportsText": true,
        ])
        XCTAssertTrue(useless.contains { $0.contains("has no effect: the rule supports no web URLs") }, "\(useless)")
        let typo = messages([
            "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
            "NSExtensionActivationWebURLPredicate": "hots == 'youtu.be'",
        ])
        XCTAssertTrue(typo.contains { $0.contains("'hots' is not in a web URL") }, "\(typo)")
    }

    func testUnknownKeys() {
        let m = messages([
            "NSExtensionActivationSupportsMaxCountForImage": 1,
            "NSExtensionActivationSupportsAttachmentsWithMatchingTypeIdentifiers": ["public.url"],
            "NSExtensionActivationSupportsWebURLWithMaxCout": 1,
            "NSExtensionJavaScriptPreprocessingFile": "Action",
            "NSExtensionActivationSupportsText": true,
        ])
        XCTAssertEqual(
            m,
            [
                "warning: NSExtensionActivationSupportsMaxCountForImage: NSExtensionActivationSupportsMaxCountForImage is not an activation rule key Apple defines; iOS ignores it, and so does sharebroker (did you mean NSExtensionActivationSupportsImageWithMaxCount?)",
                "warning: NSExtensionActivationSupportsAttachmentsWithMatchingTypeIdentifiers: NSExtensionActivationSupportsAttachmentsWithMatchingTypeIdentifiers is not an activation rule key Apple defines; iOS ignores it, and so does sharebroker (to accept particular types, write the rule as a predicate string with UTI-CONFORMS-TO)",
                "warning: NSExtensionActivationSupportsWebURLWithMaxCout: NSExtensionActivationSupportsWebURLWithMaxCout is not an activation rule key Apple defines; iOS ignores it, and so does sharebroker (did you mean NSExtensionActivationSupportsWebURLWithMaxCount?)",
                "warning: NSExtensionJavaScriptPreprocessingFile: NSExtensionJavaScriptPreprocessingFile is not an activation rule key; ignored",
            ])
    }

    func testRuleShapes() {
        let cases: [(JSONValue, [String], UInt)] = [
            (
                [:],
                [
                    "warning: the rule supports no kind of data (every NSExtensionActivationSupports… key is 0 or absent): the extension is never offered"
                ], #line
            ),
            (
                ["NSExtensionActivationSupportsImageWithMaxCount": "5"],
                [
                    "note: NSExtensionActivationSupportsImageWithMaxCount: expected an integer; \"5\" is read as 5, as iOS's intValue does"
                ], #line
            ),
            (
                ["NSExtensionActivationSupportsText": 1],
                ["note: NSExtensionActivationSupportsText: expected a Boolean; 1 is read as true"], #line
            ),
            (
                [
                    "NSExtensionActivationSupportsImageWithMaxCount": 1,
                    "NSExtensionActivationSupportsAttachmentsWithMinCount": 3,
                    "NSExtensionActivationSupportsAttachmentsWithMaxCount": 2,
                ],
                [
                    "warning: NSExtensionActivationSupportsAttachmentsWithMinCount: is 3, more than NSExtensionActivationSupportsAttachmentsWithMaxCount (2): nothing can satisfy both"
                ], #line
            ),
            (
                ["NSExtensionActivationSupportsText": true, "NSExtensionActivationDictionaryVersion": 3],
                [
                    "warning: NSExtensionActivationDictionaryVersion: Apple defines versions 1 and 2; 3 is treated like 2",
                    "note: NSExtensionActivationDictionaryVersion: version 2 without NSExtensionActivationUsesStrictMatching matches fuzzily: the extension is offered items of which at least one is supported; set NSExtensionActivationUsesStrictMatching to true to require every item",
                ], #line
            ),
            (
                ["NSExtensionActivationSupportsText": true, "NSExtensionActivationUsesStrictMatching": true],
                [
                    "note: NSExtensionActivationUsesStrictMatching: matching is strict before NSExtensionActivationDictionaryVersion 2 whatever this key says"
                ], #line
            ),
            (
                [
                    "NSExtensionActivationSupportsText": true, "NSExtensionActivationUsesStrictMatching": true,
                    "NSExtensionActivationDictionaryVersion": 2,
                ], [], #line
            ),
            (
                "TRUEPREDICATE",
                [
                    "warning: TRUEPREDICATE accepts everything; Apple rejects apps whose extensions still use it (App Extension Programming Guide: replace it with a real predicate or NSExtensionActivationRule keys before submitting)"
                ], #line
            ),
            ("FALSEPREDICATE", ["warning: FALSEPREDICATE accepts nothing: the extension is never offered"], #line),
            (
                "ANY NSExtensionItems.attachments.contentTypeUTI == \"public.url\"",
                [
                    "warning: 'NSExtensionItems' is not in the activation context (it has extensionItems); it reads as nil"
                ], #line
            ),
            (
                "SUBQUERY(extensionItems, $e, SUBQUERY($e.attachment, $a, ANY $a.registeredTypeIdentifiers UTI-CONFORMS-TO 'public.url').@count > 0).@count == 1",
                ["warning: 'attachment' is not in an extension item (it has attachments); it reads as nil"], #line
            ),
            (
                "SUBQUERY(extensionItems, $e, SUBQUERY($e.attachments, $a, ANY $a.typeIdentifiers UTI-CONFORMS-TO 'public.peg-2000').@count > 0).@count == 1",
                [
                    "warning: 'typeIdentifiers' is not in an attachment (it has registeredTypeIdentifiers); it reads as nil",
                    "note: public.peg-2000 is not a type sharebroker knows (a typo?); only items given exactly this type conform to it",
                ], #line
            ),
            ("SUBQUERY(extensionItems, $e, $e.attachments.@count >= 1).@count == 1", [], #line),
            (
                "SUBQUERY(extensionItems, $e, TRUEPREDICATE",
                ["error: expected ')' to close SUBQUERY, found end of predicate at position 42"], #line
            ),
            (
                ["NSExtensionActivationSupportsImageWithMaxCount": -2],
                ["error: NSExtensionActivationSupportsImageWithMaxCount: must not be negative (got -2)"], #line
            ),
            (true, ["error: expected a dictionary or a predicate string, got boolean"], #line),
        ]
        for (json, expected, line) in cases {
            XCTAssertEqual(messages(json), expected, "\(json)", line: line)
        }
        let parseError = ActivationRule.validate("a ==")
        XCTAssertEqual(parseError.first?.position, 4)
        XCTAssertEqual(parseError.first?.severity, .error)
    }
}
