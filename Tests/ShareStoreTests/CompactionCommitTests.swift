// Compaction's copies (the live records of the oldest sealed segment, carried forward) are not
// written by the commit that found them due: they are appended as pending records and go to disk
// with the next commit, like any other (the broker runs that on its sync worker, off the loop).
// Until then the old segment stays; a commit of them that fails loses nothing; an ack or a
// completion of a carried record that comes between the copies and a later failed commit puts the
// record back in the segment that now holds it, so that segment is never deleted under it.

import Foundation
import ShareProtocol
@testable import ShareStore
import XCTest

final class CompactionCommitTests: XCTestCase {
    var dir: String = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "sbcarry-\(UUID().uuidString.prefix(8))"
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func segmentFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".log") }.sorted()
    }

    // MARK: Event queues

    /// Five events of `com.stuck` in the first segment, then traffic of `com.b` (each event acked)
    /// until a commit finds the first segment mostly dead: returns with the copies pending.
    func eventsWithCopiesPending(
        _ s: EventStore, turn: TurnLog? = nil, expectingCopiesOf carried: Int = 5, file: StaticString = #filePath, line: UInt = #line
    ) throws -> [String] {
        func commit() throws {
            _ = turn?.takeDirty()  // (committed by hand: what the turn holds afterwards is new)
            try s.commit()
        }
        var stuck: [String] = []
        for _ in 0..<5 { stuck.append(try s.enqueue(app: "com.stuck", fields: ["kind": "openURL", "url": "s://x"]).id) }
        try commit()
        for _ in 0..<400 where s.carryPending == nil {
            let id = try s.enqueue(app: "com.b", fields: ["kind": "openURL", "url": "https://example.com/b/long/path"]).id
            _ = try s.ack(app: "com.b", ids: [id])
            try commit()
        }
        let copies = try XCTUnwrap(s.carryPending, "compaction never became due", file: file, line: line)
        XCTAssertEqual(copies.from, 1, file: file, line: line)
        XCTAssertEqual(copies.items.map(\.id), Array(stuck.prefix(carried)), file: file, line: line)
        return stuck
    }

    func testEventCopiesWaitForTheNextCommitAndOnlyThenDoesTheOldSegmentGo() throws {
        let turn = TurnLog()
        let s = try EventStore(directory: dir, segmentLimit: 4096, turn: turn)
        let stuck = try eventsWithCopiesPending(s, turn: turn)
        let before = s.pendingCount
        // The commit that found them due wrote nothing of them: they wait, marked as upkeep.
        XCTAssertTrue(s.hasPending)
        XCTAssertTrue(s.pendingIncludesUpkeep)
        XCTAssertTrue(turn.hasDirty, "the store told the turn it has a commit to make")
        XCTAssertTrue(turn.hasUpkeep)
        XCTAssertTrue(segmentFiles().contains("events-000001.log"), "the old segment stays until the copies are durable")
        XCTAssertEqual(s.pending(for: "com.stuck").first?.segment, 1)
        // A request's change joins them: the commit still carries the upkeep.
        let extra = try s.enqueue(app: "com.c", fields: ["kind": "openURL"]).id
        XCTAssertTrue(turn.hasUpkeep)
        _ = turn.takeDirty()
        try s.commit()
        XCTAssertNil(s.carryPending)
        XCTAssertFalse(segmentFiles().contains("events-000001.log"), "\(segmentFiles())")
        let moved = try XCTUnwrap(s.pending(for: "com.stuck").first?.segment)
        XCTAssertGreaterThan(moved, 1)
        let inMoved = s.appsWithPending.flatMap { s.pending(for: $0) }.filter { $0.segment == moved }.count
        XCTAssertEqual(s.ledger.live[moved], inMoved, "the ledger counts what the queues hold")
        let reopened = try EventStore(directory: dir, segmentLimit: 4096)
        XCTAssertEqual(reopened.pending(for: "com.stuck").map(\.id), stuck)
        XCTAssertEqual(reopened.pending(for: "com.c").map(\.id), [extra])
        XCTAssertEqual(reopened.pendingCount, before + 1)
    }

    func testAFailedCommitOfTheEventCopiesLosesNothingAndCompactionIsTriedAgain() throws {
        final class Faults: @unchecked Sendable {
            let lock = NSLock()
            var failSync = false
            var injector: @Sendable (JournalFaultPoint) -> Int32? {
                { [self] p in
                    lock.lock()
                    defer { lock.unlock() }
                    return p == .sync && failSync ? EIO : nil
                }
            }
        }
        let faults = Faults()
        let s = try EventStore(directory: dir, segmentLimit: 4096)
        s.journal.faultInjector = faults.injector
        let stuck = try eventsWithCopiesPending(s)
        faults.lock.lock()
        faults.failSync = true
        faults.lock.unlock()
        XCTAssertThrowsError(try s.commit())
        faults.lock.lock()
        faults.failSync = false
        faults.lock.unlock()
        XCTAssertNil(s.carryPending)
        XCTAssertFalse(s.hasPending)
        XCTAssertEqual(s.pending(for: "com.stuck").map(\.id), stuck)
        XCTAssertEqual(s.pending(for: "com.stuck").map(\.segment), [1, 1, 1, 1, 1], "still in the old segment")
        XCTAssertEqual(s.ledger.live[1], 5)
        XCTAssertTrue(segmentFiles().contains("events-000001.log"))
        // The next quiet commit makes the copies again, and the one after writes them.
        let id = try s.enqueue(app: "com.b", fields: ["kind": "openURL"]).id
        _ = try s.ack(app: "com.b", ids: [id])
        try s.commit()
        XCTAssertNotNil(s.carryPending)
        try s.commit()
        XCTAssertFalse(segmentFiles().contains("events-000001.log"), "\(segmentFiles())")
        XCTAssertEqual(try EventStore(directory: dir, segmentLimit: 4096).pending(for: "com.stuck").map(\.id), stuck)
    }

    func testAnAckInTheCopiesOwnCommitIsCountedOnce() throws {
        let s = try EventStore(directory: dir, segmentLimit: 4096)
        let stuck = try eventsWithCopiesPending(s)
        XCTAssertEqual(try s.ack(app: "com.stuck", ids: [stuck[0], stuck[3]]), [stuck[0], stuck[3]])
        try s.commit()
        XCTAssertFalse(segmentFiles().contains("events-000001.log"))
        let segment = try XCTUnwrap(s.pending(for: "com.stuck").first?.segment)
        XCTAssertEqual(s.ledger.live[segment], 3, "the three carried events still pending, not the acked ones")
        XCTAssertEqual(
            try EventStore(directory: dir, segmentLimit: 4096).pending(for: "com.stuck").map(\.id), [stuck[1], stuck[2], stuck[4]])
    }

    /// The pipelined commit: the copies are in flight while an ack of a carried event waits for the
    /// next commit; the copies land, then the ack's commit fails. The event is back, in the segment
    /// of its copy (its old one is gone), and counted there: once the other events are acked and
    /// that segment is sealed and mostly dead, the event is carried forward again, not deleted
    /// with it.
    func testAnAckOfACarriedEventThatFailsAfterTheCopiesLandPutsItBackInItsNewSegment() throws {
        let s = try EventStore(directory: dir, segmentLimit: 4096)
        let stuck = try eventsWithCopiesPending(s)
        let home = try XCTUnwrap(s.carryPending?.to)
        let copies = try s.beginCommit()
        XCTAssertEqual(try s.ack(app: "com.stuck", ids: [stuck[0]]), [stuck[0]])
        let copiesError = copies.flatMap { SyncWorker.run([$0])[0] }
        XCTAssertNil(copiesError)
        s.finishCommit(copies, error: copiesError)
        XCTAssertTrue(segmentFiles().contains("events-000001.log"), "kept until the ack is durable")
        let ackCommit = try s.beginCommit()
        s.finishCommit(ackCommit, error: StoreError("injected: the ack's commit failed"))
        let back = try XCTUnwrap(s.pending(for: "com.stuck").first)
        XCTAssertEqual(back.id, stuck[0], "the failed ack put the event back")
        XCTAssertEqual(back.segment, home, "in the segment of its copy")
        XCTAssertEqual(
            s.ledger.live[back.segment], s.appsWithPending.flatMap { s.pending(for: $0) }.filter { $0.segment == back.segment }.count)
        // The others are acked; traffic seals that segment and leaves it mostly dead.
        _ = try s.ack(app: "com.stuck", ids: Array(stuck.dropFirst()))
        try s.commit()
        for _ in 0..<400 where segmentFiles().contains(String(format: "events-%06d.log", home)) {
            let id = try s.enqueue(app: "com.b", fields: ["kind": "openURL", "url": "https://example.com/b/long/path"]).id
            try s.commit()
            _ = try s.ack(app: "com.b", ids: [id])
            try s.commit()
        }
        XCTAssertFalse(segmentFiles().contains(String(format: "events-%06d.log", home)), "compaction went on: \(segmentFiles())")
        XCTAssertEqual(s.pending(for: "com.stuck").map(\.id), [stuck[0]])
        let reopened = try EventStore(directory: dir, segmentLimit: 4096)
        XCTAssertEqual(reopened.pending(for: "com.stuck").map(\.id), [stuck[0]], "its only copy was carried, not deleted")
    }

    // MARK: Group shares

    func add(_ s: ShareRecordStore, _ id: String) throws {
        _ = try s.add(
            id: id, extensionID: "com.example.app.share", app: "com.example.app", created: "2026-12-02T12:00:00.000Z",
            items: [["url": .string("https://example.com/\(id)"), "type": "public.url"]], files: [])
    }

    func openShares() throws -> ShareRecordStore {
        try ShareRecordStore(group: "group.com.example", directory: dir, segmentLimit: 4096, turn: nil)
    }

    func testAShareCompletionThatFailsAfterTheCopiesLandPutsItBackInItsNewSegment() throws {
        let s = try openShares()
        let old = (0..<4).map { "sh-old-\($0)" }
        for id in old { try add(s, id) }
        try s.commitTurn()
        for n in 0..<400 where s.carryPending == nil {
            try add(s, "sh-\(n)")
            XCTAssertTrue(try s.complete("sh-\(n)"))
            try s.commitTurn()
        }
        let pending = try XCTUnwrap(s.carryPending, "compaction never became due")
        XCTAssertEqual(pending.items.map(\.id), old)
        let home = pending.to
        XCTAssertTrue(s.pendingIncludesUpkeep)
        XCTAssertTrue(segmentFiles().contains("shares-000001.log"), "\(segmentFiles())")
        let copies = try s.beginCommit()
        XCTAssertTrue(try s.complete(old[0]))
        XCTAssertFalse(s.pendingIncludesUpkeep, "(the copies are in flight)")
        s.finishCommit(copies, error: copies.flatMap { SyncWorker.run([$0])[0] })
        XCTAssertTrue(segmentFiles().contains("shares-000001.log"), "kept until the completion is durable: \(segmentFiles())")
        let failed = try s.beginCommit()
        s.finishCommit(failed, error: StoreError("injected: the completion's commit failed"))
        XCTAssertEqual(s.all.map(\.id), old, "the failed completion put the share back")
        XCTAssertEqual(s.shares[old[0]]?.segment, home, "in the segment of its copy")
        XCTAssertEqual(s.ledger.live[home], s.all.filter { $0.segment == home }.count)
        for id in old.dropFirst() { XCTAssertTrue(try s.complete(id)) }
        try s.commitTurn()
        for n in 400..<800 where s.journalSegments.contains(home) {
            try add(s, "sh-\(n)")
            try s.commitTurn()
            XCTAssertTrue(try s.complete("sh-\(n)"))
            try s.commitTurn()
        }
        XCTAssertFalse(s.journalSegments.contains(home), "compaction went on: \(s.journalSegments)")
        XCTAssertEqual(try openShares().all.map(\.id), [old[0]], "its only copy was carried, not deleted")
    }

    // MARK: A chunk smaller than the old segment's live records (a review's reproductions)

    /// Copies of two of five old events are in flight when the other three are acked (not yet
    /// durable): the old segment must stay until those acks are on disk. Crash then: all five
    /// are there. The acks' commit fails instead: all five are served, and survive a restart.
    func testTheOldSegmentStaysUntilTheAcksOfItsEventsNotCarriedAreDurable() throws {
        func copiesOfTwoInFlight(_ s: EventStore) throws -> (stuck: [String], copies: SyncJob?) {
            s.carryChunk = 2
            let stuck = try eventsWithCopiesPending(s, expectingCopiesOf: 2)
            return (stuck, try s.beginCommit())
        }
        var s = try EventStore(directory: dir, segmentLimit: 4096)
        var (stuck, copies) = try copiesOfTwoInFlight(s)
        XCTAssertEqual(try s.ack(app: "com.stuck", ids: Array(stuck[2...])), Array(stuck[2...]))
        s.finishCommit(copies, error: copies.flatMap { SyncWorker.run([$0])[0] })
        XCTAssertTrue(s.hasPending, "the acks are not durable yet")
        XCTAssertTrue(segmentFiles().contains("events-000001.log"), "\(segmentFiles())")
        // (a crash here: the acks are never written)
        XCTAssertEqual(try EventStore(directory: dir, segmentLimit: 4096).pending(for: "com.stuck").map(\.id), stuck)

        try FileManager.default.removeItem(atPath: dir)
        s = try EventStore(directory: dir, segmentLimit: 4096)
        (stuck, copies) = try copiesOfTwoInFlight(s)
        XCTAssertEqual(try s.ack(app: "com.stuck", ids: Array(stuck[2...])), Array(stuck[2...]))
        s.finishCommit(copies, error: copies.flatMap { SyncWorker.run([$0])[0] })
        let acks = try s.beginCommit()
        s.finishCommit(acks, error: StoreError("injected: the acks' commit failed"))
        XCTAssertEqual(s.pending(for: "com.stuck").map(\.id), stuck, "all five pending again")
        XCTAssertEqual(try EventStore(directory: dir, segmentLimit: 4096).pending(for: "com.stuck").map(\.id), stuck, "after a restart")
        // Once quiet, compaction carries the other three and the old segment goes.
        for _ in 0..<20 {
            let id = try s.enqueue(app: "com.b", fields: ["kind": "openURL"]).id
            _ = try s.ack(app: "com.b", ids: [id])
            try s.commit()
        }
        XCTAssertFalse(segmentFiles().contains("events-000001.log"), "\(segmentFiles())")
        XCTAssertEqual(try EventStore(directory: dir, segmentLimit: 4096).pending(for: "com.stuck").map(\.id), stuck)
    }

    func testTheOldSegmentStaysUntilTheCompletionsOfItsSharesNotCarriedAreDurable() throws {
        let s = try openShares()
        s.carryChunk = 2
        let old = (0..<4).map { "sh-old-\($0)" }
        for id in old { try add(s, id) }
        try s.commitTurn()
        for n in 0..<400 where s.carryPending == nil {
            try add(s, "sh-\(n)")
            XCTAssertTrue(try s.complete("sh-\(n)"))
            try s.commitTurn()
        }
        XCTAssertEqual(s.carryPending?.items.map(\.id), Array(old.prefix(2)))
        let copies = try s.beginCommit()
        XCTAssertTrue(try s.complete(old[2]))
        XCTAssertTrue(try s.complete(old[3]))
        s.finishCommit(copies, error: copies.flatMap { SyncWorker.run([$0])[0] })
        XCTAssertTrue(segmentFiles().contains("shares-000001.log"), "\(segmentFiles())")
        // (a crash here: the completions are never written)
        XCTAssertEqual(try openShares().all.map(\.id), old)
    }

    /// At shutdown the broker pauses carrying (one chunk would follow another to the end of the
    /// backlog before it could stop): a quiet commit then deletes dead segments but copies nothing.
    func testPausedCarryingMakesNoCopies() throws {
        let s = try EventStore(directory: dir, segmentLimit: 4096)
        _ = try eventsWithCopiesPending(s)
        try s.commit()  // (the copies written)
        s.carryingPaused = true
        for _ in 0..<400 {
            let id = try s.enqueue(app: "com.b", fields: ["kind": "openURL", "url": "https://example.com/b/long/path"]).id
            _ = try s.ack(app: "com.b", ids: [id])
            try s.commit()
            XCTAssertNil(s.carryPending)
        }
        s.carryingPaused = false
        let id = try s.enqueue(app: "com.b", fields: ["kind": "openURL"]).id
        _ = try s.ack(app: "com.b", ids: [id])
        try s.commit()
        XCTAssertNotNil(s.carryPending, "carrying again once resumed")
    }
}
