// `BrokerConnection.readMessage(timeoutMillis: 0)` and `nextNotification(timeoutMillis: 0)`: "the
// timeout bounds the whole wait", so with 0 they wait for nothing, but what the broker already
// sent (sitting in the socket, as a poll-based caller of `fileDescriptor` knows) is read and
// returned, not reported as a `.timeout`.

import Foundation
import ShareClient
import ShareProtocol
import Testing

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

@Suite(.serialized, .timeLimit(.minutes(1)))
struct ZeroTimeoutReadTests {
    @Test func aZeroTimeoutReadReturnsWhatHasArrived() async throws {
        let h = try startBroker()
        let app = try h.session("app", "com.mycompany.myapp")
        try app.call("app.subscribe")
        let tool = try h.session("tool")
        let opened = try tool.call("url.open", ["url": "deeplinkmyapp://one"])
        // Wait (outside the connection) until the event is readable, as a poll-based caller does.
        var pfd = pollfd(fd: app.fileDescriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&pfd, 1, 5000) == 1)
        let event = try app.nextNotification(timeoutMillis: 0)
        #expect(event?.params?["id"] == opened["eventID"])
        // Nothing more: a timeout, at once.
        let start = ContinuousClock.now
        #expect(throws: ClientError.self) { try app.readMessage(timeoutMillis: 0) }
        #expect(ContinuousClock.now - start < .milliseconds(100))
        // A reply that has arrived is read with a zero timeout too.
        var out: [UInt8] = []
        RPCCodec.writeRequest(id: .number("77"), method: "broker.status", params: nil, to: &out)
        try app.sendRaw(out + [0x0A])
        pfd.revents = 0
        #expect(poll(&pfd, 1, 5000) == 1)
        let reply = try app.readMessage(timeoutMillis: 0)
        #expect(reply?["id"] == .number("77"))
    }
}
