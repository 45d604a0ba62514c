// Single failed file-system calls the journals must survive without bringing back what the broker
// answered as gone, or keeping what it answered as not stored (a systematic fault-injection
// audit failed each call in turn; these are its findings, each reproduced through the store's
// fault seam):
// - a dead segment whose unlink fails stays, and so does every later one (they may hold the acks
//   of its events): replay never finds its events without their acks;
// - a new segment whose first record (the event sequence mark) cannot be committed is not
//   started: the previous one stays active, so ids are never reused once older segments go;
// - a failed commit's records that cannot be cut off the segment are zeroed instead, and when
//   neither works nothing more is written until they are off;
// - a new segment's name, or a share's files' names, whose directory fsync fails are not
//   acknowledged.

import Foundation
import ShareProtocol
@testable import ShareStore
import XCTest

/// Fails chosen fault points a given number of times (then lets them through).
final class CountedFaults: @unchecked Sendable {
    private let lock = NSLock()
    private var left: [JournalFaultPoint: Int] = [:]
    private var errnos: [JournalFaultPoint: Int32] = [:]

    /// The next `times` calls at `point` fail with `code`.
    func fail(_ point: JournalFaultPoint, times: Int = 1, _ code: Int32 = EIO) {
        lock.lock()
        defer { lock.unlock() }
        left[point] = times
        errnos[point] = code
    }

    /// Failures still to come at `point`.
    func remaining(_ point: JournalFaultPoint) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return left[point] ?? 0
    }

    var injector: @Sendable (JournalFaultPoint) -> Int32? {
        { [self] p in
            lock.lock()
            defer { lock.unlock() }
            guard let n = left[p], n > 0 else { return nil }
            left[p] = n - 1
            return errnos[p]
        }
    }
}

