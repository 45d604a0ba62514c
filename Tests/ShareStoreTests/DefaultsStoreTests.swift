// DefaultsStore on its own: replay of sets/removes, versions that never go back, exact values,
// rollback of failed commits, torn tails, size limits, and snapshot compaction (also interrupted).

import Foundation
import ShareProtocol
import ShareStore
import XCTest

final class DefaultsStoreTests: XCTestCase {
    var dir: String = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "sbdefaults-\(UUID().uuidString.prefix(8))/groups/group.com.example"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent)
        try? FileManager.default.removeItem(
            atPath: ((dir as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent)
    }

    func open(_ limits: DefaultsLimits = DefaultsLimits(), segmentLimit: Int? = nil) throws -> DefaultsStore {
        try DefaultsStore(directory: dir, group: "group.com.example", limits: limits, segmentLimit: segmentLimit)
    }

    func segmentFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".log") }.sorted()
    }

    func json(_ text: String) -> JSONValue { try! JSONParser.parse(text) }

    func testReplayRebuildsSuiteAndVersion() throws {
        do {
            let s = try open()
            XCTAssertEqual(s.version, 0, "a fresh group starts at version 0")
            XCTAssertEqual(try s.set("a", 1), 1)
            XCTAssertEqual(try s.set("b", "two"), 2)
            XCTAssertEqual(try s.set("a", ["x": [1, 2]]), 3)
            try s.commit()
            XCTAssertEqual(try s.remove("b").removed, true)
            XCTAssertEqual(s.version, 4)
            XCTAssertEqual(try s.remove("b").removed, false, "nothing to remove")
            XCTAssertEqual(s.version, 4, "a removal that removed nothing changes no version")
            XCTAssertFalse(try s.remove("nope").removed)
            try s.set("c", nil)  // a stored JSON null exists
            try s.commit()
            XCTAssertEqual(segmentFiles(), ["defaults-000001.log"])
        }
        let s = try open()
        XCTAssertEqual(s.version, 5)
        XCTAssertEqual(s.keys, ["a", "c"])
        XCTAssertEqual(s.value(forKey: "a"), ["x": [1, 2]])
        XCTAssertEqual(s.value(forKey: "c"), .null)
        XCTAssertNil(s.value(forKey: "b"))
        XCTAssertEqual(s.valuesObject(), ["a": ["x": [1, 2]], "c": nil])
        XCTAssertEqual(s.recovery.records, 5)
        XCTAssertEqual(try s.set("d", true), 6, "versions continue after the highest")
    }

    /// Keys that are only canonically equivalent ("é" precomposed, "e" + U+0301) are two keys, as
    /// in UserDefaults (NSString compares code units), through a restart and a compaction; so are
    /// such members of a stored object (Swift's String equality merged them: data loss).
    func testCanonicallyEquivalentKeysAreDistinct() throws {
        let nfc = "\u{E9}", nfd = "e\u{301}"
        do {
            let s = try open()
            try s.set(nfc, "nfc")
            try s.set(nfd, "nfd")
            try s.set("o", json(#"{"\u00e9": 1, "e\u0301": 2}"#))
            try s.commit()
            XCTAssertEqual(s.count, 3)
            XCTAssertEqual(s.value(forKey: nfc), "nfc")
            XCTAssertEqual(s.value(forKey: nfd), "nfd")
        }
        do {
            let s = try open()
            XCTAssertEqual(s.value(forKey: nfc), "nfc", "after replay")
            XCTAssertEqual(s.value(forKey: nfd), "nfd", "after replay")
            XCTAssertEqual(s.value(forKey: "o")?.objectValue?.count, 2)
            try s.compact()
        }
        let s = try open()
        XCTAssertEqual(s.value(forKey: nfc), "nfc", "after a compaction")
        XCTAssertEqual(s.value(forKey: nfd), "nfd", "after a compaction")
        XCTAssertEqual(s.value(forKey: "o")?.objectValue?[nfc], 1)
        XCTAssertEqual(s.value(forKey: "o")?.objectValue?[nfd], 2)
        XCTAssertEqual(try s.remove(nfc).removed, true)
        XCTAssertEqual(s.value(forKey: nfd), "nfd", "removing one leaves the other")
        XCTAssertEqual(s.keys.map { Array($0.utf8) }, [Array("e\u{301}".utf8), Array("o".utf8)])
    }

    func testValuesArePreservedExactly() throws {
        let texts = [
            "123456789012345678901234567890", "-0.0", "1.5e-7", "1E+400", "0.1000000000000000055511151231257827",
            #""héllo wörld ✓ 日本語 🎉 \u0000 \"quoted\" \\ \/ \n\t""#,
            #"{"nested":{"deep":[1,{"x":null},[true,false]],"big":98765432109876543210},"emoji":"👩‍👩‍👧"}"#,
            "[]", "{}", #""""#, "null", "false",
        ]
        do {
            let s = try open()
            for (i, t) in texts.enumerated() { try s.set("k\(i)", json(t)) }
            try s.commit()
            for (i, t) in texts.enumerated() { XCTAssertEqual(s.value(forKey: "k\(i)"), json(t)) }
        }
        let s = try open()
        for (i, t) in texts.enumerated() {
            XCTAssertEqual(s.value(forKey: "k\(i)"), json(t), t)
            XCTAssertEqual(s.value(forKey: "k\(i)")?.compactText, json(t).compactText, "number lexemes kept: \(t)")
        }
        XCTAssertEqual(s.value(forKey: "k0"), .number("123456789012345678901234567890"))
        XCTAssertEqual(s.value(forKey: "k2"), .number("1.5e-7"))
        // And after a snapshot compaction.
        try s.compact()
        let again = try open()
        for (i, t) in texts.enumerated() {
            XCTAssertEqual(again.value(forKey: "k\(i)")?.compactText, json(t).compactText)
        }
    }

    func testUncommittedChangesAreNotDurableAndRollbackRestoresMemory() throws {
        do {
            let s = try open()
            try s.set("a", 1)
            try s.commit()
            try s.set("a", 2)
            try s.set("b", 3)
            _ = try s.remove("a")
            XCTAssertEqual(s.version, 4)
            s.rollback()
            XCTAssertEqual(s.version, 1)
            XCTAssertEqual(s.value(forKey: "a"), 1)
            XCTAssertNil(s.value(forKey: "b"))
            XCTAssertFalse(s.hasPending)
            XCTAssertEqual(try s.set("z", 9), 2, "the rolled-back versions were never answered")
            // never committed
        }
        let s = try open()
        XCTAssertEqual(s.version, 1)
        XCTAssertEqual(s.valuesObject(), ["a": 1])
    }

    func testFailedCommitUndoesTheTurn() throws {
        let s = try open()
        try s.set("a", "kept")
        try s.commit()
        for point in [JournalFaultPoint.write, .sync] {
            s.journal.faultInjector = { p in p == point ? ENOSPC : nil }
            try s.set("a", "lost")
            try s.set("b", "lost")
            XCTAssertThrowsError(try s.commit()) { e in XCTAssertTrue((e as? StoreError)?.diskFull ?? false) }
            XCTAssertEqual(s.version, 1)
            XCTAssertEqual(s.valuesObject(), ["a": "kept"])
            s.journal.faultInjector = nil
        }
        // A full disk at reserve time refuses the change itself; nothing is appended.
        s.journal.faultInjector = { p in p == .reserve ? ENOSPC : nil }
        s.limits.maxValueBytes = 8 << 20
        XCTAssertThrowsError(try s.set("c", .string(String(repeating: "x", count: 4 << 20)))) { e in
            guard case DefaultsError.storage(let se)? = e as? DefaultsError else { return XCTFail("\(e)") }
            XCTAssertTrue(se.diskFull)
        }
        s.journal.faultInjector = nil
        XCTAssertEqual(s.version, 1)
        XCTAssertEqual(try s.set("c", 1), 2)
        try s.commit()
        let again = try open()
        XCTAssertEqual(again.valuesObject(), ["a": "kept", "c": 1])
        XCTAssertEqual(again.version, 2)
    }

    func testTornTailIsTruncatedAndEarlierWritesKept() throws {
        do {
            let s = try open()
            for i in 0..<10 { try s.set("k\(i)", .int(i)) }
            try s.commit()
        }
        let file = dir + "/" + segmentFiles().last!
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        // The records, without the zeros the journal writes ahead of them.
        while bytes.last == 0 { bytes.removeLast() }
        let full = bytes.count
        // A record cut short by a crash: header says 300 bytes, only a few follow.
        bytes.append(contentsOf: [0xA5, 0x53, 1, 0, 44, 1, 0, 0, 1, 2, 3, 4] + Array(#"{"key":"k10","va"#.utf8))
        try bytes.write(to: URL(fileURLWithPath: file))
        let s = try open()
        XCTAssertEqual(s.count, 10)
        XCTAssertEqual(s.version, 10)
        XCTAssertGreaterThan(s.recovery.truncatedBytes, 0)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)).count, full)
        XCTAssertEqual(try s.set("k10", 10), 11)
        try s.commit()
        XCTAssertEqual(try open().value(forKey: "k10"), 10)
    }

    func testCompareAndSet() throws {
        let s = try open()
        XCTAssertEqual(try s.set("a", 1, ifVersion: 0), 1)
        XCTAssertThrowsError(try s.set("a", 2, ifVersion: 0)) { e in
            XCTAssertEqual(e as? DefaultsError, .versionConflict(current: 1))
        }
        XCTAssertThrowsError(try s.remove("a", ifVersion: 5)) { e in
            XCTAssertEqual(e as? DefaultsError, .versionConflict(current: 1))
        }
        XCTAssertEqual(s.value(forKey: "a"), 1)
        XCTAssertEqual(try s.set("a", 2, ifVersion: 1), 2)
        XCTAssertEqual(try s.remove("a", ifVersion: 2).version, 3)
    }

    func testLimits() throws {
        var limits = DefaultsLimits()
        limits.maxValueBytes = 100
        limits.maxSuiteBytes = 250
        limits.maxKeyBytes = 8
        limits.maxValueDepth = 3
        let s = try open(limits)
        XCTAssertThrowsError(try s.set("a", .string(String(repeating: "x", count: 99)))) { e in
            XCTAssertEqual(e as? DefaultsError, .valueTooLarge(bytes: 101, limit: 100))
        }
        XCTAssertThrowsError(try s.set("", 1)) { e in XCTAssertEqual(e as? DefaultsError, .badKey(limit: 8)) }
        XCTAssertThrowsError(try s.set("123456789", 1)) { e in XCTAssertEqual(e as? DefaultsError, .badKey(limit: 8)) }
        XCTAssertThrowsError(try s.set("d", [[[[1]]]])) { e in
            XCTAssertEqual(e as? DefaultsError, .valueTooDeep(limit: 3))
        }
        try s.set("d", [[[1]]])
        let v90 = JSONValue.string(String(repeating: "y", count: 88))  // 90 bytes of JSON
        try s.set("a", v90)
        try s.set("b", v90)
        XCTAssertThrowsError(try s.set("c", v90)) { e in
            guard case .suiteFull(_, 250)? = e as? DefaultsError else { return XCTFail("\(e)") }
        }
        try s.set("b", 1)  // shrinking is fine
        try s.set("c", v90)
        XCTAssertEqual(s.version, 5)
    }

    func testSnapshotCompactionKeepsSuiteAndVersionAndDropsOldSegments() throws {
        var limits = DefaultsLimits()
        limits.compactMinBytes = 16 * 1024
        let payload = JSONValue.string(String(repeating: "v", count: 500))
        do {
            let s = try open(limits, segmentLimit: 8 * 1024)
            for round in 0..<200 {
                for k in 0..<5 { try s.set("k\(k)", .array([.int(round), payload])) }
                try s.commit()
            }
            _ = try s.remove("k4")
            try s.commit()
            XCTAssertGreaterThan(s.compactions, 0, "superseded values dominate: the journal was compacted")
            XCTAssertNil(s.lastCompactionError)
            XCTAssertEqual(s.version, 1001)
            XCTAssertLessThan(s.journalBytes, 4 * (limits.compactMinBytes + 5 * 600))
            XCTAssertLessThanOrEqual(segmentFiles().count, 5, "old segments deleted: \(segmentFiles())")
        }
        let s = try open(limits)
        XCTAssertEqual(s.version, 1001)
        XCTAssertEqual(s.keys, ["k0", "k1", "k2", "k3"])
        XCTAssertEqual(s.value(forKey: "k3"), .array([199, payload]))
    }

    func testCompactionFailingChangedReportsOnlyTransitions() throws {
        let s = try open()
        var reports: [Bool] = []
        s.compactionFailingChanged = { reports.append($0) }
        for i in 0..<10 { try s.set("k", .int(i)) }
        try s.commit()
        s.journal.faultInjector = { $0 == .sync ? EIO : nil }
        XCTAssertThrowsError(try s.compact())
        XCTAssertThrowsError(try s.compact())
        XCTAssertNotNil(s.lastCompactionError)
        XCTAssertEqual(reports, [true], "a second failure is no new transition")
        s.journal.faultInjector = nil
        try s.compact()
        try s.compact()
        XCTAssertNil(s.lastCompactionError)
        XCTAssertEqual(reports, [true, false])
    }

    func testVersionSurvivesCompactionOfAnEmptySuite() throws {
        do {
            let s = try open()
            for i in 0..<20 { try s.set("k", .int(i)) }
            _ = try s.remove("k")
            try s.commit()
            try s.compact()
            XCTAssertEqual(
                segmentFiles(), ["defaults-000002.log", "defaults-000003.log"], "the snapshot, then the active segment")
        }
        let s = try open()
        XCTAssertEqual(s.count, 0)
        XCTAssertEqual(s.version, 21, "the snapshot carries the version: it never goes back")
        XCTAssertEqual(try s.set("k", 1), 22)
    }

    func testInterruptedCompactionIsHarmless() throws {
        // A crash after the snapshot is durable but before the old segments are deleted: replay
        // reads the old records, then the snapshot replaces them.
        var oldSegment = Data()
        do {
            let s = try open()
            for i in 0..<10 { try s.set("k\(i % 3)", .int(i)) }
            try s.set("gone", 1)
            try s.commit()
            oldSegment = try Data(contentsOf: URL(fileURLWithPath: dir + "/defaults-000001.log"))
            _ = try s.remove("gone")
            try s.commit()
            try s.compact()
            try s.set("k0", "after")
            try s.commit()
        }
        try oldSegment.write(to: URL(fileURLWithPath: dir + "/defaults-000001.log"))
        let s = try open()
        XCTAssertEqual(s.valuesObject(), ["k0": "after", "k1": 7, "k2": 8])
        XCTAssertEqual(s.version, 13)

        // A snapshot damaged at its end (it is renamed into place only once durable, but a disk
        // may still lose its end) with the old segments still there: the torn snapshot is cut off
        // and the old segments stand.
        let before = Dictionary(
            uniqueKeysWithValues: try segmentFiles().map {
                ($0, try Data(contentsOf: URL(fileURLWithPath: dir + "/" + $0)))
            })
        try s.compact()
        let snapshotFile = dir + "/" + segmentFiles().dropLast().last!  // (the last is the active one)
        XCTAssertNil(before[(snapshotFile as NSString).lastPathComponent])
        var snap = try Data(contentsOf: URL(fileURLWithPath: snapshotFile))
        while snap.last == 0 { snap.removeLast() }  // the zeros written ahead of the records
        try snap.prefix(snap.count - 5).write(to: URL(fileURLWithPath: snapshotFile))
        for (name, data) in before { try data.write(to: URL(fileURLWithPath: dir + "/" + name)) }
        let torn = try open()
        XCTAssertGreaterThan(torn.recovery.truncatedBytes, 0)
        XCTAssertEqual(torn.valuesObject(), ["k0": "after", "k1": 7, "k2": 8])
        XCTAssertEqual(torn.version, 13)
    }

    func testLargeSuiteListsInLinearTime() throws {
        let s = try open()
        for i in 0..<20000 { try s.set("key-\(i)", .int(i)) }
        try s.commit()
        let start = Date()
        let all = s.valuesObject()
        XCTAssertEqual(all.count, 20000)
        XCTAssertEqual(all["key-19999"], 19999)
        XCTAssertLessThan(Date().timeIntervalSince(start), 5)
        let again = try open()
        XCTAssertEqual(again.count, 20000)
        XCTAssertEqual(again.version, 20000)
    }
}

