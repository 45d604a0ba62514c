// `sharebroker install PATH`: imports an app from its iOS project files (.app bundle, Xcode project folder,
// Info.plist) or a JSON manifest, prints the manifest and issues, and writes STATE/apps/BUNDLEID.json.

import Foundation
import ShareCommandLine
import ShareProtocol
import ShareRouting
import ShareSystem

/// The `install` subcommand's description.
let installCommandSpec = CommandSpec(
    name: "install",
    abstract: "Import an app from its iOS project files (or a JSON manifest) into STATE/apps.",
    discussion: """
        PATH is a JSON manifest, a built .app bundle (Info.plist, *.entitlements / *.xcent, PlugIns/*.appex), \
        an Xcode project folder (target folders with Info.plist and .entitlements files; build, Pods and \
        hidden folders are skipped) or an app's Info.plist. XML and binary property lists are read. \
        $(NAME) build variables are taken from --set (TARGET:NAME=VALUE sets one for one target, TARGET being \
        the folder holding its Info.plist) and from PATH/sharebroker-import.json; an unresolved bundle ID \
        is an error, other unresolved values are skipped with a note. The manifest is printed on stdout, \
        issues on stderr (naming the file and key). Unless --dry-run, the manifest is written atomically \
        to STATE/apps/BUNDLEID.json; run 'shareclient reload' (or send SIGHUP to the broker) to load it. \
        Exit 0 when imported, 1 when the import has errors (nothing is written), 64 for usage errors (--app \
        given for anything but a project folder), 66 when --state names no directory (a broker creates its \
        state directory at its first start; the default one is created here too).
        """,
    options: [
        .option("state", valueName: "dir", help: "State directory to install into.", default: "as for serve"),
        .option("team-id", valueName: "id", help: "Team ID for universal links (TEAMID.BUNDLEID); beats the files'."),
        .option(
            "set", valueName: "name=value", help: "A build setting for $(NAME) in the plists (TARGET:NAME=VALUE: one target only).",
            repeatable: true),
        .option("app", valueName: "folder", help: "The app target's folder, when a project folder holds several apps."),
        .option("name", valueName: "file", help: "File name to write under STATE/apps ('.json' is added when it does not end so).", default: "BUNDLEID.json"),
        .flag("dry-run", help: "Import and show the result; write nothing."),
        .flag("json", help: "Print the result as one JSON object."),
    ],
    arguments: [ArgumentSpec("path", help: "A JSON manifest, .app bundle, Xcode project folder or Info.plist.")])

private func printOut(_ s: String) { FileHandle.standardOutput.write(Data(s.utf8)) }
private func printErr(_ s: String) { FileHandle.standardError.write(Data(s.utf8)) }

extension ImportLayout {
    /// "a JSON manifest", "an .app bundle", ...
    var article: String {
        switch self {
        case .jsonManifest: return "a JSON manifest"
        case .infoPlist: return "an Info.plist"
        case .appBundle: return "an .app bundle"
        case .projectFolder: return "an Xcode project folder"
        case .unknown: return "not an app"
        }
    }
}

/// The manifest with tokens hidden, for printing.
private func redacted(_ v: JSONValue) -> JSONValue {
    guard case .object(var o) = v else { return v }
    if o["token"] != nil { o["token"] = "(hidden)" }
    if case .array(let exts)? = o["extensions"] { o["extensions"] = .array(exts.map(redacted)) }
    return .object(o)
}

