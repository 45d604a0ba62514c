// The catch-up of renewed defaults watches and the event stream's takeover notice, against a
// scripted broker (for message orders a real broker produces only by chance) and against real
// brokers on the same socket with different state.

import Foundation
import ShareClient
import ShareProtocol
import Testing

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

@Suite(.serialized, .timeLimit(.minutes(1)))
struct CatchUpTests {
    let fast = ReconnectPolicy(initialDelay: .milliseconds(10), maxDelay: .milliseconds(50))

    func change(_ key: String, _ value: String, _ version: Int) -> JSONValue {
        ["group": "g", "key": .string(key), "value": .string(value), "version": .int(version)]
    }

    /// The broker answers `defaults.list` and sends the next change right behind it (one
    /// write, as when a change commits just after the list was answered). That change is newer
    /// than the list: a caught-up value must not follow it (it would put the key back to its
    /// older value), whatever order the client's tasks run in.
    @Test func aCaughtUpValueNeverFollowsANewerLiveChange() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        let rounds = 8
        fake.run { f in
            var version = 3
            for round in 0..<rounds {
                guard let c = f.accept(), c.answerHello() else { return }
                guard let w = c.read(), w["method"]?.stringValue == "defaults.watch" else { return }
                version += 2  // (two changes while the client was away; none before the first watch)
                if round == 0 { version = 3 }
                c.reply(w["id"], ["watching": true, "version": .int(version)])
                if round > 0 {
                    guard let l = c.read(), l["method"]?.stringValue == "defaults.list" else { return }
                    let listed: JSONValue = ["values": ["a": .string("v\(version)")], "version": .int(version)]
                    version += 1
                    c.send(c.replyFrame(l["id"], listed) + c.notificationFrame("defaults.changed", self.change("a", "v\(version)", version)))
                } else {
                    version += 1
                    c.notify("defaults.changed", self.change("a", "v\(version)", version))
                }
                _ = c.read(timeout: 0.2)
                f.record("round \(round)")
                c.close()
            }
            // The reconnection after the last round: the watch is renewed at the version the
            // client has (no catch-up), then a change of another key, which the stream yields
            // after all that the rounds gave (the client caught up before it reconnected).
            guard let c = f.accept(), c.answerHello() else { return }
            guard let w = c.read(), w["method"]?.stringValue == "defaults.watch" else { return }
            c.reply(w["id"], ["watching": true, "version": .int(version)])
            c.notify("defaults.changed", self.change("end", "end", version + 1))
            _ = c.read(timeout: 10)
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .extension, bundleID: "x", reconnect: true, reconnectPolicy: fast)
        try await client.connect()
        let changes = await Collector.start(try await client.defaultsWatch(group: "g"))
        #expect(await eventually { fake.log.count == rounds })
        // (1 + 2 * (rounds - 1) changes of a, fewer when a catch-up is skipped: waited for until
        // the change sent after them came, not for a fixed time)
        let all = await changes.wait(until: { $0.last?.key == "end" })
        let described = all.map { "\($0.value?.stringValue ?? "-")@\($0.version)\($0.caughtUp ? "c" : "")" }
        #expect(all.last?.key == "end", "the change sent after the rounds came: \(described)")
        let got = all.filter { $0.key == "a" }
        #expect(got.last?.value == .string("v\(3 + 1 + 3 * (rounds - 1))"), "the last value is the newest: \(described)")
        #expect(zip(got, got.dropFirst()).allSatisfy { $0.version <= $1.version }, "in version order: \(described)")
        await client.close()
    }

    /// The broker answers `defaults.list` before the notifications of the commit the list waited
    /// for (a real broker does: held replies go before the commit's notifications). Those changes
    /// are older than the caught-up value: the stream does not go back to them.
    @Test func aLiveChangeOlderThanTheCatchUpIsNotYieldedAfterIt() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c1 = f.accept(), c1.answerHello() else { return }
            guard let w1 = c1.read() else { return }
            c1.reply(w1["id"], ["watching": true, "version": 3])
            _ = c1.read(timeout: 0.2)
            c1.close()
            guard let c2 = f.accept(), c2.answerHello() else { return }
            guard let w2 = c2.read() else { return }
            c2.reply(w2["id"], ["watching": true, "version": 5])
            guard let l = c2.read(), l["method"]?.stringValue == "defaults.list" else { return }
            // a was set to v6 then v7 in the commit the list waited for.
            c2.send(
                c2.replyFrame(l["id"], ["values": ["a": "v7"], "version": 7])
                    + c2.notificationFrame("defaults.changed", self.change("a", "v6", 6))
                    + c2.notificationFrame("defaults.changed", self.change("a", "v7", 7)))
            c2.notify("defaults.changed", self.change("a", "v8", 8))
            _ = c2.read(timeout: 5)
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .extension, bundleID: "x", reconnect: true, reconnectPolicy: fast)
        try await client.connect()
        let changes = await Collector.start(try await client.defaultsWatch(group: "g"))
        let got = await changes.wait(for: 2, seconds: 5)
        // (v8 may come after the first two: waited for, not slept on; then a while for anything
        // that would wrongly follow it)
        await changes.wait(until: { $0.last?.value == "v8" })
        try await Task.sleep(for: .milliseconds(300))
        let all = await changes.items
        let described = all.map { "\($0.value?.stringValue ?? "-")@\($0.version)\($0.caughtUp ? "c" : "")" }
        // ([v7 caught up, v8] when the catch-up runs before the client reads the notifications
        // behind the list; [v6, v7, v8] when it runs after, v7 given then.)
        #expect(got.count >= 2 && all.last?.value == "v8", "\(described)")
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.version < $1.version }, "in version order: \(described)")
        await client.close()
    }

    /// The broker's state was replaced while the client was away (the group's version went
    /// back): a watch of every key is told of the removal of the keys it had been given, as when
    /// the version moved on.
    @Test func aGroupWhoseVersionWentBackReportsItsRemovedKeys() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp", reconnect: true)
        try await app.connect()
        let states = await Collector.start(await app.connectionEvents())
        try await app.defaultsSet(group: appGroup, key: "x", value: 1)
        let all = await Collector.start(try await app.defaultsWatch(group: appGroup))
        try await app.defaultsSet(group: appGroup, key: "y", value: 2)
        try await app.defaultsSet(group: appGroup, key: "z", value: 3)
        #expect(await all.wait(for: 2).map(\.key) == ["y", "z"])

        // Another state: only w, at version 1.
        let other = BrokerHarness(manifests: ["10-myapp.json": myAppManifest])
        let away = other.dir.path + "/away.sock"
        try other.start(socketPath: away)
        do {
            let c = try BrokerConnection(socketPath: away)
            try c.hello(role: "app", bundleID: "com.mycompany.myapp")
            _ = try c.call("defaults.set", ["group": .string(appGroup), "key": "w", "value": 9])
        }
        other.stop()
        h.stop()
        #expect(await states.wait(for: 1).count == 1)
        try other.start(socketPath: h.socket)
        #expect(await states.wait(for: 2).count == 2)
        let caught = await all.wait(for: 5, seconds: 5).dropFirst(2)
        #expect(caught.map(\.key) == ["w", "y", "z"])
        #expect(caught.map(\.removed) == [false, true, true], "y and z, given before, are gone")
        #expect(caught.allSatisfy { $0.caughtUp && $0.version == 1 })
        await all.cancel()
        await app.close()
        other.stop()
    }

    /// A takeover notice that arrives while `subscribe()` is renewing the subscription concerns
    /// the subscription before (the broker answers the new one after it): the new stream goes on.
    @Test func aTakeoverNoticeOfThePreviousSubscriptionDoesNotEndTheNewStream() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c = f.accept(), c.answerHello() else { return }
            guard let s1 = c.read(), s1["method"]?.stringValue == "app.subscribe" else { return }
            c.reply(s1["id"], ["pending": 0])
            guard let s2 = c.read(), s2["method"]?.stringValue == "app.subscribe" else { return }
            // Another instance subscribed just before this connection's second app.subscribe.
            c.send(
                c.notificationFrame("app.subscriptionEnded", ["app": "x", "reason": "another connection of x subscribed"])
                    + c.replyFrame(s2["id"], ["pending": 0]))
            c.notify("app.event", ["id": "ev-1", "kind": "openURL", "url": "x://one", "via": "scheme"])
            f.record("sent")
            _ = c.read(timeout: 5)
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .app, bundleID: "x")
        try await client.connect()
        let first = await Collector.start(try await client.subscribe())
        let second = await Collector.start(try await client.subscribe())
        #expect(await first.waitForEnd(seconds: 5))
        #expect(await eventually(5) { fake.log == ["sent"] })
        let got = await second.wait(for: 1, seconds: 2)
        let failure = await second.failure
        #expect(got.map(\.id) == ["ev-1"], "ended with \(String(describing: failure))")
        #expect(await second.finished == false)
        await client.close()
    }
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct RewatchTests {
    /// A second watch of a group re-watches it (the union of the keys): a change of a key the
    /// first watch has, committed while that re-watch was served, still reaches the first watch.
    @Test func aSecondWatchOfTheGroupLosesNoChangeOfTheFirst() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp")
        try await app.connect()
        let first = await Collector.start(try await app.defaultsWatch(group: appGroup, keys: ["a"]))
        let writer = try h.session("extension", "com.mycompany.myapp.share")
        let rounds = 40
        var later: [Collector<DefaultsChange>] = []
        for i in 1...rounds {
            var frame: [UInt8] = []
            RPCCodec.writeRequest(
                id: .number(String(i + 100)), method: "defaults.set",
                params: ["group": .string(appGroup), "key": "a", "value": .int(i)], to: &frame)
            frame.append(0x0A)
            try writer.sendRaw(frame)  // (its answer is not waited for)
            later.append(await Collector.start(try await app.defaultsWatch(group: appGroup, keys: ["k\(i)"])))
        }
        let got = await first.wait(for: rounds, seconds: 3)
        #expect(got.map(\.version) == Array(1...rounds), "\(got.map(\.version))")
        await app.close()
    }
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct StalledBrokerTests {
    /// A broker that stops reading (stopped, or busy) while a large request is being written:
    /// the call ends at its `requestTimeout`, and the client stays responsive meanwhile (other
    /// calls time out too, `close()` returns), instead of the whole client blocking in the write.
    @Test func aWriteToABrokerThatStoppedReadingDoesNotBlockTheClient() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        // (it reads nothing until the checks are done, then goes away: a fixed stall timed from
        // the hello could end before the call even began writing on a loaded machine)
        let checked = DispatchSemaphore(value: 0)
        fake.run { f in
            guard let c = f.accept(), c.answerHello(maxMessage: 64 << 20) else { return }
            _ = checked.wait(timeout: .now() + 30)
            c.close()
        }
        defer { checked.signal() }
        let client = ShareBrokerClient(socketPath: fake.path, role: .tool, requestTimeout: .milliseconds(300))
        try await client.connect()
        let ended = Box<ShareBrokerError?>(nil)
        let done = Box(false)
        let lock = NSLock()
        let big = Task {
            let e = await brokerError { try await client.call("big", ["text": .string(String(repeating: "x", count: 8 << 20))]) }
            lock.withLock {
                ended.value = e
                done.value = true
            }
        }
        let start = ContinuousClock.now
        #expect(await eventually(3) { lock.withLock { done.value } }, "the call ended within 3 s")
        #expect(lock.withLock { ended.value } == .timeout(method: "big"))
        let closing = Task { await client.close() }
        _ = await closing.value
        #expect(ContinuousClock.now - start < .seconds(4), "close() returned while the broker still read nothing")
        checked.signal()
        _ = await big.value
    }
}
