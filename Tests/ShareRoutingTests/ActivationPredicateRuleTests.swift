// Predicate activation rules as they appear in public Info.plist files (quoted verbatim, XML entities such as
// &gt; and &quot; decoded the way the plist reader does) and in the seeds, evaluated on the contract's items.

import ShareProtocol
import ShareRouting
import XCTest

final class ActivationPredicateRuleTests: XCTestCase {
    struct Expect {
        var items: [ShareItem]
        var accepted: Bool
        var line: UInt = #line
    }

    func check(_ source: String, _ rule: String, _ cases: [Expect], file: StaticString = #filePath) {
        let parsed: ActivationRule
        do { parsed = try ActivationRule(json: .string(rule)) } catch {
            return XCTFail("\(source): \(error)", file: file)
        }
        XCTAssertFalse(
            ActivationRule.validate(.string(rule)).contains { $0.severity == .error }, source, file: file)
        for c in cases {
            let result = parsed.evaluate(sampleAttachments(c.items))
            XCTAssertEqual(result.accepted, c.accepted, "\(source): \(result.reason)", file: file, line: c.line)
            assertQuietAgrees(parsed, c.items, result, file: file, line: c.line)
        }
    }

    /// Seed 002 (PDF share and action extensions), also the contract's example.
    func testSeed002PDFRule() {
        check(
            "seed 002 Info.plist",
            """
            SUBQUERY (
            \t\textensionItems,
            \t\t$extensionItem,
            \t\t\t\tSUBQUERY (
            \t\t\t\t\t\t$extensionItem.attachments,
            \t\t\t\t\t\t$attachment,
            \t\t\t\t\t\tANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "com.adobe.pdf"
            \t\t\t\t).@count == $extensionItem.attachments.@count
            \t\t).@count >= 1
            """,
            [
                Expect(items: [SampleItems.pdf], accepted: true),
                Expect(items: [SampleItems.pdf, SampleItems.pdf2], accepted: true),
                Expect(items: [SampleItems.pdf, SampleItems.png], accepted: false),
                Expect(items: [SampleItems.url()], accepted: false),
                Expect(items: [ShareItem.url("https://x.example/a.pdf", type: "com.adobe.pdf")], accepted: true),
            ])
    }

