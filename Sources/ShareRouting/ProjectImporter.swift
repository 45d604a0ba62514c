// Imports an app manifest from real iOS project files: an .app bundle, an Xcode project folder or one
// Info.plist (+ .entitlements, extension bundles/folders), mapped to the contract's manifest JSON and
// validated by ManifestDecoder, with every problem named by the plist file and key it came from.

import Foundation
import ShareProtocol
import ShareSystem

/// What an import may use besides the files themselves.
public struct ImportOptions: Sendable {
    /// The team ID for universal links (`--team-id`); beats every team ID found in the files.
    public var teamID: String?
    /// Build settings for `$(NAME)` references (`--set NAME=VALUE`). A key `TARGET:NAME` sets NAME for
    /// one target only; TARGET is the folder holding that target's Info.plist (for bundles: the
    /// `.app`/`.appex` name without its extension).
    public var variables: [String: String]
    /// Which app to take when a project folder holds several app Info.plists: the folder (relative
    /// path or name) or the Info.plist's relative path.
    public var app: String?
    /// The `file` the decoded manifest carries (default: the last path component of the imported path).
    public var manifestFile: String?
    /// Extra manifest keys (e.g. `token`, `launch`) set on the imported app, replacing imported ones.
    public var overrides: JSONObject
    /// Where the options came from, for issues about them (`command line` or a settings file name).
    public var origin: String
    /// Asked before each file is read, with its path: a reason not to read it (the broker's: a
    /// file another user owns or may write), which becomes a fatal issue; nil reads it.
    public var fileCheck: (@Sendable (String) -> String?)? = nil
    /// Test seam: the errno a read, a listing or a `stat` of a path fails with instead of being
    /// made (the broker's `Configuration.inputReadFaults`); nil reads it.
    public var readFault: (@Sendable (String) -> Int32?)? = nil

    /// Creates options.
    public init(
        teamID: String? = nil, variables: [String: String] = [:], app: String? = nil, manifestFile: String? = nil,
        overrides: JSONObject = [:], origin: String = "command line"
    ) {
        self.teamID = teamID
        self.variables = variables
        self.app = app
        self.manifestFile = manifestFile
        self.overrides = overrides
        self.origin = origin
    }

    var onCommandLine: Bool { origin == "command line" }
    var teamIDField: String { onCommandLine ? "--team-id" : "teamID" }
    func overrideField(_ key: String) -> String { onCommandLine ? key : "manifest.\(key)" }
}

/// How the imported path was laid out.
public enum ImportLayout: String, Sendable, Equatable {
    /// A JSON manifest file, taken as it is.
    case jsonManifest
    /// A single Info.plist (with `.entitlements` files next to it).
    case infoPlist
    /// A built bundle: `X.app/Info.plist`, `PlugIns/*.appex` (also macOS `Contents/`).
    case appBundle
    /// An Xcode project folder: target folders holding Info.plist and `.entitlements` files.
    case projectFolder
    /// Nothing could be read.
    case unknown
}

/// A file the import read (or skipped), relative to the imported root.
public struct ImportedFile: Sendable, Equatable, CustomStringConvertible {
    /// What the file was used as.
    public enum Role: String, Sendable, Equatable {
        /// A JSON manifest.
        case manifest
        /// The app's Info.plist.
        case app
        /// The app's entitlements.
        case appEntitlements = "app entitlements"
        /// An extension's Info.plist.
        case appExtension = "extension"
        /// An extension's entitlements.
        case extensionEntitlements = "extension entitlements"
        /// `sharebroker-import.json`.
        case settings
        /// Found but not used (test bundle, framework, watch app, another app, ...).
        case skipped
    }

    /// Path relative to the imported root.
    public var path: String
    /// Its role.
    public var role: Role
    /// Why it was skipped, or which target it belongs to.
    public var detail: String?

    /// Creates an entry.
    public init(path: String, role: Role, detail: String? = nil) {
        self.path = path
        self.role = role
        self.detail = detail
    }

    /// "role: path (detail)".
    public var description: String { "\(role.rawValue): \(path)" + (detail.map { " (\($0))" } ?? "") }
}

/// A read or directory listing of an import that failed with a system error.
public struct ImportReadError: Sendable, Equatable {
    /// The path that could not be read.
    public var path: String
    /// The errno it failed with.
    public var errno: Int32

    /// Creates one.
    public init(path: String, errno: Int32) {
        self.path = path
        self.errno = errno
    }
}

/// The outcome of an import.
public struct ImportResult: Sendable {
    /// The manifest in the contract's JSON shape, ready to write as `STATE/apps/NAME.json` or to
    /// decode with `ManifestDecoder`; nil when a fatal issue was found.
    public var manifestJSON: JSONValue?
    /// Every problem and note; `file` is relative to the imported root, `field` the plist key path
    /// (e.g. `NSExtension.NSExtensionAttributes.NSExtensionActivationRule`).
    public var issues: [ManifestIssue]
    /// `manifestJSON` decoded (what `apps.list` shows for it), nil when a fatal issue was found.
    public var manifest: AppManifest?
    /// The files read or skipped.
    public var files: [ImportedFile]
    /// How the path was laid out.
    public var layout: ImportLayout
    /// The reads and directory listings that failed with a system error, with its errno (a
    /// caller tells apart the failures that may pass, e.g. EIO, from a file the user took away).
    public var readErrors: [ImportReadError] = []

    /// Creates a result (an import builds these; this is for callers that fail before importing).
    public init(
        manifestJSON: JSONValue? = nil, issues: [ManifestIssue] = [], manifest: AppManifest? = nil,
        files: [ImportedFile] = [], layout: ImportLayout = .unknown
    ) {
        self.manifestJSON = manifestJSON
        self.issues = issues
        self.manifest = manifest
        self.files = files
        self.layout = layout
    }

