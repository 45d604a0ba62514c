// Shared pieces of sharebroker-bench: result collection, percentiles and formatting, and a private
// broker process (start on a state directory, wait until it answers, stop it with a signal).

import Foundation
import ShareClient
import ShareProtocol
import ShareSystem

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

/// Microseconds between two monotonic instants, saturated to UInt32.
@inline(__always) func micros(_ from: UInt64, _ to: UInt64) -> UInt32 {
    to <= from ? 0 : UInt32(min(UInt64(UInt32.max), (to - from) / 1000))
}

/// "p50=..us p99=..us" for a latency list (sorted here), with a label prefix.
func latencyText(_ label: String, _ sorted: [UInt32]) -> String {
    "\(label) p50=\(fmt(percentile(sorted, 0.5)))us p99=\(fmt(percentile(sorted, 0.99)))us"
}

/// `{p50us, p99us, maxUs}` for a sorted latency list.
func latencyJSON(_ sorted: [UInt32]) -> JSONValue {
    [
        "p50us": .double(percentile(sorted, 0.5)), "p99us": .double(percentile(sorted, 0.99)),
        "maxUs": .double(Double(sorted.last ?? 0)),
    ]
}

/// Sleeps until the monotonic clock reads `deadline` (ns); returns at once if it is past.
func sleep(untilMonotonic deadline: UInt64) {
    let now = Clock.monotonicNanos()
    guard deadline > now else { return }
    var ts = timespec(tv_sec: Int(deadline - now) / 1_000_000_000, tv_nsec: Int(deadline - now) % 1_000_000_000)
    nanosleep(&ts, nil)
}

/// Total size of the regular files under `path`, in bytes.
func directorySize(_ path: String) -> Int {
    guard let e = FileManager.default.enumerator(atPath: path) else { return 0 }
    var total = 0
    while let rel = e.nextObject() as? String {
        if let a = try? FileManager.default.attributesOfItem(atPath: path + "/" + rel),
            (a[.type] as? FileAttributeType) == .typeRegular
        {
            total += (a[.size] as? Int) ?? 0
        }
    }
    return total
}

/// The bench app: the manifest written into a private broker's state directory.
enum BenchApp {
    static let bundleID = "com.sharebroker.bench"
    static let scheme = "benchapp"
    static let manifest = """
        {
          "bundleID": "com.sharebroker.bench",
          "name": "sharebroker-bench subscriber",
          "urlSchemes": ["benchapp"]
        }

        """

    /// An app nobody subscribes for: url.open to it is a durable append and nothing more (the
    /// counterpart of Redis XADD without a consumer).
    static let sinkBundleID = "com.sharebroker.bench.sink"
    static let sinkScheme = "benchsink"
    static let sinkManifest = """
        {"bundleID": "com.sharebroker.bench.sink", "name": "sharebroker-bench sink", "urlSchemes": ["benchsink"]}

        """

    /// Writes STATE/apps/bench.json (and bench-sink.json).
    static func writeManifest(stateDirectory: String) throws {
        try FileManager.default.createDirectory(atPath: stateDirectory + "/apps", withIntermediateDirectories: true)
        try manifest.write(toFile: stateDirectory + "/apps/bench.json", atomically: true, encoding: .utf8)
        try sinkManifest.write(toFile: stateDirectory + "/apps/bench-sink.json", atomically: true, encoding: .utf8)
    }

    /// Whether the broker at `socket` knows the bench app (for --socket runs).
    static func isRegistered(socket: String, bundleID: String = BenchApp.bundleID) -> Bool {
        guard let c = try? BrokerConnection(socketPath: socket), (try? c.hello(role: "tool")) != nil,
            let apps = (try? c.call("apps.list"))?["apps"]?.arrayValue
        else { return false }
        return apps.contains { $0["bundleID"]?.stringValue == bundleID }
    }
}

/// A broker process started by the bench on a directory of its own (socket `DIR/s.sock`, state
/// `DIR/state`). Stopped only through its own pid.
final class PrivateBroker {
    let binary: String
    let directory: String
    var socket: String { directory + "/s.sock" }
    var state: String { directory + "/state" }
    private(set) var process: Process? = nil

    init(binary: String, directory: String) {
        self.binary = binary
        self.directory = directory
    }

    static func defaultBinary(_ given: String?) -> String {
        given
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("sharebroker").path
    }

