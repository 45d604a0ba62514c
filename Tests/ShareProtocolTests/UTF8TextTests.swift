// UTF8Text.validated and its fallback for runtimes without String(validating:as:) agree: text back
// for well-formed UTF-8 (U+FFFD itself included), nil for every kind of ill-formed input.

import Testing

@testable import ShareProtocol

@Suite struct UTF8TextTests {
    static let wellFormed: [[UInt8]] = [
        [], Array("plain".utf8), Array("é 漢字 🎉".utf8), [0xEF, 0xBF, 0xBD], Array("a\u{FFFD}b".utf8), [0x00],
    ]
    static let illFormed: [[UInt8]] = [
        [0x80], [0xC3], [0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
        [0xF0, 0x9F, 0x8E], [0xFF], Array("ok".utf8) + [0xC3] + Array("x".utf8),
    ]

    @Test func wellFormedTextComesBack() {
        for b in UTF8TextTests.wellFormed {
            #expect(UTF8Text.validated(b) == String(decoding: b, as: UTF8.self))
            #expect(UTF8Text.validatedByRepairCheck(b) == String(decoding: b, as: UTF8.self))
        }
    }

    @Test func illFormedTextIsNil() {
        for b in UTF8TextTests.illFormed {
            #expect(UTF8Text.validated(b) == nil, "\(b)")
            #expect(UTF8Text.validatedByRepairCheck(b) == nil, "\(b)")
        }
    }
}
