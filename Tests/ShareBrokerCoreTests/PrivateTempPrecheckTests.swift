// Review (928569a): the pre-checks of prepareStateDirectory skip the socket's directory when it is
// the private one under $TMPDIR (DefaultPaths.privateTempDirectory), "its own check, below, says
// more". But that check comes after the state directory and the private directory are made: a
// $TMPDIR that other users may write (not sticky) has the broker refuse to start after creating
// both, what 928569a set out to prevent.

import Foundation
import XCTest

@testable import ShareBrokerCore

final class PrivateTempPrecheckTests: XCTestCase {
    func testAPrivateTempDirectoryUnderAnOpenTMPDIRIsRefusedBeforeAnythingIsMade() throws {
        let dir = TempDir()
        let open = dir.path + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true)
        chmod(open, 0o777)
        let before = getenv("TMPDIR").map { String(cString: $0) }
        setenv("TMPDIR", open, 1)
        defer {
            if let before { setenv("TMPDIR", before, 1) } else { unsetenv("TMPDIR") }
        }
        let privateDir = open + "/sharebroker-\(getuid())"
        var config = BrokerConfiguration(socketPath: privateDir + "/s.sock", stateDirectory: dir.path + "/state")
        config.handleSignals = false
        config.logLevel = .error
        XCTAssertThrowsError(try Broker(config: config)) { e in
            XCTAssertTrue("\(e)".contains("is writable by group or others (mode 777)"), "\(e)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: privateDir), "nothing created for a broker that refuses to start")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/state"), "nothing created for a broker that refuses to start")
    }
}
