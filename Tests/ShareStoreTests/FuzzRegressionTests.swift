// Journal records found for fuzz/targets/journal.swift: each is checksum-valid, so recovery hands it to
// the store's decoder, and opening the store (or the first change after it) must not trap. Sequence
// numbers and versions at or above 2^62 cannot be reached and are skipped as damage.

import Foundation
import ShareProtocol
import ShareStore
import XCTest

final class FuzzRegressionTests: XCTestCase {
    var dir: String = ""

    override func setUp() { dir = NSTemporaryDirectory() + "sbfuzz-\(UUID().uuidString.prefix(8))" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    /// CRC-32C (Castagnoli), bitwise: the journal's record checksum.
    func crc32c(_ crc: UInt32, _ bytes: [UInt8]) -> UInt32 {
        var c = ~crc
        for b in bytes {
            c ^= UInt32(b)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        }
        return ~c
    }

    /// One journal record: "\xA5S", type, flags 0, payload length (LE), CRC-32C of bytes 2..<8 + payload (LE).
    func record(_ type: UInt8, _ json: String) -> [UInt8] {
        let payload = Array(json.utf8)
        var head: [UInt8] = [0xA5, 0x53, type, 0]
        withUnsafeBytes(of: UInt32(payload.count).littleEndian) { head.append(contentsOf: $0) }
        let crc = crc32c(crc32c(0, Array(head[2..<8])), payload)
        withUnsafeBytes(of: crc.littleEndian) { head.append(contentsOf: $0) }
        return head + payload
    }

    func writeSegment(_ name: String, _ records: [[UInt8]]) throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try Data(records.flatMap { $0 }).write(to: URL(fileURLWithPath: "\(dir)/\(name)-000001.log"))
    }

    /// A sequence record `{"next": 0}`: `n - 1` underflows (EventStore.init, `.sequence` case).
    func testSequenceRecordWithNextZeroDoesNotTrap() throws {
        try writeSegment("events", [record(3, #"{"next":0}"#)])
        let s = try EventStore(directory: dir)
        XCTAssertEqual(s.pendingCount, 0)
        XCTAssertEqual(try s.enqueue(app: "com.a", fields: ["kind": "openURL"]).id, "ev-1")
    }

    /// An event whose seq is UInt64.max: `nextSeq = maxSeq + 1` overflows after replay (EventStore.init).
    func testEventWithMaximalSeqDoesNotTrap() throws {
        try writeSegment(
            "events", [record(1, #"{"app":"com.a","id":"ev-1","seq":18446744073709551615,"body":{"id":"ev-1"}}"#)])
        let s = try EventStore(directory: dir)
        XCTAssertEqual(s.pendingCount, 0, "the unreachable sequence number is skipped as damage")
        XCTAssertEqual(try s.enqueue(app: "com.a", fields: [:]).id, "ev-1")
    }

    /// A defaults record whose version is UInt64.max used to make the next `set` trap on `version + 1`:
    /// it is skipped as damage, so the suite stays at version 0 and the next change works.
    func testDefaultsAtMaximalVersionDoNotTrapOnSet() throws {
        try writeSegment("defaults", [record(1, #"{"key":"a","value":1,"version":18446744073709551615}"#)])
        let s = try DefaultsStore(directory: dir, group: "group.a")
        XCTAssertEqual(s.version, 0)
        XCTAssertNoThrow(try s.set("b", 2))
        XCTAssertEqual(s.version, 1)
    }
}
