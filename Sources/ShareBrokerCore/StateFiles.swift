// Reading the broker's inputs from the state directory: app manifests (STATE/apps/*.json) and
// association documents (STATE/associations/HOST.json), compiled into the registry and the router.
// Used by the broker at start/reload and by the offline tools (`sharebroker explain`).

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
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

    /// Why an input file could not be read, in words (a symlink is named as one: files under the
    /// state directory are never opened through a symlink).
    static func readProblem(_ error: SystemError) -> String {
        if error.errno == ELOOP {
            return "is a symbolic link, and files under the state directory are not read through symlinks; copy the file here instead"
        }
        return "cannot read: \(error)"
    }

    /// Why an input at `path` (a manifest, an association document, a folder or file of an
    /// imported project, the `apps`/`associations` directories; symlinks followed to what is
    /// read) is not to be trusted: another user than this one or root owns it, or any user, or a
    /// group another user is in, may write it. Such input could make a broker run a `launch`
    /// command of someone else's as its own user; it is not read. nil: fine (or gone: reading it
    /// says so).
    public static func untrusted(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        if st.st_uid != getuid() && st.st_uid != 0 {
            return "belongs to uid \(st.st_uid), not to this user (uid \(getuid())) or root; not read (another user's input could make the broker run its launch command)"
        }
        if st.st_mode & S_IWOTH != 0 {
            return "is writable by every user; not read (chmod o-w it: another user's input could make the broker run its launch command)"
        }
        // Group-writable is fine for a group of this user alone (user private groups, umask 002).
        if st.st_mode & S_IWGRP != 0 && !Broker.groupIsThisUsersAlone(st.st_gid) {
            return "is writable by group \(st.st_gid), which other users are in; not read (chmod g-w it: another user's input could make the broker run its launch command)"
        }
        return nil
    }

    /// Why `path`, which could not be listed, is no readable directory; nil when it does not
    /// exist (no apps or documents yet is fine).
    static func unreadableDirectory(_ path: String) -> String? {
        let err = errno
        guard FileIO.exists(path) else { return nil }
        return err == ENOTDIR ? "is not a directory" : "cannot be read: \(String(cString: strerror(err)))"
    }

    /// Reads and validates every input file. Problems are reported in the result, never thrown.
    public static func load(stateDirectory: String) -> StateFiles {
        let appsDir = stateDirectory + "/apps"
        var files: [(name: String, bytes: [UInt8])] = []
        var readIssues: [ManifestIssue] = []
        let appsUntrusted = untrusted(appsDir)
        let appNames = appsUntrusted == nil ? FileIO.listDirectory(appsDir) : []
        if let why = appsUntrusted {
            readIssues.append(ManifestIssue(file: "apps", field: "", message: "\(appsDir) \(why): no manifest was read", fatal: true))
        } else if appNames == nil, let why = unreadableDirectory(appsDir) {
            readIssues.append(ManifestIssue(file: "apps", field: "", message: "\(appsDir) \(why): no manifest was read", fatal: true))
        }
        for name in appNames ?? [] where name.hasSuffix(".json") && !name.hasPrefix(".") {
            if let why = untrusted(appsDir + "/" + name) {
                readIssues.append(ManifestIssue(file: name, field: "", message: why, fatal: true))
                continue
            }
            do {
                files.append((name, try FileIO.readFile(appsDir + "/" + name, limit: 4 * 1024 * 1024)))
            } catch {
                readIssues.append(ManifestIssue(file: name, field: "", message: StateFiles.readProblem(error), fatal: true))
            }
        }
        // Folders (an .app bundle or an Xcode project) are imported from their Info.plist and entitlements.
        let imported = appsUntrusted == nil ? ProjectImporter.importDirectories(inAppsDirectory: appsDir, fileCheck: untrusted) : []
        let registry = AppRegistry(
            files: files, imported: imported, extraIssues: readIssues,
            groupDirectories: FileIO.listDirectory(stateDirectory + "/groups") ?? [])
        let assocDir = stateDirectory + "/associations"
        var docs: [String: AssociationDocumentResult] = [:]
        var errors: [String: String] = [:]
        let assocUntrusted = untrusted(assocDir)
        let assocNames = assocUntrusted == nil ? FileIO.listDirectory(assocDir) : []
        if let why = assocUntrusted {
            errors["associations"] = "\(assocDir) \(why): no association document was read"
        } else if assocNames == nil, let why = unreadableDirectory(assocDir) {
            errors["associations"] = "\(assocDir) \(why): no association document was read"
        }
        for name in assocNames ?? [] where name.hasSuffix(".json") && !name.hasPrefix(".") {
            // (a Unicode file name, `bücher.de.json`, is the document of the IDNA host)
            let written = String(name.dropLast(5))
            let host = URLReference.idnaHost(written) ?? written.lowercased()
            // Named as `applinks:` entries name it: a host, with `:PORT` when the entry has one.
            if host.isEmpty || host.contains("*") || AssociatedDomainEntry.problem(in: "applinks:" + host) != nil {
                errors[host] = "\(name): not a host name; an association document is named after its domain "
                    + "(DOMAIN.json, or DOMAIN:PORT.json for an applinks:DOMAIN:PORT entry)"
                continue
            }
            if let why = untrusted(assocDir + "/" + name) {
                errors[host] = "\(name): \(why)"
                docs[host] = .failure(AssociationDocumentError(key: "", reason: why))
                continue
            }
            do {
                let result = AssociationDocument.load(try FileIO.readFile(assocDir + "/" + name, limit: 8 * 1024 * 1024))
                if case .failure(let e) = result { errors[host] = "\(name): \(e)" }
                docs[host] = result
            } catch {
                errors[host] = "\(name): \(StateFiles.readProblem(error))"
                docs[host] = .failure(AssociationDocumentError(key: "", reason: StateFiles.readProblem(error)))
            }
        }
        return StateFiles(
            registry: registry, router: URLRouter(apps: registry.apps, associations: docs), associationErrors: errors)
    }
}
