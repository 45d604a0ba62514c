// Scenarios `share` and `defaults`: durable share.send (a URL item, then a 1 MiB file) from 16
// extension clients, defaults.set from 16 writers, and the fan-out of one change to 1,000 watchers.
// Each starts a private broker of its own with a bench app that has a share extension and a group.

import Foundation
import ShareClient
import ShareProtocol
import ShareSystem

enum BenchGroupApp {
    static let app = "com.sharebroker.benchshare"
    static let ext = "com.sharebroker.benchshare.ext"
    static let group = "group.sharebroker.bench"
    static let manifest = """
        {"bundleID": "\(app)", "urlSchemes": ["benchshare"], "appGroups": ["\(group)"],
         "extensions": [{"bundleID": "\(ext)", "point": "com.apple.share-services", "appGroups": ["\(group)"],
                         "activationRule": "TRUEPREDICATE"}]}
        """

    /// A private broker with the bench group app registered.
    static func start(binary: String, directory: String) throws -> PrivateBroker? {
        let b = PrivateBroker(binary: binary, directory: directory)
        try b.prepare()
        try manifest.write(toFile: b.state + "/apps/benchshare.json", atomically: true, encoding: .utf8)
        return try b.start() ? b : nil
    }
}

/// N clients each doing `perClient` calls of `body`; returns (sorted latencies in µs, seconds, errors).
func concurrentCalls(
    clients: Int, perClient: Int, setup: @escaping @Sendable (Int) throws -> BrokerConnection,
    body: @escaping @Sendable (BrokerConnection, Int, Int) throws -> Void
) -> (latencies: [UInt32], seconds: Double, errors: [String]) {
    let collector = Collector()
    let group = DispatchGroup()
    let go = DispatchSemaphore(value: 0)
    for c in 0..<clients {
        group.enter()
        Thread {
            defer { group.leave() }
            do {
                let conn = try setup(c)
                var lat: [UInt32] = []
                lat.reserveCapacity(perClient)
                go.wait()
                for i in 0..<perClient {
                    let t0 = Clock.monotonicNanos()
                    try body(conn, c, i)
                    lat.append(UInt32(min(UInt64(UInt32.max), (Clock.monotonicNanos() - t0) / 1000)))
                }
                collector.add(lat)
            } catch {
                collector.fail("client \(c): \(error)")
            }
        }.start()
    }
    usleep(200_000)
    let t0 = Clock.monotonicNanos()
    for _ in 0..<clients { go.signal() }
    group.wait()
    return (collector.latencies.sorted(), Double(Clock.monotonicNanos() - t0) / 1e9, collector.errors)
}

