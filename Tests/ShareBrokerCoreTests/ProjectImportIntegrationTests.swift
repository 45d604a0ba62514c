// `sharebroker install` end to end: the seeds' Xcode files are imported by the built binary into STATE/apps,
// a broker is started on that state, and apps.list / url.canOpen / share.targets see the apps exactly as
// hand-written JSON manifests; STATE/apps folders (.app bundles, project folders) are imported at start.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareRouting
import XCTest

private let iosFixtureDir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/ios").path

/// What a person would write by hand for seed 000 (the contract's manifest shape).
private let seed000HandWrittenManifest = """
    {
      "bundleID": "com.mycompany.myapp",
      "name": "My App",
      "urlSchemes": ["deeplinkmyapp"],
      "appGroups": ["group.com.mycompany.myapp"],
      "extensions": [
        {
          "bundleID": "com.mycompany.myapp.share",
          "point": "com.apple.share-services",
          "appGroups": ["group.com.mycompany.myapp"],
          "activationRule": {
            "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
            "NSExtensionActivationWebURLPredicate": "SUBQUERY(absoluteURL, $url, $url CONTAINS 'youtube.com' OR $url CONTAINS 'youtu.be').@count > 0"
          }
        }
      ]
    }
    """

private let importedPDFBytes: [UInt8] = Array("%PDF-1.4\n%\u{00E2}\u{00E3}\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n".utf8)

final class ProjectImportIntegrationTests: XCTestCase {
    func requireInstallCommand() throws {
        let help = try runProcess(Products.sharebroker, ["install", "--help"])
        // `--help` wins over an unknown subcommand (root help, exit 0), so look for install's own usage line.
        XCTAssertEqual(help.status, 0, help.err)
        XCTAssertTrue(help.out.contains("Usage: sharebroker install"), "install's own usage: \(help.out)")
    }

    func install(_ args: [String], state: String) throws -> (status: Int32, out: String, err: String) {
        try runProcess(Products.sharebroker, ["install"] + args + ["--state", state])
    }

    func appsList(_ h: BrokerHarness) throws -> JSONValue { try h.tool().call("apps.list") }

    func entry(_ list: JSONValue, _ bundleID: String) -> JSONValue? {
        list["apps"]?.arrayValue?.first { $0["bundleID"]?.stringValue == bundleID }
    }

