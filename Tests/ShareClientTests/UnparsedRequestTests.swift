// A request the broker cannot parse (valid JSON nested deeper than the broker reads, a number
// that is no JSON number) is answered with an error without an id that does not close the
// connection: it answers the oldest request still unanswered (PROTOCOL.md, "Errors without an
// id"). The call must fail with that error, at once, and the connection stay usable.

import Foundation
import ShareClient
import ShareProtocol
import Testing

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

@Suite(.serialized, .timeLimit(.minutes(1)))
struct UnparsedRequestTests {
    static func nested(_ levels: Int) -> JSONValue {
        var v: JSONValue = 1
        for _ in 0..<levels { v = .array([v]) }
        return v
    }

    /// Through the real broker: a defaults value nested 300 levels (JSON, but deeper than the
    /// broker's parser goes) fails with `.parseError`, not with a timeout (nor never, without a
    /// `requestTimeout`); a bad number too; the next call goes through.
    @Test func aRequestTheBrokerCannotParseFailsWithItsError() async throws {
        let h = try startBroker()
        let ext = ShareBrokerClient(
            socketPath: h.socket, role: .extension, bundleID: "com.mycompany.myapp.share", requestTimeout: .seconds(10))
        try await ext.connect()
        let start = ContinuousClock.now
        let deep = await brokerError { try await ext.defaultsSet(group: appGroup, key: "deep", value: Self.nested(300)) }
        guard case .parseError(let message)? = deep else {
            Issue.record("expected parseError, got \(String(describing: deep))")
            return
        }
        #expect(message.contains("deeper"), "\(message)")
        #expect(ContinuousClock.now - start < .seconds(5), "it failed at once")
        let number = await brokerError { try await ext.call("defaults.set", ["group": .string(appGroup), "key": "n", "value": .number("1,5")]) }
        #expect(number?.code == -32700, "\(String(describing: number))")
        #expect(try await ext.defaultsSet(group: appGroup, key: "k", value: 1) >= 1, "the connection stays usable")
        #expect(await ext.isConnected)
        await ext.close()
    }

    /// The error answers the oldest request the broker has not answered, also when its caller
    /// stopped waiting (a timeout): the next call is not failed with it.
    @Test func anErrorWithoutAnIdAnswersTheOldestUnansweredRequest() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        fake.run { f in
            guard let c = f.accept(), c.answerHello(), let bad = c.read() else { return }
            f.record(bad["method"]?.stringValue ?? "?")
            guard let next = c.read() else { return }  // (sent after `bad` timed out)
            f.record(next["method"]?.stringValue ?? "?")
            var out: [UInt8] = []
            RPCCodec.writeError(id: .null, error: RPCError(.parseError, "Parse error: nesting deeper than 256"), to: &out)
            out.append(0x0A)
            c.send(out + c.replyFrame(next["id"], ["ok": true]))
            guard let third = c.read() else { return }
            f.record(third["method"]?.stringValue ?? "?")
            out = []
            RPCCodec.writeError(id: .null, error: RPCError(.parseError, "Parse error: not a number"), to: &out)
            out.append(0x0A)
            c.send(out)
            _ = c.read(timeout: 5)
        }
        let client = ShareBrokerClient(socketPath: fake.path, role: .tool, requestTimeout: .milliseconds(500))
        try await client.connect()
        #expect(await brokerError { try await client.call("bad") } == .timeout(method: "bad"))
        #expect(try await client.call("next")["ok"] == true, "the error was the timed-out call's")
        #expect(await brokerError { try await client.call("third") } == .parseError(message: "Parse error: not a number"))
        await client.close()
        #expect(await eventually { fake.done })
        #expect(fake.log == ["bad", "next", "third"])
    }
}