    /// True when the import failed (see `issues`).
    public var hasFatalIssues: Bool { issues.contains(where: \.fatal) }
}

/// Builds app manifests from iOS project files.
///
/// Layouts (`importApp(at:)`):
/// - a `.json` file: a manifest, validated (and given `teamID`/`overrides` when set);
/// - a directory ending in `.app` (or holding `PlugIns/`/`Extensions/` next to `Info.plist`, or
///   `Contents/Info.plist`): a built bundle. The app is `Info.plist`, its entitlements the
///   `*.entitlements`/`*.xcent` file at the top, extensions `PlugIns/*.appex` and `Extensions/*.appex`;
/// - any other directory: an Xcode project folder, searched (8 levels; skipping hidden folders,
///   `build`, `DerivedData`, `Pods`, `Carthage`, `node_modules`, `SourcePackages`, `*.xcodeproj`,
///   `*.xcassets`, `*.lproj`, `*.framework`, `*.bundle`, built `*.app`/`*.appex`, and folders ending in
///   `Tests`) for files named `Info.plist`. One with `NSExtension` is an extension target; one
///   without is an app candidate unless its `CFBundlePackageType` is `BNDL`/`FMWK` or it is a watch
///   app or App Clip. Exactly one app candidate must remain, else `options.app` must name it (the
///   error lists the candidates). Each target's entitlements are the `.entitlements` file in its
///   Info.plist's folder (`TARGET.entitlements` first when there are several); an app without one
///   there uses the only entitlements file outside extension folders, if there is exactly one.
///   With several apps, only extensions whose bundle ID starts with the chosen app's are kept;
/// - any other file: one app Info.plist, with the `.entitlements` file beside it.
///
/// Mapping: `CFBundleIdentifier` → `bundleID` (missing: `$(PRODUCT_BUNDLE_IDENTIFIER)`, as Xcode
/// fills it), `CFBundleDisplayName` (else `CFBundleName`) → `name`,
/// `CFBundleURLTypes[].CFBundleURLSchemes[]` → `urlSchemes`, entitlements
/// `com.apple.security.application-groups` → `appGroups`, `com.apple.developer.associated-domains`
/// → `associatedDomains` (both also accepted in Info.plist, with a note), `NSExtension.
/// NSExtensionPointIdentifier` → `point`, `NSExtension.NSExtensionAttributes.NSExtensionActivationRule`
/// → `activationRule` (dictionary or predicate string, as written). Team ID: `options.teamID`, else
/// `DEVELOPMENT_TEAM` / `AppIdentifierPrefix` / `TeamIdentifierPrefix` from the variables, else the
/// `com.apple.developer.team-identifier` entitlement, else the prefix of `application-identifier`.
public enum ProjectImporter {
    /// Imports the app at `path` (see the type's documentation for layouts and mapping).
    public static func importApp(at path: String, options: ImportOptions = ImportOptions()) -> ImportResult {
        let run = ImportRun(path: path, options: options)
        return run.run()
    }

    /// Directory names never searched in a project folder.
    static let skippedFolderNames: Set<String> = [
        "build", "Build", "DerivedData", "Pods", "Carthage", "node_modules", "SourcePackages", "xcuserdata", "fastlane",
    ]
    /// Directory suffixes never searched in a project folder.
    static let skippedFolderSuffixes = [
        ".xcodeproj", ".xcworkspace", ".xcassets", ".lproj", ".framework", ".xcframework", ".bundle", ".playground",
        ".app", ".appex", ".dSYM", ".docc", ".swiftpm", ".xctest",
    ]

    static let usedNSExtensionKeys: Set<String> = ["NSExtensionPointIdentifier", "NSExtensionAttributes"]
    static let knownNSExtensionKeys: Set<String> = [
        "NSExtensionPrincipalClass", "NSExtensionMainStoryboard", "NSExtensionActionWantsFullScreenPresentation",
        "NSExtensionServiceAllowsFinderPreviewItem", "NSExtensionServiceAllowsTouchBarItem", "NSExtensionPointVersion",
        "NSExtensionOverridesHostUIAppearance", "NSExtensionContextClass", "NSExtensionViewControllerClass",
        "NSExtensionFileProviderSupportsPickingFolders",
    ]
    static let knownNSExtensionAttributes: Set<String> = [
        "NSExtensionActivationRule", "NSExtensionServiceRoleType", "NSExtensionJavaScriptPreprocessingFile",
        "NSExtensionServiceAllowsFinderPreviewItem", "NSExtensionServiceAllowsTouchBarItem",
        "NSExtensionServiceFinderPreviewIconName", "NSExtensionServiceFinderPreviewLabel",
        "NSExtensionServiceTouchBarBezelColorName", "NSExtensionServiceTouchBarIconName",
        "NSExtensionServiceTouchBarLabel", "NSExtensionPointVersion", "NSExtensionFileProviderDocumentGroup",
        "NSExtensionFileProviderSupportsEnumeration", "NSExtensionFileProviderActions",
    ]
    static let groupsKey = "com.apple.security.application-groups"
    static let domainsKey = "com.apple.developer.associated-domains"
    static let teamKey = "com.apple.developer.team-identifier"
    static let appIdentifierKeys = ["application-identifier", "com.apple.application-identifier"]
    /// Entitlements sharebroker knows but does not model (ignored without a note).
    static let knownEntitlements: Set<String> = [
        "aps-environment", "com.apple.developer.aps-environment", "keychain-access-groups", "get-task-allow",
        "beta-reports-active", "com.apple.developer.icloud-container-identifiers", "com.apple.developer.icloud-services",
        "com.apple.developer.icloud-container-environment", "com.apple.developer.ubiquity-container-identifiers",
        "com.apple.developer.ubiquity-kvstore-identifier", "com.apple.security.app-sandbox",
        "com.apple.security.network.client", "com.apple.security.network.server",
        "com.apple.security.files.user-selected.read-only", "com.apple.security.files.user-selected.read-write",
        "com.apple.developer.applesignin", "com.apple.developer.in-app-payments", "com.apple.developer.healthkit",
        "com.apple.developer.healthkit.access", "com.apple.developer.homekit", "com.apple.developer.siri",
        "com.apple.developer.networking.wifi-info", "com.apple.developer.default-data-protection",
        "com.apple.developer.usernotifications.time-sensitive", "com.apple.developer.usernotifications.communication",
        "com.apple.developer.game-center", "com.apple.developer.nfc.readersession.formats",
        "com.apple.developer.pass-type-identifiers", "com.apple.developer.associated-appclip-app-identifiers",
        "com.apple.developer.parent-application-identifiers", "com.apple.developer.on-demand-install-capable",
        "com.apple.developer.kernel.increased-memory-limit", "com.apple.developer.networking.networkextension",
        "com.apple.developer.authentication-services.autofill-credential-provider",
    ]
}

