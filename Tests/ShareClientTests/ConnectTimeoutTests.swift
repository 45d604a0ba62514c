// Connecting could block for ever: `establish()` made a blocking connect on the client's actor,
// so a broker whose listen queue was full blocked a thread and the actor (every other call on
// the client waited too), and without `requestTimeout` a reconnection attempt whose `hello` was
// never answered waited for ever. The connect now runs off the actor and both are bounded by
// `connectTimeout`.

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif
import Foundation
import ShareClient
import ShareProtocol
import ShareSystem
import Testing

/// Connects non-blocking sockets to `path` until its listener's queue is full; returns them.
private func fillListenQueue(_ path: String) -> [Int32] {
    var fds: [Int32] = []
    for _ in 0..<64 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let r = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if r != 0 {
            close(fd)
            break
        }
        fds.append(fd)
    }
    return fds
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct ConnectTimeoutTests {
    @Test func aBrokerWhoseListenQueueIsFullBlocksNeitherTheActorNorForEver() async throws {
        let dir = TempDir()
        let path = dir.path + "/s.sock"
        let listener = try UnixSocket.listen(path: path, backlog: 0)  // (never accepts)
        let queued = fillListenQueue(path)
        defer {
            for fd in queued { close(fd) }
            close(listener)
        }
        #expect(!queued.isEmpty)
        let client = ShareBrokerClient(socketPath: path, role: .tool, connectTimeout: .milliseconds(500))
        let lock = NSLock()
        let outcome = Box<ShareBrokerError??>(nil)
        let started = ContinuousClock.now
        Task {
            let e = await brokerError { try await client.connect() }
            lock.withLock { outcome.value = .some(e) }
        }
        try await Task.sleep(for: .milliseconds(100))
        // The actor answers meanwhile.
        let answered = Box(false)
        Task {
            _ = await client.isConnected
            lock.withLock { answered.value = true }
        }
        #expect(await eventually(2) { lock.withLock { answered.value } }, "the actor waits for the connect")
        #expect(await eventually(5) { lock.withLock { outcome.value != nil } }, "connect() never ends")
        let error = lock.withLock { outcome.value ?? nil }
        guard case .unreachable(_, let reason)? = error else {
            Issue.record("expected .unreachable, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("queue"), "\(reason)")
        #expect(ContinuousClock.now - started < .seconds(3))
        await client.close()
    }

    @Test func aReconnectionWhoseHelloIsNeverAnsweredIsRetried() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/s.sock")
        fake.run { b in
            guard let first = b.accept(), first.answerHello() else { return }
            Thread.sleep(forTimeInterval: 0.2)
            first.close()
            guard let silent = b.accept() else { return }  // reads hello, never answers
            _ = silent.read()
            guard let third = b.accept(), third.answerHello() else { return }
            Thread.sleep(forTimeInterval: 3)
            silent.close()
            third.close()
        }
        let client = ShareBrokerClient(
            socketPath: fake.path, role: .tool, reconnect: true,
            reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(200)),
            connectTimeout: .milliseconds(500))  // (no requestTimeout)
        let states = await Collector.start(await client.connectionEvents())
        try await client.connect()
        let seen = await states.wait(until: { $0.contains { if case .reconnected = $0 { true } else { false } } }, seconds: 10)
        #expect(seen.contains { if case .reconnected = $0 { true } else { false } }, "\(seen)")
        await client.close()
    }
}
