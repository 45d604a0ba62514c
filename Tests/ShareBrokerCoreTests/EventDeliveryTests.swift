// Durable event delivery through the real socket: url.open, app.subscribe / app.ack, at-least-once
// redelivery, takeover, universal links, storage failures, and launch on demand.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

let deepLinkApp = """
    {"bundleID": "com.mycompany.myapp", "teamID": "ABCDE12345", "name": "My App",
     "urlSchemes": ["deeplinkmyapp"], "associatedDomains": ["applinks:example.com"],
     "appGroups": ["group.com.mycompany.myapp"]}
    """
let browserApp = """
    {"bundleID": "org.example.browser", "urlSchemes": ["https", "http"]}
    """
let exampleAASA = """
    {"applinks": {"apps": [], "details": [{"appID": "ABCDE12345.com.mycompany.myapp", "paths": ["/computers/*", "NOT /private/*"]}]}}
    """

func rpcCode(_ block: () throws -> Void) -> Int? {
    do {
        try block()
        return nil
    } catch ClientError.rpc(let e) {
        return e.code
    } catch {
        return -1
    }
}

final class EventDeliveryTests: XCTestCase {
    func makeBroker(_ configure: @escaping (inout BrokerConfiguration) -> Void = { _ in }) throws -> BrokerHarness {
        let h = BrokerHarness(
            manifests: ["10-myapp.json": deepLinkApp, "20-browser.json": browserApp],
            associations: ["example.com": exampleAASA])
        try h.start(configure)
        return h
    }

    func app(_ h: BrokerHarness) throws -> BrokerConnection {
        let c = try h.connect()
        try c.hello(role: "app", bundleID: "com.mycompany.myapp")
        return c
    }

