// `open`: durable url.open → app.event to a live subscriber → app.ack, end to end.
//
// A subscriber thread (role app, bundle com.sharebroker.bench, app.subscribe) reads app.event
// notifications and acks them in batches with app.ack: it reads whatever has arrived, then sends one
// app.ack for it (at most one ack in flight; events that arrive meanwhile go into the next batch,
// which is also sent once it reaches 256). Openers (role tool) call url.open on
// `benchapp://e?r=RUN&i=K&t=NANOS`, NANOS being CLOCK_MONOTONIC just before the request is written;
// the subscriber reads it back from the event, so the latencies are open→event (delivered) and
// open→ack answered (acked), both on one clock. This mirrors BASELINES item 3c (Redis XADD →
// XREADGROUP → XACK, COUNT 256, one XACK per batch).

import Foundation
import ShareClient
import ShareProtocol
import ShareSystem

final class OpenResults: @unchecked Sendable {  // guarded by `lock`
    let lock = NSLock()
    var deliver: [UInt32] = []  // open → event received, µs
    var acked: [UInt32] = []  // open → app.ack answered, µs
    var replies: [UInt32] = []  // url.open round trip, µs
    var errors: [String] = []
    var lastAckAt: UInt64 = 0
    var lastReplyAt: UInt64 = 0
    var ackBatches = 0
    var duplicates = 0
    var stale = 0
    var notDelivered = 0  // url.open answered delivered: false
    var subscriberDone = false

    func fail(_ s: String) {
        lock.lock()
        errors.append(s)
        lock.unlock()
    }
}

/// Parses `r`, `i` and `t` out of `benchapp://e?r=RUN&i=K&t=NANOS`.
func parseBenchURL(_ url: String) -> (run: UInt64, index: Int, sent: UInt64)? {
    guard let q = url.firstIndex(of: "?") else { return nil }
    var run: UInt64? = nil
    var index: Int? = nil
    var sent: UInt64? = nil
    for pair in url[url.index(after: q)...].split(separator: "&") {
        guard let eq = pair.firstIndex(of: "=") else { continue }
        let value = pair[pair.index(after: eq)...]
        switch pair[..<eq] {
        case "r": run = UInt64(value)
        case "i": index = Int(value)
        case "t": sent = UInt64(value)
        default: break
        }
    }
    guard let run, let index, let sent else { return nil }
    return (run, index, sent)
}