/// One target's files: its Info.plist (parsed) and entitlements.
struct TargetFiles {
    var plist: String
    var info: PlistDictionary
    var entitlements: String?
    var target: String
}

/// The state of one import.
final class ImportRun {
    let root: String
    let rootLabel: String
    let options: ImportOptions
    var issues: [ManifestIssue] = []
    var files: [ImportedFile] = []
    var layout: ImportLayout = .unknown
    var readErrors: [ImportReadError] = []
    /// Manifest field path → (file, plist key path), for naming decoder issues.
    var provenance: [(field: String, file: String, key: String)] = []
    var fm: FileManager { FileManager.default }

    init(path: String, options: ImportOptions) {
        var p = path
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        root = p
        let last = (p as NSString).lastPathComponent
        rootLabel = last.isEmpty ? p : last
        self.options = options
    }

    // MARK: issues

    func fail(_ file: String, _ field: String, _ message: String) {
        issues.append(ManifestIssue(file: file, field: field, message: message, fatal: true))
    }

    func note(_ file: String, _ field: String, _ message: String) {
        issues.append(ManifestIssue(file: file, field: field, message: message, fatal: false))
    }

    func trace(_ field: String, _ file: String, _ key: String) { provenance.append((field, file, key)) }

    func finish(_ json: JSONValue? = nil, manifest: AppManifest? = nil) -> ImportResult {
        let fatal = issues.contains(where: \.fatal)
        var result = ImportResult(
            manifestJSON: fatal ? nil : json, issues: issues, manifest: fatal ? nil : manifest, files: files,
            layout: layout)
        result.readErrors = readErrors
        return result
    }

    // MARK: file system

    func full(_ rel: String) -> String { rel.isEmpty ? root : root + "/" + rel }

    func isDirectory(_ path: String) -> Bool {
        var dir: ObjCBool = false
        return fm.fileExists(atPath: path, isDirectory: &dir) && dir.boolValue
    }

    func exists(_ path: String) -> Bool { fm.fileExists(atPath: path) }

    /// Entries of a directory, sorted; symlinks are reported with `isLink`. A directory that
    /// cannot be listed has none (its failure is kept in `readErrors`, unless it is not there).
    func entries(_ path: String) -> [(name: String, isDirectory: Bool, isLink: Bool)] {
        var names: [String]? = nil
        if let code = options.readFault?(path) {
            readErrors.append(ImportReadError(path: path, errno: code))
        } else {
            names = FileIO.listDirectory(path)
            let code = errno
            if names == nil && code != ENOENT && code != ENOTDIR { readErrors.append(ImportReadError(path: path, errno: code)) }
        }
        guard let names else { return [] }
        return names.map { name in
            let p = path + "/" + name
            // (an entry whose stat fails for another reason than being gone counts as a failed
            // read: an extension folder that cannot be looked at is not taken as missing)
            switch ProjectImporter.kind(of: p, followLink: false, readFault: options.readFault) {
            case .failure(let error):
                let e = error.errno
                if e != ENOENT && e != ENOTDIR { readErrors.append(ImportReadError(path: p, errno: e)) }
                return (name, false, false)
            case .success(let mode):
                let isLink = mode == S_IFLNK
                return (name, isLink ? isDirectory(p) : mode == S_IFDIR, isLink)
            }
        }
    }

    func readBytes(_ path: String, file: String) -> [UInt8]? {
        if let why = options.fileCheck?(path) {
            fail(file, "", why)
            return nil
        }
        switch ProjectImporter.readFile(path, limit: 8 * 1024 * 1024, fault: options.readFault) {
        case .success(let bytes): return bytes
        case .failure(let error):
            if error.errno == EFBIG {
                fail(file, "", "file larger than 8 MiB")
            } else {
                readErrors.append(ImportReadError(path: path, errno: error.errno))
                fail(file, "", "cannot read: \(String(cString: strerror(error.errno)))")
            }
            return nil
        }
    }

    /// Reads a plist whose top level must be a dictionary; problems are fatal issues naming `rel`.
    func readPlist(_ rel: String, label: String? = nil) -> PlistDictionary? {
        let file = label ?? rel
        guard let bytes = readBytes(full(rel), file: file) else { return nil }
        let value: PlistValue
        do { value = try PropertyList.parse(bytes).value } catch {
            fail(file, "", "malformed property list: \(error)")
            return nil
        }
        guard case .dict(let d) = value else {
            fail(file, "", "expected a dictionary at the top level, got \(value.typeName)")
            return nil
        }
        return d
    }

    static func stripExtension(_ name: String) -> String { (name as NSString).deletingPathExtension }
    static func parent(_ rel: String) -> String {
        guard let slash = rel.lastIndex(of: "/") else { return "" }
        return slash == rel.startIndex ? "/" : String(rel[..<slash])
    }
    static func base(_ rel: String) -> String {
        guard let slash = rel.lastIndex(of: "/") else { return rel }
        return String(rel[rel.index(after: slash)...])
    }
    static func isEntitlementsFile(_ name: String) -> Bool {
        let l = name.lowercased()
        return l.hasSuffix(".entitlements") || l.hasSuffix(".xcent")
    }

