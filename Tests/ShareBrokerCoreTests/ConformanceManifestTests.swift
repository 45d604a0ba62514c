// Manifest loading through the real socket: apps.list shows what was declared (never the token),
// bad manifests are reported with file and field and do not stop others, duplicate bundle IDs and
// URL-scheme conflicts are resolved by file-name order, and reloads (apps.reload, SIGHUP-style
// control.reload) pick up changes.

import Foundation
import ShareClient
import ShareProtocol
import XCTest

final class ConformanceManifestTests: XCTestCase {
    static let fullManifest = """
        {
          "bundleID": "com.mycompany.myapp",
          "teamID": "ABCDE12345",
          "name": "My App",
          "urlSchemes": ["deeplinkmyapp", "MyApp2"],
          "associatedDomains": ["applinks:example.com", "applinks:*.example.org"],
          "appGroups": ["group.com.mycompany.myapp"],
          "token": "super-secret-token-value",
          "launch": ["/usr/local/bin/myapp", "--from-broker"],
          "extensions": [
            {
              "bundleID": "com.mycompany.myapp.share",
              "point": "com.apple.share-services",
              "name": "Send to My App",
              "appGroups": ["group.com.mycompany.myapp"],
              "activationRule": { "NSExtensionActivationSupportsWebURLWithMaxCount": 1 }
            },
            {
              "bundleID": "com.mycompany.myapp.action",
              "point": "com.apple.ui-services",
              "name": "Open PDF",
              "appGroups": [],
              "token": "ext-token-value",
              "activationRule": "TRUEPREDICATE"
            },
            {
              "bundleID": "com.mycompany.myapp.widget",
              "point": "com.apple.widgetkit-extension"
            }
          ]
        }
        """

    func apps(_ list: JSONValue) -> [JSONValue] { list["apps"]?.arrayValue ?? [] }
    func bundleIDs(_ list: JSONValue) -> [String] { apps(list).compactMap { $0["bundleID"]?.stringValue } }
    func errors(_ list: JSONValue) -> [JSONValue] { list["errors"]?.arrayValue ?? [] }

    func startedTool(_ h: BrokerHarness) throws -> BrokerConnection {
        try h.start()
        return try h.tool()
    }

    func testValidManifestIsListedExactlyWithoutToken() throws {
        let h = BrokerHarness(manifests: ["myapp.json": Self.fullManifest])
        let c = try startedTool(h)
        defer { h.stop() }
        let list = try c.call("apps.list")
        XCTAssertEqual(errors(list).count, 0, "\(list.compactText)")
        XCTAssertEqual(apps(list).count, 1)
        let app = try XCTUnwrap(apps(list).first)
        XCTAssertEqual(app["bundleID"], "com.mycompany.myapp")
        XCTAssertEqual(app["teamID"], "ABCDE12345")
        XCTAssertEqual(app["name"], "My App")
        XCTAssertEqual(app["urlSchemes"], ["deeplinkmyapp", "MyApp2"])
        XCTAssertEqual(app["associatedDomains"], ["applinks:example.com", "applinks:*.example.org"])
        XCTAssertEqual(app["appGroups"], ["group.com.mycompany.myapp"])
        XCTAssertEqual(app["launch"], ["/usr/local/bin/myapp", "--from-broker"])
        let exts = try XCTUnwrap(app["extensions"]?.arrayValue)
        XCTAssertEqual(exts.count, 3)
        guard exts.count == 3 else { return }
        XCTAssertEqual(exts[0]["bundleID"], "com.mycompany.myapp.share")
        XCTAssertEqual(exts[0]["point"], "com.apple.share-services")
        XCTAssertEqual(exts[0]["name"], "Send to My App")
        XCTAssertEqual(exts[0]["appGroups"], ["group.com.mycompany.myapp"])
        XCTAssertEqual(exts[0]["activationRule"], ["NSExtensionActivationSupportsWebURLWithMaxCount": 1])
        XCTAssertEqual(exts[1]["bundleID"], "com.mycompany.myapp.action")
        XCTAssertEqual(exts[1]["point"], "com.apple.ui-services")
        XCTAssertEqual(exts[1]["name"], "Open PDF")
        XCTAssertEqual(exts[1]["appGroups"], [])
        XCTAssertEqual(exts[1]["activationRule"], "TRUEPREDICATE")
        XCTAssertEqual(exts[2]["point"], "com.apple.widgetkit-extension")
        XCTAssertEqual(exts[2]["name"], "com.mycompany.myapp.widget", "name defaults to the bundle ID")
        XCTAssertNil(exts[2]["activationRule"]?.objectValue)

        // No token anywhere in the listing.
        XCTAssertNil(app["token"])
        for e in exts { XCTAssertNil(e["token"]) }
        let text = list.compactText
        XCTAssertFalse(text.contains("super-secret-token-value"), "app token leaked in apps.list")
        XCTAssertFalse(text.contains("ext-token-value"), "extension token leaked in apps.list")

        // apps.reload answers the same shape.
        let reloaded = try c.call("apps.reload")
        XCTAssertEqual(reloaded["apps"], list["apps"])
        XCTAssertFalse(reloaded.compactText.contains("super-secret-token-value"))
    }

