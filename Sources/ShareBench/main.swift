// sharebroker-bench: drives a running (or self-started) broker over its socket and prints figures,
// one line per measurement (plus JSON lines with --json):
//   status    N clients doing blocking broker.status round trips (no pipelining): rate, p50/p99
//   idle      the broker's resident memory for N idle connections
//   routing   in-process URLRouter decisions/s over 1,000 apps and their association documents
//             (and over 10 apps, for comparison), with the distribution of `via`
//   open      durable url.open → app.event to a live subscriber → app.ack: unpaced throughput with
//             16 openers, then 1 opener paced at 500/s: open→event and open→acked p50/p99
//   recovery  restart time over 100,000 pending events, after SIGTERM and after SIGKILL
//   share     share.send of URLs and of 1 MiB files;  defaults  defaults.set and fan-out to watchers
// After each scenario: the CPU other processes used meanwhile (the machine may be shared).
// Files: StatusIdle.swift, Routing.swift, Open.swift, Recovery.swift, SharesDefaults.swift, Common.swift.

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif
import Foundation
import ShareClient
import ShareCommandLine
import ShareProtocol
import ShareSystem

let allScenarios = ["status", "idle", "routing", "open", "recovery", "share", "defaults"]

let root = CommandSpec(
    name: "sharebroker-bench",
    abstract: "Benchmark a sharebroker over its Unix socket and print figures.",
    discussion: """
        Without --socket it starts a private broker (the sharebroker binary next to this one) on a
        temporary state directory, with the bench app's manifest (STATE/apps/bench.json: bundle
        com.sharebroker.bench, scheme benchapp) written before it starts, and stops it at the end.
        Scenarios: status, idle, routing, open, recovery, share, defaults, or all (the default), in
        the order given. routing needs no broker; recovery, share and defaults always start brokers
        of their own (so they ignore --socket); open with --socket needs the bench app registered
        in that broker.
        """,
    options: [
        .option("socket", valueName: "path", help: "Use the broker listening here instead of starting one."),
        .option("broker", valueName: "path", help: "The sharebroker binary to start.", default: "next to this binary"),
        .option(
            "scenario", valueName: "name", help: "status, idle, routing, open, recovery, share, defaults or all; repeatable.", default: "all",
            repeatable: true),
        .option("clients", valueName: "n", help: "Concurrent clients for the status scenario.", default: "16"),
        .option("requests", valueName: "n", help: "Round trips per client (status).", default: "20000"),
        .option("idle", valueName: "n", help: "Idle connection counts; repeatable.", default: "1000 and 10000", repeatable: true),
        .option("apps", valueName: "n", help: "Apps (and association documents) for routing.", default: "1000"),
        .option("urls", valueName: "n", help: "URLs resolved per routing pass.", default: "100000"),
        .option("passes", valueName: "n", help: "Timed routing passes, alternating the two worlds (the best counts).", default: "5"),
        .option("openers", valueName: "n", help: "Concurrent url.open clients for the unpaced open run.", default: "16"),
        .option("opens", valueName: "n", help: "url.open calls in the unpaced open run.", default: "20000"),
        .option("rate", valueName: "n", help: "Opens per second in the paced open run (1 opener).", default: "500"),
        .option("paced-opens", valueName: "n", help: "url.open calls in the paced open run.", default: "5000"),
        .option("shares", valueName: "n", help: "share.send calls with a URL item (share).", default: "20000"),
        .option("file-shares", valueName: "n", help: "share.send calls with a 1 MiB file (share); 0 skips them.", default: "256"),
        .option("pending", valueName: "n", help: "Pending events for the recovery scenario; repeatable.", default: "100000", repeatable: true),
        .option(
            "recovery-timeout", valueName: "seconds", help: "Longest wait for a restarted broker to answer (recovery).",
            default: "1800"),
        .flag("json", help: "Print results as JSON lines as well."),
    ])

func positive(_ cmd: ParsedCommand, _ name: String, _ fallback: Int) throws -> Int {
    guard let v = try cmd.int(name) else { return fallback }
    guard v > 0 else { throw cmd.usageError("option '--\(name)' expects a positive integer, got '\(v)'") }
    return v
}

