// `recovery`: how long a broker takes to come back over N pending events. For each stop signal
// (SIGTERM: graceful; SIGKILL: crash), on a fresh state directory: start a broker, queue N events
// for the bench app with no subscriber (pipelined url.open over a few connections), stop it with the
// signal, start it again on the same state and time from the spawn until the socket answers
// broker.status with pendingEvents == N.

import Foundation
import ShareClient
import ShareProtocol
import ShareSystem

struct RecoveryFigures {
    var signal: String
    var pending: Int
    var fillSeconds: Double
    var fillPerSecond: Double
    var stopMs: Double
    var stateBytes: Int
    var rssFilled: Int?
    var firstAnswerMs: Double?  // spawn → first broker.status answer
    var readyMs: Double?  // spawn → broker.status with pendingEvents == N
    var pendingSeen: Int
    var rssRecovered: Int?
    var errors: [String]
}

func recoveryRun(
    binary: String, baseDirectory: String, pending: Int, signal: Int32, signalName: String, timeoutSeconds: Int
) -> RecoveryFigures {
    let broker = PrivateBroker(binary: binary, directory: baseDirectory + "/recovery-\(signalName.lowercased())")
    defer { broker.discard() }
    var f = RecoveryFigures(
        signal: signalName, pending: pending, fillSeconds: 0, fillPerSecond: 0, stopMs: 0, stateBytes: 0, rssFilled: nil,
        firstAnswerMs: nil, readyMs: nil, pendingSeen: 0, rssRecovered: nil, errors: [])
    do {
        try? FileManager.default.removeItem(atPath: broker.directory)
        try broker.prepare()
        guard try broker.start() else {
            f.errors.append("the broker did not start")
            return f
        }
    } catch {
        f.errors.append("cannot start the broker: \(error)")
        return f
    }
    let socket = broker.socket
    let fill = pipelinedOpens(socket: socket, total: pending, connections: 4, window: 256) { k in
        "\(BenchApp.scheme)://r?i=\(k)"
    }
    f.fillSeconds = fill.seconds
    f.fillPerSecond = Double(fill.ok) / fill.seconds
    f.errors += fill.errors
    let before = (try? BrokerConnection(socketPath: socket).call("broker.status"))?["pendingEvents"]?.intValue ?? -1
    if before != pending { f.errors.append("before the stop the broker reports \(before) pending events, not \(pending)") }
    f.rssFilled = ProcessInfoLite.rss(of: broker.pid)?.current
    f.stopMs = broker.stop(signal: signal)
    f.stateBytes = directorySize(broker.state)

    let t0: UInt64
    do { t0 = try broker.launch() } catch {
        f.errors.append("cannot restart the broker: \(error)")
        return f
    }
    let deadline = t0 + UInt64(timeoutSeconds) * 1_000_000_000
    while Clock.monotonicNanos() < deadline {
        if let p = broker.process, !p.isRunning {
            f.errors.append("the restarted broker exited (status \(p.terminationStatus))")
            break
        }
        if let c = try? BrokerConnection(socketPath: socket), let s = try? c.call("broker.status", timeoutMillis: 60_000) {
            let now = Clock.monotonicNanos()
            if f.firstAnswerMs == nil { f.firstAnswerMs = Double(now - t0) / 1e6 }
            f.pendingSeen = s["pendingEvents"]?.intValue ?? -1
            if f.pendingSeen == pending {
                f.readyMs = Double(now - t0) / 1e6
                break
            }
        }
        // Poll finely at first, then at most every 5 ms (a long replay should not compete with the poller).
        usleep(UInt32(min(5_000, max(500, (Clock.monotonicNanos() - t0) / 2_000_000))))
    }
    if f.readyMs == nil, f.errors.isEmpty {
        f.errors.append(
            f.firstAnswerMs == nil
                ? "the restarted broker did not answer within \(timeoutSeconds) s"
                : "the restarted broker reports \(f.pendingSeen) pending events, not \(pending)")
    }
    f.rssRecovered = ProcessInfoLite.rss(of: broker.pid)?.current
    return f
}

func recoveryScenario(binary: String, baseDirectory: String, pending: Int, timeoutSeconds: Int) -> [JSONValue] {
    var lines: [JSONValue] = []
    for (sig, name) in [(SIGTERM, "SIGTERM"), (SIGKILL, "SIGKILL")] {
        let f = recoveryRun(
            binary: binary, baseDirectory: baseDirectory, pending: pending, signal: sig, signalName: name,
            timeoutSeconds: timeoutSeconds)
        func mib(_ b: Int?) -> String { b.map { fmt(Double($0) / 1048576, 1) + "MiB" } ?? "?" }
        print(
            "recovery   stop=\(name) pending=\(pending) restart→ready=\(f.readyMs.map { fmt($0, 1) + "ms" } ?? "n/a") "
                + "(first answer \(f.firstAnswerMs.map { fmt($0, 1) + "ms" } ?? "n/a")) "
                + "fill=\(fmt(f.fillSeconds, 2))s (\(fmt(f.fillPerSecond))/s pipelined) stop_took=\(fmt(f.stopMs, 1))ms "
                + "state=\(mib(f.stateBytes)) rss_filled=\(mib(f.rssFilled)) rss_recovered=\(mib(f.rssRecovered))")
        reportErrors(f.errors, limit: 5)
        var o: JSONObject = [
            "scenario": "recovery", "signal": .string(name), "pending": .int(pending),
            "fillSeconds": .double((f.fillSeconds * 1000).rounded() / 1000), "fillPerSecond": .double(f.fillPerSecond.rounded()),
            "stopMs": .double((f.stopMs * 10).rounded() / 10), "stateBytes": .int(f.stateBytes),
            "pendingSeen": .int(f.pendingSeen),
        ]
        if let r = f.readyMs { o["restartToReadyMs"] = .double((r * 10).rounded() / 10) }
        if let r = f.firstAnswerMs { o["restartToFirstAnswerMs"] = .double((r * 10).rounded() / 10) }
        if let r = f.rssFilled { o["rssFilledBytes"] = .int(r) }
        if let r = f.rssRecovered { o["rssRecoveredBytes"] = .int(r) }
        if !f.errors.isEmpty { o["errors"] = .array(f.errors.map { .string($0) }) }
        lines.append(.object(o))
    }
    return lines
}
