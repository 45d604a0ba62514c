// Helpers shared by the conformance and lifecycle tests: raw framing readers, error assertions,
// manifest builders and a real `sharebroker serve` child process.

import Foundation
import ShareClient
import ShareProtocol
import XCTest

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

// MARK: JSON-RPC helpers

/// The `error` object of a response, as (code, message); nil when the response is not an error.
func errorOf(_ response: JSONValue?) -> (code: Int, message: String)? {
    guard let e = response?["error"], let code = e["code"]?.intValue, let message = e["message"]?.stringValue else {
        return nil
    }
    return (code, message)
}

/// Asserts that `response` is an error response with `code` and the given id.
func assertErrorResponse(
    _ response: JSONValue?, code: Int, id: JSONValue?, messageContains: String? = nil,
    file: StaticString = #filePath, line: UInt = #line
) {
    guard let response else { return XCTFail("no response (EOF or timeout)", file: file, line: line) }
    XCTAssertEqual(response["jsonrpc"], "2.0", "jsonrpc member in \(response.compactText)", file: file, line: line)
    guard let (c, m) = errorOf(response) else {
        return XCTFail("expected an error \(code), got \(response.compactText)", file: file, line: line)
    }
    XCTAssertEqual(c, code, "error code in \(response.compactText)", file: file, line: line)
    if let id { XCTAssertEqual(response["id"], id, "id in \(response.compactText)", file: file, line: line) }
    XCTAssertNil(response["result"], "an error response has no result: \(response.compactText)", file: file, line: line)
    if let messageContains {
        XCTAssertTrue(
            m.lowercased().contains(messageContains.lowercased()), "message '\(m)' should mention '\(messageContains)'",
            file: file, line: line)
    }
}

/// Asserts that `response` is a success response with the given id; returns its result.
@discardableResult
func assertResultResponse(
    _ response: JSONValue?, id: JSONValue, file: StaticString = #filePath, line: UInt = #line
) -> JSONValue? {
    guard let response else {
        XCTFail("no response (EOF or timeout)", file: file, line: line)
        return nil
    }
    XCTAssertEqual(response["jsonrpc"], "2.0", "jsonrpc member in \(response.compactText)", file: file, line: line)
    XCTAssertEqual(response["id"], id, "id in \(response.compactText)", file: file, line: line)
    XCTAssertNil(response["error"], "unexpected error: \(response.compactText)", file: file, line: line)
    XCTAssertNotNil(response["result"], "no result in \(response.compactText)", file: file, line: line)
    return response["result"]
}

/// Runs a client call expected to fail with a JSON-RPC error; returns the error.
@discardableResult
func expectRPCError(
    _ code: Int, messageContains: String? = nil, file: StaticString = #filePath, line: UInt = #line,
    _ body: () throws -> Any
) -> RPCError? {
    do {
        let v = try body()
        XCTFail("expected error \(code), got a result: \(v)", file: file, line: line)
        return nil
    } catch ClientError.rpc(let e) {
        XCTAssertEqual(e.code, code, "error code (message: \(e.message))", file: file, line: line)
        if let messageContains {
            XCTAssertTrue(
                e.message.lowercased().contains(messageContains.lowercased()),
                "message '\(e.message)' should mention '\(messageContains)'", file: file, line: line)
        }
        return e
    } catch {
        XCTFail("expected JSON-RPC error \(code), got \(error)", file: file, line: line)
        return nil
    }
}

