// A launch on demand is started off the event loop, on threads of its own: looking its user up
// may wait for a directory service, and a launch as another user waits for its child's exec.
// What happens meanwhile (events arriving, the app subscribing or leaving, a reload changing or
// removing the launch, file work holding every file thread) must neither start it twice, nor
// leave a retry the loop keeps waking up for, nor run a launch the manifests no longer name.
// `launchGate` (before the start) and `launchSpawnedGate` (after the spawn) hold it back.

import Foundation
@testable import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

/// CPU seconds this process used over `seconds` of wall time (a loop that spins uses about one
/// a second; an idle broker next to none).
private func cpuSecondsUsed(over seconds: Double) -> Double {
    func now() -> Double {
        var u = rusage()
        #if os(Linux)
            getrusage(Int32(RUSAGE_SELF.rawValue), &u)
        #else
            getrusage(RUSAGE_SELF, &u)
        #endif
        return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6 + Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
    }
    let before = now()
    Thread.sleep(forTimeInterval: seconds)
    return now() - before
}

final class LaunchOffLoopTests: XCTestCase {
    let bundle = "com.mycompany.myapp"

    func manifest(_ launch: [String]?) -> String {
        var o: JSONObject = ["bundleID": .string(bundle), "urlSchemes": ["deeplinkmyapp"]]
        if let launch { o["launch"] = .array(launch.map { .string($0) }) }
        return JSONValue.object(o).compactText
    }

    func launchStatus(_ tool: BrokerConnection) throws -> JSONValue? {
        try tool.call("broker.status")["launches"]?[bundle]
    }

    /// While a launch is held back, the broker answers everyone, counts the app as starting
    /// (running), and does not start it a second time for the events that arrive meanwhile;
    /// once it goes on, the app runs and gets them all.
    func testALaunchBeingStartedHoldsNoOneUpAndIsNotStartedTwice() throws {
        let dir = TempDir()
        let marks = dir.path + "/launched.txt"
        let script = """
            echo launched >> \(marks)
            exec "\(Products.shareclient)" listen --ack --count 2 --timeout 20
            """
        let gate = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/bin/sh", "-c", script])])
        try h.start { $0.launchGate = gate.gate }
        defer { h.stop() }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://first"])["queued"], true)
        gate.waitForWork("the launch")
        // Held: the loop goes on, the launch counts as running, and is not started again.
        XCTAssertEqual(try launchStatus(tool)?["running"], true)
        XCTAssertEqual(try launchStatus(tool)?["launches"]?.intValue, 1)
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://second"])["queued"], true)
        XCTAssertEqual(gate.entered.wait(timeout: .now() + 0.3), .timedOut, "a second launch was started")
        XCTAssertFalse(FileManager.default.fileExists(atPath: marks), "the launch ran before its start was let go")
        gate.release()
        XCTAssertTrue(
            waitUntil(timeout: 20) { (try? tool.call("broker.status"))?["pendingEvents"]?.intValue == 0 },
            "the launched app got both events")
        XCTAssertEqual(try String(contentsOfFile: marks, encoding: .utf8), "launched\n", "launched once")
        XCTAssertEqual(try launchStatus(tool)?["launches"]?.intValue, 1)
    }

    /// A reload takes the launch away while a (broken) one is being started: its failure
    /// schedules no retry (the review: one was left due for an app with no launch, and the loop
    /// woke up for it without end).
    func testAReloadTakingTheLaunchAwayWhileItStartsLeavesNoRetry() throws {
        let gate = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/nonexistent/prog"])])
        try h.start {
            $0.launchGate = gate.gate
            $0.launchRetryBase = 0.05
        }
        defer { h.stop() }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://first"])["queued"], true)
        gate.waitForWork("the launch")
        h.dir.write("state/apps/10-myapp.json", manifest(nil))
        _ = try tool.call("apps.reload")
        gate.release()
        XCTAssertTrue(waitUntil(timeout: 5) { (try? self.launchStatus(tool))??["running"] == false })
        XCTAssertEqual(try launchStatus(tool)?["retryScheduled"], false)
        XCTAssertEqual(try launchStatus(tool)?["failures"]?.intValue, 0, "a start a reload called off is no failure")
        let cpu = cpuSecondsUsed(over: 1.5)
        XCTAssertLessThan(cpu, 0.6, "the loop keeps waking up")
    }

