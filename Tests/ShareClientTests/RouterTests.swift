// Router and RoutePattern: the four seed patterns (001 customerdetail, 003 universal link,
// 004 watchlist, open-from-share), unicode and reserved characters, build → match round trips
// with a seeded generator, missing values, non-matching URLs, case-insensitive schemes, extra query
// parameters, `+` handling, rest captures, invalid patterns, and dispatch to handlers.

import Foundation
import ShareClient
import ShareProtocol
import Testing

@Suite struct RouterTests {
    let customer = "DeepLinkingDemo://customerdetail?id=:id"
    let watchlist = "stats://watchlist?id=:id&name=:name&iso=:iso"
    let computers = "https://example.com/computers/:slug"
    let fromShare = "deeplinkmyapp://open-from-share"

    func pattern(_ p: String) throws -> RoutePattern { try RoutePattern(p) }

    // MARK: Seed 001: DeepLinkingDemo://customerdetail?id=...

    @Test func seed001CustomerDetail() throws {
        let p = try pattern(customer)
        #expect(p.match("DeepLinkingDemo://customerdetail?id=practice")?.string("id") == "practice")
        // Scheme and host are case-insensitive.
        #expect(p.match("deeplinkingdemo://CUSTOMERDETAIL?id=practice")?.string("id") == "practice")
        // The seed's "Hi Deep Linking" built correctly, and the unencoded form the seed produced, both match.
        let built = try p.build(["id": "Hi Deep Linking"])
        #expect(built == "DeepLinkingDemo://customerdetail?id=Hi%20Deep%20Linking")
        #expect(p.match(built)?.string("id") == "Hi Deep Linking")
        #expect(p.match("DeepLinkingDemo://customerdetail?id=Hi Deep Linking")?.string("id") == "Hi Deep Linking")
        // Not this route.
        #expect(p.match("DeepLinkingDemo://customerlist?id=1") == nil)
        #expect(p.match("OtherDemo://customerdetail?id=1") == nil)
        #expect(p.match("DeepLinkingDemo://customerdetail") == nil, "id is required")
        #expect(p.match("DeepLinkingDemo://customerdetail/extra?id=1") == nil)
        #expect(p.match("not a url") == nil)
    }

    // MARK: Seed 004: stats://watchlist?id=&name=&iso=

    @Test func seed004WatchlistWithUnicodeAndAmpersand() throws {
        let p = try pattern(watchlist)
        let korea = try p.build(["id": "410", "name": "대한민국", "iso": "KOR"])
        #expect(korea == "stats://watchlist?id=410&name=%EB%8C%80%ED%95%9C%EB%AF%BC%EA%B5%AD&iso=KOR")
        let m = try #require(p.match(korea))
        #expect(m.int("id") == 410)
        #expect(m.string("name") == "대한민국")
        #expect(m.string("iso") == "KOR")

        let stp = ["id": "678", "name": "São Tomé & Príncipe", "iso": "STP"]
        let built = try p.build(stp)
        #expect(built == "stats://watchlist?id=678&name=S%C3%A3o%20Tom%C3%A9%20%26%20Pr%C3%ADncipe&iso=STP")
        #expect(try #require(p.match(built)).parameters == stp)
        #expect(URL(string: built) != nil, "a valid URL without any fix-up")
    }