    /// Picks one entitlements file among `candidates` (relative paths), preferring `TARGET.entitlements`.
    func pickEntitlements(_ candidates: [String], target: String) -> String? {
        guard let first = candidates.first else { return nil }
        if candidates.count == 1 { return first }
        let chosen =
            candidates.first { ImportRun.stripExtension(ImportRun.base($0)) == target }
            ?? candidates.first { !ImportRun.base($0).lowercased().contains("debug") } ?? first
        note(
            chosen, "",
            "several entitlements files for target '\(target)': \(candidates.joined(separator: ", ")); using \(chosen)")
        return chosen
    }

    // MARK: layouts

    func run() -> ImportResult {
        guard exists(root) else {
            fail(rootLabel, "", "not found (\(root) does not exist)")
            return finish()
        }
        if isDirectory(root) {
            if root.hasSuffix(".appex") {
                fail(rootLabel, "", "this is an app extension bundle; import its containing .app (or the project folder)")
                return finish()
            }
            if root.hasSuffix(".app") || exists(full("Contents/Info.plist"))
                || (exists(full("Info.plist")) && (isDirectory(full("PlugIns")) || isDirectory(full("Extensions"))))
            {
                layout = .appBundle
                return importBundle()
            }
            layout = .projectFolder
            return importProject()
        }
        if root.lowercased().hasSuffix(".json") {
            layout = .jsonManifest
            return importJSON()
        }
        layout = .infoPlist
        return importSinglePlist()
    }

    func importJSON() -> ImportResult {
        files.append(ImportedFile(path: rootLabel, role: .manifest))
        guard let bytes = readBytes(root, file: rootLabel) else { return finish() }
        let value: JSONValue
        do { value = try JSONParser.parse(JSONParser.withoutByteOrderMark(bytes)) } catch {
            fail(rootLabel, "", "invalid JSON: \(error)")
            return finish()
        }
        guard case .object(var obj) = value else {
            fail(rootLabel, "", "a manifest must be a JSON object, got \(value.typeName)")
            return finish()
        }
        if let team = options.teamID { obj["teamID"] = .string(team) }
        for m in options.overrides.members { obj[m.key] = m.value }
        let (manifest, problems) = ManifestDecoder.decode(.object(obj), file: options.manifestFile ?? rootLabel)
        issues.append(
            contentsOf: problems.map {
                var p = $0
                p.file = rootLabel
                if p.field == "teamID", options.teamID != nil { p.file = options.origin; p.field = options.teamIDField }
                return p
            })
        return finish(.object(obj), manifest: manifest)
    }

    func importSinglePlist() -> ImportResult {
        let dir = ImportRun.parent(root)
        let name = rootLabel
        guard let info = readPlist("", label: name) else {
            files.append(ImportedFile(path: name, role: .app))
            return finish()
        }
        if info["NSExtension"] != nil {
            fail(name, "NSExtension", "this Info.plist describes an app extension; import the app's Info.plist, its .app or the project folder")
            return finish()
        }
        files.append(ImportedFile(path: name, role: .app))
        let folder = dir.isEmpty ? "." : dir
        let target = ImportRun.base(dir.isEmpty ? fm.currentDirectoryPath : dir)
        let ents = entries(folder).filter { !$0.isDirectory && ImportRun.isEntitlementsFile($0.name) }.map(\.name)
        let chosen = pickEntitlements(ents, target: target)
        // Files beside the plist are read relative to its folder.
        let app = TargetFiles(plist: name, info: info, entitlements: chosen, target: target)
        return build(app: app, extensions: [], entitlementsBase: folder)
    }

    func importBundle() -> ImportResult {
        let prefix = exists(full("Contents/Info.plist")) ? "Contents/" : ""
        let appPlist = prefix + "Info.plist"
        let appTarget = ImportRun.stripExtension(rootLabel)
        guard exists(full(appPlist)) else {
            fail(rootLabel, "Info.plist", "the bundle has no Info.plist")
            return finish()
        }
        files.append(ImportedFile(path: appPlist, role: .app, detail: appTarget))
        guard let info = readPlist(appPlist) else { return finish() }
        if info["NSExtension"] != nil {
            fail(appPlist, "NSExtension", "this bundle is an app extension; import its containing .app")
            return finish()
        }
        let topDir = prefix.isEmpty ? "" : String(prefix.dropLast())
        let appEnts = pickEntitlements(
            entries(full(topDir)).filter { !$0.isDirectory && ImportRun.isEntitlementsFile($0.name) }.map { prefix + $0.name },
            target: appTarget)
        var exts: [TargetFiles] = []
        for folder in ["PlugIns", "Extensions"] {
            for e in entries(full(prefix + folder)) where e.isDirectory && e.name.hasSuffix(".appex") {
                var extPrefix = prefix + folder + "/" + e.name + "/"
                if exists(full(extPrefix + "Contents/Info.plist")) { extPrefix += "Contents/" }
                let plist = extPrefix + "Info.plist"
                let target = ImportRun.stripExtension(e.name)
                guard exists(full(plist)) else {
                    note(prefix + folder + "/" + e.name, "", "no Info.plist in this extension bundle; skipped")
                    continue
                }
                guard let extInfo = readPlist(plist) else { continue }
                guard extInfo["NSExtension"] != nil else {
                    note(plist, "NSExtension", "no NSExtension dictionary: not an app extension; skipped")
                    files.append(ImportedFile(path: plist, role: .skipped, detail: "no NSExtension"))
                    continue
                }
                let ents = pickEntitlements(
                    entries(full(String(extPrefix.dropLast()))).filter { !$0.isDirectory && ImportRun.isEntitlementsFile($0.name) }
                        .map { extPrefix + $0.name },
                    target: target)
                exts.append(TargetFiles(plist: plist, info: extInfo, entitlements: ents, target: target))
            }
        }
        return build(
            app: TargetFiles(plist: appPlist, info: info, entitlements: appEnts, target: appTarget), extensions: exts,
            entitlementsBase: nil)
    }

