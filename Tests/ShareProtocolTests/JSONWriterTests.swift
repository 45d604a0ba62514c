// JSONWriter: compact output, string escaping, never a raw newline, pretty text.

import Testing

@testable import ShareProtocol

@Suite("JSONWriter")
struct JSONWriterTests {
    @Test func writesEveryKind() {
        #expect(JSONValue.null.compactText == "null")
        #expect(JSONValue.bool(true).compactText == "true")
        #expect(JSONValue.bool(false).compactText == "false")
        #expect(JSONValue.number("-1.5e3").compactText == "-1.5e3")
        #expect(JSONValue.string("x").compactText == #""x""#)
        #expect(JSONValue.array([]).compactText == "[]")
        #expect(JSONValue.object(JSONObject()).compactText == "{}")
        let v: JSONValue = ["b": [1, "two", nil, true], "a": ["c": false]]
        #expect(v.compactText == #"{"b":[1,"two",null,true],"a":{"c":false}}"#)
    }

    @Test func printsAsCompactJSON() {
        let v: JSONValue = ["a": [1, "x\u{e9}", .null, true], "b": .number("1.50")]
        #expect("\(v)" == #"{"a":[1,"xé",null,true],"b":1.50}"#)
        #expect(String(describing: v) == v.compactText)
        let o: JSONObject = ["k": "v"]
        #expect("\(o)" == #"{"k":"v"}"#)
        #expect("\(JSONValue.string("a\"b"))" == #""a\"b""#)
    }

    @Test func writeAppendsToExistingBuffer() {
        var out = utf8("prefix:")
        JSONValue.array([1, 2]).write(to: &out)
        JSONValue.string("s").write(to: &out)
        #expect(text(out) == #"prefix:[1,2]"s""#)
    }

