// JSONValue / JSONObject: accessors, equality, intValue.

import Testing

@testable import ShareProtocol

@Suite("JSONValue")
struct JSONValueTests {
    @Test func literalsBuildTheRightCases() {
        let s: JSONValue = "x"
        let b: JSONValue = true
        let n: JSONValue = nil
        let i: JSONValue = 42
        let a: JSONValue = [1, "a"]
        let o: JSONValue = ["k": 1]
        #expect(s == .string("x"))
        #expect(b == .bool(true))
        #expect(n == .null)
        #expect(i == .number("42"))
        #expect(JSONValue.int(-7) == .number("-7"))
        #expect(a == .array([.number("1"), .string("a")]))
        #expect(o == .object(JSONObject([("k", .number("1"))])))
    }

    @Test func accessors() {
        let v: JSONValue = ["s": "str", "b": false, "a": [1], "o": ["x": nil], "n": nil]
        #expect(v["s"]?.stringValue == "str")
        #expect(v["b"]?.boolValue == false)
        #expect(v["a"]?.arrayValue == [.number("1")])
        #expect(v["o"]?.objectValue?["x"] == .null)
        #expect(v["n"]?.isNull == true)
        #expect(v["s"]?.isNull == false)
        #expect(v["missing"] == nil)
        #expect(JSONValue.string("x")["k"] == nil)
        #expect(JSONValue.number("1").stringValue == nil)
        #expect(JSONValue.string("1").boolValue == nil)
        #expect(JSONValue.null.arrayValue == nil)
        #expect(JSONValue.array([]).objectValue == nil)
    }

    @Test func typeNames() {
        #expect(JSONValue.null.typeName == "null")
        #expect(JSONValue.bool(true).typeName == "boolean")
        #expect(JSONValue.number("1").typeName == "number")
        #expect(JSONValue.string("").typeName == "string")
        #expect(JSONValue.array([]).typeName == "array")
        #expect(JSONValue.object(JSONObject()).typeName == "object")
    }

    @Test(arguments: [
        ("3", 3), ("3.0", 3), ("3e2", 300), ("3E2", 300), ("3.00e+1", 30), ("-0", 0), ("-12", -12), ("0", 0),
        ("1e15", 1_000_000_000_000_000), ("9223372036854775807", Int.max), ("-9223372036854775808", Int.min),
        ("2.5e1", 25), ("300e-2", 3),
    ])
    func intValueOfWholeNumbers(_ lexeme: String, _ expected: Int) {
        #expect(JSONValue.number(lexeme).intValue == expected)
    }

    @Test(arguments: ["3.5", "0.1", "-1.25", "1e400", "123456789012345678901234567890", "9223372036854775808", "1e-5"])
    func intValueOfNonIntegers(_ lexeme: String) {
        #expect(JSONValue.number(lexeme).intValue == nil)
    }

    @Test func intValueOfNonNumbers() {
        #expect(JSONValue.string("3").intValue == nil)
        #expect(JSONValue.bool(true).intValue == nil)
        #expect(JSONValue.null.intValue == nil)
    }

    @Test func doubleValue() {
        #expect(JSONValue.number("0.1").doubleValue == 0.1)
        #expect(JSONValue.number("-1.5e3").doubleValue == -1500)
        #expect(JSONValue.string("1").doubleValue == nil)
    }

    @Test func numbersCompareByLexeme() {
        // Lexemes are kept exactly, so equal numbers with different spellings are different values.
        #expect(JSONValue.number("1") != JSONValue.number("1.0"))
        #expect(JSONValue.number("1") == JSONValue.number("1"))
    }
}

@Suite("JSONObject")
struct JSONObjectTests {
    @Test func equalityIgnoresOrder() throws {
        let a: JSONObject = ["x": 1, "y": [1, 2], "z": ["p": nil, "q": true]]
        let b: JSONObject = ["z": ["q": true, "p": nil], "x": 1, "y": [1, 2]]
        #expect(a == b)
        #expect(JSONValue.object(a) == JSONValue.object(b))
        let pa = try JSONParser.parse(#"{"a":1,"b":{"c":2,"d":3}}"#)
        let pb = try JSONParser.parse(#"{"b":{"d":3,"c":2},"a":1}"#)
        #expect(pa == pb)
    }

    @Test func inequality() {
        let a: JSONObject = ["x": 1, "y": 2]
        #expect(a != ["x": 1])
        #expect(a != ["x": 1, "y": 3])
        #expect(a != ["x": 1, "z": 2])
        #expect(a != ["x": 1, "y": 2, "z": 3])
        #expect(JSONObject() == JSONObject())
        #expect(JSONObject() != ["a": nil])
        // Array order still matters.
        #expect(JSONValue.array([1, 2]) != JSONValue.array([2, 1]))
    }

    @Test func laterDuplicatesReplaceEarlier() {
        let o = JSONObject([("a", 1), ("b", 2), ("a", 3)])
        #expect(o.count == 2)
        #expect(o.keys == ["a", "b"])
        #expect(o["a"] == .number("3"))
        // Literals must have unique keys, as Dictionary literals must (debug builds assert it):
        // they are built in linear time, without a lookup per member.
        let lit: JSONObject = ["k": 1, "l": 2]
        #expect(lit.keys == ["k", "l"])
    }

    @Test func subscriptSetAndRemove() {
        var o = JSONObject()
        #expect(o.isEmpty)
        o["a"] = "x"
        o["b"] = nil  // removing a missing key is a no-op
        #expect(o.count == 1)
        o["a"] = nil
        #expect(o.isEmpty)
        #expect(o["a"] == nil)
    }

    @Test func iteratesInOrder() {
        let o: JSONObject = ["c": 1, "a": 2, "b": 3]
        #expect(o.map(\.key) == ["c", "a", "b"])
        #expect(o.members.map(\.value) == [1, 2, 3])
    }
}
