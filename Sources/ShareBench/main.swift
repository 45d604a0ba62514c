// sharebroker-bench: drives a running (or self-started) broker over its socket and prints figures:
// request rate and latency percentiles for `broker.status` round trips with N clients, and the
// broker's resident memory for N idle connections. Later scenarios join this same tool.

import Foundation
import ShareClient
import ShareCommandLine
import ShareProtocol
import ShareSystem

let root = CommandSpec(
    name: "sharebroker-bench",
    abstract: "Benchmark a sharebroker over its Unix socket and print figures.",
    discussion: """
        Without --socket it starts a private broker (the sharebroker binary next to this one) on a
        temporary state directory and stops it at the end. Scenarios: status, idle (default: all).
        """,
    options: [
        .option("socket", valueName: "path", help: "Use the broker listening here instead of starting one."),
        .option("broker", valueName: "path", help: "The sharebroker binary to start.", default: "next to this binary"),
        .option("scenario", valueName: "name", help: "status or idle; repeatable.", repeatable: true),
        .option("clients", valueName: "n", help: "Concurrent clients for the status scenario.", default: "16"),
        .option("requests", valueName: "n", help: "Round trips per client.", default: "20000"),
        .option("idle", valueName: "n", help: "Idle connection counts; repeatable.", default: "1000 and 10000", repeatable: true),
        .flag("json", help: "Print results as JSON lines as well."),
    ])

final class Collector: @unchecked Sendable {  // guarded by `lock`
    let lock = NSLock()
    var latencies: [UInt32] = []
    var errors: [String] = []
    func add(_ l: [UInt32]) {
        lock.lock()
        latencies.append(contentsOf: l)
        lock.unlock()
    }
    func fail(_ s: String) {
        lock.lock()
        errors.append(s)
        lock.unlock()
    }
}

func percentile(_ sorted: [UInt32], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    let i = min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))
    return Double(sorted[i])
}