    func testBadManifestsAreReportedWithFileAndFieldAndDoNotStopOthers() throws {
        let h = BrokerHarness(manifests: [
            "a-invalid-json.json": #"{"bundleID": "com.example.broken", "#,
            "b-wrong-type.json": #"{"bundleID": "com.example.wrongtype", "urlSchemes": "x"}"#,
            "c-ext-no-point.json": #"{"bundleID": "com.example.nopoint", "extensions": [{"bundleID": "com.example.nopoint.share"}]}"#,
            "d-bad-scheme.json": #"{"bundleID": "com.example.badscheme", "urlSchemes": ["good", "1abc"]}"#,
            "e-good.json": manifestJSON("com.example.good", schemes: ["goodapp"]),
            "0-first-good.json": manifestJSON("com.example.first"),
            "notes.txt": "not a manifest at all",
        ])
        let c = try startedTool(h)
        defer { h.stop() }
        let list = try c.call("apps.list")
        XCTAssertEqual(bundleIDs(list), ["com.example.first", "com.example.good"], "\(list.compactText)")

        func errorFor(_ file: String) -> JSONValue? { errors(list).first { $0["file"]?.stringValue == file } }

        let invalid = try XCTUnwrap(errorFor("a-invalid-json.json"), "no error for invalid JSON: \(list.compactText)")
        XCTAssertTrue(invalid["message"]?.stringValue?.lowercased().contains("json") ?? false, invalid.compactText)

        let wrongType = try XCTUnwrap(errorFor("b-wrong-type.json"), "no error for wrong type: \(list.compactText)")
        XCTAssertEqual(wrongType["field"], "urlSchemes")
        XCTAssertTrue(wrongType["message"]?.stringValue?.contains("array") ?? false, wrongType.compactText)

        let noPoint = try XCTUnwrap(errorFor("c-ext-no-point.json"), "no error for missing point: \(list.compactText)")
        XCTAssertEqual(noPoint["field"], "extensions[0].point")

        let badScheme = try XCTUnwrap(errorFor("d-bad-scheme.json"), "no error for bad scheme: \(list.compactText)")
        XCTAssertEqual(badScheme["field"], "urlSchemes[1]")
        XCTAssertTrue(badScheme["message"]?.stringValue?.contains("1abc") ?? false, badScheme.compactText)

        XCTAssertEqual(errors(list).count, 4, "exactly the four bad files: \(errors(list).map(\.compactText))")
        XCTAssertNil(errorFor("notes.txt"), "non-.json files are not manifests")

        // The rejected bundles are not registered.
        let app = try h.connect()
        expectRPCError(-32001) { try app.hello(role: "app", bundleID: "com.example.wrongtype") }
        XCTAssertEqual(try app.hello(role: "app", bundleID: "com.example.good")["bundleID"]?.stringValue, "com.example.good")

        // broker.status counts the loaded apps.
        XCTAssertEqual(try c.call("broker.status")["apps"]?.intValue, 2)
    }