/// Holds a snapshot compaction's worker at one step until released, fails steps on demand, and
/// notes on which threads the steps ran.
final class SnapshotGate: @unchecked Sendable {  // guarded by `lock`
    let lock = NSLock()
    var holdAt: JournalFaultPoint? = nil
    var failures: [JournalFaultPoint: Int32] = [:]
    var threads: [pthread_t] = []
    let reached = DispatchSemaphore(value: 0)
    let released = DispatchSemaphore(value: 0)

    var injector: @Sendable (JournalFaultPoint) -> Int32? {
        { [self] p in
            guard [.snapshotWrite, .snapshotSync, .snapshotRename, .snapshotDirectorySync].contains(p) else { return nil }
            lock.lock()
            threads.append(pthread_self())
            let hold = holdAt == p
            if hold { holdAt = nil }
            lock.unlock()
            if hold {
                reached.signal()
                _ = released.wait(timeout: .now() + 20)
            }
            lock.lock()
            defer { lock.unlock() }
            return failures[p]
        }
    }

    func set(hold: JournalFaultPoint?, fail: [JournalFaultPoint: Int32] = [:]) {
        lock.lock()
        holdAt = hold
        failures = fail
        lock.unlock()
    }

    /// True when some step ran on `thread`.
    func ran(on thread: pthread_t) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return threads.contains { pthread_equal($0, thread) != 0 }
    }
}

