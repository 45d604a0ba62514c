// shareclient as a user runs it: roles inferred from --as, exit codes of explain and send, and
// what `defaults list` prints.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareSystem
import XCTest

/// A listening socket at `path` whose `accept` blocks (for a fake broker's thread).
private func blockingListener(_ path: String) throws -> Int32 {
    let listener = try UnixSocket.listen(path: path)
    _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) & ~O_NONBLOCK)
    return listener
}

/// A fake broker's side of a connection: reads newline-framed requests and answers each, by its
/// id, with the result `answer` gives (JSON text), until the peer closes or `limit` are answered.
private func answerLines(_ fd: Int32, upTo limit: Int = .max, _ answer: (JSONValue) -> String) {
    var pending: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 4096)
    var answered = 0
    while answered < limit {
        let n = read(fd, &buf, buf.count)
        if n <= 0 { return }
        pending += buf[0..<n]
        while answered < limit, let nl = pending.firstIndex(of: 0x0A) {
            let request = (try? JSONParser.parse(Array(pending[..<nl]))) ?? .null
            pending.removeSubrange(...nl)
            let id = request["id"]?.compactText ?? "null"
            _ = (#"{"jsonrpc":"2.0","id":"# + id + #","result":"# + answer(request) + "}\n").withCString { write(fd, $0, strlen($0)) }
            answered += 1
        }
    }
}

final class ShareclientCommandTests: XCTestCase {
    let manifest = """
        {"bundleID": "com.mycompany.myapp", "teamID": "ABCDE12345", "urlSchemes": ["deeplinkmyapp"],
         "associatedDomains": ["applinks:example.com"], "appGroups": ["group.com.mycompany.myapp"],
         "extensions": [
           {"bundleID": "com.mycompany.myapp.share", "point": "com.apple.share-services",
            "appGroups": ["group.com.mycompany.myapp"],
            "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1}},
           {"bundleID": "com.mycompany.myapp.widget", "point": "com.apple.widgetkit-extension",
            "appGroups": ["group.com.mycompany.myapp"]}]}
        """
    let association = #"{"applinks": {"details": [{"appIDs": ["ABCDE12345.com.mycompany.myapp"], "components": [{"/": "/computers/*"}]}]}}"#

    func shareclient(_ h: BrokerHarness, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try runProcess(Products.shareclient, args + ["--socket", h.socket], timeout: 20)
    }

