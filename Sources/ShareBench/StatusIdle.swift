// The first scenarios: `status` (N clients doing blocking broker.status round trips, no pipelining)
// and `idle` (the broker's resident memory for N idle connections).

import Foundation
import ShareClient
import ShareProtocol
import ShareSystem

func statusScenario(socket: String, brokerPID: Int32, clients: Int, requests: Int) -> JSONValue {
    let total = clients * requests
    let cpu = BrokerCPU(pid: brokerPID)
    let hello = helloLine(role: "tool")
    let method = Array((#","method":""# + (ProcessInfo.processInfo.environment["SB_BENCH_METHOD"] ?? "broker.status") + #""}"#).utf8)
    let r = loopDriver(socket: socket, clients: clients, total: total, hello: { _ in hello }) { _, serial, out in
        out.append(contentsOf: #"{"jsonrpc":"2.0","id":"#.utf8)
        out.append(contentsOf: String(serial + 1).utf8)
        out.append(contentsOf: method)
        out.append(0x0A)
    }
    let sorted = r.latencies
    let rate = Double(sorted.count) / max(r.seconds, 1e-9)
    print(
        "status     clients=\(clients) requests=\(sorted.count) rate=\(fmt(rate))/s p50=\(fmt(percentile(sorted, 0.5)))us "
            + "p99=\(fmt(percentile(sorted, 0.99)))us max=\(fmt(Double(sorted.last ?? 0)))us errors=\(r.errorCount)"
            + cpu.text(requests: sorted.count) + r.driverText)
    reportErrors(r.errors, limit: 5, count: max(r.errorCount, r.errors.count))
    return [
        "scenario": "broker.status", "clients": .int(clients), "requests": .int(sorted.count),
        "perSecond": .double(rate.rounded()), "p50us": .double(percentile(sorted, 0.5)),
        "p99us": .double(percentile(sorted, 0.99)), "maxUs": .double(Double(sorted.last ?? 0)),
        "errors": .int(r.errorCount), "driver": "one thread, epoll, one request in flight per connection",
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