    func skipFolder(_ name: String) -> Bool {
        name.hasPrefix(".") || ProjectImporter.skippedFolderNames.contains(name)
            || ProjectImporter.skippedFolderSuffixes.contains { name.hasSuffix($0) } || name.hasSuffix("Tests")
    }

    func importProject() -> ImportResult {
        var plists: [String] = []
        var entitlements: [String] = []
        func walk(_ rel: String, depth: Int) {
            for e in entries(full(rel)) {
                let path = rel.isEmpty ? e.name : rel + "/" + e.name
                if e.isDirectory {
                    if e.isLink || skipFolder(e.name) || depth >= 8 { continue }
                    walk(path, depth: depth + 1)
                } else if e.name.lowercased() == "info.plist" {
                    plists.append(path)
                } else if ImportRun.isEntitlementsFile(e.name) {
                    entitlements.append(path)
                }
            }
        }
        walk("", depth: 0)
        func targetName(_ plist: String) -> String {
            let dir = ImportRun.parent(plist)
            return dir.isEmpty ? rootLabel : ImportRun.base(dir)
        }
        var apps: [TargetFiles] = []
        var exts: [TargetFiles] = []
        for plist in plists {
            guard let info = readPlist(plist) else { continue }
            let target = targetName(plist)
            if info["NSExtension"] != nil {
                exts.append(TargetFiles(plist: plist, info: info, entitlements: nil, target: target))
                continue
            }
            let vars = BuildVariables(options.variables, target: target)
            let packageType = info["CFBundlePackageType"]?.stringValue.map { vars.expand($0).value }
            if let t = packageType, t == "BNDL" || t == "FMWK" {
                files.append(ImportedFile(path: plist, role: .skipped, detail: t == "BNDL" ? "test or resource bundle" : "framework"))
            } else if info["WKApplication"] != nil || info["WKWatchKitApp"] != nil || info["WKWatchOnly"] != nil {
                files.append(ImportedFile(path: plist, role: .skipped, detail: "watch app"))
            } else if info["NSAppClip"] != nil {
                files.append(ImportedFile(path: plist, role: .skipped, detail: "App Clip"))
            } else {
                apps.append(TargetFiles(plist: plist, info: info, entitlements: nil, target: target))
            }
        }
        if issues.contains(where: \.fatal) { return finish() }
        var app: TargetFiles
        if let wanted = options.app {
            let w = wanted.hasSuffix("/") ? String(wanted.dropLast()) : wanted
            let matches = apps.filter { $0.plist == w || ImportRun.parent($0.plist) == w || $0.target == w }
            guard matches.count == 1 else {
                fail(
                    rootLabel, "",
                    "--app '\(wanted)' matches \(matches.isEmpty ? "none" : "several") of the app Info.plist files: "
                        + (apps.isEmpty ? "(none found)" : apps.map(\.plist).joined(separator: ", ")))
                return finish()
            }
            app = matches[0]
        } else if apps.count == 1 {
            app = apps[0]
        } else if apps.isEmpty {
            var message =
                "no app Info.plist (one without NSExtension) found under \(root); build folders, Pods, hidden folders and test targets are not searched"
            if !exts.isEmpty { message += "; found only extensions: \(exts.map(\.plist).joined(separator: ", "))" }
            message += ". Xcode projects that generate Info.plist from build settings need a built .app instead"
            fail(rootLabel, "", message)
            return finish()
        } else {
            fail(
                rootLabel, "",
                "several app Info.plist files: \(apps.map(\.plist).joined(separator: ", ")); choose one with --app FOLDER "
                    + "(or an \"app\" entry in sharebroker-import.json), or import a more specific path")
            return finish()
        }
        for other in apps where other.plist != app.plist {
            files.append(ImportedFile(path: other.plist, role: .skipped, detail: "another app"))
        }
        // Entitlements: each target's own folder.
        let extDirs = Set(exts.map { ImportRun.parent($0.plist) })
        func inFolder(_ dir: String) -> [String] { entitlements.filter { ImportRun.parent($0) == dir } }
        var appEnts = pickEntitlements(inFolder(ImportRun.parent(app.plist)), target: app.target)
        if appEnts == nil {
            let loose = entitlements.filter { !extDirs.contains(ImportRun.parent($0)) }
            let named = loose.filter { ImportRun.stripExtension(ImportRun.base($0)) == app.target }
            if named.count == 1 {
                appEnts = named[0]
            } else if loose.count == 1 {
                appEnts = loose[0]
            }
            if let e = appEnts {
                note(e, "", "used as the app's entitlements (it is not in the folder of \(app.plist))")
            }
        }
        app.entitlements = appEnts
        for i in exts.indices {
            exts[i].entitlements = pickEntitlements(inFolder(ImportRun.parent(exts[i].plist)), target: exts[i].target)
        }
        return build(app: app, extensions: exts, entitlementsBase: nil, severalApps: apps.count > 1)
    }

    // MARK: mapping

    struct Listed {
        var value: String
        var file: String
        var key: String
    }

