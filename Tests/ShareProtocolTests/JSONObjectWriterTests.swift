// JSONObjectWriter writes exactly what JSONValue.write writes for the same members.

import Testing

@testable import ShareProtocol

@Suite struct JSONObjectWriterTests {
    @Test func matchesTheTreeWriter() throws {
        var w = JSONObjectWriter()
        w.int("a", -42)
        w.uint("big", UInt64.max)
        w.string("s", "quote \" backslash \\ newline \n tab \t é 😀 \u{01}")
        w.bool("t", true)
        w.bool("f", false)
        w.double("d", 16.689)
        w.double("whole", 3)
        w.double("nan", .nan)
        w.object("empty") { _ in }
        w.object("nested") { n in
            n.int("x", 0)
            n.object("deeper") { $0.string("k", "v") }
        }
        w.value("arr", [1, "two", nil])
        w.int("min", Int.min)
        let bytes = w.finish()
        let tree: JSONValue = [
            "a": -42, "big": .number("18446744073709551615"),
            "s": .string("quote \" backslash \\ newline \n tab \t é 😀 \u{01}"),
            "t": true, "f": false, "d": .double(16.689), "whole": .double(3), "nan": nil,
            "empty": .object(JSONObject()), "nested": ["x": 0, "deeper": ["k": "v"]], "arr": [1, "two", nil],
            "min": .int(Int.min),
        ]
        #expect(bytes == tree.bytes)
        #expect(try JSONParser.parse(bytes) == tree)
    }

    @Test func emptyObject() {
        #expect(JSONObjectWriter().finish() == Array("{}".utf8))
        var w = JSONObjectWriter()
        w.int("a", 1)
        #expect(w.finishInPlace() == Array(#"{"a":1}"#.utf8))
        #expect(w.bytes.isEmpty)
    }

    /// `decimal` writes thousandths as a number with three decimals that parses back exactly.
    @Test func decimalsFromThousandths() throws {
        for (v, text) in [(0, "0.000"), (5, "0.005"), (50, "0.050"), (999, "0.999"), (1000, "1.000"),
                          (12345, "12.345"), (86_400_001, "86400.001")] as [(UInt64, String)] {
            var w = JSONObjectWriter()
            w.decimal("up", thousandths: v)
            let bytes = w.finish()
            #expect(bytes == Array(#"{"up":\#(text)}"#.utf8))
            let parsed = try JSONParser.parse(bytes)
            #expect(parsed["up"]?.doubleValue == Double(v) / 1000)
        }
    }

    /// Nested objects one after another and inside each other share the parent's buffer.
    @Test func nestedObjectsInARow() {
        var w = JSONObjectWriter(capacity: 8)
        for _ in 0..<3 { w.object("o") { $0.object("p") { $0.int("q", 1) } } }
        w.object("e") { _ in }
        #expect(w.finish() == Array(#"{"o":{"p":{"q":1}},"o":{"p":{"q":1}},"o":{"p":{"q":1}},"e":{}}"#.utf8))
    }

    /// Integer members, with a key short enough to be assembled with its digits on the stack and
    /// with one that is not, are written as the tree writer writes them.
    @Test func integerMembersWithShortAndLongKeys() throws {
        for v in [0, 7, -7, 10, -10, 999_999, Int.max, Int.min] {
            var w = JSONObjectWriter()
            w.int("n", v)
            w.int("a_key_long_enough_that_it_and_twenty_one_digits_do_not_fit_in_the_scratch_space", v)
            w.uint("u", UInt64(v.magnitude))
            let tree: JSONValue = [
                "n": .int(v), "a_key_long_enough_that_it_and_twenty_one_digits_do_not_fit_in_the_scratch_space": .int(v),
                "u": .number(String(v.magnitude)),
            ]
            #expect(w.finish() == tree.bytes)
        }
    }

    @Test func booleanMembersWithShortAndLongKeys() throws {
        for v in [true, false] {
            var w = JSONObjectWriter()
            w.bool("b", v)
            w.bool("a_key_long_enough_that_it_and_twenty_one_digits_do_not_fit_in_the_scratch_space", v)
            w.bool("c", !v)
            let tree: JSONValue = [
                "b": .bool(v), "a_key_long_enough_that_it_and_twenty_one_digits_do_not_fit_in_the_scratch_space": .bool(v),
                "c": .bool(!v),
            ]
            #expect(w.finish() == tree.bytes)
            var first = JSONObjectWriter()
            first.bool("only", v)
            #expect(first.finish() == Array((v ? #"{"only":true}"# : #"{"only":false}"#).utf8))
        }
    }

    @Test func integersOfEveryWidth() {
        for v: Int64 in [0, 1, -1, 9, 10, 99, 100, -100, 1_234_567_890_123, .max, .min] {
            var out: [UInt8] = []
            JSONValue.writeInteger(v, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == String(v))
        }
        var out: [UInt8] = []
        JSONValue.writeInteger(UInt64.max, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == String(UInt64.max))
    }
}

@Suite struct JSONStringEscapingTests {
    /// The word-at-a-time scan must find a character that needs escaping at every position.
    @Test func escapesAtEveryPosition() throws {
        for special: Character in ["\"", "\\", "\n", "\u{00}", "\u{1F}", "\t"] {
            for length in 1...24 {
                for position in 0..<length {
                    var chars = Array(repeating: Character("a"), count: length)
                    chars[position] = special
                    let s = String(chars)
                    var out: [UInt8] = []
                    JSONValue.writeString(s, to: &out)
                    #expect(out.count > s.utf8.count + 2, "\(s.debugDescription) was not escaped")
                    #expect(try JSONParser.parse(out) == .string(s))
                }
            }
        }
    }

    @Test func bytesThatLookCloseAreNotEscaped() throws {
        // 0x20 (space), 0x21, 0x23, 0x5B, 0x5D, 0x7F and multi-byte UTF-8 need no escaping.
        let s = " !#[]\u{7F}é中😀 !#[]\u{7F}é中😀"
        var out: [UInt8] = []
        JSONValue.writeString(s, to: &out)
        #expect(out == Array(("\"" + s + "\"").utf8))
    }
}
