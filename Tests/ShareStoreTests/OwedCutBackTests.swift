// Review reproductions: a failed commit's records that could not be taken off the segment
// (`Journal.owedCutBack`) are only taken off at the next commit of the same journal. A journal
// closed first (a group's store closed as unlisted, the broker stopped), or one that starts a new
// segment first (a defaults compaction's `reserveSnapshotSegment`), keeps them: they come back at
// replay although the broker answered them as not stored.

import Foundation
import ShareProtocol
@testable import ShareStore
import XCTest

final class OwedCutBackTests: XCTestCase {
    var dir: String = ""

    override func setUp() { dir = NSTemporaryDirectory() + "sbowed-\(UUID().uuidString.prefix(8))" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func records(_ name: String = "t") throws -> [UInt8] {
        let j = try Journal(directory: dir, name: name)
        var firstBytes: [UInt8] = []
        _ = try j.replay { r in firstBytes.append(r.payload.first ?? 0) }
        return firstBytes
    }

    /// A journal whose commit of record 2 failed (fdatasync) and whose cut and zeros failed too.
    func journalOwingACut(_ faults: CountedFaults) throws -> Journal {
        let j = try Journal(directory: dir, name: "t")
        _ = try j.replay { _ in }
        j.faultInjector = faults.injector
        try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 1, count: 100)) }
        try j.commit()
        try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 2, count: 100)) }
        faults.fail(.sync)
        faults.fail(.cutBack)
        faults.fail(.cutBackZeros)
        XCTAssertThrowsError(try j.commit())
        XCTAssertNotNil(j.owedCutBack)
        return j
    }

    /// The store is closed (`prepareToClose` → `trimReserved`) with the cut still owed, the fault
    /// being over: the refused record must not be replayed.
    func testARefusedRecordStillOwedWhenTheJournalIsClosedDoesNotComeBack() throws {
        let faults = CountedFaults()
        do {
            let j = try journalOwingACut(faults)
            j.trimReserved()  // (what a store's prepareToClose does)
        }
        XCTAssertEqual(try records(), [1], "the record answered as not stored came back at replay")
    }

    /// A new segment is about to start (a defaults compaction reserves its snapshot's segment)
    /// while the cut is still owed and still fails: the segment holding the refused record must
    /// not be sealed with it (its trim then is not durable, and the next commit would cut the
    /// new segment instead of it).
    func testNoNewSegmentStartsWhileACutIsOwed() throws {
        let faults = CountedFaults()
        do {
            let j = try journalOwingACut(faults)
            faults.fail(.cutBack)
            faults.fail(.cutBackZeros)
            XCTAssertThrowsError(try j.reserveSnapshotSegment(), "a segment started with a cut owed")
            XCTAssertEqual(j.segments, [1])
            XCTAssertNotNil(j.owedCutBack)
            // The fault is over: the next commit takes the refused record off, then writes.
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 3, count: 100)) }
            try j.commit()
            XCTAssertNil(j.owedCutBack)
        }
        XCTAssertEqual(try records(), [1, 3])
    }
}
