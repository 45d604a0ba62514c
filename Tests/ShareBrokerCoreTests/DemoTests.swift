// `sharebroker demo`, end to end: the built executable starts its own broker, launches itself as the
// demo's app, and must report every step of the seed flows, exit 0 and leave nothing behind.

import Foundation
import ShareClient
import XCTest

final class DemoTests: XCTestCase {
    /// The temporary directory the demo named in its output ("... removing /tmp/sbdemo-XXXXXX").
    private func demoDirectory(in out: String) -> String? {
        guard let r = out.range(of: "/sbdemo-") else { return nil }
        let suffix = out[r.upperBound...].prefix { $0.isLetter || $0.isNumber }
        let start = out[..<r.lowerBound].lastIndex { $0 == " " || $0 == "\n" }.map { out.index(after: $0) } ?? out.startIndex
        return suffix.isEmpty ? nil : out[start..<r.lowerBound] + "/sbdemo-" + suffix
    }

    /// Whether a process that is not our child has exited: gone, or a zombie its new parent has not reaped yet.
    private static func exited(_ pid: Int32) -> Bool {
        if kill(pid, 0) != 0 { return true }
        #if os(Linux)
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            {
                return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
            }
        #endif
        return false
    }

    func testDemoPlaysEveryStepAndCleansUp() throws {
        let r = try runProcess(Products.sharebroker, ["demo"], timeout: 60)
        XCTAssertEqual(r.status, 0, "sharebroker demo failed:\n\(r.out)\n\(r.err)")
        let steps = [
            "✓ share sent", "✓ app launched", "✓ event received", "✓ share completed", "✓ universal link",
            "✓ defaults changed",
        ]
        for step in steps {
            XCTAssertTrue(r.out.contains(step), "the demo's output does not mention '\(step)':\n\(r.out)")
        }
        // What crosses the socket is shown, requests and answers/notifications.
        for wire in [
            "[extension] → share.send {\"items\":[{\"url\":\"https://youtu.be/dQw4w9WgXcQ\"}],\"open\":true}",
            "[app] → app.subscribe {}", "[app] ← app.event {\"id\":", "[app] → share.get",
            "[app] ← {\"completed\":true}",
            "[app] → app.ack", "\"kind\":\"continueUserActivity\"", "[widget] ← defaults.changed {",
        ] {
            XCTAssertTrue(r.out.contains(wire), "the demo's output does not show '\(wire)':\n\(r.out)")
        }
        XCTAssertTrue(r.out.contains("demo passed in"), r.out)
        XCTAssertFalse(r.out.contains("FAILED"), r.out)
        // The private broker is stopped and its temporary directory removed.
        let dir = try XCTUnwrap(demoDirectory(in: r.out), "the demo did not name its directory:\n\(r.out)")
        XCTAssertTrue(r.out.contains("removing \(dir)"), r.out)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir), "\(dir) was not removed")
    }

    func testDemoWithStateKeepsTheStateDirectory() throws {
        let tmp = TempDir()
        let state = tmp.path + "/state"
        let r = try runProcess(Products.sharebroker, ["demo", "--state", state], timeout: 60)
        XCTAssertEqual(r.status, 0, "sharebroker demo --state failed:\n\(r.out)\n\(r.err)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: state + "/apps/demo-000-myapp.json"))
        // Private, as the broker's own: directories 0700, manifests 0600.
        for (path, mode) in [(state, 0o700), (state + "/apps", 0o700), (state + "/associations", 0o700), (state + "/apps/demo-000-myapp.json", 0o600)] {
            var st = stat()
            XCTAssertEqual(stat(path, &st), 0, path)
            XCTAssertEqual(Int(st.st_mode & 0o777), mode, "\(path): mode \(String(st.st_mode & 0o777, radix: 8))")
        }
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: state + "/associations/rw-universal-links-final.herokuapp.com.json"))
        let appLog = (try? String(contentsOfFile: state + "/logs/com.mycompany.myapp.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(appLog.contains("[app] launched by the broker"), appLog)
        XCTAssertTrue(appLog.contains("[app] done"), appLog)

        // A second run on the same (demo) state directory works too: versions and ids just go on.
        let again = try runProcess(Products.sharebroker, ["demo", "--state", state], timeout: 60)
        XCTAssertEqual(again.status, 0, "second run failed:\n\(again.out)\n\(again.err)")
        XCTAssertTrue(again.out.contains("✓ defaults changed: the widget saw watchlist at version 2"), again.out)
    }

    func testDemoRefusesAStateDirectoryThatIsNotADemos() throws {
        let tmp = TempDir()
        tmp.write("state/apps/myapp.json", "{}")
        let r = try runProcess(Products.sharebroker, ["demo", "--state", tmp.path + "/state"], timeout: 30)
        XCTAssertEqual(r.status, 64, r.out + r.err)
        XCTAssertTrue(r.err.contains("not a previous demo's state directory"), r.err)
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: tmp.path + "/state/apps/myapp.json"), "the directory was touched")
    }

    func testKeepLeavesTheBrokerRunning() throws {
        let tmp = TempDir()  // ($TMPDIR is where the demo's directory goes)
        var env = ProcessInfo.processInfo.environment
        env["TMPDIR"] = tmp.path
        let r = try runProcess(Products.sharebroker, ["demo", "--keep"], env: env, timeout: 60)
        XCTAssertEqual(r.status, 0, "sharebroker demo --keep failed:\n\(r.out)\n\(r.err)")
        let dir = try XCTUnwrap(demoDirectory(in: r.out), r.out)
        XCTAssertTrue(dir.hasPrefix(tmp.path + "/sbdemo-"), dir)
        // "Stop it with: kill PID; then: rm -rf DIR"
        let pidText = try XCTUnwrap(
            r.out.components(separatedBy: "Stop it with: kill ").dropFirst().first?.prefix { $0.isNumber })
        let pid = try XCTUnwrap(Int32(pidText), r.out)
        defer {
            kill(pid, SIGTERM)
            XCTAssertTrue(
                waitUntil(timeout: 6) { Self.exited(pid) }, "the kept broker (pid \(pid)) did not stop on SIGTERM")
            try? FileManager.default.removeItem(atPath: dir)
        }
        XCTAssertTrue(r.out.contains("export SHAREBROKER_SOCKET=\(dir)/s.sock"), r.out)
        do {  // the broker answers, with the demo's apps (the connection is closed before the broker is stopped)
            let conn = try BrokerConnection(socketPath: dir + "/s.sock")
            try conn.hello(role: "tool")
            let apps = try conn.call("apps.list")
            let bundles = (apps["apps"]?.arrayValue ?? []).compactMap { $0["bundleID"]?.stringValue }
            XCTAssertTrue(bundles.contains("com.mycompany.myapp"), "\(bundles)")
        }
    }

    func testPlayAppOutsideTheDemoIsAUsageError() throws {
        var env = ProcessInfo.processInfo.environment
        env["SHAREBROKER_BUNDLE_ID"] = nil
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Products.sharebroker)
        p.arguments = ["demo", "--play-app"]
        p.environment = env
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 64, text)
        XCTAssertTrue(text.contains("SHAREBROKER_BUNDLE_ID"), text)
    }
}
