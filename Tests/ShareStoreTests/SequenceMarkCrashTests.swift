// A kill -9 between a new event segment's creation (open O_CREAT, directory fsync) and the commit
// of its first record (the sequence mark) leaves an empty segment. Reopened, it is the active
// segment without a mark: once the older segments are all acked and deleted, nothing on disk
// says which ids were used, and the next start hands them out again.

import Foundation
import ShareProtocol
@testable import ShareStore
import XCTest

final class SequenceMarkCrashTests: XCTestCase {
    var dir: String = ""
    override func setUp() { dir = NSTemporaryDirectory() + "sbmark-\(UUID().uuidString.prefix(8))" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func testAnEmptyActiveSegmentLeftByACrashDoesNotLetIdsBeReused() throws {
        var issued: [String] = []
        do {
            let s = try EventStore(directory: dir, segmentLimit: 4096)
            for _ in 0..<5 { issued.append(try s.enqueue(app: "com.a", fields: ["kind": "openURL", "url": "a://x"]).id) }
            try s.commit()
        }
        // The crash's leftover: the next segment's file, created, its mark never written.
        XCTAssertTrue(FileManager.default.createFile(atPath: dir + "/events-000002.log", contents: Data()))
        do {
            let s = try EventStore(directory: dir, segmentLimit: 4096)
            XCTAssertEqual(s.nextSequence, 6)
            XCTAssertEqual(try s.ack(app: "com.a", ids: issued).count, issued.count)
            try s.commit()  // (segment 1 is sealed and dead: compaction deletes it)
        }
        let reopened = try EventStore(directory: dir, segmentLimit: 4096)
        XCTAssertGreaterThanOrEqual(reopened.nextSequence, 6, "ids continue after the highest ever used")
        let next = try reopened.enqueue(app: "com.a", fields: ["kind": "openURL"]).id
        XCTAssertFalse(issued.contains(next), "\(next) was issued before")
    }
}
