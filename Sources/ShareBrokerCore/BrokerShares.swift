// The share-extension flow: share.targets, share.send, share.list, share.get, share.complete.
// Items are validated and typed, checked against activation rules, stored with their files as one
// unit in the group's directory, and (with `open`) announced to the containing app as an event.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareProtocol
import ShareRouting
import ShareStore
import ShareSystem

/// One shared item after validation: what the rules see and what is stored.
struct PreparedItem {
    /// The stored form (url/text as given; files as `file`, `name`, `size`), with its `type`.
    var stored: JSONObject
    /// The attachment the activation rules see (registeredTypeIdentifiers, primary first).
    var attachment: Attachment
    /// The file to store, for data/path items.
    var file: ShareFile?
    /// Byte size of the item's content.
    var size: Int
}

/// The files of a request's `path` items, opened and looked at on a worker thread (opening or
/// reading a file can block for long on a network or FUSE file system): each is opened
/// read-only and must be a regular file not on a pseudo file system; its size and first 4 KiB
/// (for typing) are read. The loop then takes each descriptor over (`outcomes`, by item index).
final class PathProbe: @unchecked Sendable {  // run by one worker thread, then used by the loop
    enum Outcome {
        /// Open (blocking mode), its size when checked, its first bytes.
        case opened(Int32, size: Int, head: [UInt8])
        /// Why it cannot be shared (completes "items[i].path 'P' ...").
        case failed(String)
    }

    let paths: [(index: Int, path: String)]
    var outcomes: [Int: Outcome] = [:]

    init(_ paths: [(index: Int, path: String)]) { self.paths = paths }

    func run() {
        for (i, path) in paths { outcomes[i] = PathProbe.look(at: path) }
    }

    static func look(at path: String) -> Outcome {
        // O_NONBLOCK: a FIFO's open must not wait for a writer (it is refused below anyway).
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return .failed("cannot be read: \(String(cString: strerror(currentErrno())))") }
        var st = stat()
        fstat(fd, &st)
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            FD.close(fd)
            return .failed("is not a regular file")
        }
        if let kind = Broker.pseudoFileSystem(fd) {
            // Their files say a size they do not have (0 for /proc's, 4096 for sysfs's), and
            // some block a read forever (trace_pipe).
            FD.close(fd)
            return .failed("is on \(kind), whose files have no trustworthy size; send its bytes as a data item")
        }
        var head = [UInt8](repeating: 0, count: 4096)
        let n = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        head = Array(head.prefix(max(0, n)))
        _ = fcntl(fd, F_SETFL, 0)
        return .opened(fd, size: Int(st.st_size), head: head)
    }

    /// Closes the descriptors nobody took over.
    func closeUnused() {
        for case .opened(let fd, _, _) in outcomes.values { FD.close(fd) }
        outcomes = [:]
    }

    // Work that ends after the broker stopped is neither finished nor cancelled by the loop (it
    // has ended): what it opened is closed when the last reference to it goes (the pool's, once
    // the work has run). The loop takes the descriptors it uses out of `outcomes`.
    deinit { closeUnused() }
}

extension Broker {
    /// The share.* methods.
    static func shareMethods() -> [MethodSpec] {
        [
            MethodSpec("share.targets", encoding: { b, c, p throws(RPCError) in try b.shareTargets(c, p) }),
            MethodSpec("share.send", roles: [.extension, .tool], encoding: { b, c, p throws(RPCError) in try b.shareSend(c, p) }),
            MethodSpec("share.list", roles: [.app, .extension]) { b, c, p throws(RPCError) in try b.shareList(c, p) },
            MethodSpec("share.get", roles: [.app, .extension], encoding: { b, c, p throws(RPCError) in try b.shareGet(c, p) }),
            MethodSpec("share.complete", roles: [.app, .extension], encoding: { b, c, p throws(RPCError) in try b.shareComplete(c, p) }),
            MethodSpec("share.read", roles: [.app, .extension], encoding: { b, c, p throws(RPCError) in try b.shareRead(c, p) }),
        ]
    }

    // MARK: Group stores

    /// Whether `groups` holds `group`, byte for byte (String equality would take the Kelvin sign
    /// U+212A for the 'K' of a listed group: canonical equivalence).
    static func lists(_ groups: [String], _ group: String) -> Bool {
        groups.contains { ExactKey.same($0, group) }
    }

    /// Why a group's share store could not be opened, bare: each caller words it for what it was
    /// doing (a send says nothing was stored; a read, that the shares cannot be read).
    enum ShareStoreOpening: Error {
        /// The name cannot name a directory.
        case invalidName
        /// The store's files cannot be used (a symlink, permissions, a damaged journal header...).
        case unusable(String)
    }

    /// The share store of a group, opened on first use.
    func openShareStore(_ group: String) throws(ShareStoreOpening) -> ShareRecordStore {
        if let s = shareStores[group] { return s }
        guard ManifestDecoder.isUsableGroupName(group) else { throw .invalidName }
        if let why = groupsDirectoryProblem() { throw .unusable(why) }
        do {
            let s = try ShareRecordStore(
                group: group, directory: groupDirectory(group), segmentLimit: config.journalSegmentLimit, turn: turn,
                counter: shareCounter)
            if let f = config.storeFaults { s.faultInjector = f }
            if let space = config.journalSpace { s.setJournalSpace(space) }
            shareStores[group] = s
            if s.orphansRemoved > 0 { log.log(.info, "\(group): removed \(s.orphansRemoved) orphaned share directories") }
            for note in s.recovery.notes { log.log(.warning, "recovery (\(group)): \(note)") }
            return s
        } catch {
            throw .unusable(error.message)
        }
    }

    /// -32602 for a name that cannot be a group's (it names a directory).
    static func invalidGroupName(_ group: String) -> RPCError {
        .invalidParams("Invalid params: '\(group)' is not a valid group name")
    }

    /// The share store of a group that is about to be written (share.send, share.complete):
    /// -32602 for a name that cannot be a group, -32005 when the store cannot be opened.
    func shareStore(_ group: String) throws(RPCError) -> ShareRecordStore {
        do { return try openShareStore(group) } catch {
            switch error {
            case .invalidName: throw Broker.invalidGroupName(group)
            case .unusable(let why): throw RPCError(.storageFailure, "Storage failure: \(why); nothing was stored")
            }
        }
    }

    /// STATE/groups/GROUP: the group's container.
    func groupDirectory(_ group: String) -> String { config.stateDirectory + "/groups/" + group }

    /// What is wrong with `STATE/groups` for a store about to be opened under it: it has been
    /// replaced by a symlink (nothing is written through one). Nil when it is usable or absent.
    func groupsDirectoryProblem() -> String? {
        let groups = config.stateDirectory + "/groups"
        guard FileIO.exists(groups) && !FileIO.isPlainDirectory(groups) else { return nil }
        return "\(groups) is not a plain directory (a symlink?)"
    }