    func testInstalledSeedProjectsWorkThroughTheBroker() throws {
        try requireInstallCommand()
        let h = BrokerHarness(associations: [
            "rw-universal-links-final.herokuapp.com": try String(
                contentsOfFile: iosFixtureDir + "/seed003-universallinks/apple-app-site-association", encoding: .utf8)
        ])
        // Seed 000: an Xcode project folder; the bundle IDs come from the build settings.
        let r0 = try install(
            [
                iosFixtureDir + "/seed000-myapp", "--set", "PRODUCT_BUNDLE_IDENTIFIER=com.mycompany.myapp", "--set",
                "myappShareExtension:PRODUCT_BUNDLE_IDENTIFIER=com.mycompany.myapp.share",
            ], state: h.state)
        XCTAssertEqual(r0.status, 0, r0.err)
        XCTAssertTrue(r0.err.contains("shareclient reload"), r0.err)
        XCTAssertTrue(
            r0.err.contains("note: myappShareExtension/Info.plist: com.apple.security.application-groups"), r0.err)
        let written = h.state + "/apps/com.mycompany.myapp.json"
        let printed = try JSONParser.parse(r0.out)
        XCTAssertEqual(try JSONParser.parse(String(contentsOfFile: written, encoding: .utf8)), printed, "stdout is the written manifest")

        // Seed 003: universal links, the team ID from the command line.
        let r3 = try install([iosFixtureDir + "/seed003-universallinks", "--team-id", "KFCNEC27GU", "--json"], state: h.state)
        XCTAssertEqual(r3.status, 0, r3.err)
        let report = try JSONParser.parse(r3.out)
        XCTAssertEqual(report["ok"], true)
        XCTAssertEqual(report["file"]?.stringValue, h.state + "/apps/com.razeware.UniveralLinksTutorial.json")
        XCTAssertEqual(report["manifest"]?["teamID"], "KFCNEC27GU")

        // Failures write nothing and exit 1; usage errors exit 64.
        let unresolved = try install([iosFixtureDir + "/seed000-myapp", "--name", "other"], state: h.state)
        XCTAssertEqual(unresolved.status, 1)
        XCTAssertTrue(
            unresolved.err.contains(
                "error: myapp/Info.plist: CFBundleIdentifier: unresolved build variable $(PRODUCT_BUNDLE_IDENTIFIER) in CFBundleIdentifier; pass --set PRODUCT_BUNDLE_IDENTIFIER=..."
            ), unresolved.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.state + "/apps/other.json"))
        let malformed = try install([iosFixtureDir + "/malformed"], state: h.state)
        XCTAssertEqual(malformed.status, 1)
        XCTAssertTrue(malformed.err.contains("error: MyApp/Info.plist: malformed property list: line 13"), malformed.err)
        XCTAssertEqual(try install([iosFixtureDir + "/seed000-myapp", "--set", "novalue"], state: h.state).status, 64)
        let dry = try install([iosFixtureDir + "/bundle/MyApp.app", "--dry-run", "--name", "dry"], state: h.state)
        XCTAssertEqual(dry.status, 0, dry.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.state + "/apps/dry.json"))
        // A dry run says whether it would replace a file (it said replaced: false).
        let dryOver = try install(
            [iosFixtureDir + "/bundle/MyApp.app", "--dry-run", "--json", "--name", "com.mycompany.myapp"], state: h.state)
        XCTAssertEqual(dryOver.status, 0, dryOver.err)
        XCTAssertEqual(try JSONParser.parse(dryOver.out)["replaced"], true, dryOver.out)
        XCTAssertEqual(try JSONParser.parse(dryOver.out)["written"], false, dryOver.out)
        let dryText = try install([iosFixtureDir + "/bundle/MyApp.app", "--dry-run", "--name", "com.mycompany.myapp"], state: h.state)
        XCTAssertTrue(dryText.err.contains("would write \(h.state)/apps/com.mycompany.myapp.json (replacing the previous file)"), dryText.err)
        // --app picks one of a project folder's apps; given for a bundle it is a usage error.
        let appOnBundle = try install([iosFixtureDir + "/bundle/MyApp.app", "--dry-run", "--app", "Nope"], state: h.state)
        XCTAssertEqual(appOnBundle.status, 64, appOnBundle.err)
        XCTAssertTrue(appOnBundle.err.contains("an .app bundle"), appOnBundle.err)
        // An "app" in a bundle's sharebroker-import.json is no --app: the broker imports such a
        // bundle placed in STATE/apps, and install does too.
        let withSettings = h.dir.path + "/copy/MyApp.app"
        try FileManager.default.createDirectory(atPath: h.dir.path + "/copy", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: iosFixtureDir + "/bundle/MyApp.app", toPath: withSettings)
        h.dir.write("copy/MyApp.app/sharebroker-import.json", #"{"app": "MyApp"}"#)
        let settingsApp = try install([withSettings, "--dry-run"], state: h.state)
        XCTAssertEqual(settingsApp.status, 0, settingsApp.err)
        XCTAssertFalse(settingsApp.err.contains("--app"), settingsApp.err)
        // A --state that does not exist (a typo) installs nothing anywhere.
        let missing = h.dir.path + "/no-such-state"
        let typo = try install([iosFixtureDir + "/bundle/MyApp.app"], state: missing)
        XCTAssertEqual(typo.status, 66, typo.err)
        XCTAssertTrue(typo.err.contains("does not exist"), typo.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing))
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: h.state + "/apps").sorted(),
            ["com.mycompany.myapp.json", "com.razeware.UniveralLinksTutorial.json"])

        try h.start()
        defer { h.stop() }
        let list = try appsList(h)
        XCTAssertEqual(list["errors"]?.arrayValue?.count, 0, list.compactText)

        // apps.list shows the imported app exactly as the hand-written JSON manifest.
        let byHand = ManifestDecoder.decode(bytes: Array(seed000HandWrittenManifest.utf8), file: "com.mycompany.myapp.json")
        XCTAssertNotNil(byHand.0)
        XCTAssertEqual(entry(list, "com.mycompany.myapp"), byHand.0?.json)
        XCTAssertEqual(entry(list, "com.mycompany.myapp")?.compactText, byHand.0?.json.compactText, "same members, same order")
        let app3 = try XCTUnwrap(entry(list, "com.razeware.UniveralLinksTutorial"))
        XCTAssertEqual(app3["teamID"], "KFCNEC27GU")
        XCTAssertEqual(app3["associatedDomains"], ["applinks:rw-universal-links-final.herokuapp.com"])

        let tool = try h.tool()
        // url.canOpen: the seed-000 scheme and the seed-003 universal link.
        let scheme = try tool.call("url.canOpen", ["url": "deeplinkmyapp://open-from-share?t=1"])
        XCTAssertEqual(scheme["canOpen"], true)
        XCTAssertEqual(scheme["app"], "com.mycompany.myapp")
        XCTAssertEqual(scheme["via"], "scheme")
        let link = try tool.call("url.canOpen", ["url": "https://rw-universal-links-final.herokuapp.com/arduino"])
        XCTAssertEqual(link["app"], "com.razeware.UniveralLinksTutorial")
        XCTAssertEqual(link["via"], "universalLink")

        // share.targets: the seed-000 extension takes one YouTube URL, nothing else.
        let youtube = try tool.call("share.targets", ["items": [["url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ"]]])
        XCTAssertEqual(youtube["targets"]?.arrayValue?.compactMap { $0["extension"]?.stringValue }, ["com.mycompany.myapp.share"])
        XCTAssertEqual(youtube["targets"]?.arrayValue?.first?["app"], "com.mycompany.myapp")
        let other = try tool.call("share.targets", ["items": [["url": "https://example.com/video"]]])
        XCTAssertEqual(other["targets"]?.arrayValue?.count, 0)
    }

    func testAppsFoldersAreImportedAtStart() throws {
        // StateFiles.load imports STATE/apps folders (ProjectImporter.importDirectories): a
        // failure, not a skip, when it does not (a skip here once hid that import going away).
        let probe = TempDir()
        try FileManager.default.createDirectory(atPath: probe.path + "/apps", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: iosFixtureDir + "/bundle/MyApp.app", toPath: probe.path + "/apps/MyApp.app")
        XCTAssertEqual(
            StateFiles.load(stateDirectory: probe.path).registry.apps.map(\.bundleID), ["com.mycompany.myapp"],
            "StateFiles.load imports an .app folder in STATE/apps")

        let h = BrokerHarness(manifests: ["zz-plain.json": #"{"bundleID": "com.example.plain", "urlSchemes": ["plain"]}"#])
        try FileManager.default.copyItem(atPath: iosFixtureDir + "/bundle/MyApp.app", toPath: h.state + "/apps/MyApp.app")
        try FileManager.default.createSymbolicLink(atPath: h.state + "/apps/reazy", withDestinationPath: iosFixtureDir + "/seed002-reazy")
        try FileManager.default.copyItem(atPath: iosFixtureDir + "/malformed", toPath: h.state + "/apps/broken")
        try h.start()
        defer { h.stop() }
        let list = try appsList(h)
        XCTAssertEqual(
            list["apps"]?.arrayValue?.compactMap { $0["bundleID"]?.stringValue },
            ["com.mycompany.myapp", "com.example.reazy", "com.example.plain"], list.compactText)
        XCTAssertEqual(entry(list, "com.mycompany.myapp")?["file"], "MyApp.app")
        XCTAssertEqual(entry(list, "com.example.reazy")?["file"], "reazy")
        let errors = list["errors"]?.arrayValue ?? []
        XCTAssertEqual(errors.compactMap { $0["file"]?.stringValue }, ["broken/MyApp/Info.plist"], list.compactText)

        let tool = try h.tool()
        let pdf = try tool.call("share.targets", ["items": [["data": .string(Data(importedPDFBytes).base64EncodedString()), "name": "paper.pdf"]]])
        XCTAssertEqual(
            pdf["targets"]?.arrayValue?.compactMap { $0["extension"]?.stringValue }.sorted(),
            ["com.example.reazy.action", "com.example.reazy.share"])
        let canOpen = try tool.call("url.canOpen", ["url": "thisApp://open?file=paper.pdf"])
        XCTAssertEqual(canOpen["app"], "com.example.reazy")
    }

    /// Inputs another user could have written are not read: a manifest, association document,
    /// project folder or project file that another user (not root) owns, or that every user may
    /// write, and the apps/ directory itself (a root broker ran another user's launch command:
    /// the security audit). Each is named in apps.list.
    func testInputsOtherUsersCouldWriteAreNotRead() throws {
        let evil = #"{"bundleID": "com.example.evil", "urlSchemes": ["evil"], "launch": ["/bin/sh", "-c", "exit 0"]}"#
        let h = BrokerHarness(
            manifests: ["10-ok.json": #"{"bundleID": "com.example.ok", "urlSchemes": ["ok"]}"#, "20-open.json": evil],
            associations: ["example.com": #"{"applinks": {"details": []}}"#])
        chmod(h.state + "/apps/20-open.json", 0o666)
        chmod(h.state + "/associations/example.com.json", 0o646)
        try FileManager.default.copyItem(atPath: iosFixtureDir + "/bundle/MyApp.app", toPath: h.state + "/apps/MyApp.app")
        chmod(h.state + "/apps/MyApp.app", 0o777)
        let asRoot = getuid() == 0
        if asRoot {
            h.dir.write("state/apps/30-other.json", evil.replacingOccurrences(of: "evil", with: "evil2"))
            chown(h.state + "/apps/30-other.json", 65534, 65534)
            // Group-writable, by a group that is not this user's alone (the review).
            h.dir.write("state/apps/40-group.json", evil.replacingOccurrences(of: "evil", with: "evil3"))
            chown(h.state + "/apps/40-group.json", 0, 65534)
            chmod(h.state + "/apps/40-group.json", 0o664)
            // A project folder of ours whose Info.plist is a link to a file another user owns.
            try FileManager.default.copyItem(atPath: iosFixtureDir + "/seed002-reazy", toPath: h.state + "/apps/reazy")
            let plist = try XCTUnwrap(
                FileManager.default.enumerator(atPath: h.state + "/apps/reazy")?.compactMap { $0 as? String }.first {
                    $0.hasSuffix("Info.plist") && !$0.contains(".appex") && !$0.lowercased().contains("extension")
                })
            let target = h.dir.path + "/elsewhere.plist"
            try FileManager.default.moveItem(atPath: h.state + "/apps/reazy/" + plist, toPath: target)
            chown(target, 65534, 65534)
            try FileManager.default.createSymbolicLink(atPath: h.state + "/apps/reazy/" + plist, withDestinationPath: target)
        }
        try h.start()
        defer { h.stop() }
        let list = try appsList(h)
        XCTAssertEqual(list["apps"]?.arrayValue?.compactMap { $0["bundleID"]?.stringValue }, ["com.example.ok"], list.compactText)
        let errors = (list["errors"]?.arrayValue ?? []).map(\.compactText).joined(separator: "\n")
        XCTAssertTrue(errors.contains(#""file":"20-open.json","field":"","message":"is writable by every user; not read"#), errors)
        XCTAssertTrue(errors.contains(#""file":"MyApp.app","field":"","message":"is writable by every user; not read"#), errors)
        let assoc = (list["associationErrors"]?.arrayValue ?? []).map(\.compactText).joined(separator: "\n")
        XCTAssertTrue(assoc.contains("example.com.json: is writable by every user; not read"), assoc)
        if asRoot {
            XCTAssertTrue(errors.contains(#""file":"30-other.json","field":"","message":"belongs to uid 65534"#), errors)
            XCTAssertTrue(errors.contains(#""file":"40-group.json","field":"","message":"is writable by group 65534, which other users are in"#), errors)
            XCTAssertTrue(errors.contains("Info.plist") && errors.contains("belongs to uid 65534"), errors)
        }
        // apps/ itself writable by every user: nothing in it is read.
        h.stop()
        chmod(h.state + "/apps", 0o777)
        try h.start()
        let none = try appsList(h)
        XCTAssertEqual(none["apps"]?.arrayValue?.count, 0, none.compactText)
        XCTAssertTrue(none.compactText.contains("/apps is writable by every user; not read"), none.compactText)
    }
}
