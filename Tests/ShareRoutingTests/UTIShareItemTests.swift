// Table-driven tests for shared items: reading the contract's item objects, inferring each attachment's
// registeredTypeIdentifiers (given, URL, text, extension, content), and finding URLs in text.

import ShareProtocol
import ShareRouting
import XCTest

final class UTIShareItemTests: XCTestCase {
    let table = UTITable.system

    func testInference() {
        let pdf = Array("%PDF-1.4\n".utf8)
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        let cases: [(ShareItem, [String], TypeSource, String?, UInt)] = [
            (.url("https://youtu.be/xyz"), ["public.url"], .url, "https://youtu.be/xyz", #line),
            (.url("http://example.com/a"), ["public.url"], .url, "http://example.com/a", #line),
            (.url("file:///tmp/a.pdf"), ["public.file-url"], .url, "file:///tmp/a.pdf", #line),
            (
                .url("deeplinkmyapp://open-from-share?share=1"), ["public.url"], .url,
                "deeplinkmyapp://open-from-share?share=1", #line
            ),
            (.url("mailto:x@y.z"), ["public.url"], .url, "mailto:x@y.z", #line),
            (.url("https://x.test/a.jpg", type: "public.jpeg"), ["public.jpeg"], .given, "https://x.test/a.jpg", #line),
            (.text("hello"), ["public.plain-text"], .text, nil, #line),
            (
                .text("  https://youtu.be/xyz\n"), ["public.plain-text", "public.url"], .text, "https://youtu.be/xyz",
                #line
            ),
            (.text("Watch https://youtu.be/xyz now"), ["public.plain-text"], .text, nil, #line),
            (.text("Re: lunch"), ["public.plain-text"], .text, nil, #line),
            (.text("<b>hi</b>", type: "public.html"), ["public.html"], .given, nil, #line),
            (.data(pdf, name: "report.pdf"), ["com.adobe.pdf"], .filenameExtension, nil, #line),
            (.data(pdf, name: "notes.txt"), ["public.plain-text"], .filenameExtension, nil, #line),  // the name wins
            (.data(png), ["public.png"], .content, nil, #line),
            (.data(pdf, name: "scan"), ["com.adobe.pdf"], .content, nil, #line),
            (.data([0, 1, 2, 3]), ["public.data"], .fallback, nil, #line),
            (.data([0, 1], name: "x.unknownext"), ["public.data"], .fallback, nil, #line),
            (.data(pdf, type: "com.example.custom"), ["com.example.custom"], .given, nil, #line),
            (.file(path: "/tmp/Photo.JPG"), ["public.jpeg"], .filenameExtension, nil, #line),
            (.file(path: "/tmp/download", head: pdf), ["com.adobe.pdf"], .content, nil, #line),
            (.file(path: "/tmp/download"), ["public.data"], .fallback, nil, #line),
            (.file(path: "/tmp/clip.mov"), ["com.apple.quicktime-movie"], .filenameExtension, nil, #line),
        ]
        for (item, types, source, url, line) in cases {
            let a = table.attachment(for: item)
            XCTAssertEqual(a.registeredTypeIdentifiers, types, "\(item)", line: line)
            XCTAssertEqual(a.typeSource, source, "\(item)", line: line)
            XCTAssertEqual(a.url, url, "\(item)", line: line)
            XCTAssertEqual(a.kind, item.kind, line: line)
        }
        let carried = table.attachment(for: .text("Watch https://youtu.be/xyz and https://www.youtube.com/watch?v=1."))
        XCTAssertEqual(carried.carriedURLs, ["https://youtu.be/xyz", "https://www.youtube.com/watch?v=1"])
        XCTAssertEqual(
            table.attachment(for: .text("x")).predicateValue,
            .object(["registeredTypeIdentifiers": .array([.string("public.plain-text")])]))
    }

    func testURLsInText() {
        let cases: [(String, [String], String?, UInt)] = [
            ("https://youtu.be/xyz", ["https://youtu.be/xyz"], "https://youtu.be/xyz", #line),
            (
                "\n\thttps://www.youtube.com/watch?v=1 \n", ["https://www.youtube.com/watch?v=1"],
                "https://www.youtube.com/watch?v=1", #line
            ),
            (
                "see https://a.example/x, and (http://b.example/y).", ["https://a.example/x", "http://b.example/y"],
                nil, #line
            ),
            (
                "https://en.wikipedia.org/wiki/Swift_(programming_language)",
                ["https://en.wikipedia.org/wiki/Swift_(programming_language)"],
                "https://en.wikipedia.org/wiki/Swift_(programming_language)", #line
            ),
            ("dup https://a.example dup https://a.example", ["https://a.example"], nil, #line),
            (
                "open deeplinkmyapp://open-from-share?share=1 please", ["deeplinkmyapp://open-from-share?share=1"], nil,
                #line
            ),
            ("<https://a.example/q?x=\"1\">", ["https://a.example/q?x="], nil, #line),
            ("mailto:x@y.z", [], "mailto:x@y.z", #line),
            ("http://", [], nil, #line),
            ("no links here", [], nil, #line),
            ("Re: lunch", [], nil, #line),
            ("https://a.example b", ["https://a.example"], nil, #line),
            // IRIs give the URLs they name, encoded.
            (" https://bücher.de/straße\n", ["https://xn--bcher-kva.de/stra%C3%9Fe"], "https://xn--bcher-kva.de/stra%C3%9Fe", #line),
            ("lies https://de.wikipedia.org/wiki/Straße!", ["https://de.wikipedia.org/wiki/Stra%C3%9Fe"], nil, #line),
        ]
        for (text, found, exact, line) in cases {
            XCTAssertEqual(urlsFoundIn(text), found, text, line: line)
            XCTAssertEqual(exactURL(in: text), exact, text, line: line)
        }
    }

    func testURLsInTextEndingInLongRunsOfClosers() {
        // Each unbalanced closer trimmed from a URL used to recount the URL's brackets (and build a
        // String per character): 200,000 closers then cost 2 * 10^10 steps, about 400 s in a release
        // build. Counted once, these take milliseconds.
        let n = 200_000
        let closers = String(repeating: ")", count: n)
        let cases: [(String, [String], UInt)] = [
            ("see a://x" + closers, ["a://x"], #line),
            ("a://x(" + closers + " b", ["a://x()"], #line),
            (
                "https://e.test/" + String(repeating: "(", count: n / 2) + closers + ".",
                ["https://e.test/" + String(repeating: "(", count: n / 2) + String(repeating: ")", count: n / 2)], #line
            ),
            ("a://x(" + String(repeating: ")}],.;'", count: n / 4), ["a://x()"], #line),
            ("http://[::1]" + String(repeating: "]", count: n), ["http://[::1]"], #line),
            ("a://x" + String(repeating: ".", count: n) + closers + "!", ["a://x"], #line),
            (
                (0..<20_000).map { "a://x\($0)" + "))]" }.joined(separator: " "), (0..<20_000).map { "a://x\($0)" },
                #line
            ),
        ]
        for (text, found, line) in cases {
            XCTAssertEqual(urlsFoundIn(text), found, line: line)
        }
        let shared = table.attachment(for: .text("see a://x" + closers))
        XCTAssertEqual(shared.carriedURLs, ["a://x"])
    }

    func testURLsInTextAgreeWithTheBracketRecountingScan() {
        // Random texts built from the pieces that matter (scheme separators, brackets, trailing
        // punctuation, breaking characters, non-ASCII), against the scan urlsFoundIn used before it
        // counted brackets once: the same URLs, in the same order.
        let pieces = [
            "a", "x", "1", "+", "-", ".", ":", "/", "://", "a://", "https://", "http://", "e.test", "(", ")", "[", "]",
            "{", "}", ",", ";", "!", "?", "'", "*", "%", "%2", "%41", "#", "@", " ", "\n", "\t", "\"", "<", ">", "`",
            "\u{7}", "\u{A0}", "\u{2028}", "é", "e\u{301}", "😀", "（", "）",
        ]
        var rng = SplitMix64(seed: 7)
        for _ in 0..<20_000 {
            let count = Int(rng.next() % 24)
            let text = (0..<count).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined()
            XCTAssertEqual(urlsFoundIn(text), recountingURLsFoundIn(text), text.debugDescription)
        }
    }

    func testParsingItems() throws {
        XCTAssertEqual(try ShareItem.parse(["url": "https://a.example"]), .url("https://a.example"))
        XCTAssertEqual(
            try ShareItem.parse(["text": "", "type": " public.plain-text "]), .text("", type: "public.plain-text"))
        XCTAssertEqual(
            try ShareItem.parse(["data": "JVBERi0xLjc=", "name": "x.pdf"]), .data(Array("%PDF-1.7".utf8), name: "x.pdf")
        )
        XCTAssertEqual(try ShareItem.parse(["data": "aGk"]), .data(Array("hi".utf8)))  // unpadded
        XCTAssertEqual(try ShareItem.parse(["path": "/abs/file.pdf"]), .file(path: "/abs/file.pdf"))
        XCTAssertEqual(ShareItem.file(path: "/a").withFileHead([1, 2]), .file(path: "/a", head: [1, 2]))

        let bad: [(JSONValue, String, String, UInt)] = [
            ([:], "items[0]", "exactly one of url, text, data, path is required (found none)", #line),
            (
                ["url": "https://a.example", "text": "t"], "items[0]",
                "exactly one of url, text, data, path is required (found url, text)", #line
            ),
            ("https://a.example", "items[0]", "expected an object, got string", #line),
            (["url": 5], "items[0].url", "expected a string, got number", #line),
            (["url": ""], "items[0].url", "must not be empty", #line),
            (["path": "relative/file.pdf"], "items[0].path", "'relative/file.pdf' is not an absolute path", #line),
            (["data": "!!!"], "items[0].data", "not valid base64", #line),
            (
                ["data": "aGk=", "name": "a/b"], "items[0].name", "'a/b' is not a file name (no '/', not '.' or '..')",
                #line
            ),
            (["text": "x", "name": "n.txt"], "items[0].name", "name goes with a data item only", #line),
            (
                ["text": "x", "type": "not a type"], "items[0].type",
                "'not a type' is not a type identifier (e.g. public.url, com.adobe.pdf)", #line
            ),
        ]
        for (json, field, message, line) in bad {
            XCTAssertThrowsError(try ShareItem.parse(json, field: "items[0]"), line: line) { error in
                XCTAssertEqual(error as? ShareItemError, ShareItemError(field: field, message: message), line: line)
            }
        }
        XCTAssertThrowsError(try ShareItem.parse(["url": "not a url"], field: "items[3]")) { error in
            XCTAssertEqual((error as? ShareItemError)?.field, "items[3].url")
        }
    }
}

/// SplitMix64: a small deterministic generator for the randomized comparison.
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// urlsFoundIn as it was before it counted brackets once (quadratic in the closers trimmed): the
/// reference the randomized test compares with, on short texts.
private func recountingURLsFoundIn(_ text: String) -> [String] {
    let s = Array(text.unicodeScalars)
    var out: [String] = []
    var seen = Set<String>()
    func isSchemeChar(_ c: Unicode.Scalar) -> Bool {
        c.isASCII && (c.properties.isAlphabetic || (c >= "0" && c <= "9") || c == "+" || c == "-" || c == ".")
    }
    func isLetter(_ c: Unicode.Scalar) -> Bool { c.isASCII && c.properties.isAlphabetic }
    var i = 0
    while i + 2 < s.count {
        guard s[i] == ":", s[i + 1] == "/", s[i + 2] == "/" else {
            i += 1
            continue
        }
        var start = i
        while start > 0, isSchemeChar(s[start - 1]) { start -= 1 }
        while start < i, !isLetter(s[start]) { start += 1 }
        guard start < i else {
            i += 3
            continue
        }
        var end = i + 3
        while end < s.count {
            let c = s[end]
            if c.properties.isWhitespace || c == "\"" || c == "<" || c == ">" || c == "`" || c.value < 0x20 { break }
            end += 1
        }
        while end > i + 3 {
            let c = s[end - 1]
            if ".,;:!?'*".unicodeScalars.contains(c) {
                end -= 1
                continue
            }
            if let open = [")": "(", "]": "[", "}": "{"][String(c)] {
                let body = s[start..<end]
                let opens = body.filter { String($0) == open }.count
                let closes = body.filter { $0 == c }.count
                if closes > opens {
                    end -= 1
                    continue
                }
            }
            break
        }
        var candidate = ""
        candidate.unicodeScalars.append(contentsOf: s[start..<end])
        if let ref = try? URLReference(parsingLeniently: candidate), !(ref.isWeb && (ref.host ?? "").isEmpty),
            seen.insert(ref.original).inserted
        {
            out.append(ref.original)
        }
        i = max(end, i + 3)
    }
    return out
}
