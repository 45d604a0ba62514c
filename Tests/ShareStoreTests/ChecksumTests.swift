// The journal's CRC-32C: the hardware path (SSE4.2 on x86-64) and the table path agree with a
// bitwise reference for every length and alignment, and with the standard check value.

import CShareSystem
import XCTest

final class ChecksumTests: XCTestCase {
    func reference(_ crc: UInt32, _ bytes: ArraySlice<UInt8>) -> UInt32 {
        var c = ~crc
        for b in bytes {
            c ^= UInt32(b)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        }
        return ~c
    }

    func testCheckValue() {
        let bytes = Array("123456789".utf8)
        XCTAssertEqual(sb_crc32c(0, bytes, bytes.count), 0xE306_9283)
    }

    func testEveryLengthAndAlignmentAndChaining() {
        var g = SystemRandomNumberGenerator()
        let data = (0..<300).map { _ in UInt8.random(in: 0...255, using: &g) }
        data.withUnsafeBytes { buf in
            for offset in 0..<9 {
                for length in 0..<(300 - offset) where length < 40 || length % 7 == 0 {
                    let slice = data[offset..<(offset + length)]
                    XCTAssertEqual(sb_crc32c(0, buf.baseAddress! + offset, length), reference(0, slice), "offset \(offset) length \(length)")
                    // Continuing from a previous value, as the journal does (header, then payload).
                    let split = length / 3
                    let first = sb_crc32c(0, buf.baseAddress! + offset, split)
                    XCTAssertEqual(sb_crc32c(first, buf.baseAddress! + offset + split, length - split), reference(0, slice))
                }
            }
        }
    }
}
