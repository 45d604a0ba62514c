// The async client read every message the broker sent into unbounded streams: an app that stopped
// reading its `subscribe()` stream made the client's memory grow with the broker's whole backlog,
// and the broker's own limits for slow subscribers never applied. The client now stops reading the
// connection once a stream holds `streamBufferLimit` bytes its consumer has not taken (the backlog
// stays in the broker), reads again for a call's reply, and gives every event in order once the
// consumer reads.

import Foundation
@testable import ShareClient
import ShareProtocol
import Testing

@Suite(.serialized, .timeLimit(.minutes(2)))
struct FlowControlTests {
    @Test func aSubscriberThatDoesNotReadHoldsABoundedBacklogAndLaterGetsEveryEventInOrder() async throws {
        let h = try startBroker()
        let total = 1000
        let pad = String(repeating: "x", count: 1000)
        let tool = try h.session("tool")
        for i in 0..<total { _ = try tool.call("url.open", ["url": .string("deeplinkmyapp://item?i=\(i)&pad=\(pad)")]) }
        let limit = 16 << 10
        let app = ShareBrokerClient(
            socketPath: h.socket, role: .app, bundleID: "com.mycompany.myapp", requestTimeout: .seconds(20),
            streamBufferLimit: limit)
        try await app.connect()
        let events = try await app.subscribe()  // (not read for now)
        // What a stream may hold: its hard limit (4 × its limit: past it, what a call's reply
        // brings in is dropped, and asked for again once the consumer has read the rest).
        let bound = 4 * limit
        var paused = false
        for _ in 0..<500 where !paused {
            paused = await app.isReadingPaused
            if !paused { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(paused, "the client stops reading")
        try await Task.sleep(for: .milliseconds(300))
        let held = await app.streamBacklog
        #expect(held.bytes <= bound && held.count < total / 2, "held \(held) of \(total) events")
        #expect(try tool.call("broker.status")["outputBytes"]?.intValue ?? 0 > 0, "the backlog waits in the broker")

        // Calls' replies still get through (the client reads up to each), and the backlog stays
        // bounded however many calls read past it.
        for _ in 0..<10 {
            #expect(try await app.status().apps == 2)
            let now = await app.streamBacklog
            #expect(now.bytes <= bound && now.count < total, "held \(now) after a call")
        }

        // Reading now gives every event, in order (events dropped at the hard limit come again
        // after those before them; an event given and not acked yet may come twice: ids tell).
        var got: [Int] = []
        var seen = Set<String>()
        for try await e in events {
            let url = try #require(e.url)
            let i = try #require(URLComponents(string: url)?.queryItems?.first { $0.name == "i" }?.value.flatMap { Int($0) })
            if seen.insert(e.id).inserted { got.append(i) }
            try await e.ack()
            #expect(await app.streamBacklog.bytes <= bound)
            if got.count == total { break }
        }
        #expect(got == Array(0..<total))
        await app.close()
    }

    /// A defaults watch that is not read: the same bound; what was dropped at the hard limit is
    /// caught up once the consumer has read the rest (as after a reconnection): every key ends
    /// at its last value, and versions never go back.
    @Test func aWatchThatIsNotReadHoldsABoundedBacklogAndCatchesUp() async throws {
        let h = try startBroker()
        let ext = try h.session("extension", "com.mycompany.myapp.share")
        let limit = 16 << 10
        let app = ShareBrokerClient(
            socketPath: h.socket, role: .app, bundleID: "com.mycompany.myapp", requestTimeout: .seconds(20),
            streamBufferLimit: limit)
        try await app.connect()
        let watch = try await app.defaultsWatch(group: appGroup)  // (not read for now)
        let pad = String(repeating: "y", count: 1000)
        var last: [String: String] = [:]
        for i in 0..<1000 {
            let key = "k\(i % 50)"
            last[key] = "\(i)-\(pad)"
            _ = try ext.call("defaults.set", ["group": .string(appGroup), "key": .string(key), "value": .string(last[key]!)])
        }
        for _ in 0..<10 {
            _ = try await app.status()
            let now = await app.streamBacklog
            #expect(now.bytes <= 4 * limit, "held \(now) after a call")
        }
        var current: [String: String] = [:]
        var version = 0
        let reader = Task {
            try await Task.sleep(for: .seconds(20))
            await app.close()
        }
        defer { reader.cancel() }
        for try await c in watch {
            #expect(c.version >= version, "versions never go back")
            version = c.version
            current[c.key] = c.value?.stringValue
            #expect(await app.streamBacklog.bytes <= 4 * limit)
            if current == last { break }
        }
        let wrong = last.keys.filter { current[$0] != last[$0] }.sorted().map { "\($0): \(current[$0]?.prefix(5) ?? "none") not \(last[$0]!.prefix(5))" }
        #expect(wrong.isEmpty, "\(wrong)")
        await app.close()
    }
}
