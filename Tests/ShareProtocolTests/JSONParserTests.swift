// JSONParser: every value kind, exact number lexemes, strictness (RFC 8259) with byte offsets,
// unicode escapes, duplicate keys and nesting limits.

import Testing

@testable import ShareProtocol

@Suite("JSONParser: values")
struct JSONParserValueTests {
    /// The top-level item limit stops at the first item past it; nested arrays are not limited.
    @Test func topLevelItemLimit() throws {
        func parse(_ text: String, _ limit: Int) throws -> JSONValue {
            try Array(text.utf8).withUnsafeBytes { try JSONParser.parseBuffer($0, topLevelItemLimit: limit) }
        }
        #expect(try parse("[1,2,3]", 3) == [1, 2, 3])
        #expect(try parse("[[1,2,3,4]]", 1) == [[1, 2, 3, 4]])
        #expect(try parse("{\"a\":[1,2,3]}", 1) == ["a": [1, 2, 3]])
        #expect(throws: JSONParseError(offset: 7, reason: "too many items in the top-level array", isOverItemLimit: true)) { try parse("[1,2,3,4 garbage", 3) }
    }

    @Test func parsesLiterals() throws {
        #expect(try JSONParser.parse("null") == .null)
        #expect(try JSONParser.parse("true") == .bool(true))
        #expect(try JSONParser.parse("false") == .bool(false))
    }

    @Test func parsesStringsAndNumbers() throws {
        #expect(try JSONParser.parse(#""hello""#) == .string("hello"))
        #expect(try JSONParser.parse(#""""#) == .string(""))
        #expect(try JSONParser.parse("42") == .number("42"))
        #expect(try JSONParser.parse("-1.5e3") == .number("-1.5e3"))
    }

