// ShareBrokerClient against an in-process broker: hello and session errors, url.open with the
// subscription stream and ack (scheme and universal link, live and queued), the share flow
// (extension share.send with open → app event → share.get → share.complete), group defaults
// with the watch stream and compare-and-set, typed errors, and reconnection after the broker
// restarts on the same socket and state without the app re-subscribing.

import Foundation
import ShareClient
import ShareProtocol
import Testing

@Suite(.serialized, .timeLimit(.minutes(2)))
struct ClientTests {
    // MARK: Session

    @Test func helloStatusDiscoverAndApps() async throws {
        let h = try startBroker()
        let tool = h.client(.tool)
        let info = try await tool.connect()
        #expect(info.protocolVersion == 1)
        #expect(info.role == .tool)
        #expect(info.brokerName == "sharebroker")
        #expect(await tool.isConnected)
        #expect(try await tool.connect() == info, "connect() again returns the session")

        let status = try await tool.status()
        #expect(!status.version.isEmpty)
        #expect(status.connections >= 1)
        #expect(status.apps == 2)

        let doc = try await tool.discover()
        let methods = Set((doc["methods"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue })
        #expect(methods.isSuperset(of: ["hello", "url.open", "share.send", "defaults.watch", "app.subscribe"]))

        let apps = try await tool.appsList()
        #expect(apps.apps.map(\.bundleID).sorted() == ["com.mycompany.myapp", "org.other.app"])
        let mine = try #require(apps.apps.first { $0.bundleID == "com.mycompany.myapp" })
        #expect(mine.urlSchemes.contains("stats"))
        #expect(mine.extensions.map(\.bundleID).contains("com.mycompany.myapp.share"))
        #expect(try await tool.appsReload().apps.count == 2)

        let can = try await tool.canOpen("DeepLinkingDemo://customerdetail?id=practice")
        #expect(can.canOpen && can.app == "com.mycompany.myapp" && can.via == .scheme)
        #expect(try await tool.canOpen("nohandler://x").canOpen == false)
        let fallback = try await tool.canOpen("nohandler://x", fallback: "DeepLinkingDemo://customerdetail?id=1")
        #expect(fallback.canOpen && fallback.app == "com.mycompany.myapp" && fallback.via == .fallback)
        let why = try await tool.explain("https://example.com/computers/pi")
        #expect(why.app == "com.mycompany.myapp" && why.via == .universalLink)
        #expect(!why.text.isEmpty)
        let none = try await tool.explain("nohandler://x")
        #expect(none.error?.code == -32004)

        let raw = try await tool.call("broker.status")
        #expect(raw["apps"]?.intValue == 2)
        await tool.close()
        #expect(await brokerError { try await tool.status() } == .closed)
    }

    @Test func sessionErrors() async throws {
        let h = try startBroker()
        #expect(await brokerError { try await h.client(.app, "com.unknown.app").connect() }?.code == -32001)
        if ProcessInfo.processInfo.environment["SHAREBROKER_BUNDLE_ID"] == nil {
            #expect(await brokerError { try await h.client(.app).connect() }?.code == -32602)
        }
        let nowhere = ShareBrokerClient(socketPath: h.dir.path + "/nothing.sock", role: .tool)
        guard case .unreachable(let path, _)? = await brokerError({ try await nowhere.connect() }) else {
            Issue.record("expected .unreachable")
            return
        }
        #expect(path == h.dir.path + "/nothing.sock")
        let idle = h.client(.tool)
        #expect(await brokerError { try await idle.status() } == .notConnected)
        // An extension is refused app-only methods.
        let ext = h.client(.extension, "com.mycompany.myapp.share")
        try await ext.connect()
        #expect(await brokerError { try await ext.subscribe() }?.code == -32001)
    }

    // MARK: Events

    @Test func urlOpenSubscribeAndAck() async throws {
        let h = try startBroker()
        let tool = h.client(.tool)
        try await tool.connect()
        // Opened before the app subscribes: queued, then delivered on subscribe.
        let queued = try await tool.urlOpen("DeepLinkingDemo://customerdetail?id=Hi%20Deep%20Linking")
        #expect(queued.app == "com.mycompany.myapp" && queued.via == .scheme)
        #expect(queued.queued && !queued.delivered)

        let app = h.client(.app, "com.mycompany.myapp")
        try await app.connect()
        let events = await Collector.start(try await app.subscribe())
        let first = await events.wait(for: 1)
        #expect(first.map(\.id) == [queued.eventID])
        #expect(first.first?.kind == .openURL(url: "DeepLinkingDemo://customerdetail?id=Hi%20Deep%20Linking", sourceApp: nil))

        // Opened while subscribed: delivered live.
        let live = try await tool.urlOpen(try Router.build("stats://watchlist?id=:id&name=:name&iso=:iso", values: [
            "id": "678", "name": "São Tomé & Príncipe", "iso": "STP",
        ]))
        #expect(live.delivered && !live.queued)
        let both = await events.wait(for: 2)
        #expect(both.map(\.id) == [queued.eventID, live.eventID])

        // The router turns the events into typed calls.
        actor Seen { var names: [String] = []; func add(_ s: String) { names.append(s) } }
        let seen = Seen()
        var router = Router()
        try router.add("DeepLinkingDemo://customerdetail?id=:id") { m in await seen.add(m.string("id")!) }
        try router.add("stats://watchlist?id=:id&name=:name&iso=:iso") { m in await seen.add(m.string("name")!) }
        for e in both {
            #expect(try await router.handle(e))
            try await e.ack()
        }
        #expect(await seen.names == ["Hi Deep Linking", "São Tomé & Príncipe"])
        #expect(try await app.ack([queued.eventID, live.eventID, "ev-nope"]) == 0, "acking again is harmless")
        #expect(try await tool.status().pendingEvents == 0)
        await events.cancel()
    }

    @Test func universalLinkBecomesContinueUserActivity() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp")
        try await app.connect()
        let events = await Collector.start(try await app.subscribe())
        let tool = h.client(.tool)
        try await tool.connect()
        let r = try await tool.urlOpen("https://example.com/computers/raspberry-pi")
        #expect(r.via == .universalLink)
        let e = try #require(await events.wait(for: 1).first)
        #expect(e.kind == .continueUserActivity(activityType: "NSUserActivityTypeBrowsingWeb", webpageURL: "https://example.com/computers/raspberry-pi"))
        #expect(e.via == .universalLink)
        #expect(try RoutePattern("https://example.com/computers/:slug").match(e.url!)?.string("slug") == "raspberry-pi")
        try await e.ack()
    }