    @Test(arguments: [
        ("plain", #""plain""#),
        ("", #""""#),
        ("a\"b", #""a\"b""#),
        ("a\\b", #""a\\b""#),
        ("line1\nline2", #""line1\nline2""#),
        ("cr\rlf\n", #""cr\rlf\n""#),
        ("tab\t", #""tab\t""#),
        ("\u{8}\u{C}", #""\b\f""#),
        ("\u{0}", #""\u0000""#),
        ("\u{1}\u{1F}", #""\u0001\u001f""#),
        ("\u{B}", #""\u000b""#),
        ("\u{1B}[0m", #""\u001b[0m""#),
        ("/", #""/""#),
        ("\u{7F}", "\"\u{7F}\""),
        ("é中😀", "\"é中😀\""),
        ("\u{2028}\u{2029}", "\"\u{2028}\u{2029}\""),
        ("\"\\\"", #""\"\\\"""#),
    ])
    func escapesStrings(_ input: String, _ expected: String) throws {
        let written = JSONValue.string(input).compactText
        #expect(written == expected)
        var out: [UInt8] = []
        JSONValue.writeString(input, to: &out)
        #expect(out == utf8(expected))
        // It parses back to the same string.
        #expect(try JSONParser.parse(written) == .string(input))
    }

    @Test func nonASCIIIsWrittenAsRawUTF8() {
        let bytes = JSONValue.string("é😀").bytes
        #expect(bytes == [0x22, 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80, 0x22])
        #expect(!text(bytes).contains("\\u"))
    }

    @Test func escapesAllControlCharacters() throws {
        for c in 0..<0x20 {
            let s = String(UnicodeScalar(UInt8(c)))
            let bytes = JSONValue.string(s).bytes
            #expect(!bytes.contains { $0 < 0x20 }, "U+\(String(c, radix: 16)) written raw")
            #expect(try JSONParser.parse(bytes) == .string(s))
        }
    }

    @Test func keysAreEscapedToo() throws {
        let v: JSONValue = .object(JSONObject([("a\"b\n", .int(1)), ("é", .int(2))]))
        #expect(v.compactText == "{\"a\\\"b\\n\":1,\"é\":2}")
        #expect(try JSONParser.parse(v.bytes) == v)
    }

    @Test func compactOutputNeverContainsNewline() {
        let nasty: JSONValue = [
            "line\nkey": "a\nb\r\nc",
            "list": ["\n", "\r", "\u{0}\n\u{1F}", ["\n": "\n"]],
            "pretty": .string(JSONValue.array([1, 2]).prettyText()),
        ]
        let bytes = nasty.bytes
        #expect(!bytes.contains(0x0A))
        #expect(!bytes.contains(0x0D))
    }

    @Test func objectsKeepInsertionOrder() {
        var o = JSONObject()
        o["z"] = 1
        o["a"] = 2
        o["m"] = 3
        o["a"] = 4  // replacing keeps the position
        #expect(JSONValue.object(o).compactText == #"{"z":1,"a":4,"m":3}"#)
        o["z"] = nil
        #expect(JSONValue.object(o).compactText == #"{"a":4,"m":3}"#)
    }

    @Test func prettyText() throws {
        let v: JSONValue = ["a": [1, 2], "b": ["c": nil], "e": [], "o": .object(JSONObject()), "s": "x\ny"]
        let pretty = v.prettyText()
        #expect(
            pretty == """
                {
                  "a": [
                    1,
                    2
                  ],
                  "b": {
                    "c": null
                  },
                  "e": [],
                  "o": {},
                  "s": "x\\ny"
                }
                """)
        #expect(try JSONParser.parse(pretty) == v)
        #expect(JSONValue.number("5").prettyText() == "5")
        #expect(JSONValue.array([1]).prettyText(indent: 1) == "[\n    1\n  ]")
    }

    @Test func doubleConstructor() throws {
        #expect(JSONValue.double(3) == .number("3"))
        #expect(JSONValue.double(-2) == .number("-2"))
        #expect(JSONValue.double(-0.0) == .number("0"))
        #expect(JSONValue.double(0.1) == .number("0.1"))
        #expect(JSONValue.double(.nan) == .null)
        #expect(JSONValue.double(.infinity) == .null)
        #expect(JSONValue.double(-.infinity) == .null)
        for d in [0.1, 1.5, -2.25, 1e15, 1e20, 1e300, 5e-324, 1e-5, 123456.789, Double.greatestFiniteMagnitude, -1e-7] {
            let v = JSONValue.double(d)
            // Always valid JSON, and the same number.
            let parsed = try JSONParser.parse(v.bytes)
            #expect(parsed == v, "\(d)")
            #expect(parsed.doubleValue == d, "\(d)")
        }
    }

    /// The one-append member writer gives the bytes of its plain pieces, for every length around
    /// its 128-byte scratch, with and without escapes, comma and quoted head.
    @Test func stringAfterHeadMatchesThePlainPieces() {
        let heads: [StaticString] = ["", #"{"id":"#, "key", #","a_rather_long_member_name_to_push_the_total_up":"#]
        for length in [0, 1, 7, 8, 9, 60, 100, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 200] {
            for escaped in [false, true] {
                var value = String(repeating: "a", count: length)
                if escaped && length > 0 { value = "\"" + value.dropFirst() }
                for head in heads {
                    for comma in [false, true] {
                        for quotingHead in [false, true] {
                            var expected: [UInt8] = Array("prefix".utf8)
                            if comma { expected.append(UInt8(ascii: ",")) }
                            if quotingHead { expected.append(UInt8(ascii: "\"")) }
                            head.withUTF8Buffer { expected.append(contentsOf: $0) }
                            if quotingHead { expected += Array("\":".utf8) }
                            JSONValue.writeString(value, to: &expected)
                            var out: [UInt8] = Array("prefix".utf8)
                            JSONValue.writeString(value, after: head, comma: comma, quotingHead: quotingHead, to: &out)
                            #expect(text(out) == text(expected), "length \(length) escaped \(escaped) head \(head)")
                        }
                    }
                }
            }
        }
        // Non-ASCII text that needs escaping takes the plain path.
        var out: [UInt8] = []
        JSONValue.writeString("é\u{0}x", after: #"{"k":"#, to: &out)
        #expect(text(out) == #"{"k":"é\u0000x""#)
    }

    @Test func appendJoinedAroundItsScratch() {
        for length in [0, 1, 50, 100, 110, 111, 112, 113, 127, 128, 129, 300] {
            let middle = Array(repeating: UInt8(ascii: "7"), count: length)
            var out: [UInt8] = Array("x".utf8)
            middle.withUnsafeBufferPointer { JSONValue.appendJoined(#"{"jsonrpc":"2.0","id":"#, $0, #","result":"#, to: &out) }
            #expect(text(out) == "x" + #"{"jsonrpc":"2.0","id":"# + String(repeating: "7", count: length) + #","result":"#)
        }
    }

    /// Object members with string values (written in one append when short) give the bytes of
    /// the plain writer, whatever the lengths and escapes of key and value.
    @Test func stringMembersMatchThePlainPieces() {
        let texts = ["", "k", "url", "a\"q", "line\n", String(repeating: "k", count: 60), String(repeating: "v", count: 125), "é😀"]
        for key in texts {
            for value in texts {
                let object: JSONValue = .object(JSONObject(uniqueMembers: [(key: "first", value: 1), (key: key, value: .string(value))]))
                var expected = Array(#"{"first":1,"#.utf8)
                JSONValue.writeString(key, to: &expected)
                expected.append(UInt8(ascii: ":"))
                JSONValue.writeString(value, to: &expected)
                expected.append(UInt8(ascii: "}"))
                #expect(object.compactText == text(expected), "key \(key) value \(value)")
                let alone: JSONValue = .object(JSONObject(uniqueMembers: [(key: key, value: .string(value))]))
                #expect(alone.compactText == "{" + String(text(expected).dropFirst(#"{"first":1,"#.count)), "key \(key) value \(value)")
            }
        }
    }
}
