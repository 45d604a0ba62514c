// ExactKey.same compares UTF-8 bytes, whatever storage each string has: native, small (up to 15
// bytes, kept inline), a substring's copy, or bridged from NSString (UTF-16, not contiguous UTF-8),
// and never by canonical equivalence.

import Foundation
import ShareProtocol
import XCTest

final class ExactKeyTests: XCTestCase {
    func testSameComparesBytesWhateverTheStorage() {
        let texts = [
            "", "a", "group.com.cg", "group.com.mycompany.myapp.longer-than-fifteen-bytes", "é", "e\u{301}",
            "\u{212A}elvin", "Kelvin", "日本語のグループ名", "ab\u{0}c", "ab\u{0}d",
        ]
        func storages(_ s: String) -> [String] {
            var out = [s, String(decoding: Array(s.utf8), as: UTF8.self), String(Substring(s))]
            out.append(NSString(string: s) as String)  // (bridged: its UTF-8 is not contiguous)
            out.append(String(NSString(string: s + "x").substring(to: (s as NSString).length)))
            return out
        }
        var pairs = 0
        for a in texts {
            for b in texts {
                let expected = Array(a.utf8) == Array(b.utf8)
                for x in storages(a) {
                    for y in storages(b) {
                        XCTAssertEqual(ExactKey.same(x, y), expected, "\(a.debugDescription) vs \(b.debugDescription)")
                        pairs += 1
                    }
                }
            }
        }
        XCTAssertEqual(pairs, texts.count * texts.count * 25)
        // Canonically equivalent, different bytes: not the same (String's == says equal).
        XCTAssertTrue("é" == "e\u{301}")
        XCTAssertFalse(ExactKey.same("é", "e\u{301}"))
        XCTAssertFalse(ExactKey(NSString(string: "é") as String) == ExactKey("e\u{301}"))
        XCTAssertTrue(ExactKey(NSString(string: "group.com.cg.something-long") as String) == ExactKey("group.com.cg.something-long"))
    }
}
