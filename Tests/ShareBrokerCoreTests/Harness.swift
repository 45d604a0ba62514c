// Test support: an in-process broker on a temporary state directory and short socket path,
// running its loop on its own thread, plus paths to the built executables for end-to-end tests.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

/// A temporary directory with a short path (sun_path is ~108 bytes), removed on deinit.
final class TempDir {
    let path: String
    init() {
        var template = Array("/tmp/sbtest-XXXXXX".utf8CString)
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

final class Box<T>: @unchecked Sendable {  // handed from the broker thread once, under a semaphore
    var value: T
    init(_ v: T) { value = v }
}

/// An in-process broker for one test.
final class BrokerHarness {
    let dir = TempDir()
    var socket: String { dir.path + "/s.sock" }
    var state: String { dir.path + "/state" }
    private(set) var control: BrokerControl? = nil
    private let finished = DispatchSemaphore(value: 0)
    private var running = false

    /// Writes manifests (file name → JSON text) under STATE/apps before starting.
    init(manifests: [String: String] = [:], associations: [String: String] = [:]) {
        for (name, text) in manifests { dir.write("state/apps/\(name)", text) }
        for (host, text) in associations { dir.write("state/associations/\(host).json", text) }
    }

    /// Starts the broker; throws what `Broker.init` throws.
    func start(_ configure: (inout BrokerConfiguration) -> Void = { _ in }) throws {
        var config = BrokerConfiguration(socketPath: socket, stateDirectory: state)
        config.handleSignals = false
        config.logLevel = .error
        configure(&config)
        let cfg = config
        let ready = DispatchSemaphore(value: 0)
        let outcome = Box<Result<BrokerControl, BrokerStartError>?>(nil)
        let done = finished
        let thread = Thread {
            let broker: Broker
            do { broker = try Broker(config: cfg) } catch {
                outcome.value = .failure(error as! BrokerStartError)
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
            running = true
        case .failure(let e):
            throw e
        }
    }

    /// Stops the broker and waits for its loop to end (fails the test after 10 s).
    func stop() {
        guard running else { return }
        running = false
        control?.stop()
        if finished.wait(timeout: .now() + 10) == .timedOut { XCTFail("broker did not stop within 10 s") }
    }

    deinit { stop() }

    func connect() throws -> BrokerConnection { try BrokerConnection(socketPath: socket) }

    /// A raw line connection that has said hello (as a tool unless a bundle is given).
    func rawSession(role: String = "tool", bundleID: String? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> RawClient {
        let c = try RawClient(socket)
        var params: JSONObject = ["role": .string(role)]
        if let bundleID { params["bundleID"] = .string(bundleID) }
        c.send(rpcRequest(0, "hello", .object(params)).compactText + "\n")
        let hello = c.readJSON()?["result"]
        XCTAssertNotNil(hello, "hello", file: file, line: line)
        c.session = hello?["session"]?.intValue
        return c
    }

    /// A connection that has said hello as a tool.
    func tool() throws -> BrokerConnection {
        let c = try connect()
        try c.hello(role: "tool")
        return c
    }
}

// Raw socket calls that differ between Glibc and Darwin (no MSG_NOSIGNAL on Darwin: the socket
// gets SO_NOSIGPIPE instead).
#if canImport(Glibc)
    func rawStreamSocket() -> Int32 { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0) }
    func rawConnect(_ fd: Int32, _ a: UnsafePointer<sockaddr>, _ len: socklen_t) -> Int32 { Glibc.connect(fd, a, len) }
    func rawSend(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Glibc.send(fd, p, n, Int32(MSG_NOSIGNAL)) }
#else
    func rawStreamSocket() -> Int32 {
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        return fd
    }
    func rawConnect(_ fd: Int32, _ a: UnsafePointer<sockaddr>, _ len: socklen_t) -> Int32 { Darwin.connect(fd, a, len) }
    func rawSend(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Darwin.send(fd, p, n, 0) }
#endif

/// A JSON-RPC request object (for raw connections and batches).
func rpcRequest(_ id: Int, _ method: String, _ params: JSONValue) -> JSONValue {
    ["jsonrpc": "2.0", "id": .int(id), "method": .string(method), "params": params]
}

/// Raw line-oriented socket for protocol tests: send bytes, read lines with a timeout.
final class RawClient {
    let fd: Int32
    var buffer: [UInt8] = []
    /// Its broker session (`hello`'s `session`), once `BrokerHarness.rawSession` said hello.
    var session: Int? = nil

    init(_ path: String) throws {
        fd = rawStreamSocket()
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let b = Array(path.utf8)
            raw.copyBytes(from: b)
            raw[b.count] = 0
        }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { rawConnect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if r != 0 { throw NSError(domain: "connect", code: Int(errno)) }
    }
    deinit { close(fd) }

    func send(_ s: String) { send(Array(s.utf8)) }
    func send(_ bytes: [UInt8]) {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { rawSend(fd, $0.baseAddress! + off, bytes.count - off) }
            if n <= 0 { return }
            off += n
        }
    }
    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Reads until `count` bytes or more are buffered, or EOF/timeout. Returns false on EOF.
    @discardableResult
    func fill(timeout: Double = 5) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) > 0 else { return false }
        var buf = [UInt8](repeating: 0, count: 65536)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { return false }
        buffer.append(contentsOf: buf[0..<n])
        return true
    }

