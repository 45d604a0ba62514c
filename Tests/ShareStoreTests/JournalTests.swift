// The journal and the event queues: group commit, replay, torn tails, checksum quarantine,
// rollback on failed commits, compaction of segments, stable sequence numbers.

import Foundation
import ShareProtocol
import ShareStore
import XCTest

final class JournalTests: XCTestCase {
    var dir: String = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "sbstore-\(UUID().uuidString.prefix(8))"
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func segmentFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".log") }.sorted()
    }

    func testEventsSurviveReopenInOrderWithStableIDs() throws {
        do {
            let s = try EventStore(directory: dir)
            for i in 0..<5 { _ = try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": .string("a://\(i)")]) }
            _ = try s.enqueue(app: "com.b", fields: ["kind": "openURL", "url": "b://x"])
            try s.commit()
            XCTAssertEqual(try s.ack(app: "com.a", ids: ["ev-2", "ev-404", "ev-6"]), ["ev-2"])  // ev-6 is com.b's
            try s.commit()
        }
        let s = try EventStore(directory: dir)
        XCTAssertEqual(s.pending(for: "com.a").map(\.id), ["ev-1", "ev-3", "ev-4", "ev-5"])
        XCTAssertEqual(s.pending(for: "com.a").map { $0.body["url"]?.stringValue }, ["a://0", "a://2", "a://3", "a://4"])
        XCTAssertEqual(s.pending(for: "com.b").map(\.id), ["ev-6"])
        XCTAssertEqual(s.pendingCount, 5)
        // New ids continue after the highest ever used.
        XCTAssertEqual(try s.enqueue(app: "com.a", fields: ["kind": "openURL"]).id, "ev-7")
    }

    /// The store owns `id`: a caller's first member `id` is filled in place, an `id` elsewhere is
    /// dropped, and either way the body starts with the store's id and keeps the caller's order.
    func testEnqueueWritesItsOwnIDFirst() throws {
        do {
            let s = try EventStore(directory: dir)
            let a = try s.enqueue(app: "com.a", fields: JSONObject(uniqueMembers: [("id", .null), ("kind", "openURL"), ("url", "a://1")]))
            let b = try s.enqueue(app: "com.a", fields: JSONObject(uniqueMembers: [("kind", "openURL"), ("id", "mine"), ("url", "a://2")]))
            let c = try s.enqueue(app: "com.a", fields: ["kind": "openURL"])
            // An id slot first and another id later (uniqueness is the caller's promise, not
            // checked): the store's id still comes once, first.
            let d = try s.enqueue(
                app: "com.b", fields: JSONObject(uniqueMembers: [("id", .null), ("kind", "openURL"), ("id", "x"), ("url", "b://1")]))
            XCTAssertEqual(d.body.keys, ["id", "kind", "url"])
            XCTAssertEqual(d.body["id"]?.stringValue, "ev-4")
            for (e, id, url) in [(a, "ev-1", "a://1"), (b, "ev-2", "a://2")] {
                XCTAssertEqual(e.id, id)
                XCTAssertEqual(e.body.keys, ["id", "kind", "url"])
                XCTAssertEqual(e.body["id"]?.stringValue, id)
                XCTAssertEqual(e.body["url"]?.stringValue, url)
            }
            XCTAssertEqual(c.body.keys, ["id", "kind"])
            try s.commit()
        }
        let s = try EventStore(directory: dir)  // and so they are on disk
        XCTAssertEqual(s.pending(for: "com.a").map { $0.body.keys }, [["id", "kind", "url"], ["id", "kind", "url"], ["id", "kind"]])
        XCTAssertEqual(s.pending(for: "com.a").map { $0.body["id"]?.stringValue }, ["ev-1", "ev-2", "ev-3"])
    }

    func testSpaceFreeingRecordsKeepHeadroomOnAFullDisk() throws {
        let j = try Journal(directory: dir, name: "t")
        _ = try j.replay { _ in }
        j.reserveChunk = 4096
        j.freeingHeadroom = 1024
        let full = ReserveFault()
        j.faultInjector = full.injector
        let record = [UInt8](repeating: 0x41, count: 100)
        // Ordinary records fill the reservation up to the headroom, then the "disk" is full.
        try j.append(type: 1) { $0.append(contentsOf: record) }  // reserves 4096 bytes
        full.on = true
        var appended = 1
        while (try? j.append(type: 1) { $0.append(contentsOf: record) }) != nil { appended += 1 }
        XCTAssertLessThan(appended * 112, 4096 - 1024 + 112, "ordinary records leave the headroom alone")
        // A space-freeing record (an ack, a completion) still fits, without reserving anything.
        try j.append(type: 2, freeing: true) { $0.append(contentsOf: record) }
        try j.commit()
        // Past the headroom even those fail, cleanly.
        var freeing = 1
        while (try? j.append(type: 2, freeing: true) { $0.append(contentsOf: record) }) != nil { freeing += 1 }
        XCTAssertLessThan(freeing * 112, 1024 + 2 * 112)
    }

    func testReservedSpaceIsCountedAfterAReopen() throws {
        do {
            let j = try Journal(directory: dir, name: "t")
            _ = try j.replay { _ in }
            j.reserveChunk = 64 * 1024
            try j.append(type: 1) { $0.append(contentsOf: [1, 2, 3]) }  // reserves 64 KiB + headroom
            try j.commit()
        }
        // After a restart on a full disk, what was reserved is still usable.
        let j = try Journal(directory: dir, name: "t")
        _ = try j.replay { _ in }
        let full = ReserveFault()
        full.on = true
        j.faultInjector = full.injector
        XCTAssertNoThrow(try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 7, count: 1000)) })
        XCTAssertNoThrow(try j.commit())
    }

    func testAFailedCommitReservesAgainWhatItsTruncationFreed() throws {
        let j = try Journal(directory: dir, name: "t")
        _ = try j.replay { _ in }
        j.reserveChunk = 256 * 1024
        let path = dir + "/t-000001.log"
        func allocated() -> Int {
            var st = stat()
            return stat(path, &st) == 0 ? Int(st.st_blocks) * 512 : -1
        }
        // Whether this file system reserves space is asked of it directly, not of the journal (a
        // skip on the journal's own allocation once passed a journal that reserved nothing).
        guard try Self.fileSystemReservesSpace(in: dir) else {
            throw XCTSkip("this file system does not reserve space (fallocate KEEP_SIZE)")
        }
        try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 1, count: 100)) }
        try j.commit()
        XCTAssertGreaterThanOrEqual(allocated(), 256 * 1024, "the first record reserves a chunk ahead")
        // A commit fails (an I/O error): the segment is cut back, which frees its reserved blocks.
        try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 2, count: 100)) }
        j.faultInjector = { $0 == .write ? EIO : nil }
        XCTAssertThrowsError(try j.commit())
        j.faultInjector = nil
        // The next record reserves again, so a full disk still shows at append, not at commit.
        try j.append(type: 1) { $0.append(contentsOf: [UInt8](repeating: 3, count: 100)) }
        XCTAssertGreaterThanOrEqual(allocated(), 256 * 1024, "space is reserved again after the failed commit")
        try j.commit()
        let (seen, report, _) = try replayStrings()
        XCTAssertEqual(seen.map { $0.utf8.first }, [1, 3])
        XCTAssertEqual(report.truncatedBytes, 0)
    }

    /// Whether the file system under `directory` keeps blocks reserved past a file's end: asked
    /// of the file system itself, with fallocate(FALLOC_FL_KEEP_SIZE) on a scratch file, without
    /// the journal's code (on Linux; elsewhere the answer is yes: F_PREALLOCATE reserves).
    static func fileSystemReservesSpace(in directory: String) throws -> Bool {
        #if os(Linux)
            typealias Fallocate = @convention(c) (Int32, Int32, Int, Int) -> Int32
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "fallocate") else { return false }
            let fallocate = unsafeBitCast(symbol, to: Fallocate.self)
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let path = directory + "/reserve-probe"
            let fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0o600)
            guard fd >= 0 else { return false }
            defer {
                close(fd)
                unlink(path)
            }
            guard fallocate(fd, 1 /* FALLOC_FL_KEEP_SIZE */, 0, 256 * 1024) == 0 else { return false }
            var st = stat()
            return fstat(fd, &st) == 0 && Int(st.st_blocks) * 512 >= 256 * 1024
        #else
            return true
        #endif
    }

    /// Replays journal `t` in `dir`: the payloads (as strings) and the report.
    func replayStrings() throws -> ([String], RecoveryReport, Journal) {
        let j = try Journal(directory: dir, name: "t")
        var seen: [String] = []
        let report = try j.replay { seen.append(String(decoding: $0.payload, as: UTF8.self)) }
        return (seen, report, j)
    }

    func fileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1
    }

    func testCommitsOverwriteSpaceZeroedAheadOfTheRecords() throws {
        var size = 0
        do {
            let (_, _, j) = try replayStrings()
            try j.append(type: 1) { $0.append(contentsOf: Array("r0".utf8)) }
            try j.commit()
            size = try fileSize(dir + "/" + segmentFiles().last!)
            XCTAssertGreaterThanOrEqual(size, j.zeroAhead, "the first commit zeroes space ahead")
            for i in 1..<20 {
                try j.append(type: 1) { $0.append(contentsOf: Array("r\(i)".utf8)) }
                try j.commit()
                XCTAssertEqual(try fileSize(dir + "/" + segmentFiles().last!), size, "commit \(i) overwrote zeros")
            }
        }
        // The zeros are free space, not a torn tail, and appending after a restart goes on right
        // after the last record.
        do {
            let (seen, report, j) = try replayStrings()
            XCTAssertEqual(seen, (0..<20).map { "r\($0)" })
            XCTAssertEqual(report.truncatedBytes, 0)
            XCTAssertEqual(report.notes, [])
            XCTAssertEqual(try fileSize(dir + "/" + segmentFiles().last!), size)
            try j.append(type: 1) { $0.append(contentsOf: Array("r20".utf8)) }
            try j.commit()
        }
        let (seen, report, _) = try replayStrings()
        XCTAssertEqual(seen, (0...20).map { "r\($0)" })
        XCTAssertEqual(report.notes, [])
    }

    func testTornWriteIntoZeroedSpaceIsCutOff() throws {
        var recordsEnd = 0
        do {
            let (_, _, j) = try replayStrings()
            for i in 0..<3 {
                try j.append(type: 1) { $0.append(contentsOf: Array("r\(i)".utf8)) }
            }
            try j.commit()
            recordsEnd = 3 * (12 + 2)
        }
        let file = dir + "/" + segmentFiles().last!
        let size = try fileSize(file)
        XCTAssertGreaterThan(size, recordsEnd)
        // A crash in the middle of the next write: part of a record lands in the zeroed space.
        let h = try XCTUnwrap(FileHandle(forWritingAtPath: file))
        try h.seek(toOffset: UInt64(recordsEnd))
        h.write(Data([0xA5, 0x53, 1, 0, 200, 0, 0, 0, 1, 2, 3, 4, 9, 9]))
        try h.close()
        let (seen, report, _) = try replayStrings()
        XCTAssertEqual(seen, ["r0", "r1", "r2"])
        XCTAssertEqual(report.truncatedBytes, 14)
        XCTAssertEqual(report.quarantined, 0)
        XCTAssertEqual(try fileSize(file), recordsEnd)
    }

    func testASealedSegmentGivesBackItsZeroedSpace() throws {
        let (_, _, j) = try replayStrings()
        j.segmentLimit = 100
        for i in 0..<10 {
            try j.append(type: 1) { $0.append(contentsOf: Array("record-\(i)".utf8)) }
            try j.commit()
        }
        let files = segmentFiles()
        XCTAssertGreaterThan(files.count, 1)
        for f in files.dropLast() {
            let size = try fileSize(dir + "/" + f)
            XCTAssertGreaterThanOrEqual(size, 100)
            XCTAssertLessThan(size, 100 + 12 + 8, "\(f) holds its records only")
        }
        let (seen, report, _) = try replayStrings()
        XCTAssertEqual(seen, (0..<10).map { "record-\($0)" })
        XCTAssertEqual(report.notes, [])
    }

    func testUncommittedChangesAreNotDurable() throws {
        do {
            let s = try EventStore(directory: dir)
            _ = try s.enqueue(app: "com.a", fields: ["kind": "openURL"])
            try s.commit()
            _ = try s.enqueue(app: "com.a", fields: ["kind": "openURL"])  // never committed
        }
        let s = try EventStore(directory: dir)
        XCTAssertEqual(s.pending(for: "com.a").map(\.id), ["ev-1"])
    }

    func testRollbackRestoresMemory() throws {
        let s = try EventStore(directory: dir)
        _ = try s.enqueue(app: "com.a", fields: ["kind": "openURL"])
        _ = try s.enqueue(app: "com.a", fields: ["kind": "openURL"])
        try s.commit()
        _ = try s.ack(app: "com.a", ids: ["ev-1"])
        _ = try s.enqueue(app: "com.a", fields: ["kind": "openURL"])
        s.rollback()
        XCTAssertEqual(s.pending(for: "com.a").map(\.id), ["ev-1", "ev-2"])
        XCTAssertFalse(s.hasPending)
        XCTAssertEqual(try s.enqueue(app: "com.a", fields: [:]).id, "ev-3")
    }

    func testTornTailIsTruncated() throws {
        do {
            let s = try EventStore(directory: dir)
            for _ in 0..<3 { _ = try s.enqueue(app: "com.a", fields: ["kind": "openURL"]) }
            try s.commit()
        }
        let file = dir + "/" + segmentFiles().last!
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        while bytes.last == 0 { bytes.removeLast() }  // the zeros written ahead of the records
        let fullLength = bytes.count
        bytes.append(contentsOf: [0xA5, 0x53, 1, 0, 200, 0, 0, 0, 1, 2, 3, 4, 9, 9])  // header of a record cut short
        try bytes.write(to: URL(fileURLWithPath: file))
        let s = try EventStore(directory: dir)
        XCTAssertEqual(s.pending(for: "com.a").count, 3)
        XCTAssertEqual(s.recovery.truncatedBytes, 14)
        XCTAssertEqual(s.recovery.quarantined, 0)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)).count, fullLength)
    }

    func testPendingBytesFollowEnqueueAckRollbackAndReplay() throws {
        let s = try EventStore(directory: dir)
        for i in 0..<5 { _ = try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": .string("x://" + String(repeating: "y", count: 100 * i))]) }
        _ = try s.enqueue(app: "com.b", fields: ["kind": "openURL", "url": "x://b"])
        try s.commit()
        let all = s.pendingLoad(for: "com.a").bytes
        let sizes = s.pending(for: "com.a").map(\.size)
        XCTAssertEqual(sizes.reduce(0, +), all)
        XCTAssertTrue(sizes.allSatisfy { $0 > 0 } && sizes == sizes.sorted(), "\(sizes)")
        let ids = s.pending(for: "com.a").map(\.id)
        _ = try s.ack(app: "com.a", ids: [ids[4]])
        XCTAssertEqual(s.pendingLoad(for: "com.a").bytes, all - sizes[4])
        s.rollback()  // the ack is undone
        XCTAssertEqual(s.pendingLoad(for: "com.a").bytes, all)
        _ = try s.ack(app: "com.a", ids: [ids[1], ids[3]])
        try s.commit()
        let left = all - sizes[1] - sizes[3]
        XCTAssertEqual(s.pendingLoad(for: "com.a").bytes, left)
        XCTAssertEqual(s.pendingLoad(for: "com.a").count, 3)
        let reopened = try EventStore(directory: dir)
        XCTAssertEqual(reopened.pendingLoad(for: "com.a").bytes, left, "recounted at replay")
        XCTAssertEqual(reopened.pendingLoad(for: "com.b").bytes, s.pendingLoad(for: "com.b").bytes)
    }

    /// Three events x://0..2 committed, then a byte of the second's payload flipped on disk
    /// ("x://1" → "x://q"), so its checksum fails at the next replay.
    func writeThreeEventsAndDamageTheSecond() throws {
        do {
            let s = try EventStore(directory: dir)
            for i in 0..<3 { _ = try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": .string("x://\(i)")]) }
            try s.commit()
        }
        let file = dir + "/" + segmentFiles().last!
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        let needle = Array("x://1".utf8)
        let at = (0..<(bytes.count - needle.count)).first { Array(bytes[$0..<($0 + needle.count)]) == needle }!
        bytes[at + 4] = UInt8(ascii: "q")
        try Data(bytes).write(to: URL(fileURLWithPath: file))
    }

    func testCorruptRecordIsQuarantinedAndTheRestKept() throws {
        try writeThreeEventsAndDamageTheSecond()
        let s = try EventStore(directory: dir)
        XCTAssertEqual(s.pending(for: "com.a").map { $0.body["url"]?.stringValue }, ["x://0", "x://2"])
        XCTAssertEqual(s.recovery.quarantined, 1)
        let quarantine = (try? FileManager.default.contentsOfDirectory(atPath: dir + "/quarantine")) ?? []
        XCTAssertEqual(quarantine.count, 1)
    }

    func testQuarantineKeepsOnlyTheNewestFiles() throws {
        // Files left by earlier recoveries (70, oldest first), then a recovery that finds damage.
        let q = dir + "/quarantine"
        try FileManager.default.createDirectory(atPath: q, withIntermediateDirectories: true)
        for i in 0..<70 {
            let path = q + "/events-\(i)@0.bad"
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3])))
            var times = [timespec(tv_sec: 1_000_000 + i, tv_nsec: 0), timespec(tv_sec: 1_000_000 + i, tv_nsec: 0)]
            XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
        }
        try writeThreeEventsAndDamageTheSecond()
        let s = try EventStore(directory: dir)
        XCTAssertEqual(s.recovery.quarantined, 1)
        let kept = Set((try? FileManager.default.contentsOfDirectory(atPath: q)) ?? [])
        XCTAssertEqual(kept.count, Journal.quarantineKeep)
        // The new file and the 63 newest old ones stay; the 7 oldest (0...6) went.
        for i in 0..<7 { XCTAssertFalse(kept.contains("events-\(i)@0.bad"), "events-\(i) is among the oldest") }
        for i in 7..<70 { XCTAssertTrue(kept.contains("events-\(i)@0.bad"), "events-\(i) is among the newest") }
        XCTAssertEqual(kept.filter { !(0..<70).map { "events-\($0)@0.bad" }.contains($0) }.count, 1, "the new copy is kept")
    }

    func testSegmentsRollAndAckedOnesAreDeleted() throws {
        let s = try EventStore(directory: dir, segmentLimit: 4096)
        var ids: [String] = []
        for _ in 0..<200 {
            ids.append(try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "https://example.com/some/long/path"]).id)
            try s.commit()
        }
        XCTAssertGreaterThan(segmentFiles().count, 3)
        _ = try s.ack(app: "com.a", ids: Array(ids.prefix(199)))
        try s.commit()
        try s.commit()
        // Everything but the segment holding the last event (and the active one) is gone.
        XCTAssertLessThanOrEqual(segmentFiles().count, 3)
        let reopened = try EventStore(directory: dir, segmentLimit: 4096)
        XCTAssertEqual(reopened.pending(for: "com.a").map(\.id), [ids.last!])
        XCTAssertEqual(try reopened.enqueue(app: "com.a", fields: [:]).id, "ev-201")
    }

    func testLiveEventsInOldSegmentsAreCarriedForward() throws {
        let s = try EventStore(directory: dir, segmentLimit: 2048)
        let keep = try s.enqueue(app: "com.keep", fields: ["kind": "openURL", "url": "k://1"]).id
        try s.commit()
        var others: [String] = []
        for _ in 0..<150 {
            others.append(try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "https://example.com/x"]).id)
            try s.commit()
        }
        _ = try s.ack(app: "com.a", ids: others)
        try s.commit()
        for _ in 0..<5 { try s.commit() }
        XCTAssertLessThanOrEqual(segmentFiles().count, 2, "\(segmentFiles())")
        let reopened = try EventStore(directory: dir, segmentLimit: 2048)
        XCTAssertEqual(reopened.pending(for: "com.keep").map(\.id), [keep])
        XCTAssertEqual(reopened.pendingCount, 1)
    }
}

/// Fails every space reservation (ENOSPC) while `on`.
final class ReserveFault: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var value = false
    var on: Bool {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
    var injector: @Sendable (JournalFaultPoint) -> Int32? {
        { [self] p in p == .reserve && on ? ENOSPC : nil }
    }
}
