// Base64.decode: the four-at-a-time decoder against a plain one-character-at-a-time reference
// (the rules: RFC 4648 alphabet, URL-safe digits when allowed, padding optional, whitespace
// ignored anywhere, nothing but padding and whitespace after padding, no lone trailing digit),
// and against Foundation's encoder for round trips.

import Foundation
import ShareRouting
import XCTest

final class Base64Tests: XCTestCase {
    /// `encode` gives Foundation's padded text, every length mod 3, and decodes back.
    func testEncodeMatchesFoundation() {
        var g = SystemRandomNumberGenerator()
        for n in Array(0...10) + [255, 256, 257, 4096] {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &g) }
            XCTAssertEqual(Base64.encode(bytes), Data(bytes).base64EncodedString(), "\(n)")
            XCTAssertEqual(Base64.decode(Base64.encode(bytes)), bytes, "\(n)")
        }
        XCTAssertEqual(Base64.encode(Array("f".utf8)), "Zg==")
        XCTAssertEqual(Base64.encode(Array("foob".utf8)[...]), "Zm9vYg==")
    }

    /// The rules, one character at a time.
    static func reference(_ text: String, urlSafe: Bool) -> [UInt8]? {
        var out: [UInt8] = []
        var acc: UInt32 = 0
        var bits = 0
        var padding = 0
        for c in text.utf8 {
            let v: UInt32
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): v = 62
            case UInt8(ascii: "/"): v = 63
            case UInt8(ascii: "-") where urlSafe: v = 62
            case UInt8(ascii: "_") where urlSafe: v = 63
            case UInt8(ascii: "="):
                padding += 1
                continue
            case 0x20, 0x09, 0x0A, 0x0D: continue
            default: return nil
            }
            if padding > 0 { return nil }
            acc = (acc << 6) | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((acc >> UInt32(bits)) & 0xFF))
            }
        }
        if bits >= 6 || padding > 2 { return nil }
        return out
    }

    func testRoundTripsFoundationsEncoding() {
        var rng = SystemRandomNumberGenerator()
        for length in Array(0..<40) + [1000, 4096, 65_537] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let encoded = Data(bytes).base64EncodedString()
            XCTAssertEqual(Base64.decode(encoded, urlSafe: false), bytes, "length \(length)")
            XCTAssertEqual(Base64.decode(encoded), bytes)
            let unpadded = encoded.filter { $0 != "=" }
            XCTAssertEqual(Base64.decode(unpadded, urlSafe: false), bytes)
            let lines = Data(bytes).base64EncodedString(options: [.lineLength64Characters, .endLineWithCarriageReturn, .endLineWithLineFeed])
            XCTAssertEqual(Base64.decode(lines, urlSafe: false), bytes)
            let urlSafe = encoded.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            XCTAssertEqual(Base64.decode(urlSafe), bytes)
            if urlSafe != encoded { XCTAssertNil(Base64.decode(urlSafe, urlSafe: false)) }
        }
    }

    func testAgreesWithTheReferenceOnAnyText() {
        let alphabet = Array("ABCDxyz019+/-_= \t\r\n=*é".unicodeScalars)
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let n = Int.random(in: 0...24, using: &rng)
            var s = String.UnicodeScalarView()
            for _ in 0..<n {
                // Mostly plain digits, so that the four-at-a-time path and its exits both run.
                if Int.random(in: 0..<4, using: &rng) > 0 {
                    s.append(alphabet[Int.random(in: 0..<7, using: &rng)])
                } else {
                    s.append(alphabet[Int.random(in: 0..<alphabet.count, using: &rng)])
                }
            }
            let text = String(s)
            for urlSafe in [true, false] {
                XCTAssertEqual(Base64.decode(text, urlSafe: urlSafe), Base64Tests.reference(text, urlSafe: urlSafe), "'\(text)' urlSafe \(urlSafe)")
            }
        }
    }

    func testRejections() {
        XCTAssertNil(Base64.decode("QQ==QQ=="))  // data after padding
        XCTAssertNil(Base64.decode("Q"))  // a lone digit
        XCTAssertNil(Base64.decode("QUJD==="))  // three padding characters
        XCTAssertNil(Base64.decode("QUJD*"))
        XCTAssertEqual(Base64.decode("QUJD"), Array("ABC".utf8))
        XCTAssertEqual(Base64.decode(" Q U\nJ\tD\r\n"), Array("ABC".utf8))
        XCTAssertEqual(Base64.decode("QQ== \n"), Array("A".utf8))
        XCTAssertEqual(Base64.decode(""), [])
    }
}
