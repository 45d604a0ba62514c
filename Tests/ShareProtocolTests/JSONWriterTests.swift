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
}
