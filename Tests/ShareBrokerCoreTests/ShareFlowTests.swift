// The share-extension flow through the real socket: seed 000 (a YouTube link from a share
// extension into its app) and seed 002 (PDFs through share/action extensions), rule rejection,
// file safety, group access, limits, and no half share after a failed or interrupted write.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareSystem
import XCTest

let youtubeApp = """
    {"bundleID": "com.mycompany.myapp", "name": "My App", "urlSchemes": ["deeplinkmyapp"],
     "appGroups": ["group.com.mycompany.myapp"],
     "extensions": [{"bundleID": "com.mycompany.myapp.share", "point": "com.apple.share-services",
                     "name": "Send to My App", "appGroups": ["group.com.mycompany.myapp"],
                     "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1}}]}
    """
let pdfApp = """
    {"bundleID": "com.example.pdfreader", "urlSchemes": ["pdfreader"], "appGroups": ["group.com.example.pdf"],
     "extensions": [
       {"bundleID": "com.example.pdfreader.share", "point": "com.apple.share-services", "name": "Import PDF",
        "appGroups": ["group.com.example.pdf"],
        "activationRule": "SUBQUERY(extensionItems, $extensionItem, SUBQUERY($extensionItem.attachments, $attachment, ANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO \\"com.adobe.pdf\\").@count == $extensionItem.attachments.@count).@count >= 1"},
       {"bundleID": "com.example.pdfreader.widget", "point": "com.apple.widgetkit-extension", "appGroups": ["group.com.example.pdf"]}
     ]}
    """

let pdfBytes: [UInt8] = Array("%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n".utf8)

func base64(_ b: [UInt8]) -> String { Data(b).base64EncodedString() }

/// The RPC error a call fails with, or nil when it succeeds (or fails otherwise).
func rpcError(_ block: () throws -> Void) -> RPCError? {
    do {
        try block()
        return nil
    } catch let e as ClientError {
        if case .rpc(let r) = e { return r }
        return nil
    } catch {
        return nil
    }
}