    /// Expands build variables in a value read from `file` at `key`. Unresolved → fatal when `required`
    /// (bundle IDs), else a note and nil.
    func expand(
        _ raw: String, file: String, key: String, target: String, vars: BuildVariables, required: Bool, missing: Bool = false,
        perTarget: Bool = false
    ) -> String? {
        let x = vars.expand(raw)
        for m in x.unknownModifiers {
            note(file, key, "unknown build variable modifier ':\(m)' in '\(raw)'; the value was left unmodified")
        }
        guard x.isResolved else {
            let list = x.unresolved.map { "$(\($0))" }.joined(separator: ", ")
            let hint = x.unresolved.map { "--set \($0)=..." }.joined(separator: " ")
            let scoped = x.unresolved.map { "--set \(target):\($0)=..." }.joined(separator: " ")
            var message =
                missing
                ? "\(key) is missing; Xcode fills it from the build setting \(list)"
                : "unresolved build variable\(x.unresolved.count > 1 ? "s" : "") \(list) in \(key)"
            message +=
                perTarget
                ? "; pass \(scoped) (this target's own setting: a plain --set applies to every target)"
                : "; pass \(hint) (or \(scoped) for this target only)"
            if required { fail(file, key, message) } else { note(file, key, message + "; the value is ignored") }
            return nil
        }
        return x.value
    }

    /// An array of strings at `dict[key]` (expanded), each with its key path.
    func stringList(
        _ dict: PlistDictionary, _ key: String, file: String, target: String, vars: BuildVariables, within: String = ""
    ) -> [Listed] {
        guard let v = dict[key] else { return [] }
        guard case .array(let items) = v else {
            fail(file, within + key, "expected an array of strings, got \(v.typeName)")
            return []
        }
        var out: [Listed] = []
        for (i, item) in items.enumerated() {
            let path = "\(within)\(key)[\(i)]"
            guard case .string(let s) = item else {
                fail(file, path, "expected a string, got \(item.typeName)")
                continue
            }
            guard let value = expand(s, file: file, key: path, target: target, vars: vars, required: false), !value.isEmpty
            else { continue }
            out.append(Listed(value: value, file: file, key: path))
        }
        return out
    }

    func bundleID(_ t: TargetFiles, vars: BuildVariables, isExtension: Bool = false) -> String? {
        let raw: String
        var missing = false
        if let v = t.info["CFBundleIdentifier"] {
            guard case .string(let s) = v else {
                fail(t.plist, "CFBundleIdentifier", "expected a string, got \(v.typeName)")
                return nil
            }
            raw = s
        } else {
            raw = "$(PRODUCT_BUNDLE_IDENTIFIER)"
            missing = true
        }
        return expand(
            raw, file: t.plist, key: "CFBundleIdentifier", target: t.target, vars: vars, required: true, missing: missing,
            perTarget: isExtension)
    }

    func displayName(_ t: TargetFiles, vars: BuildVariables) -> Listed? {
        for key in ["CFBundleDisplayName", "CFBundleName"] {
            guard let v = t.info[key] else { continue }
            guard case .string(let s) = v else {
                fail(t.plist, key, "expected a string, got \(v.typeName)")
                return nil
            }
            if let name = expand(s, file: t.plist, key: key, target: t.target, vars: vars, required: false), !name.isEmpty {
                return Listed(value: name, file: t.plist, key: key)
            }
        }
        return nil
    }

    /// Entitlements: groups, domains and team facts, with notes for keys sharebroker does not know.
    struct Entitlements {
        var groups: [Listed] = []
        var domains: [Listed] = []
        var team: Listed? = nil
        var appIdentifier: Listed? = nil
    }

    func readEntitlements(_ t: TargetFiles, base: String?, vars: BuildVariables, isApp: Bool) -> Entitlements {
        var out = Entitlements()
        if let rel = t.entitlements {
            files.append(ImportedFile(path: rel, role: isApp ? .appEntitlements : .extensionEntitlements, detail: t.target))
            let dict: PlistDictionary?
            if let base {
                // Single-plist layout: the entitlements file sits beside the plist.
                let full = base + "/" + rel
                if let bytes = readBytes(full, file: rel) {
                    do {
                        let v = try PropertyList.parse(bytes).value
                        if case .dict(let d) = v { dict = d } else {
                            fail(rel, "", "expected a dictionary at the top level, got \(v.typeName)")
                            dict = nil
                        }
                    } catch {
                        fail(rel, "", "malformed property list: \(error)")
                        dict = nil
                    }
                } else {
                    dict = nil
                }
            } else {
                dict = readPlist(rel)
            }
            if let dict {
                for key in dict.keys {
                    switch key {
                    case ProjectImporter.groupsKey:
                        out.groups += stringList(dict, key, file: rel, target: t.target, vars: vars)
                    case ProjectImporter.domainsKey:
                        let d = stringList(dict, key, file: rel, target: t.target, vars: vars)
                        if isApp {
                            out.domains += d
                        } else if !d.isEmpty {
                            note(rel, key, "associated domains of an extension are not used (universal links open the app); ignored")
                        }
                    case ProjectImporter.teamKey:
                        if case .string(let s)? = dict[key],
                            let v = expand(s, file: rel, key: key, target: t.target, vars: vars, required: false)
                        {
                            out.team = Listed(value: v, file: rel, key: key)
                        } else if let v = dict[key], v.stringValue == nil {
                            fail(rel, key, "expected a string, got \(v.typeName)")
                        }
                    case let k where ProjectImporter.appIdentifierKeys.contains(k):
                        if case .string(let s)? = dict[key] {
                            let x = vars.expand(s)
                            if x.isResolved { out.appIdentifier = Listed(value: x.value, file: rel, key: key) }
                        }
                    default:
                        if !ProjectImporter.knownEntitlements.contains(key) {
                            note(rel, key, "entitlement not used by sharebroker; ignored")
                        }
                    }
                }
            }
        }
        // Entitlement keys written into Info.plist (seed 000 does this): used, with a note.
        for key in [ProjectImporter.groupsKey, ProjectImporter.domainsKey] where t.info[key] != nil {
            let list = stringList(t.info, key, file: t.plist, target: t.target, vars: vars)
            if key == ProjectImporter.groupsKey {
                note(
                    t.plist, key,
                    "an entitlement in Info.plist: iOS reads entitlements from the .entitlements file (the code signature), not Info.plist; used anyway")
                out.groups += list
            } else if isApp {
                note(
                    t.plist, key,
                    "an entitlement in Info.plist: iOS reads entitlements from the .entitlements file (the code signature), not Info.plist; used anyway")
                out.domains += list
            } else {
                note(t.plist, key, "associated domains of an extension are not used (universal links open the app); ignored")
            }
        }
        // Stray NSExtension* keys at the top level.
        for key in t.info.keys where key.hasPrefix("NSExtension") && key != "NSExtension" {
            note(t.plist, key, "NSExtension key outside the NSExtension dictionary; ignored")
        }
        // Dedupe, keeping the first occurrence.
        var seen = Set<String>()
        out.groups = out.groups.filter { seen.insert($0.value).inserted }
        seen = []
        out.domains = out.domains.filter { seen.insert($0.value).inserted }
        return out
    }

