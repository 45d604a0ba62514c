// Table-driven tests for strict RFC 3986 URL parsing: components of valid URLs (custom schemes from the
// seeds included) and the exact messages for invalid ones.

@testable import ShareRouting
import XCTest

final class URLReferenceTests: XCTestCase {
    struct Valid {
        var text: String
        var scheme: String
        var host: String?
        var originalHost: String?
        var port: Int?
        var userinfo: String?
        var path: String
        var query: String?
        var fragment: String?
        var line: UInt = #line
    }

    func testValidURLs() throws {
        let cases: [Valid] = [
            Valid(text: "deeplinkmyapp://open-from-share", scheme: "deeplinkmyapp", host: "open-from-share",
                  originalHost: "open-from-share", path: ""),
            Valid(text: "DeepLinkingDemo://customerdetail?id=42", scheme: "DeepLinkingDemo", host: "customerdetail",
                  originalHost: "customerdetail", path: "", query: "id=42"),
            Valid(text: "DeepLinkingDemo://customerdetail?id=practice", scheme: "DeepLinkingDemo",
                  host: "customerdetail", originalHost: "customerdetail", path: "", query: "id=practice"),
            Valid(text: "stats://watchlist?id=1&name=South%20Korea&iso=KR", scheme: "stats", host: "watchlist",
                  originalHost: "watchlist", path: "", query: "id=1&name=South%20Korea&iso=KR"),
            Valid(text: "mailto:x@y", scheme: "mailto", host: nil, path: "x@y"),
            Valid(text: "HTTPS://Rw-Universal-Links-Final.HerokuApp.com/arduino", scheme: "HTTPS",
                  host: "rw-universal-links-final.herokuapp.com", originalHost: "Rw-Universal-Links-Final.HerokuApp.com",
                  path: "/arduino"),
            Valid(text: "https://user:pw@example.com:8443/a/b?x=1#frag", scheme: "https", host: "example.com",
                  originalHost: "example.com", port: 8443, userinfo: "user:pw", path: "/a/b", query: "x=1",
                  fragment: "frag"),
            Valid(text: "https://example.com", scheme: "https", host: "example.com", originalHost: "example.com",
                  path: ""),
            Valid(text: "https://example.com/?", scheme: "https", host: "example.com", originalHost: "example.com",
                  path: "/", query: ""),
            Valid(text: "https://example.com/#", scheme: "https", host: "example.com", originalHost: "example.com",
                  path: "/", fragment: ""),
            Valid(text: "https://example.com:/p", scheme: "https", host: "example.com", originalHost: "example.com",
                  path: "/p"),
            Valid(text: "https://[::1]:8080/x", scheme: "https", host: "[::1]", originalHost: "[::1]", port: 8080,
                  path: "/x"),
            Valid(text: "https://example.com/a?b=/c?d#e/f?g", scheme: "https", host: "example.com",
                  originalHost: "example.com", path: "/a", query: "b=/c?d", fragment: "e/f?g"),
            Valid(text: "file:///tmp/x.pdf", scheme: "file", host: "", originalHost: "", path: "/tmp/x.pdf"),
            Valid(text: "urn:isbn:0451450523", scheme: "urn", host: nil, path: "isbn:0451450523"),
            Valid(text: "my-app+v2.x:rootless/path", scheme: "my-app+v2.x", host: nil, path: "rootless/path"),
            Valid(text: "https://example.com/%ED%95%9C%EA%B8%80", scheme: "https", host: "example.com",
                  originalHost: "example.com", path: "/%ED%95%9C%EA%B8%80"),
        ]
        for c in cases {
            let u: URLReference
            do { u = try URLReference(parsing: c.text) } catch {
                XCTFail("\(c.text): unexpected error \(error)", line: c.line)
                continue
            }
            XCTAssertEqual(u.original, c.text, line: c.line)
            XCTAssertEqual(u.scheme, c.scheme, line: c.line)
            XCTAssertEqual(u.normalizedScheme, c.scheme.lowercased(), line: c.line)
            XCTAssertEqual(u.host, c.host, "host of \(c.text)", line: c.line)
            XCTAssertEqual(u.originalHost, c.originalHost, "originalHost of \(c.text)", line: c.line)
            XCTAssertEqual(u.port, c.port, "port of \(c.text)", line: c.line)
            XCTAssertEqual(u.userinfo, c.userinfo, "userinfo of \(c.text)", line: c.line)
            XCTAssertEqual(u.path, c.path, "path of \(c.text)", line: c.line)
            XCTAssertEqual(u.query, c.query, "query of \(c.text)", line: c.line)
            XCTAssertEqual(u.fragment, c.fragment, "fragment of \(c.text)", line: c.line)
        }
    }