    /// Closes the stores of groups no manifest lists (their journals' descriptors, the space
    /// they reserved ahead, a defaults suite's memory): a broker whose manifests keep gaining and
    /// dropping groups does not hold every group it ever opened. A group's shares stay open while
    /// any is pending (they count in `broker.status`); nothing is closed while a commit or file
    /// work is under way (then it is tried again once none is), and a group's defaults stay open
    /// while a connection still watches them (tried again when the last one goes). A group listed
    /// again is opened again on first use.
    func closeUnlistedGroups() {
        closeGroupsDue = false
        unlistedWatchedGroups = []
        guard inflight == nil, !turn.hasDirty, offLoop.isEmpty, resumeAfterCommit.isEmpty else {
            closeGroupsDue = true
            return
        }
        var listed: [String] = []
        for app in registry.apps {
            listed += app.appGroups
            for e in app.extensions { listed += e.appGroups }
        }
        let known = Set(listed.map(ExactKey.init))
        var closed = 0
        for (group, s) in shareStores where !known.contains(ExactKey(group)) && s.count == 0 {
            // (one with work of its own pending, compaction copies say, is tried again later)
            guard s.isIdle else {
                closeGroupsDue = true
                continue
            }
            s.prepareToClose()
            shareStores[group] = nil
            closed += 1
        }
        for (group, s) in defaults.stores where !known.contains(ExactKey(group)) {
            if defaults.watchers[group] != nil {
                unlistedWatchedGroups.insert(ExactKey(group))
                continue
            }
            guard s.isIdle else {
                closeGroupsDue = true
                continue
            }
            if s.lastCompactionError != nil { defaults.compactionErrors -= 1 }
            s.prepareToClose()
            defaults.stores[group] = nil
            closed += 1
        }
        if closed > 0 {
            // (the connections' cached stores: none may be written through once closed)
            for c in connections.values where c.lastShareStore?.isClosed == true { c.lastShareStore = nil }
            log.log(.info, "closed \(closed) stores of groups no manifest lists")
        }
    }

    /// Opens every group that has a directory, so recovery runs at start and counts are right.
    /// One that cannot be opened (a journal another user owns, a symlink) is logged: its shares
    /// are not "none" (share.list, share.get and share.send on it say -32005).
    func openExistingGroups() {
        for g in FileIO.listDirectory(config.stateDirectory + "/groups") ?? [] where ManifestDecoder.isUsableGroupName(g) {
            if FileIO.exists(groupDirectory(g) + "/files") || (FileIO.listDirectory(groupDirectory(g)) ?? []).contains(where: { $0.hasPrefix("shares-") }) {
                do { _ = try openShareStore(g) } catch {
                    if case .unusable(let why) = error {
                        log.log(.error, "cannot open the shares of group \(g): \(why); share.* on it fail with -32005 until it is fixed")
                    }
                }
            }
        }
    }

    /// The share store of a group the caller reads (share.list, share.get): nil when the group
    /// has no directory yet (no shares); -32005 when its shares exist but cannot be read (an
    /// empty answer would say they are gone).
    func readableShareStore(_ group: String) throws(RPCError) -> ShareRecordStore? {
        if let s = shareStores[group] { return s }
        guard FileIO.exists(groupDirectory(group)) else { return nil }
        do { return try openShareStore(group) } catch {
            switch error {
            case .invalidName: throw Broker.invalidGroupName(group)
            case .unusable(let why):
                throw RPCError(.storageFailure, "Storage failure: the shares of group '\(group)' cannot be read: \(why)")
            }
        }
    }

    /// Pending shares across groups (a running count kept by the stores).
    var pendingShareCount: Int { shareCounter.value }

    /// -32001 unless the session's bundle lists `group`.
    func requireGroupAccess(_ conn: Connection, _ group: String) throws(RPCError) {
        guard let bundle = conn.bundleID, Broker.lists(registry.appGroups(of: bundle), group) else {
            throw RPCError(.unauthorized, "Unauthorized: \(conn.bundleID ?? "this session") is not entitled to the group '\(group)'")
        }
    }

    // MARK: Items

    /// Validates and types the `items` param. With `store`, file contents are read for storing.
    func prepareItems(_ p: Params, conn: Connection, forStoring: Bool) throws(RPCError) -> [PreparedItem] {
        let count: Int
        var list: [JSONValue] = []
        let fast = p.shareSend?.items
        if let fast {
            count = fast.count  // never empty
        } else {
            guard let raw = p["items"] else { throw .invalidParams("Invalid params: 'items' is required (an array of items)") }
            guard case .array(let l) = raw else { throw .invalidParams("Invalid params: 'items' must be an array, got \(raw.typeName)") }
            guard !l.isEmpty else { throw .invalidParams("Invalid params: 'items' is empty: share at least one item") }
            list = l
            count = l.count
        }
        guard count <= config.maxFilesPerShare else {
            throw .invalidParams("Invalid params: \(count) items exceed the limit of \(config.maxFilesPerShare) per share")
        }
        var out: [PreparedItem] = []
        out.reserveCapacity(count)
        var total = 0
        var usedNames = Set<String>()
        var failure: RPCError? = nil
        for i in 0..<count {
            do throws(RPCError) {
                var item: PreparedItem
                if let fast {
                    switch fast[i].kind {
                    case .url: item = try prepareURLItem(fast[i].value, index: i, givenType: nil)
                    case .text: item = prepareTextItem(fast[i].value, givenType: nil)
                    }
                } else {
                    item = try prepareItem(list[i], index: i, conn: conn, forStoring: forStoring, usedNames: &usedNames)
                }
                total += item.size
                if total > config.maxShareBytes {
                    if case .descriptor(let fd, _)? = item.file?.source { FD.close(fd) }
                    item.file = nil
                    throw RPCError.invalidParams(
                        "Invalid params: the share is larger than the limit of \(config.maxShareBytes) bytes")
                }
                out.append(item)
            } catch {
                failure = error
                break
            }
        }
        if let failure {
            for item in out { if case .descriptor(let fd, _)? = item.file?.source { FD.close(fd) } }
            throw failure
        }
        return out
    }

    /// A URL item (`items[i].url`), typed `givenType` or by its scheme.
    func prepareURLItem(_ url: String, index i: Int, givenType: String?) throws(RPCError) -> PreparedItem {
        let ref: URLReference
        // (a URL written with non-ASCII characters or spaces is stored as the URI it names)
        do { ref = try URLReference(parsingLeniently: url) } catch {
            throw .invalidParams("Invalid params: items[\(i)].url: \(error.message)")
        }
        let a = ShareTyping.urlAttachment(ref.original, ref, given: givenType)
        return PreparedItem(
            stored: JSONObject(uniqueMembers: [(key: "url", value: .string(ref.original)), (key: "type", value: .string(a.primaryType))]),
            attachment: a, file: nil, size: ref.original.utf8.count)
    }

