// Review (2939c88, ShareBrokerError.mayPass): a renewed watch refused for a reason that may pass
// (-32005, -32007, a timeout) is tried again; the renewed subscription only for -32005. Its
// app.subscribe timing out on a slow broker (which may well have taken it: the connection is the
// app's subscriber) ends the event stream for good, while the broker sends this connection the
// app's events, which the client drops.

import Foundation
import ShareClient
import ShareProtocol
import Testing

@Suite(.serialized, .timeLimit(.minutes(1)))
struct SubscriptionRenewalTimeoutTests {
    let fast = ReconnectPolicy(initialDelay: .milliseconds(10), maxDelay: .milliseconds(50))

    @Test func aRenewedSubscriptionThatTimesOutIsTriedAgain() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c1 = f.accept(), c1.answerHello(), let s1 = c1.read(), s1["method"]?.stringValue == "app.subscribe" else { return }
            c1.reply(s1["id"], ["pending": 0])
            c1.close()
            guard let c2 = f.accept(), c2.answerHello(), let s2 = c2.read() else { return }
            f.record("2: \(s2["method"]?.stringValue ?? "?")")
            // Slow: not answered until the client, its request timed out, tries again (answered
            // after a fixed sleep instead, a client whose timer fired late on a loaded machine
            // got the answer in time and had nothing to try again).
            guard let s3 = c2.read(timeout: 5) else { return }
            f.record("2: \(s3["method"]?.stringValue ?? "?")")
            c2.reply(s2["id"], ["pending": 0])  // (the late answer, to the request that timed out)
            c2.reply(s3["id"], ["pending": 0])
            var note: [UInt8] = []
            RPCCodec.writeRequest(
                id: nil, method: "app.event",
                params: ["id": "ev-9", "kind": "openURL", "url": "deeplinkmyapp://x", "via": "scheme"], to: &note)
            c2.send(note + [0x0A])
            _ = c2.read(timeout: 5)
        }
        let client = ShareBrokerClient(
            socketPath: fake.path, role: .app, bundleID: "a", reconnect: true, reconnectPolicy: fast, requestTimeout: .milliseconds(300))
        try await client.connect()
        let events = await Collector.start(try await client.subscribe())
        let got = await events.wait(for: 1, seconds: 8)
        let failure = await events.failure
        #expect(got.map(\.id) == ["ev-9"], "the stream ended with \(String(describing: failure)); broker saw \(fake.log)")
        await client.close()
    }
}