    /// Ending the iteration of `subscribe()` unsubscribes: the broker queues new events for the
    /// next subscriber instead of sending them here to be dropped; subscribing again gets them.
    @Test func endingTheEventStreamUnsubscribes() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp")
        try await app.connect()
        let tool = h.client(.tool)
        try await tool.connect()
        let events = await Collector.start(try await app.subscribe())
        let first = try await tool.urlOpen("deeplinkmyapp://one")
        #expect(first.delivered)
        #expect(await events.wait(for: 1).map(\.id) == [first.eventID])
        await events.cancel()
        #expect(await events.waitForEnd())
        var second = try await tool.urlOpen("deeplinkmyapp://two")
        for _ in 0..<200 where second.delivered {  // (the unsubscribe is on its way)
            try await Task.sleep(for: .milliseconds(10))
            second = try await tool.urlOpen("deeplinkmyapp://two")
        }
        #expect(second.queued && !second.delivered, "no subscriber once the stream ended")
        #expect(await app.isConnected)
        let again = await Collector.start(try await app.subscribe())
        let got = await again.wait(for: 2)
        #expect(got.first?.id == first.eventID, "the unacked event comes again, first")
        #expect(got.last?.id == second.eventID)
        await again.cancel()
    }

    /// A second instance of the app subscribing takes the events over: the first one's stream
    /// ends with `.subscriptionEnded` (instead of going quiet), its client still connected.
    @Test func aTakeoverEndsTheFirstStream() async throws {
        let h = try startBroker()
        let first = h.client(.app, "com.mycompany.myapp")
        try await first.connect()
        let firstEvents = await Collector.start(try await first.subscribe())
        let second = h.client(.app, "com.mycompany.myapp")
        try await second.connect()
        let secondEvents = await Collector.start(try await second.subscribe())
        #expect(await firstEvents.waitForEnd())
        guard case .subscriptionEnded(let reason)? = await firstEvents.failure as? ShareBrokerError else {
            Issue.record("ended with \(String(describing: await firstEvents.failure))")
            return
        }
        #expect(reason.contains("another connection of com.mycompany.myapp subscribed"))
        #expect(await first.isConnected)
        let tool = h.client(.tool)
        try await tool.connect()
        let r = try await tool.urlOpen("deeplinkmyapp://after")
        #expect(await secondEvents.wait(for: 1).map(\.id) == [r.eventID])
        await secondEvents.cancel()
    }

    // MARK: Shares

    @Test func shareFlowFromExtensionToApp() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp")
        try await app.connect()
        let events = await Collector.start(try await app.subscribe())

        let ext = h.client(.extension, "com.mycompany.myapp.share")
        try await ext.connect()
        let youtube = "https://youtu.be/dQw4w9WgXcQ?si=abc"
        let targets = try await ext.shareTargets([.url(youtube)])
        #expect(Set(targets.map(\.extensionID)) == ["com.mycompany.myapp.share", "org.other.app.share"])
        let sent = try await ext.shareSend([.url(youtube)], open: true)
        #expect(sent.extensionID == "com.mycompany.myapp.share")
        #expect(sent.app == "com.mycompany.myapp")
        #expect(sent.group == appGroup)
        #expect(sent.eventID != nil)

        let event = try #require(await events.wait(for: 1).first)
        #expect(event.id == sent.eventID)
        #expect(event.kind == .openURL(url: "deeplinkmyapp://open-from-share?share=\(sent.shareID)", sourceApp: "com.mycompany.myapp.share"))
        let shareID = try #require(try RoutePattern("deeplinkmyapp://open-from-share").match(event.url!)?.string("share"))
        #expect(shareID == sent.shareID)

        let list = try await app.shareList()
        #expect(list.map(\.shareID) == [shareID])
        let share = try await app.shareGet(shareID)
        #expect(share.extensionID == "com.mycompany.myapp.share")
        #expect(share.group == appGroup)
        #expect(share.items.count == 1)
        #expect(share.items.first?.url == youtube)
        #expect(share.items.first?.type == "public.url")
        try await app.shareComplete(shareID)
        try await event.ack()
        #expect(await brokerError { try await app.shareGet(shareID) }?.code == -32002)
        #expect(try await app.shareList().isEmpty)

        // A tool naming the extension; `open: .url(…)` opens that URL instead.
        let tool = h.client(.tool)
        try await tool.connect()
        let viaTool = try await tool.shareSend(
            [.url("https://example.org/page", type: "public.url")], extension: "com.mycompany.myapp.share",
            open: .url("stats://watchlist?id=1&name=x&iso=y"))
        let second = try #require(await events.wait(for: 2).last)
        #expect(second.id == viaTool.eventID)
        #expect(second.url == "stats://watchlist?id=1&name=x&iso=y")
        #expect(try await app.shareList(group: appGroup).count == 1)
        await events.cancel()
    }

    // MARK: Defaults

    struct Country: Codable, Equatable {
        var id: Int
        var name: String
        var iso: String
    }

    @Test func defaultsSetGetListRemoveAndWatch() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp")
        try await app.connect()
        let widget = h.client(.extension, "com.mycompany.myapp.widget")
        try await widget.connect()

        let all = await Collector.start(try await widget.defaultsWatch(group: appGroup))
        let onlyWatchlist = await Collector.start(try await widget.defaultsWatch(group: appGroup, keys: ["watchlist"]))

        #expect(try await app.defaultsGet(group: appGroup, key: "watchlist") == DefaultsEntry(exists: false, value: .none, version: 0))
        let countries = [Country(id: 410, name: "대한민국", iso: "KOR"), Country(id: 678, name: "São Tomé & Príncipe", iso: "STP")]
        let v1 = try await app.defaultsSet(group: appGroup, key: "watchlist", encoding: countries)
        #expect(v1 == 1)
        #expect(try await widget.defaultsGet(group: appGroup, key: "watchlist", as: [Country].self) == countries)
        let v2 = try await app.defaultsSet(group: appGroup, key: "theme", value: ["dark": true, "size": .number("1.50")])
        #expect(v2 == 2)
        let entry = try await widget.defaultsGet(group: appGroup, key: "theme")
        #expect(entry.exists && entry.version == 2)
        #expect(entry.value?["size"] == .number("1.5") || entry.value?["size"] == .number("1.50"))
        let snapshot = try await widget.defaultsList(group: appGroup)
        #expect(snapshot.values.keys == ["theme", "watchlist"])
        #expect(snapshot.version == 2)

        // Compare-and-set.
        let conflict = await brokerError { try await widget.defaultsSet(group: appGroup, key: "theme", value: "light", ifVersion: 1) }
        guard case .versionConflict(let current, let message)? = conflict else {
            Issue.record("expected versionConflict, got \(String(describing: conflict))")
            return
        }
        #expect(current == 2)
        #expect(message.contains(appGroup))
        #expect(try await widget.defaultsSet(group: appGroup, key: "theme", value: "light", ifVersion: 2) == 3)
        #expect(try await app.defaultsRemove(group: appGroup, key: "theme") == DefaultsRemoval(removed: true, version: 4))
        #expect(try await app.defaultsRemove(group: appGroup, key: "theme") == DefaultsRemoval(removed: false, version: 4))

        let changes = await all.wait(for: 4)
        #expect(changes.map(\.key) == ["watchlist", "theme", "theme", "theme"])
        #expect(changes.map(\.version) == [1, 2, 3, 4])
        #expect(changes.last?.removed == true)
        #expect(changes.last.map { $0.value == .none } == true, "a removal has no value")
        #expect(changes[2].value == "light")
        #expect(try changes[0].value(as: [Country].self) == countries)
        #expect(try changes[3].value(as: [Country].self) == nil, "a removal")
        #expect(throws: ShareBrokerError.self) { try changes[2].value(as: [Country].self) }
        let filtered = await onlyWatchlist.wait(for: 1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(await onlyWatchlist.items.map(\.key) == ["watchlist"])
        #expect(filtered.first?.group == appGroup)

        #expect(await brokerError { try await widget.defaultsWatch(group: appGroup, keys: []) }?.code == -32602)
        #expect(await brokerError { try await widget.defaultsGet(group: "group.org.other", key: "x") }?.code == -32001)
        await all.cancel()
        await onlyWatchlist.cancel()
    }

    // MARK: Typed errors

    @Test func typedErrors() async throws {
        let h = try startBroker()
        let tool = h.client(.tool)
        try await tool.connect()

        guard case .noHandler(let message)? = await brokerError({ try await tool.urlOpen("nohandler://thing") }) else {
            Issue.record("expected noHandler")
            return
        }
        #expect(message.contains("nohandler://thing"))
        #expect(try await tool.urlOpen("nohandler://thing", fallback: "deeplinkmyapp://fallback").via == .fallback)

        let ambiguous = await brokerError { try await tool.shareSend([.url("https://youtu.be/x")]) }
        guard case .notAccepted(_, let candidates)? = ambiguous else {
            Issue.record("expected notAccepted, got \(String(describing: ambiguous))")
            return
        }
        #expect(
            Set(candidates) == [
                ShareTarget(extensionID: "com.mycompany.myapp.share", app: "com.mycompany.myapp", name: "Send to My App"),
                ShareTarget(extensionID: "org.other.app.share", app: "org.other.app", name: "Send to Other"),
            ])
        #expect(ambiguous?.code == -32003)

        let ext = h.client(.extension, "com.mycompany.myapp.share")
        try await ext.connect()
        #expect(await brokerError { try await ext.shareSend([.text("just words")]) }?.code == -32003)
        guard case .notAccepted(_, let none)? = await brokerError({ try await ext.shareSend([.data([1, 2, 3], name: "x.bin")]) })
        else {
            Issue.record("expected notAccepted for data")
            return
        }
        #expect(none.isEmpty)
        #expect(await brokerError { try await ext.shareSend([.url("https://a.example")], extension: "org.other.app.share") }?.code == -32001)
        #expect(await brokerError { try await ext.shareSend([.file("/nonexistent/file.pdf")]) }?.code == -32602)

        guard case .invalidParams? = await brokerError({ try await tool.urlOpen("not a url") }) else {
            Issue.record("expected invalidParams")
            return
        }
        guard case .methodNotFound? = await brokerError({ try await tool.call("no.such.method") }) else {
            Issue.record("expected methodNotFound")
            return
        }
        #expect(await brokerError { try await tool.defaultsList(group: appGroup) }?.code == -32001)
        #expect(ShareBrokerError(RPCError(code: -32099, message: "odd")) == .rpc(code: -32099, message: "odd", data: nil))
        #expect(ShareBrokerError(RPCError(.storageFailure, "disk full")).description == "disk full (-32005)")
    }

    @Test func manyConcurrentCallsOnOneClient() async throws {
        let h = try startBroker()
        let tool = h.client(.tool)
        try await tool.connect()
        let urls = (0..<200).map { i in
            i % 2 == 0 ? "stats://watchlist?id=\(i)&name=n&iso=i" : "nohandler://\(i)"
        }
        let answers = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for (i, url) in urls.enumerated() {
                group.addTask { (i, try await tool.canOpen(url).canOpen) }
            }
            var out = [Bool](repeating: false, count: urls.count)
            for try await (i, can) in group { out[i] = can }
            return out
        }
        #expect(answers == urls.indices.map { $0 % 2 == 0 })
    }

    // MARK: Reconnection

    @Test func reconnectsAndResubscribesAfterTheBrokerRestarts() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp", reconnect: true)
        try await app.connect()
        let states = await Collector.start(await app.connectionEvents())
        let events = await Collector.start(try await app.subscribe())
        let changes = await Collector.start(try await app.defaultsWatch(group: appGroup, keys: ["counter"]))

        let tool = h.client(.tool)
        try await tool.connect()
        let before = try await tool.urlOpen("deeplinkmyapp://before")
        let unacked = try await tool.urlOpen("deeplinkmyapp://unacked")
        let got = await events.wait(for: 2)
        #expect(got.map(\.id) == [before.eventID, unacked.eventID])
        try await got[0].ack()
        await tool.close()

        h.stop()
        let dropped = await states.wait(for: 1)
        guard case .disconnected? = dropped.first else {
            Issue.record("expected .disconnected, got \(dropped)")
            return
        }
        // While the broker is down the streams stay open and calls wait for the reconnection.
        try await Task.sleep(for: .milliseconds(300))
        #expect(await events.finished == false)
        #expect(await app.isConnected == false)
        let waiting = Task { try await app.status() }

        try h.start()
        let restored = await states.wait(for: 2)
        guard restored.count == 2, case .reconnected(let info) = restored[1] else {
            Issue.record("expected .reconnected, got \(restored)")
            return
        }
        #expect(info.bundleID == "com.mycompany.myapp")
        #expect(try await waiting.value.apps == 2, "the call made while reconnecting went through")

        // The unacked event comes again with the same id (at least once); a new one follows.
        let tool2 = h.client(.tool)
        try await tool2.connect()
        let after = try await tool2.urlOpen("deeplinkmyapp://after")
        #expect(after.delivered, "the re-subscription is live")
        let all = await events.wait(for: 4)
        #expect(all.map(\.id) == [before.eventID, unacked.eventID, unacked.eventID, after.eventID])
        #expect(all.last?.url == "deeplinkmyapp://after")
        #expect(try await app.ack([unacked.eventID, after.eventID]) == 2)

        // The defaults watch was renewed too.
        let writer = h.client(.extension, "com.mycompany.myapp.share")
        try await writer.connect()
        try await writer.defaultsSet(group: appGroup, key: "counter", value: 1)
        #expect(await changes.wait(for: 1).first?.value == 1)

        await app.close()
        #expect(await events.waitForEnd())
        #expect(await events.failure == nil, "close() ends the stream without an error")
        #expect(await states.wait(for: 3).last == .closed)
    }

    /// Changes the broker took while the client was away are caught up after the reconnection:
    /// each watch gets its keys' current values (`caughtUp`), and removals; without changes in
    /// between, nothing.
    @Test func watchesCatchUpOnWhatChangedWhileTheClientWasAway() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp", reconnect: true)
        try await app.connect()
        let states = await Collector.start(await app.connectionEvents())
        for (i, key) in ["a", "b", "c"].enumerated() { try await app.defaultsSet(group: appGroup, key: key, value: .number(String(i + 1))) }
        let namedWatch = try await app.defaultsWatch(group: appGroup, keys: ["a", "b", "gone"])
        #expect(namedWatch.version == 3, "the group's version when the watch began")
        #expect(namedWatch.keys == ["a", "b", "gone"])
        let named = await Collector.start(namedWatch)
        let all = await Collector.start(try await app.defaultsWatch(group: appGroup))
        try await app.defaultsSet(group: appGroup, key: "c", value: 4)  // (version 4: `all` is given c)
        #expect(await all.wait(for: 1).map(\.key) == ["c"])

        // The broker stops; another one on the same state, which the client cannot reach, takes
        // changes; then the broker is back on the client's socket.
        try h.changeWhileAway([
            ("defaults.set", ["group": .string(appGroup), "key": "a", "value": 10]),  // 5
            ("defaults.remove", ["group": .string(appGroup), "key": "c"]),  // 6
            ("defaults.set", ["group": .string(appGroup), "key": "d", "value": 5]),  // 7
        ])
        #expect(await states.wait(for: 2).count == 2)

        let caughtNamed = await named.wait(for: 3)
        #expect(caughtNamed.map(\.key) == ["a", "b", "gone"])
        #expect(caughtNamed.map(\.value) == [10, 2, .none])
        #expect(caughtNamed.map(\.removed) == [false, false, true])
        #expect(caughtNamed.allSatisfy { $0.caughtUp && $0.version == 7 && $0.group == appGroup })
        let caughtAll = await all.wait(for: 5)
        #expect(caughtAll.dropFirst().map(\.key) == ["a", "b", "c", "d"])
        #expect(caughtAll.dropFirst().map(\.value) == [10, 2, .none, 5], "c, given before, is reported removed")
        #expect(caughtAll.dropFirst().allSatisfy { $0.caughtUp && $0.version == 7 })
        #expect(caughtAll.first?.caughtUp == false)

        // A restart without changes in between catches nothing up; live changes go on.
        h.stop()
        #expect(await states.wait(for: 3).count == 3)
        try h.start()
        #expect(await states.wait(for: 4).count == 4)
        try await app.defaultsSet(group: appGroup, key: "b", value: 20)
        let live = await named.wait(for: 4)
        #expect(live.count == 4 && live[3].key == "b" && live[3].value == 20 && !live[3].caughtUp && live[3].version == 8)
        #expect(await all.wait(for: 6).last?.version == 8)
        try await Task.sleep(for: .milliseconds(100))
        #expect(await named.items.count == 4)
        #expect(await all.items.count == 6)
        // (on the same connection: a connection the broker dropped meanwhile would have been
        // reconnected and caught up on nothing, and the counts above would hold all the same)
        let since = await states.items
        #expect(since.count == 4, "the connection stayed up: \(since)")
        await named.cancel()
        await all.cancel()
        await app.close()
    }

    /// The widget's "watch, then list": a watch of every key learns the listed keys, and a
    /// catch-up after a reconnection reports the removal of one it was never sent a change of.
    @Test func aCatchUpReportsTheRemovalOfAKeyTheWatchOnlyListed() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp", reconnect: true)
        try await app.connect()
        try await app.defaultsSet(group: appGroup, key: "kept", value: 1)
        try await app.defaultsSet(group: appGroup, key: "gone", value: 2)
        let all = await Collector.start(try await app.defaultsWatch(group: appGroup))
        #expect(try await app.defaultsList(group: appGroup).values.keys.sorted() == ["gone", "kept"])
        try h.changeWhileAway([("defaults.remove", ["group": .string(appGroup), "key": "gone"])])  // 3
        let caught = await all.wait(for: 2)
        #expect(caught.map(\.key) == ["gone", "kept"])
        #expect(caught.map(\.removed) == [true, false])
        #expect(caught.allSatisfy { $0.caughtUp && $0.version == 3 })
        await all.cancel()
        await app.close()
    }

    @Test func withoutReconnectTheStreamEndsWithConnectionLost() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp")
        try await app.connect()
        let events = await Collector.start(try await app.subscribe())
        h.stop()
        #expect(await events.waitForEnd())
        let failure = await events.failure as? ShareBrokerError
        guard case .connectionLost? = failure else {
            Issue.record("expected connectionLost, got \(String(describing: failure))")
            return
        }
        #expect(await app.isConnected == false)
        #expect(await brokerError { try await app.status() } == .notConnected)
    }

    @Test func streamsEndWhenTheClientIsDroppedWithoutClose() async throws {
        // A consumer of connectionEvents() or subscribe() must not wait forever (its task leaked)
        // when the last reference to the client goes away without close().
        let h = try startBroker()
        var app: ShareBrokerClient? = h.client(.app, "com.mycompany.myapp")
        try await app!.connect()
        let states = await Collector.start(await app!.connectionEvents())
        let events = await Collector.start(try await app!.subscribe())
        app = nil
        #expect(await states.waitForEnd())
        #expect(await events.waitForEnd())
    }

    /// A reload that removes the app ends its session, and the client is told why: the stream
    /// ends with `.connectionLost` naming the reason; reconnecting is refused (`hello` -32001),
    /// so the client gives up instead of retrying for ever.
    @Test func aSessionEndedByAReloadSaysWhy() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp", reconnect: true)
        #expect(try await app.connect().maxMessage == 4 * 1024 * 1024, "hello says the broker's message limit")
        let states = await Collector.start(await app.connectionEvents())
        let events = await Collector.start(try await app.subscribe())
        try FileManager.default.removeItem(atPath: h.state + "/apps/10-myapp.json")
        let tool = h.client(.tool)
        try await tool.connect()
        _ = try await tool.call("apps.reload")
        #expect(await events.waitForEnd())
        let s = await states.wait(for: 2)
        guard s.count == 2, case .disconnected(.connectionLost(let why)) = s[0], case .gaveUp(let refusal) = s[1] else {
            Issue.record("expected .disconnected then .gaveUp, got \(s)")
            return
        }
        #expect(why.contains("session ended by a manifest reload: its bundle com.mycompany.myapp is no longer registered"), "\(why)")
        #expect(refusal.code == -32001, "\(refusal)")
        await tool.close()
    }

    /// A reload that takes the group from the app ends its defaults stream with `.unauthorized`
    /// (the broker says so at once); the session and its other streams go on.
    @Test func aWatchOfAGroupAReloadTakesAwayEnds() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp")
        try await app.connect()
        let changes = await Collector.start(try await app.defaultsWatch(group: appGroup))
        let events = await Collector.start(try await app.subscribe())
        var manifest = myAppManifest  // the app's own appGroups (the first) emptied
        let own = try #require(manifest.range(of: #""appGroups": ["\#(appGroup)"]"#))
        manifest.replaceSubrange(own, with: #""appGroups": []"#)
        h.dir.write("state/apps/10-myapp.json", manifest)
        let tool = h.client(.tool)
        try await tool.connect()
        _ = try await tool.call("apps.reload")
        #expect(await changes.waitForEnd())
        guard case .unauthorized(let message)? = await changes.failure as? ShareBrokerError else {
            Issue.record("expected unauthorized, got \(String(describing: await changes.failure))")
            return
        }
        #expect(message.contains("no longer lists \(appGroup)"), "\(message)")
        #expect(await app.isConnected)
        let opened = try await tool.urlOpen("deeplinkmyapp://still")
        #expect(await events.wait(for: 1).first?.id == opened.eventID, "the subscription goes on")
        await app.close()
        await tool.close()
    }

    @Test func reconnectGivesUpAfterMaxAttempts() async throws {
        let h = try startBroker()
        let app = ShareBrokerClient(
            socketPath: h.socket, role: .app, bundleID: "com.mycompany.myapp", reconnect: true,
            reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(10), maxDelay: .milliseconds(40), maxAttempts: 3))
        try await app.connect()
        let states = await Collector.start(await app.connectionEvents())
        let events = await Collector.start(try await app.subscribe())
        h.stop()
        #expect(await events.waitForEnd())
        guard case .unreachable? = await events.failure as? ShareBrokerError else {
            Issue.record("expected unreachable, got \(String(describing: await events.failure))")
            return
        }
        let s = await states.wait(for: 2)
        guard s.count == 2, case .gaveUp = s[1] else {
            Issue.record("expected .gaveUp, got \(s)")
            return
        }
        // It can connect again by hand once the broker is back.
        try h.start()
        #expect(try await app.connect().bundleID == "com.mycompany.myapp")
    }
}