    /// A subscriber (not the launched process) comes and goes while a launch is being started:
    /// no retry is scheduled beside the launch under way (the review: one was, and the loop
    /// woke up for it until the launched process ended).
    func testASubscriberLeavingWhileALaunchStartsSchedulesNoRetry() throws {
        let gate = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/bin/sleep", "30"])])
        try h.start {
            $0.launchGate = gate.gate
            $0.launchRetryBase = 0.05
        }
        defer { h.stop() }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://first"])["queued"], true)
        gate.waitForWork("the launch")
        for _ in 0..<2 {
            try {  // (closed when it goes out of scope)
                let a = try h.connect()
                _ = try a.hello(role: "app", bundleID: bundle)
                _ = try a.call("app.subscribe")
            }()
            XCTAssertTrue(waitUntil(timeout: 5) { (try? tool.call("broker.status"))?["subscribers"]?.intValue == 0 })
        }
        XCTAssertEqual(try launchStatus(tool)?["retryScheduled"], false)
        gate.release()
        Thread.sleep(forTimeInterval: 0.3)  // (the start recorded)
        XCTAssertEqual(try launchStatus(tool)?["running"], true)
        XCTAssertEqual(try launchStatus(tool)?["retryScheduled"], false)
        XCTAssertLessThan(cpuSecondsUsed(over: 1.5), 0.6, "the loop keeps waking up")
    }