    /// The string scan reads 8 bytes at a time: every special byte at every position of strings
    /// around that width is still found (escapes decoded, raw controls and bad UTF-8 refused).
    @Test func specialBytesAtEveryPositionOfAString() throws {
        let specials: [(raw: [UInt8], value: String?)] = [
            (Array(#"\""#.utf8), "\""), (Array(#"\\"#.utf8), "\\"), (Array(#"\n"#.utf8), "\n"),
            (Array(#"\u00e9"#.utf8), "é"), (Array("é".utf8), "é"), ([0x09], nil), ([0x1F], nil), ([0xFF], nil),
            ([0xC3], nil),
        ]
        for length in 1...26 {
            for position in 0..<length {
                for special in specials {
                    var body = [UInt8](repeating: UInt8(ascii: "a"), count: position) + special.raw
                    body += [UInt8](repeating: UInt8(ascii: "b"), count: length - position - 1)
                    let bytes = [UInt8(ascii: "[")] + [0x22] + body + [0x22] + Array(#",{"url":1}]"#.utf8)
                    if let value = special.value {
                        let expected = String(repeating: "a", count: position) + value + String(repeating: "b", count: length - position - 1)
                        #expect(try JSONParser.parse(bytes) == .array([.string(expected), ["url": 1]]))
                    } else {
                        #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes) }
                    }
                }
            }
        }
    }

    /// Member names the protocol uses come back as their literals, equal to any other spelling.
    @Test func knownMemberNamesParseAsThemselves() throws {
        for name in KnownStrings.names + ["item", "itemsx", "URL", "params2", "a_name_longer_than_sixteen"] {
            let v = try JSONParser.parse("{\"" + name + "\":[\"" + name + "\"]}")
            #expect(v == .object(JSONObject(uniqueMembers: [(key: name, value: .array([.string(name)]))])))
            #expect(v.objectValue?.keys == [name])
        }
    }

    @Test func parsesArrays() throws {
        #expect(try JSONParser.parse("[]") == .array([]))
        #expect(try JSONParser.parse("[ ]") == .array([]))
        #expect(try JSONParser.parse(#"[1,"a",null,true,[false],{}]"#)
            == .array([.number("1"), .string("a"), .null, .bool(true), .array([.bool(false)]), .object(JSONObject())]))
    }

    @Test func parsesObjectsInOrder() throws {
        let v = try JSONParser.parse(#"{"b":1,"a":[2],"c":{"d":null}}"#)
        let obj = try #require(v.objectValue)
        #expect(obj.keys == ["b", "a", "c"])
        #expect(obj["b"] == .number("1"))
        #expect(obj["a"] == .array([.number("2")]))
        #expect(v["c"]?["d"] == .null)
        #expect(obj["missing"] == nil)
        #expect(try JSONParser.parse("{}") == .object(JSONObject()))
        #expect(try JSONParser.parse("{ }") == .object(JSONObject()))
    }

    @Test func allowsSurroundingWhitespace() throws {
        #expect(try JSONParser.parse(" \t\r\n [ 1 , { \"a\" : 2 } ] \n\t ") == [1, ["a": 2]])
        #expect(try JSONParser.parse(" 7 ") == .number("7"))
    }

    @Test func parsesFromAnyByteCollection() throws {
        // Array, ArraySlice, and a non-contiguous collection all work.
        let bytes = utf8(#"xx{"a":[1,2]}yy"#)
        let expected: JSONValue = ["a": [1, 2]]
        #expect(try JSONParser.parse(bytes[2..<(bytes.count - 2)]) == expected)
        #expect(try JSONParser.parse(Array(bytes[2..<(bytes.count - 2)])) == expected)
        #expect(try JSONParser.parse(utf8(#"{"a":[1,2]}"#).lazy.map { $0 }) == expected)
        let viaBuffer = try utf8(#"{"a":[1,2]}"#).withUnsafeBytes { buf in
            try JSONParser.parseBuffer(buf)
        }
        #expect(viaBuffer == expected)
    }

    @Test(arguments: [
        "0", "-0", "1", "-1", "0.1", "-0.0", "1e400", "-1e-400", "1E5", "1e+5", "1e-5", "2.50",
        "123456789012345678901234567890", "-123456789012345678901234567890.000000000000000000001",
        "9223372036854775808", "1.0e-0", "0e0", "100",
    ])
    func keepsExactNumberLexemes(_ lexeme: String) throws {
        #expect(try JSONParser.parse(lexeme) == .number(lexeme))
        #expect(try JSONParser.parse("[\(lexeme)]") == .array([.number(lexeme)]))
        #expect(try JSONParser.parse("{\"n\":\(lexeme)}")["n"] == .number(lexeme))
        // And writing it back gives the same text.
        #expect(try JSONParser.parse(lexeme).compactText == lexeme)
    }

    @Test(arguments: [
        #"null"#, #"true"#, #"false"#, #"0"#, #"-0"#, #"1e400"#, #"0.1"#, #"123456789012345678901234567890"#,
        #""""#, #""a\"b\\c\nd\te\r\b\f\u0000\u001f""#, #""é😀中""#, #"[]"#, #"{}"#,
        #"[1,2.5,-3e-7,"x",null,true,false,[],{}]"#,
        #"{"z":1,"a":{"nested":[{"deep":[[[]]]}]},"m":"\u0001"}"#,
        #"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"share.put","params":{"items":[{"type":"text","value":"hi"}]}}"#,
        #"[[[[[[[[[[1]]]]]]]]]]"#,
        #"{"":""}"#,
    ])
    func compactRoundTrip(_ input: String) throws {
        let value = try JSONParser.parse(input)
        #expect(value.compactText == input)
        #expect(value.bytes == utf8(input))
    }

    @Test func duplicateKeysLastWins() throws {
        let v = try JSONParser.parse(#"{"a":1,"b":2,"a":3}"#)
        let obj = try #require(v.objectValue)
        #expect(obj.count == 2)
        #expect(obj["a"] == .number("3"))
        #expect(obj["b"] == .number("2"))
        #expect(Set(obj.keys) == ["a", "b"])
    }

    @Test func duplicateKeysLastWinsInLargeObjects() throws {
        // More than 16 members switches the parser to an index; duplicates must still collapse.
        var parts = (0..<40).map { "\"k\($0)\":\($0)" }
        parts.append(#""k3":"late""#)
        parts.append(#""k0":"later""#)
        parts.append(#""k39":null"#)
        parts.append(#""k3":"latest""#)
        let v = try JSONParser.parse("{" + parts.joined(separator: ",") + "}")
        let obj = try #require(v.objectValue)
        #expect(obj.count == 40)
        #expect(obj["k3"] == .string("latest"))
        #expect(obj["k0"] == .string("later"))
        #expect(obj["k39"] == .null)
        #expect(obj["k17"] == .number("17"))
        #expect(Set(obj.keys).count == 40)
    }

    @Test func duplicateKeysNearTheIndexThreshold() throws {
        for n in 14...18 {
            var parts = (0..<n).map { "\"k\($0)\":\($0)" }
            parts.append("\"k\(n - 1)\":\"dup\"")
            parts.append("\"new\":1")
            parts.append("\"k0\":\"dup0\"")
            let v = try JSONParser.parse("{" + parts.joined(separator: ",") + "}")
            let obj = try #require(v.objectValue)
            #expect(obj.count == n + 1, "n=\(n)")
            #expect(obj["k\(n - 1)"] == .string("dup"), "n=\(n)")
            #expect(obj["k0"] == .string("dup0"), "n=\(n)")
            #expect(obj["new"] == .number("1"), "n=\(n)")
        }
    }
}

@Suite("JSONParser: unicode")
struct JSONParserUnicodeTests {
    @Test(arguments: [
        (#""\u0041""#, "A"),
        (#""\u00e9""#, "é"),
        (#""\u00E9""#, "é"),
        (#""\u4e2d""#, "中"),
        (#""\ud83d\ude00""#, "😀"),
        (#""\uD83D\uDE00""#, "😀"),
        (#""a\ud83d\ude00b""#, "a😀b"),
        (#""\ud800\udc00""#, "\u{10000}"),
        (#""\udbff\udfff""#, "\u{10FFFF}"),
        (#""\u0000""#, "\u{0}"),
        (#""\uffff""#, "\u{FFFF}"),
        (#""\/""#, "/"),
        (#""\"\\\/\b\f\n\r\t""#, "\"\\/\u{8}\u{C}\n\r\t"),
        (#""é\n😀""#, "é\n😀"),
    ])
    func decodesEscapes(_ input: String, _ expected: String) throws {
        #expect(try JSONParser.parse(input) == .string(expected))
    }

    @Test func rawUTF8PassesThrough() throws {
        let s = "héllo wörld 中文 😀 \u{10FFFF}"
        #expect(try JSONParser.parse("\"\(s)\"") == .string(s))
        #expect(try JSONParser.parse(utf8("\"\(s)\"")) == .string(s))
    }

    @Test func unicodeKeys() throws {
        let v = try JSONParser.parse(#"{"\u00e9":1,"😀":2}"#)
        #expect(v["é"] == .number("1"))
        #expect(v["😀"] == .number("2"))
    }
}

/// An input that must be rejected, with the byte offsets where the error may be reported.
struct BadJSON: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    var offsets: ClosedRange<Int>
    init(_ name: String, _ s: String, at offset: Int) {
        self.init(name, utf8(s), at: offset...offset)
    }
    init(_ name: String, _ s: String, in offsets: ClosedRange<Int>) {
        self.init(name, utf8(s), at: offsets)
    }
    init(_ name: String, _ bytes: [UInt8], at offsets: ClosedRange<Int>) {
        self.name = name
        self.bytes = bytes
        self.offsets = offsets
    }
    var testDescription: String { name }
}

@Suite("JSONParser: rejects invalid input")
struct JSONParserInvalidTests {
    static let cases: [BadJSON] = [
        // Empty / whitespace only.
        BadJSON("empty", "", at: 0),
        BadJSON("whitespace only", "   ", at: 3),
        // Numbers.
        BadJSON("leading zero", "01", at: 1),
        BadJSON("negative leading zero", "-01", at: 2),
        BadJSON("leading zeros in array", "[00]", at: 2),
        BadJSON("bare minus", "-", at: 1),
        BadJSON("minus then space", "- 1", at: 1),
        BadJSON("plus sign", "+1", at: 0),
        BadJSON("leading dot", ".5", at: 0),
        BadJSON("trailing dot", "1.", at: 2),
        BadJSON("dot then exponent", "1.e5", at: 2),
        BadJSON("empty exponent", "1e", at: 2),
        BadJSON("exponent sign only", "1e+", at: 3),
        BadJSON("hex number", "0x10", at: 1),
        BadJSON("NaN", "NaN", at: 0),
        BadJSON("nan lowercase", "nan", at: 0),
        BadJSON("NaN in array", "[NaN]", at: 1),
        BadJSON("Infinity", "Infinity", at: 0),
        BadJSON("-Infinity", "-Infinity", at: 1),
        // Literals.
        BadJSON("truncated true", "tru", at: 0),
        BadJSON("capitalized True", "True", at: 0),
        BadJSON("misspelled null", "nul1", at: 0),
        BadJSON("undefined", "undefined", at: 0),
        // Structure.
        BadJSON("trailing comma in array", "[1,]", at: 3),
        BadJSON("trailing comma in object", #"{"a":1,}"#, at: 7),
        BadJSON("leading comma in array", "[,1]", at: 1),
        BadJSON("double comma", "[1,,2]", at: 3),
        BadJSON("missing comma", "[1 2]", at: 3),
        BadJSON("missing colon", #"{"a" 1}"#, at: 5),
        BadJSON("unquoted key", "{a:1}", at: 1),
        BadJSON("number key", "{1:1}", at: 1),
        BadJSON("missing value", #"{"a":}"#, at: 5),
        BadJSON("unterminated array", "[1,2", at: 4),
        BadJSON("unterminated object", #"{"a":1"#, at: 6),
        BadJSON("unclosed bracket", "[", at: 1),
        BadJSON("mismatched brackets", "[1}", at: 2),
        BadJSON("comment", "[1]//c", at: 3),
        BadJSON("block comment", "/*c*/1", at: 0),
        // Single quotes.
        BadJSON("single-quoted string", "'a'", at: 0),
        BadJSON("single-quoted key", "{'a':1}", at: 1),
        // Strings.
        BadJSON("unterminated string", #""abc"#, at: 0),
        BadJSON("unterminated string in array", #"["abc"#, at: 1),
        BadJSON("unterminated string after escape", #""a\n"#, at: 0),
        BadJSON("escaped closing quote", #""a\""#, at: 0),
        BadJSON("unterminated escape", #""a\"#, in: 0...3),
        BadJSON("raw newline in string", "\"a\nb\"", at: 2),
        BadJSON("raw tab in string", "\"a\tb\"", at: 2),
        BadJSON("raw NUL in string", "\"a\u{0}b\"", at: 2),
        BadJSON("raw 0x1f after escape", "\"\\n\u{1F}\"", at: 3),
        BadJSON("bad escape \\x", #""\x41""#, at: 1),
        BadJSON("bad escape \\a", #""ab\a""#, at: 3),
        BadJSON("bad escape \\'", #""\'""#, at: 1),
        BadJSON("bad escape \\U", #""\U0041""#, at: 1),
        BadJSON("bad hex digit", #""\u12G4""#, at: 5),
        BadJSON("short unicode escape", #""\u12""#, in: 1...5),
        BadJSON("truncated unicode escape at end", #""\u1"#, in: 0...4),
        BadJSON("lone high surrogate", #""\ud800""#, in: 1...7),
        BadJSON("lone high surrogate then text", #""\ud800abc""#, in: 1...7),
        BadJSON("lone low surrogate", #""\udc00""#, in: 1...7),
        BadJSON("high surrogate then non-surrogate", #""\ud800\u0041""#, in: 1...13),
        BadJSON("two high surrogates", #""\ud83d\ud83d""#, in: 1...13),
        BadJSON("reversed surrogate pair", #""\ude00\ud83d""#, in: 1...7),
        // Invalid UTF-8.
        BadJSON("0xff in string", [0x22, 0xFF, 0x22], at: 0...1),
        BadJSON("0xff after text in string", [0x22, 0x61, 0xFF, 0x22], at: 1...2),
        BadJSON("bare 0xff", [0xFF], at: 0...0),
        BadJSON("0xff after value", [0x31, 0xFF], at: 1...1),
        BadJSON("overlong slash", [0x22, 0xC0, 0xAF, 0x22], at: 1...2),
        BadJSON("UTF-8 encoded surrogate", [0x22, 0xED, 0xA0, 0x80, 0x22], at: 1...2),
        BadJSON("truncated multibyte", [0x22, 0xE2, 0x82, 0x22], at: 1...2),
        BadJSON("lone continuation byte", [0x22, 0x80, 0x22], at: 1...1),
        BadJSON("0xff in escaped string", [0x22, 0x5C, 0x6E, 0xFF, 0x22], at: 1...3),
        BadJSON("0xfe as key", [0x7B, 0x22, 0xFE, 0x22, 0x3A, 0x31, 0x7D], at: 1...2),
        // Trailing garbage.
        BadJSON("two values", "1 2", at: 2),
        BadJSON("object then word", "{} x", at: 3),
        BadJSON("true then letter", "truex", at: 4),
        BadJSON("null null", "nullnull", at: 4),
        BadJSON("extra bracket", "[1]]", at: 3),
        BadJSON("string then string", #""a""b""#, at: 3),
        BadJSON("NUL after value", "1\u{0}", at: 1),
        BadJSON("number then letter", "12a", at: 2),
    ]

    @Test(arguments: cases)
    func rejectsWithOffset(_ c: BadJSON) throws {
        let error = try #require(parseError(c.bytes), "\(c.name) should be rejected")
        #expect(c.offsets.contains(error.offset), "\(c.name): offset \(error.offset) (\(error.reason))")
        #expect(!error.reason.isEmpty)
        #expect(error.description.hasSuffix("at byte \(error.offset)"))
        // Never past the end of the input.
        #expect(error.offset >= 0 && error.offset <= c.bytes.count)
    }

    @Test func stringAPIRejectsToo() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse("[1,]") }
        #expect(throws: JSONParseError.self) { try JSONParser.parse("'x'") }
    }

    @Test func errorDescriptionFormat() {
        let e = JSONParseError(offset: 12, reason: "oops")
        #expect(e.description == "oops at byte 12")
        #expect(e == JSONParseError(offset: 12, reason: "oops"))
    }
}

@Suite("JSONParser: nesting depth")
struct JSONParserDepthTests {
    static func nestedArrays(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
    }
    static func nestedObjects(_ depth: Int) -> String {
        String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
    }
    static func mixed(_ depth: Int) -> String {
        var open = ""
        var close = ""
        for i in 0..<depth {
            if i % 2 == 0 {
                open += "["
                close = "]" + close
            } else {
                open += #"{"k":"#
                close = "}" + close
            }
        }
        return open + "null" + close
    }

    @Test(arguments: [1, 2, 100, 200, 255, 256])
    func acceptsUpToMaxDepth(_ depth: Int) throws {
        #expect(JSONParser.maxDepth == 256)
        _ = try JSONParser.parse(Self.nestedArrays(depth))
        _ = try JSONParser.parse(Self.nestedObjects(depth))
        _ = try JSONParser.parse(Self.mixed(depth))
    }

    @Test(arguments: [257, 300, 1000, 100_000])
    func rejectsDeeperNesting(_ depth: Int) throws {
        let e1 = try #require(parseError(utf8(Self.nestedArrays(depth))))
        #expect(e1.offset == 256, "\(e1)")  // the 257th '['
        let e2 = try #require(parseError(utf8(Self.nestedObjects(depth))))
        #expect(e2.offset == 256 * 5, "\(e2)")  // the 257th '{'
        let e3 = try #require(parseError(utf8(Self.mixed(depth))))
        #expect(e3.offset > 0)
    }

    @Test func unbalancedDeepOpeningIsRejected() {
        // 300 opening brackets and nothing else: rejected, no crash.
        #expect(parseError(utf8(String(repeating: "[", count: 300))) != nil)
    }

    @Test func wideIsFine() throws {
        let wide = "[" + Array(repeating: "[]", count: 10_000).joined(separator: ",") + "]"
        #expect(try JSONParser.parse(wide).arrayValue?.count == 10_000)
    }
}
