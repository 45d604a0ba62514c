// share.read: the bytes of a pending share's file item through the socket, for an app that
// cannot open the item's path (a broker of another user keeps its group directory to itself).

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

final class ShareReadTests: XCTestCase {
    /// A share of one URL and one 2.5 MiB PDF (random bytes after the header), sent by the PDF
    /// extension; its id and the PDF's bytes.
    func sendPDF(_ h: BrokerHarness, size: Int = 5 << 19) throws -> (String, [UInt8]) {
        let random = try XCTUnwrap(FileHandle(forReadingAtPath: "/dev/urandom")).readData(ofLength: max(0, size - pdfBytes.count))
        let bytes = pdfBytes + [UInt8](random)
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.example.pdfreader.share")
        let r = try ext.call(
            "share.send", ["items": [["data": .string(base64(bytes)), "name": "big.pdf"], ["data": .string(base64(pdfBytes)), "name": "small.pdf"]]])
        return (try XCTUnwrap(r["shareID"]?.stringValue), bytes)
    }

    func testAFileItemIsReadInChunksAndWhole() throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start()
        defer { h.stop() }
        let (id, bytes) = try sendPDF(h)
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        // The default chunk: 1 MiB from 0.
        let first = try app.call("share.read", ["shareID": .string(id), "item": 0])
        XCTAssertEqual(Data(base64Encoded: try XCTUnwrap(first["data"]?.stringValue)).map { [UInt8]($0) }, Array(bytes[0..<(1 << 20)]))
        XCTAssertEqual(first["size"]?.intValue, bytes.count)
        XCTAssertEqual(first["offset"]?.intValue, 0)
        XCTAssertEqual(first["eof"], false)
        // A chunk that reaches the end; one past it.
        let tail = try app.call("share.read", ["shareID": .string(id), "item": 0, "offset": .int(bytes.count - 10), "length": 100])
        XCTAssertEqual(Data(base64Encoded: try XCTUnwrap(tail["data"]?.stringValue)).map { [UInt8]($0) }, Array(bytes.suffix(10)))
        XCTAssertEqual(tail["eof"], true)
        let past = try app.call("share.read", ["shareID": .string(id), "item": 0, "offset": .int(bytes.count + 5)])
        XCTAssertEqual(past["data"], "")
        XCTAssertEqual(past["eof"], true)
        // The second item.
        let small = try app.call("share.read", ["shareID": .string(id), "item": 1])
        XCTAssertEqual(small["data"]?.stringValue, base64(pdfBytes))
    }

    /// A read's reply counts against the connection's output cap before it is made: it gets what
    /// fits (the review: 260 connections that each asked for 4 MiB and read nothing held 1.6 GB).
    func testAReadGetsWhatFitsUnderTheOutputCap() throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start { $0.maxOutputBuffer = 64 * 1024 }
        defer { h.stop() }
        let (id, bytes) = try sendPDF(h, size: 200 * 1024)
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        var got: [UInt8] = []
        var reads = 0
        while true {
            let r = try app.call("share.read", ["shareID": .string(id), "item": 0, "offset": .int(got.count), "length": .int(4 << 20)])
            let chunk = [UInt8](try XCTUnwrap(Data(base64Encoded: try XCTUnwrap(r["data"]?.stringValue))))
            XCTAssertLessThanOrEqual(chunk.count, 48 * 1024, "a reply fits under the 64 KiB cap")
            XCTAssertFalse(chunk.isEmpty)
            got += chunk
            reads += 1
            if r["eof"] == true { break }
        }
        XCTAssertEqual(got, bytes)
        XCTAssertGreaterThanOrEqual(reads, 5)
    }

    /// A batch's earlier replies count against the cap too (the review: a batch of four 4 MiB
    /// reads got two replies of a whole cap each).
    func testABatchOfReadsStaysUnderTheOutputCap() throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        let cap = 64 * 1024
        try h.start { $0.maxOutputBuffer = cap }
        defer { h.stop() }
        let (id, _) = try sendPDF(h, size: 400 * 1024)
        let reader = try h.rawSession(role: "app", bundleID: "com.example.pdfreader")
        let members = (0..<4).map { i in
            rpcRequest(10 + i, "share.read", ["shareID": .string(id), "item": 0, "offset": .int(i * 100_000), "length": .int(4 << 20)])
        }
        reader.send(JSONValue.array(members).compactText + "\n")
        let reply = try XCTUnwrap(reader.readJSON(timeout: 10)?.arrayValue)
        XCTAssertEqual(reply.count, 4)
        XCTAssertNotNil(reply[0]["result"]?["data"])
        XCTAssertEqual(reply.dropFirst().map { $0["error"]?["code"]?.intValue }, [-32007, -32007, -32007])
        XCTAssertLessThanOrEqual(JSONValue.array(reply).compactText.utf8.count, cap + 2048, "the batch's reply stays about the cap")
    }

    /// A share completed (by another connection) while its file is read: -32002, not a storage
    /// fault (the review).
    func testAShareCompletedWhileItIsReadIsNotFound() throws {
        let gate = WorkGate()
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start { $0.offLoopGate = gate.gate }
        defer { h.stop() }
        gate.release()  // (the share's own file write passes)
        let (id, _) = try sendPDF(h, size: 100)
        gate.waitForWork("the share's file write")
        let reader = try h.rawSession(role: "app", bundleID: "com.example.pdfreader")
        reader.send(rpcRequest(5, "share.read", ["shareID": .string(id), "item": 0]).compactText + "\n")
        gate.waitForWork("the read")
        let other = try h.connect()
        try other.hello(role: "app", bundleID: "com.example.pdfreader")
        XCTAssertEqual(try other.call("share.complete", ["shareID": .string(id)])["completed"], true)
        gate.release()
        let reply = try XCTUnwrap(reader.readJSON(timeout: 10))
        XCTAssertEqual(reply["error"]?["code"]?.intValue, -32002, reply.compactText)
        XCTAssertTrue(reply["error"]?["message"]?.stringValue?.contains("was completed while it was read") ?? false, reply.compactText)
    }

    /// The client library reads a whole item a chunk at a time, and one chunk as asked.
    func testTheClientLibraryReadsAnItem() async throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start()
        defer { h.stop() }
        let (id, bytes) = try sendPDF(h)
        let client = ShareBrokerClient(socketPath: h.socket, role: .app, bundleID: "com.example.pdfreader")
        try await client.connect()
        let whole = try await client.shareItemBytes(id, item: 0)
        XCTAssertEqual(whole, bytes)
        let chunk = try await client.shareRead(id, item: 0, offset: 7, length: 5)
        XCTAssertEqual(chunk, try ShareChunk(json: ["data": .string(base64(Array(bytes[7..<12]))), "offset": 7, "size": .int(bytes.count), "eof": false]))
        await client.close()
    }

    func testShareReadErrors() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": pdfApp])
        try h.start()
        defer { h.stop() }
        let (id, _) = try sendPDF(h, size: 100)
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        func code(_ params: JSONValue, _ conn: BrokerConnection? = nil) -> (Int?, String) {
            let e = rpcError { _ = try (conn ?? app).call("share.read", params) }
            return (e?.code, e?.message ?? "")
        }
        XCTAssertEqual(code(["shareID": .string(id)]).0, -32602, "item is required")
        let range = code(["shareID": .string(id), "item": 2])
        XCTAssertEqual(range.0, -32602)
        XCTAssertTrue(range.1.contains("one of the share's 2 items (0 to 1), got 2"), range.1)
        XCTAssertEqual(code(["shareID": .string(id), "item": -1]).0, -32602)
        XCTAssertEqual(code(["shareID": .string(id), "item": 0, "offset": -1]).0, -32602)
        let tooLong = code(["shareID": .string(id), "item": 0, "length": .int(4 << 20 + 1)])
        XCTAssertEqual(tooLong.0, -32602)
        XCTAssertTrue(tooLong.1.contains("'length' must be an integer from 0 to 4194304"), tooLong.1)
        XCTAssertEqual(code(["shareID": "sh-nope", "item": 0]).0, -32002)
        // Another app's group: -32001; a tool: -32001 (a tool reads no group).
        let other = try h.connect()
        try other.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(code(["shareID": .string(id), "item": 0], other).0, -32001)
        XCTAssertEqual(code(["shareID": .string(id), "item": 0], try h.tool()).0, -32001)
        // A URL item is no file.
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        let urlShare = try XCTUnwrap(ext.call("share.send", ["items": [["url": "https://www.youtube.com/watch?v=x"]]])["shareID"]?.stringValue)
        let notFile = code(["shareID": .string(urlShare), "item": 0], other)
        XCTAssertEqual(notFile.0, -32602)
        XCTAssertTrue(notFile.1.contains("is not a file"), notFile.1)
    }

    /// The case share.read is for: an app of another user than the broker's (root, the socket
    /// opened with --socket-mode) cannot open the share's path, and reads the bytes through the
    /// socket.
    func testAnAppOfAnotherUserReadsItsShareThroughTheSocket() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run a client as another user") }
        let manifest = pdfApp.replacingOccurrences(of: #""urlSchemes": ["pdfreader"],"#, with: #""urlSchemes": ["pdfreader"], "uids": [65534],"#)
            .replacingOccurrences(of: #""name": "Import PDF","#, with: #""name": "Import PDF", "uids": [0],"#)
        let h = BrokerHarness(manifests: ["20-pdf.json": manifest])
        try h.start { $0.socketMode = 0o666 }
        defer { h.stop() }
        chmod(h.dir.path, 0o755)
        let (id, bytes) = try sendPDF(h)
        let out = TempDir()
        chmod(out.path, 0o777)
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", Products.shareclient, "--socket", h.socket]
        let get = try runProcess("/usr/bin/setpriv", asNobody + ["get", id, "--as", "com.example.pdfreader", "--json"])
        XCTAssertEqual(get.status, 0, get.err)
        let path = try XCTUnwrap(try JSONParser.parse(get.out)["items"]?.arrayValue?.first?["path"]?.stringValue)
        XCTAssertEqual(try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/cat", path]).status, 1,
            "the group directory is the broker's")
        let read = try runProcess("/usr/bin/setpriv", asNobody + ["read", id, "0", "--as", "com.example.pdfreader", "--output", out.path + "/copy.pdf"])
        XCTAssertEqual(read.status, 0, read.err)
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: out.path + "/copy.pdf"))), bytes)
    }

    /// `shareclient read` writes the item's bytes to stdout or to --output; a bad index is a
    /// usage error.
    func testShareclientReadWritesTheBytes() throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start()
        defer { h.stop() }
        let (id, bytes) = try sendPDF(h)
        let dir = TempDir()
        let out = dir.path + "/copy.pdf"
        let args = ["--socket", h.socket, "read", id, "0", "--as", "com.example.pdfreader"]
        let r = try runProcess(Products.shareclient, args + ["--output", out])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: out))), bytes)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Products.shareclient)
        p.arguments = ["--socket", h.socket, "read", id, "1", "--as", "com.example.pdfreader"]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        XCTAssertEqual([UInt8](data), pdfBytes)
        let bad = try runProcess(Products.shareclient, ["--socket", h.socket, "read", id, "first", "--as", "com.example.pdfreader"])
        XCTAssertEqual(bad.status, 64, bad.err)
        let missing = try runProcess(Products.shareclient, ["--socket", h.socket, "read", id, "7", "--as", "com.example.pdfreader"])
        XCTAssertEqual(missing.status, 1, missing.err)
        XCTAssertTrue(missing.err.contains("0 to 1"), missing.err)
        // --json with --output says what was written; a failed read leaves the file as it was.
        let json = try runProcess(Products.shareclient, args + ["--output", out, "--json"])
        XCTAssertEqual(json.status, 0, json.err)
        XCTAssertEqual(try JSONParser.parse(json.out.trimmingCharacters(in: .whitespacesAndNewlines)), ["file": .string(out), "bytes": .int(bytes.count)])
        chmod(out, 0o640)
        let failed = try runProcess(Products.shareclient, ["--socket", h.socket, "read", id, "7", "--as", "com.example.pdfreader", "--output", out])
        XCTAssertEqual(failed.status, 1, failed.err)
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: out))), bytes, "not truncated by a read that was refused")
        let refusedNew = try runProcess(Products.shareclient, ["--socket", h.socket, "read", id, "7", "--as", "com.example.pdfreader", "--output", dir.path + "/new.pdf"])
        XCTAssertEqual(refusedNew.status, 1, refusedNew.err)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), ["copy.pdf"], "a refused read creates nothing")
        let text = try runProcess(Products.shareclient, args + ["--output", out])
        XCTAssertEqual(text.status, 0, text.err)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: out)[.posixPermissions] as? Int, 0o640, "an overwritten file keeps its mode")
        // A symlink is written through (its target gets the bytes), as any writer does.
        let target = dir.path + "/target.pdf"
        dir.write("target.pdf", "old")
        XCTAssertEqual(symlink(target, dir.path + "/link.pdf"), 0)
        XCTAssertEqual(try runProcess(Products.shareclient, args + ["--output", dir.path + "/link.pdf"]).status, 0)
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: target))), bytes)
        // Without --output the bytes are stdout: --json has nowhere to go.
        XCTAssertEqual(try runProcess(Products.shareclient, args + ["--json"]).status, 64)
    }
}