    func testDuplicateBundleIDFirstFileWins() throws {
        let h = BrokerHarness(manifests: [
            "zeta.json": manifestJSON("com.example.dup", name: "From Zeta"),
            "alpha.json": manifestJSON("com.example.dup", name: "From Alpha"),
        ])
        let c = try startedTool(h)
        defer { h.stop() }
        let list = try c.call("apps.list")
        XCTAssertEqual(apps(list).count, 1, "\(list.compactText)")
        XCTAssertEqual(apps(list).first?["name"], "From Alpha")
        let dupErrors = errors(list).filter { $0["file"]?.stringValue == "zeta.json" }
        XCTAssertEqual(dupErrors.count, 1, "the losing file is reported: \(list.compactText)")
        XCTAssertEqual(dupErrors.first?["field"], "bundleID")
        XCTAssertTrue(dupErrors.first?["message"]?.stringValue?.contains("com.example.dup") ?? false)
        XCTAssertTrue(errors(list).allSatisfy { $0["file"]?.stringValue != "alpha.json" })
    }

    func testURLSchemeConflictReportedWithFirstFileAsWinner() throws {
        let h = BrokerHarness(manifests: [
            "20-second.json": manifestJSON("com.example.second", schemes: ["shared", "onlysecond"]),
            "10-first.json": manifestJSON("com.example.first", schemes: ["Shared"]),
            "30-third.json": manifestJSON("com.example.third", schemes: ["SHARED"]),
        ])
        let c = try startedTool(h)
        defer { h.stop() }
        let list = try c.call("apps.list")
        XCTAssertEqual(bundleIDs(list), ["com.example.first", "com.example.second", "com.example.third"])
        let conflicts = list["conflicts"]?.arrayValue ?? []
        XCTAssertEqual(conflicts.count, 1, "\(list.compactText)")
        let conflict = try XCTUnwrap(conflicts.first)
        XCTAssertEqual(conflict["scheme"]?.stringValue?.lowercased(), "shared")
        XCTAssertEqual(conflict["winner"], "com.example.first")
        XCTAssertEqual(conflict["claimants"], ["com.example.first", "com.example.second", "com.example.third"])
        // A conflict does not reject either app.
        XCTAssertEqual(errors(list).count, 0)
    }

