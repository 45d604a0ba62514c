// Test support for the client library: an in-process broker on a temporary state directory and a
// short socket path, run on its own thread and restartable on the same socket and state (a copy
// of the minimal parts of ShareBrokerCoreTests/Harness.swift), a seeded RNG, a stream collector
// that waits with a timeout, and the manifests the integration tests use.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import Testing

/// A temporary directory with a short path (sun_path is ~108 bytes), removed on deinit.
final class TempDir: Sendable {
    let path: String
    init() {
        var template = Array("/tmp/sbclient-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = String(cString: p!)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    func write(_ relative: String, _ text: String) {
        let full = path + "/" + relative
        try? FileManager.default.createDirectory(
            atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: full, contents: Data(text.utf8))
    }
}

/// A value handed from the broker thread once, under a semaphore.
final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ v: T) { value = v }
}

/// An in-process broker for one test; `stop()` then `start()` restarts it on the same socket and state.
final class BrokerHarness: @unchecked Sendable {
    let dir = TempDir()
    var socket: String { dir.path + "/s.sock" }
    var state: String { dir.path + "/state" }
    private var control: BrokerControl? = nil
    private var finished: DispatchSemaphore? = nil

    /// Writes manifests (file name → JSON) and association documents (host → JSON) before starting.
    init(manifests: [String: String] = [:], associations: [String: String] = [:]) {
        for (name, text) in manifests { dir.write("state/apps/\(name)", text) }
        for (host, text) in associations { dir.write("state/associations/\(host).json", text) }
    }

    /// Starts a broker (on `socketPath` instead of `socket` when given: clients of `socket` do
    /// not reach it); throws what `Broker.init` throws.
    func start(socketPath: String? = nil, configure: (inout BrokerConfiguration) -> Void = { _ in }) throws {
        var config = BrokerConfiguration(socketPath: socketPath ?? socket, stateDirectory: state)
        config.handleSignals = false
        config.logLevel = .error
        configure(&config)
        let cfg = config
        let ready = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let outcome = Box<Result<BrokerControl, BrokerStartError>?>(nil)
        let thread = Thread {
            let broker: Broker
            do throws(BrokerStartError) { broker = try Broker(config: cfg) } catch {
                outcome.value = .failure(error)
                ready.signal()
                done.signal()
                return
            }
            outcome.value = .success(broker.control)
            ready.signal()
            broker.run()
            done.signal()
        }
        thread.stackSize = 8 << 20
        thread.start()
        ready.wait()
        switch outcome.value! {
        case .success(let c):
            control = c
            finished = done
        case .failure(let e):
            throw e
        }
    }

    /// Stops the broker and waits for its loop to end (records an issue after 10 s).
    func stop() {
        guard let control, let finished else { return }
        self.control = nil
        self.finished = nil
        control.stop()
        if finished.wait(timeout: .now() + 10) == .timedOut { Issue.record("broker did not stop within 10 s") }
    }

    deinit { stop() }

    /// Changes the state while the clients of `socket` cannot reach it: the broker stops, runs
    /// on another socket for `calls` (made there as My App's share extension), stops again and
    /// is back on `socket`.
    func changeWhileAway(_ calls: [(String, JSONValue)]) throws {
        stop()
        let away = dir.path + "/away.sock"
        try start(socketPath: away)
        do {
            let other = try BrokerConnection(socketPath: away)
            try other.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
            for (method, params) in calls { _ = try other.call(method, params) }
        }
        stop()
        try start()
    }

    /// A blocking connection that has said hello (for setting things up from the test side).
    func session(_ role: String, _ bundleID: String? = nil) throws -> BrokerConnection {
        let c = try BrokerConnection(socketPath: socket)
        try c.hello(role: role, bundleID: bundleID)
        return c
    }

    /// An async client on this broker's socket.
    func client(_ role: Role, _ bundleID: String? = nil, reconnect: Bool = false) -> ShareBrokerClient {
        ShareBrokerClient(
            socketPath: socket, role: role, bundleID: bundleID, reconnect: reconnect,
            reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(200)),
            requestTimeout: .seconds(20))
    }
}

