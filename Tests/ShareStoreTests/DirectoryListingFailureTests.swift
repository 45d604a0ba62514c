// A directory listing whose `readdir` fails partway (an I/O error on a damaged or network file
// system) is a failure, never a shorter list: a journal opened from a partial list would miss
// segments and their records.

import Foundation
import XCTest

@testable import ShareStore
@testable import ShareSystem

#if canImport(Glibc)
    import Glibc
#endif

final class DirectoryListingFailureTests: XCTestCase {
    var dir: String = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "sblist-\(UUID().uuidString.prefix(8))"
        XCTAssertNoThrow(try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true))
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    /// A stand-in for `readdir` that reads `good` entries, then fails with `error`.
    final class FailingReader {
        let good: Int
        let error: Int32
        var calls = 0
        init(after good: Int, error: Int32 = EIO) {
            self.good = good
            self.error = error
        }
        func read(_ d: FileIO.DirectoryStream) -> UnsafeMutablePointer<dirent>? {
            calls += 1
            if calls > good {
                errno = error
                return nil
            }
            return readdir(d)
        }
    }

    /// `FileIO.listDirectory` of `path` through a `FailingReader`: what it returned, `errno` then,
    /// and how many entries were asked for.
    func list(_ path: String, failingAfter good: Int) -> (names: [String]?, errno: Int32, calls: Int) {
        let reader = FailingReader(after: good)
        let names = FileIO.listDirectory(path, readEntry: reader.read)
        return (names, errno, reader.calls)
    }

    func testAReaddirFailingPartwayListsNothingAndLeavesItsErrno() throws {
        for i in 0..<6 { XCTAssertTrue(FileManager.default.createFile(atPath: "\(dir)/f\(i)", contents: Data([UInt8(i)]))) }
        let all = try XCTUnwrap(FileIO.listDirectory(dir))
        XCTAssertEqual(all, (0..<6).map { "f\($0)" })
        // (the stand-in reads through the real readdir until it fails: the whole list when it never does)
        XCTAssertEqual(list(dir, failingAfter: .max).names, all)
        for good in [0, 1, 3, 5] {
            let r = list(dir, failingAfter: good)
            XCTAssertNil(r.names, "after \(good) entries read: a partial list returned as the whole")
            XCTAssertEqual(r.errno, EIO, "after \(good) entries read: the caller is told why")
            XCTAssertEqual(r.calls, good + 1, "not read on after the failure")
        }
        // Nothing in the directory was touched.
        XCTAssertEqual(FileIO.listDirectory(dir), all)
    }

    /// A journal whose directory cannot be listed whole is not opened (a clear error naming the
    /// directory), rather than opened with the segments listed before the failure (the records of
    /// the others would be missing). Nothing is removed or changed (not even the leftover snapshot
    /// it would otherwise clear): opened again once the listing works, every record is there.
    func testAJournalWhoseDirectoryListingFailsPartwayIsNotOpened() throws {
        let records = 4
        do {
            let j = try Journal(directory: dir, name: "t")
            j.segmentLimit = 1  // (a segment per commit)
            _ = try j.replay { _ in }
            for i in 0..<records {
                try j.append(type: 1) { $0.append(UInt8(i)) }
                try j.commit()
            }
        }
        let leftover = dir + "/t-999999.log" + Journal.tempSuffix
        XCTAssertTrue(FileManager.default.createFile(atPath: leftover, contents: Data([1, 2, 3])))
        let before = try XCTUnwrap(FileIO.listDirectory(dir))
        XCTAssertGreaterThanOrEqual(before.filter { $0.hasSuffix(".log") }.count, records, "\(before)")
        let bytesBefore = try before.map { try FileIO.readFile(dir + "/" + $0) }

        func contents() throws -> [[UInt8]]? { try FileIO.listDirectory(dir).map { try $0.map { try FileIO.readFile(dir + "/" + $0) } } }
        for good in [0, 1, 2 + records / 2] {
            let opened = { try Journal(directory: self.dir, name: "t") { self.list($0, failingAfter: good).names } }
            XCTAssertThrowsError(try opened(), "after \(good) entries") { e in
                XCTAssertEqual((e as? StoreError)?.message, "cannot read the directory \(dir)", "\(e)")
            }
            XCTAssertEqual(try contents(), bytesBefore, "nothing was changed")
        }

        // Listed whole: every record is there.
        let j = try Journal(directory: dir, name: "t")
        var payloads: [[UInt8]] = []
        _ = try j.replay { payloads.append(Array($0.payload)) }
        XCTAssertEqual(payloads, (0..<records).map { [UInt8($0)] })
        XCTAssertFalse(FileManager.default.fileExists(atPath: leftover), "the leftover snapshot is cleared once read whole")
    }
}