    /// A text item (`items[i].text`), typed `givenType` or plain text (plus a URL it is).
    func prepareTextItem(_ text: String, givenType: String?) -> PreparedItem {
        let a = ShareTyping.textAttachment(text, given: givenType)
        var stored: JSONObject = ["text": .string(text), "type": .string(a.primaryType)]
        if a.registeredTypeIdentifiers.count > 1 { stored["types"] = .array(a.registeredTypeIdentifiers.map { .string($0) }) }
        let urls = a.carriedURLs.isEmpty ? ShareTyping.urls(in: text) : a.carriedURLs
        if !urls.isEmpty { stored["urls"] = .array(urls.map { .string($0) }) }
        return PreparedItem(stored: stored, attachment: a, file: nil, size: text.utf8.count)
    }

    /// An item with its members set to null left out (`"name": null`, `"url": null` beside a
    /// `path`), as the optional top-level params are: clients that write every optional field.
    static func leavingOutNulls(_ o: JSONObject) -> JSONObject {
        o.members.contains(where: { $0.value == .null }) ? JSONObject(uniqueMembers: o.members.filter { $0.value != .null }) : o
    }

    func prepareItem(
        _ v: JSONValue, index i: Int, conn: Connection, forStoring: Bool, usedNames: inout Set<String>
    ) throws(RPCError) -> PreparedItem {
        guard case .object(let raw) = v else { throw .invalidParams("Invalid params: items[\(i)] must be an object, got \(v.typeName)") }
        let o = Broker.leavingOutNulls(raw)
        var givenType: String? = nil
        if let t = o["type"] {
            guard case .string(let s) = t, !s.isEmpty else { throw .invalidParams("Invalid params: items[\(i)].type must be a UTI string") }
            givenType = s
        }
        var kind = ""
        var kinds = 0
        for k in Broker.itemKinds where o[k] != nil {
            kind = k
            kinds += 1
        }
        guard kinds == 1 else {
            let given = Broker.itemKinds.filter { o[$0] != nil }
            throw .invalidParams(
                "Invalid params: items[\(i)] must have exactly one of url, text, data (+name) or path; got \(given.isEmpty ? "none" : given.joined(separator: ", "))")
        }
        switch kind {
        case "url":
            guard case .string(let url)? = o["url"] else { throw .invalidParams("Invalid params: items[\(i)].url must be a string") }
            return try prepareURLItem(url, index: i, givenType: givenType)
        case "text":
            guard case .string(let text)? = o["text"] else { throw .invalidParams("Invalid params: items[\(i)].text must be a string") }
            return prepareTextItem(text, givenType: givenType)
        case "data":
            guard case .string(let b64)? = o["data"] else { throw .invalidParams("Invalid params: items[\(i)].data must be a base64 string") }
            guard let bytes = Base64.decode(b64, urlSafe: false) else { throw .invalidParams("Invalid params: items[\(i)].data is not valid base64") }
            var name: String? = nil
            if let n = o["name"] {
                guard case .string(let s) = n else { throw .invalidParams("Invalid params: items[\(i)].name must be a string") }
                name = s
            }
            let a = ShareTyping.fileAttachment(name: name, head: Array(bytes.prefix(4096)), given: givenType)
            let fileName = ShareTyping.uniqueName(ShareTyping.safeFileName(name, type: a.primaryType), used: &usedNames)
            return PreparedItem(
                stored: ["file": .string(fileName), "name": .string(name.flatMap(ShareTyping.displayName) ?? fileName), "type": .string(a.primaryType), "size": .int(bytes.count)],
                attachment: a, file: forStoring ? ShareFile(name: fileName, source: .bytes(bytes)) : nil, size: bytes.count)
        default:
            guard case .string(let path)? = o["path"] else { throw .invalidParams("Invalid params: items[\(i)].path must be a string") }
            guard path.hasPrefix("/") else { throw .invalidParams("Invalid params: items[\(i)].path '\(path)' must be absolute") }
            guard !path.utf8.contains(0) else {
                // A C path ends at the first NUL: the rest would be silently ignored.
                throw .invalidParams("Invalid params: items[\(i)].path contains a NUL character")
            }
            // A caller of the broker's own user (or root) gets what that user can read, symlinks
            // followed (the checks below are on the file actually opened). Another user's caller
            // (a socket opened to more users) gets no path item at all: the broker would resolve
            // the path with its own rights, through directories that caller may not search, and
            // opening it could have effects (a FIFO's writer released) or tell what exists there.
            // Such a caller sends the file's bytes as a `data` item.
            if Broker.isOtherUser(conn) {
                throw RPCError(
                    .invalidParams,
                    "Invalid params: items[\(i)].path: this broker runs as another user (uid \(ProcessInfoLite.uid)) and does not open "
                        + "files for \(Broker.callerUID(conn)); send the file's bytes as a data item ({\"data\": BASE64, \"name\": ...})",
                    data: ["reason": "pathItemsRefused", "item": .int(i)])
            }
            // Opened and looked at off the loop (`PathProbe`, before the handler ran again).
            guard let outcome = pathProbe?.outcomes.removeValue(forKey: i) else {
                throw RPCError(.internalError, "Internal error: items[\(i)].path '\(path)' was not read")
            }
            let fd: Int32, size: Int, head: [UInt8]
            switch outcome {
            case .failed(let why): throw .invalidParams("Invalid params: items[\(i)].path '\(path)' \(why)")
            case .opened(let f, let n, let h): (fd, size, head) = (f, n, h)
            }
            var keep = false
            defer { if !keep { FD.close(fd) } }
            let base = String(path.split(separator: "/").last ?? "file")
            var a = ShareTyping.fileAttachment(name: base, head: head, given: givenType)
            a.kind = .file
            let fileName = ShareTyping.uniqueName(ShareTyping.safeFileName(base, type: a.primaryType), used: &usedNames)
            keep = forStoring
            return PreparedItem(
                stored: ["file": .string(fileName), "name": .string(base), "type": .string(a.primaryType), "size": .int(size)],
                attachment: a, file: forStoring ? ShareFile(name: fileName, source: .descriptor(fd, size: size)) : nil, size: size)
        }
    }

    /// The members that say what an item is (exactly one per item).
    static let itemKinds = ["url", "text", "data", "path"]

    /// The name of the pseudo file system `fd` is on (proc, sysfs, debugfs, tracefs, ...), if it
    /// is on one (Linux; nil elsewhere).
    static func pseudoFileSystem(_ fd: Int32) -> String? {
        #if os(Linux)
            let type = FileIO.fileSystemType(fd)
            guard type >= 0 else { return nil }
            switch UInt64(truncatingIfNeeded: type) & 0xFFFF_FFFF {
            case 0x9fa0: return "procfs"
            case 0x6265_6572: return "sysfs"
            case 0x6462_6720: return "debugfs"
            case 0x7472_6163: return "tracefs"
            case 0x7363_6673: return "securityfs"
            case 0x6367_7270, 0x0027_e0eb: return "a cgroup file system"
            case 0x6265_6570: return "configfs"
            case 0xcafe_4a11: return "bpffs"
            case 0xde5e_81e4: return "efivarfs"
            default: return nil
            }
        #else
            return nil
        #endif
    }