/// Collects what an async sequence yields on a background task, so tests can wait with a timeout.
actor Collector<Element: Sendable> {
    private(set) var items: [Element] = []
    private(set) var failure: (any Error)? = nil
    private(set) var finished = false
    private var task: Task<Void, Never>? = nil

    /// Starts collecting `sequence` on a background task.
    static func start<S: AsyncSequence & Sendable>(_ sequence: S) async -> Collector where S.Element == Element {
        let c = Collector()
        let t = Task { await c.consume(sequence) }
        await c.setTask(t)
        return c
    }

    private func consume<S: AsyncSequence & Sendable>(_ sequence: S) async where S.Element == Element {
        do {
            for try await item in sequence { items.append(item) }
            finish(nil)
        } catch {
            finish(error)
        }
    }

    private func setTask(_ t: Task<Void, Never>) { task = t }
    private func finish(_ error: (any Error)?) {
        failure = error
        finished = true
    }

    /// Stops collecting (cancels the iterating task, which ends the stream's iteration).
    func cancel() { task?.cancel() }

    /// Waits until at least `count` items arrived (or the sequence ended, or `seconds` passed);
    /// returns the items so far.
    @discardableResult
    func wait(for count: Int, seconds: Double = 10) async -> [Element] {
        let deadline = Date().addingTimeInterval(seconds)
        while items.count < count && !finished && Date() < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return items
    }

    /// Waits until `condition` holds for the items so far (or the sequence ended, or `seconds`
    /// passed); returns the items so far.
    @discardableResult
    func wait(until condition: @Sendable ([Element]) -> Bool, seconds: Double = 10) async -> [Element] {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition(items) && !finished && Date() < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return items
    }

    /// Waits until the sequence ended (or `seconds` passed); true when it did.
    func waitForEnd(seconds: Double = 10) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !finished && Date() < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        return finished
    }
}

/// SplitMix64: small, deterministic; for property tests.
struct SeededRNG: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The error a throwing async call fails with, as a ShareBrokerError (nil when it succeeds;
/// an error of another type is recorded as an issue).
func brokerError<T>(_ body: () async throws -> T) async -> ShareBrokerError? {
    do {
        _ = try await body()
        return nil
    } catch let e as ShareBrokerError {
        return e
    } catch {
        Issue.record("not a ShareBrokerError: \(error)")
        return nil
    }
}

let appGroup = "group.com.mycompany.myapp"

/// The app of seeds 000/001/003/004: schemes, a universal-link domain, a group, a share extension.
let myAppManifest = """
    {"bundleID": "com.mycompany.myapp", "teamID": "ABCDE12345", "name": "My App",
     "urlSchemes": ["deeplinkmyapp", "DeepLinkingDemo", "stats"],
     "associatedDomains": ["applinks:example.com"],
     "appGroups": ["\(appGroup)"],
     "extensions": [
       {"bundleID": "com.mycompany.myapp.share", "point": "com.apple.share-services", "name": "Send to My App",
        "appGroups": ["\(appGroup)"],
        "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1}},
       {"bundleID": "com.mycompany.myapp.widget", "point": "com.apple.widgetkit-extension", "appGroups": ["\(appGroup)"]}
     ]}
    """

/// A second app whose share extension also takes web URLs (so a tool's share.send is ambiguous).
let otherAppManifest = """
    {"bundleID": "org.other.app", "name": "Other", "urlSchemes": ["otherapp"], "appGroups": ["group.org.other"],
     "extensions": [
       {"bundleID": "org.other.app.share", "point": "com.apple.share-services", "name": "Send to Other",
        "appGroups": ["group.org.other"],
        "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1}}
     ]}
    """

/// example.com gives /computers/* to My App (seed 003).
let exampleAssociation = """
    {"applinks": {"apps": [], "details": [{"appID": "ABCDE12345.com.mycompany.myapp", "paths": ["/computers/*"]}]}}
    """

/// A started broker with the test apps.
func startBroker() throws -> BrokerHarness {
    let h = BrokerHarness(
        manifests: ["10-myapp.json": myAppManifest, "20-other.json": otherAppManifest],
        associations: ["example.com": exampleAssociation])
    try h.start()
    return h
}

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif
import ShareSystem

/// A scripted stand-in for the broker on a Unix socket, for failure cases a real broker does not
/// produce on demand (no answer, a drop mid-call). Blocking; run its script on `run(_:)`'s thread.
final class FakeBroker: @unchecked Sendable {
    let path: String
    private let listener: Int32
    private let lock = NSLock()
    private var _done = false
    private var _log: [String] = []

    init(path: String) throws {
        self.path = path
        listener = try UnixSocket.listen(path: path)
    }

    deinit {
        FD.close(listener)
        unlink(path)
    }

    /// Methods received, in order, as "connection#: method".
    var log: [String] { lock.withLock { _log } }
    /// True once the script returned.
    var done: Bool { lock.withLock { _done } }

    func record(_ s: String) { lock.withLock { _log.append(s) } }

    /// Runs `script` on its own thread.
    func run(_ script: @escaping @Sendable (FakeBroker) -> Void) {
        let t = Thread {
            script(self)
            self.lock.withLock { self._done = true }
        }
        t.start()
    }

    /// Waits for a connection.
    func accept(timeout: Double = 10) -> FakeConnection? {
        var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) > 0 else { return nil }
        guard case .done(let fd)? = try? UnixSocket.accept(listener) else { return nil }
        try? FD.setNonBlocking(fd, false)
        return FakeConnection(fd: fd)
    }
}