/// One request as a compact JSON line (newline framing).
func requestLine(id: String, method: String, params: String? = nil) -> String {
    var s = #"{"jsonrpc":"2.0","id":\#(id),"method":"\#(method)""#
    if let params { s += #","params":\#(params)"# }
    return s + "}\n"
}

// MARK: Content-Length framing

extension RawClient {
    /// Reads one Content-Length framed message: (the header section text, the parsed body).
    /// Nil on EOF/timeout or when the bytes waiting are not a header frame.
    func readContentLengthFrame(timeout: Double = 5) -> (header: String, body: JSONValue?)? {
        let deadline = Date().addingTimeInterval(timeout)
        let sep: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
        while true {
            if let end = indexOf(sep, in: buffer) {
                let header = String(decoding: buffer[0..<end], as: UTF8.self)
                var length: Int? = nil
                for line in header.components(separatedBy: "\r\n") {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    if parts.count == 2, parts[0].lowercased() == "content-length" {
                        length = Int(parts[1].trimmingCharacters(in: .whitespaces))
                    }
                }
                guard let length else { return nil }
                let start = end + 4
                if buffer.count - start >= length {
                    let body = Array(buffer[start..<(start + length)])
                    buffer.removeSubrange(0..<(start + length))
                    return (header, try? JSONParser.parse(body))
                }
            }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 || !fill(timeout: left) { return nil }
        }
    }

    /// Sends a body with a Content-Length header (and optional extra header lines).
    func sendFramed(_ body: String, extraHeaders: [String] = []) {
        let b = Array(body.utf8)
        var h = "Content-Length: \(b.count)\r\n"
        for x in extraHeaders { h += x + "\r\n" }
        h += "\r\n"
        send(Array(h.utf8) + b)
    }

    /// Reads messages until EOF/timeout; returns them (parsed lines).
    func readAllJSON(timeout: Double = 2) -> [JSONValue] {
        var out: [JSONValue] = []
        while let v = readJSON(timeout: timeout) { out.append(v) }
        return out
    }
}

func indexOf(_ needle: [UInt8], in hay: [UInt8]) -> Int? {
    guard hay.count >= needle.count else { return nil }
    var i = 0
    while i + needle.count <= hay.count {
        if hay[i] == needle[0] && Array(hay[i..<(i + needle.count)]) == needle { return i }
        i += 1
    }
    return nil
}

// MARK: Manifests

/// A minimal app manifest text.
func manifestJSON(
    _ bundleID: String, name: String? = nil, schemes: [String] = [], groups: [String] = [], token: String? = nil,
    extensions: [String] = []
) -> String {
    var o: JSONObject = ["bundleID": .string(bundleID)]
    if let name { o["name"] = .string(name) }
    o["urlSchemes"] = .array(schemes.map { .string($0) })
    o["appGroups"] = .array(groups.map { .string($0) })
    if let token { o["token"] = .string(token) }
    var text = JSONValue.object(o).compactText
    if !extensions.isEmpty {
        text.removeLast()
        text += #","extensions":[\#(extensions.joined(separator: ","))]}"#
    }
    return text
}

// MARK: Files

func fileMode(_ path: String) -> mode_t? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return st.st_mode
}

func isSocketFile(_ path: String) -> Bool {
    guard let m = fileMode(path) else { return false }
    return (m & S_IFMT) == S_IFSOCK
}

// MARK: A real broker process

/// `sharebroker serve` as a child process; killed (SIGKILL) on deinit if still running.
final class BrokerProcess {
    let process = Process()
    let socket: String
    let stderrPath: String
    let stdoutPath: String

    init(
        socket: String, state: String, extraArgs: [String] = [], env: [String: String] = [:], logDir: String,
        cwd: String? = nil, runVia wrapper: [String] = []
    ) throws {
        self.socket = socket
        stderrPath = logDir + "/broker-\(UUID().uuidString.prefix(8)).err"
        stdoutPath = stderrPath + ".out"
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        // (`wrapper`: a program that execs the broker, as `setpriv --groups 4`; same pid)
        process.executableURL = URL(fileURLWithPath: wrapper.first ?? Products.sharebroker)
        process.arguments =
            (wrapper.isEmpty ? [] : wrapper.dropFirst() + [Products.sharebroker]) + ["serve", "--socket", socket, "--state", state] + extraArgs
        var e = ProcessInfo.processInfo.environment
        for (k, v) in env { e[k] = v }
        process.environment = e
        if let cwd { process.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        process.standardInput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        process.standardOutput = FileHandle(forWritingAtPath: stdoutPath)
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// Waits until the socket answers `broker.status`.
    func waitReady(timeout: Double = 10) -> Bool {
        waitUntil(timeout: timeout) {
            if !process.isRunning { return true }
            guard let c = try? BrokerConnection(socketPath: socket) else { return false }
            return (try? c.call("broker.status", timeoutMillis: 1000)) != nil
        } && process.isRunning
    }

    func signal(_ sig: Int32) { kill(pid, sig) }

    /// Waits for the process to exit; true when it did within the timeout.
    func waitExit(timeout: Double = 5) -> Bool {
        waitUntil(timeout: timeout) { !process.isRunning }
    }

    var stderrText: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    deinit {
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }
}