final class ShareFlowTests: XCTestCase {
    func start(_ configure: @escaping (inout BrokerConfiguration) -> Void = { _ in }) throws -> BrokerHarness {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "20-pdf.json": pdfApp])
        try h.start(configure)
        return h
    }

    func session(_ h: BrokerHarness, _ role: String, _ bundle: String) throws -> BrokerConnection {
        let c = try h.connect()
        try c.hello(role: role, bundleID: bundle)
        return c
    }

    func testSeed000YouTubeLinkIntoTheApp() throws {
        let h = try start()
        let ext = try session(h, "extension", "com.mycompany.myapp.share")
        let youtube = "https://youtu.be/dQw4w9WgXcQ?si=abc"
        let sent = try ext.call("share.send", ["items": [["url": .string(youtube)]], "open": true])
        let shareID = try XCTUnwrap(sent["shareID"]?.stringValue)
        XCTAssertEqual(sent["extension"], "com.mycompany.myapp.share")
        XCTAssertEqual(sent["app"], "com.mycompany.myapp")
        XCTAssertEqual(sent["group"], "group.com.mycompany.myapp")
        XCTAssertNotNil(sent["eventID"]?.stringValue)

        let app = try session(h, "app", "com.mycompany.myapp")
        XCTAssertEqual(try app.call("app.subscribe")["pending"]?.intValue, 1)
        let event = try XCTUnwrap(app.nextNotification(timeoutMillis: 5000)?.params)
        XCTAssertEqual(event["url"]?.stringValue, "deeplinkmyapp://open-from-share?share=\(shareID)")
        XCTAssertEqual(event["sourceApp"], "com.mycompany.myapp.share")
        let list = try app.call("share.list")["shares"]?.arrayValue ?? []
        XCTAssertEqual(list.count, 1)
        XCTAssertEqual(list.first?["shareID"]?.stringValue, shareID)
        let share = try app.call("share.get", ["shareID": .string(shareID)])
        XCTAssertEqual(share["items"]?.arrayValue?.first?["url"]?.stringValue, youtube)
        XCTAssertEqual(share["items"]?.arrayValue?.first?["type"], "public.url")
        let created = try XCTUnwrap(share["created"]?.stringValue)
        XCTAssertNotNil(
            created.range(of: #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"#, options: .regularExpression), created)
        let stamp = ISO8601DateFormatter()
        stamp.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let when = try XCTUnwrap(stamp.date(from: created), created)
        XCTAssertLessThan(abs(when.timeIntervalSinceNow), 60, "created \(created) is now")
        XCTAssertEqual(try app.call("share.complete", ["shareID": .string(shareID)])["completed"], true)
        XCTAssertEqual(rpcCode { try app.call("share.get", ["shareID": .string(shareID)]) }, -32002)
        XCTAssertEqual(try app.call("app.ack", ["ids": [event["id"]!]])["acked"]?.intValue, 1)
        XCTAssertEqual(try app.call("broker.status")["pendingShares"]?.intValue, 0)
        h.stop()
    }

    /// share.send params in the commonest shape are read without a JSON tree (`ShareSendParams`):
    /// the same share, reply and errors as the general parser's reading of the same params.
    func testShareSendReadWithoutATreeMeansWhatTheTreeMeans() throws {
        let h = try start()
        let ext = try session(h, "extension", "com.mycompany.myapp.share")
        let app = try session(h, "app", "com.mycompany.myapp")
        let url = "https://youtu.be/dQw4w9WgXcQ?t=42"
        // The same params three ways: read without a tree, then with a member the general path
        // ignores, then with an escaped slash (both take the general parser).
        let spellings: [JSONObject] = [
            ["items": [["url": .string(url)]], "extension": "com.mycompany.myapp.share", "group": "group.com.mycompany.myapp"],
            ["items": [["url": .string(url)]], "extension": "com.mycompany.myapp.share", "group": "group.com.mycompany.myapp", "x": 1],
        ]
        var shares: [JSONValue] = []
        for params in spellings {
            let sent = try ext.call("share.send", .object(params))
            XCTAssertEqual(sent["app"], "com.mycompany.myapp")
            XCTAssertEqual(sent["group"], "group.com.mycompany.myapp")
            XCTAssertNil(sent["eventID"])
            var share = try app.call("share.get", ["shareID": sent["shareID"]!])
            share = .object(JSONObject(uniqueMembers: share.objectValue!.members.filter { $0.key != "shareID" && $0.key != "created" }))
            shares.append(share)
        }
        let raw = try h.connect()
        try raw.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        let escaped = #"{"jsonrpc":"2.0","id":9,"method":"share.send","params":{"items":[{"url":"https:\/\/youtu.be\/dQw4w9WgXcQ?t=42"}]}}"#
        try raw.sendRaw(Array((escaped + "\n").utf8))
        let reply = try XCTUnwrap(raw.readMessage(timeoutMillis: 5000))
        let escapedID = try XCTUnwrap(reply["result"]?["shareID"])
        var third = try app.call("share.get", ["shareID": escapedID])
        third = .object(JSONObject(uniqueMembers: third.objectValue!.members.filter { $0.key != "shareID" && $0.key != "created" }))
        shares.append(third)
        XCTAssertEqual(shares[0], shares[1])
        XCTAssertEqual(shares[0], shares[2])
        XCTAssertEqual(shares[0]["items"]?.arrayValue?.first?["url"]?.stringValue, url)

        // Errors: the same message whichever way the params were read.
        for (fast, general) in [
            (["items": [["url": "no scheme"]]], ["items": [["url": "no scheme"]], "x": 1]),
            (["items": [["url": "https://e.com"]], "extension": "com.other"], ["items": [["url": "https://e.com"]], "extension": "com.other", "x": 1]),
            (["items": [["url": "https://e.com"]], "group": "group.nope"], ["items": [["url": "https://e.com"]], "group": "group.nope", "x": 1]),
            (["items": [["text": "just words"]]], ["items": [["text": "just words"]], "x": 1]),
            (["items": [["url": "https://e.com"]], "open": "nowhere://x"], ["items": [["url": "https://e.com"]], "open": "nowhere://x", "x": 1]),
            (["items": [["url": "https://a.example"], ["url": "bad"]]], ["items": [["url": "https://a.example"], ["url": "bad"]], "x": 1]),
            (["items": [["text": "t"], ["url": "https://a.example"]]], ["items": [["text": "t"], ["url": "https://a.example"]], "x": 1]),
        ] as [(JSONObject, JSONObject)] {
            let a = rpcError { _ = try ext.call("share.send", .object(fast)) }
            let b = rpcError { _ = try ext.call("share.send", .object(general)) }
            XCTAssertNotNil(a, "\(fast)")
            XCTAssertEqual(a, b, "\(fast)")
        }
        XCTAssertEqual(rpcError { _ = try ext.call("share.send", ["items": [["url": "https://a.example"], ["url": "bad"]]]) }?.message.contains("items[1]"), true)

        // Successes with `open`: false queues nothing, a URL routes to its app, true opens the
        // containing app; the same either way.
        for (open, routed) in [(JSONValue.bool(false), false), (.string("deeplinkmyapp://item?id=7"), true), (.bool(true), true)] {
            var replies: [JSONValue] = []
            for extra in [false, true] {
                var params: JSONObject = ["items": [["url": "https://e.com/x"]], "open": open]
                if extra { params["x"] = 1 }
                var sent = try ext.call("share.send", .object(params))
                XCTAssertEqual(sent["eventID"] != nil, routed, "open \(open)")
                sent = .object(JSONObject(uniqueMembers: sent.objectValue!.members.filter { $0.key != "shareID" && $0.key != "eventID" }))
                replies.append(sent)
            }
            XCTAssertEqual(replies[0], replies[1], "open \(open)")
        }
        var events: [JSONValue] = []
        XCTAssertEqual(try app.call("app.subscribe")["pending"]?.intValue, 4)
        while events.count < 4, let n = try app.nextNotification(timeoutMillis: 5000) { events.append(n.params ?? .null) }
        XCTAssertEqual(events.map { $0["url"]?.stringValue ?? "" }.filter { $0 == "deeplinkmyapp://item?id=7" }.count, 2)
        XCTAssertEqual(events.map { $0["via"]?.stringValue ?? "" }, ["scheme", "scheme", "scheme", "scheme"])
        h.stop()

        // The per-share limits, for items read without a tree.
        let limited = try start {
            $0.maxFilesPerShare = 2
            $0.maxShareBytes = 40
        }
        let tool = try limited.tool()
        for (fast, general) in [
            (["items": [["text": "a"], ["text": "b"], ["text": "c"]]], ["items": [["text": "a"], ["text": "b"], ["text": "c"]], "x": 1]),
            (["items": [["text": .string(String(repeating: "a", count: 30))], ["text": .string(String(repeating: "b", count: 30))]]],
             ["items": [["text": .string(String(repeating: "a", count: 30))], ["text": .string(String(repeating: "b", count: 30))]], "x": 1]),
        ] as [(JSONObject, JSONObject)] {
            let a = rpcError { _ = try tool.call("share.send", .object(fast)) }
            let b = rpcError { _ = try tool.call("share.send", .object(general)) }
            XCTAssertEqual(a?.code, -32602, "\(fast)")
            XCTAssertEqual(a, b, "\(fast)")
        }
        limited.stop()
    }

    func testSeed002PDFFromAToolAndFromAPath() throws {
        let h = try start()
        let tool = try h.tool()
        let targets = try tool.call("share.targets", ["items": [["data": .string(base64(pdfBytes)), "name": "report.pdf"]]])
        XCTAssertEqual(targets["targets"]?.arrayValue?.compactMap { $0["extension"]?.stringValue }, ["com.example.pdfreader.share"])
        let noTargets = try tool.call("share.targets", ["items": [["url": "https://example.com"], ["data": .string(base64(pdfBytes))]]])
        XCTAssertEqual(noTargets["targets"]?.arrayValue?.count, 0, "a URL-only extension is not a target for a URL plus a PDF")

        let sent = try tool.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "report.pdf"]]])
        XCTAssertEqual(sent["extension"], "com.example.pdfreader.share")
        let shareID = sent["shareID"]!.stringValue!

        // A path item: copied, never moved.
        let dir = TempDir()
        let source = dir.path + "/Quarterly Report.pdf"
        _ = FileManager.default.createFile(atPath: source, contents: Data(pdfBytes))
        let sent2 = try tool.call("share.send", ["items": [["path": .string(source)]], "extension": "com.example.pdfreader.share"])
        XCTAssertTrue(FileManager.default.fileExists(atPath: source), "the source is copied, not moved")
        // The same as the last line of a stream, without its '\n' (its file is read off the
        // loop): answered before the connection closes.
        let last = try RawClient(h.socket)
        last.send(requestLine(id: "1", method: "hello", params: #"{"role":"tool"}"#))
        last.send(
            #"{"jsonrpc":"2.0","id":2,"method":"share.send","params":{"items":[{"path":"\#(source)"}],"extension":"com.example.pdfreader.share"}}"#)
        last.shutdownWrite()
        XCTAssertTrue(last.waitForClose(timeout: 10 * sanitizerSlowdown))
        let lines = last.buffer.split(separator: 0x0A).compactMap { try? JSONParser.parse(Array($0)) }
        XCTAssertEqual(lines.count, 2, String(decoding: last.buffer, as: UTF8.self))
        XCTAssertNotNil(lines.last?["result"]?["shareID"]?.stringValue, String(decoding: last.buffer, as: UTF8.self))
        XCTAssertEqual(try tool.call("broker.status")["pendingShares"]?.intValue, 3)

        // Share IDs: "sh-" and 24 lowercase hex digits (96 random bits), never the same twice.
        let ids = [shareID, sent2["shareID"]!.stringValue!]
        for id in ids {
            XCTAssertTrue(id.hasPrefix("sh-") && id.utf8.count == 27, id)
            XCTAssertTrue(id.utf8.dropFirst(3).allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }, id)
        }
        XCTAssertNotEqual(ids[0], ids[1])

        let app = try session(h, "app", "com.example.pdfreader")
        for id in ids {
            let share = try app.call("share.get", ["shareID": .string(id)])
            let item = try XCTUnwrap(share["items"]?.arrayValue?.first)
            XCTAssertEqual(item["type"], "com.adobe.pdf")
            let path = try XCTUnwrap(item["path"]?.stringValue)
            XCTAssertTrue(path.hasPrefix(h.state + "/groups/group.com.example.pdf/"), path)
            XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))), pdfBytes)
            XCTAssertEqual(try app.call("share.complete", ["shareID": .string(id)])["completed"], true)
            XCTAssertTrue(waitUntil { !FileManager.default.fileExists(atPath: path) }, "files are deleted with the share")
        }
        h.stop()
    }

    /// `share.list` without `group` is oldest first across all the caller's groups (it listed
    /// them group by group).
    func testShareListIsOldestFirstAcrossGroups() throws {
        let ext = #"{"bundleID": "com.two.share", "point": "com.apple.share-services", "appGroups": ["group.a", "group.b"], "activationRule": "TRUEPREDICATE"}"#
        let h = BrokerHarness(manifests: ["two.json": manifestJSON("com.two", groups: ["group.a", "group.b"], extensions: [ext])])
        try h.start()
        defer { h.stop() }
        let sender = try h.connect()
        try sender.hello(role: "extension", bundleID: "com.two.share")
        var sent: [String] = []
        for (i, group) in ["group.b", "group.a", "group.b", "group.a"].enumerated() {
            let r = try sender.call("share.send", ["items": [["text": .string("\(i)")]], "group": .string(group)])
            sent.append(try XCTUnwrap(r["shareID"]?.stringValue))
            usleep(3_000)  // (a later millisecond each)
        }
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.two")
        let listed = (try app.call("share.list")["shares"]?.arrayValue ?? []).compactMap { $0["shareID"]?.stringValue }
        XCTAssertEqual(listed, sent)
        let onlyB = (try app.call("share.list", ["group": "group.b"])["shares"]?.arrayValue ?? []).compactMap { $0["shareID"]?.stringValue }
        XCTAssertEqual(onlyB, [sent[0], sent[2]])
    }

    /// A link pasted with non-ASCII characters, as a URL item or as text that is exactly the
    /// link, is the web URL it names: a web-URL extension takes it, and it is stored encoded.
    func testAnIRIIsAWebURLForActivationRules() throws {
        let h = try start()
        defer { h.stop() }
        let ext = try session(h, "extension", "com.mycompany.myapp.share")
        let asURL = try ext.call("share.send", ["items": [["url": "https://de.wikipedia.org/wiki/Straße"]]])
        let asText = try ext.call("share.send", ["items": [["text": " https://bücher.de/ "]]])
        let app = try session(h, "app", "com.mycompany.myapp")
        let url = try app.call("share.get", ["shareID": asURL["shareID"]!])["items"]?.arrayValue?.first
        XCTAssertEqual(url?["url"], "https://de.wikipedia.org/wiki/Stra%C3%9Fe")
        let text = try app.call("share.get", ["shareID": asText["shareID"]!])["items"]?.arrayValue?.first
        XCTAssertEqual(text?["text"], " https://bücher.de/ ", "the text is kept as it was")
        XCTAssertEqual(text?["urls"], ["https://xn--bcher-kva.de/"], "\(String(describing: text))")
    }

    func testSeed000YouTubeFilterIsASharebrokerExtensionKey() throws {
        let seedPlistRule = """
            {"bundleID": "com.mycompany.myapp", "urlSchemes": ["deeplinkmyapp"], "appGroups": ["group.com.mycompany.myapp"],
             "extensions": [{"bundleID": "com.mycompany.myapp.share", "point": "com.apple.share-services",
               "appGroups": ["group.com.mycompany.myapp"],
               "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1,
                 "NSExtensionActivationWebURLPredicate": "SUBQUERY(absoluteURL, $url, $url CONTAINS 'youtube.com' OR $url CONTAINS 'youtu.be').@count > 0"}}]}
            """
        let h = BrokerHarness(manifests: ["myapp.json": seedPlistRule])
        try h.start()
        let tool = try h.tool()
        let warnings = try tool.call("apps.list")["warnings"]?.arrayValue ?? []
        XCTAssertTrue(
            warnings.contains { ($0["message"]?.stringValue ?? "").contains("NSExtensionActivationWebURLPredicate is not an Apple key") },
            "\(warnings)")
        XCTAssertEqual(try tool.call("apps.list")["apps"]?.arrayValue?.count, 1, "a note, not an error")
        let ext = try session(h, "extension", "com.mycompany.myapp.share")
        XCTAssertNotNil(try ext.call("share.send", ["items": [["url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ"]]])["shareID"])
        XCTAssertNotNil(try ext.call("share.send", ["items": [["url": "https://youtu.be/dQw4w9WgXcQ"]]])["shareID"])
        XCTAssertEqual(rpcCode { try ext.call("share.send", ["items": [["url": "https://example.com/video"]]]) }, -32003)
        XCTAssertEqual(rpcCode { try ext.call("share.send", ["items": [["url": "https://youtu.be/a"], ["url": "https://youtu.be/b"]]]) }, -32003)
        // The seed's extension dug the link out of shared text: a text that is exactly a URL also carries public.url.
        let targets = try tool.call("share.targets", ["items": [["text": "https://youtu.be/dQw4w9WgXcQ"]]])
        XCTAssertEqual(targets["targets"]?.arrayValue?.count, 1)
        h.stop()
    }

    func testInvalidRuleIsReportedWithItsPosition() throws {
        let broken = """
            {"bundleID": "com.broken.app", "extensions": [{"bundleID": "com.broken.app.share", "point": "com.apple.share-services",
              "activationRule": "SUBQUERY(extensionItems, $e, ANY $e.attachments.registeredTypeIdentifiers UTI-CONFORMS-TO \\"public.url\\".@count >= 1"}]}
            """
        let h = BrokerHarness(manifests: ["broken.json": broken, "10-myapp.json": youtubeApp])
        try h.start()
        let list = try h.tool().call("apps.list")
        let err = list["errors"]?.arrayValue?.first
        XCTAssertEqual(err?["file"], "broken.json")
        XCTAssertTrue(err?["field"]?.stringValue?.hasPrefix("extensions[0].activationRule") ?? false, "\(String(describing: err))")
        XCTAssertTrue(err?["message"]?.stringValue?.contains("position") ?? false, "\(String(describing: err))")
        XCTAssertEqual(list["apps"]?.arrayValue?.count, 1, "the other manifest still loads")
        h.stop()
    }

    func testRuleRejectionAndAmbiguity() throws {
        let second = """
            {"bundleID": "com.other.app", "appGroups": ["group.other"],
             "extensions": [{"bundleID": "com.other.app.share", "point": "com.apple.share-services", "appGroups": ["group.other"],
                             "activationRule": "TRUEPREDICATE"},
                            {"bundleID": "com.other.app.norule", "point": "com.apple.share-services", "appGroups": ["group.other"]}]}
            """
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "30-other.json": second])
        try h.start()
        let ext = try session(h, "extension", "com.mycompany.myapp.share")
        XCTAssertEqual(
            rpcCode { try ext.call("share.send", ["items": [["url": "https://youtu.be/x"], ["data": .string(base64(pdfBytes)), "name": "a.pdf"]]]) },
            -32003)
        XCTAssertEqual(rpcCode { try ext.call("share.send", ["items": [["url": "https://youtu.be/x"]], "extension": "com.other.app.share"]) }, -32001)
        let norule = try session(h, "extension", "com.other.app.norule")
        XCTAssertEqual(rpcCode { try norule.call("share.send", ["items": [["text": "hi"]]]) }, -32003, "no rule accepts nothing")

        let tool = try h.tool()
        if let e = rpcError({ try tool.call("share.send", ["items": [["url": "https://youtu.be/x"]]]) }) {
            XCTAssertEqual(e.code, -32003)
            let names = e.data?["candidates"]?.arrayValue?.compactMap { $0["extension"]?.stringValue }.sorted()
            XCTAssertEqual(names, ["com.mycompany.myapp.share", "com.other.app.share"])
            XCTAssertEqual(e.data?["candidates"]?.arrayValue?.first?["app"]?.stringValue?.isEmpty, false)
        } else {
            XCTFail("expected -32003 with candidates")
        }
        let chosen = try tool.call("share.send", ["items": [["url": "https://youtu.be/x"]], "extension": "com.mycompany.myapp.share"])
        XCTAssertEqual(chosen["app"], "com.mycompany.myapp")
        // An extension no manifest declares is not found (-32002); a declared one that is not a
        // share target does not accept (-32003).
        XCTAssertEqual(rpcCode { try tool.call("share.send", ["items": [["text": "x"]], "extension": "com.nobody"]) }, -32002)
        XCTAssertEqual(try tool.call("broker.status")["pendingShares"]?.intValue, 1, "rejected shares stored nothing")
        h.stop()
    }

    func testFileNamesAreMadeSafeAndDistinct() throws {
        let h = try start()
        let tool = try h.tool()
        let sent = try tool.call(
            "share.send",
            [
                "items": [
                    ["data": .string(base64(pdfBytes)), "name": "../../../etc/passwd.pdf"],
                    ["data": .string(base64(pdfBytes)), "name": "passwd.pdf"],
                    ["data": .string(base64(pdfBytes)), "name": ".hidden.pdf"],
                    ["data": .string(base64(pdfBytes))],
                    ["data": .string(base64(pdfBytes)), "name": .null, "type": .null],  // (null: left out)
                ],
            ])
        let app = try session(h, "app", "com.example.pdfreader")
        let items = try app.call("share.get", ["shareID": sent["shareID"]!])["items"]?.arrayValue ?? []
        let paths = items.compactMap { $0["path"]?.stringValue }
        XCTAssertEqual(paths.count, 5)
        XCTAssertEqual(Set(paths).count, 5, "no item overwrites another")
        let dir = h.state + "/groups/group.com.example.pdf/files/" + sent["shareID"]!.stringValue! + "/"
        for p in paths {
            XCTAssertTrue(p.hasPrefix(dir), p)
            XCTAssertFalse(p.dropFirst(dir.count).contains("/"), p)
            XCTAssertFalse(p.dropFirst(dir.count).hasPrefix("."), p)
        }
        XCTAssertEqual(items[3]["path"]?.stringValue?.hasSuffix(".pdf"), true, "a nameless file is named from its type")
        XCTAssertEqual(items[4]["path"]?.stringValue?.hasSuffix(".pdf"), true, "a null name is no name, a null type no type")
        XCTAssertEqual(items[4]["type"], "com.adobe.pdf")
        XCTAssertEqual(items.first?["name"], "passwd.pdf", "the name shown carries no directories")
        h.stop()
    }

    func testPathItemsMustExistAndBeReadableByTheCaller() throws {
        let h = try start()
        let tool = try h.tool()
        let missing = rpcError { try tool.call("share.send", ["items": [["path": "/nonexistent/file.pdf"]]]) }
        XCTAssertEqual(missing?.code, -32602)
        XCTAssertTrue(missing?.message.contains("/nonexistent/file.pdf") ?? false, "\(String(describing: missing))")
        let dir = TempDir()
        _ = FileManager.default.createFile(atPath: dir.path + "/doc.pdf", contents: Data(pdfBytes))
        let nul = rpcError { try tool.call("share.send", ["items": [["path": .string(dir.path + "/doc.pdf\u{0}/../../etc/passwd")]]]) }
        XCTAssertEqual(nul?.code, -32602, "a path is not cut at a NUL")
        XCTAssertEqual(rpcCode { try tool.call("share.targets", ["items": [["path": .string(dir.path + "/doc.pdf\u{0}x")]]]) }, -32602)
        let directory = rpcError { try tool.call("share.send", ["items": [["path": .string(dir.path)]]]) }
        XCTAssertEqual(directory?.code, -32602, "a directory is not a regular file")
        XCTAssertTrue(directory?.message.contains(dir.path) ?? false, "\(String(describing: directory))")
        #if os(Linux)
            // Pseudo file systems: their files' sizes are not what they hold (0 for /proc's).
            let proc = rpcError { try tool.call("share.send", ["items": [["path": "/proc/self/status"]]]) }
            XCTAssertEqual(proc?.code, -32602)
            XCTAssertTrue(proc?.message.contains("procfs") ?? false, "\(String(describing: proc))")
        #endif
        // A symlink is followed: the file it names is what is read (and checked).
        let target = dir.path + "/real.pdf"
        _ = FileManager.default.createFile(atPath: target, contents: Data(pdfBytes))
        let link = dir.path + "/link.pdf"
        XCTAssertEqual(symlink(target, link), 0)
        let sent = try tool.call("share.send", ["items": [["path": .string(link)]], "extension": "com.example.pdfreader.share"])
        let app = try session(h, "app", "com.example.pdfreader")
        let item = try app.call("share.get", ["shareID": sent["shareID"]!])["items"]?.arrayValue?.first
        XCTAssertEqual(item?["type"]?.stringValue, "com.adobe.pdf")
        let stored = item?["path"]?.stringValue ?? ""
        XCTAssertEqual(FileManager.default.contents(atPath: stored).map { Array($0) }, pdfBytes, "the link's target was copied")
        // A client that writes every optional member (null) sends a path item so: read all the same.
        let nulls: JSONValue = ["path": .string(target), "url": .null, "text": .null, "data": .null, "name": .null, "type": .null]
        XCTAssertEqual(try tool.call("share.targets", ["items": [nulls]])["targets"]?.arrayValue?.count, 1)
        XCTAssertNotNil(try tool.call("share.send", ["items": [nulls], "extension": "com.example.pdfreader.share"])["shareID"])
        XCTAssertEqual(rpcCode { try tool.call("share.send", ["items": [["data": "%%%"]]]) }, -32602)
        XCTAssertEqual(rpcCode { try tool.call("share.send", ["items": []]) }, -32602)
        XCTAssertEqual(rpcCode { try tool.call("share.send", ["items": [["url": "x", "text": "y"]]]) }, -32602)
        h.stop()
    }

    func testOnlyShareAndActionExtensionsTakeShares() throws {
        let widgetApp = """
            {"bundleID": "com.example.clock", "appGroups": ["group.com.example.clock"],
             "extensions": [{"bundleID": "com.example.clock.widget", "point": "com.apple.widgetkit-extension",
                             "appGroups": ["group.com.example.clock"], "activationRule": "TRUEPREDICATE"}]}
            """
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp, "40-clock.json": widgetApp])
        try h.start()
        let widget = try session(h, "extension", "com.example.clock.widget")
        let e = rpcError { try widget.call("share.send", ["items": [["text": "hi"]]]) }
        XCTAssertEqual(e?.code, -32003, "a widget is not a share target, whatever its rule says")
        XCTAssertTrue(e?.message.contains("com.apple.widgetkit-extension") ?? false, "\(String(describing: e))")
        XCTAssertEqual(try widget.call("share.list")["shares"]?.arrayValue?.count, 0, "nothing stored")
        // A tool naming the widget: declared, so found, but not a share target.
        let named = rpcError {
            try h.tool().call("share.send", ["items": [["text": "hi"]], "extension": "com.example.clock.widget"])
        }
        XCTAssertEqual(named?.code, -32003)
        XCTAssertTrue(named?.message.contains("com.apple.widgetkit-extension") ?? false, "\(String(describing: named))")
        XCTAssertEqual(try h.tool().call("broker.status")["pendingShares"]?.intValue, 0)
        h.stop()
    }

    func testOversizedShareFailsCleanly() throws {
        let h = try start { $0.maxShareBytes = 1000 }
        let tool = try h.tool()
        let big = [UInt8](repeating: 0x41, count: 2000)
        let e = rpcError { try tool.call("share.send", ["items": [["data": .string(base64(big)), "name": "big.pdf", "type": "com.adobe.pdf"]]]) }
        XCTAssertEqual(e?.code, -32602)
        XCTAssertTrue(e?.message.contains("1000") ?? false, "\(String(describing: e))")
        XCTAssertEqual(try tool.call("broker.status")["pendingShares"]?.intValue, 0)
        h.stop()
    }

    /// A group's share journal does not keep its history: once shares are completed, the segments
    /// holding them are deleted (a few still pending are copied forward), and a restart finds the
    /// pending ones, oldest first.
    func testCompletedSharesLeaveTheGroupsJournal() throws {
        let h = try start { $0.journalSegmentLimit = 8192 }
        let ext = try session(h, "extension", "com.mycompany.myapp.share")
        var ids: [String] = []
        for i in 0..<400 {
            let sent = try ext.call("share.send", ["items": [["url": .string("https://youtu.be/v\(i)")]]])
            ids.append(try XCTUnwrap(sent["shareID"]?.stringValue))
        }
        let groupDir = h.state + "/groups/group.com.mycompany.myapp"
        func segments() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: groupDir)) ?? []).filter {
                $0.hasPrefix("shares-") && $0.hasSuffix(".log")
            }
        }
        XCTAssertGreaterThan(segments().count, 8)
        let app = try session(h, "app", "com.mycompany.myapp")
        let keep = [ids[0], ids[1], ids[399]]
        for id in ids where !keep.contains(id) {
            XCTAssertEqual(try app.call("share.complete", ["shareID": .string(id)])["completed"], true)
        }
        // Later commits find the old segments dead (or nearly: the first two shares are copied).
        for i in 0..<100 {
            let sent = try ext.call("share.send", ["items": [["url": .string("https://youtu.be/w\(i)")]]])
            _ = try app.call("share.complete", ["shareID": sent["shareID"]!])
        }
        XCTAssertLessThanOrEqual(segments().count, 4, "\(segments().sorted())")
        XCTAssertEqual(try app.call("share.list")["shares"]?.arrayValue?.compactMap { $0["shareID"]?.stringValue }, keep)
        h.stop()
        try h.start { $0.journalSegmentLimit = 8192 }
        let again = try session(h, "app", "com.mycompany.myapp")
        let listed = try again.call("share.list")["shares"]?.arrayValue ?? []
        XCTAssertEqual(listed.compactMap { $0["shareID"]?.stringValue }, keep)
        XCTAssertEqual(listed.first?["items"]?.arrayValue?.first?["url"]?.stringValue, "https://youtu.be/v0")
        XCTAssertEqual(try again.call("broker.status")["pendingShares"]?.intValue, 3)
        h.stop()
    }

    func testGroupAccess() throws {
        let h = try start()
        let tool = try h.tool()
        let sent = try tool.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "a.pdf"]]])
        XCTAssertEqual(rpcCode { try tool.call("share.list") }, -32001)
        let other = try session(h, "app", "com.mycompany.myapp")
        XCTAssertEqual(rpcCode { try other.call("share.get", ["shareID": sent["shareID"]!]) }, -32001)
        XCTAssertEqual(rpcCode { try other.call("share.list", ["group": "group.com.example.pdf"]) }, -32001)
        XCTAssertEqual(try other.call("share.list")["shares"]?.arrayValue?.count, 0)
        let widget = try session(h, "extension", "com.example.pdfreader.widget")
        XCTAssertEqual(try widget.call("share.list")["shares"]?.arrayValue?.count, 1, "extensions of the group read it too")
        XCTAssertEqual(rpcCode { try widget.call("share.get", ["shareID": "sh-nope"]) }, -32002)
        h.stop()
    }

    func testFailedCommitLeavesNoHalfShareAndOrphansAreRemoved() throws {
        let faults = FaultSwitch()
        let h = try start { $0.storeFaults = faults.injector }
        let tool = try h.tool()
        _ = try tool.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "ok.pdf"]]])  // opens the group
        let filesDir = h.state + "/groups/group.com.example.pdf/files"
        let before = try FileManager.default.contentsOfDirectory(atPath: filesDir)
        faults.set(.sync, EIO)
        XCTAssertEqual(rpcCode { try tool.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "x.pdf"]]]) }, -32005)
        faults.set(.sync, nil)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: filesDir), before, "no files of the failed share remain")
        XCTAssertEqual(try tool.call("broker.status")["pendingShares"]?.intValue, 1)
        h.stop()

        // A crash between writing files and the record leaves a directory without a record:
        // recovery removes it, and the durable share is intact.
        try FileManager.default.createDirectory(atPath: filesDir + "/sh-orphan", withIntermediateDirectories: false)
        _ = FileManager.default.createFile(atPath: filesDir + "/sh-orphan/half.pdf", contents: Data([1, 2, 3]))
        let h2 = BrokerHarness()
        try? FileManager.default.removeItem(atPath: h2.state)
        try FileManager.default.copyItem(atPath: h.state, toPath: h2.state)
        try h2.start()
        let app = try h2.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        XCTAssertEqual(try app.call("share.list")["shares"]?.arrayValue?.count, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: h2.state + "/groups/group.com.example.pdf/files/sh-orphan"))
        h2.stop()
    }
}