    @Test func seed004HandBuiltURLLosesTheNameButTheRouterDoesNot() throws {
        // What seed 004 does: interpolate, then addingPercentEncoding(.urlQueryAllowed), which
        // leaves '&' alone, so the name is cut at the '&' and " Príncipe" becomes a parameter.
        let name = "São Tomé & Príncipe"
        let byHand = try #require(
            "stats://watchlist?id=678&name=\(name)&iso=STP".addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed))
        let p = try pattern(watchlist)
        #expect(p.match(byHand)?.string("name") == "São Tomé ")
        let built = try Router.build(watchlist, values: ["id": "678", "name": name, "iso": "STP"])
        #expect(p.match(built)?.string("name") == name)
    }

    @Test func queryOrderExtraParametersAndMissingOnes() throws {
        let p = try pattern(watchlist)
        let m = try #require(p.match("STATS://watchlist?iso=KOR&utm_source=widget&name=Korea&id=410&flag"))
        #expect(m.parameters == ["id": "410", "name": "Korea", "iso": "KOR"])
        #expect(m.string("utm_source") == "widget", "extra parameters are ignored but readable")
        #expect(m.string("flag") == "")
        #expect(m.queryItems.count == 5)
        #expect(p.match("stats://watchlist?id=410&name=Korea") == nil, "iso is missing")
        #expect(p.match("stats://summary?id=1&name=a&iso=b") == nil)
        // The first of duplicated parameters counts.
        #expect(p.match("stats://watchlist?id=1&id=2&name=a&iso=b")?.string("id") == "1")
    }

    @Test func buildThrowsForMissingValuesInsteadOfCrashing() throws {
        #expect(throws: RouterError.missingValue(name: "iso", pattern: watchlist)) {
            try Router.build(watchlist, values: ["id": "1", "name": "x"])
        }
        #expect(throws: RouterError.missingValue(name: "slug", pattern: computers)) {
            try Router.build(computers, values: [:])
        }
        #expect(throws: RouterError.emptyValue(name: "slug", pattern: computers)) {
            try Router.build(computers, values: ["slug": ""])
        }
        // An empty query value is fine.
        #expect(try Router.build(customer, values: ["id": ""]) == "DeepLinkingDemo://customerdetail?id=")
        #expect(try pattern(customer).match("DeepLinkingDemo://customerdetail?id=")?.string("id") == "")
    }

    // MARK: Seed 003: https://example.com/computers/:slug

    @Test func seed003UniversalLinkPath() throws {
        let p = try pattern(computers)
        #expect(p.match("https://example.com/computers/raspberry-pi")?.string("slug") == "raspberry-pi")
        #expect(p.match("HTTPS://Example.COM/computers/raspberry-pi/")?.string("slug") == "raspberry-pi")
        #expect(p.match("https://example.com/computers/beagle?ref=mail#specs")?.fragment == "specs")
        #expect(p.match("https://example.com/computers/caf%C3%A9%2Fbar")?.string("slug") == "café/bar")
        #expect(p.match("https://example.com/computers/") == nil)
        #expect(p.match("https://example.com/computers") == nil)
        #expect(p.match("https://example.com/computers/a/b") == nil)
        #expect(p.match("https://example.com/Computers/a") == nil, "paths are case-sensitive by default")
        #expect(p.match("https://other.example/computers/a") == nil)
        #expect(p.match("http://example.com/computers/a") == nil)
        #expect(try p.build(["slug": "a/b c?#"]) == "https://example.com/computers/a%2Fb%20c%3F%23")
        #expect(try p.build(["slug": ".."]) == "https://example.com/computers/%2E%2E")
        #expect(p.match(try p.build(["slug": ".."]))?.string("slug") == "..")

        var insensitive = Router(options: RouteOptions(caseSensitivePaths: false))
        try insensitive.add(computers) { _ in }
        #expect(insensitive.match("https://example.com/COMPUTERS/a")?.string("slug") == "a")
        #expect(insensitive.match(URL(string: "https://example.com/computers/pi")!)?.string("slug") == "pi")
    }

    // MARK: open-from-share

    @Test func openFromShareReadsTheShareParameterFromTheQuery() throws {
        let p = try pattern(fromShare)
        let m = try #require(p.match("deeplinkmyapp://open-from-share?share=sh-42"))
        #expect(m.string("share") == "sh-42")
        #expect(m["share"] == "sh-42")
        #expect(m.parameters.isEmpty)
        #expect(throws: RouterError.missingParameter(name: "nope")) { try m.require("nope") }
        #expect(throws: RouterError.invalidParameter(name: "share", value: "sh-42", expected: "an integer")) {
            try m.requireInt("share")
        }
        #expect(p.match("deeplinkmyapp://open-from-share") != nil)
        #expect(p.match("deeplinkmyapp://open-from-share/") != nil)
        #expect(p.match("deeplinkmyapp://open-from-elsewhere") == nil)
        #expect(try p.build([:]) == fromShare)
        #expect(try Router.build("deeplinkmyapp://open-from-share?share=:share", values: ["share": "a&b"])
            == "deeplinkmyapp://open-from-share?share=a%26b")
    }

    // MARK: Encoding details

    @Test func plusIsNotASpaceUnlessFormDecoding() throws {
        let p = try pattern(watchlist)
        let url = "stats://watchlist?id=1&name=a+b%20c&iso=x"
        #expect(p.match(url)?.string("name") == "a+b c")
        #expect(p.match(url, options: RouteOptions(formDecoding: true))?.string("name") == "a b c")
        let built = try p.build(["id": "1", "name": "1+1 = 2", "iso": "x"])
        #expect(built == "stats://watchlist?id=1&name=1%2B1%20%3D%202&iso=x")
        #expect(p.match(built)?.string("name") == "1+1 = 2")
        #expect(p.match(built, options: RouteOptions(formDecoding: true))?.string("name") == "1+1 = 2")
    }

    static let tricky: [String] = [
        "&", "=", "+", "#", "?", "/", " ", "%", "%20", "%zz", "a=b&c=d", "100%", "~-._", ":@!$'()*,;",
        "대한민국", "São Tomé & Príncipe", "👍🏽", "e\u{301}", "日本語/テキスト?", "line\nbreak", "tab\t", "\"quoted\"",
        "<>[]{}|\\^`", "..", ".", "a b+c",
    ]

    @Test(arguments: tricky)
    func reservedAndUnicodeRoundTrip(_ value: String) throws {
        let p = try pattern("myapp://item/:path?q=:q")
        let values = ["path": value, "q": value]
        let url = try p.build(values)
        #expect(url.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "only printable ASCII: \(url)")
        #expect(URL(string: url) != nil, "Foundation accepts \(url)")
        let m = try #require(p.match(url), "\(url)")
        #expect(m.parameters == values)
    }

    @Test func seededRandomRoundTrips() throws {
        var rng = SeededRNG(seed: 0x5EED_0004)
        let scalars: [Unicode.Scalar] =
            (0x20...0x7E).compactMap(Unicode.Scalar.init)
            + ["é", "ã", "ß", "ñ", "대", "한", "민", "국", "日", "本", "€", "😀", "👍", "\u{301}", "\u{200D}", "\u{FEFF}", "ℌ"]
        func randomString(_ rng: inout SeededRNG, min: Int) -> String {
            let n = Int.random(in: min...12, using: &rng)
            var s = String.UnicodeScalarView()
            for _ in 0..<n { s.append(scalars.randomElement(using: &rng)!) }
            return String(s)
        }
        let p = try pattern("stats://watchlist/:section/*rest?id=:id&name=:name&opt=:opt?")
        for i in 0..<1000 {
            var values = [
                "section": randomString(&rng, min: 1), "id": randomString(&rng, min: 0),
                "name": randomString(&rng, min: 0),
            ]
            if Bool.random(using: &rng) { values["opt"] = randomString(&rng, min: 0) }
            let restParts = (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                randomString(&rng, min: 1).replacingOccurrences(of: "/", with: "_")
            }
            values["rest"] = restParts.joined(separator: "/")
            let url = try p.build(values)
            guard let m = p.match(url) else {
                Issue.record("#\(i): \(url) does not match")
                continue
            }
            #expect(m.parameters == values, "#\(i): \(url)")
        }
    }

    // MARK: Pattern features

    @Test func restHostCaptureOptionalAndLiteralQuery() throws {
        let files = try pattern("myapp://files/*path")
        #expect(files.match("myapp://files/a/b%20c/d")?.string("path") == "a/b c/d")
        #expect(files.match("myapp://files")?.string("path") == "")
        #expect(try files.build(["path": "x y/z"]) == "myapp://files/x%20y/z")
        let star = try pattern("myapp://any/*")
        #expect(star.match("myapp://any/1/2")?.string("*") == "1/2")

        let section = try pattern("stats://:section")
        #expect(section.match("stats://summary")?.string("section") == "summary")
        #expect(section.match("stats://watchlist?id=1")?.string("section") == "watchlist")
        #expect(try section.build(["section": "top ten"]) == "stats://top%20ten")

        let optional = try pattern("myapp://search?q=:q&page=:page?")
        #expect(optional.match("myapp://search?q=x")?.parameters == ["q": "x"])
        #expect(optional.match("myapp://search?q=x&page=2")?.int("page") == 2)
        #expect(try optional.build(["q": "x"]) == "myapp://search?q=x")

        let literal = try pattern("myapp://doc?mode=edit&id=:id&debug")
        #expect(literal.match("myapp://doc?id=1&mode=edit&debug")?.string("id") == "1")
        #expect(literal.match("myapp://doc?id=1&mode=view&debug") == nil)
        #expect(literal.match("myapp://doc?id=1&mode=edit") == nil)
        #expect(try literal.build(["id": "7"]) == "myapp://doc?mode=edit&id=7&debug")

        let anyHost = try pattern("https://*/share/:id")
        #expect(anyHost.match("https://a.example.org/share/9")?.string("id") == "9")
        #expect(throws: RouterError.self) { try anyHost.build(["id": "9"]) }
        #expect(try pattern("myapp:compose/:to").match("myapp:compose/bob")?.string("to") == "bob")
        #expect(try pattern("myapp:compose/:to").match("myapp://compose/bob") == nil)
    }

    @Test(arguments: [
        "no scheme here", "://host", "1app://x", "myapp://x/*/y", "myapp://x/:id?id=:id", "myapp://x/:", "myapp://x#frag",
        "myapp://x?=1", "myapp://x?a=1&a=2", "myapp://x//y", "myapp://u@host/",
    ])
    func invalidPatterns(_ text: String) {
        #expect(throws: RouterError.self) { try RoutePattern(text) }
        var router = Router()
        #expect(throws: RouterError.self) { try router.add(text) { _ in } }
    }

    @Test func typedGetters() throws {
        let m = try #require(try pattern("myapp://x?n=:n&d=:d&b=:b").match("myapp://x?n=-12&d=2.5&b=YES"))
        #expect(m.int("n") == -12)
        #expect(m.double("d") == 2.5)
        #expect(m.bool("b") == true)
        #expect(m.int("d") == nil)
        #expect(m.bool("n") == nil)
        #expect(try m.requireInt("n") == -12)
    }

    // MARK: Dispatch

    actor Calls {
        var log: [String] = []
        func add(_ s: String) { log.append(s) }
    }

    struct Boom: Error {}

    @Test func routerDispatchesToTheFirstMatchingRoute() async throws {
        let calls = Calls()
        var router = Router()
        try router.add(customer) { m in
            let id = try m.require("id")
            await calls.add("customer \(id)")
        }
        try router.add(watchlist) { m in await calls.add("watchlist \(m.string("name")!)") }
        try router.add("stats://:section") { m in await calls.add("section \(m.string("section")!)") }
        try router.add(computers) { m in await calls.add("computer \(m.string("slug")!)") }
        try router.add("myapp://fail") { _ in throw Boom() }

        #expect(try await router.handle("DeepLinkingDemo://customerdetail?id=Hi%20Deep%20Linking"))
        #expect(try await router.handle(try router.build(watchlist, values: ["id": "1", "name": "대한민국", "iso": "KOR"])))
        #expect(try await router.handle("stats://summary"))
        #expect(try await router.handle("https://example.com/computers/pi") == true)
        #expect(try await router.handle("https://example.com/elsewhere") == false)
        await #expect(throws: Boom.self) { try await router.handle("myapp://fail") }

        let event = try #require(
            AppEvent(json: [
                "id": "ev-1", "kind": "continueUserActivity", "activityType": "NSUserActivityTypeBrowsingWeb",
                "webpageURL": "https://example.com/computers/beaglebone", "via": "universalLink",
            ]))
        #expect(event.url == "https://example.com/computers/beaglebone")
        #expect(try await router.handle(event))
        #expect(
            await calls.log == [
                "customer Hi Deep Linking", "watchlist 대한민국", "section summary", "computer pi", "computer beaglebone",
            ])
        #expect(router.routes.count == 5)
    }

    @Test func percentEncodingHelpers() {
        #expect(PercentEncoding.encode("a b/ü") == "a%20b%2F%C3%BC")
        #expect(PercentEncoding.decode("a%20b%2F%C3%BC") == "a b/ü")
        #expect(PercentEncoding.decode("100%") == "100%")
        #expect(PercentEncoding.decode("%4") == "%4")
        #expect(PercentEncoding.decode("%e2%82%ac") == "€")
        #expect(PercentEncoding.decode("a+b", plusAsSpace: true) == "a b")
        #expect(PercentEncoding.decode("%FF") == "\u{FFFD}")
    }
}