/// The subscriber: runs until `expected` events of `run` are acked, or `idleSeconds` pass without news.
func subscriberLoop(
    socket: String, run: UInt64, expected: Int, results: OpenResults, ready: DispatchSemaphore, idleSeconds: Int32 = 30
) {
    defer {
        results.lock.lock()
        results.subscriberDone = true
        results.lock.unlock()
    }
    let c: BrokerConnection
    do {
        c = try BrokerConnection(socketPath: socket)
        try c.hello(role: "app", bundleID: BenchApp.bundleID)
        _ = try c.call("app.subscribe")
    } catch {
        results.fail("subscriber: \(error)")
        ready.signal()
        return
    }
    ready.signal()
    var deliver: [UInt32] = []
    var acked: [UInt32] = []
    deliver.reserveCapacity(expected)
    acked.reserveCapacity(expected)
    var seen = [Bool](repeating: false, count: expected)
    var batchIDs: [JSONValue] = []
    var batchSent: [UInt64] = []  // send instants of this run's events in the batch
    var inflight: (id: Int, sent: [UInt64])? = nil
    var nextAckID = 1
    var ackedCount = 0
    var batches = 0
    var duplicates = 0
    var stale = 0
    var lastAck: UInt64 = 0
    var out: [UInt8] = []

    func sendAck() throws(ClientError) {
        guard inflight == nil, !batchIDs.isEmpty else { return }
        out.removeAll(keepingCapacity: true)
        RPCCodec.writeRequest(id: .number(String(nextAckID)), method: "app.ack", params: ["ids": .array(batchIDs)], to: &out)
        out.append(0x0A)
        try c.sendRaw(out)
        inflight = (nextAckID, batchSent)
        nextAckID += 1
        batchIDs.removeAll(keepingCapacity: true)
        batchSent.removeAll(keepingCapacity: true)
    }

    do {
        while ackedCount < expected {
            var message: JSONValue?
            do { message = try c.readMessage(timeoutMillis: 0) } catch .timeout {
                // Nothing more has arrived: ack what we have, then wait.
                try sendAck()
                do { message = try c.readMessage(timeoutMillis: idleSeconds * 1000) } catch .timeout {
                    results.fail("subscriber: nothing for \(idleSeconds) s with \(ackedCount) of \(expected) acked")
                    break
                }
            }
            guard let msg = message else {
                results.fail("subscriber: the broker closed the connection")
                break
            }
            let now = Clock.monotonicNanos()
            switch RPCIncoming.decode(msg) {
            case .notification("app.event", let params?)?:
                guard let id = params["id"] else { continue }
                batchIDs.append(id)
                if let url = params["url"]?.stringValue, let p = parseBenchURL(url), p.run == run, p.index < expected {
                    if seen[p.index] {
                        duplicates += 1
                    } else {
                        seen[p.index] = true
                        deliver.append(micros(p.sent, now))
                        batchSent.append(p.sent)
                    }
                } else {
                    stale += 1  // left over from an earlier run: acked, not counted
                }
                if batchIDs.count >= 256 { try sendAck() }
            case .response(let rid, let result)?:
                guard let f = inflight, rid == .number(String(f.id)) else { continue }
                if case .failure(let e) = result { results.fail("app.ack: \(e)") }
                for t in f.sent { acked.append(micros(t, now)) }
                ackedCount += f.sent.count
                batches += 1
                lastAck = now
                inflight = nil
                if batchIDs.count >= 256 { try sendAck() }
            default:
                continue
            }
        }
    } catch {
        results.fail("subscriber: \(error)")
    }
    results.lock.lock()
    results.deliver = deliver
    results.acked = acked
    results.ackBatches = batches
    results.duplicates = duplicates
    results.stale = stale
    results.lastAckAt = lastAck
    results.lock.unlock()
}

struct OpenFigures {
    var openers: Int
    var opens: Int
    var rate: Double  // requested rate (0: unpaced)
    var seconds: Double
    var ackedPerSecond: Double
    var answeredPerSecond: Double
    var deliver: [UInt32]
    var acked: [UInt32]
    var replies: [UInt32]
    var batches: Int
    var results: OpenResults
}

