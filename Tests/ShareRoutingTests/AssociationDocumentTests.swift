// Table-driven tests for apple-app-site-association parsing and matching: legacy paths (NOT, *, ?, first
// match wins), components (/ ? # exclude caseSensitive percentEncoded defaults), substitution variables
// ($(lang) $(region) predefined and custom), query dictionaries vs strings, and malformed documents.

import ShareProtocol
import ShareRouting
import XCTest

let appA = "ABCDE12345.com.example.app"
let appB = "ABCDE12345.com.example.app2"

func doc(_ json: String, file: StaticString = #filePath, line: UInt = #line) -> AssociationDocument {
    do { return try AssociationDocument(parsing: Array(json.utf8)) } catch {
        XCTFail("document rejected: \(error)", file: file, line: line)
        return try! AssociationDocument(parsing: Array(#"{"applinks":{"details":[]}}"#.utf8))
    }
}

func url(_ s: String) -> URLReference { try! URLReference(parsing: s) }

/// One URL and the expected outcome, detail and pattern index for an app.
struct MatchCase {
    var url: String
    var outcome: AssociationMatch.Outcome
    var detail: Int? = nil
    var pattern: Int? = nil
    var app: String = appA
    var line: UInt = #line
}

func check(_ d: AssociationDocument, _ cases: [MatchCase], file: StaticString = #filePath) {
    for c in cases {
        let m = d.match(url: url(c.url), appID: c.app)
        XCTAssertEqual(m.outcome, c.outcome, "\(c.url) for \(c.app); trail:\n\(m.trail.joined(separator: "\n"))",
                       file: file, line: c.line)
        if c.outcome != .noMatch {
            XCTAssertEqual(m.detailIndex, c.detail, "detail for \(c.url)", file: file, line: c.line)
            XCTAssertEqual(m.patternIndex, c.pattern, "pattern for \(c.url)", file: file, line: c.line)
        } else {
            XCTAssertNil(m.detailIndex, file: file, line: c.line)
        }
        XCTAssertFalse(m.trail.isEmpty, "match() always explains", file: file, line: c.line)
    }
}

final class AssociationLegacyTests: XCTestCase {
    func testSeed003RaywenderlichDocument() {
        // Seed 003: the document of rw-universal-links-final.herokuapp.com (legacy format, empty "apps").
        let d = doc(
            #"""
            {"applinks": {"apps": [], "details": [
              {"appID": "KFCNEC27GU.com.razeware.UniveralLinksTutorial", "paths": ["*"]}]}}
            """#)
        XCTAssertEqual(d.appIDs, ["KFCNEC27GU.com.razeware.UniveralLinksTutorial"])
        XCTAssertEqual(d.details[0].format, .paths)
        XCTAssertTrue(d.notes.contains { $0.hasPrefix("applinks.apps: legacy key, ignored") })
        let app = "KFCNEC27GU.com.razeware.UniveralLinksTutorial"
        check(d, [
            MatchCase(url: "https://rw-universal-links-final.herokuapp.com/arduino", outcome: .matched, detail: 0, pattern: 0, app: app),
            MatchCase(url: "https://rw-universal-links-final.herokuapp.com/", outcome: .matched, detail: 0, pattern: 0, app: app),
            MatchCase(url: "https://rw-universal-links-final.herokuapp.com", outcome: .matched, detail: 0, pattern: 0, app: app),
            MatchCase(url: "https://rw-universal-links-final.herokuapp.com/arduino", outcome: .noMatch, app: "KFCNEC27GU.com.razeware.Other"),
        ])
    }

    func testNotWildcardsAndFirstMatchWins() {
        let d = doc(
            #"""
            {"applinks": {"apps": [], "details": [
              {"appID": "ABCDE12345.com.example.app",
               "paths": ["/wwdc/news/", "NOT /videos/wwdc/2010/*", "/videos/wwdc/201?/*", "/books/1?", "NOT /private*", "*"]}]}}
            """#)
        check(d, [
            MatchCase(url: "https://h/wwdc/news/", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/wwdc/news", outcome: .matched, detail: 0, pattern: 0),  // trailing slash insignificant
            MatchCase(url: "https://h/videos/wwdc/2010/intro", outcome: .excluded, detail: 0, pattern: 1),
            MatchCase(url: "https://h/videos/wwdc/2015/a/b/c", outcome: .matched, detail: 0, pattern: 2),  // * crosses '/'
            MatchCase(url: "https://h/books/12", outcome: .matched, detail: 0, pattern: 3),
            MatchCase(url: "https://h/books/123", outcome: .matched, detail: 0, pattern: 5),  // ? is exactly one character
            MatchCase(url: "https://h/private/x", outcome: .excluded, detail: 0, pattern: 4),
            MatchCase(url: "https://h/anything?else#x", outcome: .matched, detail: 0, pattern: 5),
        ])
    }

    func testLegacyPathsAreCaseSensitiveAndIgnoreQueryAndFragment() {
        let d = doc(#"{"applinks":{"details":[{"appID":"ABCDE12345.com.example.app","paths":["/Help/*"]}]}}"#)
        check(d, [
            MatchCase(url: "https://h/Help/a?x=1#f", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/help/a", outcome: .noMatch),
        ])
    }

    func testIOS9DictionaryForm() {
        let d = doc(
            #"{"applinks":{"apps":[],"details":{"9JA89QQLNQ.com.apple.wwdc":{"paths":["/wwdc/news/","/videos/wwdc/2015/*"]}}}}"#)
        check(d, [
            MatchCase(url: "https://developer.apple.com/videos/wwdc/2015/x", outcome: .matched, detail: 0, pattern: 1,
                      app: "9JA89QQLNQ.com.apple.wwdc"),
            MatchCase(url: "https://developer.apple.com/videos/wwdc/2016/x", outcome: .noMatch, app: "9JA89QQLNQ.com.apple.wwdc"),
        ])
    }

    func testComponentsWinOverPaths() {
        let d = doc(
            #"{"applinks":{"details":[{"appIDs":["ABCDE12345.com.example.app"],"paths":["*"],"components":[{"/":"/only/*"}]}]}}"#)
        XCTAssertEqual(d.details[0].format, .components)
        XCTAssertTrue(d.notes.contains("applinks.details[0].paths: ignored because 'components' is present (iOS 13 and later)"))
        check(d, [
            MatchCase(url: "https://h/only/1", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/other", outcome: .noMatch),
        ])
    }
}

final class AssociationComponentTests: XCTestCase {
    /// Apple's example document from "Supporting associated domains".
    let apple = #"""
        {"applinks": {"details": [{
          "appIDs": ["ABCDE12345.com.example.app", "ABCDE12345.com.example.app2"],
          "components": [
            {"#": "no_universal_links", "exclude": true, "comment": "no UL"},
            {"/": "/buy/*", "comment": "Matches any URL whose path starts with /buy/"},
            {"/": "/help/website/*", "exclude": true},
            {"/": "/help/*", "?": {"articleNumber": "????"}}
          ]}]},
         "webcredentials": {"apps": ["ABCDE12345.com.example.app"]}}
        """#

    func testApplesExample() {
        let d = doc(apple)
        check(d, [
            MatchCase(url: "https://example.com/buy/42", outcome: .matched, detail: 0, pattern: 1),
            MatchCase(url: "https://example.com/buy/a/b/c", outcome: .matched, detail: 0, pattern: 1),  // * crosses '/'
            MatchCase(url: "https://example.com/buy", outcome: .matched, detail: 0, pattern: 1),  // "X/*" covers X
            MatchCase(url: "https://example.com/buy/42#no_universal_links", outcome: .excluded, detail: 0, pattern: 0),
            MatchCase(url: "https://example.com/help/website/faq", outcome: .excluded, detail: 0, pattern: 2),
            MatchCase(url: "https://example.com/help/x?articleNumber=1234", outcome: .matched, detail: 0, pattern: 3),
            MatchCase(url: "https://example.com/help/x?articleNumber=123", outcome: .noMatch),
            MatchCase(url: "https://example.com/help/x", outcome: .noMatch),  // absent item = "" ≠ ????
            MatchCase(url: "https://example.com/buy/1", outcome: .matched, detail: 0, pattern: 1, app: appB),
            MatchCase(url: "https://example.com/sell", outcome: .noMatch),
            MatchCase(url: "https://example.com/BUY/1", outcome: .noMatch),  // case-sensitive by default
        ])
    }

    func testTrailExplainsEachPattern() {
        let m = doc(apple).match(url: url("https://example.com/help/x?articleNumber=12345"), appID: appA)
        XCTAssertEqual(m.outcome, .noMatch)
        XCTAssertEqual(
            m.trail,
            [
                "details[0] lists ABCDE12345.com.example.app; trying its 4 components in order",
                ##"details[0].components[0] {"#":"no_universal_links","exclude":true} does not match: fragment '' does not match 'no_universal_links'"##,
                #"details[0].components[1] {"/":"/buy/*"} does not match: path '/help/x' does not match '/buy/*'"#,
                #"details[0].components[2] {"/":"/help/website/*","exclude":true} does not match: path '/help/x' does not match '/help/website/*'"#,
                #"details[0].components[3] {"/":"/help/*","?":{"articleNumber":"????"}} does not match: query item 'articleNumber' value '12345' does not match '????' (every occurrence must match)"#,
                "details[0]: no component matched",
            ])
        let hit = doc(apple).match(url: url("https://example.com/buy/1"), appID: appA)
        XCTAssertEqual(hit.pattern, #"{"/":"/buy/*"}"#)
        XCTAssertEqual(hit.trail.last, #"details[0].components[1] {"/":"/buy/*"} matches: ABCDE12345.com.example.app opens the URL"#)
        let other = doc(apple).match(url: url("https://example.com/buy/1"), appID: "ZZZ.other")
        XCTAssertEqual(
            other.trail,
            ["no details entry lists ZZZ.other (the document names ABCDE12345.com.example.app, ABCDE12345.com.example.app2)"])
    }

    func testQueryDictionaryVersusString() {
        let d = doc(
            #"""
            {"applinks":{"details":[{"appIDs":["ABCDE12345.com.example.app"],"components":[
              {"/": "/dict", "?": {"id": "?*", "lang": "en"}},
              {"/": "/string", "?": "id=*&lang=en"},
              {"/": "/optional", "?": {"ref": "*"}}
            ]}]}}
            """#)
        check(d, [
            MatchCase(url: "https://h/dict?lang=en&id=7", outcome: .matched, detail: 0, pattern: 0),  // order-free
            MatchCase(url: "https://h/dict?id=7&lang=fr", outcome: .noMatch),
            MatchCase(url: "https://h/dict?id=&lang=en", outcome: .noMatch),  // ?* needs one character
            MatchCase(url: "https://h/dict?lang=en", outcome: .noMatch),
            MatchCase(url: "https://h/dict?id=7&id=8&lang=en", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/dict?id=7&lang=en&lang=fr", outcome: .noMatch),  // every occurrence must match
            MatchCase(url: "https://h/string?id=7&lang=en", outcome: .matched, detail: 0, pattern: 1),
            MatchCase(url: "https://h/string?lang=en&id=7", outcome: .noMatch),  // the whole query, as written
            MatchCase(url: "https://h/optional", outcome: .matched, detail: 0, pattern: 2),  // absent = "" matches *
            MatchCase(url: "https://h/optional?ref", outcome: .matched, detail: 0, pattern: 2),
        ])
    }

    func testFragmentAndExcludeOrder() {
        let d = doc(
            #"""
            {"applinks":{"details":[{"appIDs":["ABCDE12345.com.example.app"],"components":[
              {"/": "/e/*", "exclude": true},
              {"#": "section-?"},
              {"/": "/*"}
            ]}]}}
            """#)
        check(d, [
            MatchCase(url: "https://h/e/1#section-1", outcome: .excluded, detail: 0, pattern: 0),
            MatchCase(url: "https://h/x#section-2", outcome: .matched, detail: 0, pattern: 1),
            MatchCase(url: "https://h/x#section-22", outcome: .matched, detail: 0, pattern: 2),
            MatchCase(url: "https://h/", outcome: .matched, detail: 0, pattern: 2),
        ])
    }

    func testCaseSensitiveAndDefaultsLevels() {
        let d = doc(
            #"""
            {"applinks":{
              "defaults": {"caseSensitive": false},
              "details":[
                {"appIDs":["ABCDE12345.com.example.app"], "components":[
                  {"/": "/sourdough/?*"},
                  {"/": "/Exact", "caseSensitive": true}]},
                {"appIDs":["ABCDE12345.com.example.app2"], "defaults": {"caseSensitive": true}, "components":[
                  {"/": "/sourdough/?*"},
                  {"/": "/loose/*", "caseSensitive": false}]}
            ]}}
            """#)
        XCTAssertEqual(d.defaults, AssociationOptions(caseSensitive: false))
        XCTAssertEqual(d.details[0].components[0].caseSensitive, false)
        XCTAssertEqual(d.details[1].components[0].caseSensitive, true)
        check(d, [
            MatchCase(url: "https://h/SourDough/Loaf", outcome: .matched, detail: 0, pattern: 0),  // domain default
            MatchCase(url: "https://h/Exact", outcome: .matched, detail: 0, pattern: 1),
            MatchCase(url: "https://h/exact", outcome: .noMatch),  // component overrides domain
            MatchCase(url: "https://h/SourDough/Loaf", outcome: .noMatch, app: appB),  // app defaults override domain
            MatchCase(url: "https://h/sourdough/loaf", outcome: .matched, detail: 1, pattern: 0, app: appB),
            MatchCase(url: "https://h/LOOSE/x", outcome: .matched, detail: 1, pattern: 1, app: appB),
        ])
    }

    func testPercentEncodedSemantics() {
        // percentEncoded true (default): the pattern is compared with the URL as written (encoded);
        // false: the URL is percent-decoded first and the pattern is taken literally (WWDC20 10098).
        let d = doc(
            #"""
            {"applinks":{"details":[{"appIDs":["ABCDE12345.com.example.app"],"components":[
              {"/": "/encoded/South%20Korea"},
              {"/": "/decoded/South Korea", "percentEncoded": false},
              {"/": "/한글/?*", "percentEncoded": false},
              {"/": "/still-encoded/a%20b", "percentEncoded": false},
              {"/": "/q", "?": {"name": "South Korea"}, "percentEncoded": false},
              {"/": "/q2", "?": {"name": "South%20Korea"}}
            ]}]}}
            """#)
        check(d, [
            MatchCase(url: "https://h/encoded/South%20Korea", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/decoded/South%20Korea", outcome: .matched, detail: 0, pattern: 1),
            MatchCase(url: "https://h/%ED%95%9C%EA%B8%80/x", outcome: .matched, detail: 0, pattern: 2),
            MatchCase(url: "https://h/still-encoded/a%20b", outcome: .noMatch),  // decoded URL is "a b"
            MatchCase(url: "https://h/q?name=South%20Korea", outcome: .matched, detail: 0, pattern: 4),
            MatchCase(url: "https://h/q2?name=South%20Korea", outcome: .matched, detail: 0, pattern: 5),
            MatchCase(url: "https://h/q2?name=South+Korea", outcome: .noMatch),
        ])
        XCTAssertEqual(d.details[0].components[0].percentEncoded, true)
        XCTAssertEqual(d.details[0].components[1].percentEncoded, false)
    }

    func testPercentEncodedDomainDefault() {
        let d = doc(
            #"""
            {"applinks":{"defaults":{"percentEncoded":false},"details":[{"appIDs":["ABCDE12345.com.example.app"],
              "components":[{"/": "/a b"}]}]}}
            """#)
        check(d, [MatchCase(url: "https://h/a%20b", outcome: .matched, detail: 0, pattern: 0)])
    }

    func testPathSlashRules() {
        let d = doc(
            #"""
            {"applinks":{"details":[{"appIDs":["ABCDE12345.com.example.app"],"components":[
              {"/": "abc", "?": "def"},
              {"/": "/id/????"},
              {"/": "/dir/"},
              {"/": "/"}
            ]}]}}
            """#)
        check(d, [
            MatchCase(url: "https://www.example.com/abc?def", outcome: .matched, detail: 0, pattern: 0),  // Apple's example
            MatchCase(url: "https://h/id/4812", outcome: .matched, detail: 0, pattern: 1),
            MatchCase(url: "https://h/id/481", outcome: .noMatch),
            MatchCase(url: "https://h/id/481/", outcome: .noMatch),
            MatchCase(url: "https://h/dir", outcome: .matched, detail: 0, pattern: 2),
            MatchCase(url: "https://h/dir/", outcome: .matched, detail: 0, pattern: 2),
            MatchCase(url: "https://h/", outcome: .matched, detail: 0, pattern: 3),
            MatchCase(url: "https://h", outcome: .matched, detail: 0, pattern: 3),
        ])
    }

    func testDetailsInOrderAndExcludeStopsOnlyThisApp() {
        let d = doc(
            #"""
            {"applinks":{"details":[
              {"appIDs":["ABCDE12345.com.example.app"],"components":[{"/":"/a/*"}]},
              {"appIDs":["ABCDE12345.com.example.app2"],"components":[{"/":"/b/*","exclude":true},{"/":"*"}]},
              {"appIDs":["ABCDE12345.com.example.app"],"components":[{"/":"/b/*"}]}
            ]}}
            """#)
        check(d, [
            MatchCase(url: "https://h/a/1", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/b/1", outcome: .matched, detail: 2, pattern: 0),  // detail 0 had no match: go on
            MatchCase(url: "https://h/b/1", outcome: .excluded, detail: 1, pattern: 0, app: appB),
            MatchCase(url: "https://h/c", outcome: .matched, detail: 1, pattern: 1, app: appB),
            MatchCase(url: "https://h/c", outcome: .noMatch),
        ])
    }
}

final class AssociationSubstitutionTests: XCTestCase {
    func testApplesFoodExample() {
        let d = doc(
            #"""
            {"applinks":{"substitutionVariables":{"food":["burrito","pizza","sushi","samosa"]},
             "details":[{"appIDs":["ABCDE12345.com.example.app"],"components":[{"/":"/$(lang)_$(region)/$(food)/"}]}]}}
            """#)
        XCTAssertEqual(d.substitutionVariables["food"], ["burrito", "pizza", "sushi", "samosa"])
        check(d, [
            MatchCase(url: "https://h/en_US/pizza/", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/ko_KR/sushi", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/haw_US/samosa/", outcome: .matched, detail: 0, pattern: 0),  // 3-letter ISO 639 code
            MatchCase(url: "https://h/en_UK/pizza/", outcome: .noMatch),  // UK is not an ISO region code
            MatchCase(url: "https://h/xx_US/pizza/", outcome: .noMatch),
            MatchCase(url: "https://h/en_us/pizza/", outcome: .noMatch),  // case-sensitive: regions are uppercase
            MatchCase(url: "https://h/en_US/tacos/", outcome: .noMatch),
        ])
    }

    func testPredefinedClassesAndFolding() {
        let d = doc(
            #"""
            {"applinks":{"details":[{"appIDs":["ABCDE12345.com.example.app"],"components":[
              {"/":"/u/$(upper)$(lower)$(digit)"},
              {"/":"/x/$(xdigit)$(xdigit)"},
              {"/":"/a/$(alpha)$(alnum)"},
              {"/":"/r/$(region)", "caseSensitive": false}
            ]}]}}
            """#)
        check(d, [
            MatchCase(url: "https://h/u/Ab7", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/u/aB7", outcome: .noMatch),
            MatchCase(url: "https://h/x/fF", outcome: .matched, detail: 0, pattern: 1),
            MatchCase(url: "https://h/x/fG", outcome: .noMatch),
            MatchCase(url: "https://h/a/z9", outcome: .matched, detail: 0, pattern: 2),
            MatchCase(url: "https://h/r/kr", outcome: .matched, detail: 0, pattern: 3),  // folding applies to $(region)
        ])
    }

    func testCustomVariablesWithWildcards() {
        let d = doc(
            #"""
            {"applinks":{"substitutionVariables":{"section":["news/*","sports/??"],"empty":[]},
             "details":[{"appIDs":["ABCDE12345.com.example.app"],"components":[
               {"/":"/$(section)/end"},
               {"/":"/e/$(empty)"}
             ]}]}}
            """#)
        check(d, [
            MatchCase(url: "https://h/news/a/b/end", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/sports/nba/end", outcome: .noMatch),
            MatchCase(url: "https://h/sports/nb/end", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/e/anything", outcome: .noMatch),  // a variable without values matches nothing
        ])
    }

    func testCustomVariableShadowsPredefined() {
        let d = doc(
            #"""
            {"applinks":{"substitutionVariables":{"lang":["kr-only"]},
             "details":[{"appIDs":["ABCDE12345.com.example.app"],"components":[{"/":"/$(lang)"}]}]}}
            """#)
        XCTAssertTrue(d.notes.contains(#"applinks.substitutionVariables.lang: replaces the predefined $(lang)"#))
        check(d, [
            MatchCase(url: "https://h/kr-only", outcome: .matched, detail: 0, pattern: 0),
            MatchCase(url: "https://h/en", outcome: .noMatch),
        ])
    }

    func testISOTables() {
        XCTAssertTrue(AssociationISOTables.regions.contains("KR"))
        XCTAssertTrue(AssociationISOTables.regions.contains("US"))
        XCTAssertFalse(AssociationISOTables.regions.contains("UK"))
        XCTAssertTrue(AssociationISOTables.languages.contains("ko"))
        XCTAssertTrue(AssociationISOTables.languages.contains("en"))
        XCTAssertGreaterThan(AssociationISOTables.regions.count, 240)
        XCTAssertGreaterThan(AssociationISOTables.languages.count, 180)
    }
}

final class AssociationMalformedTests: XCTestCase {
    func testErrorsNameTheExactKey() {
        let cases: [(json: String, error: String, line: UInt)] = [
            ("not json", "invalid JSON", #line),
            ("[]", "an association document must be a JSON object, got array", #line),
            (#"{"applinks": []}"#, "applinks: expected an object, got array", #line),
            (#"{"applinks": {}}"#, "applinks.details: required key is missing (an array of {appIDs, components})", #line),
            (#"{"applinks": {"details": "x"}}"#, "applinks.details: expected an array, got string", #line),
            (#"{"applinks": {"apps": {}, "details": []}}"#, "applinks.apps: expected an array, got object", #line),
            (#"{"applinks": {"details": [1]}}"#, "applinks.details[0]: expected an object, got number", #line),
            (#"{"applinks": {"details": [{"components": []}]}}"#, "applinks.details[0]: names no app: needs 'appID' or a non-empty 'appIDs'", #line),
            (#"{"applinks": {"details": [{"appIDs": "A.b", "components": []}]}}"#, "applinks.details[0].appIDs: expected an array, got string", #line),
            (#"{"applinks": {"details": [{"appIDs": ["nodot"], "components": []}]}}"#, "applinks.details[0].appIDs[0]: 'nodot' is not an app ID (expected TEAMID.BUNDLEID, e.g. ABCDE12345.com.example.app)", #line),
            (#"{"applinks": {"details": [{"appID": 5, "paths": []}]}}"#, "applinks.details[0].appID: expected an app ID string, got number", #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "components": {}}]}}"#, "applinks.details[0].components: expected an array, got object", #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"/": "/a"}, {}, {"exclude": "yes"}]}]}}"#, "applinks.details[0].components[2].exclude: expected a boolean, got string", #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"caseSensitive": 1}]}]}}"#, "applinks.details[0].components[0].caseSensitive: expected a boolean, got number", #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"percentEncoded": null}]}]}}"#, "applinks.details[0].components[0].percentEncoded: expected a boolean, got null", #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"/": 7}]}]}}"#, #"applinks.details[0].components[0]["/"]: expected a string pattern, got number"#, #line),
            (##"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"#": true}]}]}}"##, ##"applinks.details[0].components[0]["#"]: expected a string pattern, got boolean"##, #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"?": 3}]}]}}"#, #"applinks.details[0].components[0]["?"]: expected a string or a dictionary of query item patterns, got number"#, #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"?": {"id": 1}}]}]}}"#, #"applinks.details[0].components[0]["?"].id: expected a string pattern, got number"#, #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"comment": []}]}]}}"#, "applinks.details[0].components[0].comment: expected a string, got array", #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"/": "/$(nope)/x"}]}]}}"#, #"applinks.details[0].components[0]["/"]: unknown substitution variable '$(nope)' (defined: $(alpha), $(upper), $(lower), $(alnum), $(digit), $(xdigit), $(region), $(lang))"#, #line),
            (##"{"applinks": {"details": [{"appIDs": ["A.b"], "components": [{"#": "$(lang"}]}]}}"##, ##"applinks.details[0].components[0]["#"]: unterminated substitution variable '$(lang' (expected '$(NAME)')"##, #line),
            (#"{"applinks": {"details": [{"appID": "A.b", "paths": ["/a", 2]}]}}"#, "applinks.details[0].paths[1]: expected a string, got number", #line),
            (#"{"applinks": {"defaults": {"caseSensitive": "no"}, "details": []}}"#, "applinks.defaults.caseSensitive: expected a boolean, got string", #line),
            (#"{"applinks": {"details": [{"appIDs": ["A.b"], "defaults": {"percentEncoded": 0}, "components": []}]}}"#, "applinks.details[0].defaults.percentEncoded: expected a boolean, got number", #line),
            (#"{"applinks": {"substitutionVariables": {"food": "pizza"}, "details": []}}"#, "applinks.substitutionVariables.food: expected an array of strings, got string", #line),
            (#"{"applinks": {"substitutionVariables": {"food": ["a", 1]}, "details": []}}"#, "applinks.substitutionVariables.food[1]: expected a string, got number", #line),
            (#"{"applinks": {"substitutionVariables": {"a(b": ["x"]}, "details": []}}"#, #"applinks.substitutionVariables["a(b"]: a variable name may not contain '$', '(' or ')'"#, #line),
            (#"{"applinks": {"substitutionVariables": {"x": ["$(lang)"]}, "details": []}}"#, "applinks.substitutionVariables.x[0]: a value may not use another substitution variable ('$(lang)')", #line),
        ]
        for c in cases {
            switch AssociationDocument.load(Array(c.json.utf8)) {
            case .success:
                XCTFail("accepted: \(c.json)", line: c.line)
            case .failure(let e):
                if c.error == "invalid JSON" {
                    XCTAssertTrue(e.description.hasPrefix("invalid JSON: "), e.description, line: c.line)
                    XCTAssertEqual(e.key, "", line: c.line)
                } else {
                    XCTAssertEqual(e.description, c.error, line: c.line)
                }
            }
        }
    }

    func testErrorKeyAndReasonAreSeparate() {
        guard case .failure(let e) = AssociationDocument.load(
            Array(#"{"applinks":{"details":[{"appIDs":["A.b"],"components":[{},{},{"exclude":"x"}]}]}}"#.utf8))
        else { return XCTFail("accepted") }
        XCTAssertEqual(e.key, "applinks.details[0].components[2].exclude")
        XCTAssertEqual(e.reason, "expected a boolean, got string")
    }

    func testLenientWhereAppleIsLenient() {
        // No applinks (only webcredentials): valid, but no universal links.
        let d = doc(#"{"webcredentials":{"apps":["A.b"]}}"#)
        XCTAssertFalse(d.hasApplinks)
        let m = d.match(url: url("https://h/"), appID: "A.b")
        XCTAssertEqual(m.outcome, .noMatch)
        XCTAssertEqual(m.trail, ["the document has no 'applinks' section, so it gives no app universal links"])
        // Unknown keys are noted and ignored; a detail with neither components nor paths gives no URLs.
        let d2 = doc(#"{"applinks":{"details":[{"appIDs":["A.b"],"extra":1}],"future":true}}"#)
        XCTAssertTrue(d2.notes.contains("applinks.future: unknown key, ignored"))
        XCTAssertTrue(d2.notes.contains("applinks.details[0].extra: unknown key, ignored"))
        XCTAssertEqual(d2.details[0].format, .none)
        XCTAssertEqual(d2.match(url: url("https://h/"), appID: "A.b").outcome, .noMatch)
        // appID and appIDs together: the union.
        let d3 = doc(#"{"applinks":{"details":[{"appID":"A.one","appIDs":["A.two"],"components":[{"/":"*"}]}]}}"#)
        XCTAssertEqual(d3.appIDs, ["A.one", "A.two"])
    }

    func testPathologicalPatternsStayFast() {
        let pattern = String(repeating: "*a", count: 40) + "b"
        let d = doc(#"{"applinks":{"details":[{"appIDs":["A.b"],"components":[{"/":"/"# + pattern + #""}]}]}}"#)
        let text = "https://h/" + String(repeating: "a", count: 2000)
        let start = ContinuousClock.now
        XCTAssertEqual(d.match(url: url(text), appID: "A.b").outcome, .noMatch)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(2))
    }

    /// A pattern whose substitution values compile to more than `maxStates` states is a document
    /// error naming it; one under the limit is taken.
    func testATooComplexPatternIsADocumentError() throws {
        func document(values: Int, uses: Int) -> [UInt8] {
            let list = Array(repeating: #""*a""#, count: values).joined(separator: ",")
            return Array(
                (#"{"applinks":{"substitutionVariables":{"v":["# + list + #"]},"details":[{"appIDs":["A.b"],"components":[{"/":"/"#
                    + String(repeating: "$(v)", count: uses) + #"b"}]}]}}"#).utf8)
        }
        XCTAssertThrowsError(try AssociationDocument(parsing: document(values: 200, uses: 40))) { e in
            let error = e as? AssociationDocumentError
            XCTAssertEqual(error?.key, #"applinks.details[0].components[0]["/"]"#)
            XCTAssertTrue(error?.reason.contains("too complex") == true, "\(String(describing: error))")
            XCTAssertTrue(error?.reason.contains("over the limit of 4096") == true, "\(String(describing: error))")
        }
        let fine = try AssociationDocument(parsing: document(values: 30, uses: 2))
        XCTAssertEqual(fine.match(url: url("https://h/xaab"), appID: "A.b").outcome, .matched)
    }

    /// Matching one URL against one document stops after `matchingBudget` steps and is then no
    /// match, said in the trail: a costly (but allowed) pattern and a huge URL cannot hold the
    /// broker's loop. The same pattern and an ordinary URL still match.
    func testMatchingStopsAtItsBudget() throws {
        let list = Array(repeating: #""*a""#, count: 30).joined(separator: ",")
        let d = doc(
            #"{"applinks":{"substitutionVariables":{"v":["# + list + #"]},"details":[{"appIDs":["A.b"],"components":[{"/":"/"#
                + String(repeating: "$(v)", count: 22) + #"b"}]}]}}"#)
        let ordinary = d.match(url: url("https://h/" + String(repeating: "xa", count: 30) + "b"), appID: "A.b")
        XCTAssertEqual(ordinary.outcome, .matched, ordinary.trail.joined(separator: "\n"))
        XCTAssertFalse(ordinary.overBudget)
        let huge = d.match(url: url("https://h/" + String(repeating: "a", count: 100_000)), appID: "A.b")
        XCTAssertEqual(huge.outcome, .noMatch)
        XCTAssertTrue(huge.overBudget)
        XCTAssertTrue(
            huge.trail.last?.contains("matching stopped at details[0] pattern 0: over 4000000 steps") == true,
            huge.trail.joined(separator: "\n"))
        XCTAssertNil(huge.detailIndex)
    }

    /// The budget also counts each URL part's length a pattern looks at: a huge URL against
    /// thousands of patterns that fail at their first character runs out too (it took 36 s);
    /// a long URL against a few patterns is still matched.
    func testTheBudgetCountsTheURLsLengthForEveryPattern() throws {
        let paths = (0..<2000).map { #""/a\#($0)*""# }.joined(separator: ",")
        let many = doc(#"{"applinks":{"details":[{"appID":"A.b","paths":["# + paths + #"]}]}}"#)
        let huge = many.match(url: url("https://h/" + String(repeating: "b", count: 1_000_000)), appID: "A.b")
        XCTAssertEqual(huge.outcome, .noMatch)
        XCTAssertTrue(huge.overBudget, huge.trail.suffix(2).joined(separator: "\n"))
        XCTAssertFalse(many.match(url: url("https://h/a1999x"), appID: "A.b").overBudget)
        XCTAssertEqual(many.match(url: url("https://h/a1999x"), appID: "A.b").outcome, .matched)
        let few = doc(#"{"applinks":{"details":[{"appIDs":["A.b"],"components":[{"/":"/nope/*"},{"/":"/big/*"}]}]}}"#)
        let long = few.match(url: url("https://h/big/" + String(repeating: "x", count: 200_000)), appID: "A.b")
        XCTAssertEqual(long.outcome, .matched)
        XCTAssertFalse(long.overBudget)
    }

    /// iOS reads association files of at most 128 KB (131,072 bytes) and ignores larger ones whole.
    func testADocumentOver128KBIsRefused() throws {
        let head = #"{"applinks":{"details":[{"appIDs":["A.b"],"components":[{"/":"/big/*"}]}]}}"#
        func padded(to size: Int) -> [UInt8] { Array(head.utf8) + Array(repeating: UInt8(ascii: " "), count: size - head.utf8.count) }
        let atLimit = try AssociationDocument(parsing: padded(to: 131_072))
        XCTAssertEqual(atLimit.match(url: url("https://h/big/1"), appID: "A.b").outcome, .matched)
        XCTAssertThrowsError(try AssociationDocument(parsing: padded(to: 131_073))) { e in
            XCTAssertEqual(
                (e as? AssociationDocumentError)?.reason,
                "the document is 131073 bytes, over the 131072 (128 KB) that iOS reads: iOS ignores such a file, so it gives no app universal links")
        }
    }
}
