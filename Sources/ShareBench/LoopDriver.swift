// The load generator used for the closed-loop throughput scenarios (status, open, share): one
// thread, one epoll/kqueue, N connections, each with exactly one request in flight. This is how
// `redis-benchmark -c N` (no -P) drives Redis in ../shared/bench/peers.sh, so the two figures
// compare like with like: on a 2-core machine, N blocking client threads would spend most of the
// client side's CPU on context switches and leave less of the machine to the server.

import Foundation
import ShareProtocol
import ShareSystem

struct LoopDriverResult {
    /// Round trips, sorted, in µs (request written → complete reply read).
    var latencies: [UInt32]
    var seconds: Double
    /// Replies that were JSON-RPC errors (first few) and connection failures.
    var errors: [String]
    var errorCount: Int
    /// CPU time the driver's own thread used over the timed part, in ns (0 where unknown).
    var driverCPUNanos: UInt64 = 0
}

/// The calling thread's CPU time so far in ns (Linux: /proc/thread-self/schedstat), 0 elsewhere.
func threadCPUNanos() -> UInt64 {
    guard let text = try? String(contentsOfFile: "/proc/thread-self/schedstat", encoding: .utf8),
        let first = text.split(separator: " ").first, let ns = UInt64(first)
    else { return 0 }
    return ns
}

/// Runs `total` requests over `clients` connections. `hello` gives each connection's hello line
/// (sent and answered before the clock starts); `request` appends the request line (with its
/// trailing newline) for the `serial`-th request, right before it is written.
func loopDriver(
    socket: String, clients: Int, total: Int, hello: (Int) -> [UInt8],
    request: (_ client: Int, _ serial: Int, _ out: inout [UInt8]) -> Void
) -> LoopDriverResult {
    var errors: [String] = []
    var fds: [Int32] = []
    defer { for fd in fds { FD.close(fd) } }
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    // Connect and say hello (blocking).
    for c in 0..<clients {
        do {
            let fd = try UnixSocket.connect(path: socket)
            fds.append(fd)
            let line = hello(c)
            try FD.writeAll(fd, line)
            var got: [UInt8] = []
            while got.last != 0x0A {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { throw SystemError("read", errno: n == 0 ? ECONNRESET : errno) }
                got.append(contentsOf: buffer[0..<n])
            }
            if !contains(got[...], "\"result\"") {
                return LoopDriverResult(
                    latencies: [], seconds: 0, errors: ["hello: " + String(decoding: got, as: UTF8.self)],
                    errorCount: 1)
            }
        } catch {
            return LoopDriverResult(latencies: [], seconds: 0, errors: ["connect: \(error)"], errorCount: 1)
        }
    }
    let poller: Poller
    do {
        poller = try Poller(capacity: 256)
        for (i, fd) in fds.enumerated() { try poller.add(fd, interest: .readable, token: UInt64(i)) }
    } catch {
        return LoopDriverResult(latencies: [], seconds: 0, errors: ["poller: \(error)"], errorCount: 1)
    }
    var sentAt = [UInt64](repeating: 0, count: clients)
    var partial = [[UInt8]](repeating: [], count: clients)
    var latencies: [UInt32] = []
    latencies.reserveCapacity(total)
    var issued = 0
    var completed = 0
    var errorCount = 0
    var out: [UInt8] = []
    out.reserveCapacity(4096)
    var failed = false

    func send(_ c: Int) {
        guard issued < total else { return }
        out.removeAll(keepingCapacity: true)
        request(c, issued, &out)
        issued += 1
        sentAt[c] = Clock.monotonicNanos()
        do { try FD.writeAll(fds[c], out) } catch {
            errors.append("write: \(error)")
            failed = true
        }
    }

    let cpu0 = threadCPUNanos()
    let t0 = Clock.monotonicNanos()
    for c in 0..<clients { send(c) }
    while completed < issued && !failed {
        do {
            try poller.wait(timeoutMillis: 30_000) { token, _ in
                let c = Int(token)
                let n = buffer.withUnsafeMutableBytes { read(fds[c], $0.baseAddress, $0.count) }
                if n <= 0 {
                    if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
                    errors.append("client \(c): the broker closed the connection")
                    failed = true
                    return
                }
                var start = 0
                for i in 0..<n where buffer[i] == 0x0A {
                    // One complete reply: everything in `partial[c]` plus buffer[start...i].
                    let now = Clock.monotonicNanos()
                    let isError: Bool
                    if partial[c].isEmpty {
                        isError = !contains(buffer[start..<i], "\"result\"")
                        if isError { errors.append(String(decoding: buffer[start..<i], as: UTF8.self)) }
                    } else {
                        partial[c].append(contentsOf: buffer[start..<i])
                        isError = !contains(partial[c][...], "\"result\"")
                        if isError { errors.append(String(decoding: partial[c], as: UTF8.self)) }
                        partial[c].removeAll(keepingCapacity: true)
                    }
                    if isError { errorCount += 1 }
                    latencies.append(UInt32(min(UInt64(UInt32.max), (now - sentAt[c]) / 1000)))
                    completed += 1
                    start = i + 1
                    send(c)
                }
                if start < n { partial[c].append(contentsOf: buffer[start..<n]) }
            }
        } catch {
            errors.append("poll: \(error)")
            break
        }
        if errors.count > 100 { errors.removeLast(errors.count - 100) }
    }
    let seconds = Double(Clock.monotonicNanos() - t0) / 1e9
    let cpu1 = threadCPUNanos()
    latencies.sort()
    return LoopDriverResult(
        latencies: latencies, seconds: seconds, errors: Array(errors.prefix(5)), errorCount: errorCount + (failed ? 1 : 0),
        driverCPUNanos: cpu0 > 0 && cpu1 >= cpu0 ? cpu1 - cpu0 : 0)
}

extension LoopDriverResult {
    /// " driver-cpu/request=X us": the load generator's own CPU per completed request.
    var driverText: String {
        guard driverCPUNanos > 0, !latencies.isEmpty else { return "" }
        return " driver-cpu/request=\(fmt(Double(driverCPUNanos) / 1000 / Double(latencies.count), 2))us"
    }
}

/// A hello request line.
func helloLine(role: String, bundleID: String? = nil) -> [UInt8] {
    var params: JSONObject = ["role": .string(role)]
    if let bundleID { params["bundleID"] = .string(bundleID) }
    var out: [UInt8] = []
    RPCCodec.writeRequest(id: .number("0"), method: "hello", params: .object(params), to: &out)
    out.append(0x0A)
    return out
}

/// True when `needle` (ASCII) occurs in `haystack`.
private func contains(_ haystack: ArraySlice<UInt8>, _ needle: StaticString) -> Bool {
    let n = needle.utf8CodeUnitCount
    guard haystack.count >= n else { return false }
    return needle.withUTF8Buffer { nb in
        haystack.withUnsafeBufferPointer { hb in
            let first = nb[0]
            var i = 0
            let last = hb.count - n
            while i <= last {
                if hb[i] == first && memcmp(hb.baseAddress! + i, nb.baseAddress!, n) == 0 { return true }
                i += 1
            }
            return false
        }
    }
}
