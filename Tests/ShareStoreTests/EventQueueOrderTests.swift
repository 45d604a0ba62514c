// The event queues put events back in order without re-sorting per event: copies carried forward
// by compaction meet newer events at replay, a failed ack puts its events back, a failed commit
// undoes many acks, `restore` re-creates events in any order. And an oldest event that is never
// acked does not keep the slots of every event acked behind it.
//
// The inputs are large enough that a per-event re-sort (O(events x queue)) would take many
// seconds; nothing here is timed, the tests check order, ids and counts.

import Foundation
import ShareProtocol
import XCTest

@testable import ShareStore

final class EventQueueOrderTests: XCTestCase {
    var dir: String = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "sbqueue-\(UUID().uuidString.prefix(8))"
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func segmentFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".log") }.sorted()
    }

    func ids(_ seqs: some Sequence<UInt64>) -> [String] { seqs.map { "ev-\($0)" } }

    /// Writes event and ack records straight into the events journal, in the given order.
    func writeJournal(_ records: [(type: UInt8, json: String)]) throws {
        let j = try Journal(directory: dir, name: "events")
        _ = try j.replay { _ in }
        for r in records { try j.append(type: r.type) { $0.append(contentsOf: Array(r.json.utf8)) } }
        try j.commit()
    }

    func eventRecord(_ app: String, _ seq: UInt64) -> (type: UInt8, json: String) {
        (1, #"{"app":"\#(app)","id":"ev-\#(seq)","seq":\#(seq),"body":{"id":"ev-\#(seq)","url":"x://\#(seq)"}}"#)
    }

    func ackRecord(_ app: String, _ seqs: some Sequence<UInt64>) -> (type: UInt8, json: String) {
        (2, #"{"app":"\#(app)","ids":[\#(seqs.map { "\"ev-\($0)\"" }.joined(separator: ","))]}"#)
    }

    // MARK: Replay

    /// The shape compaction leaves: old events of an app carried forward (in batches, each in seq
    /// order) after 10,000 newer events of the same app, some carried twice (the original segment
    /// still there), acks in between, another app interleaved. Replay yields every pending event
    /// once, in seq order.
    func testReplayWithManyCarriedEventsInterleavedKeepsOrderAndCount() throws {
        let old: [UInt64] = Array(1...2000)
        let newer: [UInt64] = Array(2001...12_000)
        let acked: ClosedRange<UInt64> = 5001...6000
        var records: [(type: UInt8, json: String)] = []
        // The originals of some old events (their segment was not deleted yet).
        for s in old.prefix(500) { records.append(eventRecord("com.a", s)) }
        for (i, s) in newer.enumerated() {
            records.append(eventRecord("com.a", s))
            if i % 5 == 0 { records.append(eventRecord("com.b", 100_000 + UInt64(i))) }
        }
        // Carried copies, batch by batch, each followed by a newer event; 1...500 are copies of
        // events already replayed (must not be doubled).
        for batch in stride(from: 0, to: old.count, by: 250) {
            for s in old[batch..<(batch + 250)] { records.append(eventRecord("com.a", s)) }
            records.append(eventRecord("com.a", 12_000 + UInt64(batch / 250) + 1))
        }
        // Acks: every third old event, and a stretch of newer ones.
        records.append(ackRecord("com.a", old.filter { $0 % 3 == 0 }))
        records.append(ackRecord("com.a", acked))
        // One more copy of a live event, after the acks.
        records.append(eventRecord("com.a", 2))
        try writeJournal(records)

        let s = try EventStore(directory: dir)
        var expected = Set(old.filter { $0 % 3 != 0 })
        expected.formUnion(newer.filter { !acked.contains($0) })
        expected.formUnion(12_001...12_008)
        let pending = s.pending(for: "com.a")
        XCTAssertEqual(pending.count, expected.count)
        XCTAssertEqual(pending.map(\.id), ids(expected.sorted()), "every pending event once, in seq order")
        XCTAssertEqual(s.pendingCount(for: "com.b"), 2000)
        XCTAssertEqual(s.pending(for: "com.b").map(\.seq), (0..<2000).map { 100_000 + UInt64($0) * 5 })
        XCTAssertEqual(s.pendingCount, expected.count + 2000)
        XCTAssertEqual(s.recoveredEvents, expected.count + 2000)
        XCTAssertEqual(s.queues["com.a"]?.disordered, false, "sorted once at the end of the replay")
        XCTAssertEqual(s.nextSequence, 100_000 + 1999 * 5 + 1)
        // Acks after the restart find the events (the index follows the sort).
        XCTAssertEqual(try s.ack(app: "com.a", ids: ["ev-1", "ev-2", "ev-2001", "ev-3"]), ["ev-1", "ev-2", "ev-2001"])
        XCTAssertEqual(s.pending(for: "com.a").prefix(3).map(\.id), ["ev-4", "ev-5", "ev-7"])
    }

    /// The same through the store itself: compaction carries the live old events of an app forward
    /// (past newer events of the same app) round after round; a restart yields them in order.
    func testCompactionCarriedEventsReplayInOrder() throws {
        var kept: [String] = []
        var newer: [String] = []
        do {
            let s = try EventStore(directory: dir, segmentLimit: 4096)
            var old: [String] = []
            for _ in 0..<80 { old.append(try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "a://old"]).id) }
            try s.commit()
            for round in 0..<6 {
                // Traffic of another app fills segments; the app gets newer events meanwhile.
                for _ in 0..<10 {
                    let ids = try (0..<5).map { _ in
                        try s.enqueue(app: "com.b", fields: ["kind": "openURL", "url": "https://example.com/b/long/path"]).id
                    }
                    try s.commit()
                    _ = try s.ack(app: "com.b", ids: ids)
                    try s.commit()
                }
                for _ in 0..<5 { newer.append(try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "a://new"]).id) }
                try s.commit()
                if round == 0 {
                    // Most old events are acked; the rest are carried forward from now on.
                    let acked = old.enumerated().filter { $0.offset % 20 != 0 }.map(\.element)
                    XCTAssertEqual(try s.ack(app: "com.a", ids: acked).count, acked.count)
                    kept = old.enumerated().filter { $0.offset % 20 == 0 }.map(\.element)
                    try s.commit()
                }
            }
            for _ in 0..<5 { try s.commit() }
            XCTAssertEqual(s.pending(for: "com.a").map(\.id), kept + newer)
        }
        XCTAssertFalse(segmentFiles().contains("events-000001.log"), "the old events were carried forward: \(segmentFiles())")
        let reopened = try EventStore(directory: dir, segmentLimit: 4096)
        XCTAssertEqual(reopened.pending(for: "com.a").map(\.id), kept + newer)
        XCTAssertEqual(reopened.pendingCount, kept.count + newer.count)
    }

    /// An app that never acks its (large) backlog does not keep the later, dead segments on disk:
    /// its events are copied forward in chunks while the sealed segments are mostly dead.
    func testALongBacklogDoesNotKeepDeadSegments() throws {
        var backlog: [String] = []
        do {
            let s = try EventStore(directory: dir, segmentLimit: 4096)
            s.carryChunk = 8
            for _ in 0..<60 { backlog.append(try s.enqueue(app: "com.stuck", fields: ["kind": "openURL", "url": "s://x"]).id) }
            try s.commit()
            for _ in 0..<400 {
                let id = try s.enqueue(app: "com.b", fields: ["kind": "openURL", "url": "https://example.com/b/long/path"]).id
                try s.commit()
                _ = try s.ack(app: "com.b", ids: [id])
                try s.commit()
            }
            XCTAssertLessThanOrEqual(segmentFiles().count, 8, "\(segmentFiles())")
            XCTAssertEqual(s.pending(for: "com.stuck").map(\.id), backlog)
        }
        let reopened = try EventStore(directory: dir, segmentLimit: 4096)
        XCTAssertEqual(reopened.pending(for: "com.stuck").map(\.id), backlog)
        XCTAssertEqual(reopened.pendingCount, backlog.count)
    }

    /// `pendingCount` is a running count: it agrees with the queues through enqueues, acks (also
    /// repeated and unknown ids), rollbacks, restores and reopening.
    func testThePendingCountFollowsEveryChange() throws {
        func recount(_ s: EventStore) -> Int { s.appsWithPending.reduce(0) { $0 + s.pending(for: $1).count } }
        let s = try EventStore(directory: dir)
        var ids: [String] = []
        for i in 0..<50 { ids.append(try s.enqueue(app: "com.\(i % 3)", fields: ["kind": "openURL"]).id) }
        try s.commit()
        XCTAssertEqual(s.pendingCount, 50)
        _ = try s.ack(app: "com.0", ids: ids + ["ev-999"])
        XCTAssertEqual(s.pendingCount, recount(s))
        s.rollback()  // the acks and nothing else
        XCTAssertEqual(s.pendingCount, 50)
        XCTAssertEqual(recount(s), 50)
        _ = try s.ack(app: "com.1", ids: [ids[1], ids[1], ids[4]])
        _ = try s.enqueue(app: "com.new", fields: ["kind": "openURL"])
        try s.restore(app: "com.2", id: "ev-500", seq: 500, body: ["id": "ev-500", "kind": "openURL"])
        XCTAssertEqual(s.pendingCount, 50 - 2 + 1 + 1)
        XCTAssertEqual(s.pendingCount, recount(s))
        try s.commit()
        let reopened = try EventStore(directory: dir)
        XCTAssertEqual(reopened.pendingCount, 50)
        XCTAssertEqual(recount(reopened), 50)
    }

    // MARK: Failed acks and commits

    /// An ack whose record cannot be stored (a full disk) leaves the queue exactly as it was:
    /// the same events, in the same order, each found by id; the queue then works as before.
    func testAFailedAckRestoresExactlyTheEventsInOrder() throws {
        let s = try EventStore(directory: dir)
        s.journal.reserveChunk = 4096
        s.journal.freeingHeadroom = 1024
        var all: [String] = []
        for i in 0..<8000 {
            all.append(try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": .string("a://\(i)")]).id)
            if i % 1000 == 999 { try s.commit() }
        }
        try s.commit()
        let before = s.pending(for: "com.a")
        let full = ReserveFault()
        s.journal.faultInjector = full.injector
        full.on = true
        // 5,500 ids from the front, the middle and the back, with repeats and unknown ids: their
        // record is far larger than the reservation left.
        var ackIDs = Array(all[0..<2000]) + Array(all[3000..<5000]) + Array(all[6500..<8000])
        ackIDs += ["ev-1", "ev-99999", "nonsense", all[7000]]
        let failed = Result { () throws(StoreError) -> [String] in try s.ack(app: "com.a", ids: ackIDs) }
        guard case .failure(let error) = failed else { return XCTFail("the ack was stored on a full disk") }
        XCTAssertTrue(error.diskFull)
        let after = s.pending(for: "com.a")
        XCTAssertEqual(after.count, before.count)
        XCTAssertTrue(zip(after, before).allSatisfy { $0 === $1 }, "the same events in the same order")
        XCTAssertEqual(s.pendingCount, 8000)
        XCTAssertTrue(all.allSatisfy { s.isPending(app: "com.a", id: $0) })
        XCTAssertFalse(s.hasPending)
        // A small ack fits in the headroom kept for space-freeing records.
        let few = [all[0], all[4000], all[7999]]
        XCTAssertEqual(try s.ack(app: "com.a", ids: few), few)
        try s.commit()
        full.on = false
        var expected = all
        expected.removeAll { few.contains($0) }
        XCTAssertEqual(s.pending(for: "com.a").map(\.id), expected)
        XCTAssertEqual(try s.ack(app: "com.a", ids: ackIDs).count, 5497)
        try s.commit()
        let left = Array(all[2000..<3000]) + Array(all[5000..<6500])
        XCTAssertEqual(s.pending(for: "com.a").map(\.id), left)
        let reopened = try EventStore(directory: dir)
        XCTAssertEqual(reopened.pending(for: "com.a").map(\.id), left)
    }

    /// A commit that fails undoes the turn's acks (and its enqueues, including events both queued
    /// and acked in it): the queues are as they were, in order, and new ids continue from there.
    func testAFailedCommitUndoesManyAcksInOrder() throws {
        let s = try EventStore(directory: dir)
        var a: [String] = []
        var b: [String] = []
        for i in 0..<8000 {
            a.append(try s.enqueue(app: "com.a", fields: ["kind": "openURL"]).id)
            if i % 3 == 0 { b.append(try s.enqueue(app: "com.b", fields: ["kind": "openURL"]).id) }
        }
        try s.commit()
        let next = s.nextSequence
        // One turn: acks scattered over both queues (back to front, in pieces), new events, and
        // new events acked again before the commit.
        for k in stride(from: 7, through: 0, by: -1) {
            let piece = a[(k * 1000)..<(k * 1000 + 1000)].enumerated().filter { $0.offset % 4 != 1 }.map(\.element)
            XCTAssertEqual(try s.ack(app: "com.a", ids: piece).count, piece.count)
        }
        XCTAssertEqual(try s.ack(app: "com.b", ids: Array(b.prefix(2000))).count, 2000)
        let fresh = try (0..<10).map { _ in try s.enqueue(app: "com.a", fields: ["kind": "openURL"]).id }
        XCTAssertEqual(try s.ack(app: "com.a", ids: Array(fresh.prefix(5)) + [a[1]]), Array(fresh.prefix(5)) + [a[1]])
        s.journal.faultInjector = { $0 == .write ? EIO : nil }
        XCTAssertThrowsError(try s.commit())
        s.journal.faultInjector = nil
        XCTAssertEqual(s.pending(for: "com.a").map(\.id), a)
        XCTAssertEqual(s.pending(for: "com.b").map(\.id), b)
        XCTAssertEqual(s.pendingCount, a.count + b.count)
        XCTAssertTrue(fresh.allSatisfy { !s.isPending(app: "com.a", id: $0) })
        XCTAssertEqual(s.nextSequence, next)
        // The queues work on: acks, new events, a restart.
        XCTAssertEqual(try s.ack(app: "com.a", ids: [a[0], a[7999]]), [a[0], a[7999]])
        let last = try s.enqueue(app: "com.a", fields: ["kind": "openURL"]).id
        XCTAssertEqual(last, "ev-\(next)")
        try s.commit()
        let reopened = try EventStore(directory: dir)
        XCTAssertEqual(reopened.pending(for: "com.a").map(\.id), Array(a.dropFirst().dropLast()) + [last])
        XCTAssertEqual(reopened.pending(for: "com.b").map(\.id), b)
    }

    /// Events re-created by `restore` in any order (as recovery walks the shares) are pending in
    /// seq order, found by id, and stored so.
    func testRestoredEventsAreInSeqOrder() throws {
        do {
            let s = try EventStore(directory: dir)
            let first = try s.enqueue(app: "com.a", fields: ["kind": "openURL"])
            try s.commit()
            let seqs: [UInt64] = Array(10...8009).shuffled()
            for q in seqs {
                try s.restore(app: "com.a", id: "ev-\(q)", seq: q, body: ["id": .string("ev-\(q)"), "kind": "share"])
            }
            try s.restore(app: "com.a", id: "ev-10", seq: 10, body: [:])  // already pending: ignored
            try s.commit()
            XCTAssertEqual(s.pending(for: "com.a").map(\.id), [first.id] + ids(10...8009))
            XCTAssertEqual(s.pendingCount, 8001)
            XCTAssertEqual(s.nextSequence, 8010)
            XCTAssertEqual(try s.ack(app: "com.a", ids: ["ev-15", "ev-8009"]), ["ev-15", "ev-8009"])
            try s.commit()
        }
        let reopened = try EventStore(directory: dir)
        XCTAssertEqual(reopened.pending(for: "com.a").map(\.id), ["ev-1"] + ids((10...8008).filter { $0 != 15 }))
    }

    // MARK: Slots behind a stuck event

    /// 60,000 events queued and acked behind one that is never acked: the slots stay bounded,
    /// and the stuck event, the order, the ids and the counts stay right.
    func testSlotsAreReclaimedBehindAnEventThatIsNeverAcked() throws {
        var q = AppQueue()
        func event(_ n: UInt64) -> StoredEvent { StoredEvent(id: "ev-\(n)", seq: n, app: "com.a", body: [:], segment: 1) }
        q.append(canonical: event(1))  // never acked
        var n: UInt64 = 1
        var largest = 0
        var live: [UInt64] = []  // kept a while, acked later
        var wrong = 0
        for round in 0..<60 {
            var batch: [UInt64] = []
            for _ in 0..<1000 {
                n += 1
                q.append(canonical: event(n))
                batch.append(n)
            }
            // Ack all but one of the batch, out of order; ack what an earlier round kept.
            let keep = batch[round % 1000]
            for m in batch.reversed() where m != keep { if q.remove("ev-\(m)")?.seq != m { wrong += 1 } }
            if live.count == 5 {
                let m = live.removeFirst()
                XCTAssertEqual(q.remove("ev-\(m)")?.seq, m)
            }
            live.append(keep)
            largest = max(largest, q.slots.count)
        }
        XCTAssertEqual(wrong, 0, "each acked event was found and removed")
        XCTAssertLessThanOrEqual(largest, 1 + 1024 + 1000 + 10, "empty slots are reclaimed behind the stuck head")
        XCTAssertEqual(q.count, 1 + live.count)
        XCTAssertEqual(q.first?.id, "ev-1")
        XCTAssertEqual(q.ordered.map(\.seq), [1] + live)
        XCTAssertTrue(q.contains("ev-1"))
        for m in live { XCTAssertEqual(q.position(of: "ev-\(m)").flatMap { q.slots[$0]?.seq }, m) }
        XCTAssertFalse(q.contains("ev-2"))
        XCTAssertEqual(q.remove("ev-1")?.seq, 1)
        XCTAssertEqual(q.first?.seq, live.first)
    }

    /// Through the store: pending events and the subscribe backlog (`pending(for:)`) behind a
    /// stuck event, with the queue's slots bounded, and the same after a restart.
    func testStoreBehindAStuckEventKeepsItsSlotsBounded() throws {
        var stuck = ""
        var kept: [String] = []
        do {
            let s = try EventStore(directory: dir)
            stuck = try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "a://stuck"]).id
            try s.commit()
            for round in 0..<24 {
                let batch = try (0..<500).map { _ in try s.enqueue(app: "com.a", fields: ["kind": "openURL"]).id }
                try s.commit()
                let acked = round % 5 == 0 ? Array(batch.dropLast()) : batch
                if round % 5 == 0 { kept.append(batch.last!) }
                XCTAssertEqual(try s.ack(app: "com.a", ids: acked).count, acked.count)
                try s.commit()
                XCTAssertLessThanOrEqual(s.queues["com.a"]!.slots.count, 1024 + 500 + 10)
            }
            XCTAssertEqual(s.pending(for: "com.a").map(\.id), [stuck] + kept)
            XCTAssertEqual(s.pendingCount(for: "com.a"), 1 + kept.count)
            XCTAssertTrue(s.isPending(app: "com.a", id: stuck))
        }
        let reopened = try EventStore(directory: dir)
        XCTAssertEqual(reopened.pending(for: "com.a").map(\.id), [stuck] + kept)
    }

    /// AppQueue against a plain model under random appends (in and out of order), takes put back,
    /// removals and sorts: the same events by seq, each found by id, whatever the slots did.
    func testAppQueueAgreesWithAModel() {
        var g = SystemRandomNumberGenerator()
        for _ in 0..<8 {
            var q = AppQueue()
            var model: [UInt64: String] = [:]
            var nextNew: UInt64 = 5000
            func event(_ n: UInt64, canonical: Bool) -> StoredEvent {
                StoredEvent(id: canonical ? "ev-\(n)" : "x-\(n)", seq: n, app: "com.a", body: [:], segment: 1)
            }
            for _ in 0..<2000 {
                switch Int.random(in: 0..<20, using: &g) {
                case 0..<7:  // in order, as enqueue does
                    nextNew += 1
                    q.append(canonical: event(nextNew, canonical: true))
                    model[nextNew] = "ev-\(nextNew)"
                case 7, 8:  // out of order (a carried copy, an undone ack, a restore)
                    let n = UInt64.random(in: 0..<5000, using: &g)
                    if model[n] == nil {
                        let canonical = n % 7 != 0
                        q.append(event(n, canonical: canonical))
                        model[n] = canonical ? "ev-\(n)" : "x-\(n)"
                    }
                case 9..<15:  // remove a random live one (or a missing id)
                    if let (n, id) = model.randomElement(using: &g), Bool.random(using: &g) || model.count > 50 {
                        XCTAssertEqual(q.remove(id)?.seq, n)
                        model[n] = nil
                    } else {
                        XCTAssertNil(q.remove("ev-999999"))
                    }
                case 15, 16:  // remove the oldest (the common ack)
                    if let n = model.keys.min() {
                        XCTAssertEqual(q.remove(model[n]!)?.seq, n)
                        model[n] = nil
                    }
                case 17:  // take several, put them back (a failed ack)
                    let picked = model.values.shuffled(using: &g).prefix(5)
                    let before = q.ordered
                    var taken: [(event: StoredEvent, slot: Int)] = []
                    for id in picked { if let t = q.take(id) { taken.append(t) } }
                    XCTAssertEqual(taken.count, picked.count)
                    for t in taken.shuffled(using: &g) { q.putBack(t.event, at: t.slot) }
                    XCTAssertTrue(zip(q.ordered, before).allSatisfy { $0 === $1 } && q.ordered.count == before.count)
                case 18:
                    q.normalize()
                    XCTAssertFalse(q.disordered)
                default:
                    XCTAssertEqual(q.first?.seq, model.keys.min())
                }
                XCTAssertEqual(q.count, model.count)
            }
            XCTAssertEqual(q.ordered.map(\.seq), model.keys.sorted())
            XCTAssertEqual(q.ordered.map(\.id), model.keys.sorted().map { model[$0]! })
            for (n, id) in model { XCTAssertEqual(q.position(of: id).flatMap { q.slots[$0]?.seq }, n) }
            XCTAssertLessThanOrEqual(q.slots.count - q.count, max(1024, q.count) + 1)
            q.normalize()
            XCTAssertEqual(q.slots.compactMap { $0?.seq }, model.keys.sorted())
        }
    }
}
