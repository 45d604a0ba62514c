// A broker running as another user takes no `.file` item from a caller (-32602 with
// `data: {"reason": "pathItemsRefused"}`): `shareclient send --file` then sends the files' bytes,
// but the library mapped the error to `.invalidParams` and dropped its data, so its users could
// not do the same without parsing the message. `shareSend` (and `shareTargets`) now do it
// themselves, within the broker's message limit.
//
// An XCTest case (not Swift Testing): it connects as another user by changing the process's
// effective uid for the time of `connect()` (the broker records the caller's credentials when
// it connects), which must not overlap other tests; XCTest runs its cases one at a time.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

final class PathItemsRefusedTests: XCTestCase {
    /// An async client connected as uid/gid 65534 (the process goes back to root right after).
    private func connectAsNobody(_ h: BrokerHarness) async throws -> ShareBrokerClient {
        let client = ShareBrokerClient(socketPath: h.socket, role: .tool, requestTimeout: .seconds(20))
        XCTAssertEqual(setegid(65534), 0)
        XCTAssertEqual(seteuid(65534), 0)
        let outcome: Result<HelloInfo, ShareBrokerError>
        do throws(ShareBrokerError) { outcome = .success(try await client.connect()) } catch { outcome = .failure(error) }
        XCTAssertEqual(seteuid(0), 0)
        XCTAssertEqual(setegid(0), 0)
        _ = try outcome.get()
        return client
    }

    func testFileItemsToABrokerOfAnotherUserAreSentAsTheirBytes() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to connect as another user") }
        let h = BrokerHarness(manifests: [
            "files.json": #"""
                {"bundleID": "com.example.files", "appGroups": ["group.files"],
                 "extensions": [{"bundleID": "com.example.files.share", "point": "com.apple.share-services",
                                 "appGroups": ["group.files"], "activationRule": "TRUEPREDICATE"}]}
                """#
        ])
        try h.start {
            $0.socketMode = 0o666  // (let another user reach the socket at all)
            $0.maxMessage = 64 * 1024
        }
        chmod(h.dir.path, 0o755)
        let files = TempDir()
        chmod(files.path, 0o755)
        let note = files.path + "/note.txt"
        XCTAssertTrue(FileManager.default.createFile(atPath: note, contents: Data("hello from a file".utf8)))
        let big = files.path + "/big.bin"
        XCTAssertTrue(FileManager.default.createFile(atPath: big, contents: Data(count: 100 * 1024)))

        let client = try await connectAsNobody(h)
        // (share.targets too: about the file's bytes)
        let targets = try await client.shareTargets([.file(note)])
        XCTAssertEqual(targets.map(\.extensionID), ["com.example.files.share"])
        let sent = try await client.shareSend([.file(note, type: "public.plain-text")], extension: "com.example.files.share")
        let app = try h.session("app", "com.example.files")
        let share = try app.call("share.get", ["shareID": .string(sent.shareID)])
        let item = try XCTUnwrap(share["items"]?.arrayValue?.first)
        XCTAssertEqual(item["name"], "note.txt")
        XCTAssertEqual(item["type"], "public.plain-text")
        XCTAssertEqual(try String(contentsOfFile: try XCTUnwrap(item["path"]?.stringValue), encoding: .utf8), "hello from a file")

        // Files that would not fit in one message are refused here, naming the limit; nothing is sent.
        do {
            _ = try await client.shareSend([.file(big)], extension: "com.example.files.share")
            XCTFail("a file over the message limit was sent")
        } catch {
            guard case .invalidRequest(let message) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("65536") && message.contains("another user"), message)
        }
        let connected = await client.isConnected
        XCTAssertTrue(connected, "the connection stays usable")
        XCTAssertEqual(try app.call("broker.status")["pendingShares"]?.intValue, 1)
        await client.close()
        h.stop()
    }
}
