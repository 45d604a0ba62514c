// Review reproduction: a client with `reconnect: true` whose broker restarts with event queues
// that cannot be opened yet (they open a moment later, PROTOCOL.md: "try again later"). The
// renewal's app.subscribe is -32005, and the event stream ends with `.storageFailure` for good:
// the app, still connected, never gets its events again (and an app with a launch command gets
// a second instance launched for them after the grace).

import Foundation
import ShareClient
import ShareProtocol
import Testing

@Suite(.serialized) struct RenewalUnderStoreFailureTests {
    @Test func aRenewalRefusedWhileTheQueuesCannotBeOpenedIsTriedAgain() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp", reconnect: true)
        try await app.connect()
        let states = await Collector.start(await app.connectionEvents())
        let events = await Collector.start(try await app.subscribe())
        h.stop()
        _ = await states.wait(for: 1)
        // The next segment's name is a directory: reading the journal fails until it goes.
        let blocker = h.state + "/queues/events-000099.log"
        try FileManager.default.createDirectory(atPath: blocker, withIntermediateDirectories: true)
        try h.start()
        _ = await states.wait(for: 2)  // reconnected (the renewal was refused)
        try await Task.sleep(for: .milliseconds(300))
        rmdir(blocker)  // the fault is gone: the broker opens the queues on its own within ~2 s
        let tool = h.client(.tool)
        try await tool.connect()
        var opened: OpenResult? = nil
        for _ in 0..<100 {
            if let r = try? await tool.urlOpen("deeplinkmyapp://after") { opened = r; break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let r = try #require(opened)
        let got = await events.wait(for: 1)
        let failure = await events.failure
        #expect(got.map(\.id) == [r.eventID], "the stream ended with \(String(describing: failure))")
    }
}
