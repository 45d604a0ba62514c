// Session rules through the real socket: hello with manifests (roles, bundle IDs, tokens),
// rpc.discover against Protocol/openrpc.json, and the broker.status fields.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import XCTest

final class ConformanceSessionTests: XCTestCase {
    static let manifests: [String: String] = [
        "open.json": manifestJSON(
            "com.example.open", name: "Open App", schemes: ["openapp"], groups: ["group.com.example.open"],
            extensions: [
                #"{"bundleID":"com.example.open.share","point":"com.apple.share-services","appGroups":["group.com.example.open"]}"#
            ]),
        "secret.json": manifestJSON(
            "com.example.secret", schemes: ["secretapp"], token: "app-secret",
            extensions: [
                #"{"bundleID":"com.example.secret.share","point":"com.apple.share-services"}"#,
                #"{"bundleID":"com.example.secret.action","point":"com.apple.ui-services","token":"ext-secret"}"#,
            ]),
    ]

    var harness: BrokerHarness!

    override func setUpWithError() throws {
        harness = BrokerHarness(manifests: Self.manifests)
        try harness.start()
    }

    override func tearDown() {
        harness?.stop()
        harness = nil
    }

    // MARK: hello

    func testAppHelloWithRegisteredBundle() throws {
        let c = try harness.connect()
        let r = try c.hello(role: "app", bundleID: "com.example.open")
        XCTAssertEqual(r["protocol"], .int(1))
        XCTAssertEqual(r["protocol"]?.intValue, 1)
        XCTAssertEqual(r["broker"]?["name"]?.stringValue, "sharebroker")
        XCTAssertEqual(r["broker"]?["version"]?.stringValue, SharebrokerVersion.string)
        XCTAssertNotNil(r["session"]?.intValue, "session must be an integer: \(r.compactText)")
        XCTAssertEqual(r["role"]?.stringValue, "app")
        XCTAssertEqual(r["bundleID"]?.stringValue, "com.example.open")
        // The session is now open: apps.list works.
        XCTAssertEqual(try c.call("apps.list")["apps"]?.arrayValue?.count, 2)

        // Two sessions get different session numbers.
        let c2 = try harness.connect()
        let r2 = try c2.hello(role: "extension", bundleID: "com.example.open.share")
        XCTAssertEqual(r2["role"]?.stringValue, "extension")
        XCTAssertEqual(r2["bundleID"]?.stringValue, "com.example.open.share")
        XCTAssertNotEqual(r2["session"], r["session"])
    }

    func testUnknownBundleIsUnauthorized() throws {
        let c = try harness.connect()
        expectRPCError(-32001, messageContains: "com.example.nobody") {
            try c.hello(role: "app", bundleID: "com.example.nobody")
        }
        expectRPCError(-32001, messageContains: "com.example.nobody.share") {
            try c.hello(role: "extension", bundleID: "com.example.nobody.share")
        }
        // Still no session.
        expectRPCError(-32001) { try c.call("apps.list") }
    }

    func testRoleMustMatchTheKindOfBundle() throws {
        let c = try harness.connect()
        expectRPCError(-32001) { try c.hello(role: "app", bundleID: "com.example.open.share") }
        expectRPCError(-32001) { try c.hello(role: "extension", bundleID: "com.example.open") }
        expectRPCError(-32001) { try c.call("apps.list") }
        XCTAssertEqual(try c.hello(role: "app", bundleID: "com.example.open")["role"]?.stringValue, "app")
    }

    func testAppTokenRequired() throws {
        let c = try harness.connect()
        expectRPCError(-32001, messageContains: "token") { try c.hello(role: "app", bundleID: "com.example.secret") }
        expectRPCError(-32001, messageContains: "token") {
            try c.hello(role: "app", bundleID: "com.example.secret", token: "wrong")
        }
        expectRPCError(-32001) { try c.hello(role: "app", bundleID: "com.example.secret", token: "app-secre") }
        expectRPCError(-32001) { try c.hello(role: "app", bundleID: "com.example.secret", token: "app-secret2") }
        expectRPCError(-32001) { try c.hello(role: "app", bundleID: "com.example.secret", token: "") }
        expectRPCError(-32001) { try c.call("apps.list") }
        let r = try c.hello(role: "app", bundleID: "com.example.secret", token: "app-secret")
        XCTAssertEqual(r["bundleID"]?.stringValue, "com.example.secret")
        XCTAssertNotNil(try c.call("apps.list")["apps"])
    }

