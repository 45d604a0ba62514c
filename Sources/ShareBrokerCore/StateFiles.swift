// Reading the broker's inputs from the state directory: app manifests (STATE/apps/*.json) and
// association documents (STATE/associations/HOST.json), compiled into the registry and the router.
// Used by the broker at start/reload and by the offline tools (`sharebroker explain`).

import ShareProtocol
import ShareRouting
import ShareSystem

/// What the state directory's input files compile to.
public struct StateFiles: Sendable {
    /// The registered apps, with manifest errors, warnings and conflicts.
    public var registry: AppRegistry
    /// The routing tables.
    public var router: URLRouter
    /// Association documents that failed to load: host → "FILE: reason".
    public var associationErrors: [String: String]

    /// Reads and validates every input file. Problems are reported in the result, never thrown.
    public static func load(stateDirectory: String) -> StateFiles {
        let appsDir = stateDirectory + "/apps"
        var files: [(name: String, bytes: [UInt8])] = []
        var readIssues: [ManifestIssue] = []
        for name in FileIO.listDirectory(appsDir) ?? [] where name.hasSuffix(".json") && !name.hasPrefix(".") {
            do {
                files.append((name, try FileIO.readFile(appsDir + "/" + name, limit: 4 * 1024 * 1024)))
            } catch {
                readIssues.append(ManifestIssue(file: name, field: "", message: "cannot read: \(error)", fatal: true))
            }
        }
        // Folders (an .app bundle or an Xcode project) are imported from their Info.plist and entitlements.
        let imported = ProjectImporter.importDirectories(inAppsDirectory: appsDir)
        let registry = AppRegistry(files: files, imported: imported, extraIssues: readIssues)
        let assocDir = stateDirectory + "/associations"
        var docs: [String: AssociationDocumentResult] = [:]
        var errors: [String: String] = [:]
        for name in FileIO.listDirectory(assocDir) ?? [] where name.hasSuffix(".json") && !name.hasPrefix(".") {
            let host = String(name.dropLast(5)).lowercased()
            do {
                let result = AssociationDocument.load(try FileIO.readFile(assocDir + "/" + name, limit: 8 * 1024 * 1024))
                if case .failure(let e) = result { errors[host] = "\(name): \(e)" }
                docs[host] = result
            } catch {
                errors[host] = "\(name): cannot read: \(error)"
                docs[host] = .failure(AssociationDocumentError(key: "", reason: "cannot read: \(error)"))
            }
        }
        return StateFiles(
            registry: registry, router: URLRouter(apps: registry.apps, associations: docs), associationErrors: errors)
    }
}