    // MARK: Targets

    /// Share targets (share and action extensions) whose rule accepts all the items.
    func acceptingTargets(_ items: [PreparedItem]) -> [ExtensionTarget] {
        var result: [ExtensionTarget] = []
        for t in registry.extensionTargets where t.ext.isShareTarget {
            if ShareTyping.accepts(activationRules[t.ext.bundleID], items: items).accepted { result.append(t) }
        }
        return result
    }

    static func targetJSON(_ t: ExtensionTarget) -> JSONValue {
        ["extension": .string(t.ext.bundleID), "app": .string(t.app.bundleID), "name": .string(t.ext.name)]
    }

    func shareTargets(_ conn: Connection, _ p: Params) throws(RPCError) -> MethodResult {
        if let later = readPathsFirst(conn, p) { return later }
        let items = try prepareItems(p, conn: conn, forStoring: false)
        return .value(["targets": .array(acceptingTargets(items).map(Broker.targetJSON))])
    }

    // MARK: Path items, off the loop

    /// When `p` has `path` items and their files have not been read yet: reads them off the loop
    /// (`PathProbe`), then runs the method's handler again with what was read (`pathProbe`).
    /// Opening or reading a file may block for long (a hung network or FUSE file system).
    /// (No closure is made unless there are files to read: share.send's hot path allocates none.)
    func readPathsFirst(_ conn: Connection, _ p: Params) -> MethodResult? {
        guard pathProbe == nil, p.shareSend == nil, case .array(let list)? = p["items"], list.count <= config.maxFilesPerShare
        else { return nil }
        // (another user's caller gets no path items at all: prepareItem says so)
        if Broker.isOtherUser(conn) { return nil }
        var paths: [(index: Int, path: String)] = []
        for (i, v) in list.enumerated() {
            // Only an item that is a path item and nothing else (prepareItem refuses the others
            // before they would need their file).
            guard case .object(let raw) = v else { continue }
            let o = Broker.leavingOutNulls(raw)
            guard case .string(let path)? = o["path"], path.hasPrefix("/"), !path.utf8.contains(0),
                o["url"] == nil, o["text"] == nil, o["data"] == nil
            else { continue }
            paths.append((i, path))
        }
        if paths.isEmpty { return nil }
        let probe = PathProbe(paths)
        let method = p.method
        return suspendRequest(
            work: { probe.run() },
            finish: { b, c throws(RPCError) in
                b.pathProbe = probe
                defer {
                    b.pathProbe = nil
                    probe.closeUnused()
                }
                guard let spec = b.methods[method] else { throw RPCError(.methodNotFound, "Method not found: '\(method)'") }
                try spec.authorize(c)  // (a reload may have ended the session meanwhile)
                return try spec.handler(b, c, p)
            },
            cancel: { _ in probe.closeUnused() })
    }

    // MARK: share.send

