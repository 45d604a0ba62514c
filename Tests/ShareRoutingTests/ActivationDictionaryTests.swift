// Table-driven tests for dictionary activation rules: counts per kind, strict versus fuzzy matching
// (NSExtensionActivationDictionaryVersion, NSExtensionActivationUsesStrictMatching), seed 000's
// NSExtensionActivationWebURLPredicate, and dictionaries from public Info.plist files.

import ShareProtocol
import ShareRouting
import XCTest

/// Items used across the activation tests.
enum SampleItems {
    static let pdfBytes = Array("%PDF-1.7\n".utf8)
    static func url(_ u: String = "https://example.com/page") -> ShareItem { .url(u) }
    static let youtube = ShareItem.url("https://www.youtube.com/watch?v=1")
    static let youtu = ShareItem.url("https://youtu.be/xyz")
    static let fileURL = ShareItem.url("file:///tmp/a.pdf")
    static let text = ShareItem.text("hello there")
    static let textURL = ShareItem.text(" https://youtu.be/xyz\n")
    static let pdf = ShareItem.data(pdfBytes, name: "doc.pdf")
    static let pdf2 = ShareItem.file(path: "/tmp/other.pdf")
    static let png = ShareItem.data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    static let jpeg = ShareItem.file(path: "/tmp/photo.jpg")
    static let mov = ShareItem.file(path: "/tmp/clip.mov")
    static let zip = ShareItem.file(path: "/tmp/a.zip")
    static let html = ShareItem.data(Array("<!doctype html><html>".utf8), name: "page.html")
    static let plist = ShareItem.data([], name: "page.plist")
    static let custom = ShareItem.text("x", type: "org.appextension.action-one")
}

func sampleAttachments(_ items: [ShareItem]) -> [Attachment] { UTITable.system.attachments(for: items) }

final class ActivationDictionaryTests: XCTestCase {
    struct Case {
        var items: [ShareItem]
        var accepted: Bool
        var reason: String? = nil  // a fragment the reason must contain
        var line: UInt = #line
    }

    func run(_ json: JSONValue, _ cases: [Case], file: StaticString = #filePath) {
        let rule: ActivationRule
        do { rule = try ActivationRule(json: json) } catch {
            return XCTFail("\(json): \(error)")
        }
        for c in cases {
            let result = rule.evaluate(sampleAttachments(c.items))
            XCTAssertEqual(
                result.accepted, c.accepted, "\(c.items.map(\.kind)) → \(result.reason)", file: file, line: c.line)
            if let fragment = c.reason {
                XCTAssertTrue(
                    result.reason.contains(fragment), "reason '\(result.reason)' lacks '\(fragment)'", file: file,
                    line: c.line)
            }
            // The free function agrees.
            XCTAssertEqual(evaluate(rule, items: sampleAttachments(c.items)), result, file: file, line: c.line)
            assertQuietAgrees(rule, c.items, result, file: file, line: c.line)
        }
    }

    /// The contract's example manifest: a URL-only share extension.
    func testWebURLOnly() {
        run(
            ["NSExtensionActivationSupportsWebURLWithMaxCount": 1],
            [
                Case(
                    items: [SampleItems.url()], accepted: true,
                    reason: "every item is supported (1 web URL of at most 1)"),
                Case(
                    items: [SampleItems.url(), SampleItems.pdf], accepted: false,
                    reason: "items[1] (com.adobe.pdf) is not a kind this rule supports; it supports web URLs (up to 1)"),
                Case(
                    items: [SampleItems.url(), SampleItems.youtube], accepted: false,
                    reason: "2 web URLs, but NSExtensionActivationSupportsWebURLWithMaxCount is 1"),
                Case(items: [SampleItems.text], accepted: false),
                Case(items: [SampleItems.textURL], accepted: true),  // a text that is exactly a URL also carries public.url
                Case(items: [SampleItems.fileURL], accepted: false),  // a file URL is not a web URL
                Case(items: [ShareItem.url("deeplinkmyapp://open")], accepted: true),
                Case(items: [], accepted: false, reason: "there are no items to share"),
            ])
    }

