// (Review) The lenient parse's error names what percent-encoding cannot fix (a control character,
// a malformed '%' escape) rather than an earlier character it would encode. It checked the text
// with every character it would encode replaced by 'a': a hex digit, so a '%' followed by a
// non-ASCII character, a space or another character it encodes looked like a valid escape
// (`%é1` as `%a1`) and the earlier non-ASCII character was named instead; and a malformed escape
// was shown with that 'a' in place of what the text holds.

import XCTest

@testable import ShareRouting

final class URLLenientErrorChoiceTests: XCTestCase {
    func testAMalformedEscapeWithACharacterToEncodeIsTheCauseNamed() {
        let cases: [(String, String, Int)] = [
            ("https://example.com/ä/%é1", "invalid percent-escape '%é1'", 22),
            ("https://example.com/ä/%4é", "invalid percent-escape '%4é'", 22),
            ("https://example.com/ä/% 1", "invalid percent-escape '% 1'", 22),
            ("https://example.com/ä/%z{", "invalid percent-escape '%z{'", 22),
        ]
        for (text, cause, position) in cases {
            XCTAssertThrowsError(try URLReference(parsingLeniently: text), text) { error in
                let e = error as? URLParseError
                XCTAssertTrue(e?.reason.hasPrefix(cause) ?? false, "\(text): \(String(describing: e?.reason))")
                XCTAssertEqual(e?.position, position, text)
            }
        }
    }
}
