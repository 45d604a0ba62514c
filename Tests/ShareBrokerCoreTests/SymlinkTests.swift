// Nothing under the state directory is written, read or deleted through a symlink that replaced
// one of the broker's own directories (queues/, groups/, a group's files/, logs/), whether it was
// planted before the broker started or while it runs.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareSystem
import XCTest

final class SymlinkTests: XCTestCase {
    /// A directory outside the state directory that a symlink points at; it must stay empty.
    func outsideDirectory() -> String {
        let outside = TempDir().path + "/outside"
        try? FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        return outside
    }

    func contents(_ dir: String) -> [String] { (try? FileManager.default.subpathsOfDirectory(atPath: dir)) ?? [] }

    func testSymlinkedQueuesAndGroupsAreNotWrittenThrough() throws {
        let h = BrokerHarness(manifests: ["10-myapp.json": youtubeApp])
        let outside = outsideDirectory()
        try FileManager.default.createDirectory(atPath: h.state, withIntermediateDirectories: true)
        chmod(h.state, 0o700)
        XCTAssertEqual(symlink(outside, h.state + "/queues"), 0)
        XCTAssertEqual(symlink(outside, h.state + "/groups"), 0)
        try h.start()
        let tool = try h.tool()
        XCTAssertEqual(rpcError { _ = try tool.call("url.open", ["url": "deeplinkmyapp://x"]) }?.code, -32005)
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.mycompany.myapp.share")
        let share = rpcError { _ = try ext.call("share.send", ["items": [["url": "https://youtu.be/x"]]]) }
        XCTAssertEqual(share?.code, -32005, "\(String(describing: share))")
        XCTAssertTrue(share?.message.contains("symlink") ?? false, "\(String(describing: share))")
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        XCTAssertEqual(rpcError { _ = try app.call("defaults.set", ["group": "group.com.mycompany.myapp", "key": "k", "value": 1]) }?.code, -32005)
        h.stop()
        XCTAssertEqual(contents(outside), [], "nothing was written through the symlinks")
    }

