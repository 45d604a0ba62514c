// TimestampClock: ISO 8601 UTC with milliseconds, the wall clock's, and one string per millisecond.

import Foundation
import XCTest

@testable import ShareBrokerCore

final class TimestampClockTests: XCTestCase {
    func testStampsAreTheWallClockToTheMillisecondAndNeverGoBack() throws {
        var clock = TimestampClock()
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var previous = ""
        var distinct = 0
        let start = Date()
        // Long enough to cross millisecond (and usually second) boundaries.
        while Date().timeIntervalSince(start) < 1.2 {
            let stamp = clock.now()
            XCTAssertEqual(stamp.utf8.count, 24, stamp)
            XCTAssertTrue(stamp.hasSuffix("Z"), stamp)
            let parsed = try XCTUnwrap(formatter.date(from: stamp), stamp)
            XCTAssertLessThan(abs(parsed.timeIntervalSinceNow), 0.5, stamp)
            XCTAssertGreaterThanOrEqual(stamp, previous)  // same-width ISO text orders as time does
            if stamp != previous { distinct += 1 }
            previous = stamp
        }
        XCTAssertGreaterThan(distinct, 100, "a new string for every new millisecond")
    }
}