/// One run: a subscriber, `openers` tool sessions doing url.open for `opens` in total, unpaced
/// (rate 0) or paced at `rate` opens/s in total.
func openRun(socket: String, openers: Int, opens: Int, rate: Double) -> OpenFigures {
    let results = OpenResults()
    let run = UInt64(Clock.monotonicNanos() % 1_000_000_007)
    let ready = DispatchSemaphore(value: 0)
    let subscriberDone = DispatchSemaphore(value: 0)
    Thread {
        subscriberLoop(socket: socket, run: run, expected: opens, results: results, ready: ready)
        subscriberDone.signal()
    }.start()
    ready.wait()
    usleep(50_000)  // let the subscriber drain any backlog from earlier runs

    if rate <= 0 && ProcessInfo.processInfo.environment["SB_BENCH_THREADED_OPENERS"] == nil {
        // Unpaced: the one-thread load generator, `openers` connections with one url.open in flight each.
        let hello = helloLine(role: "tool")
        let t0 = Clock.monotonicNanos()
        let r = loopDriver(socket: socket, clients: openers, total: opens, hello: { _ in hello }) { _, serial, out in
            var url = "\(BenchApp.scheme)://e?r=\(run)&i=\(serial)&t="
            url += String(Clock.monotonicNanos())
            RPCCodec.writeRequest(id: .number(String(serial + 1)), method: "url.open", params: ["url": .string(url)], to: &out)
            out.append(0x0A)
        }
        let answeredAt = Clock.monotonicNanos()
        for e in r.errors { results.fail("opener: \(e)") }
        subscriberDone.wait()
        results.lock.lock()
        defer { results.lock.unlock() }
        results.replies = r.latencies
        let end = max(results.lastAckAt, t0 + 1)
        let seconds = Double(end - t0) / 1e9
        return OpenFigures(
            openers: openers, opens: opens, rate: rate, seconds: seconds,
            ackedPerSecond: Double(results.acked.count) / seconds,
            answeredPerSecond: Double(r.latencies.count) / (Double(answeredAt - t0) / 1e9),
            deliver: results.deliver.sorted(), acked: results.acked.sorted(), replies: r.latencies,
            batches: results.ackBatches, results: results)
    }
    let group = DispatchGroup()
    let start = DispatchSemaphore(value: 0)
    let per = opens / openers
    let interval = rate > 0 ? UInt64(1e9 / (rate / Double(openers))) : 0
    let startAt = Clock.monotonicNanos() + 200_000_000
    for o in 0..<openers {
        let first = o * per
        let count = o == openers - 1 ? opens - first : per
        group.enter()
        Thread {
            defer { group.leave() }
            var replies: [UInt32] = []
            replies.reserveCapacity(count)
            var notDelivered = 0
            do {
                let c = try BrokerConnection(socketPath: socket)
                try c.hello(role: "tool")
                start.wait()
                var next = startAt + UInt64(o) * (interval / UInt64(openers))
                for k in 0..<count {
                    if interval > 0 {
                        sleep(untilMonotonic: next)
                        next += interval
                    }
                    let t = Clock.monotonicNanos()
                    let r = try c.call(
                        "url.open", ["url": .string("\(BenchApp.scheme)://e?r=\(run)&i=\(first + k)&t=\(t)")])
                    replies.append(micros(t, Clock.monotonicNanos()))
                    if r["delivered"]?.boolValue != true { notDelivered += 1 }
                }
            } catch {
                results.fail("opener \(o): \(error)")
            }
            results.lock.lock()
            results.replies.append(contentsOf: replies)
            results.notDelivered += notDelivered
            results.lastReplyAt = max(results.lastReplyAt, Clock.monotonicNanos())
            results.lock.unlock()
        }.start()
    }
    sleep(untilMonotonic: startAt - 100_000_000)
    for _ in 0..<openers { start.signal() }
    sleep(untilMonotonic: startAt)
    let t0 = Clock.monotonicNanos()
    group.wait()
    subscriberDone.wait()
    results.lock.lock()
    defer { results.lock.unlock() }
    let end = max(results.lastAckAt, t0 + 1)
    let seconds = Double(end - t0) / 1e9
    return OpenFigures(
        openers: openers, opens: opens, rate: rate, seconds: seconds,
        ackedPerSecond: Double(results.acked.count) / seconds,
        answeredPerSecond: Double(results.replies.count) / (Double(max(results.lastReplyAt, t0 + 1) - t0) / 1e9),
        deliver: results.deliver.sorted(), acked: results.acked.sorted(), replies: results.replies.sorted(),
        batches: results.ackBatches, results: results)
}

