// Property tests: random JSON values (seeded, reproducible) survive write -> parse, compact output
// never has a raw newline, pretty output parses back to the same value.

import Testing

@testable import ShareProtocol

/// Generates random JSON values from a seed.
struct JSONGenerator {
    var rng: SeededRNG

    init(seed: UInt64) { rng = SeededRNG(seed: seed) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }

    mutating func digits(_ count: Int, leadingNonZero: Bool) -> String {
        var s = ""
        for i in 0..<count {
            s += String(leadingNonZero && i == 0 ? int(1...9) : int(0...9))
        }
        return s
    }

    /// A valid JSON number lexeme, in any of the grammar's shapes.
    mutating func numberLexeme() -> String {
        var s = chance(30) ? "-" : ""
        s += chance(20) ? "0" : digits(int(1...35), leadingNonZero: true)
        if chance(35) { s += "." + digits(int(1...20), leadingNonZero: false) }
        if chance(25) {
            s += chance(50) ? "e" : "E"
            let sign = int(0...2)
            s += sign == 0 ? "" : (sign == 1 ? "+" : "-")
            s += digits(int(1...4), leadingNonZero: false)
        }
        return s
    }

    mutating func scalar() -> Unicode.Scalar {
        switch int(0...9) {
        case 0: return Unicode.Scalar(UInt8(int(0...0x1F)))  // control characters
        case 1: return ["\"", "\\", "/", "\u{7F}"][int(0...3)]
        case 2: return Unicode.Scalar(UInt32(int(0x80...0x7FF)))!
        case 3:
            // BMP, skipping the surrogate range.
            let v = UInt32(int(0x800...0xFFFD))
            return Unicode.Scalar(v >= 0xD800 && v <= 0xDFFF ? v + 0x800 : v)!
        case 4: return Unicode.Scalar(UInt32(int(0x10000...0x10FFFF)))!
        case 5: return ["\u{2028}", "\u{2029}", "\u{FEFF}", "😀", "é"][int(0...4)]
        default: return Unicode.Scalar(UInt8(int(0x20...0x7E)))
        }
    }

    mutating func string() -> String {
        var s = String.UnicodeScalarView()
        for _ in 0..<int(0...12) { s.append(scalar()) }
        return String(s)
    }

    mutating func value(depth: Int = 0) -> JSONValue {
        let leafOnly = depth >= 6
        switch int(0...(leafOnly ? 4 : 7)) {
        case 0: return .null
        case 1: return .bool(chance(50))
        case 2: return .number(numberLexeme())
        case 3, 4: return .string(string())
        case 5: return .array((0..<int(0...5)).map { _ in value(depth: depth + 1) })
        default:
            var o = JSONObject()
            for _ in 0..<int(0...6) { o[string()] = value(depth: depth + 1) }
            return .object(o)
        }
    }
}

@Suite("JSON properties")
struct JSONPropertyTests {
    static let seeds: [UInt64] = [1, 2, 3, 42, 0xDEAD_BEEF]

    @Test(arguments: seeds)
    func writeThenParseIsIdentity(_ seed: UInt64) throws {
        var gen = JSONGenerator(seed: seed)
        for i in 0..<100 {
            let v = gen.value()
            let bytes = v.bytes
            let parsed: JSONValue
            do {
                parsed = try JSONParser.parse(bytes)
            } catch {
                Issue.record("seed \(seed) #\(i): \(error) in \(text(bytes))")
                continue
            }
            #expect(parsed == v, "seed \(seed) #\(i): \(text(bytes))")
            // Writing is deterministic and stable: write(parse(write(v))) == write(v).
            #expect(parsed.bytes == bytes, "seed \(seed) #\(i)")
            #expect(!bytes.contains(0x0A), "seed \(seed) #\(i): raw newline")
        }
    }

    @Test(arguments: seeds)
    func prettyTextParsesBack(_ seed: UInt64) throws {
        var gen = JSONGenerator(seed: seed &+ 1000)
        for i in 0..<40 {
            let v = gen.value()
            let pretty = v.prettyText()
            #expect(try JSONParser.parse(pretty) == v, "seed \(seed) #\(i)")
        }
    }

    @Test func generatedNumbersAreValidAndKept() throws {
        var gen = JSONGenerator(seed: 7)
        for _ in 0..<300 {
            let n = gen.numberLexeme()
            #expect(try JSONParser.parse(n) == .number(n), "\(n)")
        }
    }

    @Test func randomBytesNeverCrashTheParser() {
        // Garbage in: either a value or an error with an in-range offset, never a crash.
        var rng = SeededRNG(seed: 99)
        let alphabet = utf8(#"{}[]:,"\ 0123456789-+.eEtruefalsn"#) + [0x0A, 0x00, 0xFF, 0xC3, 0xA9]
        for _ in 0..<2000 {
            let len = Int.random(in: 0...24, using: &rng)
            let bytes = (0..<len).map { _ in alphabet.randomElement(using: &rng)! }
            if let e = parseError(bytes) {
                #expect(e.offset >= 0 && e.offset <= bytes.count, "\(bytes)")
            }
        }
    }

    @Test func mutatedValidDocumentsAreHandled() throws {
        // Truncating a valid document anywhere (except at a whole-value boundary) must fail cleanly.
        var gen = JSONGenerator(seed: 5)
        for _ in 0..<50 {
            let v: JSONValue = .array([gen.value(), gen.value()])
            let bytes = v.bytes
            for cut in 0..<bytes.count {
                let prefix = Array(bytes[0..<cut])
                if let e = parseError(prefix) {
                    #expect(e.offset <= prefix.count)
                } else {
                    Issue.record("truncated document parsed: \(text(prefix))")
                }
            }
        }
    }
}
