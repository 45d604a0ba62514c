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
            XCTAssertEqual(segmentFiles(), ["defaults-000002.log"])
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

        // A crash while the snapshot was being written: the torn snapshot is cut off and the old
        // segments, still there, stand.
        let before = Dictionary(
            uniqueKeysWithValues: try segmentFiles().map {
                ($0, try Data(contentsOf: URL(fileURLWithPath: dir + "/" + $0)))
            })
        try s.compact()
        let snapshotFile = dir + "/" + segmentFiles().last!
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