    func testAppsReloadPicksUpNewAndDropsRemovedManifests() throws {
        let h = BrokerHarness(manifests: ["keep.json": manifestJSON("com.example.keep"), "gone.json": manifestJSON("com.example.gone")])
        let c = try startedTool(h)
        defer { h.stop() }
        XCTAssertEqual(bundleIDs(try c.call("apps.list")), ["com.example.gone", "com.example.keep"])

        try FileManager.default.removeItem(atPath: h.state + "/apps/gone.json")
        h.dir.write("state/apps/new.json", manifestJSON("com.example.new", schemes: ["newapp"]))
        // apps.list alone does not reload.
        XCTAssertEqual(bundleIDs(try c.call("apps.list")), ["com.example.gone", "com.example.keep"])
        let reloaded = try c.call("apps.reload")
        XCTAssertEqual(bundleIDs(reloaded), ["com.example.keep", "com.example.new"])
        XCTAssertEqual(bundleIDs(try c.call("apps.list")), ["com.example.keep", "com.example.new"])

        // The registry used by hello follows.
        let app = try h.connect()
        expectRPCError(-32001) { try app.hello(role: "app", bundleID: "com.example.gone") }
        XCTAssertEqual(try app.hello(role: "app", bundleID: "com.example.new")["bundleID"], "com.example.new")
        XCTAssertEqual(try c.call("broker.status")["apps"]?.intValue, 2)

        // A file that turns bad is reported on reload, and the good ones stay.
        h.dir.write("state/apps/keep.json", #"{"bundleID": 5}"#)
        let again = try c.call("apps.reload")
        XCTAssertEqual(bundleIDs(again), ["com.example.new"])
        XCTAssertEqual(errors(again).first?["file"], "keep.json")
        XCTAssertEqual(errors(again).first?["field"], "bundleID")
    }

    /// A connected extension's share.send follows a reload: a changed activation rule applies to
    /// the next share (the session keeps its registry entry and rule between shares until the
    /// registry changes); a removed extension's session ends and a new hello is refused until it
    /// is restored; other methods called in between on the same connection are not confused
    /// with it.
    func testShareSendOfAConnectedExtensionFollowsReloads() throws {
        func manifest(rule: String?) -> String {
            var ext = #"{"bundleID": "com.example.notes.share", "point": "com.apple.share-services", "appGroups": ["group.com.example.notes"]"#
            if let rule { ext += #", "activationRule": \#(rule)"# }
            ext += "}"
            return manifestJSON("com.example.notes", groups: ["group.com.example.notes"], extensions: [ext])
        }
        let urls = #"{"NSExtensionActivationSupportsWebURLWithMaxCount": 1}"#
        let textOnly = #"{"NSExtensionActivationSupportsText": true}"#
        let h = BrokerHarness(manifests: ["notes.json": manifest(rule: urls)])
        let tool = try startedTool(h)
        defer { h.stop() }
        let ext = try h.connect()
        try ext.hello(role: "extension", bundleID: "com.example.notes.share")
        let url: JSONValue = ["items": [["url": "https://example.com/a"]]]
        XCTAssertNotNil(try ext.call("share.send", url)["shareID"]?.stringValue)
        XCTAssertEqual(try ext.call("broker.status")["subscribers"]?.intValue, 0)
        XCTAssertNotNil(try ext.call("share.send", url)["shareID"]?.stringValue)

        h.dir.write("state/apps/notes.json", manifest(rule: textOnly))
        _ = try tool.call("apps.reload")
        expectRPCError(-32003, messageContains: "activation rule") { try ext.call("share.send", url) }
        XCTAssertNotNil(try ext.call("share.send", ["items": [["text": "hello"]]])["shareID"]?.stringValue)

        h.dir.write("state/apps/notes.json", manifestJSON("com.example.notes", groups: ["group.com.example.notes"]))
        _ = try tool.call("apps.reload")
        XCTAssertThrowsError(try ext.call("share.send", url), "the removed extension's session ended") { error in
            // What comes back is the broker's reason, without an id (thrown as .rpc), then the close.
            guard case ClientError.rpc(let e) = error else { return XCTFail("not the broker's reason: \(error)") }
            XCTAssertEqual(e.code, -32001)
            XCTAssertTrue(e.message.contains("session ended by a manifest reload: its bundle com.example.notes.share"), e.message)
        }
        let refused = try h.connect()
        expectRPCError(-32001, messageContains: "unknown bundle ID") { try refused.hello(role: "extension", bundleID: "com.example.notes.share") }

        h.dir.write("state/apps/notes.json", manifest(rule: urls))
        _ = try tool.call("apps.reload")
        let ext2 = try h.connect()
        try ext2.hello(role: "extension", bundleID: "com.example.notes.share")
        XCTAssertNotNil(try ext2.call("share.send", url)["shareID"]?.stringValue)
        let app = try h.connect()
        try app.hello(role: "app", bundleID: "com.example.notes")
        XCTAssertEqual(try app.call("share.list")["shares"]?.arrayValue?.count, 4)
        // A method the role may not call is still refused after the same connection's share.send.
        expectRPCError(-32001) { try ext2.call("app.subscribe") }
    }

    /// Of two App Group spellings that differ only in case, the one whose directory already
    /// holds data keeps the name, whatever the manifests' file order (a newcomer earlier in order
    /// took the name, and on a case-insensitive file system the other app's data; the review).
    func testAGroupsExistingDirectoryKeepsItsSpelling() throws {
        let h = BrokerHarness(manifests: [
            "10-new.json": manifestJSON("com.example.new", groups: ["group.Shared.Case"]),
            "20-old.json": manifestJSON("com.example.old", groups: ["group.shared.case"]),
        ])
        try FileManager.default.createDirectory(atPath: h.state + "/groups/group.shared.case", withIntermediateDirectories: true)
        for d in [h.state, h.state + "/groups", h.state + "/groups/group.shared.case"] { chmod(d, 0o700) }
        let tool = try startedTool(h)
        defer { h.stop() }
        let warnings = try tool.call("apps.list")["warnings"]?.compactText ?? ""
        XCTAssertTrue(
            warnings.contains("'group.Shared.Case' differs only in case from the App Group 'group.shared.case' of the existing directory groups/group.shared.case"),
            warnings)
        let old = try h.connect()
        try old.hello(role: "app", bundleID: "com.example.old")
        XCTAssertEqual(try old.call("defaults.set", ["group": "group.shared.case", "key": "k", "value": 1])["version"], 1)
        let new = try h.connect()
        try new.hello(role: "app", bundleID: "com.example.new")
        expectRPCError(-32001) { try new.call("defaults.get", ["group": "group.Shared.Case", "key": "k"]) }
    }

    /// A bundle ID that a manifest lists but that is not registered is refused with why: its
    /// manifest is invalid, or its app's bundle ID was taken by an earlier file (the README's
    /// hand-written manifest beside the one `install` wrote). One no manifest names says so.
    func testHelloForABundleOfAManifestNotLoadedSaysWhy() throws {
        let widget = #"{"bundleID": "com.example.a.widget", "point": "com.apple.widgetkit-extension"}"#
        let share = #"{"bundleID": "com.example.bad.share", "point": "com.apple.share-services"}"#
        let bad = manifestJSON("com.example.bad", extensions: [share]).replacingOccurrences(
            of: #""urlSchemes":[]"#, with: #""urlSchemes":5"#)
        let h = BrokerHarness(manifests: [
            "10-a.json": manifestJSON("com.example.a"),
            "20-a-by-hand.json": manifestJSON("com.example.a", extensions: [widget]),
            "30-bad.json": bad,
        ])
        _ = try startedTool(h)
        defer { h.stop() }
        expectRPCError(
            -32001,
            messageContains:
                "unknown bundle ID 'com.example.a.widget' (the manifest 20-a-by-hand.json that lists it was not loaded (its app's bundle ID 'com.example.a' is already registered by 10-a.json (app)))"
        ) { try h.connect().hello(role: "extension", bundleID: "com.example.a.widget") }
        for (id, role) in [("com.example.bad", "app"), ("com.example.bad.share", "extension")] {
            expectRPCError(-32001, messageContains: "'\(id)' (the manifest 30-bad.json that lists it was not loaded (30-bad.json: urlSchemes: ") {
                try h.connect().hello(role: role, bundleID: id)
            }
        }
        expectRPCError(-32001, messageContains: "'com.example.none' (no manifest in ") {
            try h.connect().hello(role: "app", bundleID: "com.example.none")
        }
        // The app that was loaded is itself.
        XCTAssertEqual(try h.connect().hello(role: "app", bundleID: "com.example.a")["bundleID"], "com.example.a")
    }

    /// A subscribed app whose manifest is removed does not stay connected getting nothing: its
    /// session ends (the reload's caller is unaffected, other apps keep theirs), its events stay
    /// queued, and once the manifest is back a new session gets them. A bundle that comes back
    /// with the other role ends its sessions too.
    func testAReloadThatRemovesABundleEndsItsSessions() throws {
        let notes = manifestJSON("com.example.notes", schemes: ["notes"])
        let other = manifestJSON("com.example.other", schemes: ["other"])
        let h = BrokerHarness(manifests: ["notes.json": notes, "other.json": other])
        let tool = try startedTool(h)
        defer { h.stop() }
        let app = try h.rawSession(role: "app", bundleID: "com.example.notes")
        app.send(#"{"jsonrpc":"2.0","id":2,"method":"app.subscribe"}"# + "\n")
        XCTAssertEqual(app.readJSON()?["result"]?["pending"], 0)
        let otherApp = try h.connect()
        try otherApp.hello(role: "app", bundleID: "com.example.other")
        _ = try otherApp.call("app.subscribe")

        try FileManager.default.removeItem(atPath: h.state + "/apps/notes.json")
        _ = try tool.call("apps.reload")
        let notice = app.readJSON()
        XCTAssertEqual(notice?["id"], .null, "the session is told why it ends: \(String(describing: notice))")
        XCTAssertEqual(notice?["error"]?["code"], -32001, "\(String(describing: notice))")
        XCTAssertTrue(
            notice?["error"]?["message"]?.stringValue?.contains("com.example.notes is no longer registered") == true,
            "\(String(describing: notice))")
        XCTAssertTrue(app.waitForClose(), "the removed app's session ended")
        let status = try tool.call("broker.status")
        XCTAssertEqual(status["subscribers"], 1, "\(status)")
        XCTAssertEqual(status["sessions"]?["app"], 1, "\(status)")
        XCTAssertEqual(try otherApp.call("broker.status")["subscribers"], 1, "the other app's session is kept")
        expectRPCError(-32004) { try tool.call("url.open", ["url": "notes://a"]) }

        h.dir.write("state/apps/notes.json", notes)
        _ = try tool.call("apps.reload")
        XCTAssertEqual(try tool.call("url.open", ["url": "notes://b"])["queued"], true)
        let back = try h.rawSession(role: "app", bundleID: "com.example.notes")
        back.send(#"{"jsonrpc":"2.0","id":2,"method":"app.subscribe"}"# + "\n")
        var got: [JSONValue] = []
        while got.count < 2, let m = back.readJSON(timeout: 5) { got.append(m) }
        XCTAssertEqual(got.first(where: { $0["id"] == 2 })?["result"]?["pending"], 1, "\(got)")
        XCTAssertEqual(got.first(where: { $0["method"] == "app.event" })?["params"]?["url"], "notes://b", "\(got)")

        // The app's bundle ID now names an extension of another app: the app session ends.
        let ext = #"{"bundleID": "com.example.notes", "point": "com.apple.share-services"}"#
        try FileManager.default.removeItem(atPath: h.state + "/apps/notes.json")
        h.dir.write("state/apps/other.json", manifestJSON("com.example.other", schemes: ["other"], extensions: [ext]))
        _ = try tool.call("apps.reload")
        XCTAssertTrue(
            back.readJSON()?["error"]?["message"]?.stringValue?.contains("now registered with another role") == true,
            "the session is told why it ends")
        XCTAssertTrue(back.waitForClose(), "a session whose bundle changed role ended")
        XCTAssertEqual(try otherApp.call("broker.status")["subscribers"], 1, "the other app's session is kept")
    }

    func testControlReloadPicksUpChanges() throws {
        let h = BrokerHarness(manifests: ["one.json": manifestJSON("com.example.one")])
        let c = try startedTool(h)
        defer { h.stop() }
        XCTAssertEqual(bundleIDs(try c.call("apps.list")), ["com.example.one"])
        h.dir.write("state/apps/two.json", manifestJSON("com.example.two"))
        try FileManager.default.removeItem(atPath: h.state + "/apps/one.json")
        h.control?.reload()
        XCTAssertTrue(
            waitUntil { (try? self.bundleIDs(c.call("apps.list"))) == ["com.example.two"] },
            "control.reload() did not pick up the change: \((try? c.call("apps.list").compactText) ?? "")")
    }
}