    func shareSend(_ conn: Connection, _ p: Params) throws(RPCError) -> MethodResult {
        if let later = readPathsFirst(conn, p) { return later }
        let named: String?
        let groupParam: String?
        var openURL: String? = nil
        var openContaining = false
        if let fast = p.shareSend {  // the commonest shape, read without a tree: the same meaning
            named = fast.extensionID
            groupParam = fast.group
            switch fast.open {
            case .absent, .flag(false): break
            case .flag(true): openContaining = true
            case .url(let u): openURL = u
            }
        } else {
            named = try p.optionalString("extension")
            groupParam = try p.optionalString("group")
            switch p["open"] {
            case nil, .null?, .bool(false)?: break
            case .bool(true)?: openContaining = true
            case .string(let u)?: openURL = u
            case let v?: throw .invalidParams("Invalid params: 'open' must be true, false or a URL string, got \(v.typeName)")
            }
        }
        // Who sends: an extension as itself, or a tool as the share sheet.
        let chosen: ExtensionTarget
        var items: [PreparedItem]
        if conn.role == .extension {
            guard let me = conn.bundleID else {
                throw RPCError(.unauthorized, "Unauthorized: this extension session has no registered extension")
            }
            let found: ExtensionTarget
            let rule: LoadedActivationRule?
            if let cached = conn.sender, cached.generation == registryGeneration {
                (found, rule) = (cached.target, cached.rule)
            } else {
                guard let target = registry.appExtension(me) else {
                    throw RPCError(.unauthorized, "Unauthorized: this extension session has no registered extension")
                }
                (found, rule) = (target, activationRules[target.ext.bundleID])
                conn.sender = (registryGeneration, target, rule)
            }
            if let named, named != me {
                throw RPCError(.unauthorized, "Unauthorized: an extension sends as itself ('\(me)'), not as '\(named)'")
            }
            guard found.ext.isShareTarget else {
                throw RPCError(
                    .notAccepted,
                    "Not accepted: \(me) is a '\(found.ext.point)' extension; only share (com.apple.share-services) and action (com.apple.ui-services) extensions take shares")
            }
            chosen = found
            items = try prepareItems(p, conn: conn, forStoring: true)
            let verdict = ShareTyping.accepts(rule, items: items)
            guard verdict.accepted else {
                closeFiles(items)
                throw RPCError(.notAccepted, "Not accepted: \(me)'s activation rule does not accept these items: \(verdict.reason)")
            }
        } else {
            items = try prepareItems(p, conn: conn, forStoring: true)
            if let named {
                guard let found = registry.appExtension(named) else {
                    closeFiles(items)
                    throw RPCError(.notFound, "Not found: no extension '\(named)' is registered")
                }
                guard found.ext.isShareTarget else {
                    closeFiles(items)
                    throw RPCError(
                        .notAccepted,
                        "Not accepted: \(named) is a '\(found.ext.point)' extension; only share (com.apple.share-services) and action (com.apple.ui-services) extensions take shares")
                }
                let verdict = ShareTyping.accepts(activationRules[found.ext.bundleID], items: items)
                guard verdict.accepted else {
                    closeFiles(items)
                    throw RPCError(.notAccepted, "Not accepted: \(named)'s activation rule does not accept these items: \(verdict.reason)")
                }
                chosen = found
            } else {
                let candidates = acceptingTargets(items)
                guard candidates.count == 1 else {
                    closeFiles(items)
                    if candidates.isEmpty {
                        throw RPCError(.notAccepted, "Not accepted: no share or action extension accepts these items")
                    }
                    throw RPCError(
                        .notAccepted,
                        "Not accepted: \(candidates.count) extensions accept these items; name one with 'extension'",
                        data: ["candidates": .array(candidates.map(Broker.targetJSON))])
                }
                chosen = candidates[0]
            }
        }
        // The group: one of the extension's, default its first.
        guard let group = groupParam ?? chosen.ext.appGroups.first else {
            closeFiles(items)
            throw RPCError(.unauthorized, "Unauthorized: \(chosen.ext.bundleID) is not entitled to any app group")
        }
        guard Broker.lists(chosen.ext.appGroups, group) else {
            closeFiles(items)
            throw RPCError(.unauthorized, "Unauthorized: \(chosen.ext.bundleID) is not entitled to the group '\(group)'")
        }
        // The event to queue, validated before anything is stored.
        var route: (app: String, fields: JSONObject)? = nil
        let shareID = randomHex(12, prefix: "sh-")
        if openContaining {
            guard let scheme = chosen.app.urlSchemes.first else {
                closeFiles(items)
                throw .invalidParams("Invalid params: open: true needs \(chosen.app.bundleID) to declare a URL scheme; pass open: URL instead")
            }
            route = (chosen.app.bundleID, ["kind": "openURL", "url": .string("\(scheme)://open-from-share?share=\(shareID)"), "via": "scheme"])
        } else if let openURL {
            let d = router.resolve(openURL, fallback: nil)
            guard case .routed(let app, let via, let kind, let u) = d else {
                closeFiles(items)
                throw decisionError(d, parameter: "open")
            }
            var f: JSONObject = ["kind": .string(kind.rawValue)]
            if kind == .openURL { f["url"] = .string(u) } else {
                f["activityType"] = "NSUserActivityTypeBrowsingWeb"
                f["webpageURL"] = .string(u)
            }
            f["via"] = .string(via.rawValue)
            route = (app, f)
        }
        // (the event's URL, which sets its size for the quota, checked here and again when the
        // share's files are written)
        let eventURL = route.flatMap { ($0.fields["url"] ?? $0.fields["webpageURL"])?.stringValue } ?? ""
        if let route {
            let events = try requireStore()
            do { try checkEventQuota(events, route.app, url: eventURL, source: chosen.ext.bundleID) } catch {
                closeFiles(items)
                throw error
            }
        }
        let store: ShareRecordStore
        if let last = conn.lastShareStore, last.group == group, !last.isClosed {
            store = last  // (a store closed since is left: `shareStores` has the group's store, if any)
        } else {
            do { store = try shareStore(group) } catch {
                closeFiles(items)
                throw error
            }
            conn.lastShareStore = store
        }
        // The group's quota on what its pending shares hold (shares being written count too).
        var shareBytes = 0
        for item in items { shareBytes += item.size }
        // (no hashing of the group's name when no share is being written, as nearly always)
        let held = store.pendingBytes + (shareBytesInFlight.isEmpty ? 0 : shareBytesInFlight[group] ?? 0)
        if shareBytes > config.maxGroupShareBytes - held {
            closeFiles(items)
            throw RPCError(
                .storageFailure,
                "Storage failure: the pending shares of \(group) hold \(held) bytes and this one \(shareBytes) more, over the group's quota of \(config.maxGroupShareBytes) bytes (--max-group-share-bytes); nothing was stored. Its app makes room by completing the shares it has handled (share.complete)")
        }
        let files = items.compactMap(\.file)
        if files.isEmpty {
            return try storeShare(
                conn, chosen: chosen, group: group, store: store, shareID: shareID, items: items.map(\.stored), files: [],
                route: route, filesWritten: false, bytes: shareBytes)
        }
        // The files are written (and fsynced) off the loop; the share is stored once they are.
        let writer = store.filesWriter(id: shareID, files: files)
        let stored = items.map(\.stored)
        let generation = registryGeneration
        shareBytesInFlight[group, default: 0] += shareBytes
        return suspendRequest(
            work: { writer.run() },
            finish: { b, c throws(RPCError) in
                b.releaseShareBytes(group, shareBytes)
                if let e = writer.error { throw RPCError(.storageFailure, "Storage failure: \(e.message); nothing was stored") }
                do throws(RPCError) {
                    try b.methods["share.send"]?.authorize(c)  // (a reload may have ended the session)
                    if b.registryGeneration != generation { try b.recheckSender(chosen, group: group, routeApp: route?.app) }
                    if let route, let events = b.store { try b.checkEventQuota(events, route.app, url: eventURL, source: chosen.ext.bundleID) }
                    return try b.storeShare(
                        c, chosen: chosen, group: group, store: store, shareID: shareID, items: stored, files: files,
                        route: route, filesWritten: true, bytes: shareBytes)
                } catch {
                    writer.discard()
                    throw error
                }
            },
            cancel: { b in
                b.releaseShareBytes(group, shareBytes)
                writer.discard()
            })
    }

    /// A share whose files were being written is stored or dropped: its bytes stop counting as
    /// in flight for its group's quota.
    func releaseShareBytes(_ group: String, _ bytes: Int) {
        let left = (shareBytesInFlight[group] ?? 0) - bytes
        shareBytesInFlight[group] = left > 0 ? left : nil
    }

    /// After a manifest reload while a share's files were written: its extension must still be
    /// there, in the same app, entitled to the group, and the app its event is for still known.
    func recheckSender(_ chosen: ExtensionTarget, group: String, routeApp: String?) throws(RPCError) {
        guard let now = registry.appExtension(chosen.ext.bundleID), now.app.bundleID == chosen.app.bundleID,
            Broker.lists(now.ext.appGroups, group)
        else {
            throw RPCError(
                .notFound,
                "Not found: a manifest reload changed \(chosen.ext.bundleID) while the share's files were written (it is no longer registered in \(chosen.app.bundleID) and entitled to '\(group)'); nothing was stored")
        }
        if let routeApp, registry.app(routeApp) == nil {
            throw RPCError(.noHandler, "No handler: a manifest reload removed \(routeApp) while the share's files were written; nothing was stored")
        }
    }