    /// Eight shares whose file work hangs (a hung network file system) hold every file thread:
    /// a launch does not wait behind them (it has threads of its own).
    func testHungFileWorkDoesNotHoldALaunchBack() throws {
        let dir = TempDir()
        let marks = dir.path + "/launched.txt"
        let launched = JSONValue.object([
            "bundleID": "com.mycompany.launched", "urlSchemes": ["launchedapp"],
            "launch": ["/bin/sh", "-c", .string("echo launched >> \(marks); sleep 30")],
        ])
        let gate = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": pdfApp, "30-l.json": launched.compactText])
        try h.start { $0.offLoopGate = gate.gate }
        defer {
            for _ in 0..<Broker.offLoopThreads { gate.release() }
            h.stop()
        }
        let source = dir.path + "/Report.pdf"
        XCTAssertTrue(FileManager.default.createFile(atPath: source, contents: Data(pdfBytes)))
        var senders: [RawClient] = []
        for i in 0..<Broker.offLoopThreads {
            let s = try h.rawSession()
            s.send(rpcRequest(1, "share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"]).compactText + "\n")
            gate.waitForWork("share \(i)")
            senders.append(s)
        }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "launchedapp://x"])["queued"], true)
        XCTAssertTrue(waitUntil(timeout: 10) { FileManager.default.fileExists(atPath: marks) }, "the launch waited for the file work")
    }

    /// A reload that fixes the launch while the broken one is being started: the fixed launch is
    /// started at once, not after the broken one's backoff.
    func testAReloadFixingALaunchWhileItStartsStartsTheFixAtOnce() throws {
        let dir = TempDir()
        let marks = dir.path + "/launched.txt"
        let gate = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/nonexistent/prog"])])
        try h.start {
            $0.launchGate = gate.gate
            $0.launchRetryBase = 30
        }
        defer { h.stop() }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://first"])["queued"], true)
        gate.waitForWork("the launch")
        h.dir.write("state/apps/10-myapp.json", manifest(["/bin/sh", "-c", "echo launched >> \(marks); sleep 30"]))
        _ = try tool.call("apps.reload")
        gate.release()
        gate.waitForWork("the fixed launch")
        gate.release()
        XCTAssertTrue(waitUntil(timeout: 10) { FileManager.default.fileExists(atPath: marks) }, "the fixed launch waited out a backoff")
        XCTAssertEqual(try launchStatus(tool)?["failures"]?.intValue, 0)
        XCTAssertEqual(try launchStatus(tool)?["launches"]?.intValue, 2)
    }

    /// A reload that removes the app while its launch is being started: nothing is started.
    func testAReloadRemovingTheAppWhileItsLaunchStartsStartsNothing() throws {
        let dir = TempDir()
        let marks = dir.path + "/launched.txt"
        let gate = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/bin/sh", "-c", "echo launched >> \(marks); sleep 30"])])
        try h.start { $0.launchGate = gate.gate }
        defer { h.stop() }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://first"])["queued"], true)
        gate.waitForWork("the launch")
        try FileManager.default.removeItem(atPath: h.state + "/apps/10-myapp.json")
        XCTAssertEqual(try tool.call("apps.reload")["apps"]?.arrayValue?.count, 0)
        gate.release()
        XCTAssertTrue(waitUntil(timeout: 5) { (try? self.launchStatus(tool))??["running"] == false })
        XCTAssertFalse(FileManager.default.fileExists(atPath: marks), "the removed app's launch ran")
        XCTAssertEqual(try launchStatus(tool)?["retryScheduled"], false)
    }

    /// A reload that changes the launch after the old one was spawned (before the loop recorded
    /// it): the old process is stopped (SIGTERM), its end is no failure, and the launch as the
    /// manifest now says follows for the events that wait.
    func testAReloadAfterTheSpawnStopsTheOldProcessAndStartsTheNewLaunch() throws {
        let dir = TempDir()
        let old = dir.path + "/old.txt"
        let new = dir.path + "/new.txt"
        let spawned = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/bin/sh", "-c", "echo $$ > \(old); exec sleep 30"])])
        try h.start {
            $0.launchSpawnedGate = spawned.gate
            $0.launchStopGraceSeconds = 30  // (only the SIGTERM ends it in time, not the SIGKILL after it)
        }
        defer { h.stop() }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://first"])["queued"], true)
        spawned.waitForWork("the old launch's spawn")
        XCTAssertTrue(waitUntil(timeout: 5) { ((try? String(contentsOfFile: old, encoding: .utf8)) ?? "").hasSuffix("\n") })
        let oldPid = try XCTUnwrap(Int32(String(contentsOfFile: old, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        h.dir.write("state/apps/10-myapp.json", manifest(["/bin/sh", "-c", "echo new > \(new); exec sleep 30"]))
        _ = try tool.call("apps.reload")
        spawned.release()
        XCTAssertTrue(waitUntil(timeout: 5) { kill(oldPid, 0) != 0 }, "the old process still runs")
        spawned.waitForWork("the new launch's spawn")
        spawned.release()
        XCTAssertTrue(waitUntil(timeout: 10) { FileManager.default.fileExists(atPath: new) }, "the new launch did not follow")
        XCTAssertEqual(try launchStatus(tool)?["failures"]?.intValue, 0)
    }

    /// An app that subscribes before the loop has recorded its launch (the child runs while its
    /// start is still being finished) counts as subscribed: the launch watchdog leaves it be.
    func testAnAppSubscribedBeforeItsLaunchIsRecordedIsNotStoppedAsSilent() throws {
        let dir = TempDir()
        let marks = dir.path + "/launched.txt"
        // (it does not ack: the event stays pending, so the watchdog would look at it)
        let script = """
            echo launched >> \(marks)
            exec "\(Products.shareclient)" listen --timeout 30
            """
        let spawned = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/bin/sh", "-c", script])])
        try h.start {
            $0.launchSpawnedGate = spawned.gate
            $0.launchTimeoutSeconds = 1
            $0.launchStopGraceSeconds = 1
        }
        defer { h.stop() }
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://first"])["queued"], true)
        spawned.waitForWork("the spawn")
        XCTAssertTrue(waitUntil(timeout: 10) { (try? tool.call("broker.status"))?["subscribers"]?.intValue == 1 }, "the app subscribed")
        spawned.release()
        Thread.sleep(forTimeInterval: 2.5)  // (past the launch timeout)
        let status = try launchStatus(tool)
        XCTAssertEqual(status?["timeouts"]?.intValue, 0, "the subscribed app was stopped as silent: \(status?.compactText ?? "")")
        XCTAssertEqual(try tool.call("broker.status")["subscribers"]?.intValue, 1)
    }
}

/// Whether a group is its user's alone (a launch program or a manifest writable by that group
/// is then the user's own): asked on the loop and on launch threads alike.
final class GroupAloneTests: XCTestCase {
    func testAGroupWithAnotherMemberIsNotTheUsersAlone() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/groupadd") else {
            throw XCTSkip("needs root and groupadd to make a group")
        }
        let name = "sbtest\(getpid() % 100_000)"
        func run(_ args: [String]) -> Int32 { (try? runProcess(args[0], Array(args.dropFirst()), env: [:], timeout: 20).status) ?? -1 }
        _ = run(["/usr/sbin/groupdel", name])
        XCTAssertEqual(run(["/usr/sbin/groupadd", name]), 0)
        defer { _ = run(["/usr/sbin/groupdel", name]) }
        let gid = try XCTUnwrap(getgrnam(name)?.pointee.gr_gid)
        XCTAssertEqual(Broker.groupMembers(gid), [])
        XCTAssertTrue(Broker.groupIsUsersAlone(gid, uid: 0, primaryGroup: gid), "nobody else is in it")
        XCTAssertFalse(Broker.groupIsUsersAlone(gid, uid: 0, primaryGroup: gid + 1), "not the user's primary group")
        XCTAssertEqual(run(["/usr/bin/gpasswd", "-a", "nobody", name]), 0)
        XCTAssertEqual(Broker.groupMembers(gid), ["nobody"])
        XCTAssertFalse(Broker.groupIsUsersAlone(gid, uid: 0, primaryGroup: gid), "nobody is in it too")
        XCTAssertEqual(Broker.groupMembers(4_000_000_000), [], "a group the system does not know has no members")
        // (from several threads at once, as launches and the loop ask it)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            XCTAssertFalse(Broker.groupIsUsersAlone(gid, uid: 0, primaryGroup: gid))
        }
    }
}