/// One accepted connection of a `FakeBroker`.
final class FakeConnection {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(fd: Int32) { self.fd = fd }
    deinit { close() }

    private var closed = false
    func close() {
        guard !closed else { return }
        closed = true
        FD.close(fd)
    }

    /// The next request (parsed), or nil on EOF / timeout.
    func read(timeout: Double = 10) -> JSONValue? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[0..<nl])
                buffer.removeSubrange(0...nl)
                return try? JSONParser.parse(line)
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(left * 1000) + 1) > 0 else { return nil }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return nil }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// Answers request `id` with `result`.
    func reply(_ id: JSONValue?, _ result: JSONValue) { send(replyFrame(id, result)) }

    /// Sends a notification.
    func notify(_ method: String, _ params: JSONValue) { send(notificationFrame(method, params)) }

    /// The frame answering request `id` with `result` (to send several in one write).
    func replyFrame(_ id: JSONValue?, _ result: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        let rid: RequestID
        switch id {
        case .number(let n)?: rid = .number(n)
        case .string(let s)?: rid = .string(s)
        default: rid = .null
        }
        RPCCodec.writeResult(id: rid, result: result, to: &out)
        out.append(0x0A)
        return out
    }

    /// The frame of a notification.
    func notificationFrame(_ method: String, _ params: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        RPCCodec.writeRequest(id: nil, method: method, params: params, to: &out)
        out.append(0x0A)
        return out
    }

    /// Sends bytes as they are, in one write.
    func send(_ bytes: [UInt8]) { try? FD.sendAll(fd, bytes) }

    /// Reads `hello` and answers it as a tool session (saying `maxMessage` when given).
    func answerHello(maxMessage: Int? = nil) -> Bool {
        guard let req = read(), req["method"]?.stringValue == "hello" else { return false }
        var result: JSONObject = ["protocol": 1, "broker": ["name": "fake", "version": "0"], "session": 1, "role": "tool"]
        if let maxMessage { result["maxMessage"] = .int(maxMessage) }
        reply(req["id"], .object(result))
        return true
    }
}

/// Waits (polling every 10 ms, without blocking a thread) until `condition` holds or `seconds` pass.
func eventually(_ seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}