    /// Builds the manifest JSON from the app's and extensions' files, validates it with
    /// `ManifestDecoder`, and names every decoder issue by its plist file and key.
    func build(app: TargetFiles, extensions: [TargetFiles], entitlementsBase: String?, severalApps: Bool = false)
        -> ImportResult
    {
        var obj = JSONObject()
        if files.first(where: { $0.path == app.plist && $0.role == .app }) == nil {
            files.append(ImportedFile(path: app.plist, role: .app, detail: app.target))
        }
        // Team ID first: `AppIdentifierPrefix` expansions depend on it.
        var team: Listed? = nil
        if let t = options.teamID {
            team = Listed(value: t, file: options.origin, key: options.teamIDField)
        } else {
            let plain = BuildVariables(options.variables, target: app.target)
            if let t = plain.lookup("DEVELOPMENT_TEAM") {
                team = Listed(value: plain.expand(t).value, file: options.origin, key: "DEVELOPMENT_TEAM")
            } else if let p = plain.lookup("AppIdentifierPrefix") ?? plain.lookup("TeamIdentifierPrefix") {
                let v = plain.expand(p).value
                team = Listed(value: v.hasSuffix(".") ? String(v.dropLast()) : v, file: options.origin, key: "AppIdentifierPrefix")
            }
        }
        let appVars0 = BuildVariables(options.variables, target: app.target, teamID: team?.value)
        let bundle = bundleID(app, vars: appVars0)
        let ents = readEntitlements(app, base: entitlementsBase, vars: appVars0, isApp: true)
        if team == nil { team = ents.team }
        if team == nil, let ai = ents.appIdentifier, let dot = ai.value.firstIndex(of: ".") {
            let prefix = String(ai.value[..<dot])
            if bundle == nil || String(ai.value[ai.value.index(after: dot)...]) == bundle {
                team = Listed(value: prefix, file: ai.file, key: ai.key)
            }
        }
        if let t = team, let e = ents.team, e.value != t.value {
            note(e.file, e.key, "team ID '\(e.value)' differs from '\(t.value)' (\(t.file)); '\(t.value)' is used")
        }
        let appVars = BuildVariables(options.variables, target: app.target, teamID: team?.value)

        if let bundle { obj["bundleID"] = .string(bundle) }
        trace("bundleID", app.plist, "CFBundleIdentifier")
        if let team {
            obj["teamID"] = .string(team.value)
            trace("teamID", team.file, team.key)
        }
        if let name = displayName(app, vars: appVars) {
            obj["name"] = .string(name.value)
            trace("name", name.file, name.key)
        }
        // URL schemes.
        var schemes: [Listed] = []
        if let types = app.info["CFBundleURLTypes"] {
            if case .array(let list) = types {
                for (i, t) in list.enumerated() {
                    guard case .dict(let d) = t else {
                        fail(app.plist, "CFBundleURLTypes[\(i)]", "expected a dictionary, got \(t.typeName)")
                        continue
                    }
                    schemes += stringList(
                        d, "CFBundleURLSchemes", file: app.plist, target: app.target, vars: appVars,
                        within: "CFBundleURLTypes[\(i)].")
                }
            } else {
                fail(app.plist, "CFBundleURLTypes", "expected an array of dictionaries, got \(types.typeName)")
            }
        }
        trace("urlSchemes", app.plist, "CFBundleURLTypes")
        if !schemes.isEmpty {
            obj["urlSchemes"] = .array(schemes.map { .string($0.value) })
            for (k, s) in schemes.enumerated() { trace("urlSchemes[\(k)]", s.file, s.key) }
        }
        if !ents.domains.isEmpty {
            obj["associatedDomains"] = .array(ents.domains.map { .string($0.value) })
            for (k, d) in ents.domains.enumerated() { trace("associatedDomains[\(k)]", d.file, d.key) }
            if team == nil, ents.domains.contains(where: { $0.value.hasPrefix("applinks:") }) {
                note(
                    ents.domains[0].file, ents.domains[0].key,
                    "no team ID: universal links match TEAMID.BUNDLEID in association documents; pass --team-id")
            }
        }
        if !ents.groups.isEmpty {
            obj["appGroups"] = .array(ents.groups.map { .string($0.value) })
            for (k, g) in ents.groups.enumerated() { trace("appGroups[\(k)]", g.file, g.key) }
        }

        // Extensions.
        var extJSON: [JSONValue] = []
        var usedIDs: [String: String] = [:]
        if let bundle { usedIDs[bundle] = app.plist }
        for ext in extensions {
            let vars = BuildVariables(options.variables, target: ext.target, teamID: team?.value)
            guard case .dict(let nsext)? = ext.info["NSExtension"] else {
                fail(ext.plist, "NSExtension", "expected a dictionary, got \(ext.info["NSExtension"]?.typeName ?? "nothing")")
                continue
            }
            let eid = bundleID(ext, vars: vars, isExtension: true)
            if let eid, let bundle, severalApps, !eid.hasPrefix(bundle + ".") {
                files.append(ImportedFile(path: ext.plist, role: .skipped, detail: "extension of another app (\(eid))"))
                continue
            }
            files.append(ImportedFile(path: ext.plist, role: .appExtension, detail: ext.target))
            if let eid {
                if let other = usedIDs[eid] {
                    fail(
                        ext.plist, "CFBundleIdentifier",
                        "bundle ID '\(eid)' is also the bundle ID of \(other); a global --set PRODUCT_BUNDLE_IDENTIFIER applies to every target: use --set \(ext.target):PRODUCT_BUNDLE_IDENTIFIER=...")
                    continue
                }
                usedIDs[eid] = ext.plist
                if let bundle, !eid.hasPrefix(bundle + ".") {
                    note(ext.plist, "CFBundleIdentifier", "'\(eid)' does not start with the app's bundle ID '\(bundle).' (iOS requires it)")
                }
            }
            let n = extJSON.count
            let path = "extensions[\(n)]"
            var e = JSONObject()
            if let eid { e["bundleID"] = .string(eid) }
            trace(path, ext.plist, "NSExtension")
            trace("\(path).bundleID", ext.plist, "CFBundleIdentifier")
            if let point = nsext["NSExtensionPointIdentifier"] { e["point"] = point.json }
            trace("\(path).point", ext.plist, "NSExtension.NSExtensionPointIdentifier")
            if let name = displayName(ext, vars: vars) {
                e["name"] = .string(name.value)
                trace("\(path).name", name.file, name.key)
            }
            for key in nsext.keys
            where !ProjectImporter.usedNSExtensionKeys.contains(key) && !ProjectImporter.knownNSExtensionKeys.contains(key) {
                note(ext.plist, "NSExtension.\(key)", "unknown NSExtension key; ignored")
            }
            let extEnts = readEntitlements(ext, base: entitlementsBase, vars: vars, isApp: false)
            if !extEnts.groups.isEmpty {
                e["appGroups"] = .array(extEnts.groups.map { .string($0.value) })
                for (k, g) in extEnts.groups.enumerated() { trace("\(path).appGroups[\(k)]", g.file, g.key) }
            }
            if let attrs = nsext["NSExtensionAttributes"] {
                if case .dict(let a) = attrs {
                    if let rule = a["NSExtensionActivationRule"] { e["activationRule"] = rule.json }
                    for key in a.keys where key.hasPrefix("NSExtension") && !ProjectImporter.knownNSExtensionAttributes.contains(key) {
                        note(ext.plist, "NSExtension.NSExtensionAttributes.\(key)", "unknown NSExtensionAttributes key; ignored")
                    }
                } else {
                    fail(ext.plist, "NSExtension.NSExtensionAttributes", "expected a dictionary, got \(attrs.typeName)")
                }
            }
            trace("\(path).activationRule", ext.plist, "NSExtension.NSExtensionAttributes.NSExtensionActivationRule")
            extJSON.append(.object(e))
        }
        if !extJSON.isEmpty { obj["extensions"] = .array(extJSON) }
        for m in options.overrides.members {
            obj[m.key] = m.value
            trace(m.key, options.origin, options.overrideField(m.key))
        }

        // Validation stays in ManifestDecoder; its issues are renamed to the plist file and key.
        let (manifest, problems) = ManifestDecoder.decode(.object(obj), file: options.manifestFile ?? rootLabel)
        let mine = issues
        for p in problems {
            let mapped = rename(p, defaultFile: app.plist)
            if mapped.fatal, mine.contains(where: { $0.fatal && $0.file == mapped.file && $0.field == mapped.field }) { continue }
            issues.append(mapped)
        }
        return finish(.object(obj), manifest: manifest)
    }