    /// Stores a validated share (its files written already when `filesWritten`) and queues the
    /// event `open` asked for; the reply waits for the commit.
    func storeShare(
        _ conn: Connection, chosen: ExtensionTarget, group: String, store: ShareRecordStore, shareID: String,
        items storedItems: [JSONObject], files: [ShareFile], route: (app: String, fields: JSONObject)?, filesWritten: Bool,
        bytes: Int
    ) throws(RPCError) -> MethodResult {
        var pendingRoute: (app: String, fields: JSONObject)? = nil
        // The event `open` queues is written into the share's record too (its id is known in
        // advance: the loop is single-threaded), so recovery can re-create it if a crash lands
        // between the share's commit and the event's (the share commits first).
        var openEvent: JSONObject? = nil
        if var route {
            let events = try requireStore()
            route.fields["sourceApp"] = .string(chosen.ext.bundleID)
            route.fields["shareID"] = .string(shareID)
            let seq = events.nextSequence
            var body: JSONObject = ["id": .string("ev-\(seq)")]
            for m in route.fields { body[m.key] = m.value }
            openEvent = ["app": .string(route.app), "id": .string("ev-\(seq)"), "seq": .number(String(seq)), "body": .object(body)]
            pendingRoute = route
        }
        let stored: StoredShare
        do {
            stored = try store.add(
                id: shareID, extensionID: chosen.ext.bundleID, app: chosen.app.bundleID, created: shareClock.now(),
                items: storedItems, files: files, openEvent: openEvent, filesWritten: filesWritten,
                bytes: bytes)
        } catch {
            throw RPCError(.storageFailure, "Storage failure: \(error.message); nothing was stored")
        }
        var result = JSONObjectWriter(capacity: 256)
        result.string("shareID", stored.id)
        result.string("extension", chosen.ext.bundleID)
        result.string("app", chosen.app.bundleID)
        result.string("group", group)
        if let route = pendingRoute, let events = self.store {
            let event: StoredEvent
            do { event = try events.enqueue(app: route.app, fields: route.fields) } catch {
                // Take the share back in the same turn: its record leaves the uncommitted batch
                // (no disk space needed, unlike a completion record).
                if !store.retract(stored.id) {
                    do { _ = try store.complete(stored.id) } catch let undoError {
                        // Cannot happen (the share was just added); the turn's commit must not keep it.
                        log.log(.error, "cannot take back share \(stored.id): \(undoError.message)")
                        store.failTurn("share \(stored.id) could not be taken back: \(undoError.message)")
                    }
                }
                throw RPCError(.storageFailure, "Storage failure: \(error.message); nothing was stored")
            }
            turnEvents.append(event)  // delivered once the commit is durable (finishCommit)
            let shareID = stored.id
            let takeBack: () -> StoreError? = {
                do throws(StoreError) { _ = try store.complete(shareID) } catch { return error }
                return nil
            }
            // (its take-back failed: the share stays, durable, answered -32603; its event, lost
            // with the event queues' failed commit, is queued again with its id and sequence
            // number, for the next commit, with a compensation of its own: should that commit
            // fail too, the share is taken back. (Once: queued again each time, a commit that
            // keeps failing, as one behind a cut the group's journal cannot make, would be tried
            // for ever, the loop and shutdown never done.) A take-back written but not cut off
            // (a cut owed) may be replayed at the next start, the share then gone: the event waits
            // for the cut (`redosAfterCut`), its id kept from other events meanwhile.
            func requeue() {
                // (Only while the share is there: a request accumulated since, whose
                // share was in the group's batch that the failed take-back rolled back,
                // has neither.)
                guard store.share(shareID) != nil, let events = self.store, !events.isPending(app: event.app, id: event.id)
                else { return }
                if store.failedRecordsMayRemain {
                    events.reserveSequence(through: event.seq)
                    redosAfterCut.append((store, requeue))
                    return
                }
                do throws(StoreError) {
                    try events.restore(app: event.app, id: event.id, seq: event.seq, body: event.body)
                    if let again = events.pending(for: event.app).first(where: { $0.id == event.id }) { turnEvents.append(again) }
                    // (no withdraw: the share is durable, a failed commit of its group does
                    // not take it away)
                    compensations.append(Compensation(failing: ObjectIdentifier(events), undoes: store, undo: takeBack))
                } catch {
                    log.log(.error, "cannot queue again event \(event.id) of share \(shareID), whose take-back failed: \(error.message)")
                }
            }
            compensations.append(
                Compensation(
                    failing: ObjectIdentifier(events), undoes: store,
                    undo: takeBack,
                    redo: requeue,
                    withdraw: { [unowned self] in
                        // (the share's group failed a commit and rolled it back before it was
                        // durable: its event, pending with the next commit, must not announce it)
                        guard let events = self.store, events.isPending(app: event.app, id: event.id) else {
                            turnEvents.removeAll { $0 === event }
                            return
                        }
                        do throws(StoreError) {
                            _ = try events.ack(app: event.app, ids: [event.id])
                            turnEvents.removeAll { $0 === event }
                        } catch {
                            // It must not be committed: the next commit of the event queues fails
                            // (what it holds is rolled back, its requests answer -32005). Until
                            // that commit begins the event is still pending: it stays among the
                            // turn's events, which a subscriber's backlog leaves out (they come
                            // after their commit, and this one delivers none).
                            log.log(.error, "cannot take back event \(event.id) of share \(shareID), whose share could not be stored: \(error.message)")
                            events.failTurn("event \(event.id) of share \(shareID), whose share could not be stored, could not be taken back: \(error.message)")
                        }
                    }))
            if subscribers[route.app] == nil { launchIfNeeded(route.app) }
            result.string("eventID", event.id)
        }
        log.log(.debug, "share \(stored.id) from \(chosen.ext.bundleID) stored in \(group) (\(storedItems.count) items)", connection: conn.id)
        return .encoded(result.finishInPlace())
    }

    /// After recovery: re-creates the events that shares announced but that were never written
    /// (a crash between the share's commit and the event's). An event whose sequence number is
    /// below the recovered one was written once (and acked since): it is not re-created. At start
    /// they are committed at once; when the event queues open while the loop runs (they could not
    /// be at start), with the turn's commit, and delivered after it as the turn's other events.
    func restoreAnnouncedEvents() {
        guard let events = store else { return }
        var restored = 0
        var restoredIDs: [String: Set<String>] = [:]
        for (_, shares) in shareStores {
            for s in shares.all {
                guard let e = s.openEvent, let app = e["app"]?.stringValue, let id = e["id"]?.stringValue,
                    case .number(let seqText)? = e["seq"], let seq = UInt64(seqText), case .object(let body)? = e["body"],
                    seq >= events.recoveredNextSequence, !events.isPending(app: app, id: id)
                else { continue }
                do {
                    try events.restore(app: app, id: id, seq: seq, body: body)
                    restored += 1
                    if loopStarted { restoredIDs[app, default: []].insert(id) }
                } catch {
                    log.log(.error, "cannot re-create event \(id) of share \(s.id): \(error.message)")
                }
            }
        }
        if restored > 0 {
            if loopStarted {
                for (app, ids) in restoredIDs { turnEvents += events.pending(for: app).filter { ids.contains($0.id) } }
            } else {
                for (_, e) in turn.commitAll() { log.log(.error, "commit failed: \(e.message)") }
            }
            log.log(.info, "recovery: re-created \(restored) events announced by shares but not yet written")
        }
    }

    func closeFiles(_ items: [PreparedItem]) {
        for item in items { if case .descriptor(let fd, _)? = item.file?.source { FD.close(fd) } }
    }

    // MARK: share.list / get / complete

