// With `reconnect: true`, a call made after the connection ended but before the client noticed
// (its reader's end not handled yet) was failed with `.connectionLost`, although it was never
// sent: an error that says the call "may or may not have taken effect", where the client's doc
// promises that calls made while it reconnects wait for the new connection. It now waits.

import Foundation
import ShareClient
import ShareProtocol
import Testing

@Suite(.serialized, .timeLimit(.minutes(1)))
struct UnsentCallTests {
    @Test func aCallMadeAsTheConnectionEndsWaitsForTheReconnection() async throws {
        let h = try startBroker()
        let app = h.client(.app, "com.mycompany.myapp", reconnect: true)
        try await app.connect()
        let stop = Box(false)
        let lock = NSLock()
        // Calls without pause from several tasks, while the broker restarts under them.
        let unsent = await withTaskGroup(of: [String].self) { g in
            for _ in 0..<16 {
                g.addTask {
                    var out: [String] = []
                    while !lock.withLock({ stop.value }) {
                        do throws(ShareBrokerError) { _ = try await app.status() } catch {
                            // (in flight when the broker went: may fail; never sent: must not)
                            if case .connectionLost(let why) = error, why.hasPrefix("the connection is closed") { out.append(why) }
                        }
                    }
                    return out
                }
            }
            g.addTask {
                for _ in 0..<5 {
                    try? await Task.sleep(for: .milliseconds(100))
                    h.stop()
                    try? h.start()
                }
                try? await Task.sleep(for: .milliseconds(100))
                lock.withLock { stop.value = true }
                return []
            }
            var all: [String] = []
            for await u in g { all += u }
            return all
        }
        let count = unsent.count
        #expect(count == 0, "calls never sent that failed with connectionLost: \(unsent.first ?? "")")
        #expect(try await app.status().apps == 2)
        await app.close()
    }
}