func openScenario(socket: String, brokerPID: Int32, openers: Int, opens: Int, pacedRate: Double, pacedOpens: Int) -> [JSONValue] {
    var lines: [JSONValue] = []
    // Durable appends alone: url.open to an app without a subscriber (Redis: XADD, no consumer).
    if BenchApp.isRegistered(socket: socket, bundleID: BenchApp.sinkBundleID) {
        let hello = helloLine(role: "tool")
        let cpu = BrokerCPU(pid: brokerPID, socket: socket)
        // The request's bytes from a template with the serial put in (see the share scenario).
        let head = Array((#","method":"url.open","params":{"url":""# + BenchApp.sinkScheme + "://e?i=").utf8)
        let r = loopDriver(socket: socket, clients: openers, total: opens, hello: { _ in hello }) { _, serial, out in
            JSONValue.appendStatic(#"{"jsonrpc":"2.0","id":"#, to: &out)
            JSONValue.writeInteger(serial + 1, to: &out)
            out.append(contentsOf: head)
            JSONValue.writeInteger(serial, to: &out)
            JSONValue.appendStatic(#""}}"#, to: &out)
            out.append(0x0A)
        }
        let rate = Double(r.latencies.count) / max(r.seconds, 1e-9)
        print(
            "open-sink  openers=\(openers) opens=\(r.latencies.count) rate=\(fmt(rate))/s durable url.open, no subscriber "
                + latencyText("url.open reply", r.latencies) + (r.errorCount > 0 ? " errors=\(r.errorCount)" : "")
                + cpu.text(requests: r.latencies.count) + r.driverText)
        reportErrors(r.errors, limit: 3, count: max(r.errorCount, r.errors.count))
        lines.append([
            "scenario": "url.open durable append (no subscriber)", "openers": .int(openers), "opens": .int(r.latencies.count),
            "perSecond": .double(rate.rounded()), "reply": latencyJSON(r.latencies), "errors": .int(r.errorCount),
        ])
    }
    // Unpaced: saturation throughput (latencies include queueing).
    let u = openRun(socket: socket, openers: openers, opens: opens, rate: 0)
    print(
        "open       openers=\(openers) opens=\(opens) acked=\(u.acked.count) rate=\(fmt(u.ackedPerSecond))/s acked "
            + "(url.open answers \(fmt(u.answeredPerSecond))/s) \(latencyText("open→event", u.deliver)) "
            + "\(latencyText("open→acked", u.acked)) \(latencyText("url.open reply", u.replies)) "
            + "ack_batches=\(u.batches) (avg \(fmt(Double(u.acked.count) / Double(max(1, u.batches)), 1)))")
    report(u)
    lines.append(openJSON("url.open→app.event→app.ack", u))
    // Paced: light-load latency.
    let p = openRun(socket: socket, openers: 1, opens: pacedOpens, rate: pacedRate)
    print(
        "open-paced openers=1 rate=\(fmt(pacedRate))/s opens=\(pacedOpens) acked=\(p.acked.count) "
            + "\(latencyText("open→event", p.deliver)) \(latencyText("open→acked", p.acked)) "
            + "\(latencyText("url.open reply", p.replies)) ack_batches=\(p.batches)")
    report(p)
    lines.append(openJSON("url.open→app.event→app.ack paced", p))
    return lines
}

private func report(_ f: OpenFigures) {
    let r = f.results
    var notes: [String] = []
    if r.notDelivered > 0 { notes.append("\(r.notDelivered) url.open answers said delivered: false") }
    if r.duplicates > 0 {
        notes.append("\(r.duplicates) duplicate events")
        benchErrors += 1
    }
    if r.stale > 0 { notes.append("\(r.stale) events from earlier runs acked") }
    if f.acked.count < f.opens {
        notes.append("only \(f.acked.count) of \(f.opens) acked")
        benchErrors += 1
    }
    if !notes.isEmpty { print("  note: " + notes.joined(separator: "; ")) }
    reportErrors(r.errors, limit: 5)
}

private func openJSON(_ name: String, _ f: OpenFigures) -> JSONValue {
    [
        "scenario": .string(name), "openers": .int(f.openers), "opens": .int(f.opens), "rate": .double(f.rate),
        "acked": .int(f.acked.count), "ackedPerSecond": .double(f.ackedPerSecond.rounded()),
        "answeredPerSecond": .double(f.answeredPerSecond.rounded()), "openToEvent": latencyJSON(f.deliver),
        "openToAcked": latencyJSON(f.acked), "openReply": latencyJSON(f.replies), "ackBatches": .int(f.batches),
        "duplicates": .int(f.results.duplicates), "notDelivered": .int(f.results.notDelivered),
    ]
}
