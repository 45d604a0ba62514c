// The set of registered apps, compiled from manifest files into lookup tables. Conflicts
// (duplicate bundle IDs, a URL scheme claimed twice) are resolved by file-name order and reported.

import ShareProtocol

/// A registered bundle: an app, or one of an app's extensions.
public enum RegisteredBundle: Sendable, Equatable {
    /// An app (index into `AppRegistry.apps`).
    case app(Int)
    /// An extension: the containing app's index and the extension's index in it.
    case appExtension(app: Int, index: Int)
}

/// A registered extension with its containing app, built once with the registry: one reference
/// to hand around (the manifests are structs of many fields; copying a pair of them retained and
/// released every field on every share).
public final class ExtensionTarget: Sendable {
    /// The extension.
    public let ext: ExtensionManifest
    /// The app that contains it.
    public let app: AppManifest

    /// Pairs an extension with its containing app.
    public init(ext: ExtensionManifest, app: AppManifest) {
        self.ext = ext
        self.app = app
    }
}

/// All loaded manifests and the tables built from them. Pure: callers pass the files' bytes.
public struct AppRegistry: Sendable {
    /// The tables, built once and never changed, behind one reference: the broker calls the
    /// registry on requests, and a call on a struct held in a class property works on a copy
    /// (one retain instead of five arrays and dictionaries).
    final class Tables: Sendable {
        let apps: [AppManifest]
        let issues: [ManifestIssue]
        let schemeConflicts: [String: [String]]
        let bundles: [String: RegisteredBundle]
        let launchCommands: [String: [String]]
        /// Every kept extension, in precedence order, and by bundle ID.
        let extensionTargets: [ExtensionTarget]
        let extensionsByID: [String: ExtensionTarget]
        /// Bundle IDs that manifests name but that are not registered, with why.
        let leftOut: [String: String]

        init(
            apps: [AppManifest], issues: [ManifestIssue], schemeConflicts: [String: [String]],
            bundles: [String: RegisteredBundle], launchCommands: [String: [String]], leftOut: [String: String]
        ) {
            self.leftOut = leftOut
            self.apps = apps
            self.issues = issues
            self.schemeConflicts = schemeConflicts
            self.bundles = bundles
            self.launchCommands = launchCommands
            var targets: [ExtensionTarget] = []
            var byID: [String: ExtensionTarget] = [:]
            for app in apps {
                for ext in app.extensions {
                    let t = ExtensionTarget(ext: ext, app: app)
                    targets.append(t)
                    byID[ext.bundleID] = t
                }
            }
            extensionTargets = targets
            extensionsByID = byID
        }
    }
    private let tables: Tables

    /// Apps in precedence order (manifest file name order); earlier wins every conflict.
    public var apps: [AppManifest] { tables.apps }
    /// Every problem found: invalid manifests (fatal), notes, and conflicts.
    public var issues: [ManifestIssue] { tables.issues }
    /// Schemes (lowercased) claimed by more than one app, with the claimants in precedence order.
    public var schemeConflicts: [String: [String]] { tables.schemeConflicts }
    private var bundles: [String: RegisteredBundle] { tables.bundles }
    /// The launch command of each app that has one (looked up on every queued event: most apps
    /// have none, and a lookup in an empty dictionary hashes nothing).
    public var launchCommands: [String: [String]] { tables.launchCommands }

    /// An empty registry.
    public init() {
        tables = Tables(apps: [], issues: [], schemeConflicts: [:], bundles: [:], launchCommands: [:], leftOut: [:])
    }

    /// Builds the registry from manifest files, given as (file name, bytes). Files are taken in
    /// file-name order: the first manifest to claim a bundle ID keeps it; a later app manifest with
    /// the same bundle ID is rejected, a later extension with a taken bundle ID is dropped.
    public init(files: [(name: String, bytes: [UInt8])], extraIssues: [ManifestIssue] = []) {
        var decoded: [AppManifest] = []
        var found: [ManifestIssue] = extraIssues
        var leftOut: [String: String] = [:]
        for file in files.sorted(by: { $0.name < $1.name }) {
            let (manifest, problems) = ManifestDecoder.decode(bytes: file.bytes, file: file.name)
            found.append(contentsOf: problems)
            if let manifest { decoded.append(manifest) } else { Self.noteLeftOut(file.bytes, file.name, problems, into: &leftOut) }
        }
        self.init(manifests: decoded, issues: found, leftOut: leftOut)
    }

    /// Records, for each bundle ID a manifest that could not be loaded names (its `bundleID` and
    /// its extensions' — read loosely, since the manifest is not valid), why it was not loaded;
    /// the first claim of an ID counts.
    static func noteLeftOut(_ bytes: [UInt8], _ file: String, _ problems: [ManifestIssue], into leftOut: inout [String: String]) {
        guard case .object(let obj)? = try? JSONParser.parse(bytes) else { return }
        var ids: [String] = []
        if let id = obj["bundleID"]?.stringValue { ids.append(id) }
        if case .array(let exts)? = obj["extensions"] {
            for case .object(let e) in exts { if let id = e["bundleID"]?.stringValue { ids.append(id) } }
        }
        let why = problems.first(where: \.fatal).map { "\($0)" } ?? "\(file): not loaded"
        for id in ids where leftOut[id] == nil { leftOut[id] = "the manifest \(file) that lists it was not loaded (\(why))" }
    }