final class JournalFaultTests: XCTestCase {
    var dir: String = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "sbfault-\(UUID().uuidString.prefix(8))"
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func segmentFiles(_ prefix: String = "events-") -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasPrefix(prefix) && $0.hasSuffix(".log") }.sorted()
    }

    /// Events of com.a in the first segment, acked once later segments exist (the acks are in
    /// one of those); the first segment's unlink fails once. The later segments must not go
    /// before it: else replay finds com.a's events without their acks.
    func testADeadSegmentWhoseUnlinkFailsKeepsTheLaterOnesAndGoesAtTheNextTry() throws {
        let faults = CountedFaults()
        var acked: [String] = []
        do {
            let s = try EventStore(directory: dir, segmentLimit: 4096)
            s.carryChunk = 0  // (no copies: the first segment goes by deletion alone)
            s.journal.faultInjector = faults.injector
            for _ in 0..<5 { acked.append(try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "a://x"]).id) }
            try s.commit()
            func traffic(_ n: Int) throws {
                for _ in 0..<n {
                    let id = try s.enqueue(app: "com.b", fields: ["kind": "openURL", "url": "https://example.com/b/long/path"]).id
                    _ = try s.ack(app: "com.b", ids: [id])
                    try s.commit()
                }
            }
            while s.journal.segments.count < 2 { try traffic(1) }
            faults.fail(.unlinkSegment)  // (the first segment's, once it is dead)
            XCTAssertEqual(try s.ack(app: "com.a", ids: acked), acked)  // (in segment 2)
            try s.commit()
            XCTAssertEqual(faults.remaining(.unlinkSegment), 0, "the first segment's deletion was tried and failed")
            XCTAssertEqual(s.journal.segments.first, 1, "the segment whose unlink failed is still the journal's")
            XCTAssertTrue(segmentFiles().contains("events-000001.log"))
            // Traffic rolls past the segment holding the acks; everything dead goes, oldest first.
            while s.journal.segments.first ?? 0 <= 2 { try traffic(1) }
            XCTAssertFalse(segmentFiles().contains("events-000001.log"), "deleted at a later try: \(segmentFiles())")
        }
        let reopened = try EventStore(directory: dir, segmentLimit: 4096)
        XCTAssertEqual(reopened.pending(for: "com.a").map(\.id), [], "acked events came back")
        XCTAssertEqual(reopened.pendingCount, 0)
    }

    /// The same for a group's shares: a completed share never comes back.
    func testADeadShareSegmentWhoseUnlinkFailsKeepsTheLaterOnes() throws {
        let faults = CountedFaults()
        func open() throws -> ShareRecordStore { try ShareRecordStore(group: "group.x", directory: dir, segmentLimit: 4096, turn: nil) }
        func add(_ s: ShareRecordStore, _ id: String) throws {
            _ = try s.add(
                id: id, extensionID: "com.example.app.share", app: "com.example.app", created: "2026-12-02T12:00:00.000Z",
                items: [["url": .string("https://example.com/\(id)/long/enough"), "type": "public.url"]], files: [])
        }
        do {
            let s = try open()
            s.carryChunk = 0
            s.faultInjector = faults.injector
            let first = (0..<3).map { "sh-first-\($0)" }
            for id in first { try add(s, id) }
            try s.commitTurn()
            var n = 0
            func traffic() throws {
                n += 1
                try add(s, "sh-\(n)")
                XCTAssertTrue(try s.complete("sh-\(n)"))
                try s.commitTurn()
            }
            while s.journalSegments.count < 2 { try traffic() }
            faults.fail(.unlinkSegment)
            for id in first { XCTAssertTrue(try s.complete(id)) }
            try s.commitTurn()
            XCTAssertEqual(faults.remaining(.unlinkSegment), 0, "the first segment's deletion was tried and failed")
            XCTAssertEqual(s.journalSegments.first, 1)
            while (s.journalSegments.first ?? 0) <= 2 { try traffic() }
        }
        XCTAssertEqual(try open().all.map(\.id), [], "completed shares came back")
    }

    /// The first commit of a new segment (its sequence mark) fails: the roll is undone, the
    /// events go on in the previous segment, and the roll succeeds later with its mark. After all
    /// is acked and the old segments are gone, ids still continue after the highest ever used.
    func testASequenceMarkThatCannotBeCommittedLeavesThePreviousSegmentActive() throws {
        let faults = CountedFaults()
        var issued: [String] = []
        var highest: UInt64 = 0
        do {
            let s = try EventStore(directory: dir, segmentLimit: 4096)
            s.carryChunk = 0
            s.journal.faultInjector = faults.injector
            let mark = s.journal.onNewSegment
            var rolls = 0
            s.journal.onNewSegment = { j throws(StoreError) in
                try mark?(j)
                rolls += 1
                if rolls == 1 { faults.fail(.sync) }  // (the mark's own commit)
            }
            while rolls == 0 {
                issued.append(try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "a://long/enough/to/fill"]).id)
                try s.commit()
            }
            XCTAssertEqual(s.journal.segments, [1], "the roll was undone")
            XCTAssertEqual(segmentFiles(), ["events-000001.log"], "and its file removed")
            // Everything is acked; the roll is tried again (and now works) at the next commits.
            XCTAssertEqual(try s.ack(app: "com.a", ids: issued).count, issued.count)
            try s.commit()
            for _ in 0..<400 where s.journal.segments.first == 1 {
                let id = try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "a://long/enough/to/fill"]).id
                issued.append(id)
                _ = try s.ack(app: "com.a", ids: [id])
                try s.commit()
            }
            XCTAssertNotEqual(s.journal.segments.first, 1, "the first segment went")
            highest = s.nextSequence - 1
        }
        let reopened = try EventStore(directory: dir, segmentLimit: 4096)
        XCTAssertEqual(reopened.nextSequence, highest + 1, "ids continue after the highest ever used")
        let next = try reopened.enqueue(app: "com.a", fields: ["kind": "openURL"]).id
        XCTAssertFalse(issued.contains(next), "\(next) was issued before")
    }

    /// A new segment whose name cannot be made durable (directory fsync) is not started either.
    func testANewSegmentWhoseDirectoryEntryCannotBeSyncedIsNotStarted() throws {
        let faults = CountedFaults()
        let j = try Journal(directory: dir, name: "t")
        _ = try j.replay { _ in }
        j.faultInjector = faults.injector
        try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 1, count: 100)) }
        try j.commit()
        faults.fail(.segmentDirectorySync)
        XCTAssertThrowsError(try j.roll())
        XCTAssertEqual(j.segments, [1])
        XCTAssertEqual(segmentFiles("t-"), ["t-000001.log"])
        try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 2, count: 100)) }
        try j.commit()
        try j.roll()
        XCTAssertEqual(j.segments, [1, 2])
    }

    /// A share's files whose directory entries cannot be made durable (the fsync of the share's
    /// directory while they are written, or of `files/` at the commit) are not acknowledged:
    /// nothing of the share is left, and it is not there after a reopen.
    func testAShareWhoseFilesDirectoryCannotBeSyncedIsNotStored() throws {
        let faults = CountedFaults()
        func open() throws -> ShareRecordStore { try ShareRecordStore(group: "group.x", directory: dir, segmentLimit: 4096, turn: nil) }
        func add(_ s: ShareRecordStore, _ id: String) throws {
            _ = try s.add(
                id: id, extensionID: "com.example.app.share", app: "com.example.app", created: "2026-12-02T12:00:00.000Z",
                items: [["path": .string("f.pdf"), "type": "com.adobe.pdf"]],
                files: [ShareFile(name: "f.pdf", source: .bytes(Array("%PDF-1.4".utf8)))])
        }
        func filesDirectories() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: dir + "/files")) ?? [] }
        do {
            let s = try open()
            s.faultInjector = faults.injector
            // 1. The share's own directory, as its files are written.
            faults.fail(.directorySync)
            XCTAssertThrowsError(try add(s, "sh-1"))
            XCTAssertEqual(s.count, 0)
            XCTAssertEqual(filesDirectories(), [], "nothing of it is left")
            // 2. files/, at the commit that would acknowledge it.
            try add(s, "sh-2")
            faults.fail(.directorySync)
            XCTAssertThrowsError(try s.commitTurn())
            XCTAssertEqual(s.count, 0, "rolled back")
            XCTAssertEqual(filesDirectories(), [], "its files are gone with it")
            // No fault: stored.
            try add(s, "sh-3")
            try s.commitTurn()
        }
        XCTAssertEqual(try open().all.map(\.id), ["sh-3"])
    }

    func records(_ name: String = "t") throws -> [UInt8] {
        let j = try Journal(directory: dir, name: name)
        var firstBytes: [UInt8] = []
        let report = try j.replay { r in firstBytes.append(r.payload.first ?? 0) }
        XCTAssertEqual(report.quarantined, 0)
        return firstBytes
    }

    /// A commit fails and cutting its records off fails too: they are zeroed instead, so replay
    /// does not find a record the store answered as not stored.
    func testAFailedCommitWhoseCutFailsIsZeroedInstead() throws {
        let faults = CountedFaults()
        do {
            let j = try Journal(directory: dir, name: "t")
            _ = try j.replay { _ in }
            j.faultInjector = faults.injector
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 1, count: 100)) }
            try j.commit()
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 2, count: 100)) }
            faults.fail(.sync)  // (the record may be on disk all the same)
            faults.fail(.cutBack)
            XCTAssertThrowsError(try j.commit())
            XCTAssertNil(j.owedCutBack)
        }
        XCTAssertEqual(try records(), [1], "the refused record is not replayed")
    }

    /// A batch whose write put nothing in the file owes no cut, even when the cut fails: the
    /// journal goes on (and its requests were truly not stored).
    func testABatchThatWroteNothingOwesNoCut() throws {
        let faults = CountedFaults()
        do {
            let j = try Journal(directory: dir, name: "t")
            _ = try j.replay { _ in }
            j.faultInjector = faults.injector
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 1, count: 100)) }
            try j.commit()
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 2, count: 100)) }
            faults.fail(.write)
            faults.fail(.cutBack)
            faults.fail(.cutBackZeros)
            XCTAssertThrowsError(try j.commit())
            XCTAssertFalse(j.hasOwedCutBack)
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 3, count: 100)) }
            try j.commit()
        }
        XCTAssertEqual(try records(), [1, 3])
    }

    /// Neither the cut nor the zeros work: nothing more is written until they do; then the next
    /// records take the refused one's place.
    func testRecordsThatCannotBeTakenOffBlockFurtherCommitsUntilTheyAre() throws {
        let faults = CountedFaults()
        do {
            let j = try Journal(directory: dir, name: "t")
            _ = try j.replay { _ in }
            j.faultInjector = faults.injector
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 1, count: 100)) }
            try j.commit()
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 2, count: 100)) }
            faults.fail(.sync)
            faults.fail(.cutBack, times: 2)
            faults.fail(.cutBackZeros, times: 2)
            XCTAssertThrowsError(try j.commit())
            XCTAssertNotNil(j.owedCutBack)
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 3, count: 100)) }
            XCTAssertThrowsError(try j.commit()) { e in
                XCTAssertTrue("\(e)".contains("could not be taken off"), "\(e)")
            }
            // The faults are over: the next commit first takes the refused records off.
            try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 4, count: 100)) }
            try j.commit()
            XCTAssertNil(j.owedCutBack)
        }
        XCTAssertEqual(try records(), [1, 4])
    }
}