    /// Components are ranges of the text, made into strings when read: the authority and the
    /// edge cases where a component is present but empty, or absent.
    func testComponentsAtTheEdges() throws {
        let cases: [(String, authority: String?, userinfo: String?, host: String?, port: Int?, path: String, query: String?, fragment: String?)] = [
            ("file:///x", "", nil, "", nil, "/x", nil, nil),
            ("http://h:/", "h:", nil, "h", nil, "/", nil, nil),
            ("x:?", nil, nil, nil, nil, "", "", nil),
            ("x:#", nil, nil, nil, nil, "", nil, ""),
            ("x:a#b?c", nil, nil, nil, nil, "a", nil, "b?c"),
            ("x:?#", nil, nil, nil, nil, "", "", ""),
            ("https://u@H.example:8443", "u@H.example:8443", "u", "h.example", 8443, "", nil, nil),
            ("https://u:p@[v1.x]/p", "u:p@[v1.x]", "u:p", "[v1.x]", nil, "/p", nil, nil),
            ("app://", "", nil, "", nil, "", nil, nil),
        ]
        for c in cases {
            let u = try URLReference(parsing: c.0)
            XCTAssertEqual(u.authority, c.authority, "authority of \(c.0)")
            XCTAssertEqual(u.userinfo, c.userinfo, "userinfo of \(c.0)")
            XCTAssertEqual(u.host, c.host, "host of \(c.0)")
            XCTAssertEqual(u.port, c.port, "port of \(c.0)")
            XCTAssertEqual(u.path, c.path, "path of \(c.0)")
            XCTAssertEqual(u.query, c.query, "query of \(c.0)")
            XCTAssertEqual(u.fragment, c.fragment, "fragment of \(c.0)")
            XCTAssertEqual(u.description, c.0)
        }
        // Equal and hashed by their text.
        let a = try URLReference(parsing: "https://example.com/a?b#c")
        XCTAssertEqual(a, try URLReference(parsing: "https://example.com/a?b#c"))
        XCTAssertNotEqual(a, try URLReference(parsing: "https://EXAMPLE.com/a?b#c"))
        XCTAssertEqual(Set([a, try URLReference(parsing: "https://example.com/a?b#c")]).count, 1)
    }