    func testImageCounts() {
        run(
            ["NSExtensionActivationSupportsImageWithMaxCount": 1],
            [
                Case(items: [SampleItems.png], accepted: true),
                Case(items: [SampleItems.jpeg], accepted: true),
                Case(
                    items: [SampleItems.png, SampleItems.jpeg], accepted: false,
                    reason: "2 images, but NSExtensionActivationSupportsImageWithMaxCount is 1"),
                Case(items: [SampleItems.png, SampleItems.pdf], accepted: false),
                Case(items: [SampleItems.mov], accepted: false),
            ])
        run(
            [
                "NSExtensionActivationSupportsImageWithMaxCount": 10,
                "NSExtensionActivationSupportsMovieWithMaxCount": 1,
                "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
            ],  // Apple's example in the App Extension Programming Guide
            [
                Case(items: [SampleItems.png, SampleItems.jpeg, SampleItems.mov, SampleItems.url()], accepted: true),
                Case(
                    items: [SampleItems.mov, SampleItems.mov], accepted: false,
                    reason: "2 movies, but NSExtensionActivationSupportsMovieWithMaxCount is 1"),
                Case(items: [SampleItems.png, SampleItems.pdf], accepted: false),
            ])
    }

    func testAttachmentCountsAndMinimum() {
        run(
            ["NSExtensionActivationSupportsAttachmentsWithMaxCount": 3],
            [
                Case(
                    items: [SampleItems.pdf, SampleItems.url(), SampleItems.text], accepted: true,
                    reason: "any items, at most 3"),
                Case(
                    items: [SampleItems.pdf, SampleItems.url(), SampleItems.text, SampleItems.png], accepted: false,
                    reason: "4 items, but NSExtensionActivationSupportsAttachmentsWithMaxCount is 3"),
            ])
        run(
            [
                "NSExtensionActivationSupportsImageWithMaxCount": 5,
                "NSExtensionActivationSupportsAttachmentsWithMinCount": 2,
            ],
            [
                Case(
                    items: [SampleItems.png], accepted: false,
                    reason: "1 item, but NSExtensionActivationSupportsAttachmentsWithMinCount is 2"),
                Case(items: [SampleItems.png, SampleItems.jpeg], accepted: true),
            ])
        run(
            ["NSExtensionActivationSupportsAttachmentsWithMinCount": 1],
            [
                Case(items: [SampleItems.png], accepted: false, reason: "the rule supports no kind of data")
            ])
    }

    func testText() {
        run(
            ["NSExtensionActivationSupportsText": true],
            [
                Case(items: [SampleItems.text], accepted: true),
                Case(items: [SampleItems.text, SampleItems.text, SampleItems.text], accepted: true),  // Text has no maximum
                Case(items: [SampleItems.textURL], accepted: true),
                Case(items: [SampleItems.url()], accepted: false),
                Case(items: [ShareItem.data(Array("{\"a\":1}".utf8), name: "a.json")], accepted: true),  // public.json is text
            ])
        run(["NSExtensionActivationSupportsText": false], [Case(items: [SampleItems.text], accepted: false)])
    }

    func testWebPageVersusWebURL() {
        run(
            ["NSExtensionActivationSupportsWebPageWithMaxCount": 1],
            [
                Case(items: [SampleItems.url()], accepted: false),
                Case(items: [SampleItems.html], accepted: true),
                Case(items: [SampleItems.plist], accepted: true),  // Safari hands a page over as com.apple.property-list
                Case(
                    items: [SampleItems.html, SampleItems.html], accepted: false,
                    reason: "2 web pages, but NSExtensionActivationSupportsWebPageWithMaxCount is 1"),
            ])
        run(["NSExtensionActivationSupportsWebURLWithMaxCount": 1], [Case(items: [SampleItems.html], accepted: false)])
    }

    func testFiles() {
        run(
            ["NSExtensionActivationSupportsFileWithMaxCount": 2],
            [
                Case(items: [SampleItems.pdf, SampleItems.zip], accepted: true),
                Case(
                    items: [SampleItems.pdf, SampleItems.zip, SampleItems.pdf2], accepted: false,
                    reason: "3 files, but NSExtensionActivationSupportsFileWithMaxCount is 2"),
                Case(items: [SampleItems.png, SampleItems.mov], accepted: true),  // without Image/Movie keys, images and movies are files
                Case(items: [SampleItems.fileURL], accepted: true),
                Case(items: [SampleItems.url()], accepted: false),
                Case(items: [SampleItems.text], accepted: false),
            ])
    }