setvbuf(stdout, nil, _IOLBF, 0)
runMain(root: root, version: "sharebroker-bench \(SharebrokerVersion.string)") { cmd in
    _ = ProcessInfoLite.raiseOpenFileLimit()
    var scenarios: [String] = []
    for s in cmd.values("scenario").isEmpty ? ["all"] : cmd.values("scenario") {
        if s == "all" {
            scenarios += allScenarios
        } else if allScenarios.contains(s) {
            scenarios.append(s)
        } else {
            throw cmd.usageError("unknown scenario '\(s)' (expected \(allScenarios.joined(separator: ", ")) or all)")
        }
    }
    let idleCounts = try cmd.values("idle").map { v -> Int in
        guard let n = Int(v), n > 0 else { throw cmd.usageError("option '--idle' expects a positive integer, got '\(v)'") }
        return n
    }
    let clients = try positive(cmd, "clients", 16)
    let requests = try positive(cmd, "requests", 20000)
    let routingApps = try positive(cmd, "apps", 1000)
    let urls = try positive(cmd, "urls", 100_000)
    let passes = try positive(cmd, "passes", 5)
    let openers = try positive(cmd, "openers", 16)
    let opens = try positive(cmd, "opens", 20000)
    let rate = try positive(cmd, "rate", 500)
    let pacedOpens = try positive(cmd, "paced-opens", 5000)
    let urlShares = try positive(cmd, "shares", 20000)
    let fileShares = try cmd.int("file-shares") ?? 256
    guard fileShares >= 0 else { throw cmd.usageError("option '--file-shares' expects 0 or a positive integer, got '\(fileShares)'") }
    let pendings = try cmd.values("pending").map { v -> Int in
        guard let n = Int(v), n > 0 else { throw cmd.usageError("option '--pending' expects a positive integer, got '\(v)'") }
        return n
    }
    let recoveryTimeout = try positive(cmd, "recovery-timeout", 1800)

    let binary = PrivateBroker.defaultBinary(cmd.value("broker"))
    let tempDir = NSTemporaryDirectory() + "sbbench-\(getpid())"
    try FileManager.default.createDirectory(atPath: tempDir, withIntermediateDirectories: true)
    var broker: PrivateBroker? = nil
    defer {
        broker?.stop()
        try? FileManager.default.removeItem(atPath: tempDir)
    }
    var socket = cmd.value("socket")
    let needsBroker = scenarios.contains { ["status", "idle", "open"].contains($0) }
    var pid: Int32 = -1
    print(
        "sharebroker-bench \(SharebrokerVersion.string): \(ProcessInfo.processInfo.activeProcessorCount) CPUs, "
            + "scenarios \(scenarios.joined(separator: " "))")
    if needsBroker {
        if socket == nil {
            let b = PrivateBroker(binary: binary, directory: tempDir + "/main")
            broker = b
            try b.prepare()
            guard try b.start() else {
                print("broker did not start at \(b.socket)")
                return 70
            }
            socket = b.socket
        }
        let status = try BrokerConnection(socketPath: socket!).call("broker.status")
        pid = Int32(status["pid"]?.intValue ?? -1)
        print("sharebroker-bench: broker \(status["version"]?.stringValue ?? "?") pid \(pid) at \(socket!)")
    }
    var jsonLines: [JSONValue] = []
    for s in scenarios {
        // How busy the (shared) machine was meanwhile, apart from this bench and its brokers.
        let cpu0 = CPUSnapshot(pids: [pid])
        defer {
            let cpu1 = CPUSnapshot(pids: [pid])
            let other = cpu0.otherCores(until: cpu1)
            print("  (\(s): other processes used \(fmt(other, 2)) cores of \(ProcessInfo.processInfo.activeProcessorCount) meanwhile)")
            jsonLines.append([
                "scenario": "machine", "during": .string(s), "otherCores": .double((other * 100).rounded() / 100),
                "seconds": .double((Double(cpu1.wall - cpu0.wall) / 1e7).rounded() / 100),
            ])
        }
        switch s {
        case "status":
            jsonLines.append(statusScenario(socket: socket!, brokerPID: pid, clients: clients, requests: requests))
        case "idle":
            for n in idleCounts.isEmpty ? [1000, 10000] : idleCounts {
                if let r = idleScenario(socket: socket!, count: n, brokerPID: pid) { jsonLines.append(r) }
            }
        case "routing":
            jsonLines.append(routingScenario(apps: routingApps, urls: urls, passes: passes))
        case "open":
            if broker == nil && !BenchApp.isRegistered(socket: socket!) {
                print("open       skipped: the broker at \(socket!) has no app \(BenchApp.bundleID) (scheme \(BenchApp.scheme))")
                continue
            }
            jsonLines += openScenario(
                socket: socket!, brokerPID: pid, openers: openers, opens: opens, pacedRate: Double(rate), pacedOpens: pacedOpens)
        case "share":
            jsonLines += shareScenario(
                binary: binary, directory: tempDir + "/share", clients: 16, urlShares: urlShares, fileShares: fileShares)
        case "defaults":
            jsonLines += defaultsScenario(
                binary: binary, directory: tempDir + "/defaults", writers: 16, sets: 20000, watchers: 1000, changes: 200)
        case "recovery":
            if cmd.value("socket") != nil {
                print("recovery   skipped: it restarts brokers of its own; run it without --socket")
                continue
            }
            for n in pendings.isEmpty ? [100_000] : pendings {
                jsonLines += recoveryScenario(binary: binary, baseDirectory: tempDir, pending: n, timeoutSeconds: recoveryTimeout)
            }
        default:
            break
        }
    }
    if cmd.flag("json") { for l in jsonLines { print(l.compactText) } }
    if benchErrors > 0 {
        FileHandle.standardError.write(Data("sharebroker-bench: \(benchErrors) errors (see above)\n".utf8))
        return 1
    }
    return 0
}
