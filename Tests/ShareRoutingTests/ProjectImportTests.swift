// ProjectImporter on the seeds' iOS files (Tests/Fixtures/ios): seed 000's project with its share
// extension, seed 002's share + action extensions with the PDF predicate, seed 003's associated domains,
// a built .app (XML and binary plists), unresolved variables, malformed plists, unknown keys, STATE/apps folders.

import Foundation
import ShareProtocol
import ShareRouting
import XCTest

/// Tests/Fixtures/ios, found from this file's path.
let iosFixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/ios").path

/// A temporary directory for import tests, removed on deinit.
final class ImportScratch {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "sb-import-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    func write(_ rel: String, _ text: String) { write(rel, Data(text.utf8)) }
    func write(_ rel: String, _ data: Data) {
        let full = path + "/" + rel
        try? FileManager.default.createDirectory(
            atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: full, contents: data))
    }
    func copy(fixture: String, to rel: String) {
        let dest = path + "/" + rel
        try? FileManager.default.createDirectory(
            atPath: (dest as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        XCTAssertNoThrow(try FileManager.default.copyItem(atPath: iosFixtures + "/" + fixture, toPath: dest))
    }
}

/// An XML plist document around `body` (the members of the top-level dict).
func plist(_ body: String) -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    <dict>
    \(body)
    </dict>
    </plist>
    """
}

let seed000Rule: JSONValue = [
    "NSExtensionActivationSupportsWebURLWithMaxCount": 1,
    "NSExtensionActivationWebURLPredicate":
        "SUBQUERY(absoluteURL, $url, $url CONTAINS 'youtube.com' OR $url CONTAINS 'youtu.be').@count > 0",
]

let seed002Predicate = """

    \t\tSUBQUERY (
    \t\textensionItems,
    \t\t$extensionItem,
    \t\t\t\tSUBQUERY (
    \t\t\t\t\t\t$extensionItem.attachments,
    \t\t\t\t\t\t$attachment,
    \t\t\t\t\t\tANY $attachment.registeredTypeIdentifiers UTI-CONFORMS-TO "com.adobe.pdf"
    \t\t\t\t).@count == $extensionItem.attachments.@count
    \t\t).@count >= 1

    """

final class ProjectImportTests: XCTestCase {
    let seed000Variables = [
        "PRODUCT_BUNDLE_IDENTIFIER": "com.mycompany.myapp",
        "myappShareExtension:PRODUCT_BUNDLE_IDENTIFIER": "com.mycompany.myapp.share",
    ]

    func fatal(_ r: ImportResult) -> [ManifestIssue] { r.issues.filter(\.fatal) }
    func notes(_ r: ImportResult) -> [ManifestIssue] { r.issues.filter { !$0.fatal } }
    func issue(_ r: ImportResult, file: String, field: String) -> ManifestIssue? {
        r.issues.first { $0.file == file && $0.field == field }
    }

    func accepts(_ rule: JSONValue?, url: String) -> Bool {
        let attachment = UTITable.system.attachment(for: .url(url))
        return ActivationRule.evaluate(rule, attachments: [attachment]).accepted
    }

    // MARK: seed 000

    func testSeed000ProjectFolder() throws {
        let r = ProjectImporter.importApp(
            at: iosFixtures + "/seed000-myapp", options: ImportOptions(variables: seed000Variables))
        XCTAssertEqual(fatal(r), [], "\(r.issues)")
        XCTAssertEqual(r.layout, .projectFolder)
        let expected = AppManifest(
            bundleID: "com.mycompany.myapp", name: "My App", urlSchemes: ["deeplinkmyapp"],
            appGroups: ["group.com.mycompany.myapp"],
            extensions: [
                ExtensionManifest(
                    bundleID: "com.mycompany.myapp.share", point: "com.apple.share-services",
                    appGroups: ["group.com.mycompany.myapp"], activationRule: seed000Rule)
            ], file: "seed000-myapp")
        XCTAssertEqual(r.manifest, expected)

        // The JSON is the contract's shape and decodes to the same manifest through ManifestDecoder.
        let json = try XCTUnwrap(r.manifestJSON)
        XCTAssertEqual(
            json.compactText,
            #"{"bundleID":"com.mycompany.myapp","name":"My App","urlSchemes":["deeplinkmyapp"],"appGroups":["group.com.mycompany.myapp"],"extensions":[{"bundleID":"com.mycompany.myapp.share","point":"com.apple.share-services","appGroups":["group.com.mycompany.myapp"],"activationRule":{"NSExtensionActivationSupportsWebURLWithMaxCount":1,"NSExtensionActivationWebURLPredicate":"SUBQUERY(absoluteURL, $url, $url CONTAINS 'youtube.com' OR $url CONTAINS 'youtu.be').@count > 0"}}]}"#
        )
        let (decoded, _) = ManifestDecoder.decode(bytes: json.bytes, file: "seed000-myapp")
        XCTAssertEqual(decoded, expected)
        XCTAssertEqual(decoded?.json, r.manifest?.json, "apps.list shows the same for the import and for its JSON")

        // Files: the app and extension targets; Pods, .xcodeproj and the test target are not searched.
        XCTAssertEqual(
            r.files,
            [
                ImportedFile(path: "myapp/Info.plist", role: .app, detail: "myapp"),
                ImportedFile(path: "myapp/myapp.entitlements", role: .appEntitlements, detail: "myapp"),
                ImportedFile(path: "myappShareExtension/Info.plist", role: .appExtension, detail: "myappShareExtension"),
            ])

        // The seed keeps the app group in the extension's Info.plist: used, with a note naming file and key.
        let groupNote = try XCTUnwrap(
            issue(r, file: "myappShareExtension/Info.plist", field: "com.apple.security.application-groups"), "\(r.issues)")
        XCTAssertFalse(groupNote.fatal)
        XCTAssertTrue(groupNote.message.contains("entitlement in Info.plist"), groupNote.message)
        // $(PRODUCT_MODULE_NAME) in NSExtensionPrincipalClass is not used, so it is not reported; other
        // Info.plist keys ($(EXECUTABLE_NAME), UILaunchScreen, ...) are ignored silently.
        XCTAssertFalse(r.issues.contains { $0.message.contains("PRODUCT_MODULE_NAME") }, "\(r.issues)")
        XCTAssertFalse(r.issues.contains { $0.field.hasPrefix("CFBundle") || $0.field.hasPrefix("UI") }, "\(r.issues)")

        // The seed's YouTube filter works on the imported rule.
        let rule = r.manifest?.extensions.first?.activationRule
        XCTAssertTrue(accepts(rule, url: "https://youtu.be/dQw4w9WgXcQ"))
        XCTAssertTrue(accepts(rule, url: "https://www.youtube.com/watch?v=dQw4w9WgXcQ"))
        XCTAssertFalse(accepts(rule, url: "https://example.com/video"))
    }

    func testSeed000UnresolvedBundleIDsAreFatalAndNameFileKeyAndVariable() throws {
        let r = ProjectImporter.importApp(at: iosFixtures + "/seed000-myapp", options: ImportOptions())
        XCTAssertNil(r.manifestJSON)
        XCTAssertNil(r.manifest)
        let app = try XCTUnwrap(issue(r, file: "myapp/Info.plist", field: "CFBundleIdentifier"), "\(r.issues)")
        XCTAssertTrue(app.fatal)
        XCTAssertTrue(
            app.message.hasPrefix(
                "unresolved build variable $(PRODUCT_BUNDLE_IDENTIFIER) in CFBundleIdentifier; pass --set PRODUCT_BUNDLE_IDENTIFIER=..."),
            app.message)
        // The seed's extension plist has no CFBundleIdentifier: Xcode fills it from the build setting.
        let ext = try XCTUnwrap(issue(r, file: "myappShareExtension/Info.plist", field: "CFBundleIdentifier"), "\(r.issues)")
        XCTAssertTrue(ext.fatal)
        XCTAssertTrue(ext.message.contains("CFBundleIdentifier is missing"), ext.message)
        XCTAssertTrue(ext.message.contains("--set myappShareExtension:PRODUCT_BUNDLE_IDENTIFIER=..."), ext.message)
        // Decoder duplicates ("required string is missing") are not added on top.
        XCTAssertEqual(fatal(r).count, 2, "\(r.issues)")
    }

    func testAGlobalBundleIDSettingForEveryTargetIsCaught() throws {
        let r = ProjectImporter.importApp(
            at: iosFixtures + "/seed000-myapp",
            options: ImportOptions(variables: ["PRODUCT_BUNDLE_IDENTIFIER": "com.mycompany.myapp"]))
        let e = try XCTUnwrap(issue(r, file: "myappShareExtension/Info.plist", field: "CFBundleIdentifier"), "\(r.issues)")
        XCTAssertTrue(e.fatal)
        XCTAssertTrue(e.message.contains("also the bundle ID of myapp/Info.plist"), e.message)
        XCTAssertTrue(e.message.contains("--set myappShareExtension:PRODUCT_BUNDLE_IDENTIFIER="), e.message)
    }

    func testSeed000TypoInTheExtensionBundleIDIsANote() throws {
        // The seed spells the extension "com.mycompanay.myapp.share".
        var vars = seed000Variables
        vars["myappShareExtension:PRODUCT_BUNDLE_IDENTIFIER"] = "com.mycompanay.myapp.share"
        let r = ProjectImporter.importApp(at: iosFixtures + "/seed000-myapp", options: ImportOptions(variables: vars))
        XCTAssertEqual(fatal(r), [])
        let n = try XCTUnwrap(issue(r, file: "myappShareExtension/Info.plist", field: "CFBundleIdentifier"))
        XCTAssertFalse(n.fatal)
        XCTAssertTrue(n.message.contains("does not start with the app's bundle ID"), n.message)
    }

    func testSingleInfoPlistUsesTheEntitlementsBesideIt() throws {
        let r = ProjectImporter.importApp(
            at: iosFixtures + "/seed000-myapp/myapp/Info.plist",
            options: ImportOptions(variables: ["myapp:PRODUCT_BUNDLE_IDENTIFIER": "com.mycompany.myapp"]))
        XCTAssertEqual(fatal(r), [], "\(r.issues)")
        XCTAssertEqual(r.layout, .infoPlist)
        XCTAssertEqual(r.manifest?.bundleID, "com.mycompany.myapp")
        XCTAssertEqual(r.manifest?.appGroups, ["group.com.mycompany.myapp"])
        XCTAssertEqual(r.manifest?.extensions, [])
        XCTAssertEqual(r.files.map(\.path), ["Info.plist", "myapp.entitlements"])
    }

    func testAnExtensionInfoPlistIsNotAnApp() throws {
        let r = ProjectImporter.importApp(at: iosFixtures + "/seed000-myapp/myappShareExtension/Info.plist")
        let e = try XCTUnwrap(fatal(r).first)
        XCTAssertEqual(e.file, "Info.plist")
        XCTAssertEqual(e.field, "NSExtension")
        XCTAssertTrue(e.message.contains("app extension"), e.message)
        let folder = ProjectImporter.importApp(at: iosFixtures + "/seed000-myapp/myappShareExtension")
        XCTAssertTrue(folder.issues.contains { $0.fatal && $0.message.contains("found only extensions: Info.plist") }, "\(folder.issues)")
    }

    // MARK: seed 002

    func testSeed002ShareAndActionExtensionsWithThePDFPredicate() throws {
        let dir = iosFixtures + "/seed002-reazy"
        let settings = ProjectImporter.settings(inDirectory: dir)
        XCTAssertTrue(settings.found)
        XCTAssertEqual(settings.issues, [])
        let r = ProjectImporter.importApp(at: dir, options: settings.options)
        XCTAssertEqual(fatal(r), [], "\(r.issues)")
        let m = try XCTUnwrap(r.manifest)
        XCTAssertEqual(m.bundleID, "com.example.reazy")
        XCTAssertEqual(m.name, "Reazy", "CFBundleName when there is no CFBundleDisplayName")
        XCTAssertEqual(m.urlSchemes, ["thisApp"])
        XCTAssertEqual(m.appGroups, ["group.com.example.reazy"])
        XCTAssertEqual(m.extensions.map(\.bundleID), ["com.example.reazy.action", "com.example.reazy.share"])
        XCTAssertEqual(m.extensions.map(\.point), ["com.apple.ui-services", "com.apple.share-services"])
        XCTAssertEqual(m.extensions.map(\.name), ["Reazy에서 열기", "Reazy"])
        XCTAssertEqual(m.extensions.map(\.appGroups), [["group.com.example.reazy"], ["group.com.example.reazy"]])
        // The predicate string is kept exactly as written, whitespace and all.
        for e in m.extensions { XCTAssertEqual(e.activationRule, .string(seed002Predicate)) }
        XCTAssertTrue(m.extensions.allSatisfy(\.isShareTarget))
        // No notes: NSExtensionMainStoryboard, NSExtensionPrincipalClass and NSExtensionServiceRoleType are known keys.
        XCTAssertEqual(notes(r), [], "\(r.issues)")

        // The rule accepts PDFs only.
        let pdf = UTITable.system.attachment(for: .data([0x25, 0x50, 0x44, 0x46, 0x2D], name: "paper.pdf"))
        let png = UTITable.system.attachment(for: .data([0x89, 0x50, 0x4E, 0x47], name: "x.png"))
        XCTAssertTrue(ActivationRule.evaluate(m.extensions[1].activationRule, attachments: [pdf, pdf]).accepted)
        XCTAssertFalse(ActivationRule.evaluate(m.extensions[1].activationRule, attachments: [pdf, png]).accepted)
    }

    // MARK: seed 003

    func testSeed003AssociatedDomainsWithTeamIDFromTheCommandLine() throws {
        let r = ProjectImporter.importApp(
            at: iosFixtures + "/seed003-universallinks", options: ImportOptions(teamID: "KFCNEC27GU"))
        XCTAssertEqual(r.issues, [])
        let m = try XCTUnwrap(r.manifest)
        XCTAssertEqual(m.bundleID, "com.razeware.UniveralLinksTutorial")
        XCTAssertEqual(m.teamID, "KFCNEC27GU")
        XCTAssertEqual(m.appID, "KFCNEC27GU.com.razeware.UniveralLinksTutorial")
        XCTAssertEqual(m.associatedDomains, ["applinks:rw-universal-links-final.herokuapp.com"])
        XCTAssertEqual(m.name, "UniversalLinks")

        // With the seed's association document, the site's links open the app as universal links.
        let aasa = try Data(contentsOf: URL(fileURLWithPath: iosFixtures + "/seed003-universallinks/apple-app-site-association"))
        let router = URLRouter(
            apps: [m], associations: ["rw-universal-links-final.herokuapp.com": AssociationDocument.load([UInt8](aasa))])
        XCTAssertEqual(
            try router.canOpen("https://rw-universal-links-final.herokuapp.com/arduino"),
            CanOpenAnswer(canOpen: true, app: "com.razeware.UniveralLinksTutorial", via: .universalLink))
    }

    func testSeed003WithoutATeamIDNotesThatUniversalLinksNeedOne() throws {
        let r = ProjectImporter.importApp(at: iosFixtures + "/seed003-universallinks")
        XCTAssertEqual(fatal(r), [])
        XCTAssertNil(r.manifest?.teamID)
        let n = try XCTUnwrap(
            issue(r, file: "UniversalLinks/UniversalLinks.entitlements", field: "com.apple.developer.associated-domains[0]"))
        XCTAssertFalse(n.fatal)
        XCTAssertTrue(n.message.contains("--team-id"), n.message)
    }

    func testTeamIDFromVariablesAndEntitlements() throws {
        let s = ImportScratch()
        s.copy(fixture: "seed003-universallinks", to: "p")
        var r = ProjectImporter.importApp(at: s.path + "/p", options: ImportOptions(variables: ["DEVELOPMENT_TEAM": "TEAM123456"]))
        XCTAssertEqual(r.manifest?.teamID, "TEAM123456")
        r = ProjectImporter.importApp(at: s.path + "/p", options: ImportOptions(variables: ["AppIdentifierPrefix": "PREFIX1234."]))
        XCTAssertEqual(r.manifest?.teamID, "PREFIX1234")
        s.write(
            "p/UniversalLinks/UniversalLinks.entitlements",
            plist(
                """
                <key>com.apple.developer.team-identifier</key><string>ENTITLED12</string>
                <key>com.apple.developer.associated-domains</key><array><string>applinks:example.com</string></array>
                """))
        r = ProjectImporter.importApp(at: s.path + "/p")
        XCTAssertEqual(r.manifest?.teamID, "ENTITLED12")
        // --team-id wins, and the difference is noted.
        r = ProjectImporter.importApp(at: s.path + "/p", options: ImportOptions(teamID: "KFCNEC27GU"))
        XCTAssertEqual(r.manifest?.teamID, "KFCNEC27GU")
        XCTAssertTrue(
            issue(r, file: "UniversalLinks/UniversalLinks.entitlements", field: "com.apple.developer.team-identifier")?.message
                .contains("differs") ?? false, "\(r.issues)")
        // A bad team ID names where it came from.
        r = ProjectImporter.importApp(at: s.path + "/p", options: ImportOptions(teamID: "not a team"))
        XCTAssertEqual(issue(r, file: "command line", field: "--team-id")?.fatal, true, "\(r.issues)")
    }

    // MARK: .app bundles

    func testBuiltAppBundleWithPlugIns() throws {
        let r = ProjectImporter.importApp(at: iosFixtures + "/bundle/MyApp.app")
        XCTAssertEqual(r.issues, [])
        XCTAssertEqual(r.layout, .appBundle)
        let expected = AppManifest(
            bundleID: "com.mycompany.myapp", teamID: "ABCDE12345", name: "My App", urlSchemes: ["deeplinkmyapp"],
            associatedDomains: ["applinks:example.com"], appGroups: ["group.com.mycompany.myapp"],
            extensions: [
                ExtensionManifest(
                    bundleID: "com.mycompany.myapp.share", point: "com.apple.share-services", name: "Send to My App",
                    appGroups: ["group.com.mycompany.myapp"],
                    activationRule: [
                        "NSExtensionActivationSupportsWebURLWithMaxCount": 1, "NSExtensionActivationSupportsText": true,
                    ])
            ], file: "MyApp.app")
        XCTAssertEqual(r.manifest, expected)
        XCTAssertEqual(
            r.files.map(\.path),
            [
                "Info.plist", "archived-expanded-entitlements.xcent", "PlugIns/Share.appex/Info.plist",
                "PlugIns/Share.appex/archived-expanded-entitlements.xcent",
            ])
        // Plist integers and booleans become JSON numbers and booleans.
        XCTAssertEqual(
            r.manifestJSON?["extensions"]?.arrayValue?.first?["activationRule"]?.compactText,
            #"{"NSExtensionActivationSupportsWebURLWithMaxCount":1,"NSExtensionActivationSupportsText":true}"#)
    }

    func testBinaryPlistsInABuiltBundle() throws {
        let s = ImportScratch()
        s.copy(fixture: "bundle/MyApp.app", to: "MyApp.app")
        // Built bundles carry binary plists: convert every plist of the copy.
        for rel in [
            "MyApp.app/Info.plist", "MyApp.app/archived-expanded-entitlements.xcent", "MyApp.app/PlugIns/Share.appex/Info.plist",
            "MyApp.app/PlugIns/Share.appex/archived-expanded-entitlements.xcent",
        ] {
            let url = URL(fileURLWithPath: s.path + "/" + rel)
            let value = try PropertyListSerialization.propertyList(from: try Data(contentsOf: url), options: [], format: nil)
            let binary = try PropertyListSerialization.data(fromPropertyList: value, format: .binary, options: 0)
            XCTAssertTrue(binary.starts(with: Array("bplist00".utf8)))
            try binary.write(to: url)
        }
        let binary = ProjectImporter.importApp(at: s.path + "/MyApp.app")
        let xml = ProjectImporter.importApp(at: iosFixtures + "/bundle/MyApp.app")
        XCTAssertEqual(binary.issues, [])
        XCTAssertNotNil(binary.manifest)
        XCTAssertEqual(binary.manifest, xml.manifest)
    }

    func testBundleWithoutEntitlementsAndAnExtensionWithoutNSExtension() throws {
        let s = ImportScratch()
        s.write(
            "Thing.app/Info.plist",
            plist("<key>CFBundleIdentifier</key><string>com.example.thing</string>"))
        s.write("Thing.app/PlugIns/Widget.appex/Info.plist", plist("<key>CFBundleIdentifier</key><string>com.example.thing.w</string>"))
        let r = ProjectImporter.importApp(at: s.path + "/Thing.app/")
        XCTAssertEqual(fatal(r), [])
        XCTAssertEqual(r.manifest?.bundleID, "com.example.thing")
        XCTAssertEqual(r.manifest?.file, "Thing.app")
        XCTAssertEqual(r.manifest?.extensions, [])
        XCTAssertEqual(issue(r, file: "PlugIns/Widget.appex/Info.plist", field: "NSExtension")?.fatal, false)
    }

    // MARK: errors and notes

    func testMalformedPlistNamesTheFileAndLine() throws {
        let r = ProjectImporter.importApp(at: iosFixtures + "/malformed")
        XCTAssertNil(r.manifestJSON)
        let e = try XCTUnwrap(fatal(r).first, "\(r.issues)")
        XCTAssertEqual(e.file, "MyApp/Info.plist")
        XCTAssertEqual(e.field, "")
        XCTAssertTrue(e.message.hasPrefix("malformed property list: line 13: "), e.message)
        XCTAssertEqual(e.description, "MyApp/Info.plist: \(e.message)")
    }

    func testUnknownKeysAreNotesNotErrors() throws {
        let s = ImportScratch()
        s.write(
            "P/App/Info.plist",
            plist(
                """
                <key>CFBundleIdentifier</key><string>com.example.app</string>
                <key>NSExtensionActivationRule</key><string>TRUEPREDICATE</string>
                <key>SomethingElse</key><string>ignored silently</string>
                """))
        s.write(
            "P/App/App.entitlements",
            plist(
                """
                <key>com.apple.security.application-groups</key><array><string>group.example</string></array>
                <key>aps-environment</key><string>development</string>
                <key>com.example.custom-entitlement</key><true/>
                """))
        s.write(
            "P/Share/Info.plist",
            plist(
                """
                <key>CFBundleIdentifier</key><string>com.example.app.share</string>
                <key>NSExtension</key>
                <dict>
                  <key>NSExtensionPointIdentifier</key><string>com.apple.share-services</string>
                  <key>NSExtensionFancyNewThing</key><string>?</string>
                  <key>NSExtensionAttributes</key>
                  <dict>
                    <key>NSExtensionActivationRule</key>
                    <dict>
                      <key>NSExtensionActivationSupportsImageWithMaxCount</key><integer>3</integer>
                      <key>NSExtensionActivationSupportsHolograms</key><true/>
                    </dict>
                    <key>NSExtensionMysteryAttribute</key><string>x</string>
                    <key>IntentsSupported</key><array/>
                  </dict>
                </dict>
                """))
        let r = ProjectImporter.importApp(at: s.path + "/P")
        XCTAssertEqual(fatal(r), [], "\(r.issues)")
        XCTAssertEqual(r.manifest?.extensions.count, 1)
        let expectedNotes: [(String, String)] = [
            ("App/Info.plist", "NSExtensionActivationRule"),
            ("App/App.entitlements", "com.example.custom-entitlement"),
            ("Share/Info.plist", "NSExtension.NSExtensionFancyNewThing"),
            ("Share/Info.plist", "NSExtension.NSExtensionAttributes.NSExtensionMysteryAttribute"),
            // Found by ManifestDecoder's rule validation, renamed to the plist key path.
            ("Share/Info.plist", "NSExtension.NSExtensionAttributes.NSExtensionActivationRule.NSExtensionActivationSupportsHolograms"),
            // (its entitlements give it no App Group: no share can be stored for it)
            ("Share/Info.plist", "NSExtension.appGroups"),
        ]
        for (file, field) in expectedNotes {
            XCTAssertEqual(issue(r, file: file, field: field)?.fatal, false, "no note for \(file) \(field): \(r.issues)")
        }
        XCTAssertEqual(notes(r).count, expectedNotes.count, "\(r.issues)")
    }

    func testWrongValuesAreErrorsNamingFileAndKeyPath() throws {
        let s = ImportScratch()
        s.write(
            "P/App/Info.plist",
            plist(
                """
                <key>CFBundleIdentifier</key><string>com.example.app</string>
                <key>CFBundleURLTypes</key>
                <array>
                  <dict><key>CFBundleURLSchemes</key><array><string>good</string><string>1abc</string></array></dict>
                  <dict><key>CFBundleURLSchemes</key><string>notalist</string></dict>
                </array>
                """))
        s.write(
            "P/App/App.entitlements",
            plist("<key>com.apple.developer.associated-domains</key><array><string>example.com</string></array>"))
        s.write(
            "P/Share/Info.plist",
            plist(
                """
                <key>CFBundleIdentifier</key><string>com.example.app.share</string>
                <key>NSExtension</key>
                <dict>
                  <key>NSExtensionAttributes</key>
                  <dict><key>NSExtensionActivationRule</key><integer>7</integer></dict>
                </dict>
                """))
        let r = ProjectImporter.importApp(at: s.path + "/P")
        XCTAssertNil(r.manifestJSON)
        let expectedErrors: [(String, String)] = [
            ("App/Info.plist", "CFBundleURLTypes[0].CFBundleURLSchemes[1]"),  // invalid scheme (ManifestDecoder)
            ("App/Info.plist", "CFBundleURLTypes[1].CFBundleURLSchemes"),  // not an array
            ("App/App.entitlements", "com.apple.developer.associated-domains[0]"),  // not SERVICE:HOST
            ("Share/Info.plist", "NSExtension.NSExtensionPointIdentifier"),  // missing
            ("Share/Info.plist", "NSExtension.NSExtensionAttributes.NSExtensionActivationRule"),  // an integer
        ]
        for (file, field) in expectedErrors {
            XCTAssertEqual(issue(r, file: file, field: field)?.fatal, true, "no error for \(file) \(field): \(r.issues)")
        }
        XCTAssertEqual(fatal(r).count, expectedErrors.count, "\(r.issues)")
    }

    func testUnresolvedValuesOtherThanBundleIDsAreSkippedWithNotes() throws {
        let s = ImportScratch()
        s.write(
            "P/App/Info.plist",
            plist(
                """
                <key>CFBundleIdentifier</key><string>com.example.$(PRODUCT_NAME:rfc1034identifier)</string>
                <key>CFBundleDisplayName</key><string>$(APP_DISPLAY_NAME)</string>
                <key>CFBundleName</key><string>$(PRODUCT_NAME)</string>
                <key>CFBundleURLTypes</key>
                <array><dict><key>CFBundleURLSchemes</key>
                  <array><string>$(CUSTOM_SCHEME)</string><string>${PRODUCT_BUNDLE_IDENTIFIER}</string></array>
                </dict></array>
                """))
        s.write(
            "P/App/App.entitlements",
            plist(
                """
                <key>com.apple.security.application-groups</key>
                <array><string>$(inherited)</string><string>group.$(PRODUCT_BUNDLE_IDENTIFIER)</string></array>
                """))
        let r = ProjectImporter.importApp(
            at: s.path + "/P",
            options: ImportOptions(variables: ["PRODUCT_NAME": "My App", "PRODUCT_BUNDLE_IDENTIFIER": "com.example.My-App"]))
        XCTAssertEqual(fatal(r), [], "\(r.issues)")
        let m = try XCTUnwrap(r.manifest)
        XCTAssertEqual(m.bundleID, "com.example.My-App")
        XCTAssertEqual(m.name, "My App", "CFBundleName after an unresolved CFBundleDisplayName")
        XCTAssertEqual(m.urlSchemes, ["com.example.My-App"])
        XCTAssertEqual(m.appGroups, ["group.com.example.My-App"])
        let display = try XCTUnwrap(issue(r, file: "App/Info.plist", field: "CFBundleDisplayName"))
        XCTAssertFalse(display.fatal)
        XCTAssertTrue(display.message.contains("unresolved build variable $(APP_DISPLAY_NAME) in CFBundleDisplayName"), display.message)
        XCTAssertTrue(display.message.contains("pass --set APP_DISPLAY_NAME=..."), display.message)
        XCTAssertEqual(issue(r, file: "App/Info.plist", field: "CFBundleURLTypes[0].CFBundleURLSchemes[0]")?.fatal, false)
        XCTAssertEqual(notes(r).count, 2, "\(r.issues)")
    }

    func testSeveralAppsNeedAChoice() throws {
        let s = ImportScratch()
        s.write("P/One/Info.plist", plist("<key>CFBundleIdentifier</key><string>com.example.one</string>"))
        s.write("P/Two/Info.plist", plist("<key>CFBundleIdentifier</key><string>com.example.two</string>"))
        let ext = { (id: String) in
            plist(
                """
                <key>CFBundleIdentifier</key><string>\(id)</string>
                <key>NSExtension</key><dict><key>NSExtensionPointIdentifier</key><string>com.apple.share-services</string></dict>
                """)
        }
        s.write("P/OneShare/Info.plist", ext("com.example.one.share"))
        s.write("P/TwoShare/Info.plist", ext("com.example.two.share"))
        s.write("P/OneTests/Info.plist", plist("<key>CFBundleIdentifier</key><string>com.example.one.tests</string>"))
        s.write("P/build/Debug/Other.app/Info.plist", plist("<key>CFBundleIdentifier</key><string>com.example.built</string>"))
        s.write("P/Kit/Info.plist", plist("<key>CFBundleIdentifier</key><string>com.example.kit</string><key>CFBundlePackageType</key><string>FMWK</string>"))
        s.write("P/Watch/Info.plist", plist("<key>CFBundleIdentifier</key><string>com.example.one.watch</string><key>WKApplication</key><true/>"))

        let ambiguous = ProjectImporter.importApp(at: s.path + "/P")
        let e = try XCTUnwrap(fatal(ambiguous).first)
        XCTAssertEqual(e.file, "P")
        XCTAssertTrue(e.message.contains("several app Info.plist files: One/Info.plist, Two/Info.plist"), e.message)
        XCTAssertTrue(e.message.contains("--app"), e.message)

        let two = ProjectImporter.importApp(at: s.path + "/P", options: ImportOptions(app: "Two"))
        XCTAssertEqual(fatal(two), [], "\(two.issues)")
        XCTAssertEqual(two.manifest?.bundleID, "com.example.two")
        XCTAssertEqual(two.manifest?.extensions.map(\.bundleID), ["com.example.two.share"])
        XCTAssertEqual(
            two.files.filter { $0.role == .skipped }.map(\.path).sorted(),
            ["Kit/Info.plist", "One/Info.plist", "OneShare/Info.plist", "Watch/Info.plist"])

        let none = ProjectImporter.importApp(at: s.path + "/P", options: ImportOptions(app: "Three"))
        XCTAssertTrue(fatal(none).first?.message.contains("--app 'Three' matches none") ?? false, "\(none.issues)")
    }

    func testJSONManifestsAreValidatedAsTheyAre() throws {
        let s = ImportScratch()
        s.write("m.json", #"{"bundleID": "com.example.json", "urlSchemes": ["jsonapp"], "token": "t"}"#)
        let r = ProjectImporter.importApp(at: s.path + "/m.json", options: ImportOptions(teamID: "ABCDE12345"))
        XCTAssertEqual(r.layout, .jsonManifest)
        XCTAssertEqual(r.issues, [])
        XCTAssertEqual(r.manifest?.teamID, "ABCDE12345")
        XCTAssertEqual(r.manifest?.token, "t")
        XCTAssertEqual(r.manifest?.file, "m.json")
        s.write("bad.json", #"{"bundleID": "com.example.json", "urlSchemes": "x"}"#)
        let bad = ProjectImporter.importApp(at: s.path + "/bad.json")
        XCTAssertEqual(bad.issues.map(\.file), ["bad.json"])
        XCTAssertEqual(bad.issues.map(\.field), ["urlSchemes"])
        let missing = ProjectImporter.importApp(at: s.path + "/nope")
        XCTAssertTrue(missing.issues.first?.message.contains("does not exist") ?? false)
    }

    // MARK: STATE/apps folders

    func testAppsDirectoryFoldersAreImportedWithTheirSettings() throws {
        let s = ImportScratch()
        let apps = s.path + "/apps"
        s.copy(fixture: "bundle/MyApp.app", to: "apps/MyApp.app")
        try FileManager.default.createSymbolicLink(atPath: apps + "/reazy", withDestinationPath: iosFixtures + "/seed002-reazy")
        s.copy(fixture: "seed003-universallinks", to: "apps/universal")
        s.write("apps/universal/sharebroker-import.json", #"{"teamID": "KFCNEC27GU", "manifest": {"token": "s3cret"}, "what": 1}"#)
        s.copy(fixture: "malformed", to: "apps/zz-broken")
        s.write("apps/a-plain.json", #"{"bundleID": "com.example.plain"}"#)
        s.write("apps/.hidden/Info.plist", plist("<key>CFBundleIdentifier</key><string>com.example.hidden</string>"))

        let entries = ProjectImporter.importDirectories(inAppsDirectory: apps)
        XCTAssertEqual(entries.map(\.name), ["MyApp.app", "reazy", "universal", "zz-broken"])
        XCTAssertEqual(entries.map { $0.result.manifest?.file }, ["MyApp.app", "reazy", "universal", nil])
        let universal = entries[2].result
        XCTAssertEqual(universal.manifest?.teamID, "KFCNEC27GU")
        XCTAssertEqual(universal.manifest?.token, "s3cret")
        XCTAssertEqual(universal.issues.map(\.file), ["universal/sharebroker-import.json"])
        XCTAssertEqual(universal.issues.map(\.field), ["what"])
        XCTAssertEqual(entries[3].result.issues.filter(\.fatal).map(\.file), ["zz-broken/MyApp/Info.plist"])
        XCTAssertEqual(ProjectImporter.manifestFiles(inAppsDirectory: apps).map(\.name), entries.map(\.name))

        // Together with the JSON files, in name order.
        let plain = (name: "a-plain.json", bytes: Array(#"{"bundleID": "com.example.plain"}"#.utf8))
        let registry = AppRegistry(files: [plain], imported: entries)
        XCTAssertEqual(
            registry.apps.map(\.bundleID),
            ["com.mycompany.myapp", "com.example.plain", "com.example.reazy", "com.razeware.UniveralLinksTutorial"])
        XCTAssertEqual(registry.issues.filter(\.fatal).map(\.file), ["zz-broken/MyApp/Info.plist"])
        XCTAssertNotNil(registry.appExtension("com.example.reazy.share"))
        // Without imported folders it is the plain JSON registry.
        XCTAssertEqual(AppRegistry(files: [plain], imported: []).apps, AppRegistry(files: [plain]).apps)
    }
}