    func testStrictAndFuzzyMatching() {
        let url1: JSONObject = ["NSExtensionActivationSupportsWebURLWithMaxCount": 1]
        var v2 = url1
        v2["NSExtensionActivationDictionaryVersion"] = 2
        var v2strict = v2
        v2strict["NSExtensionActivationUsesStrictMatching"] = true
        var v1notStrict = url1
        v1notStrict["NSExtensionActivationUsesStrictMatching"] = false
        run(
            .object(url1),
            [
                Case(
                    items: [SampleItems.url(), SampleItems.pdf], accepted: false,
                    reason: "is not a kind this rule supports")
            ])
        run(
            .object(v2),
            [
                Case(items: [SampleItems.url(), SampleItems.pdf], accepted: true, reason: "1 of 2 items supported"),
                Case(
                    items: [SampleItems.pdf], accepted: false, reason: "none of the 1 item is a kind this rule supports"
                ),
                Case(items: [SampleItems.url(), SampleItems.url()], accepted: false, reason: "2 web URLs"),
            ])
        run(.object(v2strict), [Case(items: [SampleItems.url(), SampleItems.pdf], accepted: false)])
        run(.object(v1notStrict), [Case(items: [SampleItems.url(), SampleItems.pdf], accepted: false)])
    }

    /// Keys present with 0 reject their kind under fuzzy matching (unless another supported kind covers it).
    func testFuzzyExplicitZero() {
        // Twitter's share extension, as dumped in github.com/ReversecLabs/needle/pull/41.
        run(
            [
                "NSExtensionActivationDictionaryVersion": 2, "NSExtensionActivationSupportsMovieWithMaxCount": 0,
                "NSExtensionActivationSupportsText": 1, "NSExtensionActivationSupportsImageWithMaxCount": 1,
                "NSExtensionActivationSupportsFileWithMaxCount": 0,
                "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
            ],
            [
                Case(
                    items: [SampleItems.url(), SampleItems.mov], accepted: false,
                    reason: "is a movie and NSExtensionActivationSupportsMovieWithMaxCount is 0"),
                Case(
                    items: [SampleItems.url(), SampleItems.pdf], accepted: false,
                    reason: "is a file and NSExtensionActivationSupportsFileWithMaxCount is 0"),
                Case(items: [SampleItems.url(), SampleItems.png], accepted: true),  // an image file is covered by Image
                Case(items: [SampleItems.text, SampleItems.url()], accepted: true),
            ])
    }

    /// Seed 000: NSExtensionActivationSupportsWebURLWithMaxCount 1 + the non-Apple NSExtensionActivationWebURLPredicate.
    func testSeed000YouTube() {
        run(
            [
                "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
                "NSExtensionActivationWebURLPredicate":
                    "SUBQUERY(absoluteURL, $url, $url CONTAINS 'youtube.com' OR $url CONTAINS 'youtu.be').@count > 0",
            ],
            [
                Case(items: [SampleItems.youtu], accepted: true),
                Case(items: [SampleItems.youtube], accepted: true),
                Case(
                    items: [ShareItem.url("https://example.com")], accepted: false,
                    reason: "https://example.com does not satisfy NSExtensionActivationWebURLPredicate"),
                Case(items: [SampleItems.textURL], accepted: true),  // the way the seed's extension dug URLs out of text
                Case(items: [ShareItem.text("https://example.com")], accepted: false),
                Case(items: [SampleItems.youtu, SampleItems.youtube], accepted: false, reason: "2 web URLs"),
                Case(items: [SampleItems.youtube, ShareItem.url("https://example.com")], accepted: false),
                Case(items: [SampleItems.youtube, SampleItems.pdf], accepted: false),
            ])
        // Other spellings of the same filter against the documented context.
        run(
            [
                "NSExtensionActivationSupportsWebURLWithMaxCount": 2,
                "NSExtensionActivationWebURLPredicate": "host ENDSWITH 'youtube.com' OR host == 'youtu.be'",
            ],
            [
                Case(items: [SampleItems.youtu, SampleItems.youtube], accepted: true),
                Case(items: [ShareItem.url("https://notyoutube.com.evil.example/")], accepted: false),
            ])
        run(
            [
                "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
                "NSExtensionActivationWebURLPredicate": "$nope == 1",
            ],
            [
                Case(
                    items: [SampleItems.youtu], accepted: false,
                    reason:
                        "NSExtensionActivationWebURLPredicate cannot be evaluated for https://youtu.be/xyz: variable $nope is not defined"
                )
            ])
    }

