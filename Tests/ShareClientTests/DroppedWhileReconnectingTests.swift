// A client released without close() while it is reconnecting ends like one released while
// connected: its streams finish and it stops reconnecting. Before, the reconnection task kept
// the client alive: its streams never ended (a task iterating one waited for ever), and once the
// broker was back the forgotten client reconnected and renewed its subscription, taking the
// app's events over from the instance that replaced it.

import Foundation
import ShareClient
import ShareProtocol
import Testing

@Suite(.serialized, .timeLimit(.minutes(1)))
struct DroppedWhileReconnectingTests {
    @Test func aClientDroppedWhileReconnectingEndsItsStreamsAndStaysGone() async throws {
        let h = try startBroker()
        var app: ShareBrokerClient? = h.client(.app, "com.mycompany.myapp", reconnect: true)
        try await app!.connect()
        let states = await Collector.start(await app!.connectionEvents())
        let events = await Collector.start(try await app!.subscribe())

        h.stop()
        guard case .disconnected? = await states.wait(for: 1).first else {
            Issue.record("expected .disconnected")
            return
        }
        app = nil  // (dropped without close() while it retries)
        #expect(await events.waitForEnd(seconds: 5), "the stream of a released client ends")
        #expect(await events.failure == nil)
        #expect(await states.waitForEnd(seconds: 5), "so does its connectionEvents()")

        // The broker is back; the app's new instance subscribes and keeps its events.
        try h.start()
        let app2 = h.client(.app, "com.mycompany.myapp", reconnect: true)
        try await app2.connect()
        let events2 = await Collector.start(try await app2.subscribe())
        try await Task.sleep(for: .milliseconds(500))  // (time for a forgotten client to come back)
        let tool = try h.session("tool")
        let opened = try tool.call("url.open", ["url": "deeplinkmyapp://after"])
        #expect(await events2.wait(for: 1).map(\.id) == [opened["eventID"]?.stringValue ?? "?"])
        let failure = await events2.failure
        #expect(await events2.finished == false, "not taken over: \(String(describing: failure))")
        let status = try tool.call("broker.status")
        #expect(status["connections"]?.intValue == 2, "the app's client and the tool: \(status)")
        await app2.close()
    }
}