    /// Opens `count` URLs of the app through one pipelined tool connection (batches of 500).
    func openMany(_ h: BrokerHarness, _ count: Int, from start: Int = 0) throws {
        let tool = try RawClient(h.socket)
        tool.send(#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"role":"tool"}}"# + "\n")
        XCTAssertNotNil(tool.readJSON()?["result"])
        var i = start
        while i < start + count {
            let n = min(500, start + count - i)
            var chunk = ""
            for j in i..<(i + n) {
                chunk += #"{"jsonrpc":"2.0","id":\#(j + 1),"method":"url.open","params":{"url":"deeplinkmyapp://item/\#(j)?pad=\#(String(repeating: "x", count: 100))"}}"# + "\n"
            }
            tool.send(chunk)
            for _ in 0..<n { XCTAssertNotNil(tool.readJSON()?["result"]) }
            i += n
        }
    }

    /// A raw app session of com.mycompany.myapp that has sent `app.subscribe` (id 2) and read
    /// nothing since its hello.
    func rawSubscriber(_ h: BrokerHarness) throws -> RawClient {
        let c = try RawClient(h.socket)
        c.send(#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"role":"app","bundleID":"com.mycompany.myapp"}}"# + "\n")
        XCTAssertNotNil(c.readJSON()?["result"])
        c.send(#"{"jsonrpc":"2.0","id":2,"method":"app.subscribe"}"# + "\n")
        return c
    }

    /// A backlog far larger than the output cap reaches its app whole and in order (events wait as
    /// references and are written as the app reads), also for an app that reads only later; events
    /// opened meanwhile come after it, and the slow reader is not dropped.
    func testABacklogLargerThanTheOutputCapIsStreamedInOrder() throws {
        let h = try makeBroker { $0.maxOutputBuffer = 65536 }
        defer { h.stop() }
        try openMany(h, 4000)
        let a = try rawSubscriber(h)
        // Not read for a while: more events arrive, the broker keeps the connection.
        try openMany(h, 1000, from: 4000)
        let observer = try h.tool()
        XCTAssertEqual(try observer.call("broker.status")["droppedSlowClients"]?.intValue, 0)
        XCTAssertEqual(a.readJSON()?["result"]?["pending"]?.intValue, 4000)
        var urls: [String] = []
        while urls.count < 5000, let m = a.readJSON(timeout: 10) {
            XCTAssertEqual(m["method"], "app.event")
            urls.append(m["params"]?["url"]?.stringValue ?? "?")
        }
        XCTAssertEqual(urls.count, 5000)
        XCTAssertEqual(urls, (0..<5000).map { "deeplinkmyapp://item/\($0)?pad=\(String(repeating: "x", count: 100))" })
        XCTAssertEqual(try observer.call("broker.status")["droppedSlowClients"]?.intValue, 0)
    }

    /// `app.ack` and `app.subscribe` in one write: the subscribe's reply and its backlog wait behind
    /// the ack's reply (held for its commit), and the backlog still goes out as the app reads
    /// instead of all at once when the commit releases them.
    func testABacklogBehindAHeldReplyIsStillStreamed() throws {
        let h = try makeBroker { $0.maxOutputBuffer = 65536 }
        defer { h.stop() }
        try openMany(h, 3000)
        let a = try RawClient(h.socket)
        a.send(#"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"role":"app","bundleID":"com.mycompany.myapp"}}"# + "\n")
        XCTAssertNotNil(a.readJSON()?["result"])
        a.send(
            #"{"jsonrpc":"2.0","id":2,"method":"app.ack","params":{"ids":["ev-1"]}}"# + "\n"
                + #"{"jsonrpc":"2.0","id":3,"method":"app.subscribe"}"# + "\n")
        XCTAssertEqual(a.readJSON()?["result"]?["acked"]?.intValue, 1)
        XCTAssertEqual(a.readJSON()?["result"]?["pending"]?.intValue, 2999)
        var ids: [String] = []
        while ids.count < 2999, let m = a.readJSON(timeout: 10) { ids.append(m["params"]?["id"]?.stringValue ?? "?") }
        XCTAssertEqual(ids, (2...3000).map { "ev-\($0)" })
        XCTAssertEqual(try h.tool().call("broker.status")["droppedSlowClients"]?.intValue, 0)
    }

    /// A subscriber that stops reading with events waiting is dropped after the stall limit (a hung
    /// app) by the loop's timer, with nothing more written to it, so the next subscriber gets them;
    /// until then it was not dropped for them.
    func testASubscriberThatStopsReadingIsDroppedAfterTheStallLimit() throws {
        let h = try makeBroker {
            $0.maxOutputBuffer = 65536
            $0.stalledReaderSeconds = 0.5
        }
        defer { h.stop() }
        try openMany(h, 2000)
        let hung = try rawSubscriber(h)
        let tool = try h.tool()
        XCTAssertEqual(try tool.call("broker.status")["droppedSlowClients"]?.intValue, 0)
        XCTAssertTrue(waitUntil(timeout: 5) { (try? tool.call("broker.status"))?["droppedSlowClients"]?.intValue == 1 })
        XCTAssertTrue(hung.waitForClose(timeout: 5), "the stalled subscriber's connection was not closed")
        let next = try app(h)
        XCTAssertEqual(try next.call("app.subscribe")["pending"]?.intValue, 2000)
    }

    /// Events acked while still waiting in a subscriber's queue are not written to it; a new
    /// subscription takes the queue over from scratch.
    func testQueuedEventsAckedMeanwhileAreSkippedAndATakeoverStartsAfresh() throws {
        let h = try makeBroker { $0.maxOutputBuffer = 65536 }
        defer { h.stop() }
        try openMany(h, 3000)
        let slow = try rawSubscriber(h)
        // Another session of the app acks the first 2,500 (it may: the ids are the app's).
        let other = try app(h)
        let ids: [JSONValue] = (1...2500).map { .string("ev-\($0)") }
        XCTAssertEqual(try other.call("app.ack", ["ids": .array(ids)])["acked"]?.intValue, 2500)
        XCTAssertEqual(slow.readJSON()?["result"]?["pending"]?.intValue, 3000)
        var got: [String] = []
        while let m = slow.readJSON(timeout: 1) { got.append(m["params"]?["id"]?.stringValue ?? "?") }
        // Whatever was already written before the acks arrives; the rest resumes after ev-2500.
        XCTAssertLessThan(got.count, 3000, "acked events were written anyway")
        XCTAssertEqual(Array(got.suffix(500)), (2501...3000).map { "ev-\($0)" })
        XCTAssertEqual(got, got.sorted { Int($0.dropFirst(3))! < Int($1.dropFirst(3))! })
        // Taken over: the new subscriber gets the 500 pending, the old connection nothing more.
        let taker = try app(h)
        XCTAssertEqual(try taker.call("app.subscribe")["pending"]?.intValue, 500)
        var taken: [String] = []
        while taken.count < 500, let n = try taker.nextNotification(timeoutMillis: 5000) { taken.append(n.params?["id"]?.stringValue ?? "?") }
        XCTAssertEqual(taken, (2501...3000).map { "ev-\($0)" })
    }

    /// A URL written with non-ASCII characters or spaces (as people paste them) is opened as the
    /// URI it names: routed by its IDNA host, delivered and answered encoded; shares store it so.
    func testIRIsAreOpenedAndSharedAsTheURIsTheyName() throws {
        let h = try makeBroker()
        defer { h.stop() }
        let tool = try h.tool()
        let a = try app(h)
        _ = try a.call("app.subscribe")
        let opened = try tool.call("url.open", ["url": "deeplinkmyapp://ünï/a b"])
        XCTAssertEqual(opened["app"], "com.mycompany.myapp")
        XCTAssertEqual(try a.nextNotification(timeoutMillis: 5000)?.params?["url"], "deeplinkmyapp://xn--n-nga1b/a%20b")
        XCTAssertEqual(try tool.call("url.canOpen", ["url": "https://de.wikipedia.org/wiki/Straße"])["via"], "browser")
        let viaFallback = try tool.call("url.open", ["url": "nobody://x", "fallback": "https://example.com/computers/Straße"])
        XCTAssertEqual(viaFallback["via"], "fallback")
        XCTAssertEqual(viaFallback["app"], "com.mycompany.myapp", "the fallback's universal link matched its encoded path")
        XCTAssertEqual(try a.nextNotification(timeoutMillis: 5000)?.params?["webpageURL"], "https://example.com/computers/Stra%C3%9Fe")
        expectRPCError(-32602, messageContains: "control character") { try tool.call("url.open", ["url": "deeplinkmyapp://a\u{7}ä"]) }
    }

    /// An internationalized domain written in Unicode, in the manifest's associatedDomains and in
    /// the association document's file name, is its IDNA form, as URLs' hosts are: a universal
    /// link on it opens the app however the URL writes the host. A port out of range is refused.
    func testUnicodeAssociatedDomainsAreTheirIDNAForm() throws {
        let h = BrokerHarness(
            manifests: [
                "books.json": #"{"bundleID": "com.books.app", "teamID": "ABCDE12345", "associatedDomains": ["applinks:Bücher.de", "applinks:*.münchen.de"]}"#,
                "bad.json": #"{"bundleID": "com.bad.app", "associatedDomains": ["applinks:example.com:99999"]}"#,
            ],
            associations: [
                "bücher.de": #"{"applinks": {"details": [{"appIDs": ["ABCDE12345.com.books.app"], "components": [{"/": "/*"}]}]}}"#,
                "xn--mnchen-3ya.de": #"{"applinks": {"details": [{"appIDs": ["ABCDE12345.com.books.app"], "components": [{"/": "/*"}]}]}}"#,
            ])
        try h.start()
        defer { h.stop() }
        let tool = try h.tool()
        for url in ["https://bücher.de/a", "https://xn--bcher-kva.de/a", "https://BÜCHER.de/a", "https://shop.münchen.de/x"] {
            let r = try tool.call("url.canOpen", ["url": .string(url)])
            XCTAssertEqual(r["app"], "com.books.app", "\(url): \(r)")
            XCTAssertEqual(r["via"], "universalLink", "\(url): \(r)")
        }
        let list = try tool.call("apps.list")
        XCTAssertTrue(
            list.compactText.contains("port out of range (1-65535) in 'applinks:example.com:99999'"), list.compactText)
        XCTAssertEqual(list["associationErrors"]?.arrayValue?.count ?? 0, 0, list.compactText)
    }

    func testQueuedEventReachesAppThatSubscribesLaterAndAckRemovesIt() throws {
        let h = try makeBroker()
        let tool = try h.tool()
        let r = try tool.call("url.open", ["url": "deeplinkmyapp://open-from-share?share=42"])
        XCTAssertEqual(r["app"], "com.mycompany.myapp")
        XCTAssertEqual(r["via"], "scheme")
        XCTAssertEqual(r["delivered"], false)
        XCTAssertEqual(r["queued"], true)
        let eventID = try XCTUnwrap(r["eventID"]?.stringValue)
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 1)

        let a = try app(h)
        XCTAssertEqual(try a.call("app.subscribe")["pending"]?.intValue, 1)
        let n = try XCTUnwrap(a.nextNotification(timeoutMillis: 5000))
        XCTAssertEqual(n.method, "app.event")
        XCTAssertEqual(n.params?["id"]?.stringValue, eventID)
        XCTAssertEqual(n.params?["kind"], "openURL")
        XCTAssertEqual(n.params?["url"], "deeplinkmyapp://open-from-share?share=42")
        XCTAssertNil(n.params?["sourceApp"], "a tool has no bundle ID")
        XCTAssertEqual(try a.call("app.ack", ["ids": [123, .null, ["x": 1]]])["acked"]?.intValue, 0, "ids that are not strings count 0")
        XCTAssertEqual(try a.call("app.ack", ["ids": [.string(eventID), "ev-999", 7, .string(eventID)]])["acked"]?.intValue, 1)
        XCTAssertEqual(try a.call("app.ack", ["ids": [.string(eventID)]])["acked"]?.intValue, 0)
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 0)
        h.stop()
    }

    func testLiveSubscriberGetsEventsInOrderWithSourceApp() throws {
        let h = try makeBroker()
        let a = try app(h)
        XCTAssertEqual(try a.call("app.subscribe")["pending"]?.intValue, 0)
        let opener = try app(h)  // the app opening its own scheme: sourceApp is its bundle ID
        var ids: [String] = []
        for i in 0..<20 {
            let r = try opener.call("url.open", ["url": .string("DeepLinkMyApp://item?id=\(i)")])
            XCTAssertEqual(r["delivered"], true)
            XCTAssertEqual(r["queued"], false)
            ids.append(r["eventID"]!.stringValue!)
        }
        var got: [String] = []
        for _ in 0..<20 {
            let n = try XCTUnwrap(a.nextNotification(timeoutMillis: 5000))
            got.append(n.params!["id"]!.stringValue!)
            XCTAssertEqual(n.params?["sourceApp"], "com.mycompany.myapp")
        }
        XCTAssertEqual(got, ids)
        h.stop()
    }

    /// A subscriber that opens its own URL gets, on its one connection, the url.open reply
    /// before the event (events are written out ahead of other connections' replies, never ahead
    /// of their own connection's), and an ack's reply before the next event.
    func testOnOneConnectionARepliesComeBeforeTheEventsOfTheSameCommit() throws {
        let h = try makeBroker()
        let c = try RawClient(h.socket)
        c.send(#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"role":"app","bundleID":"com.mycompany.myapp"}}"# + "\n")
        XCTAssertNotNil(c.readJSON()?["result"])
        c.send(#"{"jsonrpc":"2.0","id":1,"method":"app.subscribe"}"# + "\n")
        XCTAssertNotNil(c.readJSON()?["result"])
        var previous: String? = nil
        for i in 0..<10 {
            var line = #"{"jsonrpc":"2.0","id":\#(100 + i),"method":"url.open","params":{"url":"deeplinkmyapp://self/\#(i)"}}"# + "\n"
            if let previous { line += #"{"jsonrpc":"2.0","id":\#(200 + i),"method":"app.ack","params":{"ids":["\#(previous)"]}}"# + "\n" }
            c.send(line)  // both in one write: usually one turn, one commit
            let reply = c.readJSON()
            XCTAssertEqual(reply?["id"]?.intValue, 100 + i, "the url.open reply first: \(String(describing: reply))")
            XCTAssertEqual(reply?["result"]?["delivered"], true)
            var gotAck = previous == nil
            var event: JSONValue? = nil
            while event == nil {
                let m = c.readJSON()
                XCTAssertNotNil(m, "round \(i)")
                if m == nil { break }
                if m?["method"] == "app.event" {
                    XCTAssertTrue(gotAck, "the ack's reply before the event: \(String(describing: m))")
                    event = m
                } else {
                    XCTAssertEqual(m?["id"]?.intValue, 200 + i)
                    XCTAssertEqual(m?["result"]?["acked"]?.intValue, 1)
                    gotAck = true
                }
            }
            XCTAssertEqual(event?["params"]?["url"]?.stringValue, "deeplinkmyapp://self/\(i)")
            XCTAssertEqual(event?["params"]?["id"], reply?["result"]?["eventID"])
            previous = event?["params"]?["id"]?.stringValue
        }
        h.stop()
    }

    func testUnackedEventsAreRedeliveredOnResubscribeAndTakeover() throws {
        let h = try makeBroker()
        let tool = try h.tool()
        var ids: [String] = []
        for i in 0..<3 { ids.append(try tool.call("url.open", ["url": .string("deeplinkmyapp://x/\(i)")])["eventID"]!.stringValue!) }
        do {
            let a = try app(h)
            try a.call("app.subscribe")
            for _ in 0..<3 { _ = try a.nextNotification(timeoutMillis: 5000) }
            try a.call("app.ack", ["ids": [.string(ids[0])]])
        }  // disconnects without acking the others
        let first = try app(h)
        XCTAssertEqual(try first.call("app.subscribe")["pending"]?.intValue, 2)
        XCTAssertEqual(try first.nextNotification(timeoutMillis: 5000)?.params?["id"]?.stringValue, ids[1])
        XCTAssertEqual(try first.nextNotification(timeoutMillis: 5000)?.params?["id"]?.stringValue, ids[2])
        // Takeover: the second subscriber gets what is not acked; the first gets nothing more.
        let second = try app(h)
        XCTAssertEqual(try second.call("app.subscribe")["pending"]?.intValue, 2)
        XCTAssertEqual(try second.nextNotification(timeoutMillis: 5000)?.params?["id"]?.stringValue, ids[1])
        XCTAssertEqual(try second.nextNotification(timeoutMillis: 5000)?.params?["id"]?.stringValue, ids[2])
        let newID = try tool.call("url.open", ["url": "deeplinkmyapp://new"])["eventID"]!.stringValue!
        XCTAssertEqual(try second.nextNotification(timeoutMillis: 5000)?.params?["id"]?.stringValue, newID)
        // (it did not ask for app.subscriptionEnded: nothing at all, as the contract has it)
        XCTAssertThrowsError(try first.nextNotification(timeoutMillis: 300)) { e in
            guard case ClientError.timeout = e else { return XCTFail("\(e)") }
        }
        // The old subscriber's acks still count.
        XCTAssertEqual(try first.call("app.ack", ["ids": [.string(ids[1])]])["acked"]?.intValue, 1)
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 2)
        h.stop()
    }

    /// A subscriber that asked for it (`takeoverNotice: true`) is told of a takeover, once, with
    /// `app.subscriptionEnded {app, reason}`, and then gets nothing more; its acks still count.
    func testASubscriberThatAskedIsToldOfATakeover() throws {
        let h = try makeBroker()
        defer { h.stop() }
        let tool = try h.tool()
        let first = try app(h)
        XCTAssertEqual(try first.call("app.subscribe", ["takeoverNotice": true])["pending"], 0)
        let e1 = try XCTUnwrap(tool.call("url.open", ["url": "deeplinkmyapp://one"])["eventID"])
        XCTAssertEqual(try first.nextNotification(timeoutMillis: 5000)?.params?["id"], e1)
        let second = try app(h)
        XCTAssertEqual(try second.call("app.subscribe")["pending"], 1)
        let ended = try first.nextNotification(timeoutMillis: 5000)
        XCTAssertEqual(ended?.method, "app.subscriptionEnded")
        XCTAssertEqual(ended?.params?["app"], "com.mycompany.myapp")
        XCTAssertTrue(
            ended?.params?["reason"]?.stringValue?.contains("another connection of com.mycompany.myapp subscribed") == true,
            "\(String(describing: ended))")
        _ = try tool.call("url.open", ["url": "deeplinkmyapp://two"])
        XCTAssertThrowsError(try first.nextNotification(timeoutMillis: 300), "nothing more") { e in
            guard case ClientError.timeout = e else { return XCTFail("\(e)") }
        }
        XCTAssertEqual(try first.call("app.ack", ["ids": [e1]])["acked"], 1, "its acks still count")
        XCTAssertEqual(rpcCode { try first.call("app.subscribe", ["takeoverNotice": "yes"]) }, -32602)
    }

    /// `app.unsubscribe`: the connection stays open and gets no more events; the app has no
    /// subscriber (url.open queues); what it had not acked, and what came since, go to the next
    /// subscriber. Unsubscribing a connection that is not the subscriber says false.
    func testUnsubscribeStopsDeliveryAndTheEventsWaitForTheNextSubscriber() throws {
        let h = try makeBroker()
        let tool = try h.tool()
        let a = try app(h)
        XCTAssertEqual(try a.call("app.unsubscribe")["unsubscribed"], false, "not subscribed yet")
        try a.call("app.subscribe")
        let first = try tool.call("url.open", ["url": "deeplinkmyapp://one"])
        XCTAssertEqual(first["delivered"], true)
        XCTAssertEqual(try a.nextNotification(timeoutMillis: 5000)?.params?["id"], first["eventID"])
        XCTAssertEqual(try a.call("app.unsubscribe")["unsubscribed"], true)
        XCTAssertEqual(try a.call("app.unsubscribe")["unsubscribed"], false, "already unsubscribed")
        let second = try tool.call("url.open", ["url": "deeplinkmyapp://two"])
        XCTAssertEqual(second["delivered"], false)
        XCTAssertEqual(second["queued"], true)
        XCTAssertThrowsError(try a.nextNotification(timeoutMillis: 300), "no event after unsubscribing") { e in
            guard case ClientError.timeout = e else { return XCTFail("\(e)") }
        }
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 2)
        // The same connection subscribes again: both, oldest first.
        XCTAssertEqual(try a.call("app.subscribe", ["takeoverNotice": true])["pending"]?.intValue, 2)
        XCTAssertEqual(try a.nextNotification(timeoutMillis: 5000)?.params?["id"], first["eventID"])
        XCTAssertEqual(try a.nextNotification(timeoutMillis: 5000)?.params?["id"], second["eventID"])
        // A connection that was taken over is not the subscriber: its unsubscribe changes nothing.
        let b = try app(h)
        try b.call("app.subscribe")
        XCTAssertEqual(try a.nextNotification(timeoutMillis: 5000)?.method, "app.subscriptionEnded")
        XCTAssertEqual(try a.call("app.unsubscribe")["unsubscribed"], false)
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://three"])["delivered"], true, "b still subscribed")
        h.stop()
    }

    func testUniversalLinkBrowserFallbackAndErrors() throws {
        let h = try makeBroker()
        let tool = try h.tool()
        let ul = try tool.call("url.open", ["url": "https://example.com/computers/pi?x=1"])
        XCTAssertEqual(ul["app"], "com.mycompany.myapp")
        XCTAssertEqual(ul["via"], "universalLink")
        let browser = try tool.call("url.open", ["url": "https://example.com/private/a"])
        XCTAssertEqual(browser["app"], "org.example.browser")
        XCTAssertEqual(browser["via"], "browser")
        let http = try tool.call("url.open", ["url": "http://example.com/computers/pi"])
        XCTAssertEqual(http["via"], "browser", "http skips universal links")
        let fb = try tool.call("url.open", ["url": "nosuchscheme://x", "fallback": "https://example.com/computers/fallback"])
        XCTAssertEqual(fb["via"], "fallback")
        XCTAssertEqual(fb["app"], "com.mycompany.myapp")
        do {
            try tool.call("url.open", ["url": "nosuchscheme://x"])
            XCTFail("expected -32004")
        } catch ClientError.rpc(let e) {
            XCTAssertEqual(e.code, -32004)
            XCTAssertTrue(e.message.contains("nosuchscheme://x"), e.message)
        }
        XCTAssertEqual(rpcCode { try tool.call("url.open", ["url": "not a url"]) }, -32602)
        XCTAssertEqual(rpcCode { try tool.call("url.open", [:]) }, -32602)
        XCTAssertEqual(rpcCode { try tool.call("url.open", ["url": "deeplinkmyapp://x", "fallback": "bad url"]) }, -32602)

        let a = try app(h)
        try a.call("app.subscribe")
        let n = try XCTUnwrap(a.nextNotification(timeoutMillis: 5000))
        XCTAssertEqual(n.params?["kind"], "continueUserActivity")
        XCTAssertEqual(n.params?["activityType"], "NSUserActivityTypeBrowsingWeb")
        XCTAssertEqual(n.params?["webpageURL"], "https://example.com/computers/pi?x=1")
        let n2 = try XCTUnwrap(a.nextNotification(timeoutMillis: 5000))
        XCTAssertEqual(n2.params?["kind"], "continueUserActivity", "a fallback through a universal link")
        XCTAssertEqual(n2.params?["webpageURL"], "https://example.com/computers/fallback")

        let can = try tool.call("url.canOpen", ["url": "https://example.com/computers/x"])
        XCTAssertEqual(can["canOpen"], true)
        XCTAssertEqual(can["via"], "universalLink")
        XCTAssertEqual(try tool.call("url.canOpen", ["url": "zzz://x"])["canOpen"], false)
        XCTAssertEqual(rpcCode { try tool.call("url.canOpen", ["url": "::"]) }, -32602)
        // With a fallback: what url.open would do with it (and nothing is queued).
        let pending = try tool.call("broker.status")["pendingEvents"]
        let viaFallback = try tool.call("url.canOpen", ["url": "zzz://x", "fallback": "https://example.com/computers/fb"])
        XCTAssertEqual(viaFallback, ["canOpen": true, "app": "com.mycompany.myapp", "via": "fallback"])
        XCTAssertEqual(try tool.call("url.canOpen", ["url": "deeplinkmyapp://x", "fallback": "zzz://y"])["via"], "scheme", "the URL's own app first")
        XCTAssertEqual(try tool.call("url.canOpen", ["url": "zzz://x", "fallback": "zzz://y"]), ["canOpen": false])
        XCTAssertEqual(rpcCode { try tool.call("url.canOpen", ["url": "zzz://x", "fallback": "bad url"]) }, -32602)
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"], pending)
        let explain = try tool.call("url.explain", ["url": "https://example.com/private/a"])
        XCTAssertGreaterThan(explain["steps"]?.arrayValue?.count ?? 0, 1)
        h.stop()
    }

    func testRolesForAppMethods() throws {
        let h = try makeBroker()
        let tool = try h.tool()
        XCTAssertEqual(rpcCode { try tool.call("app.subscribe") }, -32001)
        XCTAssertEqual(rpcCode { try tool.call("app.ack", ["ids": []]) }, -32001)
        XCTAssertEqual(rpcCode { try tool.call("app.unsubscribe") }, -32001)
        let anon = try h.connect()
        XCTAssertEqual(rpcCode { try anon.call("url.open", ["url": "deeplinkmyapp://x"]) }, -32001)
        let a = try app(h)
        XCTAssertEqual(rpcCode { try a.call("app.ack", ["ids": "ev-1"]) }, -32602)
        XCTAssertEqual(rpcCode { try a.call("app.ack", [:]) }, -32602)
        h.stop()
    }

    func testStorageFailureStoresNothing() throws {
        let faults = FaultSwitch()
        let h = try makeBroker { $0.storeFaults = faults.injector }
        let a = try app(h)
        try a.call("app.subscribe")
        let tool = try h.tool()
        for point in [JournalFaultPoint.reserve, .write, .sync] {
            faults.set(point, ENOSPC)
            do {
                try tool.call("url.open", ["url": "deeplinkmyapp://fail"])
                XCTFail("expected -32005 at \(point)")
            } catch ClientError.rpc(let e) {
                XCTAssertEqual(e.code, -32005)
                XCTAssertTrue(e.message.lowercased().contains("space"), e.message)
            }
            faults.set(point, nil)
        }
        XCTAssertEqual(try tool.call("broker.status")["pendingEvents"]?.intValue, 0)
        XCTAssertThrowsError(try a.nextNotification(timeoutMillis: 200), "nothing was delivered")
        // And the broker works again once the disk has room.
        XCTAssertEqual(try tool.call("url.open", ["url": "deeplinkmyapp://ok"])["delivered"], true)
        XCTAssertEqual(try a.nextNotification(timeoutMillis: 5000)?.params?["url"], "deeplinkmyapp://ok")
        h.stop()
    }
}

/// A thread-safe switch the test flips to make the journal fail at one point.
final class FaultSwitch: @unchecked Sendable {  // guarded by `lock`
    let lock = NSLock()
    var failures: [String: Int32] = [:]
    func set(_ p: JournalFaultPoint, _ errno: Int32?) {
        lock.lock()
        failures["\(p)"] = errno
        lock.unlock()
    }
    var injector: @Sendable (JournalFaultPoint) -> Int32? {
        { [self] p in
            lock.lock()
            defer { lock.unlock() }
            return failures["\(p)"]
        }
    }
}

final class AssociationReportTests: XCTestCase {
    func testMalformedAssociationDocumentIsReportedAndMatchesNothing() throws {
        let h = BrokerHarness(
            manifests: ["10-myapp.json": deepLinkApp, "20-browser.json": browserApp],
            associations: ["example.com": #"{"applinks": {"details": [{"appIDs": "ABCDE12345.com.mycompany.myapp", "components": []}]}}"#])
        try h.start()
        let tool = try h.tool()
        let errors = try tool.call("apps.list")["associationErrors"]?.arrayValue ?? []
        XCTAssertEqual(errors.first?["host"], "example.com")
        XCTAssertTrue(errors.first?["message"]?.stringValue?.contains("example.com.json") ?? false, "\(errors)")
        XCTAssertTrue(errors.first?["message"]?.stringValue?.contains("appIDs") ?? false, "\(errors)")
        XCTAssertEqual(try tool.call("broker.status")["associationErrors"]?.intValue, 1)
        let r = try tool.call("url.open", ["url": "https://example.com/computers/1"])
        XCTAssertEqual(r["via"], "browser", "a malformed document matches nothing")
        h.stop()
    }
}