    func testSecondHelloAsTheSameIdentityNeedsTheTokenAgain() throws {
        let c = try harness.connect()
        _ = try c.hello(role: "app", bundleID: "com.example.secret", token: "app-secret")
        expectRPCError(-32001, messageContains: "token") { try c.hello(role: "app", bundleID: "com.example.secret") }
        expectRPCError(-32001, messageContains: "token") {
            try c.hello(role: "app", bundleID: "com.example.secret", token: "wrong")
        }
        // The session keeps what it had, and the right token is answered as before.
        XCTAssertNotNil(try c.call("apps.list")["apps"])
        XCTAssertEqual(try c.hello(role: "app", bundleID: "com.example.secret", token: "app-secret")["bundleID"], "com.example.secret")
        let e = try harness.connect()
        _ = try e.hello(role: "extension", bundleID: "com.example.secret.action", token: "ext-secret")
        expectRPCError(-32001) { try e.hello(role: "extension", bundleID: "com.example.secret.action", token: "app-secret") }
    }

    func testAppWithoutTokenIgnoresAGivenToken() throws {
        let c = try harness.connect()
        let r = try c.hello(role: "app", bundleID: "com.example.open", token: "anything")
        XCTAssertEqual(r["role"]?.stringValue, "app")
    }

    func testExtensionFallsBackToItsAppsToken() throws {
        let c = try harness.connect()
        expectRPCError(-32001, messageContains: "token") { try c.hello(role: "extension", bundleID: "com.example.secret.share") }
        expectRPCError(-32001) { try c.hello(role: "extension", bundleID: "com.example.secret.share", token: "ext-secret") }
        let r = try c.hello(role: "extension", bundleID: "com.example.secret.share", token: "app-secret")
        XCTAssertEqual(r["role"]?.stringValue, "extension")
        XCTAssertEqual(r["bundleID"]?.stringValue, "com.example.secret.share")
    }

    func testExtensionWithItsOwnToken() throws {
        let c = try harness.connect()
        expectRPCError(-32001) { try c.hello(role: "extension", bundleID: "com.example.secret.action") }
        // Its own token replaces the app's: the app's token does not open it.
        expectRPCError(-32001) { try c.hello(role: "extension", bundleID: "com.example.secret.action", token: "app-secret") }
        let r = try c.hello(role: "extension", bundleID: "com.example.secret.action", token: "ext-secret")
        XCTAssertEqual(r["bundleID"]?.stringValue, "com.example.secret.action")
        // ... and the extension's token does not open the app.
        let c2 = try harness.connect()
        expectRPCError(-32001) { try c2.hello(role: "app", bundleID: "com.example.secret", token: "ext-secret") }
    }

    func testToolNeedsNoBundle() throws {
        let c = try harness.connect()
        let r = try c.hello(role: "tool")
        XCTAssertEqual(r["role"]?.stringValue, "tool")
        XCTAssertEqual(r["protocol"]?.intValue, 1)
        XCTAssertEqual(r["broker"]?["name"]?.stringValue, "sharebroker")
        XCTAssertNil(r["bundleID"], "a tool session has no bundle: \(r.compactText)")
        XCTAssertNotNil(r["session"]?.intValue)
    }

    func testSecondHelloWithAnotherIdentityIsRefused() throws {
        let c = try harness.connect()
        try c.hello(role: "app", bundleID: "com.example.open")
        // Repeating the same hello is harmless.
        XCTAssertEqual(try c.hello(role: "app", bundleID: "com.example.open")["bundleID"]?.stringValue, "com.example.open")
        expectRPCError(-32001) { try c.hello(role: "tool") }
        expectRPCError(-32001) { try c.hello(role: "extension", bundleID: "com.example.open.share") }
    }

    // MARK: rpc.discover

    static var openRPCFilePath: String {
        // Tests/ShareBrokerCoreTests/<this file> → package root
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/openrpc.json").path
    }

