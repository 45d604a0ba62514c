// The per-app event queue's index: ids `ev-N` are found by their number, anything else by the
// whole id, and an id that only looks like another (`ev-07` for `ev-7`) is never confused with it.

import ShareProtocol
import XCTest

@testable import ShareStore

final class AppQueueTests: XCTestCase {
    func event(_ id: String, _ seq: UInt64) -> StoredEvent {
        StoredEvent(id: id, seq: seq, app: "com.a", body: [:], segment: 1)
    }

    func testCanonicalEventNumbers() {
        XCTAssertEqual(AppQueue.number("ev-0"), 0)
        XCTAssertEqual(AppQueue.number("ev-7"), 7)
        XCTAssertEqual(AppQueue.number("ev-18446744073709551615"), UInt64.max)
        for id in ["ev-", "ev-07", "ev-00", "ev-18446744073709551616", "ev-1x", "ex-1", "ev1", "", "EV-1", "ev-+1", "ev--1"] {
            XCTAssertNil(AppQueue.number(id), id)
        }
    }

    func testCanonicalIDsAreWrittenAsTheNumberReadsThem() {
        var values: [UInt64] = [0, 1, 9, 10, 99, 100, 999_999, 1_000_000, UInt64.max - 1, UInt64.max]
        var g = SystemRandomNumberGenerator()
        for _ in 0..<2000 { values.append(UInt64.random(in: 0...UInt64.max, using: &g) >> UInt64.random(in: 0..<64, using: &g)) }
        for v in values {
            let id = EventStore.canonicalID(v)
            XCTAssertEqual(id, "ev-" + String(v))
            XCTAssertEqual(AppQueue.number(id), v)
        }
    }

    func testEventsAppendedByTheirSequenceAreFoundByID() {
        var q = AppQueue()
        q.append(canonical: event("ev-3", 3))
        q.append(canonical: event("ev-12", 12))
        XCTAssertTrue(q.contains("ev-3"))
        XCTAssertTrue(q.contains("ev-12"))
        XCTAssertFalse(q.contains("ev-03"))
        XCTAssertEqual(q.remove("ev-12")?.seq, 12)
        XCTAssertEqual(q.count, 1)
        XCTAssertEqual(q.ordered.map(\.id), ["ev-3"])
    }

    func testFindsRemovesAndNeverConfusesIDs() {
        var q = AppQueue()
        q.append(event("ev-7", 7))
        q.append(event("ev-9", 9))
        q.append(event("custom-id", 10))  // not canonical: indexed by the whole id
        XCTAssertEqual(q.count, 3)
        XCTAssertTrue(q.contains("ev-7"))
        XCTAssertFalse(q.contains("ev-07"))
        XCTAssertFalse(q.contains("ev-8"))
        XCTAssertNil(q.remove("ev-07"))
        XCTAssertEqual(q.remove("ev-7")?.seq, 7)
        XCTAssertNil(q.remove("ev-7"), "removed once")
        XCTAssertEqual(q.remove("custom-id")?.seq, 10)
        XCTAssertEqual(q.count, 1)
        XCTAssertEqual(q.first?.id, "ev-9")
        XCTAssertEqual(q.ordered.map(\.id), ["ev-9"])
    }

    func testManyAcksKeepTheIndexRight() {
        var q = AppQueue()
        for n in 1...5000 { q.append(event("ev-\(n)", UInt64(n))) }
        // Remove most from the front (the queue compacts its slots past 1,024 empty ones).
        for n in 1...3000 { XCTAssertNotNil(q.remove("ev-\(n)")) }
        XCTAssertEqual(q.count, 2000)
        XCTAssertEqual(q.first?.id, "ev-3001")
        for n in stride(from: 5000, through: 3001, by: -2) { XCTAssertEqual(q.remove("ev-\(n)")?.seq, UInt64(n)) }
        XCTAssertEqual(q.ordered.map(\.seq), Array(stride(from: UInt64(3001), through: 4999, by: 2)))
    }
}

/// SegmentCounts keeps the active segment's count outside its dictionary; under any sequence of
/// changes it must read exactly as a plain dictionary does.
final class SegmentCountsTests: XCTestCase {
    func testBehavesAsADictionary() {
        var g = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var counts = SegmentCounts()
            var model: [Int: Int] = [:]
            for _ in 0..<300 {
                let k = Int.random(in: 1...6, using: &g)
                switch Int.random(in: 0..<10, using: &g) {
                case 0..<5:
                    let d = Int.random(in: -2...3, using: &g)
                    counts[k, default: 0] += d
                    model[k, default: 0] += d
                case 5, 6: XCTAssertEqual(counts[k], model[k])
                case 7:
                    counts[k] = nil
                    model[k] = nil
                case 8:
                    let v = Int.random(in: 0...9, using: &g)
                    counts[k] = v
                    model[k] = v
                default:
                    for s in counts.keys where s <= k { counts[s] = nil }
                    for s in Array(model.keys) where s <= k { model[s] = nil }
                }
                XCTAssertEqual(counts.keys.sorted(), model.keys.sorted())
                XCTAssertEqual(counts[k, default: 0], model[k, default: 0])
            }
        }
    }
}
