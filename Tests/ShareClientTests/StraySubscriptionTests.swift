// A subscription the broker may hold for this connection while the client has no stream for it
// (a `subscribe()` that timed out or was cancelled after its request was sent; a stream ended
// while its renewal after a reconnection was in flight) is given up with `app.unsubscribe`:
// otherwise the broker goes on sending the app's events to a client that drops them, answers
// `url.open` with `delivered: true`, and does not launch the app for them.

import Foundation
import ShareClient
import ShareProtocol
import Testing

@Suite(.serialized, .timeLimit(.minutes(1)))
struct StraySubscriptionTests {
    /// `subscribe()` fails with `.timeout`, then with `.cancelled`, after the broker read its
    /// `app.subscribe`: each time the client says `app.unsubscribe`.
    @Test func aSubscribeThatTimesOutOrIsCancelledUnsubscribes() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c = f.accept(), c.answerHello() else { return }
            while let req = c.read(timeout: 3) {
                let method = req["method"]?.stringValue ?? "?"
                f.record(method)
                if method == "app.subscribe" {
                    c.notify("app.event", ["id": "ev-1", "kind": "openURL", "url": "x://1"])  // (dropped: no stream)
                    continue  // never answered
                }
                if req["id"] != nil { c.reply(req["id"], ["ok": true]) }
            }
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .app, bundleID: "a", requestTimeout: .milliseconds(300))
        try await client.connect()
        #expect(await brokerError { try await client.subscribe() } == .timeout(method: "app.subscribe"))
        #expect(await eventually(3) { fake.log == ["app.subscribe", "app.unsubscribe"] }, "\(fake.log)")

        let task = Task { try await client.subscribe() }
        #expect(await eventually { fake.log.count == 3 })
        task.cancel()
        switch await task.result {
        case .success: Issue.record("expected cancellation")
        case .failure(let e): #expect(e as? ShareBrokerError == .cancelled)
        }
        #expect(await eventually(3) { fake.log == ["app.subscribe", "app.unsubscribe", "app.subscribe", "app.unsubscribe"] }, "\(fake.log)")
        #expect(try await client.call("ping")["ok"] == true)
        await client.close()
    }

    /// The stream ends (its consumer stops) while its renewal after a reconnection waits for the
    /// broker's answer: once renewed, the subscription is given up.
    @Test func aStreamEndedWhileItsRenewalIsInFlightUnsubscribes() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c1 = f.accept(), c1.answerHello(), let s1 = c1.read(), s1["method"]?.stringValue == "app.subscribe" else { return }
            c1.reply(s1["id"], ["pending": 0])
            c1.close()
            guard let c2 = f.accept(), c2.answerHello(), let s2 = c2.read() else { return }
            f.record("2: \(s2["method"]?.stringValue ?? "?")")
            // (answered once the test ended the stream)
            for _ in 0..<300 where !f.log.contains("test: stream ended") { usleep(10_000) }
            usleep(200_000)
            c2.reply(s2["id"], ["pending": 0])
            while let req = c2.read(timeout: 2) {
                f.record("2: \(req["method"]?.stringValue ?? "?")")
                if req["id"] != nil { c2.reply(req["id"], ["ok": true]) }
            }
        }
        let client = ShareBrokerClient(
            socketPath: fake.path, role: .app, bundleID: "a", reconnect: true,
            reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(10), maxDelay: .milliseconds(50)), requestTimeout: .seconds(5))
        try await client.connect()
        let events = await Collector.start(try await client.subscribe())
        #expect(await eventually { fake.log == ["2: app.subscribe"] })
        await events.cancel()
        #expect(await events.waitForEnd())
        fake.record("test: stream ended")
        #expect(await eventually(5) { fake.log.contains("2: app.unsubscribe") }, "\(fake.log)")
        #expect(try await client.call("ping")["ok"] == true)
        await client.close()
    }
}
