// A group's share records: completion and rollback keep the oldest-first order, the journal's
// sealed segments go once their shares are completed, and the pending shares of the oldest segment
// are carried forward while the sealed ones are mostly dead (surviving reopen, also when a crash
// left the old segment).

import Foundation
import ShareProtocol
@testable import ShareStore
import ShareSystem
import XCTest

final class ShareRecordStoreTests: XCTestCase {
    var dir: String = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "sbshares-\(UUID().uuidString.prefix(8))"
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func open(segmentLimit: Int? = nil) throws -> ShareRecordStore {
        try ShareRecordStore(group: "group.com.example", directory: dir, segmentLimit: segmentLimit, turn: nil)
    }

    func segmentFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".log") }.sorted()
    }

    /// Adds a URL share (created times sort by `n` unless given).
    @discardableResult
    func add(_ s: ShareRecordStore, _ n: Int, id: String? = nil, created: String? = nil) throws -> String {
        let id = id ?? "sh-\(n)"
        let created = created ?? "2026-12-01T12:00:00.000Z+" + String(repeating: "0", count: 6 - String(n).count) + String(n)
        _ = try s.add(
            id: id, extensionID: "com.example.app.share", app: "com.example.app", created: created,
            items: [["url": .string("https://example.com/\(n)"), "type": "public.url"]], files: [])
        return id
    }

    func testAFileIsCopiedUpToTheSizeItHadWhenChecked() throws {
        let dir = NSTemporaryDirectory() + "copy-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bytes = [UInt8]((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try Data(bytes).write(to: URL(fileURLWithPath: dir + "/src"))
        func copy(_ size: Int, to name: String) throws -> [UInt8] {
            _ = FileManager.default.createFile(atPath: dir + "/" + name, contents: nil)
            let src = try XCTUnwrap(FileHandle(forReadingAtPath: dir + "/src"))
            let dst = try XCTUnwrap(FileHandle(forWritingAtPath: dir + "/" + name))
            defer {
                try? src.close()
                try? dst.close()
            }
            try Result { () throws(SystemError) in try ShareRecordStore.copy(from: src.fileDescriptor, to: dst.fileDescriptor, size: size) }.get()
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/" + name)))
        }
        // A file that grew after its size was checked is cut at that size (the share-size limit holds).
        XCTAssertEqual(try copy(262_145, to: "a"), Array(bytes.prefix(262_145)))
        XCTAssertEqual(try copy(300_000, to: "b"), bytes)
        // One that shrank fails the copy.
        XCTAssertThrowsError(try copy(300_001, to: "c"))
    }

    func testCompletingThousandsKeepsTheOrderAndReplaysIt() throws {
        let s = try open()
        for n in 0..<5000 { try add(s, n) }
        try s.commitTurn()
        // Complete all but every 100th, in a scattered order, over several commits.
        var kept: [String] = []
        for n in stride(from: 4999, through: 0, by: -1) {
            if n % 100 == 0 { kept.insert("sh-\(n)", at: 0) } else { XCTAssertTrue(try s.complete("sh-\(n)")) }
            if n % 700 == 0 { try s.commitTurn() }
        }
        try s.commitTurn()
        XCTAssertFalse(try s.complete("sh-1"), "already completed")
        XCTAssertEqual(s.all.map(\.id), kept)
        XCTAssertEqual(s.count, 50)
        let reopened = try open()
        XCTAssertEqual(reopened.all.map(\.id), kept)
        XCTAssertEqual(reopened.share("sh-300")?.items.first?["url"]?.stringValue, "https://example.com/300")
        XCTAssertNil(reopened.share("sh-301"))
    }

    func testRolledBackCompletionsComeBackInTheirPlaceAfterManyOthers() throws {
        let s = try open()
        for n in 0..<3000 { try add(s, n) }
        try s.commitTurn()
        for n in 0..<1000 where n != 10 && n != 20 { XCTAssertTrue(try s.complete("sh-\(n)")) }
        try s.commitTurn()
        // A turn completes shares at the front, the middle and the end, then so many more that the
        // removed ids are compacted away mid-turn; its commit fails (rolled back): all come back.
        for n in [10, 1500, 2999] { XCTAssertTrue(try s.complete("sh-\(n)")) }
        for n in 1000..<2400 where n != 1500 { XCTAssertTrue(try s.complete("sh-\(n)")) }
        XCTAssertEqual(s.count, 2002 - 1402)
        s.rollback()
        let expected = ([10, 20] + Array(1000..<3000)).map { "sh-\($0)" }
        XCTAssertEqual(s.all.map(\.id), expected)
        try s.commitTurn()
        XCTAssertEqual(try open().all.map(\.id), expected)
    }

    /// Thousands of completions in one turn (a JSON-RPC batch) scan the order a few times, not once
    /// per completion: the ids a rollback could restore do not count towards compacting it again.
    func testCompletionsOfOneTurnCompactTheOrderAFewTimesOnly() throws {
        let s = try open()
        for n in 0..<6000 { try add(s, n) }
        try s.commitTurn()
        for n in 0..<2000 { XCTAssertTrue(try s.complete("sh-\(n)")) }
        try s.commitTurn()
        let before = s.orderScans
        for n in 2000..<5900 { XCTAssertTrue(try s.complete("sh-\(n)")) }
        XCTAssertLessThanOrEqual(s.orderScans - before, 3)
        try s.commitTurn()
        for n in 5900..<5990 { XCTAssertTrue(try s.complete("sh-\(n)")) }
        try s.commitTurn()
        XCTAssertEqual(s.all.map(\.id), (5990..<6000).map { "sh-\($0)" })
        XCTAssertLessThan(s.order.count, 2048 + 10)
        XCTAssertEqual(try open().all.map(\.id), (5990..<6000).map { "sh-\($0)" })
    }

    func testRetractedAndRolledBackAddsLeaveNoTrace() throws {
        let s = try open()
        for n in 0..<3 { try add(s, n) }
        try s.commitTurn()
        let last = try add(s, 3)
        XCTAssertTrue(s.retract(last))
        try add(s, 4)
        try add(s, 5)
        s.rollback()
        XCTAssertEqual(s.all.map(\.id), ["sh-0", "sh-1", "sh-2"])
        try add(s, 6)
        try s.commitTurn()
        XCTAssertEqual(try open().all.map(\.id), ["sh-0", "sh-1", "sh-2", "sh-6"])
    }

    /// A journal naming an id again after its completion (ids are random, so only a hand-edited or
    /// foreign journal does) replays to one share.
    func testAnIDStoredAgainAfterItsCompletionReplaysOnce() throws {
        do {
            let s = try open()
            try add(s, 0, id: "sh-x")
            try s.commitTurn()
            XCTAssertTrue(try s.complete("sh-x"))
            try s.commitTurn()
            try add(s, 1, id: "sh-x")
            try add(s, 2, id: "sh-y")
            try s.commitTurn()
        }
        XCTAssertEqual(try open().all.map(\.id), ["sh-x", "sh-y"])
        XCTAssertEqual(try open().share("sh-x")?.items.first?["url"]?.stringValue, "https://example.com/1")
    }

    /// Records written by hand: two copies of a share with different contents (the newest counts),
    /// and a copy claiming a place after everything (it stays where it lies): what replay makes of
    /// them is what the store keeps, and a share added then comes last, also after reopening.
    func testForeignCopiesReplayToTheNewestContentsAndTheirOwnPlace() throws {
        func record(_ id: String, _ url: String, n: Int? = nil) -> [UInt8] {
            var o: JSONObject = [
                "id": .string(id), "extension": "com.example.app.share", "app": "com.example.app",
                "group": "group.com.example", "created": "2026-12-01T12:00:00.000Z", "items": [["url": .string(url)]],
            ]
            if let n { o["n"] = .number(String(n)) }
            var out: [UInt8] = []
            JSONValue.object(o).write(to: &out)
            return out
        }
        do {
            let j = try Journal(directory: dir, name: "shares")
            _ = try j.replay { _ in }
            for (type, bytes) in [
                (UInt8(1), record("sh-a", "https://example.com/old")), (3, record("sh-x", "https://example.com/x", n: 1 << 60)),
                (1, record("sh-y", "https://example.com/y")), (3, record("sh-a", "https://example.com/new", n: 0)),
            ] {
                try j.append(type: type) { $0.append(contentsOf: bytes) }
            }
            try j.commit()
        }
        let s = try open()
        XCTAssertEqual(s.all.map(\.id), ["sh-a", "sh-x", "sh-y"])
        XCTAssertEqual(s.share("sh-a")?.items.first?["url"]?.stringValue, "https://example.com/new")
        try add(s, 9, id: "sh-z")
        try s.commitTurn()
        XCTAssertEqual(s.all.map(\.id), ["sh-a", "sh-x", "sh-y", "sh-z"])
        let reopened = try open()
        XCTAssertEqual(reopened.all.map(\.id), ["sh-a", "sh-x", "sh-y", "sh-z"])
        XCTAssertEqual(reopened.share("sh-a")?.items.first?["url"]?.stringValue, "https://example.com/new")
    }

    func testSealedSegmentsGoOnceTheirSharesAreCompleted() throws {
        let s = try open(segmentLimit: 4096)
        for n in 0..<200 {
            try add(s, n)
            try s.commitTurn()
        }
        let before = segmentFiles().count
        XCTAssertGreaterThan(before, 5)
        for n in 0..<190 { XCTAssertTrue(try s.complete("sh-\(n)")) }
        try s.commitTurn()
        // Only the segments holding the ten pending shares (and the active one) are left.
        XCTAssertLessThanOrEqual(segmentFiles().count, 3, "\(segmentFiles())")
        XCTAssertEqual(s.journalSegments.count, segmentFiles().count)
        let reopened = try open(segmentLimit: 4096)
        XCTAssertEqual(reopened.all.map(\.id), (190..<200).map { "sh-\($0)" })
        XCTAssertEqual(reopened.recovery.quarantined, 0)
    }

    func testAFewPendingSharesOfAnOldSegmentAreCarriedForwardInOrder() throws {
        try carryForward(chunk: 4096)
    }

    /// More pending shares than one quiet commit copies: the old segment goes after a few.
    func testAnOldSegmentsPendingSharesAreCarriedInChunks() throws {
        try carryForward(chunk: 1)
    }

    func carryForward(chunk: Int) throws {
        let s = try open(segmentLimit: 4096)
        s.carryChunk = chunk
        // Arrival order counts, not the clock (which may step back): the oldest two claim a later time.
        try add(s, 0, id: "sh-old-a", created: "2026-12-31T00:00:00.000Z")
        try add(s, 1, id: "sh-old-b", created: "2026-12-01T12:00:00.000Z+000020")
        try s.commitTurn()
        // Pending shares fill the first segment (so it is not mostly dead when it is sealed)...
        var fillers: [String] = []
        var n = 2
        while s.journalSegments.count < 2 {
            fillers.append(try add(s, n))
            try s.commitTurn()
            n += 1
        }
        // ... a younger share lands in the second, then the fillers are completed: the first
        // segment's two pending shares are copied after the younger one, and still come first.
        try add(s, 100, id: "sh-mid")
        try s.commitTurn()
        for id in fillers { XCTAssertTrue(try s.complete(id)) }
        try s.commitTurn()
        try add(s, 300, id: "sh-new")
        for _ in 0..<3 { try s.commitTurn() }
        let numbers = s.journalSegments
        XCTAssertFalse(numbers.contains(1), "\(numbers)")
        XCTAssertLessThanOrEqual(numbers.count, 2, "\(numbers)")
        let expected = ["sh-old-a", "sh-old-b", "sh-mid", "sh-new"]
        XCTAssertEqual(s.all.map(\.id), expected)
        let reopened = try open(segmentLimit: 4096)
        XCTAssertEqual(reopened.all.map(\.id), expected)
        XCTAssertEqual(reopened.share("sh-old-b")?.items.first?["url"]?.stringValue, "https://example.com/1")
        // Completing a carried share works and lasts.
        XCTAssertTrue(try reopened.complete("sh-old-a"))
        try reopened.commitTurn()
        XCTAssertEqual(try open(segmentLimit: 4096).all.map(\.id), Array(expected.dropFirst()))
    }

    /// An app's old backlog does not keep later segments on disk: with many shares pending for
    /// long and many more sent and completed since, the journal stays a few segments long.
    func testALongPendingBacklogDoesNotKeepDeadSegments() throws {
        let s = try open(segmentLimit: 8192)
        s.carryChunk = 16
        for n in 0..<100 { try add(s, n, id: "sh-old-\(n)") }
        try s.commitTurn()
        for n in 100..<1100 {
            try add(s, n)
            try s.commitTurn()
            XCTAssertTrue(try s.complete("sh-\(n)"))
            try s.commitTurn()
        }
        XCTAssertLessThanOrEqual(s.journalSegments.count, 8, "\(s.journalSegments)")
        XCTAssertEqual(try open(segmentLimit: 8192).all.map(\.id), (0..<100).map { "sh-old-\($0)" })
    }

    func testACrashBetweenTheCopiesAndTheOldSegmentsDeletionLeavesNoDuplicate() throws {
        let s = try open(segmentLimit: 4096)
        try add(s, 0, id: "sh-old")
        try s.commitTurn()
        let first = dir + "/" + segmentFiles()[0]
        // Right before compaction deletes the first segment (its pending share copied forward), a
        // copy of it is kept: put back afterwards, it is what a crash before the unlink leaves.
        var sealed: Data? = nil
        var pendingAtTheCrash: [String] = []
        s.willDeleteSegments = { last in
            guard sealed == nil, last >= 1 else { return }
            sealed = FileManager.default.contents(atPath: first)
            pendingAtTheCrash = s.all.map(\.id)
        }
        for n in 1..<300 where sealed == nil {
            try add(s, n)
            try s.commitTurn()
            if sealed != nil { break }
            XCTAssertTrue(try s.complete("sh-\(n)"))
            try s.commitTurn()
        }
        let data = try XCTUnwrap(sealed, "the first segment was never compacted away")
        XCTAssertFalse(FileManager.default.fileExists(atPath: first))
        // (this store, "crashed", is not used again)
        XCTAssertTrue(FileManager.default.createFile(atPath: first, contents: data, attributes: [.posixPermissions: 0o600]))
        let reopened = try open(segmentLimit: 4096)
        XCTAssertEqual(pendingAtTheCrash.first, "sh-old")
        XCTAssertEqual(reopened.all.map(\.id), pendingAtTheCrash)
        XCTAssertEqual(reopened.count, pendingAtTheCrash.count)
        XCTAssertEqual(reopened.recovery.quarantined, 0)
        // The old segment holds nothing pending now (the share lives in its copy): the next quiet
        // commit deletes it, and the share stays.
        try add(reopened, 400, id: "sh-new")
        try reopened.commitTurn()
        XCTAssertFalse(FileManager.default.fileExists(atPath: first))
        XCTAssertEqual(try open(segmentLimit: 4096).all.map(\.id), pendingAtTheCrash + ["sh-new"])
    }
}
