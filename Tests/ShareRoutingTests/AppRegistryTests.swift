// AppRegistry lookups by bundle ID: apps, extensions, and the launch command (kept in a dictionary
// of its own, so a lookup for an app without one hashes nothing).

import ShareRouting
import XCTest

final class AppRegistryTests: XCTestCase {
    func testLaunchCommandsBelongToAppsThatHaveOne() {
        let registry = AppRegistry(manifests: [
            AppManifest(bundleID: "com.a", urlSchemes: ["a"], launch: ["/usr/bin/a", "--flag"],
                        extensions: [ExtensionManifest(bundleID: "com.a.share", point: "com.apple.share-services")]),
            AppManifest(bundleID: "com.b", urlSchemes: ["b"]),
            // A later manifest with a taken bundle ID is ignored, launch command and all.
            AppManifest(bundleID: "com.b", urlSchemes: ["b2"], launch: ["/usr/bin/b"]),
        ])
        XCTAssertEqual(registry.launchCommand(of: "com.a"), ["/usr/bin/a", "--flag"])
        XCTAssertNil(registry.launchCommand(of: "com.b"))
        XCTAssertNil(registry.launchCommand(of: "com.a.share"), "an extension is not launched")
        XCTAssertNil(registry.launchCommand(of: "com.unknown"))
        XCTAssertEqual(registry.appExtension("com.a.share")?.app.bundleID, "com.a")
        XCTAssertEqual(registry.app("com.b")?.urlSchemes, ["b"])
    }

    /// `launchUser`: a user name or a uid (kept as its decimal text), shown in the manifest's
    /// JSON; anything else is an error naming the field; without a `launch` it is a note.
    func testLaunchUserIsANameOrAUid() {
        func decode(_ value: String, launch: Bool = true) -> (AppManifest?, [String]) {
            let text = #"{"bundleID": "com.a", "launchUser": "# + value + (launch ? #", "launch": ["/bin/a"]}"# : "}")
            let (m, issues) = ManifestDecoder.decode(bytes: Array(text.utf8), file: "a.json")
            return (m, issues.map { "\($0.field): \($0.message)" })
        }
        XCTAssertEqual(decode(#""alice""#).0?.launchUser, "alice")
        XCTAssertEqual(decode("1000").0?.launchUser, "1000")
        XCTAssertEqual(decode("1000").0?.json["launchUser"], "1000")
        XCTAssertEqual(decode("0").0?.launchUser, "0")
        for bad in ["-1", #""""#, #""a b""#, #""a:b""#, "true", "[1]", "4294967295", "1.5"] {
            let (m, issues) = decode(bad)
            XCTAssertNil(m, bad)
            XCTAssertTrue(issues.contains { $0.hasPrefix("launchUser: expected a user name or a user id") }, "\(bad): \(issues)")
        }
        let (m, notes) = decode(#""alice""#, launch: false)
        XCTAssertNotNil(m)
        XCTAssertTrue(notes.contains("launchUser: there is no launch command: nothing runs as this user"), "\(notes)")
    }

    /// An empty string in a string list is named as that (it was "got string").
    func testAnEmptyStringInAListIsNamed() {
        let (_, issues) = ManifestDecoder.decode(
            bytes: Array(#"{"bundleID": "com.a", "launch": [""], "urlSchemes": [3]}"#.utf8), file: "a.json")
        let messages = issues.map { "\($0.field): \($0.message)" }
        XCTAssertTrue(messages.contains("launch[0]: expected a non-empty string, got an empty one"), "\(messages)")
        XCTAssertTrue(messages.contains("urlSchemes[0]: expected a non-empty string, got number"), "\(messages)")
    }

    func testExtensionTargetsKeepPrecedenceAndDropTakenIDs() {
        let registry = AppRegistry(manifests: [
            AppManifest(bundleID: "com.z", urlSchemes: ["z"], extensions: [
                ExtensionManifest(bundleID: "com.z.share", point: "com.apple.share-services"),
                ExtensionManifest(bundleID: "com.z.action", point: "com.apple.ui-services"),
            ]),
            AppManifest(bundleID: "com.a", urlSchemes: ["a"], extensions: [
                // Taken by com.z's extension: dropped, so the lookup still finds com.z's.
                ExtensionManifest(bundleID: "com.z.share", point: "com.apple.share-services"),
                ExtensionManifest(bundleID: "com.a.share", point: "com.apple.share-services"),
            ]),
        ])
        XCTAssertEqual(registry.extensionTargets.map(\.ext.bundleID), ["com.z.share", "com.z.action", "com.a.share"])
        XCTAssertEqual(registry.extensionTargets.map(\.app.bundleID), ["com.z", "com.z", "com.a"])
        XCTAssertEqual(registry.appExtension("com.z.share")?.app.bundleID, "com.z")
        XCTAssertEqual(registry.appExtension("com.a.share")?.ext.point, "com.apple.share-services")
        XCTAssertEqual(registry.appExtension("com.a.share")?.app.extensions.map(\.bundleID), ["com.a.share"])
        XCTAssertNil(registry.appExtension("com.a"), "an app is not an extension")
        XCTAssertNil(AppRegistry().appExtension("com.z.share"))
        XCTAssertTrue(AppRegistry().extensionTargets.isEmpty)
    }

    /// A warning about an App Group names where it stands in the manifest's own list, entries
    /// left out before it counted (the docs audit: the case clash of the fourth said `[1]`).
    func testGroupWarningsNameTheGroupsPlaceInTheManifest() {
        let text = #"""
            {"bundleID": "com.v3", "appGroups": ["group..x", "group.ok", "group.ok", "Group.S"],
             "extensions": [{"bundleID": "com.v3.share", "point": "com.apple.share-services",
                             "appGroups": ["bad group", "group.elsewhere", "GROUP.S"]}]}
            """#
        let registry = AppRegistry(files: [("a.json", Array(#"{"bundleID": "com.first", "appGroups": ["group.s"]}"#.utf8)), ("b.json", Array(text.utf8))])
        let fields = registry.issues.filter { $0.file == "b.json" }.map { "\($0.field): \($0.message.prefix(24))" }
        XCTAssertTrue(fields.contains { $0.hasPrefix("appGroups[0]: 'group..x' is not a usab") }, "\(fields)")
        XCTAssertTrue(fields.contains { $0.hasPrefix("appGroups[2]: 'group.ok' is listed tw") }, "\(fields)")
        XCTAssertTrue(fields.contains { $0.hasPrefix("appGroups[3]: 'Group.S' differs only ") }, "\(fields)")
        XCTAssertTrue(fields.contains { $0.hasPrefix("extensions[0].appGroups[1]: group 'group.elsewhere") }, "\(fields)")
        XCTAssertTrue(fields.contains { $0.hasPrefix("extensions[0].appGroups[2]: 'GROUP.S' differs only") }, "\(fields)")
        XCTAssertEqual(registry.app("com.v3")?.appGroups, ["group.ok"])
    }
}