    func testAsAnExtensionWithoutRoleSaysHelloAsAnExtension() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest])
        try h.start()
        let group = "group.com.mycompany.myapp"
        let set = try shareclient(h, ["defaults", "set", group, "watchlist", "[1,2]", "--as", "com.mycompany.myapp"])
        XCTAssertEqual(set.status, 0, set.err)
        // The widget is an extension: no --role needed.
        let get = try shareclient(h, ["defaults", "get", group, "watchlist", "--as", "com.mycompany.myapp.widget"])
        XCTAssertEqual(get.status, 0, get.err)
        XCTAssertTrue(get.out.contains("1"), get.out)
        let status = try shareclient(h, ["status", "--as", "com.mycompany.myapp.widget"])
        XCTAssertEqual(status.status, 0, status.err)
        // An explicit role is used as given.
        let wrong = try shareclient(h, ["status", "--as", "com.mycompany.myapp.widget", "--role", "app"])
        XCTAssertEqual(wrong.status, 1, wrong.err)
        XCTAssertTrue(wrong.err.contains("is an extension"), wrong.err)
        // `defaults list` prints the values, then the version.
        let list = try shareclient(h, ["defaults", "list", group, "--as", "com.mycompany.myapp.widget"])
        XCTAssertEqual(list.status, 0, list.err)
        XCTAssertTrue(list.out.hasSuffix("version 1\n"), list.out)
        h.stop()
    }

    /// `shareclient shares` shows shared text with its control characters written out: a share
    /// cannot drive the terminal of whoever lists it (clear the screen, rewrite a line).
    func testSharesShowsControlCharactersOfSharedText() throws {
        let notes = #"{"bundleID": "com.notes.app", "appGroups": ["group.com.notes"], "extensions": [{"bundleID": "com.notes.app.share", "point": "com.apple.share-services", "appGroups": ["group.com.notes"], "activationRule": {"NSExtensionActivationSupportsText": true}}]}"#
        let h = BrokerHarness(manifests: ["notes.json": notes])
        try h.start()
        defer { h.stop() }
        let sent = try shareclient(h, ["send", "--text", "ok\u{1B}[2J\rFAKE", "--as", "com.notes.app.share"])
        XCTAssertEqual(sent.status, 0, sent.err)
        let shown = try shareclient(h, ["shares", "--as", "com.notes.app"])
        XCTAssertEqual(shown.status, 0, shown.err)
        XCTAssertTrue(shown.out.contains(#""ok\u{1B}[2J\u{D}FAKE""#), shown.out)
        XCTAssertFalse(shown.out.contains("\u{1B}") || shown.out.contains("\r"), "no raw control character: \(shown.out)")
    }

    /// `shareclient reload` exits 1 when a manifest or association document could not be
    /// loaded (a script installing an app learns that it did not load), 0 once all load.
    func testReloadFailsWhenAnInputCouldNotBeLoaded() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest])
        try h.start()
        defer { h.stop() }
        let clean = try shareclient(h, ["reload"])
        XCTAssertEqual(clean.status, 0, clean.err)
        h.dir.write("state/apps/broken.json", #"{"bundleID": 5}"#)
        let broken = try shareclient(h, ["reload"])
        XCTAssertEqual(broken.status, 1, broken.out + broken.err)
        XCTAssertTrue(broken.out.contains("error: broken.json"), broken.out)
        XCTAssertTrue(broken.err.contains("reloaded with 1 error"), broken.err)
        let json = try shareclient(h, ["reload", "--json"])
        XCTAssertEqual(json.status, 1, json.err)
        XCTAssertEqual(try JSONParser.parse(json.out.trimmingCharacters(in: .whitespacesAndNewlines))["errors"]?.arrayValue?.count, 1)
        try FileManager.default.removeItem(atPath: h.state + "/apps/broken.json")
        h.dir.write("state/associations/example.com.json", "{")
        XCTAssertEqual(try shareclient(h, ["reload"]).status, 1, "a malformed association document counts too")
        try FileManager.default.removeItem(atPath: h.state + "/associations/example.com.json")
        XCTAssertEqual(try shareclient(h, ["reload"]).status, 0)
        XCTAssertEqual(try shareclient(h, ["apps"]).status, 0, "apps lists; it does not judge")
    }

    /// A launched app's scripts need no --as: the commands that work only as an app or
    /// extension take $SHAREBROKER_BUNDLE_ID (and its token $SHAREBROKER_TOKEN); the others
    /// stay a tool. (They ran as a tool and were refused.)
    func testBundleCommandsTakeTheBundleFromTheEnvironment() throws {
        let tokened = manifestJSON("com.tok.app", schemes: ["tokapp"], groups: ["group.com.tok"], token: "s3cret")
        let h = BrokerHarness(manifests: ["myapp.json": manifest, "tok.json": tokened])
        try h.start()
        defer { h.stop() }
        func run(_ args: [String], _ env: [String: String]) throws -> (status: Int32, out: String, err: String) {
            try runProcess(Products.shareclient, args + ["--socket", h.socket], env: env, timeout: 20)
        }
        let sent = try shareclient(h, ["send", "--url", "https://example.com/a", "--as", "com.mycompany.myapp.share", "--json"])
        XCTAssertEqual(sent.status, 0, sent.err)
        let shareID = try XCTUnwrap(JSONParser.parse(sent.out)["shareID"]?.stringValue)
        let app = ["SHAREBROKER_BUNDLE_ID": "com.mycompany.myapp"]
        let none = ["SHAREBROKER_BUNDLE_ID": ""]
        let refused = try run(["shares"], none)
        // (without a bundle it would be a tool, which reads no group: a usage error, as for listen)
        XCTAssertEqual(refused.status, 64, refused.err)
        XCTAssertTrue(refused.err.contains("shares acts as an app or extension: it needs --as BUNDLE"), refused.err)
        // (so do group defaults: the docs audit found them exiting 1 with the broker's refusal)
        let g = "group.com.mycompany.myapp"
        for sub in [["list", g], ["get", g, "k"], ["set", g, "k", "1"], ["remove", g, "k"], ["watch", g]] {
            let d = try run(["defaults"] + sub, none)
            XCTAssertEqual(d.status, 64, "\(sub): \(d.err)")
            XCTAssertTrue(d.err.contains("defaults acts as an app or extension: it needs --as BUNDLE"), d.err)
        }
        let shares = try run(["shares", "--json"], app)
        XCTAssertEqual(shares.status, 0, shares.err)
        XCTAssertTrue(shares.out.contains(shareID), shares.out)
        let listed = try run(["shares"], app)
        XCTAssertTrue(listed.out.contains(shareID) && listed.out.contains("    public.url  https://example.com/a\n"), "each item is shown: \(listed.out)")
        // can-open with a fallback names it.
        let viaFallback = try shareclient(h, ["can-open", "zzz://x", "--fallback", "deeplinkmyapp://y"])
        XCTAssertEqual(viaFallback.out, "yes: com.mycompany.myapp via fallback (deeplinkmyapp://y)\n", viaFallback.err)
        let neither = try shareclient(h, ["can-open", "zzz://x", "--fallback", "zzz://y"])
        XCTAssertEqual(neither.status, 1)
        XCTAssertEqual(neither.out, "no: nothing opens zzz://x, nor its fallback zzz://y\n")
        XCTAssertEqual(try run(["get", shareID], app).status, 0)
        let completed = try run(["complete", shareID], app)
        XCTAssertEqual(completed.status, 0, completed.err)
        XCTAssertEqual(completed.out, "share \(shareID) completed: its record and files are deleted\n")
        // --as beats the environment.
        let other = try run(["shares", "--as", "com.tok.app", "--token", "s3cret"], app)
        XCTAssertEqual(other.status, 0, other.err)
        let opened = try shareclient(h, ["open", "deeplinkmyapp://x", "--json"])
        let eventID = try XCTUnwrap(JSONParser.parse(opened.out)["eventID"]?.stringValue)
        let acked = try run(["ack", eventID], app)
        XCTAssertEqual(acked.status, 0, acked.err)
        XCTAssertEqual(acked.out, "acked 1\n")
        // A tool command stays a tool: open needs no bundle (and the event's sourceApp is none).
        XCTAssertEqual(try run(["open", "deeplinkmyapp://y"], app).status, 0)
        // The token comes from the environment too.
        let tok = ["SHAREBROKER_BUNDLE_ID": "com.tok.app", "SHAREBROKER_TOKEN": "s3cret"]
        XCTAssertEqual(try run(["shares"], tok).status, 0)
        let noToken = try run(["shares"], ["SHAREBROKER_BUNDLE_ID": "com.tok.app", "SHAREBROKER_TOKEN": ""])
        XCTAssertEqual(noToken.status, 1)
        XCTAssertTrue(noToken.err.contains("token"), noToken.err)
        // A launched app's token is its own: not sent for another bundle named with --as.
        let launched = ["SHAREBROKER_BUNDLE_ID": "com.mycompany.myapp", "SHAREBROKER_TOKEN": "not-for-tok"]
        let other2 = try run(["shares", "--as", "com.tok.app"], launched)
        XCTAssertEqual(other2.status, 1)
        XCTAssertTrue(other2.err.contains("a token is required"), other2.err)
    }

    /// `defaults set GROUP KEY - --string` drops stdin's final newline (`echo` adds one);
    /// `listen` / `defaults watch` with --count N that time out before N exit 1, saying so.
    func testStdinStringsAndCountsNotReached() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest])
        try h.start()
        defer { h.stop() }
        let group = "group.com.mycompany.myapp"
        let sh = "echo 'plain text' | \"\(Products.shareclient)\" defaults set \(group) note - --string --as com.mycompany.myapp --socket \(h.socket)"
        let set = try runProcess("/bin/sh", ["-c", sh], timeout: 20)
        XCTAssertEqual(set.status, 0, set.err)
        let get = try shareclient(h, ["defaults", "get", group, "note", "--as", "com.mycompany.myapp"])
        XCTAssertEqual(get.out, "\"plain text\"\n")
        let json = "printf '[1]\\n' | \"\(Products.shareclient)\" defaults set \(group) list - --as com.mycompany.myapp --socket \(h.socket)"
        XCTAssertEqual(try runProcess("/bin/sh", ["-c", json], timeout: 20).status, 0)

        XCTAssertEqual(try shareclient(h, ["open", "deeplinkmyapp://one"]).status, 0)
        let short = try shareclient(h, ["listen", "--as", "com.mycompany.myapp", "--count", "2", "--timeout", "0.5"])
        XCTAssertEqual(short.status, 1, short.err)
        XCTAssertTrue(short.err.contains("timed out after 1 of 2 events"), short.err)
        XCTAssertTrue(short.out.contains("deeplinkmyapp://one"), short.out)
        let open = try shareclient(h, ["listen", "--as", "com.mycompany.myapp", "--timeout", "0.5"])
        XCTAssertEqual(open.status, 0, "without --count the timeout is the end asked for: \(open.err)")
        let reached = try shareclient(h, ["listen", "--as", "com.mycompany.myapp", "--count", "1", "--timeout", "5"])
        XCTAssertEqual(reached.status, 0, reached.err)
        let watch = try shareclient(h, ["defaults", "watch", group, "--as", "com.mycompany.myapp", "--count", "1", "--timeout", "0.3"])
        XCTAssertEqual(watch.status, 1, watch.err)
        XCTAssertTrue(watch.err.contains("timed out after 0 of 1 changes"), watch.err)
    }

    /// `listen` whose subscription another connection of the app takes over stops at once,
    /// exit 1, saying so (it waited out its timeout for events that went elsewhere).
    func testListenTakenOverEndsSayingSo() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest])
        try h.start()
        defer { h.stop() }
        let listener = Process()
        listener.executableURL = URL(fileURLWithPath: Products.shareclient)
        listener.arguments = ["--socket", h.socket, "listen", "--as", "com.mycompany.myapp", "--timeout", "60"]
        let err = Pipe()
        listener.standardError = err
        listener.standardOutput = FileHandle.nullDevice
        try listener.run()
        defer { if listener.isRunning { listener.terminate() } }
        let tool = try h.tool()
        XCTAssertTrue(waitUntil(timeout: 10) { (try? tool.call("broker.status"))?["subscribers"]?.intValue == 1 }, "nobody subscribed")
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        try app.call("app.subscribe")
        XCTAssertTrue(waitUntil(timeout: 10) { !listener.isRunning }, "the listener ended when taken over")
        XCTAssertEqual(listener.terminationStatus, 1)
        let said = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(said.contains("the app's events went to another subscriber after 0 events"), said)
    }

    func testExplainExitsOneWhenNothingOpensTheURL() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest], associations: ["example.com": association])
        try h.start()
        let opens = try shareclient(h, ["explain", "https://example.com/computers/pi"])
        XCTAssertEqual(opens.status, 0, opens.err)
        XCTAssertTrue(opens.out.contains("com.mycompany.myapp"), opens.out)
        let nothing = try shareclient(h, ["explain", "https://example.com/about"])
        XCTAssertEqual(nothing.status, 1, nothing.out + nothing.err)
        let fallback = try shareclient(h, ["explain", "nope://x", "--fallback", "deeplinkmyapp://home"])
        XCTAssertEqual(fallback.status, 0, fallback.out + fallback.err)
        h.stop()
    }

    func testOpenAndOpenURLAreAlternatives() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest])
        try h.start()
        let both = try shareclient(
            h, ["send", "--url", "https://youtu.be/x", "--as", "com.mycompany.myapp.share", "--open", "--open-url", "deeplinkmyapp://x"])
        XCTAssertEqual(both.status, 64, both.err)
        XCTAssertTrue(both.err.contains("--open"), both.err)
        let one = try shareclient(h, ["send", "--url", "https://youtu.be/x", "--as", "com.mycompany.myapp.share", "--open"])
        XCTAssertEqual(one.status, 0, one.err)
        h.stop()
    }
}