func shareScenario(binary: String, directory: String, clients: Int, urlShares: Int, fileShares: Int) -> [JSONValue] {
    guard let broker = try? BenchGroupApp.start(binary: binary, directory: directory) else {
        print("share      broker did not start")
        benchErrors += 1
        return []
    }
    defer { _ = broker.stop() }
    let socket = broker.socket
    let setup: @Sendable (Int) throws -> BrokerConnection = { _ in
        let c = try BrokerConnection(socketPath: socket)
        try c.hello(role: "extension", bundleID: BenchGroupApp.ext)
        return c
    }
    var out: [JSONValue] = []
    // URL items: the one-thread load generator (one share.send in flight per connection).
    let extHello = helloLine(role: "extension", bundleID: BenchGroupApp.ext)
    let cpu = BrokerCPU(pid: broker.pid, socket: socket)
    let urlRun = loopDriver(
        socket: socket, clients: clients, total: max(clients, urlShares), hello: { _ in extHello }
    ) { client, serial, out in
        // The request's bytes from a template with the numbers put in (as redis-benchmark fills in
        // its preformatted command): building a JSONValue tree per request cost the load
        // generator about 0.7 µs of the CPU the broker shares with it.
        // {"jsonrpc":"2.0","id":N,"method":"share.send","params":{"items":[{"url":"https://youtu.be/bench-C-S"}]}}
        JSONValue.appendStatic(#"{"jsonrpc":"2.0","id":"#, to: &out)
        JSONValue.writeInteger(serial + 1, to: &out)
        JSONValue.appendStatic(#","method":"share.send","params":{"items":[{"url":"https://youtu.be/bench-"#, to: &out)
        JSONValue.writeInteger(client, to: &out)
        out.append(UInt8(ascii: "-"))
        JSONValue.writeInteger(serial, to: &out)
        JSONValue.appendStatic(#""}]}}"#, to: &out)
        out.append(0x0A)
    }
    let urlRate = Double(urlRun.latencies.count) / max(urlRun.seconds, 1e-9)
    print(
        "share      item=url clients=\(clients) shares=\(urlRun.latencies.count) rate=\(fmt(urlRate))/s "
            + latencyText("send", urlRun.latencies) + cpu.text(requests: urlRun.latencies.count) + urlRun.driverText)
    reportErrors(urlRun.errors, limit: 3)
    out.append([
        "scenario": "share.send url", "clients": .int(clients), "shares": .int(urlRun.latencies.count),
        "perSecond": .double(urlRate.rounded()), "latency": latencyJSON(urlRun.latencies),
    ])
    if fileShares > 0 {
        let mib = [UInt8](repeating: 0x5A, count: 1 << 20)
        let b64 = Data(mib).base64EncodedString()
        let fileRun = concurrentCalls(clients: clients, perClient: max(1, fileShares / clients), setup: setup) { c, _, _ in
            _ = try c.call("share.send", ["items": [["data": .string(b64), "name": "blob.bin"]]])
        }
        let fileRate = Double(fileRun.latencies.count) / fileRun.seconds
        print(
            "share      item=1MiB-file clients=\(clients) shares=\(fileRun.latencies.count) rate=\(fmt(fileRate, 1))/s "
                + "(\(fmt(fileRate, 1)) MiB/s) " + latencyText("send", fileRun.latencies))
        reportErrors(fileRun.errors, limit: 3)
        out.append([
            "scenario": "share.send 1MiB file", "clients": .int(clients), "shares": .int(fileRun.latencies.count),
            "perSecond": .double((fileRate * 10).rounded() / 10), "latency": latencyJSON(fileRun.latencies),
        ])
    }
    return out
}

func defaultsScenario(binary: String, directory: String, writers: Int, sets: Int, watchers: Int, changes: Int) -> [JSONValue] {
    guard let broker = try? BenchGroupApp.start(binary: binary, directory: directory) else {
        print("defaults   broker did not start")
        benchErrors += 1
        return []
    }
    defer { _ = broker.stop() }
    let socket = broker.socket
    let group = BenchGroupApp.group
    var out: [JSONValue] = []
    // 1. Throughput of durable defaults.set with 16 writers (each its own key).
    let setRun = concurrentCalls(
        clients: writers, perClient: max(1, sets / writers),
        setup: { _ in
            let c = try BrokerConnection(socketPath: socket)
            try c.hello(role: "app", bundleID: BenchGroupApp.app)
            return c
        }
    ) { c, client, i in
        _ = try c.call("defaults.set", ["group": .string(group), "key": .string("writer-\(client)"), "value": .int(i)])
    }
    let setRate = Double(setRun.latencies.count) / setRun.seconds
    print(
        "defaults   set writers=\(writers) sets=\(setRun.latencies.count) rate=\(fmt(setRate))/s "
            + latencyText("set", setRun.latencies))
    reportErrors(setRun.errors, limit: 3)
    out.append([
        "scenario": "defaults.set", "writers": .int(writers), "sets": .int(setRun.latencies.count),
        "perSecond": .double(setRate.rounded()), "latency": latencyJSON(setRun.latencies),
    ])
    // 2. Fan-out: one change until every one of N watchers has it.
    var fds: [Int32] = []
    var conns: [BrokerConnection] = []
    do {
        for _ in 0..<watchers {
            let c = try BrokerConnection(socketPath: socket)
            try c.hello(role: "app", bundleID: BenchGroupApp.app)
            try c.call("defaults.watch", ["group": .string(group), "keys": ["fanout"]])
            conns.append(c)
            fds.append(c.fileDescriptor)
        }
        let writer = try BrokerConnection(socketPath: socket)
        try writer.hello(role: "app", bundleID: BenchGroupApp.app)
        var all: [UInt32] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        for i in 0..<changes {
            let t0 = Clock.monotonicNanos()
            var out: [UInt8] = []
            RPCCodec.writeRequest(
                id: .number(String(i + 1)), method: "defaults.set",
                params: ["group": .string(group), "key": "fanout", "value": .int(i)], to: &out)
            out.append(0x0A)
            try writer.sendRaw(out)
            var pending = Array(0..<fds.count)
            let deadline = t0 + 10_000_000_000
            while !pending.isEmpty && Clock.monotonicNanos() < deadline {
                var pfds = pending.map { pollfd(fd: fds[$0], events: Int16(POLLIN), revents: 0) }
                _ = poll(&pfds, nfds_t(pfds.count), 100)
                var still: [Int] = []
                for (j, k) in pending.enumerated() {
                    if pfds[j].revents != 0 {
                        let n = buf.withUnsafeMutableBytes { read(fds[k], $0.baseAddress, $0.count) }
                        if n > 0 && buf[0..<n].contains(0x0A) { continue }
                    }
                    still.append(k)
                }
                pending = still
            }
            all.append(UInt32((Clock.monotonicNanos() - t0) / 1000))
            _ = try writer.readMessage(timeoutMillis: 5000)  // the set's reply
            if !pending.isEmpty { print("  fan-out: \(pending.count) watchers missed change \(i)") }
        }
        let sorted = all.sorted()
        print("defaults   fan-out watchers=\(watchers) changes=\(changes) " + latencyText("all-have-it", sorted))
        out.append(["scenario": "defaults fan-out", "watchers": .int(watchers), "changes": .int(changes), "latency": latencyJSON(sorted)])
    } catch {
        print("defaults   fan-out failed: \(error)")
        benchErrors += 1
    }
    _ = conns
    return out
}