    /// Next newline-terminated line, parsed as JSON; nil on EOF/timeout.
    func readJSON(timeout: Double = 5) -> JSONValue? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[0..<nl])
                buffer.removeSubrange(0...nl)
                return try? JSONParser.parse(line)
            }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 || !fill(timeout: left) { return nil }
        }
    }

    /// What `next(timeout:)` found.
    enum Next: Equatable {
        /// A line (parsed; nil when it is not JSON).
        case message(JSONValue?)
        /// Nothing came within the timeout, and the connection is still open.
        case timeout
        /// The broker closed the connection (end of stream, or the read failed).
        case closed
    }

    /// The next newline-terminated line within `timeout`, telling a connection that stayed open
    /// but quiet (`.timeout`) from one the broker closed (`.closed`), which `readJSON` does not
    /// (nil for both). A "nothing more arrives" check asserts `.timeout`: a connection the broker
    /// closed gives nothing more either, but does not pass it.
    func next(timeout: Double) -> Next {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[0..<nl])
                buffer.removeSubrange(0...nl)
                return .message(try? JSONParser.parse(line))
            }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return .timeout }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = poll(&pfd, 1, Int32((left * 1000).rounded(.up)))
            if r == 0 { return .timeout }
            if r < 0 {
                if errno == EINTR { continue }
                return .closed
            }
            var buf = [UInt8](repeating: 0, count: 65536)
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return .closed }
            buffer.append(contentsOf: buf[0..<n])
        }
    }

    /// Asserts that nothing arrives within `timeout` while the connection stays open (a
    /// connection the broker closed fails it, as does any message).
    func assertNothingMore(
        timeout: Double, _ message: String = "nothing more arrives", file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(
            next(timeout: timeout), .timeout, "\(message) (and the connection stays open)", file: file, line: line)
    }

    /// True when the broker closes the connection within the timeout (EOF).
    func waitForClose(timeout: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while deadline.timeIntervalSinceNow > 0 {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) >= 0 else { return true }
            if pfd.revents == 0 { continue }
            var buf = [UInt8](repeating: 0, count: 65536)
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return true }
            buffer.append(contentsOf: buf[0..<n])
        }
        return false
    }
}

extension BrokerConnection {
    /// Asserts that no notification arrives within `timeoutMillis` while the connection stays
    /// open: `nextNotification` must time out (`ClientError.timeout`). A notification fails it,
    /// and so do the end of the stream (nil) and the broker's reason for closing the connection
    /// (an error without an id, thrown as `.rpc`), which a bare `XCTAssertThrowsError` took for
    /// "nothing more".
    func assertNothingMore(
        timeoutMillis: Int32, _ message: String = "nothing more arrives",
        file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let n = try nextNotification(timeoutMillis: timeoutMillis)
            let got =
                n.map { "\($0.method) \($0.params?.compactText ?? "")" }
                ?? "the end of the stream (the broker closed the connection)"
            XCTFail("\(message): got \(got)", file: file, line: line)
        } catch ClientError.timeout {
            // nothing came, and the connection is still open
        } catch {
            XCTFail("\(message): \(error) (the connection did not stay open)", file: file, line: line)
        }
    }
}

/// How many times a latency bound in a test is stretched: 4 when the tests run under
/// AddressSanitizer or ThreadSanitizer (`swift test --sanitize=…`, found by their runtimes'
/// exported entry points), which make the broker 5–20 times slower; else 1.
let sanitizerSlowdown: Double = {
    for symbol in ["__tsan_init", "__asan_init"] where dlsym(nil, symbol) != nil { return 4 }
    return 1
}()