    /// Dictionaries from public Info.plist files (NSExtension > NSExtensionAttributes > NSExtensionActivationRule).
    func testPublicInfoPlistDictionaries() {
        // mozilla-mobile/firefox-ios Extensions/ShareTo/Info.plist
        run(
            [
                "NSExtensionActivationSupportsText": true, "NSExtensionActivationSupportsWebPageWithMaxCount": 1,
                "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
            ],
            [
                Case(items: [SampleItems.url()], accepted: true), Case(items: [SampleItems.text], accepted: true),
                Case(items: [SampleItems.png], accepted: false),
            ])
        // wordpress-mobile/WordPress-iOS WordPress/WordPressShareExtension/Info.plist (version 2: fuzzy)
        run(
            [
                "NSExtensionActivationDictionaryVersion": 2, "NSExtensionActivationSupportsText": true,
                "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
                "NSExtensionActivationSupportsImageWithMaxCount": 1,
            ],
            [
                Case(items: [SampleItems.png, SampleItems.text], accepted: true),
                Case(items: [SampleItems.png, SampleItems.pdf], accepted: true),  // fuzzy: the PDF is passed along
                Case(items: [SampleItems.png, SampleItems.jpeg], accepted: false),
            ])
        // element-hq/element-ios RiotShareExtension/SupportingFiles/Info.plist
        run(
            [
                "NSExtensionActivationDictionaryVersion": 2, "NSExtensionActivationSupportsImageWithMaxCount": 5,
                "NSExtensionActivationSupportsMovieWithMaxCount": 1, "NSExtensionActivationSupportsText": true,
                "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
            ],
            [
                Case(items: [SampleItems.png, SampleItems.jpeg, SampleItems.mov], accepted: true),
                Case(items: [SampleItems.mov, SampleItems.mov], accepted: false),
            ])
        // Ranchero-Software/NetNewsWire Mac/ShareExtension/Info.plist and EhPanda-Team/EhPanda ShareExtension/Info.plist
        run(["NSExtensionActivationSupportsWebURLWithMaxCount": 1], [Case(items: [SampleItems.url()], accepted: true)])
        // duckduckgo/iOS OpenAction/Info.plist
        run(
            [
                "NSExtensionActivationSupportsWebPageWithMaxCount": 1,
                "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
            ],
            [Case(items: [SampleItems.url()], accepted: true), Case(items: [SampleItems.text], accepted: false)])
        // Criptext/iOS-Email-Client ShareExtension/Info.plist
        run(
            [
                "NSExtensionActivationSupportsFileWithMaxCount": 5, "NSExtensionActivationSupportsImageWithMaxCount": 5,
                "NSExtensionActivationSupportsText": true, "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
            ],
            [Case(items: [SampleItems.png, SampleItems.pdf, SampleItems.text, SampleItems.url()], accepted: true)])
        // InterShare/InterShare-Apple ShareExtension/Info.plist
        run(
            [
                "NSExtensionActivationSupportsFileWithMaxCount": 1, "NSExtensionActivationSupportsImageWithMaxCount": 1,
                "NSExtensionActivationSupportsMovieWithMaxCount": 1,
            ],
            [
                Case(items: [SampleItems.png, SampleItems.mov], accepted: true),  // each counted under its own key
                Case(items: [SampleItems.png, SampleItems.mov, SampleItems.pdf], accepted: true),
                Case(items: [SampleItems.pdf, SampleItems.zip], accepted: false, reason: "2 files"),
            ])
        // OpenArchive/Save-app-ios ShareExtension/Info.plist
        run(
            [
                "NSExtensionActivationSupportsFileWithMaxCount": 99,
                "NSExtensionActivationSupportsImageWithMaxCount": 99,
                "NSExtensionActivationSupportsMovieWithMaxCount": 99,
            ],
            [
                Case(items: [SampleItems.png, SampleItems.mov, SampleItems.pdf], accepted: true),
                Case(items: [SampleItems.url()], accepted: false),
            ])
        // ArchiveBox/ios-archivebox ShareExtension/Info.plist
        run(
            ["NSExtensionActivationSupportsText": true, "NSExtensionActivationSupportsWebURLWithMaxCount": 20],
            [
                Case(items: Array(repeating: SampleItems.url(), count: 20), accepted: true),
                Case(items: Array(repeating: SampleItems.url(), count: 21), accepted: false),
            ])
    }