    func testPublicInfoPlistRules() {
        // TelegramMessenger/Telegram-iOS Telegram/Share/Info.plist
        check(
            "Telegram-iOS Share",
            """
            SUBQUERY (
                extensionItems,
                $extensionItem,
                SUBQUERY (
                    $extensionItem.attachments,
                    $attachment,
                    ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.file-url" ||
                    ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.movie" ||
                    ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.image" ||
            \t\tANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.url" ||
            \t\tANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.text" ||
            \t\tANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.audio" ||
                    ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.data" ||
                    ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.vcard" ||
                    ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "com.apple.pkpass"
                ).@count == $extensionItem.attachments.@count
            ).@count > 0
            """,
            [
                Expect(items: [SampleItems.url(), SampleItems.pdf, SampleItems.text, SampleItems.png], accepted: true),
                Expect(items: [ShareItem.data([], name: "ticket.pkpass")], accepted: true),
            ])

        // signalapp/Signal-iOS SignalShareExtension/Info.plist
        check(
            "Signal-iOS SignalShareExtension",
            """
            SUBQUERY (
                            extensionItems,
                            $extensionItem,
                            SUBQUERY (
                            $extensionItem.attachments,
                            $attachment,
                            ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.data"
                            || ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.url"
                            ).@count >= 1
                            ).@count == 1
            """,
            [
                Expect(items: [SampleItems.url()], accepted: true),
                Expect(items: [SampleItems.pdf, SampleItems.png], accepted: true),
            ])

        // chromium/chromium ios/chrome/share_extension/Info.plist: exactly one URL attachment
        let chromeShare = """
            SUBQUERY (
            \textensionItems,
            \t$extensionItem,
            \tSUBQUERY (
            \t\t$extensionItem.attachments,
            \t\t$attachment,
            \t\tANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.url"
            \t).@count == 1
            ).@count == 1
            """
        check(
            "Chromium share_extension", chromeShare,
            [
                Expect(items: [SampleItems.url()], accepted: true),
                Expect(items: [SampleItems.url(), SampleItems.pdf], accepted: true),  // counts URL attachments only
                Expect(items: [SampleItems.url(), SampleItems.youtube], accepted: false),
                Expect(items: [SampleItems.pdf], accepted: false),
                Expect(items: [SampleItems.fileURL], accepted: true),  // public.file-url conforms to public.url
            ])

        // chromium/chromium ios/chrome/open_extension/appex/Info.plist: a URL that is not a file URL
        check(
            "Chromium open_extension",
            """
            SUBQUERY (
            \textensionItems,
            \t$extensionItem,
            \tSUBQUERY (
            \t\t$extensionItem.attachments,
            \t\t$attachment,
            \t\t(
            \t\t\tANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.url"
            \t\t)
            \t\tAND (
            \t\t\tNOT (
            \t\t\t\tANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.file-url"
            \t\t\t)
            \t\t)
            \t).@count == 1
            ).@count == 1
            """,
            [Expect(items: [SampleItems.url()], accepted: true), Expect(items: [SampleItems.fileURL], accepted: false)])

        // mozilla-mobile/firefox-ios Extensions/ViewLater/Info.plist (also SendTo before PR #3203)
        check(
            "firefox-ios ViewLater",
            "SUBQUERY ( extensionItems, $extensionItem, SUBQUERY ( $extensionItem.attachments, $attachment, ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO \"public.url\").@count > 0 ).@count == 1",
            [
                Expect(items: [SampleItems.url()], accepted: true), Expect(items: [SampleItems.text], accepted: false),
                Expect(items: [SampleItems.textURL], accepted: true),
            ])

        // bitwarden/mobile src/iOS.Extension/Info.plist: every attachment one of these types
        check(
            "bitwarden iOS.Extension",
            """
            SUBQUERY (
            \t\textensionItems,
            \t\t$extensionItem,
            \t\tSUBQUERY (
            \t\t\t$extensionItem.attachments,
            \t\t\t$attachment,
            \t\t\t\tANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.url"
            \t\t\t||  ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.plain-text"
            \t\t\t||  ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "org.appextension.find-login-action"
            \t\t\t||  ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "org.appextension.save-login-action"
            \t\t\t||  ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "org.appextension.change-password-action"
            \t\t\t||  ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "org.appextension.fill-webview-action"
            \t\t\t||  ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "org.appextension.fill-browser-action"
                        ||  ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "com.8bit.bitwarden.extension-setup"
            \t\t).@count == $extensionItem.attachments.@count
            \t).@count == 1
            """,
            [
                Expect(items: [SampleItems.url()], accepted: true), Expect(items: [SampleItems.text], accepted: true),
                Expect(items: [ShareItem.text("{}", type: "org.appextension.find-login-action")], accepted: true),
                Expect(items: [SampleItems.pdf], accepted: false),
                Expect(items: [SampleItems.url(), SampleItems.pdf], accepted: false),
            ])

        // PDF-Archiver/PDF-Archiver ShareExtension/Info.plist: an image, a URL or a PDF among the attachments
        check(
            "PDF-Archiver ShareExtension",
            """
            SUBQUERY(extensionItems, $extensionItem, SUBQUERY($extensionItem.attachments, $attachment, ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.image").@count >= 1).@count >= 1
            OR SUBQUERY(extensionItems, $extensionItem, SUBQUERY($extensionItem.attachments, $attachment, ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "public.url").@count >= 1).@count >= 1
            OR SUBQUERY(extensionItems, $extensionItem, SUBQUERY($extensionItem.attachments, $attachment, ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "com.adobe.pdf").@count >= 1).@count >= 1
            """,
            [
                Expect(items: [SampleItems.pdf], accepted: true), Expect(items: [SampleItems.png], accepted: true),
                Expect(items: [SampleItems.text], accepted: false),
                Expect(items: [SampleItems.text, SampleItems.pdf], accepted: true),
            ])

        // AlexandreFenyo/youtubenopub ShareExtension/Info.plist
        check(
            "youtubenopub ShareExtension",
            "SUBQUERY(extensionItems, $extensionItem, SUBQUERY($extensionItem.attachments, $attachment, ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO \"public.data\").@count > 0).@count > 0",
            [Expect(items: [SampleItems.url()], accepted: true), Expect(items: [SampleItems.mov], accepted: true)])

        // Apple, App Extension Programming Guide, "Declaring Supported Data Types for a Share or Action Extension":
        // "exactly one PDF file" (every attachment conforms, one extension item).
        check(
            "App Extension Programming Guide (PDF)",
            """
            SUBQUERY (
                extensionItems,
                $extensionItem,
                SUBQUERY (
                    $extensionItem.attachments,
                    $attachment,
                    ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "com.adobe.pdf"
                ).@count == $extensionItem.attachments.@count
            ).@count == 1
            """,
            [
                Expect(items: [SampleItems.pdf], accepted: true),
                Expect(items: [SampleItems.pdf, SampleItems.png], accepted: false),
            ])

        // Apple, same section: "a more complex predicate statement".
        check(
            "App Extension Programming Guide (action-one/two)",
            """
            SUBQUERY (
                extensionItems,
                $extensionItem,
                SUBQUERY (
                    $extensionItem.attachments,
                    $attachment,
                    ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "org.appextension.action-one" ||
                    ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "org.appextension.action-two"
                ).@count == $extensionItem.attachments.@count
            ).@count == 1
            """,
            [Expect(items: [SampleItems.custom], accepted: true), Expect(items: [SampleItems.url()], accepted: false)])

        // The Xcode template's development stub (e.g. seed 002 before its fix, react-native-share-extension#7).
        check("TRUEPREDICATE", "TRUEPREDICATE", [Expect(items: [SampleItems.pdf, SampleItems.url()], accepted: true)])

        // A rule from a Stack Overflow question (coderapp.vercel.app/answer/79290727) that "does not appear in the
        // share sheet": NSExtensionItems is not in the context, so the rule is false for everything.
        check(
            "Stack Overflow 79290727",
            "\n                ANY NSExtensionItems.attachments.contentTypeUTI == \"public.url\"\n            ",
            [Expect(items: [SampleItems.url()], accepted: false)])
    }

    func testPredicateReasons() throws {
        let rule = try ActivationRule(json: "ANY extensionItems.attachments.registeredTypeIdentifiers == 'x'")
        let r = rule.evaluate(sampleAttachments([SampleItems.url(), SampleItems.pdf]))
        XCTAssertEqual(
            r,
            ActivationResult(
                accepted: false,
                reason: "the activation predicate is false for the 2 items [public.url] [com.adobe.pdf]"))
        let e = try ActivationRule(json: "$x == 1").evaluate(sampleAttachments([SampleItems.url()]))
        XCTAssertEqual(
            e.reason,
            "the activation predicate cannot be evaluated for the 1 item [public.url]: variable $x is not defined")
        XCTAssertEqual(
            ActivationContext.extensionContext(sampleAttachments([SampleItems.textURL])),
            .object([
                "extensionItems": .array([
                    .object([
                        "attachments": .array([
                            .object([
                                "registeredTypeIdentifiers": .array([
                                    .string("public.plain-text"), .string("public.url"),
                                ])
                            ])
                        ])
                    ])
                ])
            ]))
    }
}