/// A store's background runner for tests: the work runs on a thread of its own; its outcome is
/// handed back when the test (playing the loop) calls `finishAll`.
final class ThreadRunner {
    var done: [() -> Void] = []
    let finished = DispatchSemaphore(value: 0)
    var started = 0

    func run(_ work: @escaping @Sendable () -> Void, _ done: @escaping () -> Void) -> Bool {
        started += 1
        self.done.append(done)
        let finished = self.finished
        Thread.detachNewThread {
            work()
            finished.signal()
        }
        return true
    }

    /// Waits for the work handed over (at most 20 s each) and takes its outcome on this thread.
    func finishAll(file: StaticString = #filePath, line: UInt = #line) {
        for d in done {
            XCTAssertEqual(finished.wait(timeout: .now() + 20), .success, "the snapshot's work ended", file: file, line: line)
            d()
        }
        done.removeAll()
    }
}

/// Snapshot compaction off the loop: the calling thread goes on while the snapshot is written,
/// every step's failure leaves the suite intact (and is retried), and a crash at any step replays
/// to the suite as acknowledged, sets made meanwhile included.
final class DefaultsCompactionTests: XCTestCase {
    var root = ""
    var dir: String { root + "/groups/group.com.example" }
    var limits = DefaultsLimits()
    var acknowledged: [String: JSONValue] = [:]
    var acknowledgedVersion: UInt64 = 0
    let gate = SnapshotGate()
    let runner = ThreadRunner()

