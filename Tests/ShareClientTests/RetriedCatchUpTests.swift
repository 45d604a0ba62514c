// Review (2939c88): a renewed watch whose defaults.watch passes but whose catch-up
// (defaults.list) is refused for a reason that may pass is tried again; but the retry decides
// whether to catch up by comparing the broker's version with `watchedVersions`, which a live
// change on the new connection raised meanwhile (or which the went-back case had already set to
// the new version): the retry skips the catch-up, and changes made while the client was away are
// never reported.

import Foundation
import ShareClient
import ShareProtocol
import ShareSystem
import Testing

@Suite(.serialized, .timeLimit(.minutes(1)))
struct RetriedCatchUpTests {
    let fast = ReconnectPolicy(initialDelay: .milliseconds(10), maxDelay: .milliseconds(50))

    @Test func aCatchUpRefusedForNowIsMadeWhenTheWatchIsTriedAgain() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c1 = f.accept(), c1.answerHello(), let w1 = c1.read(), w1["method"]?.stringValue == "defaults.watch" else { return }
            c1.reply(w1["id"], ["watching": true, "version": 1])
            c1.close()
            // Away: "k" was set (version 2), then "a" (version 3).
            guard let c2 = f.accept(), c2.answerHello(), let w2 = c2.read() else { return }
            f.record("2: \(w2["method"]?.stringValue ?? "?")")
            c2.reply(w2["id"], ["watching": true, "version": 3])
            guard let l1 = c2.read(timeout: 5) else { return }
            f.record("2: \(l1["method"]?.stringValue ?? "?")")
            var refusal: [UInt8] = []
            RPCCodec.writeError(id: .number(String(l1["id"]?.intValue ?? 0)), error: RPCError(.storageFailure, "Storage failure: not now"), to: &refusal)
            c2.send(refusal + [0x0A])
            // A live change on the new connection, before the retry.
            var note: [UInt8] = []
            RPCCodec.writeRequest(
                id: nil, method: "defaults.changed",
                params: ["group": "group.a", "key": "b", "value": 7, "version": 4], to: &note)
            c2.send(note + [0x0A])
            guard let w3 = c2.read(timeout: 5) else { return }
            f.record("2: \(w3["method"]?.stringValue ?? "?")")
            c2.reply(w3["id"], ["watching": true, "version": 4])
            guard let l2 = c2.read(timeout: 3) else { return }
            f.record("2: \(l2["method"]?.stringValue ?? "?")")
            c2.reply(l2["id"], ["values": ["k": 5, "a": 6, "b": 7], "version": 4])
            _ = c2.read(timeout: 5)
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .app, bundleID: "a", reconnect: true, reconnectPolicy: fast)
        try await client.connect()
        let changes = await Collector.start(try await client.defaultsWatch(group: "group.a"))
        let got = await changes.wait(for: 3, seconds: 6)
        #expect(Set(got.map(\.key)) == ["a", "b", "k"], "the changes made while away are caught up: \(got)")
        #expect(fake.log == ["2: defaults.watch", "2: defaults.list", "2: defaults.watch", "2: defaults.list"], "\(fake.log)")
        await client.close()
    }
}