    /// Builds the registry from decoded manifests (in precedence order). `leftOut`: why bundle
    /// IDs named by manifests that could not be decoded are missing (see `whyUnknown`).
    /// `groupDirectories`: the names under STATE/groups; a group's spelling there beats another
    /// spelling of the same name in any manifest (its data stays with whoever had it).
    public init(
        manifests: [AppManifest], issues initialIssues: [ManifestIssue] = [], leftOut initialLeftOut: [String: String] = [:],
        groupDirectories: [String] = []
    ) {
        var leftOut = initialLeftOut
        var apps: [AppManifest] = []
        var issues = initialIssues
        var schemeConflicts: [String: [String]] = [:]
        var bundles: [String: RegisteredBundle] = [:]
        var launchCommands: [String: [String]] = [:]
        /// Each App Group name seen, by its lowercased form: its first spelling and where.
        var groupSpellings: [String: (name: String, owner: String)] = [:]
        var onDisk: [String: [String]] = [:]
        for d in groupDirectories { onDisk[d.lowercased(), default: []].append(d) }
        for (folded, names) in onDisk where names.count == 1 {
            groupSpellings[folded] = (names[0], "the existing directory groups/\(names[0])")
        }
        func describe(_ b: RegisteredBundle) -> String { AppRegistry.describe(b, apps) }
        for var manifest in manifests {
            if let existing = bundles[manifest.bundleID] {
                issues.append(
                    ManifestIssue(
                        file: manifest.file, field: "bundleID",
                        message: "bundle ID '\(manifest.bundleID)' is already registered by \(describe(existing)); this manifest is ignored",
                        fatal: true))
                for ext in manifest.extensions where leftOut[ext.bundleID] == nil {
                    leftOut[ext.bundleID] =
                        "the manifest \(manifest.file) that lists it was not loaded (its app's bundle ID '\(manifest.bundleID)' is already registered by \(describe(existing)))"
                }
                continue
            }
            var keptExtensions: [ExtensionManifest] = []
            for (i, ext) in manifest.extensions.enumerated() {
                if ext.bundleID == manifest.bundleID || keptExtensions.contains(where: { $0.bundleID == ext.bundleID }) {
                    issues.append(
                        ManifestIssue(
                            file: manifest.file, field: "extensions[\(i)].bundleID",
                            message: "bundle ID '\(ext.bundleID)' is used twice in this manifest; this extension is ignored",
                            fatal: false))
                    continue
                }
                if let existing = bundles[ext.bundleID] {
                    issues.append(
                        ManifestIssue(
                            file: manifest.file, field: "extensions[\(i)].bundleID",
                            message: "bundle ID '\(ext.bundleID)' is already registered by \(describe(existing)); this extension is ignored",
                            fatal: false))
                    continue
                }
                keptExtensions.append(ext)
            }
            // App Group names that differ only in case would share one directory on a
            // case-insensitive file system (macOS's default): the spelling of an existing group
            // directory keeps the name, else the first in file order; another spelling is left
            // out, on every platform, so manifests load the same everywhere.
            // (`indices`: where each group stands in the manifest's own list)
            func caseChecked(_ groups: [String], _ indices: SourceIndices, _ field: String) -> [String] {
                groups.enumerated().filter { i, g in
                    let folded = g.lowercased()
                    if let first = groupSpellings[folded], first.name != g {
                        issues.append(
                            ManifestIssue(
                                file: manifest.file, field: "\(field)[\(indices[i])]",
                                message: "'\(g)' differs only in case from the App Group '\(first.name)' of \(first.owner) (a case-insensitive file system would give both one directory); left out",
                                fatal: false))
                        return false
                    }
                    if groupSpellings[folded] == nil { groupSpellings[folded] = (g, "\(manifest.file)") }
                    return true
                }.map(\.element)
            }
            manifest.appGroups = caseChecked(manifest.appGroups, manifest.appGroupIndices, "appGroups")
            manifest.appGroupIndices = SourceIndices()  // (no longer one to one; only warnings used them)
            for (j, ext) in keptExtensions.enumerated() {
                let i = manifest.extensions.firstIndex { $0.bundleID == ext.bundleID } ?? j
                keptExtensions[j].appGroups = caseChecked(ext.appGroups, ext.appGroupIndices, "extensions[\(i)].appGroups")
                keptExtensions[j].appGroupIndices = SourceIndices()
            }
            manifest.extensions = keptExtensions
            let index = apps.count
            apps.append(manifest)
            bundles[manifest.bundleID] = .app(index)
            if let launch = manifest.launch { launchCommands[manifest.bundleID] = launch }
            for (j, ext) in keptExtensions.enumerated() { bundles[ext.bundleID] = .appExtension(app: index, index: j) }
        }
        // Scheme conflicts: the earlier app wins; report every claimant.
        var claimants: [String: [String]] = [:]
        var order: [String] = []
        for app in apps {
            for scheme in Set(app.urlSchemes.map(URLScheme.normalize)) {
                if claimants[scheme] == nil { order.append(scheme) }
                claimants[scheme, default: []].append(app.bundleID)
            }
        }
        for scheme in order {
            guard let list = claimants[scheme], list.count > 1 else { continue }
            schemeConflicts[scheme] = list
            let loser = apps.first { $0.bundleID == list[1] }
            issues.append(
                ManifestIssue(
                    file: loser?.file ?? "", field: "urlSchemes",
                    message: "URL scheme '\(scheme)' is claimed by \(list.joined(separator: ", ")); '\(list[0])' handles it (first manifest in file-name order)",
                    fatal: false))
        }
        for id in bundles.keys { leftOut[id] = nil }
        tables = Tables(
            apps: apps, issues: issues, schemeConflicts: schemeConflicts, bundles: bundles, launchCommands: launchCommands,
            leftOut: leftOut)
    }