    /// Renames a decoder issue (manifest field) to the file and plist key the value came from.
    func rename(_ issue: ManifestIssue, defaultFile: String) -> ManifestIssue {
        var best: (field: String, file: String, key: String)? = nil
        for p in provenance {
            let f = issue.field
            guard f == p.field || (f.hasPrefix(p.field) && [".", "["].contains(f.dropFirst(p.field.count).first.map(String.init) ?? ""))
            else { continue }
            if best == nil || p.field.count > best!.field.count { best = p }
        }
        var out = issue
        if let best {
            out.file = best.file
            out.field = best.key + issue.field.dropFirst(best.field.count)
        } else {
            out.file = defaultFile
        }
        return out
    }
}

extension ProjectImporter {
    /// Reads a file of an import (following symlinks: a project folder may link to its files),
    /// or fails with the system's error (`fault`, the test seam, first); EFBIG past `limit`.
    static func readFile(_ path: String, limit: Int, fault: (@Sendable (String) -> Int32?)?) -> Result<[UInt8], SystemError> {
        if let code = fault?(path) { return .failure(SystemError("read \(path)", errno: code)) }
        do { return .success(try FileIO.readFile(path, limit: limit, followSymlinks: true)) } catch { return .failure(error) }
    }
}

extension ProjectImporter {
    /// The file type bits of `path` (`FileIO.fileType`), or the errno `readFault` injects for it.
    static func kind(of path: String, followLink: Bool, readFault: (@Sendable (String) -> Int32?)?) -> Result<mode_t, SystemError> {
        if let e = readFault?(path) { return .failure(SystemError("stat \(path)", errno: e)) }
        return FileIO.fileType(path, followSymlinks: followLink)
    }

    /// What an input whose `stat` failed with `errno` (not because it is gone) is reported as:
    /// "cannot be checked (stat: <reason>)".
    public static func cannotBeChecked(_ errno: Int32) -> String {
        "cannot be checked (stat: \(String(cString: strerror(errno))))"
    }
}