    override func setUp() {
        root = NSTemporaryDirectory() + "sbcompact-\(UUID().uuidString.prefix(8))"
        limits.compactMinBytes = 16 * 1024
        acknowledged = [:]
        acknowledgedVersion = 0
    }

    override func tearDown() {
        gate.released.signal()
        try? FileManager.default.removeItem(atPath: root)
    }

    func open(_ directory: String? = nil) throws -> DefaultsStore {
        let s = try DefaultsStore(
            directory: directory ?? dir, group: "group.com.example", limits: limits, segmentLimit: 64 * 1024)
        s.journal.faultInjector = gate.injector
        s.backgroundRunner = { [runner] work, done in runner.run(work, done) }
        return s
    }

    func files(_ directory: String? = nil) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory ?? dir)) ?? []).sorted()
    }

    /// Sets `key`, commits, and notes the result as acknowledged.
    func put(_ s: DefaultsStore, _ key: String, _ value: JSONValue, file: StaticString = #filePath, line: UInt = #line) throws {
        try s.set(key, value)
        try s.commit()
        acknowledged[key] = value
        acknowledgedVersion = s.version
    }

    /// Rewrites a few keys until a compaction starts (its work handed to the runner).
    func writeUntilCompactionStarts(_ s: DefaultsStore, round: inout Int) throws {
        let before = runner.started
        while runner.started == before && round < 2000 {
            try put(s, "k\(round % 4)", .array([.int(round), .string(String(repeating: "v", count: 2000))]))
            round += 1
        }
        XCTAssertGreaterThan(runner.started, before, "a compaction started")
    }

    func assertAcknowledged(_ s: DefaultsStore, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(s.valuesObject(), JSONObject(acknowledged.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }), what, file: file, line: line)
        XCTAssertEqual(s.version, acknowledgedVersion, what, file: file, line: line)
    }

    func testTheStoreGoesOnWhileTheSnapshotIsWrittenAndEverySetSurvives() throws {
        var round = 0
        do {
            let s = try open()
            gate.set(hold: .snapshotWrite)
            try writeUntilCompactionStarts(s, round: &round)
            XCTAssertEqual(gate.reached.wait(timeout: .now() + 20), .success, "the snapshot is being written")
            XCTAssertTrue(s.compactionRunning)
            // The worker is held: this thread (the loop) still takes and commits sets.
            for i in 0..<20 { try put(s, "during\(i % 3)", .int(i)) }
            _ = try s.remove("k3")
            try s.commit()
            acknowledged["k3"] = nil
            acknowledgedVersion = s.version
            XCTAssertEqual(s.compactions, 0)
            gate.released.signal()
            runner.finishAll()
            XCTAssertFalse(gate.ran(on: pthread_self()), "no step of the snapshot ran on the store's thread")
            XCTAssertEqual(s.compactions, 1)
            XCTAssertNil(s.lastCompactionError)
            assertAcknowledged(s, "in memory")
            XCTAssertFalse(files().contains { $0.hasSuffix(".tmp") })
            XCTAssertLessThanOrEqual(files().filter { $0.hasSuffix(".log") }.count, 3, "old segments deleted: \(files())")
            try put(s, "after", "yes")
        }
        let s = try open()
        assertAcknowledged(s, "after a restart")
        XCTAssertLessThan(s.journalBytes, 2 * 4 * 2100 + 20 * 64, "the journal holds the snapshot and what followed it")
    }

    func testACompactionFailingAtEachStepLosesNothingAndIsTriedAgain() throws {
        for point in [JournalFaultPoint.snapshotWrite, .snapshotSync, .snapshotRename, .snapshotDirectorySync] {
            setUp()
            var round = 0
            do {
                let s = try open()
                gate.set(hold: point, fail: [point: EIO])
                try writeUntilCompactionStarts(s, round: &round)
                XCTAssertEqual(gate.reached.wait(timeout: .now() + 20), .success, "\(point)")
                for i in 0..<5 { try put(s, "during\(i)", .int(i)) }  // while it runs, then fails
                gate.released.signal()
                runner.finishAll()
                XCTAssertEqual(s.compactions, 0, "\(point)")
                XCTAssertNotNil(s.lastCompactionError, "\(point)")
                assertAcknowledged(s, "\(point): in memory")
                XCTAssertFalse(files().contains { $0.hasSuffix(".tmp") }, "\(point): \(files())")
                let reopened = try DefaultsStore(directory: dir, group: "group.com.example", limits: limits)
                assertAcknowledged(reopened, "\(point): replayed after the failure")
                // Tried again later, once the disk works again.
                gate.set(hold: nil)
                try writeUntilCompactionStarts(s, round: &round)
                runner.finishAll()
                XCTAssertEqual(s.compactions, 1, "\(point): the retry succeeded")
                XCTAssertNil(s.lastCompactionError, "\(point)")
                try put(s, "end", .int(round))
            }
            let s = try open()
            assertAcknowledged(s, "\(point): after a restart")
            tearDown()
        }
    }

    func testACrashAtAnyStepOfTheSnapshotReplaysTheAcknowledgedSuite() throws {
        var round = 0
        let s = try open()
        for point in [JournalFaultPoint.snapshotWrite, .snapshotSync, .snapshotRename, .snapshotDirectorySync] {
            gate.set(hold: point)
            try writeUntilCompactionStarts(s, round: &round)
            XCTAssertEqual(gate.reached.wait(timeout: .now() + 20), .success, "\(point)")
            for i in 0..<5 { try put(s, "during\(i)", .string("\(point) \(i)")) }
            // The directory as the crash left it, opened by a new store.
            let copy = root + "/crash-\(point)"
            try FileManager.default.copyItem(atPath: dir, toPath: copy)
            let hadTemp = files(copy).contains { $0.hasSuffix(".tmp") }
            XCTAssertEqual(hadTemp, point != .snapshotDirectorySync, "\(point): \(files(copy))")
            let crashed = try DefaultsStore(directory: copy, group: "group.com.example", limits: limits)
            assertAcknowledged(crashed, "\(point): replayed")
            XCTAssertFalse(files(copy).contains { $0.hasSuffix(".tmp") }, "\(point): the temporary file is removed")
            XCTAssertEqual(try crashed.set("new", 1), acknowledgedVersion + 1)
            try crashed.commit()
            // Without the temporary file (segment S absent: a crash before it was created).
            let bare = root + "/bare-\(point)"
            try FileManager.default.copyItem(atPath: dir, toPath: bare)
            for f in files(bare) where f.hasSuffix(".tmp") { try FileManager.default.removeItem(atPath: bare + "/" + f) }
            assertAcknowledged(try DefaultsStore(directory: bare, group: "group.com.example", limits: limits), "\(point): no S")
            if point == .snapshotDirectorySync {
                // S in place, the old segments all there, or only some of them (deleted oldest first).
                let logs = files(bare).filter { $0.hasSuffix(".log") }
                XCTAssertGreaterThanOrEqual(logs.count, 3, "old segments, the snapshot, the active one: \(logs)")
                try FileManager.default.removeItem(atPath: bare + "/" + logs[0])
                assertAcknowledged(try DefaultsStore(directory: bare, group: "group.com.example", limits: limits), "some old segments deleted")
            }
            gate.released.signal()
            runner.finishAll()
            XCTAssertNil(s.lastCompactionError, "\(point)")
        }
        XCTAssertEqual(s.compactions, 4)
        assertAcknowledged(try open(), "after the last compaction")
    }
}