/// Bad input to the tools and to the state directory: one clear message, the right exit code.
final class BadInputTests: XCTestCase {
    func testShareclientRefusesBadOptionValuesBeforeConnecting() throws {
        let missing = "/nonexistent-dir/s.sock"
        for args in [
            ["listen", "--as", "com.a", "--timeout", "nan"], ["listen", "--as", "com.a", "--timeout", "inf"],
            ["listen", "--as", "com.a", "--timeout", "-5"], ["listen", "--as", "com.a", "--timeout", "1e10"],
            ["listen", "--as", "com.a", "--count", "-1"], ["listen", "--as", "com.a", "--count", "0"],
            ["listen", "--as", "com.a", "--role", "bogus"],
            ["defaults", "watch", "g", "--as", "com.a", "--timeout", "nan"],
            ["defaults", "watch", "g", "--as", "com.a", "--count", "-3"],
            // (an app or extension role needs a bundle; a tool has none, an --as would be dropped)
            ["status", "--role", "app"], ["shares", "--role", "extension"], ["open", "x://y", "--role", "tool", "--as", "com.a"],
            ["defaults", "get", "g", "k", "--role", "tool", "--as", "com.a"],
            ["shares", "--role", "tool"], ["defaults", "list", "g", "--role", "tool"],
        ] {
            let r = try runProcess(Products.shareclient, args + ["--socket", missing], timeout: 10)
            XCTAssertEqual(r.status, 64, "\(args): \(r.err)")
            XCTAssertTrue(r.err.hasPrefix("shareclient: error: ") && r.err.contains("option '--"), "\(args): \(r.err)")
        }
        // (without a hello, --role says nothing: not a usage error)
        let noHello = try runProcess(Products.shareclient, ["call", "broker.status", "--no-hello", "--role", "app", "--socket", missing], timeout: 10)
        XCTAssertEqual(noHello.status, 69, noHello.err)
        let empty = try runProcess(Products.shareclient, ["status", "--socket", ""], timeout: 10)
        XCTAssertEqual(empty.status, 64, empty.err)
        // A wait that is no number of seconds is a usage error too (it was ignored: 60 s).
        for value in ["abc", "-1", "nan", "3e6"] {
            let r = try runProcess(Products.shareclient, ["status", "--socket", missing], env: ["SHARECLIENT_TIMEOUT": value], timeout: 10)
            XCTAssertEqual(r.status, 64, "\(value): \(r.err)")
            XCTAssertTrue(r.err.contains("$SHARECLIENT_TIMEOUT must be a number of seconds") && r.err.contains("'\(value)'"), r.err)
        }
        let dir = TempDir()
        let file = dir.path + "/not-a-socket"
        _ = FileManager.default.createFile(atPath: file, contents: Data())
        for path in [file, dir.path] {
            let r = try runProcess(Products.shareclient, ["status", "--socket", path], timeout: 10)
            XCTAssertEqual(r.status, 69, r.err)
            XCTAssertTrue(r.err.contains("not a socket") && r.err.contains(path), r.err)
        }
    }