func fmt(_ v: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", v) }


func statusScenario(socket: String, clients: Int, requests: Int) -> JSONValue {
    let collector = Collector()
    let group = DispatchGroup()
    let start = DispatchSemaphore(value: 0)
    var threads: [Thread] = []
    for i in 0..<clients {
        group.enter()
        let t = Thread {
            defer { group.leave() }
            do {
                let c = try BrokerConnection(socketPath: socket)
                try c.hello(role: "tool")
                var lat: [UInt32] = []
                lat.reserveCapacity(requests)
                start.wait()
                for _ in 0..<requests {
                    let t0 = Clock.monotonicNanos()
                    _ = try c.call("broker.status")
                    lat.append(UInt32(min(UInt64(UInt32.max), (Clock.monotonicNanos() - t0) / 1000)))
                }
                collector.add(lat)
            } catch {
                collector.fail("client \(i): \(error)")
            }
        }
        threads.append(t)
        t.start()
    }
    usleep(200_000)
    let t0 = Clock.monotonicNanos()
    for _ in 0..<clients { start.signal() }
    group.wait()
    let seconds = Double(Clock.monotonicNanos() - t0) / 1e9
    let sorted = collector.latencies.sorted()
    let rate = Double(sorted.count) / seconds
    print(
        "status     clients=\(clients) requests=\(sorted.count) rate=\(fmt(rate))/s p50=\(fmt(percentile(sorted, 0.5)))us "
            + "p99=\(fmt(percentile(sorted, 0.99)))us max=\(fmt(Double(sorted.last ?? 0)))us")
    for e in collector.errors.prefix(5) { print("  error: \(e)") }
    return [
        "scenario": "broker.status", "clients": .int(clients), "requests": .int(sorted.count),
        "perSecond": .double(rate.rounded()), "p50us": .double(percentile(sorted, 0.5)),
        "p99us": .double(percentile(sorted, 0.99)), "maxUs": .double(Double(sorted.last ?? 0)),
    ]
}

func idleScenario(socket: String, count: Int, brokerPID: Int32) -> JSONValue? {
    guard let before = ProcessInfoLite.rss(of: brokerPID) else {
        print("idle       cannot read the broker's memory (pid \(brokerPID)); skipped")
        return nil
    }
    var fds: [Int32] = []
    fds.reserveCapacity(count)
    var failed: String? = nil
    for _ in 0..<count {
        do { fds.append(try UnixSocket.connect(path: socket)) } catch {
            failed = "\(error)"
            break
        }
    }
    // Make sure the broker has accepted them all: ask for the connection count.
    var accepted = 0
    if let c = try? BrokerConnection(socketPath: socket) {
        for _ in 0..<500 {
            accepted = ((try? c.call("broker.status"))?["connections"]?.intValue ?? 0) - 1
            if accepted >= fds.count { break }
            usleep(10_000)
        }
    }
    let after = ProcessInfoLite.rss(of: brokerPID) ?? before
    let perConn = Double(after.current - before.current) / Double(max(1, fds.count))
    print(
        "idle       connections=\(fds.count) accepted=\(accepted) rss_before=\(fmt(Double(before.current) / 1048576, 1))MiB "
            + "rss_after=\(fmt(Double(after.current) / 1048576, 1))MiB peak=\(fmt(Double(after.peak) / 1048576, 1))MiB "
            + "per_connection=\(fmt(perConn))B")
    if let failed { print("  stopped opening connections: \(failed)") }
    let result: JSONValue = [
        "scenario": "idle", "connections": .int(fds.count), "accepted": .int(accepted),
        "rssBeforeBytes": .int(before.current), "rssAfterBytes": .int(after.current), "peakBytes": .int(after.peak),
        "perConnectionBytes": .double(perConn.rounded()),
    ]
    for fd in fds { FD.close(fd) }
    // Let the broker notice the closes before the next scenario.
    if let c = try? BrokerConnection(socketPath: socket) {
        for _ in 0..<500 {
            if ((try? c.call("broker.status"))?["connections"]?.intValue ?? 0) <= 1 { break }
            usleep(10_000)
        }
    }
    return result
}

runMain(root: root, version: "sharebroker-bench \(SharebrokerVersion.string)") { cmd in
    _ = ProcessInfoLite.raiseOpenFileLimit()
    var socket = cmd.value("socket")
    var child: Process? = nil
    var tempDir: String? = nil
    if socket == nil {
        let dir = NSTemporaryDirectory() + "sbbench-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        tempDir = dir
        socket = dir + "/s.sock"
        let brokerPath =
            cmd.value("broker")
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("sharebroker").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: brokerPath)
        p.arguments = ["serve", "--socket", socket!, "--state", dir + "/state", "--log-level", "warning"]
        try p.run()
        child = p
        var up = false
        for _ in 0..<500 {
            if UnixSocket.isLive(path: socket!) {
                up = true
                break
            }
            usleep(10_000)
        }
        guard up else {
            print("broker did not start at \(socket!)")
            return 70
        }
    }
    defer {
        if let child {
            child.terminate()
            child.waitUntilExit()
        }
        if let tempDir { try? FileManager.default.removeItem(atPath: tempDir) }
    }
    let status = try BrokerConnection(socketPath: socket!).call("broker.status")
    let pid = Int32(status["pid"]?.intValue ?? -1)
    print("sharebroker-bench: broker \(status["version"]?.stringValue ?? "?") pid \(pid) at \(socket!), \(ProcessInfo.processInfo.activeProcessorCount) CPUs")
    var jsonLines: [JSONValue] = []
    let scenarios = cmd.values("scenario").isEmpty ? ["status", "idle"] : cmd.values("scenario")
    for s in scenarios {
        switch s {
        case "status":
            jsonLines.append(
                statusScenario(socket: socket!, clients: try cmd.int("clients") ?? 16, requests: try cmd.int("requests") ?? 20000))
        case "idle":
            let counts = try cmd.values("idle").map { v -> Int in
                guard let n = Int(v), n > 0 else { throw cmd.usageError("option '--idle' expects a positive integer, got '\(v)'") }
                return n
            }
            for n in counts.isEmpty ? [1000, 10000] : counts {
                if let r = idleScenario(socket: socket!, count: n, brokerPID: pid) { jsonLines.append(r) }
            }
        default:
            throw cmd.usageError("unknown scenario '\(s)' (expected status or idle)")
        }
    }
    if cmd.flag("json") { for l in jsonLines { print(l.compactText) } }
    return 0
}