    /// Creates the directory and writes the bench app's manifest into the state directory.
    func prepare() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try BenchApp.writeManifest(stateDirectory: state)
    }

    /// Starts the broker; returns the monotonic instant just before the process was spawned.
    @discardableResult
    func launch() throws -> UInt64 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["serve", "--socket", socket, "--state", state, "--log-level", "warning"]
        let t0 = Clock.monotonicNanos()
        try p.run()
        process = p
        return t0
    }

    /// Starts the broker and waits (up to `seconds`) until its socket accepts connections.
    func start(seconds: Double = 60) throws -> Bool {
        try launch()
        let deadline = Clock.monotonicNanos() + UInt64(seconds * 1e9)
        while Clock.monotonicNanos() < deadline {
            if UnixSocket.isLive(path: socket) { return true }
            if let p = process, !p.isRunning { return false }
            usleep(2_000)
        }
        return false
    }

    var pid: Int32 { process?.processIdentifier ?? -1 }

    /// Sends `signal` and waits for the exit; returns milliseconds from the signal to the exit.
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Double {
        guard let p = process else { return 0 }
        process = nil
        guard p.isRunning else { return 0 }
        let t0 = Clock.monotonicNanos()
        kill(p.processIdentifier, signal)
        // Poll rather than waitUntilExit, whose run loop wakes every 50 ms.
        while p.isRunning { usleep(200) }
        let ms = Double(Clock.monotonicNanos() - t0) / 1e6
        p.waitUntilExit()
        return ms
    }

    /// Stops the broker (if running) and removes the directory.
    func discard() {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Sends `total` url.open requests spread over `connections` tool sessions, each keeping `window`
/// requests in flight (written as one burst, then the `window` answers read). Returns the number of
/// successful answers, the errors (first few) and the elapsed seconds.
func pipelinedOpens(socket: String, total: Int, connections: Int, window: Int, url: @escaping @Sendable (Int) -> String)
    -> (ok: Int, errors: [String], seconds: Double)
{
    let collector = Collector()
    let okCount = Counter()
    let group = DispatchGroup()
    let per = total / connections
    let t0 = Clock.monotonicNanos()
    for c in 0..<connections {
        let first = c * per
        let count = c == connections - 1 ? total - first : per
        group.enter()
        Thread {
            defer { group.leave() }
            do {
                let conn = try BrokerConnection(socketPath: socket)
                try conn.hello(role: "tool")
                var sent = 0
                var ok = 0
                var out: [UInt8] = []
                while sent < count {
                    let n = min(window, count - sent)
                    out.removeAll(keepingCapacity: true)
                    for k in 0..<n {
                        RPCCodec.writeRequest(
                            id: .number(String(sent + k + 1)), method: "url.open",
                            params: ["url": .string(url(first + sent + k))], to: &out)
                        out.append(0x0A)
                    }
                    try conn.sendRaw(out)
                    for _ in 0..<n {
                        guard let msg = try conn.readMessage() else { throw ClientError.connection("closed") }
                        switch RPCIncoming.decode(msg) {
                        case .response(_, .success)?: ok += 1
                        case .response(_, .failure(let e))?: collector.fail("url.open: \(e)")
                        default: break
                        }
                    }
                    sent += n
                }
                okCount.add(ok)
            } catch {
                collector.fail("opener \(c): \(error)")
            }
        }.start()
    }
    group.wait()
    let seconds = Double(Clock.monotonicNanos() - t0) / 1e9
    return (okCount.value, Array(collector.errors.prefix(5)), seconds)
}

final class Counter: @unchecked Sendable {  // guarded by `lock`
    let lock = NSLock()
    private var n = 0
    func add(_ k: Int) {
        lock.lock()
        n += k
        lock.unlock()
    }
    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return n
    }
}

/// CPU time of the machine and of this bench (itself, its reaped children and the given live
/// processes, e.g. the broker), to tell how much CPU *other* processes used during a scenario.
/// The VM is shared: a figure taken while others use a core is not the broker's alone.
struct CPUSnapshot {
    var busy: Double  // machine-wide busy CPU seconds
    var ours: Double  // CPU seconds used by this process, its waited children and `pids`
    var wall: UInt64