/// A launch-check gate that holds the first checks until `first` is signalled, and every later
/// one until `later` is (one signal each); `entered` is signalled as each arrives.
final class FirstAndLaterGates: @unchecked Sendable {
    let lock = NSLock()
    var calls = 0
    let entered = DispatchSemaphore(value: 0)
    let first = DispatchSemaphore(value: 0)
    let later = DispatchSemaphore(value: 0)
    var gate: @Sendable () -> Void {
        { [self] in
            lock.lock()
            calls += 1
            let n = calls
            lock.unlock()
            entered.signal()
            _ = (n == 1 ? first : later).wait(timeout: .now() + 20)
        }
    }
    /// Lets every check held (or still to come, up to four) go.
    func releaseAll() {
        first.signal()
        for _ in 0..<4 { later.signal() }
    }
}

/// Whether each piece of launch checks the loop took in was recorded (`launchChecksTakenIn`), in
/// the order the loop took them in.
final class TakenInChecks: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [Bool] = []
    var recorded: [Bool] { lock.withLock { list } }
    var record: @Sendable (Bool) -> Void { { [self] r in lock.withLock { list.append(r) } } }
}

/// A reload's checks of every launch (for `apps.list`'s warnings) run on the launch threads too.
final class LaunchCheckOffLoopTests: XCTestCase {
    let bundle = "com.mycompany.myapp"

    func manifest(_ launch: [String]) -> String {
        JSONValue.object(["bundleID": .string(bundle), "urlSchemes": ["deeplinkmyapp"], "launch": .array(launch.map { .string($0) })]).compactText
    }

    func launchWarnings(_ list: JSONValue) -> [String] {
        (list["warnings"]?.arrayValue ?? []).filter { $0["field"] == "launch" }.compactMap { $0["message"]?.stringValue }
    }