    func testInvalidURLsNameTheProblem() {
        let cases: [(text: String, message: String, line: UInt)] = [
            ("foo bar", "invalid URL 'foo bar': space at position 3 must be percent-encoded (%20)", #line),
            ("", "invalid URL '': the URL is empty", #line),
            ("example.com/path", "invalid URL 'example.com/path': missing scheme (expected SCHEME:..., e.g. 'https://example.com/' or 'myapp://open')", #line),
            ("/relative/path", "invalid URL '/relative/path': missing scheme (expected SCHEME:..., e.g. 'https://example.com/' or 'myapp://open')", #line),
            (":nothing", "invalid URL ':nothing': missing scheme before ':'", #line),
            ("1app://x", "invalid URL '1app://x': invalid scheme '1app' (a letter, then letters, digits, '+', '-' or '.')", #line),
            ("my_app://x", "invalid URL 'my_app://x': invalid scheme 'my_app' (a letter, then letters, digits, '+', '-' or '.')", #line),
            ("https://example.com/%zz", "invalid URL 'https://example.com/%zz': invalid percent-escape '%zz' at position 20 ('%' must be followed by two hex digits; write '%25' for a literal '%')", #line),
            ("https://example.com/100%", "invalid URL 'https://example.com/100%': invalid percent-escape '%' at position 23 ('%' must be followed by two hex digits; write '%25' for a literal '%')", #line),
            ("https://example.com:99999/", "invalid URL 'https://example.com:99999/': invalid port '99999' (must be at most 65535)", #line),
            ("https://example.com:80a/", "invalid URL 'https://example.com:80a/': invalid port '80a' (expected a number from 0 to 65535)", #line),
            ("https:///path", "invalid URL 'https:///path': an https URL needs a host (e.g. 'https://example.com/')", #line),
            ("http:example.com", "invalid URL 'http:example.com': an http URL needs a host (e.g. 'http://example.com/')", #line),
            ("https://", "invalid URL 'https://': an https URL needs a host (e.g. 'https://example.com/')", #line),
            ("DeepLinkingDemo://customerdetail?id=Hi Deep Linking", "invalid URL 'DeepLinkingDemo://customerdetail?id=Hi Deep Linking': space at position 38 must be percent-encoded (%20)", #line),
            ("https://example.com/\u{D55C}", "invalid URL 'https://example.com/\u{D55C}': non-ASCII character '\u{D55C}' at position 20 must be percent-encoded (%ED%95%9C)", #line),
            ("https://example.com/a\nb", "invalid URL 'https://example.com/a\\nb': control character U+000A at position 21 must be percent-encoded", #line),
            ("https://example.com/a|b", "invalid URL 'https://example.com/a|b': character '|' at position 21 is not allowed in a URL and must be percent-encoded (%7C)", #line),
            ("https://example.com/a#b#c", "invalid URL 'https://example.com/a#b#c': '#' at position 23 is not allowed in the fragment and must be percent-encoded (%23)", #line),
            ("https://example.com/a[1]", "invalid URL 'https://example.com/a[1]': '[' at position 21 is not allowed in the path and must be percent-encoded (%5B)", #line),
            ("https://a@b@example.com/", "invalid URL 'https://a@b@example.com/': '@' at position 9 in the authority must be percent-encoded (%40)", #line),
            ("https://[::1/", "invalid URL 'https://[::1/': unterminated IP literal: '[' at position 8 has no ']'", #line),
        ]
        for c in cases {
            do {
                let u = try URLReference(parsing: c.text)
                XCTFail("'\(c.text)' parsed as \(u) but should be rejected", line: c.line)
            } catch {
                XCTAssertEqual(error.message, c.message, line: c.line)
                XCTAssertEqual(error.input, c.text, line: c.line)
            }
        }
    }

    func testErrorPositionIsReported() {
        XCTAssertThrowsError(try URLReference(parsing: "foo bar")) { error in
            XCTAssertEqual((error as? URLParseError)?.position, 3)
        }
        XCTAssertNil(URLReference.parse("foo bar"))
        XCTAssertEqual(URLReference.parse("a:b")?.path, "b")
    }

    func testQueryItemsArePreservedRaw() throws {
        let u = try URLReference(parsing: "stats://watchlist?id=1&name=South%20Korea&flag&&iso=KR&empty=")
        let items = u.queryItems
        XCTAssertEqual(items.map(\.name), ["id", "name", "flag", "iso", "empty"])
        XCTAssertEqual(items.map(\.value), ["1", "South%20Korea", nil, "KR", ""])
    }

    func testPercentDecoding() {
        XCTAssertEqual(URLReference.percentDecoded("South%20Korea"), "South Korea")
        XCTAssertEqual(URLReference.percentDecoded("%ED%95%9C%EA%B8%80"), "한글")
        XCTAssertEqual(URLReference.percentDecoded("a+b%2Fc"), "a+b/c")
        XCTAssertEqual(URLReference.percentDecoded("no-escapes"), "no-escapes")
    }

    func testEffectivePortAndWeb() throws {
        XCTAssertEqual(try URLReference(parsing: "https://h/").effectivePort, 443)
        XCTAssertEqual(try URLReference(parsing: "http://h/").effectivePort, 80)
        XCTAssertEqual(try URLReference(parsing: "http://h:8080/").effectivePort, 8080)
        XCTAssertNil(try URLReference(parsing: "myapp://h/").effectivePort)
        XCTAssertTrue(try URLReference(parsing: "HTTPS://h/").isWeb)
        XCTAssertFalse(try URLReference(parsing: "ftp://h/").isWeb)
    }
}

extension URLReferenceTests {
    /// The bit-set character classes are exactly RFC 3986's sets, spelled out (every byte).
    func testCharacterClassBitSetsMatchTheRFCSets() {
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        let subDelims = Set("!$&'()*+,;=".utf8)
        for c in 0...255 {
            let b = UInt8(c)
            let us = unreserved.contains(b) || subDelims.contains(b)
            XCTAssertEqual(URLReference.isUnreservedOrSubDelim(b), us, "byte \(c)")
            XCTAssertEqual(URLReference.isUnreserved(b) || URLReference.isSubDelim(b), us, "byte \(c)")
            let pchar = us || ":@%".utf8.contains(b)
            XCTAssertEqual(URLReference.isPChar(b), pchar, "byte \(c)")
            XCTAssertEqual(URLReference.isQueryOrFragmentChar(b), pchar || "/?".utf8.contains(b), "byte \(c)")
            XCTAssertEqual(URLReference.allowedRaw(b), us || ":/?#[]@%".utf8.contains(b), "byte \(c)")
        }
    }
}

extension URLReferenceTests {
    func testStartsWithSchemeIsTheCheapPrefixTest() {
        XCTAssertTrue(URLReference.startsWithScheme("file:///tmp/a", "file"))
        XCTAssertTrue(URLReference.startsWithScheme("FiLe:x", "file"))
        XCTAssertFalse(URLReference.startsWithScheme("files:///tmp/a", "file"))
        XCTAssertFalse(URLReference.startsWithScheme("fil", "file"))
        XCTAssertFalse(URLReference.startsWithScheme("file", "file"))
        XCTAssertFalse(URLReference.startsWithScheme("https://example.com/file:", "file"))
        // The attachment of a URL item still tells file URLs from the rest.
        let table = UTITable.system
        XCTAssertEqual(table.attachment(for: .url("FILE:///tmp/a.pdf", type: nil)).primaryType, "public.file-url")
        XCTAssertEqual(table.attachment(for: .url("file:%zz", type: nil)).primaryType, "public.url")  // not a valid URL
        XCTAssertEqual(table.attachment(for: .url("https://youtu.be/x", type: nil)).primaryType, "public.url")
    }

    func testSchemeRulesOnTheBytes() throws {
        for bad in ["1app://x", "a_b://x", "-x:y", "my app://x"] {
            XCTAssertThrowsError(try URLReference(parsing: bad), bad)
        }
        let r = try URLReference(parsing: "My-App+1.x://Open/Path")
        XCTAssertEqual(r.scheme, "My-App+1.x")
        XCTAssertEqual(r.normalizedScheme, "my-app+1.x")
        XCTAssertEqual(r.originalHost, "Open")
        XCTAssertEqual(r.host, "open")
        XCTAssertEqual(try URLReference(parsing: "stats://watchlist?id=1").normalizedScheme, "stats")
    }

    func testSchemesNormalizeToASCIILowercase() {
        XCTAssertEqual(URLScheme.normalize("HTTPS"), "https")
        XCTAssertEqual(URLScheme.normalize("my-App+x.1"), "my-app+x.1")
        XCTAssertEqual(URLScheme.normalize("stats"), "stats")
        XCTAssertEqual(URLScheme.normalize("ÄB"), "äb")  // not a valid scheme; lowercased as before
    }

    func testPercentEscapesAfterThePlainPrefixAreStillChecked() throws {
        XCTAssertEqual(try URLReference(parsing: "myapp://open/a%20b?x=%2F").path, "/a%20b")
        XCTAssertThrowsError(try URLReference(parsing: "myapp://open/abc%2")) { error in
            XCTAssertEqual((error as? URLParseError)?.position, 16)
        }
        XCTAssertThrowsError(try URLReference(parsing: "myapp://open/a b")) { error in
            XCTAssertEqual((error as? URLParseError)?.position, 14)
        }
    }
}

/// IRIs (non-ASCII characters, spaces) become the URIs they name; RFC 3492's sample strings.
final class URLReferenceIRITests: XCTestCase {
    func testPunycodeMatchesRFC3492() {
        XCTAssertEqual(URLReference.punycode(Array("bücher".unicodeScalars.map(\.value))), "bcher-kva")
        XCTAssertEqual(URLReference.punycode(Array("münchen".unicodeScalars.map(\.value))), "mnchen-3ya")
        // RFC 3492 7.1 (B) Chinese (simplified) and (L) a Japanese mixed sample.
        XCTAssertEqual(URLReference.punycode(Array("他们为什么不说中文".unicodeScalars.map(\.value))), "ihqwcrb4cv8a8dqg056pqjye")
        XCTAssertEqual(URLReference.punycode(Array("3年B組金八先生".unicodeScalars.map(\.value))), "3B-ww4c5e180e575a65lsy2b")
    }

    func testIRIsAreEncoded() throws {
        let cases: [(String, String)] = [
            ("https://de.wikipedia.org/wiki/Straße", "https://de.wikipedia.org/wiki/Stra%C3%9Fe"),
            ("https://bücher.de/", "https://xn--bcher-kva.de/"),
            ("https://Bücher.example.com:8443/a b?q=ä ö#frag ment", "https://xn--bcher-kva.example.com:8443/a%20b?q=%C3%A4%20%C3%B6#frag%20ment"),
            ("notes://ünï", "notes://xn--n-nga1b"),
            ("notes:a b", "notes:a%20b"),
            ("https://user:pä@example.com/x", "https://user:p%C3%A4@example.com/x"),
            ("https://example.com/{a}|\"b\"", "https://example.com/%7Ba%7D%7C%22b%22"),
            ("  https://example.com/page ", "https://example.com/page"),  // (spaces around a pasted link)
            (" notes:a b ", "notes:a%20b"),
        ]
        for (iri, uri) in cases {
            XCTAssertEqual(URLReference.encodingIRI(iri), uri, iri)
            XCTAssertEqual(try URLReference(parsingLeniently: iri).original, uri, iri)
        }
        // Nothing to encode: nil, and the lenient parse is the strict one.
        XCTAssertNil(URLReference.encodingIRI("https://example.com/a%20b"))
        XCTAssertEqual(try URLReference(parsingLeniently: "HTTPS://Example.com/").original, "HTTPS://Example.com/")
        // What encoding cannot fix stays an error, reported for the text as written.
        for bad in ["https://exa\tmple.com/ä", "ä b", "https://x/%zz ä", "https://[::1 ä]/"] {
            XCTAssertThrowsError(try URLReference(parsingLeniently: bad), bad) { error in
                XCTAssertEqual((error as? URLParseError)?.input, bad)
            }
        }
        // The cause named is what encoding cannot fix, not an earlier character it would encode.
        let unfixable: [(String, String, Int)] = [
            ("deeplinkmyapp://h/p?q=é&x=\u{0}", "control character U+0000", 26),
            ("https://example.com/ä b/\t", "control character U+0009", 24),
            ("https://example.com/ä/%zz", "invalid percent-escape '%zz'", 22),
            ("https://example.com/é%4", "invalid percent-escape '%4'", 21),
        ]
        for (text, cause, position) in unfixable {
            XCTAssertThrowsError(try URLReference(parsingLeniently: text), text) { error in
                let e = error as? URLParseError
                XCTAssertTrue(e?.reason.hasPrefix(cause) ?? false, "\(text): \(String(describing: e?.reason))")
                XCTAssertEqual(e?.position, position, text)
                XCTAssertEqual(e?.input, text)
            }
        }
        // Text without a valid scheme is said to be that, not a space or letter to encode.
        let schemeless: [(String, String)] = [
            ("not a url", "missing scheme (expected SCHEME:..., e.g. 'https://example.com/' or 'myapp://open')"),
            ("ä b/c:d", "missing scheme (expected SCHEME:..., e.g. 'https://example.com/' or 'myapp://open')"),
            ("foo bar://x", "invalid scheme 'foo bar' (a letter, then letters, digits, '+', '-' or '.')"),
            (" :x y", "missing scheme before ':'"),
        ]
        for (text, reason) in schemeless {
            XCTAssertThrowsError(try URLReference(parsingLeniently: text), text) { error in
                XCTAssertEqual((error as? URLParseError)?.reason, reason, text)
                XCTAssertEqual((error as? URLParseError)?.input, text)
            }
        }
    }
}