/// Failure cases against a scripted fake broker: a call in flight when the connection drops fails
/// with `.connectionLost` and is not sent again after reconnecting; cancellation and timeouts.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ClientFailureTests {
    let fast = ReconnectPolicy(initialDelay: .milliseconds(10), maxDelay: .milliseconds(50))

    /// A renewed watch refused for a reason that may pass (-32005: the group's store cannot be
    /// opened now) is tried again, the stream kept; its catch-up covers the wait.
    @Test func aRenewedWatchRefusedForNowIsTriedAgain() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c1 = f.accept(), c1.answerHello(), let w1 = c1.read(), w1["method"]?.stringValue == "defaults.watch" else { return }
            c1.reply(w1["id"], ["watching": true, "version": 1])
            c1.close()
            guard let c2 = f.accept(), c2.answerHello(), let w2 = c2.read() else { return }
            f.record("2: \(w2["method"]?.stringValue ?? "?")")
            var refusal: [UInt8] = []
            RPCCodec.writeError(id: .number(String(w2["id"]?.intValue ?? 0)), error: RPCError(.storageFailure, "Storage failure: not now"), to: &refusal)
            c2.send(refusal + [0x0A])
            guard let w3 = c2.read(timeout: 5) else { return }
            f.record("2: \(w3["method"]?.stringValue ?? "?")")
            c2.reply(w3["id"], ["watching": true, "version": 2])
            guard let l = c2.read(timeout: 5) else { return }
            f.record("2: \(l["method"]?.stringValue ?? "?")")
            c2.reply(l["id"], ["values": ["k": 5], "version": 2])
            _ = c2.read(timeout: 5)
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .app, bundleID: "a", reconnect: true, reconnectPolicy: fast)
        try await client.connect()
        let changes = await Collector.start(try await client.defaultsWatch(group: "group.a"))
        let caught = await changes.wait(for: 1, seconds: 10)
        #expect(caught.first?.key == "k" && caught.first?.value == 5 && caught.first?.caughtUp == true, "\(caught)")
        #expect(await changes.finished == false, "the stream stays")
        #expect(fake.log == ["2: defaults.watch", "2: defaults.watch", "2: defaults.list"])
        await client.close()
    }

    @Test func inFlightCallFailsWithConnectionLostAndIsNotRetried() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c1 = f.accept(), c1.answerHello() else { return }
            if let req = c1.read() { f.record("1: \(req["method"]?.stringValue ?? "?")") }
            c1.close()  // drop the connection without answering
            guard let c2 = f.accept(), c2.answerHello() else { return }
            f.record("2: hello")
            while let req = c2.read(timeout: 5) {
                f.record("2: \(req["method"]?.stringValue ?? "?")")
                c2.reply(req["id"], ["ok": true])
            }
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .tool, reconnect: true, reconnectPolicy: fast)
        try await client.connect()
        let lost = await brokerError { try await client.urlOpen("deeplinkmyapp://x") }
        guard case .connectionLost? = lost else {
            Issue.record("expected connectionLost, got \(String(describing: lost))")
            return
        }
        #expect(try await client.call("ping")["ok"] == true, "a later call waits for the reconnection")
        await client.close()
        #expect(await eventually { fake.done })
        #expect(fake.log == ["1: url.open", "2: hello", "2: ping"], "url.open was not sent again")
    }

    @Test func cancellationAndTimeoutLeaveTheConnectionUsable() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c = f.accept(), c.answerHello() else { return }
            var unanswered: [JSONValue] = []
            while let req = c.read(timeout: 5) {
                let method = req["method"]?.stringValue ?? "?"
                f.record(method)
                if method == "slow" {
                    unanswered.append(req["id"] ?? .null)
                    continue
                }
                for id in unanswered { c.reply(id, ["late": true]) }  // answers nobody waits for any more
                unanswered.removeAll()
                c.reply(req["id"], ["ok": true])
            }
        }
        // (long enough that the cancellation below, made once the fake has the call, always comes
        // first: at 300 ms a loaded machine under AddressSanitizer saw the timeout win)
        let client = ShareBrokerClient(socketPath: fake.path, role: .tool, requestTimeout: .seconds(2))
        try await client.connect()
        #expect(await brokerError { try await client.call("slow") } == .timeout(method: "slow"))

        let task = Task { try await client.call("slow") }
        #expect(await eventually { fake.log.count == 2 })
        task.cancel()
        switch await task.result {
        case .success(let v): Issue.record("expected cancellation, got \(v)")
        case .failure(let e): #expect(e as? ShareBrokerError == .cancelled)
        }
        #expect(try await client.call("ping")["ok"] == true)
        #expect(try await client.call("ping")["late"] == nil)
        await client.close()
        #expect(await eventually { fake.done })
        #expect(fake.log == ["slow", "slow", "ping", "ping"])
    }

    /// A call made while the client reconnects to a broker that stays away ends at its
    /// `requestTimeout` (the wait for the connection counts), not never.
    @Test func aCallWaitingForAReconnectionTimesOut() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c = f.accept(), c.answerHello() else { return }
            _ = c.read()
            unlink(f.path)  // the broker is gone for good: every reconnection attempt fails
            c.close()
        }
        let client = ShareBrokerClient(
            socketPath: fake.path, role: .tool, reconnect: true, reconnectPolicy: fast, requestTimeout: .milliseconds(400))
        try await client.connect()
        guard case .connectionLost? = await brokerError({ try await client.call("drop") }) else {
            Issue.record("the first call should fail with connectionLost")
            return
        }
        let start = ContinuousClock.now
        #expect(await brokerError { try await client.call("ping") } == .timeout(method: "ping"))
        let waited = ContinuousClock.now - start
        #expect(waited >= .milliseconds(390), "it waited for the reconnection first: \(waited)")
        #expect(await client.isConnected == false)
        await client.close()
        #expect(fake.log.isEmpty)
    }

    /// Without a timeout, cancelling the task of a call that waits for a reconnection ends it.
    @Test func aCallWaitingForAReconnectionCanBeCancelled() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c = f.accept(), c.answerHello() else { return }
            _ = c.read()
            unlink(f.path)
            c.close()
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .tool, reconnect: true, reconnectPolicy: fast)
        try await client.connect()
        guard case .connectionLost? = await brokerError({ try await client.call("drop") }) else {
            Issue.record("the first call should fail with connectionLost")
            return
        }
        let waiting = Task { try await client.call("ping") }
        let other = Task { try await client.call("other") }
        try await Task.sleep(for: .milliseconds(100))
        waiting.cancel()
        switch await waiting.result {
        case .success(let v): Issue.record("expected cancellation, got \(v)")
        case .failure(let e): #expect(e as? ShareBrokerError == .cancelled)
        }
        // The other waiting call is not affected by the cancellation; close() ends it.
        await client.close()
        switch await other.result {
        case .success(let v): Issue.record("expected closed, got \(v)")
        case .failure(let e): #expect(e as? ShareBrokerError == .closed)
        }
    }

    /// The blocking `BrokerConnection`'s timeout bounds the whole call: a peer that keeps
    /// sending notifications but never answers does not hold it longer.
    @Test func aBlockingCallsTimeoutIsNotExtendedByNotifications() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c = f.accept(), c.read() != nil else { return }
            for i in 0..<50 {  // 5 s of notifications, one every 100 ms, and no answer
                c.notify("tick", ["n": .int(i)])
                usleep(100_000)
            }
        }
        let conn = try BrokerConnection(socketPath: fake.path)
        let start = ContinuousClock.now
        do {
            try conn.call("never", timeoutMillis: 500)
            Issue.record("expected a timeout")
        } catch {
            guard case .timeout = error else {
                Issue.record("expected a timeout, got \(error)")
                return
            }
        }
        let waited = ContinuousClock.now - start
        #expect(waited >= .milliseconds(490) && waited < .seconds(3), "the 500 ms timeout held: \(waited)")
        #expect(conn.notifications.count >= 1, "the notifications were kept")
    }

    /// A request longer than the broker's `maxMessage` (its hello says it) fails with
    /// `.invalidRequest` before it is sent; the connection and the calls in flight are unharmed.
    @Test func aRequestOverTheBrokersLimitIsRefusedBeforeItIsSent() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c = f.accept(), c.answerHello(maxMessage: 200) else { return }
            while let req = c.read(timeout: 5) {
                f.record(req["method"]?.stringValue ?? "?")
                c.reply(req["id"], ["ok": true])
            }
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .tool)
        #expect(try await client.connect().maxMessage == 200)
        let big = await brokerError { try await client.call("big", ["text": .string(String(repeating: "x", count: 300))]) }
        guard case .invalidRequest(let message)? = big else {
            Issue.record("expected invalidRequest, got \(String(describing: big))")
            return
        }
        #expect(message.contains("'big'") && message.contains("limit of 200 bytes"), "\(message)")
        #expect(try await client.call("small", ["text": "x"])["ok"] == true)
        await client.close()
        #expect(await eventually { fake.done })
        #expect(fake.log == ["small"], "the request over the limit was never sent")
    }
}