    /// `apps.reload` answers once the new manifests' launches are checked (off the loop: a user
    /// lookup may wait for a directory service), with their warnings; every other client is
    /// served meanwhile.
    func testAppsReloadAnswersOnceItsLaunchChecksAreDoneAndHoldsNoOneUp() throws {
        let checks = WorkGate()
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/bin/true"])])
        try h.start { $0.launchCheckGate = checks.gate }
        defer { h.stop() }
        let tool = try h.tool()
        XCTAssertEqual(launchWarnings(try tool.call("apps.list")), [], "checked at start, on the loop")
        h.dir.write("state/apps/10-myapp.json", manifest(["/nonexistent/prog"]))
        let reloader = try h.rawSession()
        reloader.send(rpcRequest(7, "apps.reload", .object([:])).compactText + "\n")
        checks.waitForWork("the launch checks")
        // Held: others are answered, the reload is not (yet).
        XCTAssertNotNil(try tool.call("broker.status")["connections"])
        XCTAssertEqual(try tool.call("apps.list")["launchChecksRunning"], true)
        XCTAssertNil(reloader.readJSON(timeout: 0.3), "apps.reload answered before its checks were done")
        checks.release()
        let answer = try XCTUnwrap(reloader.readJSON(timeout: 10))
        XCTAssertEqual(answer["id"], 7)
        let warnings = launchWarnings(try XCTUnwrap(answer["result"]))
        XCTAssertEqual(warnings.count, 1, "\(warnings)")
        XCTAssertTrue(warnings.first?.contains("/nonexistent/prog") == true, "\(warnings)")
        XCTAssertNil(answer["result"]?["launchChecksRunning"])
        XCTAssertEqual(launchWarnings(try tool.call("apps.list")), warnings)
        XCTAssertNil(try tool.call("apps.list")["launchChecksRunning"])
    }

    /// A reload by SIGHUP (or `BrokerControl.reload`) answers no one: `apps.list` says the checks
    /// run (with the previous manifests' warnings) until they are done. Checks of a reload that a
    /// later one overtook are dropped.
    func testASignalledReloadChecksLaunchesOffTheLoopAndTheNewestChecksWin() throws {
        let gates = FirstAndLaterGates()
        defer { gates.releaseAll() }
        let takenIn = TakenInChecks()
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/nonexistent/first"])])
        try h.start { c in
            c.launchCheckGate = gates.gate
            c.launchChecksTakenIn = takenIn.record
        }
        defer { h.stop() }
        let tool = try h.tool()
        let atStart = launchWarnings(try tool.call("apps.list"))
        XCTAssertTrue(atStart.first?.contains("/nonexistent/first") == true, "\(atStart)")
        h.dir.write("state/apps/10-myapp.json", manifest(["/nonexistent/second"]))
        h.control?.reload()
        XCTAssertEqual(gates.entered.wait(timeout: .now() + 10), .success, "the first reload's checks never started")
        let list = try tool.call("apps.list")
        XCTAssertEqual(list["launchChecksRunning"], true)
        XCTAssertEqual(launchWarnings(list), atStart, "the previous checks' warnings until the new ones are done")
        XCTAssertEqual(list["apps"]?.arrayValue?.first?["launch"], ["/nonexistent/second"], "the manifests themselves are reloaded at once")
        // A second reload while the first one's checks are held; its checks end first.
        h.dir.write("state/apps/10-myapp.json", manifest(["/nonexistent/third"]))
        h.control?.reload()
        XCTAssertEqual(gates.entered.wait(timeout: .now() + 10), .success, "the second reload's checks never started")
        gates.later.signal()
        XCTAssertTrue(waitUntil(timeout: 10) { (try? tool.call("apps.list"))?["launchChecksRunning"] == nil })
        func third() throws {
            let warnings = launchWarnings(try tool.call("apps.list"))
            XCTAssertEqual(warnings.count, 1, "\(warnings)")
            XCTAssertTrue(warnings.first?.contains("/nonexistent/third") == true, "the newest reload's checks: \(warnings)")
        }
        try third()
        // The first reload's checks end last: dropped (they are of manifests no longer loaded).
        gates.first.signal()
        XCTAssertTrue(waitUntil(timeout: 10) { takenIn.recorded.count == 2 }, "the first reload's checks were never taken in")
        XCTAssertEqual(takenIn.recorded, [true, false], "the second reload's checks recorded, the first one's dropped")
        try third()
        XCTAssertNil(try tool.call("apps.list")["launchChecksRunning"])
    }