/// Paths of the built executables (next to the test bundle).
enum Products {
    static var directory: String {
        // .build/<config>/sharebrokerPackageTests.xctest → .build/<config>
        let bundle = Bundle.main.bundlePath
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // (on macOS the tests run inside Xcode's `xctest` or SwiftPM's testing helper: the main
        // bundle and argv[0] are theirs; the .xctest bundle holding this code is in .build/<config>)
        let testBundle = URL(fileURLWithPath: Bundle(for: TempDir.self).bundlePath).deletingLastPathComponent()
        for candidate in [URL(fileURLWithPath: bundle), URL(fileURLWithPath: bundle).deletingLastPathComponent(), url, testBundle] {
            if FileManager.default.fileExists(atPath: candidate.appendingPathComponent("sharebroker").path) {
                return candidate.path
            }
        }
        // Walk up from the test binary.
        for _ in 0..<4 {
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("sharebroker").path) { return url.path }
            url = url.deletingLastPathComponent()
        }
        return url.path
    }
    static var sharebroker: String { directory + "/sharebroker" }
    static var shareclient: String { directory + "/shareclient" }
}

/// Runs a process to completion with a timeout; returns (status, stdout, stderr).
@discardableResult
func runProcess(
    _ path: String, _ args: [String], env: [String: String]? = nil, timeout: Double = 30
) throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    if let env {
        var e = ProcessInfo.processInfo.environment
        for (k, v) in env { e[k] = v }
        p.environment = e
    }
    let out = Pipe()
    let err = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = FileHandle.nullDevice
    try p.run()
    let outData = Box(Data())
    let errData = Box(Data())
    let group = DispatchGroup()
    group.enter()
    DispatchQueue.global().async {
        outData.value = out.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    group.enter()
    DispatchQueue.global().async {
        errData.value = err.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    let deadline = Date().addingTimeInterval(timeout)
    while p.isRunning && Date() < deadline { usleep(10_000) }
    if p.isRunning {
        p.terminate()
        p.waitUntilExit()
        throw NSError(domain: "timeout: \(path) \(args)", code: 1)
    }
    p.waitUntilExit()
    group.wait()
    return (p.terminationStatus, String(decoding: outData.value, as: UTF8.self), String(decoding: errData.value, as: UTF8.self))
}

/// Waits until `condition` holds (polling every 10 ms) or the timeout passes.
func waitUntil(timeout: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

extension BrokerHarness {
    /// How many requests the broker has run for the connections `picked` chooses (their
    /// `requests` in `broker.status {verbose: true}`, summed), asked on `observer`; nil when it
    /// cannot say.
    func requestsRun(asking observer: BrokerConnection, of picked: (JSONValue) -> Bool) -> Int? {
        guard let clients = (try? observer.call("broker.status", ["verbose": true]))?["clients"]?.arrayValue else { return nil }
        return clients.filter(picked).reduce(0) { $0 + ($1["requests"]?.intValue ?? 0) }
    }

    /// How many requests the broker has run for the connections of `bundleID`, asked on `observer`.
    func requestsRun(by bundleID: String, asking observer: BrokerConnection) -> Int? {
        requestsRun(asking: observer) { $0["bundleID"]?.stringValue == bundleID }
    }

    /// Sends (`send`: requests written on raw connections of `bundleID`) and waits until the broker
    /// has run `count` more requests of those connections: their handlers have run (what they store
    /// joins the next commit), not merely been written to the socket. A loop slowed down by a
    /// loaded machine may take longer than any sleep; false after `timeout` seconds.
    func sendAndWaitUntilRun(
        _ count: Int, of bundleID: String, asking observer: BrokerConnection, timeout: Double = 10, _ send: () -> Void
    ) -> Bool {
        sendAndWaitUntilRun(count, asking: observer, timeout: timeout, of: { $0["bundleID"]?.stringValue == bundleID }, send)
    }

    /// The same for the requests written on one raw connection (`rawSession`'s, which knows its
    /// session: a tool's has no bundle ID to tell it by).
    func sendAndWaitUntilRun(
        _ count: Int, on connection: RawClient, asking observer: BrokerConnection, timeout: Double = 10, _ send: () -> Void
    ) -> Bool {
        guard let session = connection.session else { return false }
        return sendAndWaitUntilRun(count, asking: observer, timeout: timeout, of: { $0["session"]?.intValue == session }, send)
    }

    private func sendAndWaitUntilRun(
        _ count: Int, asking observer: BrokerConnection, timeout: Double, of picked: (JSONValue) -> Bool, _ send: () -> Void
    ) -> Bool {
        guard let before = requestsRun(asking: observer, of: picked) else { return false }
        send()
        return waitUntil(timeout: timeout) { (self.requestsRun(asking: observer, of: picked) ?? 0) >= before + count }
    }
}