/// Runs `sharebroker install`.
func runInstall(_ cmd: ParsedCommand) throws -> Int32 {
    let path = cmd.argument("path")!
    let asJSON = cmd.flag("json")
    let dryRun = cmd.flag("dry-run")

    var variables: [String: String] = [:]
    for item in cmd.values("set") {
        guard let eq = item.firstIndex(of: "="), eq != item.startIndex else {
            throw cmd.usageError("option '--set' expects NAME=VALUE (or TARGET:NAME=VALUE), got '\(item)'")
        }
        variables[String(item[..<eq])] = String(item[item.index(after: eq)...])
    }
    var fileName = cmd.value("name")
    if let n = fileName {
        guard !n.isEmpty, !n.contains("/"), !n.hasPrefix(".") else {
            throw cmd.usageError("option '--name' expects a plain file name (no '/', not hidden), got '\(n)'")
        }
        if !n.hasSuffix(".json") { fileName = n + ".json" }
    }

    // A state directory named on the command line must be there: a typo would install where no
    // broker reads (the default one is created, as the broker does at its first start).
    if cmd.value("state")?.isEmpty == true { throw cmd.usageError("option '--state' needs a path, got an empty one") }
    if let given = cmd.value("state"), (try? FileIO.fileType(given, followSymlinks: true).get()) != S_IFDIR {
        printErr("sharebroker: error: the state directory \(given) \(FileIO.exists(given) ? "is not a directory" : "does not exist") (a broker creates its state directory when it first starts; check --state)\n")
        return 66  // (EX_NOINPUT, as for explain)
    }

    // Options: PATH/sharebroker-import.json first (when PATH is a folder), then the command line.
    var options = ImportOptions()
    var issues: [ManifestIssue] = []
    var isDir: ObjCBool = false
    if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue {
        let s = ProjectImporter.settings(inDirectory: path)
        issues += s.issues
        if s.found { options = s.options }
    }
    for (k, v) in variables { options.variables[k] = v }
    if let team = cmd.value("team-id") {
        options.teamID = team
        options.origin = "command line"
    }
    if let app = cmd.value("app") { options.app = app }

    let result: ImportResult
    if issues.contains(where: \.fatal) {
        result = ImportResult(manifestJSON: nil, issues: [], manifest: nil, files: [], layout: .unknown)
    } else {
        result = ProjectImporter.importApp(at: path, options: options)
    }
    issues += result.issues
    // (--app picks one of a project folder's apps: anything else holds one app, and a --app that
    // does not apply is a mistake to say, not to pass over)
    // (only the option: an "app" in PATH/sharebroker-import.json of an .app bundle is ignored,
    // as the broker ignores it when it imports the bundle from STATE/apps)
    if let app = cmd.value("app"), result.layout != .projectFolder, result.layout != .unknown {
        throw cmd.usageError("option '--app' picks an app target in an Xcode project folder; \(path) is \(result.layout.article) (drop --app '\(app)')")
    }
    let ok = !issues.contains(where: \.fatal) && result.manifestJSON != nil && result.manifest != nil

    // Where it goes, and what else in STATE/apps claims the same bundle IDs.
    let state = cmd.value("state") ?? DefaultPaths.state()
    let appsDir = state + "/apps"
    var target: String? = nil
    var conflicts: [String] = []
    var replaced = false
    if ok, let manifest = result.manifest {
        let name = fileName ?? "\(manifest.bundleID).json"
        target = appsDir + "/" + name
        replaced = FileIO.exists(appsDir + "/" + name)
        let ids = Set([manifest.bundleID] + manifest.extensions.map(\.bundleID))
        for other in FileIO.listDirectory(appsDir) ?? [] where other.hasSuffix(".json") && other != name && !other.hasPrefix(".") {
            guard let bytes = try? FileIO.readFile(appsDir + "/" + other, limit: 4 * 1024 * 1024) else { continue }
            guard let m = ManifestDecoder.decode(bytes: bytes, file: other).0 else { continue }
            let clash = ids.intersection([m.bundleID] + m.extensions.map(\.bundleID))
            if !clash.isEmpty {
                let winner = min(other, name)
                conflicts.append(
                    "\(other) also declares \(clash.sorted().joined(separator: ", ")); \(winner) comes first in name order and wins")
            }
        }
    }

    var written = false
    var writeError: String? = nil
    if ok, !dryRun, let target, let json = result.manifestJSON {
        var bytes: [UInt8]
        let unchangedJSON =
            result.layout == .jsonManifest && options.teamID == nil && options.overrides.isEmpty
        if unchangedJSON, let original = try? FileIO.readFile(path, limit: 4 * 1024 * 1024) {
            bytes = original  // a plain JSON manifest is copied as it is
        } else {
            bytes = Array(json.prettyText().utf8)
            bytes.append(0x0A)
        }
        do {
            try DefaultPaths.makeDirectories(appsDir)
            try FileIO.writeAtomically(target, bytes, mode: 0o600)
            written = true
        } catch {
            writeError = "cannot write \(target): \(error)"
        }
    }

    if asJSON {
        var o: JSONObject = [
            "ok": .bool(ok && writeError == nil), "path": .string(path), "layout": .string(result.layout.rawValue),
            "dryRun": .bool(dryRun),
        ]
        o["file"] = written ? .string(target!) : (dryRun && target != nil ? .string(target!) : .null)
        o["written"] = .bool(written)
        o["replaced"] = .bool((written || (dryRun && ok)) && replaced)  // (a dry run: would replace)
        o["manifest"] = result.manifestJSON.map(redacted) ?? .null
        o["issues"] = .array(issues.map(\.json))
        o["files"] = .array(
            result.files.map { f in
                var x: JSONObject = ["path": .string(f.path), "role": .string(f.role.rawValue)]
                if let d = f.detail { x["detail"] = .string(d) }
                return .object(x)
            })
        o["conflicts"] = .array(conflicts.map { .string($0) })
        if let writeError { o["error"] = .string(writeError) }
        printOut(JSONValue.object(o).compactText + "\n")
    } else {
        if let json = result.manifestJSON { printOut(redacted(json).prettyText() + "\n") }
        var err = ""
        for f in result.files { err += "sharebroker: \(f)\n" }
        for issue in issues { err += "sharebroker: \(issue.fatal ? "error" : "note"): \(issue)\n" }
        for c in conflicts { err += "sharebroker: warning: \(c)\n" }
        if !ok {
            err += "sharebroker: import failed; nothing was written\n"
        } else if let writeError {
            err += "sharebroker: error: \(writeError)\n"
        } else if dryRun {
            err += "sharebroker: dry run: would write \(target ?? "")\(replaced ? " (replacing the previous file)" : "")\n"
        } else if let target {
            err += "sharebroker: wrote \(target)\(replaced ? " (replaced the previous file)" : "")\n"
            err += "sharebroker: run 'shareclient reload' to load it (a running broker also reloads on SIGHUP)\n"
        }
        printErr(err)
    }
    if !ok { return 1 }
    return writeError == nil ? 0 : 1
}
