// The directories a journal is created in are made durable (their parents fsync'd) before its
// first record: a power cut must not take `STATE/queues` or `STATE/groups/GROUP` with the
// records in them (scripts/fault-injection --power-cut finds that; here, the building blocks).

import Foundation
import ShareStore
import ShareSystem
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

final class DirectoryDurabilityTests: XCTestCase {
    var dir: String = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "sbdirs-\(UUID().uuidString.prefix(8))"
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func testMakeDirectoriesReturnsWhatItCreatedOutermostFirst() throws {
        XCTAssertEqual(try DefaultPaths.makeDirectories(dir + "/groups/g"), [dir, dir + "/groups", dir + "/groups/g"])
        XCTAssertEqual(try DefaultPaths.makeDirectories(dir + "/groups/g"), [])
        XCTAssertEqual(try DefaultPaths.makeDirectories(dir + "/groups/h/files"), [dir + "/groups/h", dir + "/groups/h/files"])
    }

    func testSyncParentsSyncsEachParentAndNamesTheOneThatFails() throws {
        try DefaultPaths.makeDirectories(dir + "/a/b")
        XCTAssertNil(DefaultPaths.syncParents(of: [dir + "/a", dir + "/a/b"]))
        let failed = DefaultPaths.syncParents(of: [dir + "/gone/x"])
        XCTAssertEqual(failed?.path, dir + "/gone")
        XCTAssertEqual(failed?.errno, ENOENT)
        XCTAssertEqual(DefaultPaths.parent(of: "/x"), "/")
        XCTAssertEqual(DefaultPaths.parent(of: "x"), ".")
    }

    func testStoresOpenInNewNestedDirectories() throws {
        let events = try EventStore(directory: dir + "/queues")
        _ = try events.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "a://1"])
        try events.commit()
        let shares = try ShareRecordStore(group: "g", directory: dir + "/groups/g", turn: nil)
        XCTAssertEqual(shares.count, 0)
        XCTAssertTrue(FileIO.isPlainDirectory(dir + "/groups/g/files"))
        let defaults = try DefaultsStore(directory: dir + "/groups/h", group: "h")
        XCTAssertEqual(defaults.count, 0)
        XCTAssertEqual(try EventStore(directory: dir + "/queues").pending(for: "com.a").map(\.id), ["ev-1"])
    }
}