    func testDiscoverListsExactlyTheServedMethodsAndMatchesTheProtocolFile() throws {
        let fileBytes = try XCTUnwrap(FileManager.default.contents(atPath: Self.openRPCFilePath), "missing \(Self.openRPCFilePath)")
        let fileDoc = try JSONParser.parse(Array(fileBytes))
        let fileNames = (fileDoc["methods"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }

        let c = try harness.connect()
        let doc = try c.call("rpc.discover")  // allowed before hello
        XCTAssertNotNil(doc["openrpc"]?.stringValue)
        let names = (doc["methods"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
        XCTAssertEqual(names.count, Set(names).count, "duplicate method names: \(names)")
        XCTAssertEqual(names.sorted(), Broker.servedMethodNames, "rpc.discover must name exactly the served methods")
        XCTAssertEqual(fileNames.sorted(), Broker.servedMethodNames, "Protocol/openrpc.json must name exactly the served methods")
        XCTAssertTrue(names.contains("hello"))
        XCTAssertEqual(doc, fileDoc, "the embedded document must equal Protocol/openrpc.json")

        // Every served method really answers something other than -32601.
        try c.hello(role: "tool")
        for m in Broker.servedMethodNames where m != "hello" {
            let outcome: Result<JSONValue, ClientError> = Result { () throws(ClientError) -> JSONValue in try c.call(m, [:]) }
            if case .failure(let error) = outcome, case .rpc(let e) = error {
                XCTAssertNotEqual(e.code, -32601, "\(m) is listed but not served")
            }
        }
    }

    /// Each method's `errors` in the OpenRPC document list every code the method answers to the
    /// simplest wrong calls: before hello, params as a non-empty array, empty params in each role.
    func testDiscoverListsTheErrorsEachMethodReallyAnswers() throws {
        let c = try harness.connect()
        let doc = try c.call("rpc.discover")
        var declared: [String: Set<Int>] = [:]
        for m in doc["methods"]?.arrayValue ?? [] {
            declared[m["name"]?.stringValue ?? ""] = Set((m["errors"]?.arrayValue ?? []).compactMap { $0["code"]?.intValue })
        }
        func code(_ conn: BrokerConnection, _ method: String, _ params: JSONValue) -> Int? {
            let outcome = Result { () throws(ClientError) -> JSONValue in try conn.call(method, params) }
            if case .failure(let error) = outcome, case .rpc(let e) = error { return e.code }
            return nil
        }
        let tool = try harness.connect()
        try tool.hello(role: "tool")
        let app = try harness.connect()
        try app.hello(role: "app", bundleID: "com.example.open")
        let ext = try harness.connect()
        try ext.hello(role: "extension", bundleID: "com.example.open.share")
        for m in Broker.servedMethodNames where m != "hello" {
            var seen: [(String, Int)] = []
            let fresh = try harness.connect()
            if let e = code(fresh, m, [:]) { seen.append(("before hello", e)) }
            for (who, conn) in [("tool", tool), ("app", app), ("extension", ext)] {
                if let e = code(conn, m, .array([1])) { seen.append(("\(who), params [1]", e)) }
                if let e = code(conn, m, [:]) { seen.append(("\(who), params {}", e)) }
            }
            XCTAssertFalse(seen.isEmpty, "\(m) answered no wrong call with an error")
            for (how, e) in seen {
                XCTAssertTrue(declared[m]?.contains(e) ?? false, "\(m) answers \(e) (\(how)) but its OpenRPC errors list \(declared[m]?.sorted() ?? [])")
            }
        }
        XCTAssertTrue(declared["hello"]?.isSuperset(of: [-32001, -32602]) ?? false)
    }

    // MARK: broker.status

    func testStatusFields() throws {
        let a = try harness.connect()
        let b = try harness.connect()
        let c = try harness.connect()
        try b.hello(role: "tool")
        let st = try c.call("broker.status")
        XCTAssertEqual(st["version"]?.stringValue, SharebrokerVersion.string)
        XCTAssertEqual(st["connections"]?.intValue, 3)
        XCTAssertEqual(st["apps"]?.intValue, 2)
        XCTAssertEqual(st["subscribers"]?.intValue, 0)
        XCTAssertEqual(st["pendingEvents"]?.intValue, 0)
        XCTAssertEqual(st["pendingShares"]?.intValue, 0)
        let up = try XCTUnwrap(st["uptimeSeconds"]?.doubleValue, "uptimeSeconds must be a number: \(st.compactText)")
        XCTAssertGreaterThanOrEqual(up, 0)
        XCTAssertLessThan(up, 60)

        // Closing connections lowers the count.
        _ = a
        var x: BrokerConnection? = try harness.connect()
        XCTAssertEqual(try x!.call("broker.status")["connections"]?.intValue, 4)
        x = nil
        XCTAssertTrue(waitUntil { (try? c.call("broker.status")["connections"]?.intValue) == 3 }, "closed connection still counted")

        // Uptime rises.
        usleep(20_000)
        let up2 = try XCTUnwrap(try b.call("broker.status")["uptimeSeconds"]?.doubleValue)
        XCTAssertGreaterThan(up2, up)
    }
}