    func shareJSON(_ s: StoredShare, store: ShareRecordStore) -> JSONValue {
        var items: [JSONValue] = []
        for var item in s.items {
            if let file = item["file"]?.stringValue {
                item["path"] = .string(store.path(of: s.id, file: file))
                item["file"] = nil
            }
            items.append(.object(item))
        }
        return [
            "shareID": .string(s.id), "extension": .string(s.extensionID), "app": .string(s.app), "group": .string(s.group),
            "created": .string(s.created), "items": .array(items),
        ]
    }

    func shareList(_ conn: Connection, _ p: Params) throws(RPCError) -> JSONValue {
        let groups: [String]
        if let g = try p.optionalString("group") {
            try requireGroupAccess(conn, g)
            groups = [g]
        } else {
            groups = registry.appGroups(of: conn.bundleID ?? "")
        }
        var lists: [(shares: [StoredShare], store: ShareRecordStore, next: Int)] = []
        // Without `group`, a group whose shares cannot be read does not hide the others': it is
        // named in `unreadableGroups` (with `group`, it is the answer: -32005).
        var unreadable: [JSONValue] = []
        let usable = groups.filter(ManifestDecoder.isUsableGroupName)
        for g in usable {
            let opened: ShareRecordStore?
            do { opened = try readableShareStore(g) } catch {
                if usable.count == 1 { throw error }
                unreadable.append(["group": .string(g), "error": .string(error.message)])
                continue
            }
            guard let store = opened else { continue }
            let all = store.all
            store.joinCommit(ofListed: all)  // (answered once what it shows is durable)
            // (a share shown before its event is durable is taken back if the event's commit fails)
            for s in all.reversed() {
                guard store.isUncommitted(s) else { break }  // (those not yet durable are the newest)
                if joinEventCommit(of: s, store: store) { break }
            }
            if !all.isEmpty { lists.append((all, store, 0)) }
        }
        // Oldest first across the groups too: each group's list is in the order its shares were
        // stored; they are merged by `created` (fixed-width UTC, so text order is time order;
        // ties keep the groups' order).
        var out: [JSONValue] = []
        out.reserveCapacity(lists.reduce(0) { $0 + $1.shares.count })
        while true {
            var pick = -1
            for i in lists.indices where lists[i].next < lists[i].shares.count {
                if pick < 0 || lists[i].shares[lists[i].next].created < lists[pick].shares[lists[pick].next].created { pick = i }
            }
            if pick < 0 { break }
            out.append(shareJSON(lists[pick].shares[lists[pick].next], store: lists[pick].store))
            lists[pick].next += 1
        }
        if unreadable.isEmpty { return ["shares": .array(out)] }
        return ["shares": .array(out), "unreadableGroups": .array(unreadable)]
    }

    func findShare(_ conn: Connection, _ p: Params) throws(RPCError) -> (StoredShare, ShareRecordStore) {
        let id = try p.string("shareID")
        // The caller's own groups first (one or a few): the answer costs O(1) however many groups
        // the broker holds; only an id not found there is looked for elsewhere (-32001 vs -32002).
        // A group of the caller's whose shares cannot be read is skipped; if the id is found
        // nowhere, that is the answer (-32005: the share may be there), not "not found".
        var unreadable: RPCError? = nil
        if let bundle = conn.bundleID {
            // (the open stores first: a group that cannot be opened is tried again only when the
            // id is in none of them)
            for g in registry.appGroups(of: bundle) {
                if let store = shareStores[g], let s = store.share(id) { return (s, store) }
            }
            for g in registry.appGroups(of: bundle) where shareStores[g] == nil && ManifestDecoder.isUsableGroupName(g) {
                let store: ShareRecordStore?
                do { store = try readableShareStore(g) } catch {
                    if unreadable == nil { unreadable = error }
                    continue
                }
                if let store, let s = store.share(id) { return (s, store) }
            }
        }
        for (g, store) in shareStores {
            if let s = store.share(id) {
                try requireGroupAccess(conn, g)
                return (s, store)
            }
        }
        if let unreadable { throw unreadable }
        throw Broker.notFoundError(id)
    }

    /// `findShare`, except that "not found" for a share whose completion is not durable yet (in
    /// one of the caller's groups) waits for that commit: the share comes back if it fails, and
    /// the answer is -32005 then (nil share: the error is the answer).
    func findShareOrWait(_ conn: Connection, _ p: Params) throws(RPCError) -> (StoredShare, ShareRecordStore)? {
        do { return try findShare(conn, p) } catch {
            guard error.code == ErrorCode.notFound.rawValue, let id = try? p.string("shareID"), let bundle = conn.bundleID else { throw error }
            var joined = false
            for g in registry.appGroups(of: bundle) {
                if let store = shareStores[g], store.joinCommit(ofCompletion: id) { joined = true }
            }
            if joined { return nil }
            throw error
        }
    }

    func shareGet(_ conn: Connection, _ p: Params) throws(RPCError) -> MethodResult {
        guard let (s, store) = try findShareOrWait(conn, p) else { return .error(try Broker.notFoundError(p)) }
        store.joinCommit(of: s)  // (a share being stored is shown once it is durable, or -32005)
        joinEventCommit(of: s, store: store)
        return .value(shareJSON(s, store: store))
    }

    /// A share not durable yet that announces itself (`open`) is taken back when its event's
    /// commit fails (`Compensation`), its own commit durable or not: an answer showing it waits
    /// for the event queues' commit too (a request that touched only the group's store would be
    /// answered a success, `settleDurable`, showing a share that is gone). True when it joined.
    @discardableResult
    func joinEventCommit(of s: StoredShare, store: ShareRecordStore) -> Bool {
        guard s.openEvent != nil, store.isUncommitted(s), let events = self.store else { return false }
        turn.join(events)  // (waits for it; changes nothing: ties the group's commit to no other)
        return true
    }

    func shareComplete(_ conn: Connection, _ p: Params) throws(RPCError) -> MethodResult {
        guard let (s, store) = try findShareOrWait(conn, p) else { return .error(try Broker.notFoundError(p)) }
        do { _ = try store.complete(s.id) } catch {
            throw RPCError(.storageFailure, "Storage failure: \(error.message); nothing was changed")
        }
        return .value(["completed": true])
    }

    /// The "not found" answer for the share `p` names.
    static func notFoundError(_ p: Params) throws(RPCError) -> RPCError { notFoundError(try p.string("shareID")) }

    /// The "not found" answer for share `id`.
    static func notFoundError(_ id: String) -> RPCError { RPCError(.notFound, "Not found: no pending share '\(id)'") }

    /// Most bytes one `share.read` returns (its reply holds them in base64: 4/3 as many).
    static let shareReadLimit = 4 << 20
    /// What `share.read` returns when it is not told how much.
    static let shareReadDefault = 1 << 20