    /// Something answers on the socket, but not a broker (it sends what is not JSON-RPC): not
    /// "unreachable" (69) but an internal error (70), saying so.
    func testAPeerThatIsNotABrokerExitsSeventy() throws {
        let dir = TempDir()
        let path = dir.path + "/fake.sock"
        let listener = try blockingListener(path)
        defer { close(listener) }
        let server = Thread {
            for reply in ["this is not json\n", #"{"jsonrpc":"2.0","method":5}"# + "\n"] {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                var buf = [UInt8](repeating: 0, count: 4096)
                _ = read(fd, &buf, buf.count)
                _ = reply.withCString { write(fd, $0, strlen($0)) }
                usleep(200_000)
                close(fd)
            }
        }
        server.start()
        for _ in 0..<2 {
            let r = try runProcess(Products.shareclient, ["open", "myapp://x", "--socket", path], timeout: 10)
            XCTAssertEqual(r.status, 70, r.err)
            XCTAssertTrue(r.err.contains("does not speak sharebroker's protocol"), r.err)
        }
    }

    /// A peer that writes something else at once and hangs up (an HTTP server) is no broker
    /// either (70, not the broken pipe's 69); nor is one whose JSON-RPC answers lack what the
    /// contract's results have (70, not a line of "?" and 0).
    func testAPeerThatHangsUpOrAnswersTheWrongShapeIsNotABroker() throws {
        let dir = TempDir()
        let path = dir.path + "/fake.sock"
        let listener = try blockingListener(path)
        defer { close(listener) }
        let server = Thread {
            // 1. Says its piece without reading, and closes.
            var fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            _ = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n".withCString { write(fd, $0, strlen($0)) }
            close(fd)
            // 2. Answers every request, by its id, with a result of the wrong shape.
            fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            answerLines(fd) { _ in #"{"ok":true}"# }
            close(fd)
            // 3. Reads the request and hangs up without a word (a broker killed mid-call).
            fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            var buf = [UInt8](repeating: 0, count: 4096)
            _ = read(fd, &buf, buf.count)
            close(fd)
        }
        server.start()
        let hungUp = try runProcess(Products.shareclient, ["open", "myapp://x", "--socket", path], timeout: 10)
        XCTAssertEqual(hungUp.status, 70, hungUp.err)
        XCTAssertTrue(hungUp.err.contains("does not speak sharebroker's protocol"), hungUp.err)
        let shape = try runProcess(Products.shareclient, ["open", "myapp://x", "--socket", path], timeout: 10)
        XCTAssertEqual(shape.status, 70, shape.out + shape.err)
        XCTAssertTrue(shape.err.contains("its answer to 'url.open' has no string 'app'"), shape.err)
        XCTAssertEqual(shape.out, "")
        // A lost connection is "unreachable", and says which broker was lost.
        let lost = try runProcess(Products.shareclient, ["status", "--socket", path], timeout: 10)
        XCTAssertEqual(lost.status, 69, lost.err)
        XCTAssertTrue(lost.err.contains("connection to the broker at \(path) failed: "), lost.err)
    }

    /// `read --output FILE` whose connection is lost after the first chunk: a FILE the read
    /// created is removed, an existing one keeps what was written (as `curl -o`), exit 69.
    func testReadOutputLostPartwayRemovesAFileItCreated() throws {
        let dir = TempDir()
        let path = dir.path + "/fake.sock"
        let listener = try blockingListener(path)
        defer { close(listener) }
        let server = Thread {
            // Twice: answers hello and the first share.read (3 of 6 bytes), then hangs up.
            for _ in 0..<2 {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                answerLines(fd, upTo: 2) { request in
                    request["method"] == "hello"
                        ? #"{"protocol":1,"broker":{"name":"sharebroker","version":"0"},"session":1,"role":"app","bundleID":"com.a"}"#
                        : #"{"data":"YWJj","offset":0,"size":6,"eof":false}"#
                }
                close(fd)
            }
        }
        server.start()
        let created = dir.path + "/new.bin"
        let lost = try runProcess(Products.shareclient, ["read", "sh-x", "0", "--as", "com.a", "--output", created, "--socket", path], timeout: 10)
        XCTAssertEqual(lost.status, 69, lost.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: created), "a file the read created is removed")
        let existing = dir.path + "/old.bin"
        dir.write("old.bin", "previous content")
        let again = try runProcess(Products.shareclient, ["read", "sh-x", "0", "--as", "com.a", "--output", existing, "--socket", path], timeout: 10)
        XCTAssertEqual(again.status, 69, again.err)
        XCTAssertEqual(try String(contentsOfFile: existing, encoding: .utf8), "abc", "an existing file keeps what was written")
    }