/// A share's files that cannot be removed when it is completed (or refused) are removed at a
/// later commit of the group, not left until the next start.
final class LeftoverShareFilesTests: XCTestCase {
    var dir: String = ""
    override func setUp() { dir = NSTemporaryDirectory() + "sbleft-\(UUID().uuidString.prefix(8))" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func addPDF(_ s: ShareRecordStore, _ id: String) throws {
        _ = try s.add(
            id: id, extensionID: "com.example.app.share", app: "com.example.app", created: "2026-12-02T12:00:00.000Z",
            items: [["file": "f.pdf", "type": "com.adobe.pdf"]],
            files: [ShareFile(name: "f.pdf", source: .bytes(Array("%PDF-1.4".utf8)))])
    }

    func testFilesThatCannotBeRemovedAtCompletionGoAtTheNextCommit() throws {
        let s = try ShareRecordStore(group: "group.com.example", directory: dir, segmentLimit: nil, turn: nil)
        try addPDF(s, "sh-a")
        try s.commitTurn()
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/files/sh-a/f.pdf"))
        let faults = CountedFaults()
        faults.fail(.removeFiles, times: 1, EIO)
        s.faultInjector = faults.injector
        XCTAssertTrue(try s.complete("sh-a"))
        try s.commitTurn()
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/files/sh-a"), "the injected failure kept them")
        XCTAssertEqual(s.leftoverFiles, [dir + "/files/sh-a"])
        // The group's next commit (any: a new share) removes them.
        try addPDF(s, "sh-b")
        try s.commitTurn()
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/files/sh-a"))
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/files/sh-b/f.pdf"), "not the new share's")
        XCTAssertEqual(s.leftoverFiles, [])
    }
}
