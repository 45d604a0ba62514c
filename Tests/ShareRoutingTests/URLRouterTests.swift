// Table-driven tests for the url.open / url.canOpen decision: schemes, universal links (document choice,
// wildcard domains, most specific entry, mode suffix, ports, team IDs), browsers, http vs https,
// fallbacks, conflicts, malformed documents, the seeds' URLs, and the explanation.

import ShareProtocol
import ShareRouting
import XCTest

private func docResult(_ json: String) -> AssociationDocumentResult { AssociationDocument.load(Array(json.utf8)) }

private func allFor(_ appIDs: String...) -> AssociationDocumentResult {
    let ids = appIDs.map { "\"\($0)\"" }.joined(separator: ",")
    return docResult(#"{"applinks":{"details":[{"appIDs":["# + ids + #"],"components":[{"/":"*"}]}]}}"#)
}

struct RouteCase {
    var url: String
    var fallback: String? = nil
    var expect: RouteDecision
    var line: UInt = #line
}

private func routed(_ app: String, _ via: RouteVia, _ kind: RouteKind, _ url: String) -> RouteDecision {
    .routed(app: app, via: via, kind: kind, url: url)
}

final class URLRouterTests: XCTestCase {
    /// A small world: the seeds' apps plus browsers and universal-link apps.
    func world() -> URLRouter {
        let apps = [
            AppManifest(bundleID: "com.mycompany.myapp", teamID: "ABCDE12345", urlSchemes: ["deeplinkmyapp"],
                        associatedDomains: ["applinks:example.com", "applinks:*.example.org"]),
            AppManifest(bundleID: "com.bluemango.DeepLinkingDemo", urlSchemes: ["DeepLinkingDemo"]),
            AppManifest(bundleID: "com.example.stats", teamID: "STATS12345", urlSchemes: ["stats"]),
            AppManifest(bundleID: "com.razeware.UniveralLinksTutorial", teamID: "KFCNEC27GU",
                        associatedDomains: ["applinks:rw-universal-links-final.herokuapp.com"]),
            AppManifest(bundleID: "org.mozilla.browser", urlSchemes: ["https", "HTTP"]),
            AppManifest(bundleID: "com.other.browser", urlSchemes: ["https"]),
            AppManifest(bundleID: "com.noteam.app", associatedDomains: ["applinks:noteam.example"]),
        ]
        let associations: [String: AssociationDocumentResult] = [
            "example.com": docResult(
                #"""
                {"applinks":{"details":[{"appIDs":["ABCDE12345.com.mycompany.myapp"],"components":[
                  {"/":"/private/*","exclude":true},{"/":"/items/*"}]}]}}
                """#),
            "example.org": allFor("ABCDE12345.com.mycompany.myapp"),
            "rw-universal-links-final.herokuapp.com": docResult(
                #"{"applinks":{"apps":[],"details":[{"appID":"KFCNEC27GU.com.razeware.UniveralLinksTutorial","paths":["*"]}]}}"#),
            "noteam.example": allFor("X.com.noteam.app"),
        ]
        return URLRouter(apps: apps, associations: associations)
    }

    func testRoutingTable() {
        let r = world()
        let cases: [RouteCase] = [
            // Custom schemes, case-insensitive; the URL is delivered as written.
            RouteCase(url: "deeplinkmyapp://open-from-share?share=S1",
                      expect: routed("com.mycompany.myapp", .scheme, .openURL, "deeplinkmyapp://open-from-share?share=S1")),
            RouteCase(url: "DeepLinkMyApp://x", expect: routed("com.mycompany.myapp", .scheme, .openURL, "DeepLinkMyApp://x")),
            RouteCase(url: "DeepLinkingDemo://customerdetail?id=practice",
                      expect: routed("com.bluemango.DeepLinkingDemo", .scheme, .openURL, "DeepLinkingDemo://customerdetail?id=practice")),
            RouteCase(url: "deeplinkingdemo://customerdetail?id=42",
                      expect: routed("com.bluemango.DeepLinkingDemo", .scheme, .openURL, "deeplinkingdemo://customerdetail?id=42")),
            RouteCase(url: "stats://watchlist?id=1&name=South%20Korea&iso=KR",
                      expect: routed("com.example.stats", .scheme, .openURL, "stats://watchlist?id=1&name=South%20Korea&iso=KR")),
            // Universal links (exact host, legacy document from seed 003).
            RouteCase(url: "https://example.com/items/7",
                      expect: routed("com.mycompany.myapp", .universalLink, .continueUserActivity, "https://example.com/items/7")),
            RouteCase(url: "https://EXAMPLE.com/items/7",
                      expect: routed("com.mycompany.myapp", .universalLink, .continueUserActivity, "https://EXAMPLE.com/items/7")),
            RouteCase(url: "https://rw-universal-links-final.herokuapp.com/arduino",
                      expect: routed("com.razeware.UniveralLinksTutorial", .universalLink, .continueUserActivity,
                                     "https://rw-universal-links-final.herokuapp.com/arduino")),
            // Excluded or unmatched paths go to the browser (the earlier of two https browsers).
            RouteCase(url: "https://example.com/private/1",
                      expect: routed("org.mozilla.browser", .browser, .openURL, "https://example.com/private/1")),
            RouteCase(url: "https://example.com/other",
                      expect: routed("org.mozilla.browser", .browser, .openURL, "https://example.com/other")),
            // Wildcard entry: subdomains of example.org (any depth) use example.org's document; not the apex.
            RouteCase(url: "https://shop.example.org/x",
                      expect: routed("com.mycompany.myapp", .universalLink, .continueUserActivity, "https://shop.example.org/x")),
            RouteCase(url: "https://a.b.example.org/x",
                      expect: routed("com.mycompany.myapp", .universalLink, .continueUserActivity, "https://a.b.example.org/x")),
            RouteCase(url: "https://example.org/x", expect: routed("org.mozilla.browser", .browser, .openURL, "https://example.org/x")),
            // http skips universal links; its browser registers http (case-insensitively).
            RouteCase(url: "http://example.com/items/7",
                      expect: routed("org.mozilla.browser", .browser, .openURL, "http://example.com/items/7")),
            // No team ID: no universal link.
            RouteCase(url: "https://noteam.example/x", expect: routed("org.mozilla.browser", .browser, .openURL, "https://noteam.example/x")),
            // A port that is not 443 is another domain; :443 is the same.
            RouteCase(url: "https://example.com:8443/items/7",
                      expect: routed("org.mozilla.browser", .browser, .openURL, "https://example.com:8443/items/7")),
            RouteCase(url: "https://example.com:443/items/7",
                      expect: routed("com.mycompany.myapp", .universalLink, .continueUserActivity, "https://example.com:443/items/7")),
            // Nothing registers the scheme: fallback routed the same way, else no handler.
            RouteCase(url: "unknown://x", fallback: "stats://home",
                      expect: routed("com.example.stats", .fallback, .openURL, "stats://home")),
            RouteCase(url: "unknown://x", fallback: "https://example.com/items/9",
                      expect: routed("com.mycompany.myapp", .fallback, .continueUserActivity, "https://example.com/items/9")),
            RouteCase(url: "unknown://x", fallback: "https://bluemangoglobal.com",
                      expect: routed("org.mozilla.browser", .fallback, .openURL, "https://bluemangoglobal.com")),
            RouteCase(url: "unknown://x", expect: .noHandler(url: "unknown://x", fallback: nil)),
            RouteCase(url: "unknown://x", fallback: "other-unknown://y", expect: .noHandler(url: "unknown://x", fallback: "other-unknown://y")),
            // A URL that resolves ignores the fallback.
            RouteCase(url: "stats://a", fallback: "deeplinkmyapp://b", expect: routed("com.example.stats", .scheme, .openURL, "stats://a")),
        ]
        for c in cases {
            XCTAssertEqual(r.resolve(c.url, fallback: c.fallback), c.expect, c.url, line: c.line)
            XCTAssertEqual(r.explain(c.url, fallback: c.fallback).decision, c.expect, "explain agrees: \(c.url)", line: c.line)
        }
    }

    func testInvalidURLsAndFallbacks() {
        let r = world()
        let bad = r.resolve("foo bar", fallback: nil)
        XCTAssertEqual(bad.errorCode, -32602)
        XCTAssertEqual(bad.errorMessage, "invalid URL 'foo bar': missing scheme (expected SCHEME:..., e.g. 'https://example.com/' or 'myapp://open')")
        // Seed 001's unencoded message is opened encoded, as iOS 17's URL(string:) does (before
        // it, the seed's `URL(string: path)!` crashed).
        let seed = r.resolve("DeepLinkingDemo://customerdetail?id=Hi Deep Linking", fallback: nil)
        XCTAssertEqual(
            seed, routed("com.bluemango.DeepLinkingDemo", .scheme, .openURL, "DeepLinkingDemo://customerdetail?id=Hi%20Deep%20Linking"))
        XCTAssertEqual(r.resolve("DeepLinkingDemo://customerdetail?id=\u{7}", fallback: nil).errorCode, -32602, "a control character is not encoded")
        let badFallback = r.resolve("unknown://x", fallback: "https:///nohost")
        XCTAssertEqual(badFallback.errorCode, -32602)
        XCTAssertEqual(
            badFallback.errorMessage, "invalid fallback URL 'https:///nohost': an https URL needs a host (e.g. 'https://example.com/')")
        if case .invalidFallback(let e) = badFallback { XCTAssertEqual(e.input, "https:///nohost") } else { XCTFail("\(badFallback)") }
        // An invalid fallback is an error even when the URL itself would resolve.
        XCTAssertEqual(r.resolve("stats://a", fallback: "bad fallback").errorCode, -32602)
        let none = r.resolve("unknown://x", fallback: nil)
        XCTAssertEqual(none.errorCode, -32004)
        XCTAssertEqual(none.errorMessage, "no handler for 'unknown://x' and no fallback was given")
        XCTAssertEqual(
            r.resolve("unknown://x", fallback: "nope://y").errorMessage,
            "no handler for 'unknown://x', nor for its fallback 'nope://y'")
    }

    func testNoBrowserMeansNoHandler() {
        let r = URLRouter(apps: [AppManifest(bundleID: "a.b", urlSchemes: ["myapp"])], associations: [:])
        XCTAssertEqual(r.resolve("https://example.com/", fallback: nil), .noHandler(url: "https://example.com/", fallback: nil))
        XCTAssertEqual(r.resolve("http://example.com/", fallback: "myapp://x"), routed("a.b", .fallback, .openURL, "myapp://x"))
    }

    func testHTTPBrowserIsTheAppRegisteringHTTP() {
        let r = URLRouter(
            apps: [AppManifest(bundleID: "secure.only", urlSchemes: ["https"]), AppManifest(bundleID: "plain", urlSchemes: ["http"])],
            associations: [:])
        XCTAssertEqual(r.resolve("http://h/", fallback: nil).app, "plain")
        XCTAssertEqual(r.resolve("https://h/", fallback: nil).app, "secure.only")
    }

    func testConflictsEarlierAppWins() {
        let r = URLRouter(
            apps: [
                AppManifest(bundleID: "first", urlSchemes: ["shared", "https"]),
                AppManifest(bundleID: "second", urlSchemes: ["SHARED", "https"]),
                AppManifest(bundleID: "third", urlSchemes: ["unique", "Shared"]),
            ], associations: [:])
        XCTAssertEqual(r.conflicts, ["shared": ["first", "second", "third"], "https": ["first", "second"]])
        XCTAssertEqual(r.resolve("shared://x", fallback: nil).app, "first")
        XCTAssertEqual(r.resolve("https://h/", fallback: nil).app, "first")
        let steps = r.explain("Shared://x", fallback: nil).steps
        XCTAssertEqual(steps, ["the scheme 'shared' is registered by first, second, third: first wins (earliest app: first manifest in file-name order)"])
    }

    func testUniversalLinkConflicts() {
        // Two apps, two documents (exact host vs wildcard): the earlier app wins.
        let apps = [
            AppManifest(bundleID: "com.one", teamID: "T1", associatedDomains: ["applinks:*.example.com"]),
            AppManifest(bundleID: "com.two", teamID: "T2", associatedDomains: ["applinks:www.example.com"]),
        ]
        let docs = ["example.com": allFor("T1.com.one"), "www.example.com": allFor("T2.com.two")]
        XCTAssertEqual(URLRouter(apps: apps, associations: docs).resolve("https://www.example.com/", fallback: nil).app, "com.one")
        XCTAssertEqual(
            URLRouter(apps: apps.reversed(), associations: docs).resolve("https://www.example.com/", fallback: nil).app, "com.two")

        // Two apps in one document: the document's order decides ("first match wins"), then app order.
        let shared = docResult(
            #"""
            {"applinks":{"details":[
              {"appIDs":["T2.com.two"],"components":[{"/":"/two/*"}]},
              {"appIDs":["T1.com.one"],"components":[{"/":"*"}]}]}}
            """#)
        let sameDoc = URLRouter(
            apps: [
                AppManifest(bundleID: "com.one", teamID: "T1", associatedDomains: ["applinks:example.net"]),
                AppManifest(bundleID: "com.two", teamID: "T2", associatedDomains: ["applinks:example.net"]),
            ], associations: ["example.net": shared])
        XCTAssertEqual(sameDoc.resolve("https://example.net/two/x", fallback: nil).app, "com.two")
        XCTAssertEqual(sameDoc.resolve("https://example.net/other", fallback: nil).app, "com.one")
        XCTAssertTrue(
            sameDoc.explain("https://example.net/two/x", fallback: nil).steps.contains(
                "universal link matched for com.one, com.two: com.two wins (its details entry comes first in the shared document 'example.net')"))
        let bothInOneDetail = URLRouter(
            apps: [
                AppManifest(bundleID: "com.one", teamID: "T1", associatedDomains: ["applinks:example.net"]),
                AppManifest(bundleID: "com.two", teamID: "T2", associatedDomains: ["applinks:example.net"]),
            ], associations: ["example.net": allFor("T2.com.two", "T1.com.one")])
        XCTAssertEqual(bothInOneDetail.resolve("https://example.net/x", fallback: nil).app, "com.one")
    }

    func testWildcardUsesTheParentDocumentNotTheSubdomainOne() {
        let apps = [AppManifest(bundleID: "w", teamID: "T", associatedDomains: ["applinks:*.example.com"])]
        // Only the subdomain serves a document: a wildcard entry uses the root domain's (TN3155), so no link.
        let r1 = URLRouter(apps: apps, associations: ["shop.example.com": allFor("T.w")])
        XCTAssertEqual(r1.resolve("https://shop.example.com/x", fallback: nil), .noHandler(url: "https://shop.example.com/x", fallback: nil))
        XCTAssertTrue(
            r1.explain("https://shop.example.com/x", fallback: nil).steps.contains(
                "  w: 'applinks:*.example.com' covers subdomains of 'example.com' and uses its document, but there is none (associations/example.com.json)"))
        let r2 = URLRouter(apps: apps, associations: ["example.com": allFor("T.w")])
        XCTAssertEqual(r2.resolve("https://shop.example.com/x", fallback: nil).via, .universalLink)
        XCTAssertEqual(r2.resolve("https://example.com/x", fallback: nil).via, nil)  // the apex is not covered
        // A host with an empty label is no subdomain (conformance probe): no universal link.
        for u in ["https://.example.com/x", "https://..example.com/x", "https://a..example.com/x", "https://a.b..example.com/x"] {
            XCTAssertEqual(r2.resolve(u, fallback: nil).via, nil, u)
            XCTAssertTrue(r2.explain(u, fallback: nil).steps.contains { $0.hasSuffix("has an empty label: no universal link") }, u)
        }
        XCTAssertEqual(r2.resolve("https://a.b.example.com/x", fallback: nil).via, .universalLink)
        // Nor is it an exact entry's host.
        let exact = URLRouter(
            apps: [AppManifest(bundleID: "e", teamID: "T", associatedDomains: ["applinks:example.com"])],
            associations: ["example.com": allFor("T.e")])
        XCTAssertEqual(exact.resolve("https://example.com/x", fallback: nil).via, .universalLink)
        XCTAssertEqual(exact.resolve("https://.example.com/x", fallback: nil).via, nil)
        // An entry whose host has an empty label is refused.
        for entry in ["applinks:a..example.com", "applinks:*..example.com", "applinks:*.a..b"] {
            XCTAssertNotNil(AssociatedDomainEntry.problem(in: entry), entry)
        }
    }

    func testMostSpecificEntryCounts() {
        // The exact entry beats the wildcards; the longest wildcard beats the shorter one.
        let app = AppManifest(
            bundleID: "m", teamID: "T",
            associatedDomains: ["applinks:*.example.com", "applinks:*.shop.example.com", "applinks:eu.shop.example.com"])
        let docs: [String: AssociationDocumentResult] = [
            "example.com": allFor("T.m"),
            "shop.example.com": docResult(#"{"applinks":{"details":[{"appIDs":["T.m"],"components":[{"/":"/shop/*"}]}]}}"#),
            "eu.shop.example.com": docResult(#"{"applinks":{"details":[{"appIDs":["T.m"],"components":[{"/":"/eu/*"}]}]}}"#),
        ]
        let r = URLRouter(apps: [app], associations: docs)
        let cases: [(String, RouteVia?, UInt)] = [
            ("https://eu.shop.example.com/eu/1", .universalLink, #line),  // exact entry, its document
            ("https://eu.shop.example.com/shop/1", nil, #line),  // the less specific entries do not count
            ("https://us.shop.example.com/shop/1", .universalLink, #line),  // longest wildcard
            ("https://us.shop.example.com/other", nil, #line),  // *.example.com does not count here
            ("https://www.example.com/other", .universalLink, #line),
        ]
        for (u, via, line) in cases { XCTAssertEqual(r.resolve(u, fallback: nil).via, via, u, line: line) }
        let steps = r.explain("https://eu.shop.example.com/shop/1", fallback: nil).steps
        XCTAssertTrue(steps.contains("  m's 'applinks:*.shop.example.com' is less specific than 'applinks:eu.shop.example.com' and does not count"), "\(steps)")
    }

    func testModeSuffixAndOtherServices() {
        let apps = [
            AppManifest(bundleID: "dev", teamID: "T", associatedDomains: ["applinks:dev.example.com?mode=developer"]),
            AppManifest(bundleID: "creds", teamID: "T", associatedDomains: ["webcredentials:creds.example.com"]),
        ]
        let r = URLRouter(apps: apps, associations: ["dev.example.com": allFor("T.dev"), "creds.example.com": allFor("T.creds")])
        XCTAssertEqual(
            r.resolve("https://dev.example.com/a", fallback: nil),
            routed("dev", .universalLink, .continueUserActivity, "https://dev.example.com/a"))
        XCTAssertTrue(
            r.explain("https://dev.example.com/a", fallback: nil).steps.contains {
                $0.contains("?mode=developer: honoured")
            })
        // Only applinks: entries give universal links.
        XCTAssertNil(r.resolve("https://creds.example.com/a", fallback: nil).app)
    }

    func testPortEntries() {
        let app = AppManifest(bundleID: "p", teamID: "T", associatedDomains: ["applinks:example.com:8443"])
        let r = URLRouter(apps: [app], associations: ["example.com:8443": allFor("T.p")])
        XCTAssertEqual(r.resolve("https://example.com:8443/a", fallback: nil).via, .universalLink)
        XCTAssertNil(r.resolve("https://example.com/a", fallback: nil).via)
    }

    func testMalformedDocumentMatchesNothingAndIsExplained() {
        let app = AppManifest(bundleID: "b", teamID: "T", associatedDomains: ["applinks:broken.example"])
        let r = URLRouter(
            apps: [app, AppManifest(bundleID: "browser", urlSchemes: ["https"])],
            associations: ["BROKEN.example": docResult(#"{"applinks":{"details":[{"appIDs":["T.b"],"components":[{"exclude":1}]}]}}"#)])
        XCTAssertEqual(r.resolve("https://broken.example/x", fallback: nil), routed("browser", .browser, .openURL, "https://broken.example/x"))
        XCTAssertTrue(
            r.explain("https://broken.example/x", fallback: nil).steps.contains(
                "  b: 'applinks:broken.example' uses the document of 'broken.example', which is malformed (applinks.details[0].components[0].exclude: expected a boolean, got number); it matches nothing"))
    }

    func testTeamlessAppIsExplained() {
        let steps = world().explain("https://noteam.example/x", fallback: nil).steps
        XCTAssertTrue(steps.contains("  com.noteam.app has no teamID, so it has no app ID and cannot get universal links"), "\(steps)")
    }

    func testExplainFullStory() {
        let e = world().explain("https://example.com/private/1", fallback: nil)
        XCTAssertEqual(
            e.steps,
            [
                "applinks: entries covering 'example.com': com.mycompany.myapp ('applinks:example.com')",
                "  com.mycompany.myapp (ABCDE12345.com.mycompany.myapp): 'applinks:example.com' uses the document of 'example.com'",
                "    details[0] lists ABCDE12345.com.mycompany.myapp; trying its 2 components in order",
                #"    details[0].components[0] {"/":"/private/*","exclude":true} matches and excludes: not a universal link for ABCDE12345.com.mycompany.myapp"#,
                "no app gets 'https://example.com/private/1' as a universal link",
                "the scheme 'https' is registered by org.mozilla.browser, com.other.browser: org.mozilla.browser wins (earliest app: first manifest in file-name order) as the browser",
            ])
        XCTAssertEqual(e.decision, routed("org.mozilla.browser", .browser, .openURL, "https://example.com/private/1"))
        XCTAssertEqual(
            e.json.compactText,
            #"{"url":"https://example.com/private/1","steps":["# + e.steps.map { JSONValue.string($0).compactText }.joined(separator: ",")
                + #"],"decision":{"app":"org.mozilla.browser","via":"browser","kind":"openURL","url":"https://example.com/private/1"},"text":"#
                + JSONValue.string(e.text).compactText + "}")
        XCTAssertTrue(e.text.hasSuffix("decision: org.mozilla.browser opens 'https://example.com/private/1' via browser (openURL)"))
    }

    func testExplainFallbackThroughUniversalLink() {
        let e = world().explain("nothing://x", fallback: "https://shop.example.org/p")
        XCTAssertEqual(e.decision, routed("com.mycompany.myapp", .fallback, .continueUserActivity, "https://shop.example.org/p"))
        XCTAssertEqual(e.steps.first, "no app registers the scheme 'nothing'")
        XCTAssertEqual(e.steps[1], "trying the fallback 'https://shop.example.org/p', routed the same way")
        XCTAssertTrue(e.steps[2].hasPrefix("  applinks: entries covering 'shop.example.org'"), e.steps[2])
        XCTAssertEqual(
            e.steps.last,
            "the fallback is opened by com.mycompany.myapp (found via universalLink, delivered as continueUserActivity)")
        XCTAssertEqual(
            e.json["decision"],
            ["app": "com.mycompany.myapp", "via": "fallback", "kind": "continueUserActivity", "url": "https://shop.example.org/p"])
        XCTAssertEqual(e.json["fallback"], "https://shop.example.org/p")
        let err = world().explain("nothing://x", fallback: nil)
        XCTAssertEqual(err.json["decision"], ["error": ["code": -32004, "message": "no handler for 'nothing://x' and no fallback was given"]])
    }

    func testCanOpen() throws {
        let r = world()
        XCTAssertEqual(try r.canOpen("stats://x"), CanOpenAnswer(canOpen: true, app: "com.example.stats", via: .scheme))
        XCTAssertEqual(
            try r.canOpen("https://example.com/items/1"),
            CanOpenAnswer(canOpen: true, app: "com.mycompany.myapp", via: .universalLink))
        XCTAssertEqual(try r.canOpen("nope://x"), CanOpenAnswer(canOpen: false, app: nil, via: nil))
        XCTAssertEqual(try r.canOpen("nope://x").json, ["canOpen": false])
        XCTAssertEqual(try r.canOpen("stats://x").json, ["canOpen": true, "app": "com.example.stats", "via": "scheme"])
        XCTAssertThrowsError(try r.canOpen("bad url")) { error in
            XCTAssertEqual((error as? URLParseError)?.message, "invalid URL 'bad url': missing scheme (expected SCHEME:..., e.g. 'https://example.com/' or 'myapp://open')")
        }
    }

    func testManyAppsAndDocumentsResolveThroughIndexes() {
        // 1,000 apps, each with a scheme and a domain, and 1,000 documents: decisions stay fast.
        var apps: [AppManifest] = []
        var docs: [String: AssociationDocumentResult] = [:]
        for i in 0..<1000 {
            apps.append(AppManifest(bundleID: "com.bench.app\(i)", teamID: "TEAM\(i)", urlSchemes: ["bench\(i)"],
                                    associatedDomains: ["applinks:site\(i).example", "applinks:*.wild\(i).example"]))
            docs["site\(i).example"] = allFor("TEAM\(i).com.bench.app\(i)")
            docs["wild\(i).example"] = allFor("TEAM\(i).com.bench.app\(i)")
        }
        apps.append(AppManifest(bundleID: "browser", urlSchemes: ["https"]))
        let r = URLRouter(apps: apps, associations: docs)
        XCTAssertEqual(r.resolve("bench999://x", fallback: nil).app, "com.bench.app999")
        XCTAssertEqual(r.resolve("https://site500.example/a", fallback: nil).app, "com.bench.app500")
        XCTAssertEqual(r.resolve("https://a.wild7.example/a", fallback: nil).app, "com.bench.app7")
        XCTAssertEqual(r.resolve("https://unknown.example/a", fallback: nil).app, "browser")
        let start = ContinuousClock.now
        for i in 0..<10_000 {
            _ = r.resolve("https://site\(i % 1000).example/p?q=\(i)", fallback: nil)
            _ = r.resolve("bench\(i % 1000)://open", fallback: nil)
        }
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(10))
    }
}
