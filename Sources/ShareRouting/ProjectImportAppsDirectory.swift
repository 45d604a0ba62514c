// Loading imported apps at start: STATE/apps entries that are directories (.app bundles, Xcode project
// folders, or symlinks to them) are imported, with options from their `sharebroker-import.json`.

import Foundation
import ShareProtocol
import ShareSystem

/// One directory entry of `STATE/apps` and what importing it gave.
public struct ImportedAppsEntry: Sendable {
    /// The entry's name in `STATE/apps` (e.g. `MyApp.app`); the manifest's `file`.
    public var name: String
    /// The import; issue files are prefixed with `name/` (e.g. `MyApp.app/Info.plist`).
    public var result: ImportResult
}

extension ProjectImporter {
    /// The settings file read from an imported folder: `{"teamID": "...", "variables": {"NAME": "VALUE",
    /// "TARGET:NAME": "VALUE"}, "app": "FOLDER", "manifest": {"token": "...", "launch": [...]}}`.
    public static let settingsFileName = "sharebroker-import.json"

    /// Reads `sharebroker-import.json` from `directory` (absent: default options). Problems are issues
    /// naming `label` (the file's display path); a malformed file is fatal.
    public static func settings(
        inDirectory directory: String, label: String = settingsFileName, fileCheck: (@Sendable (String) -> String?)? = nil,
        readFault: (@Sendable (String) -> Int32?)? = nil
    ) -> (
        options: ImportOptions, issues: [ManifestIssue], found: Bool, readErrors: [ImportReadError]
    ) {
        let path = directory + "/" + settingsFileName
        var options = ImportOptions(origin: label)
        options.fileCheck = fileCheck
        options.readFault = readFault
        var issues: [ManifestIssue] = []
        func fail(_ field: String, _ message: String) {
            issues.append(ManifestIssue(file: label, field: field, message: message, fatal: true))
        }
        if readFault?(path) == nil, case .failure(let error) = FileIO.fileType(path, followSymlinks: true) {
            let e = error.errno
            if e == ENOENT || e == ENOTDIR { return (options, [], false, []) }
            // (not taken as absent: the folder's own options would be dropped unnoticed)
            fail("", cannotBeChecked(e))
            return (options, issues, true, [ImportReadError(path: path, errno: e)])
        }
        if let why = fileCheck?(path) {
            fail("", why)
            return (options, issues, true, [])
        }
        let value: JSONValue
        switch readFile(path, limit: 1024 * 1024, fault: readFault) {
        case .failure(let error):
            fail("", "cannot read: \(String(cString: strerror(error.errno)))")
            return (options, issues, true, error.errno == EFBIG ? [] : [ImportReadError(path: path, errno: error.errno)])
        case .success(let bytes):
            do { value = try JSONParser.parse(bytes) } catch {
                fail("", "malformed JSON: \(error)")
                return (options, issues, true, [])
            }
        }
        guard case .object(let obj) = value else {
            fail("", "expected a JSON object, got \(value.typeName)")
            return (options, issues, true, [])
        }
        for m in obj.members {
            switch m.key {
            case "teamID":
                if case .string(let s) = m.value { options.teamID = s } else { fail("teamID", "expected a string, got \(m.value.typeName)") }
            case "app":
                if case .string(let s) = m.value { options.app = s } else { fail("app", "expected a string, got \(m.value.typeName)") }
            case "variables":
                guard case .object(let vars) = m.value else {
                    fail("variables", "expected an object of strings, got \(m.value.typeName)")
                    continue
                }
                for v in vars.members {
                    if case .string(let s) = v.value { options.variables[v.key] = s } else {
                        fail("variables.\(v.key)", "expected a string, got \(v.value.typeName)")
                    }
                }
            case "manifest":
                if case .object(let o) = m.value { options.overrides = o } else {
                    fail("manifest", "expected an object (manifest keys such as token, launch), got \(m.value.typeName)")
                }
            case "comment", "$schema":
                break
            default:
                issues.append(ManifestIssue(file: label, field: m.key, message: "unknown key, ignored", fatal: false))
            }
        }
        return (options, issues, true, [])
    }