    /// A broker that accepts the connection but never answers (hung, or stopped with SIGSTOP) is
    /// not waited for forever: exit 69 after $SHARECLIENT_TIMEOUT seconds (default 60), naming the
    /// socket.
    func testAHungBrokerIsNotWaitedForForever() throws {
        let dir = TempDir()
        let path = dir.path + "/hung.sock"
        let listener = try UnixSocket.listen(path: path)  // (connections wait in the backlog, unanswered)
        defer { close(listener) }
        var env = ProcessInfo.processInfo.environment
        env["SHARECLIENT_TIMEOUT"] = "0.3"
        let started = Date()
        let r = try runProcess(Products.shareclient, ["status", "--socket", path], env: env, timeout: 10)
        XCTAssertEqual(r.status, 69, r.err)
        XCTAssertTrue(r.err.contains(path) && r.err.contains("did not answer"), r.err)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    func testSharebrokerRefusesAnEmptySocketPathAndAMissingStateDirectory() throws {
        let dir = TempDir()
        let serve = try runProcess(Products.sharebroker, ["serve", "--socket", "", "--state", dir.path + "/state"], timeout: 10)
        XCTAssertEqual(serve.status, 64, serve.err)
        let explain = try runProcess(Products.sharebroker, ["explain", "deeplinkmyapp://x", "--state", dir.path + "/nope"], timeout: 10)
        XCTAssertEqual(explain.status, 66, "not the exit of \"nothing opens it\": \(explain.err)")
        XCTAssertTrue(explain.err.contains(dir.path + "/nope") && explain.err.contains("does not exist"), explain.err)
    }

    /// A socket path too long for `sun_path` is refused before anything is created: a usage
    /// error for --socket, an error for one from the environment.
    func testSharebrokerRefusesASocketPathTooLongBeforeCreatingAnything() throws {
        let dir = TempDir()
        let long = dir.path + "/" + String(repeating: "d", count: 120) + "/s.sock"
        let state = dir.path + "/state"
        let given = try runProcess(Products.sharebroker, ["serve", "--socket", long, "--state", state], timeout: 10)
        XCTAssertEqual(given.status, 64, given.err)
        XCTAssertTrue(given.err.contains("holds at most"), given.err)
        let fromEnv = try runProcess(Products.sharebroker, ["serve", "--state", state], env: ["SHAREBROKER_SOCKET": long], timeout: 10)
        XCTAssertEqual(fromEnv.status, 1, fromEnv.err)
        XCTAssertTrue(fromEnv.err.contains("holds at most"), fromEnv.err)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), [], "neither the state nor the socket's directory")
    }

    func testStateFilesProblemsAreNamed() throws {
        let h = BrokerHarness(
            manifests: ["10-myapp.json": "\u{FEFF}" + #"{"bundleID": "com.bom.app", "urlSchemes": ["bomapp"]}"#],
            associations: ["not a host": #"{"applinks": {"details": []}}"#, "example.com:8443": #"{"applinks": {"details": []}}"#])
        let target = h.dir.path + "/elsewhere.json"
        _ = FileManager.default.createFile(atPath: target, contents: Data(#"{"bundleID": "com.linked.app"}"#.utf8))
        XCTAssertEqual(symlink(target, h.state + "/apps/20-linked.json"), 0)
        chmod(h.state, 0o700)
        try h.start()
        let tool = try h.tool()
        let list = try tool.call("apps.list")
        let apps = (list["apps"]?.arrayValue ?? []).compactMap { $0["bundleID"]?.stringValue }
        XCTAssertEqual(apps, ["com.bom.app"], "a byte order mark is skipped; a symlinked manifest is not read")
        let errors = (list["errors"]?.arrayValue ?? []).map(\.compactText).joined(separator: "\n")
        XCTAssertTrue(errors.contains("20-linked.json") && errors.contains("symbolic link"), errors)
        let assoc = (list["associationErrors"]?.arrayValue ?? []).map(\.compactText).joined(separator: "\n")
        XCTAssertTrue(assoc.contains("not a host name"), assoc)
        XCTAssertFalse(assoc.contains("example.com:8443"), "DOMAIN:PORT.json is a host name: \(assoc)")
        // The offline tools skip a byte order mark too.
        let bomDoc = h.dir.path + "/bom.json"
        _ = FileManager.default.createFile(atPath: bomDoc, contents: Data(("\u{FEFF}" + #"{"applinks": {"details": []}}"#).utf8))
        let check = try runProcess(Products.sharebroker, ["check-association", bomDoc], timeout: 10)
        XCTAssertEqual(check.status, 0, check.out + check.err)
        let text = try runProcess(Products.shareclient, ["apps", "--socket", h.socket], timeout: 10)
        XCTAssertTrue(text.out.contains("association error: "), text.out)
        h.stop()
    }

    /// `shareclient apps` shows who may act as an app and how it is launched (and as whom).
    func testAppsShowsUidsAndLaunch() throws {
        let h = BrokerHarness(manifests: [
            "a.json": #"{"bundleID": "com.a.app", "uids": [0, 65534], "launch": ["/usr/bin/a", "--x"], "launchUser": "nobody"}"#
        ])
        try h.start()
        defer { h.stop() }
        let text = try runProcess(Products.shareclient, ["apps", "--socket", h.socket], timeout: 10)
        XCTAssertTrue(text.out.contains("    uids:    0, 65534\n"), text.out)
        XCTAssertTrue(text.out.contains("    launch:  /usr/bin/a --x  (as nobody)\n"), text.out)
    }

    /// STATE/apps or STATE/associations that is a file is named as a problem (it read as "no
    /// apps, no errors"); one that does not exist is no problem.
    func testInputDirectoriesThatAreFilesAreNamed() throws {
        let h = BrokerHarness(manifests: [:])
        try FileManager.default.createDirectory(atPath: h.state, withIntermediateDirectories: true)
        chmod(h.state, 0o700)
        _ = FileManager.default.createFile(atPath: h.state + "/apps", contents: Data("x".utf8))
        _ = FileManager.default.createFile(atPath: h.state + "/associations", contents: Data("y".utf8))
        try h.start()
        let list = try h.tool().call("apps.list")
        let errors = (list["errors"]?.arrayValue ?? []).map(\.compactText).joined(separator: "\n")
        XCTAssertTrue(errors.contains("/apps is not a directory: no manifest was read"), errors)
        let assoc = (list["associationErrors"]?.arrayValue ?? []).map(\.compactText).joined(separator: "\n")
        XCTAssertTrue(assoc.contains("/associations is not a directory: no association document was read"), assoc)
        h.stop()
        let empty = BrokerHarness(manifests: [:])
        try empty.start()
        let none = try empty.tool().call("apps.list")
        XCTAssertEqual(none["errors"]?.arrayValue?.count, 0, none.compactText)
        XCTAssertEqual(none["associationErrors"]?.arrayValue?.count, 0, none.compactText)
        empty.stop()
    }
}

extension ShareclientCommandTests {
    func testSendInlineSendsTheFilesBytes() throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start()
        let dir = TempDir()
        let source = dir.path + "/Quarterly.pdf"
        XCTAssertTrue(FileManager.default.createFile(atPath: source, contents: Data(pdfBytes)))
        let sent = try shareclient(h, ["send", "--file", source, "--inline", "--url", "https://example.com/ignored", "--json"])
        XCTAssertEqual(sent.status, 1, "a URL plus a PDF: the PDF extension does not take the URL: \(sent.err)")
        let ok = try shareclient(h, ["send", "--file", source, "--inline", "--to", "com.example.pdfreader.share", "--json"])
        XCTAssertEqual(ok.status, 0, ok.err)
        let shareID = try XCTUnwrap(try JSONParser.parse(Array(ok.out.utf8))["shareID"]?.stringValue, ok.out)
        // The bytes travelled in the request: the source can go before the app reads the share.
        try FileManager.default.removeItem(atPath: source)
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.pdfreader")
        let item = try XCTUnwrap(app.call("share.get", ["shareID": .string(shareID)])["items"]?.arrayValue?.first)
        XCTAssertEqual(item["name"], "Quarterly.pdf")
        XCTAssertEqual(item["type"], "com.adobe.pdf")
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: try XCTUnwrap(item["path"]?.stringValue)))), pdfBytes)
        let missing = try shareclient(h, ["send", "--file", dir.path + "/nope.pdf", "--inline"])
        XCTAssertEqual(missing.status, 66, missing.err)
        XCTAssertTrue(missing.err.contains("cannot read"), missing.err)
        h.stop()
    }

    func testSendInlineRefusesFilesOverTheBrokersMessageLimitBeforeReadingThem() throws {
        let h = BrokerHarness(manifests: ["20-pdf.json": pdfApp])
        try h.start { $0.maxMessage = 64 * 1024 }
        let dir = TempDir()
        let source = dir.path + "/big.pdf"
        XCTAssertTrue(FileManager.default.createFile(atPath: source, contents: Data(pdfBytes + [UInt8](repeating: 0x20, count: 100_000))))
        let sent = try shareclient(h, ["send", "--file", source, "--inline", "--to", "com.example.pdfreader.share"])
        XCTAssertEqual(sent.status, 66, sent.err)
        XCTAssertTrue(sent.err.contains("message limit of 65536") && sent.err.contains("--max-message"), sent.err)
        // By path it goes (the broker copies it).
        XCTAssertEqual(try shareclient(h, ["send", "--file", source, "--to", "com.example.pdfreader.share"]).status, 0)
        h.stop()
    }

    /// `shareclient listen` whose session a manifest reload ends says why on stderr and exits 1
    /// (it used to say only that the broker closed the connection).
    func testListenEndedByAReloadSaysWhy() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest])
        try h.start()
        defer { h.stop() }
        let listener = Process()
        listener.executableURL = URL(fileURLWithPath: Products.shareclient)
        listener.arguments = ["listen", "--as", "com.mycompany.myapp", "--timeout", "60", "--socket", h.socket]
        let err = Pipe()
        listener.standardOutput = FileHandle.nullDevice
        listener.standardError = err
        try listener.run()
        defer { if listener.isRunning { listener.terminate() } }
        let tool = try h.tool()
        XCTAssertTrue(waitUntil(timeout: 10) { (try? tool.call("broker.status"))?["subscribers"]?.intValue == 1 }, "nobody subscribed")
        try FileManager.default.removeItem(atPath: h.state + "/apps/myapp.json")
        _ = try tool.call("apps.reload")
        XCTAssertTrue(waitUntil(timeout: 10) { !listener.isRunning }, "listen ended")
        let said = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(listener.terminationStatus, 1, said)
        XCTAssertTrue(said.contains("session ended by a manifest reload: its bundle com.mycompany.myapp is no longer registered"), said)
    }
}