    func testLenientValuesAndRuleErrors() throws {
        // Values as some plists spell them: strings and Booleans for counts, numbers for Booleans.
        let lenient = try ActivationRule(json: [
            "NSExtensionActivationSupportsWebURLWithMaxCount": "2",
            "NSExtensionActivationSupportsImageWithMaxCount": true,
            "NSExtensionActivationSupportsText": 1, "NSExtensionActivationUsesStrictMatching": "YES",
        ])
        guard case .dictionary(let d) = lenient else { return XCTFail("\(lenient)") }
        XCTAssertEqual(d.webURLMaxCount, 2)
        XCTAssertEqual(d.imageMaxCount, 1)
        XCTAssertEqual(d.supportsText, true)
        XCTAssertEqual(d.usesStrictMatching, true)

        let bad: [(JSONValue, ActivationRuleError, UInt)] = [
            (
                5, ActivationRuleError(key: "", message: "expected a dictionary or a predicate string, got number"),
                #line
            ),
            (
                ["NSExtensionActivationSupportsImageWithMaxCount": -1],
                ActivationRuleError(
                    key: "NSExtensionActivationSupportsImageWithMaxCount", message: "must not be negative (got -1)"),
                #line
            ),
            (
                ["NSExtensionActivationSupportsImageWithMaxCount": "many"],
                ActivationRuleError(
                    key: "NSExtensionActivationSupportsImageWithMaxCount",
                    message: "expected a non-negative integer, got the string \"many\""), #line
            ),
            (
                ["NSExtensionActivationSupportsImageWithMaxCount": .number("1.5")],
                ActivationRuleError(
                    key: "NSExtensionActivationSupportsImageWithMaxCount", message: "expected a whole number, got 1.5"),
                #line
            ),
            (
                ["NSExtensionActivationSupportsText": "maybe"],
                ActivationRuleError(
                    key: "NSExtensionActivationSupportsText", message: "expected a Boolean, got the string \"maybe\""),
                #line
            ),
            (
                ["NSExtensionActivationWebURLPredicate": 1],
                ActivationRuleError(
                    key: "NSExtensionActivationWebURLPredicate", message: "expected a predicate string, got number"),
                #line
            ),
            (
                ["NSExtensionActivationWebURLPredicate": "host =="],
                ActivationRuleError(
                    key: "NSExtensionActivationWebURLPredicate", position: 7,
                    message: "expected an expression, found the end of the predicate at position 7"), #line
            ),
            (
                "SUBQUERY(extensionItems, $e, TRUEPREDICATE",
                ActivationRuleError(
                    key: "", position: 42,
                    message: "expected ')' to close SUBQUERY, found end of predicate at position 42"), #line
            ),
        ]
        for (json, expected, line) in bad {
            XCTAssertThrowsError(try ActivationRule(json: json), line: line) { error in
                XCTAssertEqual(error as? ActivationRuleError, expected, line: line)
            }
        }
        // As the broker calls it: no rule, and an unreadable rule, accept nothing.
        let none = ActivationRule.evaluate(nil, attachments: sampleAttachments([SampleItems.url()]))
        XCTAssertEqual(
            none,
            ActivationResult(accepted: false, reason: "the extension declares no activationRule, so it accepts nothing")
        )
        let broken = ActivationRule.evaluate("a ==", attachments: sampleAttachments([SampleItems.url()]))
        XCTAssertFalse(broken.accepted)
        XCTAssertEqual(
            broken.reason,
            "its activationRule cannot be read: expected an expression, found the end of the predicate at position 4")
    }
}

/// Without explaining acceptance (the broker's share.send) a rule gives the same verdict, an empty
/// reason when it accepts and the same reason when it refuses.
func assertQuietAgrees(
    _ rule: ActivationRule, _ items: [ShareItem], _ explained: ActivationResult, file: StaticString, line: UInt
) {
    let quiet = rule.evaluate(sampleAttachments(items), explainAcceptance: false)
    XCTAssertEqual(quiet.accepted, explained.accepted, file: file, line: line)
    XCTAssertEqual(quiet.reason, explained.accepted ? "" : explained.reason, file: file, line: line)
}