    /// Imports every entry of `directory` (normally `STATE/apps`) that is a directory or a symlink to
    /// one, in name order, skipping hidden entries and names ending in `.json` (those are manifests).
    /// Each entry's options come from its `sharebroker-import.json`; the manifest's `file` is the entry
    /// name and every issue's file is prefixed with `NAME/`.
    /// `fileCheck`: asked for each folder and file before it is read (`ImportOptions.fileCheck`);
    /// `readFault`: the test seam (`ImportOptions.readFault`). Reads that failed with a system
    /// error are in each entry's `result.readErrors`.
    /// `names`: the directory's entries when the caller listed it already (nil: listed here).
    public static func importDirectories(
        inAppsDirectory directory: String, names listed: [String]? = nil, fileCheck: (@Sendable (String) -> String?)? = nil,
        readFault: (@Sendable (String) -> Int32?)? = nil
    ) -> [ImportedAppsEntry] {
        guard let names = listed ?? FileIO.listDirectory(directory) else { return [] }
        var out: [ImportedAppsEntry] = []
        for name in names.sorted() where !name.hasPrefix(".") && !name.hasSuffix(".json") {
            let path = directory + "/" + name
            switch kind(of: path, followLink: true, readFault: readFault) {
            case .success(let mode) where mode == S_IFDIR: break
            case .success: continue
            case .failure(let error) where error.errno == ENOENT || error.errno == ENOTDIR: continue
            case .failure(let error):
                // (an entry that cannot be looked at is not taken as gone: it may be a folder)
                let e = error.errno
                let issue = ManifestIssue(file: name, field: "", message: cannotBeChecked(e), fatal: true)
                var result = ImportResult(manifestJSON: nil, issues: [issue], manifest: nil, files: [], layout: .unknown)
                result.readErrors = [ImportReadError(path: path, errno: e)]
                out.append(ImportedAppsEntry(name: name, result: result))
                continue
            }
            if let why = fileCheck?(path) {
                let issue = ManifestIssue(file: name, field: "", message: why, fatal: true)
                out.append(
                    ImportedAppsEntry(
                        name: name, result: ImportResult(manifestJSON: nil, issues: [issue], manifest: nil, files: [], layout: .unknown)))
                continue
            }
            var (options, settingIssues, found, settingErrors) = settings(
                inDirectory: path, label: "\(name)/\(settingsFileName)", fileCheck: fileCheck, readFault: readFault)
            options.manifestFile = name
            var result: ImportResult
            if settingIssues.contains(where: \.fatal) {
                result = ImportResult(manifestJSON: nil, issues: [], manifest: nil, files: [], layout: .unknown)
            } else {
                result = importApp(at: path, options: options)
            }
            result.issues = settingIssues
                + result.issues.map { issue in
                    var i = issue
                    if i.file != options.origin && i.file != name { i.file = "\(name)/\(i.file)" }
                    return i
                }
            if found { result.files.insert(ImportedFile(path: settingsFileName, role: .settings), at: 0) }
            result.readErrors = settingErrors + result.readErrors
            out.append(ImportedAppsEntry(name: name, result: result))
        }
        return out
    }

    /// `importDirectories(inAppsDirectory:)` as (entry name, manifest JSON, issues).
    public static func manifestFiles(inAppsDirectory directory: String) -> [(
        name: String, json: JSONValue?, issues: [ManifestIssue]
    )] {
        importDirectories(inAppsDirectory: directory).map { ($0.name, $0.result.manifestJSON, $0.result.issues) }
    }
}

extension AppRegistry {
    /// Builds the registry from manifest files (name, bytes) and imported directories together, all
    /// taken in entry-name order (so precedence and conflicts work as for JSON files alone).
    public init(
        files: [(name: String, bytes: [UInt8])], imported: [ImportedAppsEntry], extraIssues: [ManifestIssue] = [],
        groupDirectories: [String] = []
    ) {
        enum Source {
            case bytes([UInt8])
            case imported(ImportResult)
        }
        var all: [(name: String, source: Source)] = files.map { ($0.name, .bytes($0.bytes)) }
        all += imported.map { ($0.name, .imported($0.result)) }
        all.sort { $0.name < $1.name }
        var manifests: [AppManifest] = []
        var issues = extraIssues
        var leftOut: [String: String] = [:]
        for entry in all {
            switch entry.source {
            case .bytes(let b):
                let (m, p) = ManifestDecoder.decode(bytes: b, file: entry.name)
                issues += p
                if let m { manifests.append(m) } else { AppRegistry.noteLeftOut(b, entry.name, p, into: &leftOut) }
            case .imported(let r):
                issues += r.issues
                if let m = r.manifest { manifests.append(m) }
            }
        }
        self.init(manifests: manifests, issues: issues, leftOut: leftOut, groupDirectories: groupDirectories)
    }
}
