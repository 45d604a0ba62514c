// The blocking `BrokerConnection`'s timeout bounds the write of the request too: a broker that
// accepted the connection but hangs (stopped, not reading) must give `.timeout` however long the
// request, not block the caller for ever in send(2) once the socket's buffer is full (what
// `shareclient`'s answer timeout promises: "a broker that accepts the connection but hangs is
// then reported, exit 69, instead of waited for").

import Foundation
import ShareClient
import ShareProtocol
import Testing

@Suite(.serialized, .timeLimit(.minutes(1)))
struct BlockingWriteTimeoutTests {
    @Test func aLongRequestToABrokerThatStoppedReadingTimesOut() async throws {
        let dir = TempDir()
        let fake = try FakeBroker(path: dir.path + "/f.sock")
        let release = DispatchSemaphore(value: 0)
        fake.run { f in
            guard let c = f.accept() else { return }
            _ = release.wait(timeout: .now() + 20)  // (reads nothing meanwhile)
            c.close()
        }
        let conn = try BrokerConnection(socketPath: fake.path)
        let held = Box(conn)  // (handed to the thread; used there only until `finished`)
        let outcome = Box<String?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let big: JSONValue = ["group": "g", "key": "k", "value": .string(String(repeating: "x", count: 4_000_000))]
        let thread = Thread {
            do {
                try held.value.call("defaults.set", big, timeoutMillis: 500)
                outcome.value = "answered"
            } catch {
                outcome.value = "\(error)"
            }
            finished.signal()
        }
        thread.start()
        let ended = finished.wait(timeout: .now() + 5) == .success
        #expect(ended, "the call ended within 5 s")
        if ended { #expect(outcome.value == ClientError.timeout.description, "\(outcome.value ?? "nil")") }
        // The request was cut off: the connection is not used for another one.
        if ended {
            #expect(throws: ClientError.self) { try conn.call("broker.status", timeoutMillis: 500) }
        }
        release.signal()
        #expect(await eventually { fake.done })
        if !ended { _ = finished.wait(timeout: .now() + 10) }  // (the fake's close ends the write)
    }
}