    func testCompletingAShareDoesNotDeleteThroughASymlinkedFilesDirectory() throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start()
        let tool = try h.tool()
        let sent = try tool.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "a.pdf"]]])
        let id = try XCTUnwrap(sent["shareID"]?.stringValue)
        // files/ is swapped for a symlink to a directory holding a same-named folder of someone else's.
        let files = h.state + "/groups/group.com.example.pdf/files"
        let outside = outsideDirectory()
        try FileManager.default.moveItem(atPath: files, toPath: outside + "/moved")
        try FileManager.default.createDirectory(atPath: outside + "/victim/" + id, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: outside + "/victim/\(id)/precious.txt", contents: Data("keep".utf8)))
        XCTAssertEqual(symlink(outside + "/victim", files), 0)
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        XCTAssertEqual(try app.call("share.complete", ["shareID": .string(id)])["completed"], true)
        _ = try tool.call("broker.status")  // a later turn: the completion's commit has finished
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: outside + "/victim/\(id)/precious.txt"), "a file outside the state directory was deleted")
        h.stop()
    }

    /// The start-up sweep of orphaned share directories does not delete through a group's
    /// `files` that is a symlink (it emptied the directory it pointed at: the security audit).
    func testTheOrphanSweepDoesNotDeleteThroughASymlinkedFilesDirectory() throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        let group = h.state + "/groups/group.com.example.pdf"
        try FileManager.default.createDirectory(atPath: group, withIntermediateDirectories: true)
        for dir in [h.state, h.state + "/groups", group] { chmod(dir, 0o700) }
        let outside = outsideDirectory()
        try FileManager.default.createDirectory(atPath: outside + "/sh-important", withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: outside + "/sh-important/data.txt", contents: Data("keep".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: outside + "/toplevel.txt", contents: Data("keep".utf8)))
        XCTAssertEqual(symlink(outside, group + "/files"), 0)
        try h.start()
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        _ = try? app.call("share.list")  // opens the group's store: its sweep runs
        h.stop()
        XCTAssertEqual(contents(outside).sorted(), ["sh-important", "sh-important/data.txt", "toplevel.txt"])
    }

    /// A group whose shares cannot be read (its journal replaced by a symlink; or, seen by the
    /// security audit, owned by another user) is no empty group: share.list of it and share.get
    /// of an id found nowhere say -32005 (they answered "none" and "not found": the app would
    /// think its shares gone). The caller's other groups still work: share.get and
    /// share.complete find their shares, share.list without a group lists them and names the
    /// unreadable group in `unreadableGroups` (the review: one broken group blocked them all).
    func testSharesThatCannotBeReadAreAFailureNotNone() throws {
        let ext = #"{"bundleID": "com.x.app.share", "point": "com.apple.share-services", "appGroups": ["group.a", "group.b"], "activationRule": "TRUEPREDICATE"}"#
        let h = BrokerHarness(manifests: ["10-x.json": manifestJSON("com.x.app", groups: ["group.a", "group.b"], extensions: [ext])])
        try h.start()
        func send(_ group: String) throws -> String {
            let c = try h.connect()
            try c.hello(role: "extension", bundleID: "com.x.app.share")
            return try XCTUnwrap(try c.call("share.send", ["items": [["text": "hi"]], "group": .string(group)])["shareID"]?.stringValue)
        }
        let inA = try send("group.a")
        _ = try send("group.b")
        h.stop()
        let group = h.state + "/groups/group.a"
        let journal = try XCTUnwrap(
            try FileManager.default.contentsOfDirectory(atPath: group).first { $0.hasPrefix("shares-") && $0.hasSuffix(".log") })
        let copy = outsideDirectory() + "/" + journal
        try FileManager.default.moveItem(atPath: group + "/" + journal, toPath: copy)
        XCTAssertEqual(symlink(copy, group + "/" + journal), 0)
        try h.start()
        defer { h.stop() }
        let inB = try send("group.b")
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.x.app")
        let onlyA = rpcError { _ = try app.call("share.list", ["group": "group.a"]) }
        XCTAssertEqual(onlyA?.code, -32005, "\(String(describing: onlyA))")
        XCTAssertTrue(onlyA?.message.contains("the shares of group 'group.a' cannot be read") ?? false, "\(String(describing: onlyA))")
        // (said of a read: not a send's "nothing was stored", and the store's own reason once)
        XCTAssertFalse(onlyA?.message.contains("nothing was stored") ?? true, "\(String(describing: onlyA))")
        XCTAssertEqual(onlyA?.message.components(separatedBy: "Storage failure").count, 2, "\(String(describing: onlyA))")
        let all = try app.call("share.list")
        XCTAssertEqual(all["shares"]?.arrayValue?.count, 2, all.compactText)
        XCTAssertEqual(all["unreadableGroups"]?.arrayValue?.first?["group"], "group.a", all.compactText)
        XCTAssertEqual(rpcError { _ = try app.call("share.get", ["shareID": .string(inA)]) }?.code, -32005)
        XCTAssertEqual(try app.call("share.get", ["shareID": .string(inB)])["group"], "group.b")
        XCTAssertEqual(try app.call("share.complete", ["shareID": .string(inB)])["completed"], true)
    }

    func testGroupsSwappedForASymlinkWhileRunningAreNotWrittenThrough() throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start()
        defer { h.stop() }
        let tool = try h.tool()
        _ = try tool.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "a.pdf"]]])
        // groups/ moves away and a symlink to a look-alike outside the state directory takes its place.
        let outside = outsideDirectory()
        try FileManager.default.moveItem(atPath: h.state + "/groups", toPath: outside + "/moved")
        try FileManager.default.createDirectory(atPath: outside + "/fake/group.com.example.pdf/files", withIntermediateDirectories: true)
        XCTAssertEqual(symlink(outside + "/fake", h.state + "/groups"), 0)
        let e = rpcError { _ = try tool.call("share.send", ["items": [["data": .string(base64(pdfBytes)), "name": "b.pdf"]]]) }
        XCTAssertEqual(e?.code, -32005, "\(String(describing: e))")
        XCTAssertEqual(contents(outside + "/fake/group.com.example.pdf/files"), [], "nothing was written through the symlink")
    }
}
