// Caller identity from the kernel: manifests restrict who may act as an app or extension (by uid
// and by executable), another user's process cannot act as an app, and broker.status shows peers.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

final class IdentityTests: XCTestCase {
    func selfExecutable() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
    }

    func testUIDAndExecutableRestrictions() throws {
        let me = selfExecutable()
        let h = BrokerHarness(manifests: [
            "a.json": #"{"bundleID": "com.only.other.uid", "uids": [12345]}"#,
            "b.json": #"{"bundleID": "com.only.false", "executable": "/bin/false"}"#,
            "c.json": JSONValue.object(["bundleID": "com.only.me", "executable": .string(me), "uids": [.int(Int(getuid()))]]).compactText,
            "d.json": #"{"bundleID": "com.bad", "uids": ["root"], "executable": "relative/path"}"#,
        ])
        try h.start()
        let c1 = try h.connect()
        XCTAssertEqual(rpcCode { try c1.hello(role: "app", bundleID: "com.only.other.uid") }, -32001)
        let c2 = try h.connect()
        let e = rpcError { try c2.hello(role: "app", bundleID: "com.only.false") }
        XCTAssertEqual(e?.code, -32001)
        XCTAssertTrue(e?.message.contains("/bin/false") ?? false, "\(String(describing: e))")
        let c3 = try h.connect()
        XCTAssertEqual(try c3.hello(role: "app", bundleID: "com.only.me")["bundleID"], "com.only.me")
        let errors = try c3.call("apps.list")["errors"]?.arrayValue ?? []
        let fields = Set(errors.compactMap { $0["field"]?.stringValue })
        XCTAssertTrue(fields.contains("uids[0]") && fields.contains("executable"), "\(errors)")
        let verbose = try c3.call("broker.status", ["verbose": true])
        let clients = verbose["clients"]?.arrayValue ?? []
        XCTAssertEqual(clients.count, 3)
        let mine = clients.first { $0["bundleID"] == "com.only.me" }
        XCTAssertEqual(mine?["pid"]?.intValue, Int(getpid()))
        XCTAssertEqual(mine?["uid"]?.intValue, Int(getuid()))
        h.stop()
    }

    func testAnotherUsersProcessCannotActAsAnApp() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run a client as another user") }
        let h = BrokerHarness(manifests: [
            "myapp.json": #"{"bundleID": "com.mycompany.myapp", "urlSchemes": ["deeplinkmyapp"]}"#,
            "shared.json": #"{"bundleID": "com.shared.app", "uids": [0, 65534]}"#,
        ])
        try h.start { $0.socketMode = 0o666 }  // let another user reach the socket at all
        chmod(h.dir.path, 0o755)
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", Products.shareclient, "--socket", h.socket]
        let refused = try runProcess("/usr/bin/setpriv", asNobody + ["call", "app.subscribe", "--as", "com.mycompany.myapp"])
        XCTAssertEqual(refused.status, 1, refused.err)
        XCTAssertTrue(refused.err.contains("uid 65534"), refused.err)
        let allowed = try runProcess("/usr/bin/setpriv", asNobody + ["call", "app.subscribe", "--as", "com.shared.app"])
        XCTAssertEqual(allowed.status, 0, allowed.err)
        let tool = try runProcess("/usr/bin/setpriv", asNobody + ["status", "--json"])
        XCTAssertEqual(tool.status, 0, "a tool session is fine for anyone who can reach the socket: \(tool.err)")
        h.stop()
    }

    func testStateDirectoryMustBePrivate() throws {
        let dir = TempDir()
        let state = dir.path + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        chmod(state, 0o777)
        var config = BrokerConfiguration(socketPath: dir.path + "/s.sock", stateDirectory: state)
        config.handleSignals = false
        config.logLevel = .error
        XCTAssertThrowsError(try Broker(config: config)) { e in
            XCTAssertTrue("\(e)".contains("writable by other users"), "\(e)")
        }
        chmod(state, 0o700)
        if getuid() == 0 {
            chown(state, 65534, 65534)
            XCTAssertThrowsError(try Broker(config: config)) { e in
                XCTAssertTrue("\(e)".contains("belongs to uid 65534"), "\(e)")
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path + "/s.sock"), "no socket was created")
    }
}