    /// `share.read {shareID, item, offset?, length?}` → `{data, offset, size, eof}`: bytes of a
    /// pending share's file item, base64, for a caller that cannot open the item's `path` (an
    /// app of another user than the broker's: the group directory is the broker's, 0700).
    /// Group access as for share.get; the read (and its base64) runs off the loop, as all file
    /// work does. The reply counts against the output caps before it is made: a read gets at
    /// most what fits (the caller reads on from where it ends), and -32007 when nothing does.
    func shareRead(_ conn: Connection, _ p: Params) throws(RPCError) -> MethodResult {
        guard let (s, store) = try findShareOrWait(conn, p) else { return .error(try Broker.notFoundError(p)) }
        guard let v = p["item"], !v.isNull else { throw .invalidParams("Invalid params: 'item' (the index of a file item) is required") }
        guard let index = v.intValue, index >= 0, index < s.items.count else {
            throw .invalidParams(
                "Invalid params: 'item' must be the index of one of the share's \(s.items.count) items (0 to \(s.items.count - 1)), got \(v.compactText)")
        }
        guard let file = s.items[index]["file"]?.stringValue else {
            throw .invalidParams("Invalid params: item \(index) of share '\(s.id)' is not a file (its value is in share.get's answer)")
        }
        let offset = try p.optionalCount("offset") ?? 0
        var length = try p.optionalCount("length", max: Broker.shareReadLimit) ?? Broker.shareReadDefault
        // Room for the reply: under the connection's cap, and under its fair share while all
        // connections' output (with the reads under way) is over the broker's budget.
        // (a batch's earlier replies count too: they are not the connection's output yet)
        let unread = conn.unreadOutput + batchPendingOutput
        var room = config.effectiveMaxOutputBuffer - unread
        if outputMeter.bytes + batchPendingOutput + shareReadOutputReserved + Broker.base64Size(length) > config.maxTotalOutput {
            room = min(room, fairOutputShare - unread)
        }
        length = min(length, max(0, (room - 256) / 4 * 3))
        if length == 0 && room < 256 + 4 {
            rejectedOverQuota += 1
            throw RPCError(
                .tooManyRequests,
                "Too many unread replies: \(unread) bytes of output wait for this connection to read them; read them before reading more of the share. Not run")
        }
        let reserved = Broker.base64Size(length) + 256
        shareReadOutputReserved += reserved
        let shareID = s.id
        let reader = FileChunkReader(path: store.path(of: shareID, file: file), offset: offset, length: length)
        return suspendRequest(
            work: { reader.run() },
            finish: { b, _ throws(RPCError) in
                b.shareReadOutputReserved -= reserved
                // (rolled back meanwhile, its commit failed: whatever was read was never stored)
                if s.neverStored {
                    throw RPCError(.storageFailure, "Storage failure: share '\(shareID)' could not be stored (its commit failed while it was read)")
                }
                if let problem = reader.problem {
                    // (completed meanwhile, by another connection: gone, not a storage fault)
                    if reader.missing && store.share(shareID) == nil {
                        throw RPCError(.notFound, "Not found: share '\(shareID)' was completed while it was read")
                    }
                    throw RPCError(.storageFailure, "Storage failure: cannot read item \(index) of share '\(shareID)': \(problem)")
                }
                // (bytes of a share being stored go out once its record is durable, or -32005)
                if !store.isClosed {
                    store.joinCommit(of: s)
                    b.joinEventCommit(of: s, store: store)
                }
                return .value([
                    "data": .string(reader.base64), "offset": .int(offset), "size": .int(reader.size),
                    "eof": .bool(offset + reader.count >= reader.size),
                ])
            },
            cancel: { b in b.shareReadOutputReserved -= reserved })
    }

    /// Bytes of `n` bytes in base64 (padded).
    static func base64Size(_ n: Int) -> Int { (n + 2) / 3 * 4 }

    // MARK: Helpers

    /// `prefix` followed by `bytes` random bytes in lowercase hex (share IDs: `sh-` + 24 digits).
    func randomHex(_ bytes: Int, prefix: String = "") -> String {
        // Share IDs are drawn from the kernel's CSPRNG, 4 KiB at a time: one getrandom per
        // ~340 shares instead of one per byte (a syscall that costs microseconds in a VM).
        if randomPool.count - randomPoolIndex < bytes {
            randomPool = [UInt8](repeating: 0, count: 4096)
            if !SecureRandom.fill(&randomPool) {  // no kernel generator: the standard library's (also the system CSPRNG)
                var g = SystemRandomNumberGenerator()
                for i in randomPool.indices { randomPool[i] = g.next() }
            }
            randomPoolIndex = 0
        }
        let digits: StaticString = "0123456789abcdef"
        let from = randomPoolIndex
        let p = prefix.utf8.count
        randomPoolIndex += bytes
        return randomPool.withUnsafeMutableBufferPointer { pool in
            // Written straight into the string's storage (no intermediate array).
            let id = String(unsafeUninitializedCapacity: p + bytes * 2) { out in
                var o = 0
                for c in prefix.utf8 {
                    out[o] = c
                    o += 1
                }
                digits.withUTF8Buffer { d in
                    for i in from..<(from + bytes) {
                        out[o] = d[Int(pool[i] >> 4)]
                        out[o + 1] = d[Int(pool[i] & 15)]
                        o += 2
                    }
                }
                return o
            }
            // Used bytes are overwritten so they can never be handed out (or read back) again.
            for i in from..<(from + bytes) { pool[i] = 0 }
            return id
        }
    }
}


/// Reads up to `length` bytes at `offset` of a regular file, and encodes them in base64 (on a
/// worker thread: `share.read`).
final class FileChunkReader: @unchecked Sendable {  // run on one thread, then read on the loop
    let path: String
    let offset: Int
    let length: Int
    /// The bytes read, in base64.
    private(set) var base64 = ""
    /// How many bytes were read.
    private(set) var count = 0
    /// The file's size.
    private(set) var size = 0
    private(set) var problem: String? = nil
    /// The file was not there (ENOENT).
    private(set) var missing = false

    init(path: String, offset: Int, length: Int) {
        self.path = path
        self.offset = offset
        self.length = length
    }

    func run() {
        // (non-blocking open: a FIFO put there would hold the thread for ever)
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            missing = errno == ENOENT
            problem = String(cString: strerror(errno))
            return
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            problem = String(cString: strerror(errno))
            return
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            problem = "it is not a regular file"
            return
        }
        size = Int(st.st_size)
        let want = offset >= size ? 0 : min(length, size - offset)
        var out = [UInt8](repeating: 0, count: want)
        var got = 0
        while got < want {
            let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, want - got, off_t(offset + got)) }
            if n < 0 {
                if errno == EINTR { continue }
                problem = String(cString: strerror(errno))
                return
            }
            if n == 0 { break }
            got += n
        }
        count = got
        base64 = Base64.encode(out[0..<got])
    }
}