    private static func describe(_ b: RegisteredBundle, _ apps: [AppManifest]) -> String {
        switch b {
        case .app(let i): return "\(apps[i].file) (app)"
        case .appExtension(let a, let e): return "\(apps[a].file) (extension of \(apps[a].bundleID), #\(e))"
        }
    }

    /// What `bundleID` names, if registered.
    public func lookup(_ bundleID: String) -> RegisteredBundle? { bundles[bundleID] }

    /// Why a bundle ID that a manifest names is not registered (its manifest was not loaded: it
    /// is invalid, or its app's bundle ID was taken by an earlier file); nil for one no manifest
    /// names, or one that is registered.
    public func whyUnknown(_ bundleID: String) -> String? { tables.leftOut[bundleID] }

    /// The app with `bundleID` (not extensions).
    public func app(_ bundleID: String) -> AppManifest? {
        if case .app(let i)? = bundles[bundleID] { return apps[i] }
        return nil
    }

    /// The app's `launch` command (nil when it has none), without copying its whole manifest
    /// (url.open asks this for every event queued for an app that is not subscribed).
    public func launchCommand(of bundleID: String) -> [String]? {
        launchCommands[bundleID]
    }

    /// The extension with `bundleID` and its containing app.
    public func appExtension(_ bundleID: String) -> ExtensionTarget? {
        tables.extensionsByID[bundleID]
    }

    /// Every registered extension with its app, in precedence order (apps in manifest file-name
    /// order, each app's extensions in manifest order).
    public var extensionTargets: [ExtensionTarget] { tables.extensionTargets }

    /// Number of registered bundles (apps and extensions).
    public var bundleCount: Int { bundles.count }

    /// The token a session for `bundleID` must present: the extension's own, else its app's.
    public func requiredToken(for bundleID: String) -> String?? {
        switch bundles[bundleID] {
        case .app(let i)?: return .some(apps[i].token)
        case .appExtension(let a, let e)?: return .some(apps[a].extensions[e].token ?? apps[a].token)
        case nil: return .none
        }
    }

    /// Who may act as a bundle: its allowed uids (nil: the broker's own user) and executable.
    public func identityRule(for bundleID: String) -> (uids: [UInt32]?, executable: String?) {
        switch bundles[bundleID] {
        case .app(let i)?: return (apps[i].uids, apps[i].executable)
        case .appExtension(let a, let e)?:
            let ext = apps[a].extensions[e]
            return (ext.uids ?? apps[a].uids, ext.executable)
        case nil: return (nil, nil)
        }
    }

    /// The app groups of a registered bundle (empty when unknown).
    public func appGroups(of bundleID: String) -> [String] {
        switch bundles[bundleID] {
        case .app(let i)?: return apps[i].appGroups
        case .appExtension(let a, let e)?: return apps[a].extensions[e].appGroups
        case nil: return []
        }
    }

    /// The `apps.list` result: apps in precedence order, problems, and conflicts.
    public var listJSON: JSONValue {
        var conflicts: [JSONValue] = []
        for (scheme, list) in schemeConflicts.sorted(by: { $0.key < $1.key }) {
            conflicts.append([
                "kind": "urlScheme", "scheme": .string(scheme), "claimants": .array(list.map { .string($0) }),
                "winner": .string(list[0]),
            ])
        }
        return [
            "apps": .array(apps.map(\.json)),
            "errors": .array(issues.filter(\.fatal).map(\.json)),
            "warnings": .array(issues.filter { !$0.fatal }.map(\.json)),
            "conflicts": .array(conflicts),
        ]
    }
}