    init(pids: [Int32]) {
        let tick = Double(sysconf(Int32(_SC_CLK_TCK)))
        busy = 0
        if let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8), let line = text.split(separator: "\n").first {
            let v = line.split(separator: " ").dropFirst().compactMap { Double($0) }
            if v.count >= 8 { busy = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tick }
        }
        var own = 0.0
        #if canImport(Glibc)
            let whos = [RUSAGE_SELF.rawValue, RUSAGE_CHILDREN.rawValue]
        #else
            let whos = [RUSAGE_SELF, RUSAGE_CHILDREN]
        #endif
        for who in whos {
            var ru = rusage()
            getrusage(who, &ru)
            own += Double(ru.ru_utime.tv_sec) + Double(ru.ru_utime.tv_usec) / 1e6
            own += Double(ru.ru_stime.tv_sec) + Double(ru.ru_stime.tv_usec) / 1e6
        }
        for pid in pids where pid > 0 {
            // /proc/PID/stat: fields 14 and 15 (utime, stime), counted after the ')' closing the name.
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = text.lastIndex(of: ")")
            else { continue }
            let f = text[text.index(after: close)...].split(separator: " ")
            if f.count > 12, let u = Double(f[11]), let s = Double(f[12]) { own += (u + s) / tick }
        }
        ours = own
        wall = Clock.monotonicNanos()
    }

    /// Cores used by other processes between `self` and `later` (machine busy minus ours).
    func otherCores(until later: CPUSnapshot) -> Double {
        let seconds = Double(later.wall - wall) / 1e9
        guard seconds > 0 else { return 0 }
        return max(0, ((later.busy - busy) - (later.ours - ours)) / seconds)
    }
}

/// The broker's CPU time per request, by thread: its event loop (the main thread) and the rest
/// (the sync worker). From /proc/PID/task/*/schedstat (nanoseconds on a CPU), so Linux only; the
/// text is empty elsewhere. Less noisy than a throughput figure on a shared machine: it is what a
/// CPU change to the request path moves.
struct BrokerCPU {
    let pid: Int32
    let start: [Int32: UInt64]
    /// The broker's socket, to read its commit counters (broker.status) before and after.
    let socket: String?
    let startCommits: (commits: Int, paced: Int, micros: Int)?

    init(pid: Int32, socket: String? = nil) {
        self.pid = pid
        self.socket = socket
        startCommits = socket.flatMap(BrokerCPU.commits)
        start = BrokerCPU.threads(pid)
    }

    /// broker.status's `commits`, `pacedCommits` and `commitMicros` (one call).
    static func commits(_ socket: String) -> (commits: Int, paced: Int, micros: Int)? {
        guard let c = try? BrokerConnection(socketPath: socket), let s = try? c.call("broker.status"),
            let n = s["commits"]?.intValue
        else { return nil }
        return (n, s["pacedCommits"]?.intValue ?? 0, s["commitMicros"]?.intValue ?? 0)
    }

    /// " commits=N (R requests each, P paced, commit D us)" since `init`, or empty.
    func commitText(requests: Int) -> String {
        guard let socket, let a = startCommits, let b = BrokerCPU.commits(socket), b.commits > a.commits else { return "" }
        let n = b.commits - a.commits
        return " commits=\(n) (\(fmt(Double(requests) / Double(n), 1)) requests each, \(b.paced - a.paced) paced, commit \(b.micros)us)"
    }

    static func threads(_ pid: Int32) -> [Int32: UInt64] {
        guard pid > 0, let tids = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return [:] }
        var out: [Int32: UInt64] = [:]
        for t in tids {
            guard let tid = Int32(t), let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/schedstat", encoding: .utf8),
                let first = text.split(separator: " ").first, let ns = UInt64(first)
            else { continue }
            out[tid] = ns
        }
        return out
    }

    /// "broker CPU/request: loop X us, other threads Y us" for `requests` since `init`.
    func text(requests: Int) -> String {
        let now = BrokerCPU.threads(pid)
        guard requests > 0, !now.isEmpty else { return "" }
        var loop: UInt64 = 0
        var others: UInt64 = 0
        for (tid, ns) in now {
            let d = ns &- (start[tid] ?? 0)
            if tid == pid { loop += d } else { others += d }
        }
        let per = { (ns: UInt64) in fmt(Double(ns) / 1000 / Double(requests), 2) }
        return " broker-cpu/request: loop=\(per(loop))us others=\(per(others))us" + commitText(requests: requests)
    }
}

/// Errors the scenarios met (failed requests, a broker that did not start): the bench exits 1
/// when there were any, so a script (CI's smoke run) notices.
nonisolated(unsafe) var benchErrors = 0

/// Prints the first `limit` of `errors` and counts `count` of them (default: all).
func reportErrors(_ errors: [String], limit: Int, count: Int? = nil) {
    benchErrors += count ?? errors.count
    for e in errors.prefix(limit) { print("  error: \(e)") }
}