    /// An `apps.reload` whose client hangs up before its checks are done still has them done
    /// (whether they had started or were still waiting for a launch thread).
    func testAReloadersHangUpDoesNotLoseTheChecks() throws {
        let checks = WorkGate()
        defer { for _ in 0..<4 { checks.release() } }
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/bin/true"])])
        try h.start { $0.launchCheckGate = checks.gate }
        defer { h.stop() }
        let tool = try h.tool()
        h.dir.write("state/apps/10-myapp.json", manifest(["/nonexistent/prog"]))
        // A signalled reload and another client's apps.reload hold both launch threads; the
        // request's checks wait for one.
        h.control?.reload()
        checks.waitForWork("the first reload's checks")
        let other = try h.rawSession()
        other.send(rpcRequest(8, "apps.reload", .object([:])).compactText + "\n")
        checks.waitForWork("the second reload's checks")
        do {
            let reloader = try h.rawSession()
            // (until the request was read and suspended, waiting for its checks)
            XCTAssertTrue(h.sendAndWaitUntilRun(1, on: reloader, asking: tool) { reloader.send(rpcRequest(7, "apps.reload", .object([:])).compactText + "\n") })
            XCTAssertEqual((try? tool.call("broker.status"))?["connections"]?.intValue, 3)
        }  // (hangs up: its checks, not started, are taken back)
        XCTAssertTrue(waitUntil(timeout: 5) { (try? tool.call("broker.status"))?["connections"]?.intValue == 2 }, "the reloader's hang-up was seen")
        checks.release()
        checks.release()
        checks.release()  // (the checks started again for the manifests loaded last)
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? tool.call("apps.list"))?["launchChecksRunning"] == nil }, "the checks were done after all")
        let warnings = launchWarnings(try tool.call("apps.list"))
        XCTAssertEqual(warnings.count, 1, "\(warnings)")
        XCTAssertTrue(warnings.first?.contains("/nonexistent/prog") == true, "\(warnings)")
    }

    /// The broker stops while an `apps.reload` waits for its checks: the reload itself was done,
    /// so it answers the list as loaded (saying the checks still run), not a failure. (A review's
    /// reproduction: it answered -32005, "not done, nothing stored".)
    func testAStopWhileAppsReloadWaitsForItsChecksAnswersTheReloadedList() throws {
        let checks = WorkGate()
        defer { for _ in 0..<4 { checks.release() } }
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/bin/true"])])
        try h.start {
            $0.launchCheckGate = checks.gate
            $0.shutdownGraceSeconds = 0.5
        }
        let tool = try h.tool()
        h.dir.write("state/apps/10-myapp.json", manifest(["/nonexistent/prog"]))
        let reloader = try h.rawSession()
        reloader.send(rpcRequest(7, "apps.reload", .object([:])).compactText + "\n")
        checks.waitForWork("the launch checks")
        XCTAssertEqual(try tool.call("apps.list")["apps"]?.arrayValue?.first?["launch"], ["/nonexistent/prog"], "the reload is done")
        h.stop()
        let answer = reloader.readJSON(timeout: 5)
        XCTAssertEqual(answer?["id"], 7)
        XCTAssertEqual(answer?["result"]?["apps"]?.arrayValue?.first?["launch"], ["/nonexistent/prog"], "\(answer?.compactText ?? "nil")")
        XCTAssertEqual(answer?["result"]?["launchChecksRunning"], true)
    }

    /// An `apps.reload` whose checks another reload overtook waits for the checks of the
    /// manifests now loaded, and answers with their warnings. (A review's reproduction: it
    /// answered with the previous warnings and `launchChecksRunning`.)
    func testAnOvertakenAppsReloadAnswersWithTheNewestChecks() throws {
        let gates = FirstAndLaterGates()
        defer { gates.releaseAll() }
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/bin/true"])])
        try h.start { $0.launchCheckGate = gates.gate }
        defer { h.stop() }
        h.dir.write("state/apps/10-myapp.json", manifest(["/nonexistent/prog"]))
        let reloader = try h.rawSession()
        reloader.send(rpcRequest(7, "apps.reload", .object([:])).compactText + "\n")
        XCTAssertEqual(gates.entered.wait(timeout: .now() + 10), .success)
        h.dir.write("state/apps/10-myapp.json", manifest(["/nonexistent/newer"]))
        h.control?.reload()
        XCTAssertEqual(gates.entered.wait(timeout: .now() + 10), .success)
        gates.first.signal()  // the apps.reload's own checks end first: overtaken, it waits on
        XCTAssertNil(reloader.readJSON(timeout: 0.3), "answered with checks of manifests no longer loaded")
        gates.later.signal()
        gates.later.signal()
        let answer = try XCTUnwrap(reloader.readJSON(timeout: 10))
        let warnings = launchWarnings(try XCTUnwrap(answer["result"]))
        XCTAssertEqual(warnings.count, 1, "\(answer.compactText)")
        XCTAssertTrue(warnings.first?.contains("/nonexistent/newer") == true, "\(warnings)")
        XCTAssertNil(answer["result"]?["launchChecksRunning"])
    }

    /// Reloads in a row while both launch threads are busy queue one background check, not one
    /// each (each would run, only to be dropped, ahead of launches).
    func testReloadsInARowQueueOneCheck() throws {
        final class Counting: @unchecked Sendable {
            let lock = NSLock()
            var calls = 0
            let entered = DispatchSemaphore(value: 0)
            let go = DispatchSemaphore(value: 0)
            var gate: @Sendable () -> Void {
                { [self] in
                    lock.lock()
                    calls += 1
                    lock.unlock()
                    entered.signal()
                    _ = go.wait(timeout: .now() + 20)
                }
            }
        }
        let c = Counting()
        defer { for _ in 0..<10 { c.go.signal() } }
        let h = BrokerHarness(manifests: ["10-myapp.json": manifest(["/nonexistent/a"])])
        try h.start { $0.launchCheckGate = c.gate }
        defer { h.stop() }
        let tool = try h.tool()
        // An apps.reload and a signalled one hold both threads.
        let reloader = try h.rawSession()
        reloader.send(rpcRequest(7, "apps.reload", .object([:])).compactText + "\n")
        XCTAssertEqual(c.entered.wait(timeout: .now() + 10), .success)
        h.control?.reload()
        XCTAssertEqual(c.entered.wait(timeout: .now() + 10), .success)
        // Five more, the last with another launch: one check waits for a thread.
        for n in 0..<5 {
            h.dir.write("state/apps/10-myapp.json", manifest(["/nonexistent/\(n)"]))
            h.control?.reload()
        }
        XCTAssertTrue(waitUntil(timeout: 5) { (try? tool.call("apps.list"))?["apps"]?.arrayValue?.first?["launch"] == ["/nonexistent/4"] })
        for _ in 0..<10 { c.go.signal() }
        XCTAssertNotNil(reloader.readJSON(timeout: 10)?["result"])
        XCTAssertTrue(waitUntil(timeout: 10) { (try? tool.call("apps.list"))?["launchChecksRunning"] == nil })
        let warnings = launchWarnings(try tool.call("apps.list"))
        XCTAssertTrue(warnings.first?.contains("/nonexistent/4") == true, "\(warnings)")
        c.lock.lock()
        let calls = c.calls
        c.lock.unlock()
        // Two held, one queued for the signalled reloads, and the apps.reload's own again (overtaken).
        XCTAssertLessThanOrEqual(calls, 4, "checks queued per reload")
    }
}
