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
    /// What was read, so a later load can keep it where a read fails for a reason that may pass.
    public var inputs = Inputs()
    /// Reads that failed for a reason that may pass (an I/O error, the open-file table full,
    /// memory short): "PATH: reason". Where an earlier load had read that input, it is used again
    /// (the app or document stays as it was, with a note); the broker loads again later.
    public var transientFailures: [String] = []

    /// The input files as read: what a load that cannot read them again keeps.
    public struct Inputs: Sendable {
        /// STATE/apps/*.json: file name → bytes.
        public var manifests: [String: [UInt8]] = [:]
        /// STATE/apps folders (imported projects and bundles), as imported.
        public var imported: [ImportedAppsEntry] = []
        /// STATE/associations/*.json: file name → bytes.
        public var associations: [String: [UInt8]] = [:]
        /// Empty inputs.
        public init() {}
    }

    /// Whether a read that failed with `errno` may succeed when tried again, with nothing
    /// changed by the user: an I/O error, the process's or system's open-file table full, memory
    /// or buffers short, an interrupted or timed-out call, a stale NFS handle. A file that is
    /// gone, a symlink, no permission, or not a file is what the user made it: not transient.
    public static func isTransient(_ errno: Int32) -> Bool {
        switch errno {
        case EIO, EMFILE, ENFILE, ENOMEM, ENOBUFS, EAGAIN, EINTR, ETIMEDOUT, ESTALE, EBUSY: return true
        default: return false
        }
    }

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
    /// says so). A path that cannot be checked (its `stat` fails, but not because it is gone) is
    /// not read either; `unchecked`, when given, is told its errno.
    public static func untrusted(_ path: String, unchecked: ((Int32) -> Void)? = nil) -> String? {
        switch check(path) {
        case .fine: return nil
        case .untrusted(let why): return why
        case .unchecked(let e):
            unchecked?(e)
            return ProjectImporter.cannotBeChecked(e) + "; not read"
        }
    }

    /// What `untrusted` found.
    enum InputCheck {
        case fine
        case untrusted(String)
        /// `stat` failed with this errno (not ENOENT or ENOTDIR: a path that is gone is fine here,
        /// reading it says so).
        case unchecked(Int32)
    }

    static func check(_ path: String) -> InputCheck {
        var st = stat()
        guard stat(path, &st) == 0 else {
            let e = errno
            return e == ENOENT || e == ENOTDIR ? .fine : .unchecked(e)
        }
        if let why = untrustedReason(st) { return .untrusted(why) }
        return .fine
    }

    static func untrustedReason(_ st: stat) -> String? {
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
    static func unreadableDirectory(_ path: String, errno err: Int32) -> String? {
        guard FileIO.exists(path) else { return nil }
        return err == ENOTDIR ? "is not a directory" : "cannot be read: \(String(cString: strerror(err)))"
    }

    /// Names in `path` (`FileIO.listDirectory`), or the errno it failed with.
    static func list(_ path: String, fault: Int32?) -> Result<[String], SystemError> {
        if let e = fault { return .failure(SystemError("opendir \(path)", errno: e)) }
        if let names = FileIO.listDirectory(path) { return .success(names) }
        return .failure(SystemError("opendir/readdir \(path)", errno: errno))
    }

    /// Reads the input file `path` (`FileIO.readFile`, or the injected errno). A read that fails
    /// for a reason that may pass is listed in `transient`, and `previous` (what an earlier load
    /// read of it), when there is one, stands for it (`kept`: why it was not read); otherwise
    /// the error is thrown.
    static func readInput(
        _ path: String, checked: InputCheck, limit: Int, fault: Int32?, previous: [UInt8]?, transient: inout [String]
    ) throws(SystemError) -> (bytes: [UInt8], kept: String?) {
        do throws(SystemError) {
            // (a file whose owner and mode cannot be checked is not read: its stat's failure is
            // the read's, transient or not)
            if case .unchecked(let e) = checked { throw SystemError("stat \(path)", errno: e) }
            if let e = fault { throw SystemError("open \(path)", errno: e) }
            return (try FileIO.readFile(path, limit: limit), nil)
        } catch {
            guard isTransient(error.errno) else { throw error }
            let why = String(cString: strerror(error.errno))
            transient.append("\(path): \(why)")
            guard let previous else { throw error }
            return (previous, why)
        }
    }

    /// The paths whose trust check failed for want of a `stat` during an import (with its errno).
    final class UncheckedPaths: @unchecked Sendable {  // (filled and read on the loading thread; the lock is for form)
        private let lock = Lock()
        private var list: [ImportReadError] = []
        func add(_ e: ImportReadError) { lock.withLock { list.append(e) } }
        var all: [ImportReadError] { lock.withLock { list } }
    }

    /// The end of the note on an imported folder kept as the previous load read it.
    static let keptImportNote = "the import read before is kept; read again in a moment"

    /// Reads and validates every input file. Problems are reported in the result, never thrown.
    /// A read that fails for a reason that may pass (`isTransient`) keeps what `previous` read
    /// of that input, if anything, and is listed in `transientFailures`. `readFault` (a test
    /// seam) fails the read of a path with the errno it gives.
    public static func load(
        stateDirectory: String, previous: Inputs? = nil, readFault: (@Sendable (String) -> Int32?)? = nil
    ) -> StateFiles {
        let appsDir = stateDirectory + "/apps"
        var files: [(name: String, bytes: [UInt8])] = []
        var readIssues: [ManifestIssue] = []
        var inputs = Inputs()
        var transient: [String] = []
        // (a directory that cannot be checked is not listed: its stat's failure is the listing's)
        var appsUntrusted: String? = nil
        var appsUnchecked: Int32? = nil
        switch check(appsDir) {
        case .untrusted(let why): appsUntrusted = why
        case .unchecked(let e): appsUnchecked = e
        case .fine: break
        }
        var appNames: [String] = []
        var keptAll = false
        if let why = appsUntrusted {
            readIssues.append(ManifestIssue(file: "apps", field: "", message: "\(appsDir) \(why): no manifest was read", fatal: true))
        } else {
            switch list(appsDir, fault: appsUnchecked ?? readFault?(appsDir)) {
            case .success(let names): appNames = names
            case .failure(let error):
                if isTransient(error.errno) {
                    transient.append("\(appsDir): \(String(cString: strerror(error.errno)))")
                    if let previous {
                        // The manifests read last time stand, as read then.
                        keptAll = true
                        inputs.manifests = previous.manifests
                        inputs.imported = previous.imported
                        for (name, bytes) in previous.manifests.sorted(by: { $0.key < $1.key }) { files.append((name, bytes)) }
                        readIssues.append(
                            ManifestIssue(
                                file: "apps", field: "",
                                message: "\(appsDir) cannot be read now (\(String(cString: strerror(error.errno)))): the manifests read before are kept; read again in a moment",
                                fatal: false))
                        break
                    }
                }
                if let why = unreadableDirectory(appsDir, errno: error.errno) {
                    readIssues.append(ManifestIssue(file: "apps", field: "", message: "\(appsDir) \(why): no manifest was read", fatal: true))
                }
            }
        }
        for name in appNames where name.hasSuffix(".json") && !name.hasPrefix(".") {
            let path = appsDir + "/" + name
            let checked = check(path)
            if case .untrusted(let why) = checked {
                readIssues.append(ManifestIssue(file: name, field: "", message: why, fatal: true))
                continue
            }
            do {
                let read = try readInput(
                    path, checked: checked, limit: 4 * 1024 * 1024, fault: readFault?(path), previous: previous?.manifests[name], transient: &transient)
                files.append((name, read.bytes))
                inputs.manifests[name] = read.bytes
                if let why = read.kept {
                    readIssues.append(
                        ManifestIssue(
                            file: name, field: "", message: "cannot be read now (\(why)): the version read before is kept; read again in a moment",
                            fatal: false))
                }
            } catch {
                readIssues.append(ManifestIssue(file: name, field: "", message: StateFiles.readProblem(error), fatal: true))
            }
        }
        // Folders (an .app bundle or an Xcode project) are imported from their Info.plist and entitlements.
        // A folder with a read that failed for a reason that may pass keeps what the previous
        // load imported from it, as a manifest file does (and is read again on the timer).
        if !keptAll && appsUntrusted == nil {
            // (a file or folder whose owner and mode cannot be checked, its stat failing, is not
            // read: that failure counts as its read's)
            let unchecked = UncheckedPaths()
            let importCheck: @Sendable (String) -> String? = { path in
                untrusted(path) { unchecked.add(ImportReadError(path: path, errno: $0)) }
            }
            inputs.imported = ProjectImporter.importDirectories(
                inAppsDirectory: appsDir, names: appNames, fileCheck: importCheck, readFault: readFault)
            let checks = unchecked.all
            for (i, entry) in inputs.imported.enumerated() {
                let folder = appsDir + "/" + entry.name
                let failures = entry.result.readErrors + checks.filter { $0.path == folder || $0.path.hasPrefix(folder + "/") }
                guard let failure = failures.first(where: { isTransient($0.errno) }) else { continue }
                let why = String(cString: strerror(failure.errno))
                transient.append("\(failure.path): \(why)")
                guard let before = previous?.imported.first(where: { $0.name == entry.name }) else { continue }
                var kept = before
                kept.result.issues.removeAll { !$0.fatal && $0.message.hasSuffix(StateFiles.keptImportNote) }
                kept.result.issues.append(
                    ManifestIssue(
                        file: entry.name, field: "",
                        message: "\(failure.path) cannot be read now (\(why)): \(StateFiles.keptImportNote)",
                        fatal: false))
                inputs.imported[i] = kept
            }
        }
        let registry = AppRegistry(
            files: files, imported: inputs.imported, extraIssues: readIssues,
            groupDirectories: FileIO.listDirectory(stateDirectory + "/groups") ?? [])
        let assocDir = stateDirectory + "/associations"
        var docs: [String: AssociationDocumentResult] = [:]
        var errors: [String: String] = [:]
        // (a directory that cannot be checked is not listed: its stat's failure is the listing's)
        var assocUntrusted: String? = nil
        var assocUnchecked: Int32? = nil
        switch check(assocDir) {
        case .untrusted(let why): assocUntrusted = why
        case .unchecked(let e): assocUnchecked = e
        case .fine: break
        }
        var assocNames: [String] = []
        var keptBytes: [String: [UInt8]] = [:]
        if let why = assocUntrusted {
            errors["associations"] = "\(assocDir) \(why): no association document was read"
        } else {
            switch list(assocDir, fault: assocUnchecked ?? readFault?(assocDir)) {
            case .success(let names): assocNames = names
            case .failure(let error):
                if isTransient(error.errno) {
                    transient.append("\(assocDir): \(String(cString: strerror(error.errno)))")
                    if let previous {
                        // The documents read last time stand, as read then.
                        keptBytes = previous.associations
                        assocNames = previous.associations.keys.sorted()
                        break
                    }
                }
                if let why = unreadableDirectory(assocDir, errno: error.errno) {
                    errors["associations"] = "\(assocDir) \(why): no association document was read"
                }
            }
        }
        for name in assocNames where name.hasSuffix(".json") && !name.hasPrefix(".") {
            // (a Unicode file name, `bücher.de.json`, is the document of the IDNA host)
            let written = String(name.dropLast(5))
            // Named as `applinks:` entries name it: a host, with `:PORT` when the entry has one.
            guard let host = AssociatedDomainEntry.documentDomain(written) else {
                errors[URLReference.idnaHost(written) ?? written.lowercased()] = "\(name): not a host name; an association document is named after its domain "
                    + "(DOMAIN.json, or DOMAIN:PORT.json for an applinks:DOMAIN:PORT entry)"
                continue
            }
            let path = assocDir + "/" + name
            var bytes = keptBytes[name]
            if bytes == nil {
                let checked = check(path)
                if case .untrusted(let why) = checked {
                    errors[host] = "\(name): \(why)"
                    docs[host] = .failure(AssociationDocumentError(key: "", reason: why))
                    continue
                }
                do {
                    bytes = try readInput(
                        path, checked: checked, limit: 8 * 1024 * 1024, fault: readFault?(path), previous: previous?.associations[name],
                        transient: &transient
                    ).bytes
                } catch {
                    errors[host] = "\(name): \(StateFiles.readProblem(error))"
                    docs[host] = .failure(AssociationDocumentError(key: "", reason: StateFiles.readProblem(error)))
                    continue
                }
            }
            guard let bytes else { continue }
            inputs.associations[name] = bytes
            let result = AssociationDocument.load(bytes)
            if case .failure(let e) = result { errors[host] = "\(name): \(e)" }
            docs[host] = result
        }
        var loaded = StateFiles(
            registry: registry, router: URLRouter(apps: registry.apps, associations: docs), associationErrors: errors)
        loaded.inputs = inputs
        loaded.transientFailures = transient
        return loaded
    }
}
