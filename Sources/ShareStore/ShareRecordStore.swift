// The shares of one app group, kept inside the group's directory (STATE/groups/GROUP/): records in
// the `shares` journal, each share's files in files/SHAREID/. A share becomes visible only with its
// durable record; files without a record are removed at recovery, so a crash leaves no half share.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareProtocol
import ShareSystem

/// One stored share.
///
/// Only the loop thread touches shares (`segment` changes when compaction carries a share forward).
public final class StoredShare: @unchecked Sendable, Equatable {
    /// The share's id, e.g. `sh-5f0c…`.
    public let id: String
    /// The extension that sent it.
    public let extensionID: String
    /// The containing app.
    public let app: String
    /// The group it is stored in.
    public let group: String
    /// Creation time, ISO 8601 UTC.
    public let created: String
    /// The items as stored: url/text items as given (+type); file items carry `file` (name inside
    /// the share's directory), `name`, `type`, `size`.
    public let items: [JSONObject]
    /// The event `open` queued with it: `{app, id, seq, body}` (nil without `open`).
    public let openEvent: JSONObject?
    /// What it holds, in bytes: its files' sizes and its URLs' and texts' lengths (what the
    /// group's share quota counts).
    public let bytes: Int
    /// The journal segment holding the share's record (the newest copy, once compaction carried it).
    var segment = 0
    /// Its place in its group's arrival order: where its first record lies in the journal
    /// (`ShareRecordStore.place`). Copies carried forward by compaction sit in the journal after
    /// younger shares; they carry it (`n`), and replay puts them back by it.
    var n = 0
    /// The commit of its store that makes its record durable (`ShareRecordStore.batchesTaken`
    /// + 1 when it was added; 0 for a share read back at start).
    var batch: UInt64 = 0
    /// Set when its record was taken out before it was ever durable (a failed commit's rollback,
    /// or `retract`): a reference kept elsewhere (a read under way) tells it was never stored.
    public internal(set) var neverStored = false

    // A class, not a struct: a share sits in its store's table and in the undo log, and is
    // handed to the broker; one reference each instead of seven retained fields per copy
    // (callgrind: about 500 instructions less per share.send).

    /// Creates a share record.
    public init(
        id: String, extensionID: String, app: String, group: String, created: String, items: [JSONObject],
        openEvent: JSONObject? = nil, bytes: Int? = nil
    ) {
        self.id = id
        self.extensionID = extensionID
        self.app = app
        self.group = group
        self.created = created
        self.items = items
        self.openEvent = openEvent
        self.bytes = bytes ?? StoredShare.bytes(of: items)
    }

    /// The bytes `items` hold: each file item's `size`, each URL's or text's length.
    public static func bytes(of items: [JSONObject]) -> Int {
        var n = 0
        for item in items {
            if case .number(let size)? = item["size"], let v = Int(size), v > 0 {
                n += v
            } else if case .string(let u)? = item["url"] {
                n += u.utf8.count
            } else if case .string(let t)? = item["text"] {
                n += t.utf8.count
            }
        }
        return n
    }

    /// Field by field (two records of the same share compare equal; where they lie does not count).
    public static func == (a: StoredShare, b: StoredShare) -> Bool {
        a === b
            || (a.id == b.id && a.extensionID == b.extensionID && a.app == b.app && a.group == b.group
                && a.created == b.created && a.items == b.items && a.openEvent == b.openEvent)
    }
}

/// A file to store with a share: its safe name and its bytes (or a source descriptor to copy).
public struct ShareFile {
    /// The file name inside the share's directory (already made safe by the caller).
    public var name: String
    /// The source.
    public var source: Source
    /// Where the bytes come from.
    public enum Source {
        /// Bytes in memory (a `data` item).
        case bytes([UInt8])
        /// An open descriptor to copy from (a `path` item), and the size it had when it was
        /// checked: exactly that many bytes are copied (a file that grew meanwhile is cut there,
        /// so the share-size limit holds; one that shrank fails the copy). Closed by the store.
        case descriptor(Int32, size: Int)
    }
    /// Creates a file entry.
    public init(name: String, source: Source) {
        self.name = name
        self.source = source
    }
}

/// Writes a new share's files (and fsyncs them and their directory) on whatever thread runs it,
/// so a large copy never holds up the broker's loop. Made by `ShareRecordStore.filesWriter`.
public final class ShareFilesWriter: @unchecked Sendable {  // run by one thread, then read by the loop
    /// The share's file directory (`GROUP/files/ID`).
    public let directory: String
    let files: [ShareFile]
    let groupDirectory: String
    let parentDirectory: String
    let faults: (@Sendable (JournalFaultPoint) -> Int32?)?
    /// Why writing failed (nothing is left behind then), after `run`.
    public private(set) var error: StoreError? = nil
    private var ran = false

    init(
        directory: String, files: [ShareFile], groupDirectory: String, parentDirectory: String,
        faults: (@Sendable (JournalFaultPoint) -> Int32?)?
    ) {
        self.directory = directory
        self.files = files
        self.groupDirectory = groupDirectory
        self.parentDirectory = parentDirectory
        self.faults = faults
    }

    /// Writes the files (closing their source descriptors).
    public func run() {
        ran = true
        do {
            try ShareRecordStore.writeFiles(
                files, into: directory, groupDirectory: groupDirectory, parentDirectory: parentDirectory, faults: faults)
        } catch {
            self.error = error
            removeDirectory()
        }
    }

    /// Removes `directory` unless a directory above it has been replaced by a symlink meanwhile
    /// (removing through it would reach outside the state directory; an orphan left behind is
    /// removed at the next start).
    private func removeDirectory() {
        if ShareRecordStore.isPlainPath(groupDirectory, parent: parentDirectory) { ShareRecordStore.removeTree(directory) }
    }

    /// Takes back what `run` wrote (the share will not be stored), or closes the sources when it
    /// never ran. Call it once `run` has returned, or when it never will.
    public func discard() {
        if ran {
            removeDirectory()
        } else {
            ShareRecordStore.closeSources(files)
        }
    }
}

/// Pending shares across the stores that share it (the broker's `pendingShares`, without a walk
/// over every group). Loop thread only.
public final class ShareCounter {
    /// Pending shares.
    public private(set) var value = 0
    /// A counter at zero.
    public init() {}
    func add(_ n: Int) { value += n }
}

/// The shares of one group.
public final class ShareRecordStore: TurnParticipant, SegmentCompacting {
    enum RecordType: UInt8 {
        case share = 1
        case complete = 2
        /// A live share copied forward by compaction (same payload as `share`; its old segment goes).
        case carried = 3
    }

    enum Undo {
        case removeShare(String)
        case restoreShare(StoredShare)
    }

    /// The group.
    public let group: String
    /// The group's directory.
    public let directory: String
    let journal: Journal
    let turn: TurnLog?
    var shares: [String: StoredShare] = [:]
    /// Counts this store's pending shares along with other stores' (optional).
    let counter: ShareCounter?
    /// The ids of the pending shares, oldest first, among ids of shares removed since: removal only
    /// takes the share out of `shares` (O(1); `all` skips the ids it no longer finds), and a
    /// completion that is rolled back finds its id still in place. `compactOrder` drops the
    /// removed ids once they outnumber the pending ones (keeping any a rollback could restore).
    var order: [String] = []
    /// Most shares copied forward by one quiet commit (tests lower it).
    var carryChunk = 4096
    /// Live shares and records per journal segment (compaction deletes segments without live shares).
    var ledger = SegmentLedger()
    var undo: [Undo] = []
    /// The share `add` stored last in this turn and where its record starts (for `retract`).
    var lastAdded: (id: String, mark: Int, hasFiles: Bool)? = nil
    /// Set by `failTurn`: the reason this turn's commit fails.
    var failedTurn: String? = nil
    /// Shares compaction copied forward, pending (joining the next commit), then in flight.
    var carryPending: CarriedCopies<StoredShare>? = nil
    var carryInflight: CarriedCopies<StoredShare>? = nil
    /// Commits begun (`beginCommit`) and the last one found durable: a share whose `batch` is
    /// above `batchesDurable` is not on disk yet.
    var batchesTaken: UInt64 = 0
    var batchesDurable: UInt64 = 0

    /// True when nothing of the store waits for a commit or is being written (it may be closed).
    public var isIdle: Bool {
        !journal.hasPending && !journal.batchInFlight && undo.isEmpty && carryPending == nil && carryInflight == nil
            && failedTurn == nil
    }

    /// Before the store is let go (its journal's descriptors close with it): its journal gives
    /// back the space it reserved ahead, and the store is marked closed (a reference kept
    /// elsewhere must not be written through: the group's next store would share its files).
    public func prepareToClose() {
        journal.trimReserved()
        removeFilesOfCutRecords()
        isClosed = true
    }

    /// True once `prepareToClose` ran.
    public private(set) var isClosed = false

    /// True when compaction's copies wait for the next commit (up to 4,096 records: the broker
    /// hands such a commit to its sync worker rather than writing it itself).
    public var pendingIncludesUpkeep: Bool { carryPending != nil }

    public var failedRecordsMayRemain: Bool { journal.hasOwedCutBack }

    /// Set at shutdown: no more copies are made (what is pending is written; the rest waits for
    /// the next start).
    public var carryingPaused = false
    var createdDirs: [String] = []
    var completedDirs: [String] = []
    /// What recovery found.
    public private(set) var recovery = RecoveryReport()
    /// What the pending shares hold (`StoredShare.bytes`), for the group's quota.
    public private(set) var pendingBytes = 0
    /// Orphaned file directories removed at recovery (files of shares that never became durable).
    public private(set) var orphansRemoved = 0

    /// The participant's name in logs.
    public var participantName: String { "shares of \(group)" }

    /// Opens the group's shares (creating the directory), replaying the journal and removing orphans.
    public init(
        group: String, directory: String, segmentLimit: Int? = nil, turn: TurnLog?, counter: ShareCounter? = nil
    ) throws(StoreError) {
        self.counter = counter
        self.group = group
        self.directory = directory
        self.turn = turn
        journal = try Journal(directory: directory, name: "shares")
        if let segmentLimit { journal.segmentLimit = segmentLimit }
        do throws(SystemError) {
            let created = try DefaultPaths.makeDirectories(directory + "/files")
            // (its entry durable before a share's files are: they are reached through it)
            if let (p, e) = DefaultPaths.syncParents(of: created) { throw SystemError("fsync \(p)", errno: e) }
        } catch {
            throw StoreError("cannot create \(directory)/files", error)
        }
        recovery = try journal.replay { rec in
            ledger.records[rec.segment, default: 0] += 1
            guard let value = try? JSONParser.parseBuffer(rec.payload), case .object(let o) = value else { return }
            switch RecordType(rawValue: rec.type) {
            case .share?, .carried?:
                guard let s = ShareRecordStore.decode(o) else { return }
                s.segment = rec.segment
                if let known = shares[s.id] {
                    // A copy compaction made before a crash kept the old segment from going: the
                    // share lives in its newest copy now (its contents, its segment; its place).
                    ledger.live[known.segment, default: 0] -= 1
                    ledger.live[rec.segment, default: 0] += 1
                    s.n = known.n
                    shares[s.id] = s
                    return
                }
                // A share's place is its record's; a copy's is the original's, carried in `n`
                // (never later than the copy itself: a foreign journal's number cannot put it
                // after shares written later).
                let here = ShareRecordStore.place(segment: rec.segment, offset: rec.offset)
                s.n = here
                if rec.type == RecordType.carried.rawValue, case .number(let text)? = o["n"], let n = Int(text), n >= 0 {
                    s.n = min(n, here)
                }
                shares[s.id] = s
                order.append(s.id)
                ledger.live[rec.segment, default: 0] += 1
            case .complete?:
                if let id = o["id"]?.stringValue, let s = shares.removeValue(forKey: id) {
                    ledger.live[s.segment, default: 0] -= 1
                    compactOrder()
                }
            case nil: return
            }
        }
        // Pending ids only, each once (a hand-edited journal could name an id again after completing it).
        var seen = Set<String>(minimumCapacity: shares.count)
        order.removeAll { shares[$0] == nil || !seen.insert($0).inserted }
        counter?.add(shares.count)
        pendingBytes = shares.values.reduce(0) { $0 + $1.bytes }
        if zip(order, order.dropFirst()).contains(where: { shares[$0]!.n > shares[$1]!.n }) {
            // Copies sit in the journal after shares younger than them: arrival order again (the
            // journal's order among equal numbers, which only a foreign journal has).
            order = order.enumerated().map { (shares[$1]!.n, $0, $1) }.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2)
        }
        // Files without a durable record are leftovers of a crash: remove them (never through a
        // `files` or group directory that is a symlink: that would delete outside the state
        // directory).
        guard ShareRecordStore.isPlainPath(directory, parent: parentDirectory) else { return }
        for name in FileIO.listDirectory(directory + "/files") ?? [] where shares[name] == nil {
            ShareRecordStore.removeTree(directory + "/files/" + name)
            orphansRemoved += 1
        }
    }

    /// A record's place in its journal, in the order of writing: segment, then offset.
    /// (Offsets below 2^40: a segment grows past its limit only by what arrives while it is
    /// written, and rolls at most at 1 GiB.)
    static func place(segment: Int, offset: Int) -> Int { segment << 40 | offset }

    static func decode(_ o: JSONObject) -> StoredShare? {
        guard let id = o["id"]?.stringValue, let ext = o["extension"]?.stringValue, let app = o["app"]?.stringValue,
            let group = o["group"]?.stringValue, let created = o["created"]?.stringValue,
            let items = o["items"]?.arrayValue
        else { return nil }
        return StoredShare(
            id: id, extensionID: ext, app: app, group: group, created: created, items: items.compactMap(\.objectValue),
            openEvent: o["openEvent"]?.objectValue)
    }

    /// Pending shares, oldest first.
    public var all: [StoredShare] { order.compactMap { shares[$0] } }

    /// The journal's segment numbers, oldest first (tests watch compaction through it).
    public var journalSegments: [Int] { journal.segments }

    /// Takes off a failed commit's records still owed a cut (`Journal.settleOwedCutBack`);
    /// false when they still cannot be.
    @discardableResult
    public func settleOwedCutBack() -> Bool {
        let settled = journal.settleOwedCutBack()
        removeFilesOfCutRecords()
        return settled
    }

    /// The files of shares whose records a failed commit could not take off the journal
    /// (`Journal.hasOwedCutBack`): kept while the records may come back at replay.
    var filesOfOwedRecords: [String] = []

    /// Removes the files of `filesOfOwedRecords` once their records are cut.
    func removeFilesOfCutRecords() {
        guard !filesOfOwedRecords.isEmpty, !journal.hasOwedCutBack else { return }
        for d in filesOfOwedRecords { removeShareFiles(d) }
        filesOfOwedRecords.removeAll()
    }

    /// Share directories in `files/` whose removal failed (an I/O error, say) although no record
    /// needs them (a completed, refused, retracted or rolled-back share's): removed at a later commit of the group (else at the next start, which removes
    /// files without a record).
    public private(set) var leftoverFiles: [String] = []

    /// Removes the directory of a share no record needs any more; one that cannot be removed
    /// now is kept in `leftoverFiles`, to be removed later.
    func removeShareFiles(_ dir: String) {
        if faultInjector?(.removeFiles) != nil || !ShareRecordStore.removeTree(dir) { leftoverFiles.append(dir) }
    }

    /// Tries `leftoverFiles` again (not through a `files/` or group directory a symlink
    /// replaced meanwhile).
    func removeLeftoverFiles() {
        guard !leftoverFiles.isEmpty, plainPath else { return }
        let dirs = leftoverFiles
        leftoverFiles.removeAll()
        // (a share with that id stored since owns the directory now: 96 random bits make that
        // all but impossible, but its files must never go)
        for d in dirs where shares[String(d.split(separator: "/").last ?? "")] == nil { removeShareFiles(d) }
    }

    /// Number of pending shares.
    public var count: Int { shares.count }

    /// A share by id.
    public func share(_ id: String) -> StoredShare? { shares[id] }

    /// The absolute path of a stored file of a share.
    public func path(of share: String, file: String) -> String { directory + "/files/" + share + "/" + file }

    /// Stores a share: writes and fsyncs its files now (unless `filesWritten`: a
    /// `filesWriter(id:files:)` wrote them off the loop), appends its record (durable at the turn's
    /// commit). On any failure nothing is left behind (files written are removed). `items`
    /// reference files by `file` name.
    public func add(
        id: String, extensionID: String, app: String, created: String, items: [JSONObject], files: [ShareFile],
        openEvent: JSONObject? = nil, filesWritten: Bool = false, bytes: Int? = nil
    ) throws(StoreError) -> StoredShare {
        let dir = files.isEmpty ? "" : directory + "/files/" + id  // (a URL or text share has none)
        if filesWritten {
            // (written by the worker; the path is checked again: a symlink may have replaced a
            // directory meanwhile, and the record must not point through it)
            if !plainPath {
                throw StoreError("\(directory)/files is not a plain directory (a symlink?); refusing to store shares there")
            }
        } else if !files.isEmpty {
            do { try writeFiles(files, into: dir) } catch {
                // (not through a files/ or group directory a symlink replaced meanwhile)
                if ShareRecordStore.isPlainPath(directory, parent: parentDirectory) { ShareRecordStore.removeTree(dir) }
                throw error
            }
        }
        let share = StoredShare(
            id: id, extensionID: extensionID, app: app, group: group, created: created, items: items, openEvent: openEvent,
            bytes: bytes)
        share.n = ShareRecordStore.place(segment: journal.activeSegment, offset: journal.nextRecordOffset)
        share.batch = batchesTaken + 1
        let mark = journal.pendingMark
        do {
            try journal.append(type: RecordType.share.rawValue) { out in ShareRecordStore.writeRecord(share, to: &out) }
        } catch {
            if !files.isEmpty { removeShareFiles(dir) }
            throw error
        }
        if !files.isEmpty { createdDirs.append(dir) }
        let segment = journal.activeSegment  // (a journal rolls only with nothing pending)
        share.segment = segment
        ledger.live.add(1, to: segment)
        ledger.records.add(1, to: segment)
        shares[id] = share
        counter?.add(1)
        pendingBytes += share.bytes
        order.append(id)
        undo.append(.removeShare(id))
        lastAdded = (id: id, mark: mark, hasFiles: !files.isEmpty)
        turn?.touch(self)
        return share
    }

    /// A share's record payload: `{"id","extension","app","group","created","items",["openEvent"]}`,
    /// written directly; a carried copy adds `"n"`, the original's place.
    static func writeRecord(_ s: StoredShare, carried: Bool = false, to out: inout [UInt8]) {
        JSONValue.writeString(s.id, after: #"{"id":"#, to: &out)
        JSONValue.writeString(s.extensionID, after: #","extension":"#, to: &out)
        JSONValue.writeString(s.app, after: #","app":"#, to: &out)
        JSONValue.writeString(s.group, after: #","group":"#, to: &out)
        JSONValue.writeString(s.created, after: #","created":"#, to: &out)
        JSONValue.appendStatic(#","items":["#, to: &out)
        for (i, item) in s.items.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSONValue.object(item).write(to: &out)
        }
        out.append(UInt8(ascii: "]"))
        if let openEvent = s.openEvent {
            JSONValue.appendStatic(#","openEvent":"#, to: &out)
            JSONValue.object(openEvent).write(to: &out)
        }
        if carried {
            JSONValue.appendStatic(#","n":"#, to: &out)
            JSONValue.writeInteger(s.n, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Takes back the share `add` just stored, in the same turn and before anything else was
    /// appended to this store: its record is cut out of the uncommitted batch and its files are
    /// removed, so nothing of it is ever written (unlike `complete`, this needs no disk space).
    /// Returns false when `id` is not the last share added in this turn.
    public func retract(_ id: String) -> Bool {
        guard let last = lastAdded, last.id == id, case .removeShare(id)? = undo.last, journal.pendingMark > last.mark
        else { return false }
        journal.discardPending(from: last.mark)
        undo.removeLast()
        forget(id)
        if last.hasFiles {
            let dir = directory + "/files/" + id
            createdDirs.removeAll { $0 == dir }
            removeShareFiles(dir)
        }
        lastAdded = nil
        return true
    }

    /// True when `groups/`, the group's directory and its `files/` are all directories themselves,
    /// none replaced by a symlink (that would lead writes and deletions outside the state directory).
    var plainPath: Bool { ShareRecordStore.isPlainPath(directory, parent: parentDirectory) }

    /// `plainPath` for any thread: `group/files`, `group` and `parent` (unless empty) are
    /// directories themselves, none a symlink.
    static func isPlainPath(_ group: String, parent: String) -> Bool {
        FileIO.isPlainDirectory(group + "/files") && FileIO.isPlainDirectory(group)
            && (parent.isEmpty || FileIO.isPlainDirectory(parent))
    }

    /// `directory` without its last component (`STATE/groups`).
    lazy var parentDirectory = String(directory[..<(directory.lastIndex(of: "/") ?? directory.startIndex)])

    /// Writes each file with O_EXCL|O_NOFOLLOW relative to the new share directory, then fsyncs.
    func writeFiles(_ files: [ShareFile], into dir: String) throws(StoreError) {
        try ShareRecordStore.writeFiles(files, into: dir, groupDirectory: directory, parentDirectory: parentDirectory, faults: faultInjector)
    }

    /// A writer of a new share's files that runs on any thread (`ShareFilesWriter.run`); the
    /// share is then stored with `add(..., filesWritten: true)`.
    public func filesWriter(id: String, files: [ShareFile]) -> ShareFilesWriter {
        ShareFilesWriter(
            directory: directory + "/files/" + id, files: files, groupDirectory: directory, parentDirectory: parentDirectory,
            faults: faultInjector)
    }

    /// `writeFiles` for any thread: touches no store state.
    static func writeFiles(
        _ files: [ShareFile], into dir: String, groupDirectory: String, parentDirectory: String,
        faults: (@Sendable (JournalFaultPoint) -> Int32?)? = nil
    ) throws(StoreError) {
        defer { closeSources(files) }  // (whatever happens, the sources are closed)
        // Never write through a symlink planted in the group directory (or for it).
        let filesDir = groupDirectory + "/files"
        if !isPlainPath(groupDirectory, parent: parentDirectory) {
            throw StoreError("\(filesDir) is not a plain directory (a symlink?); refusing to write shares there")
        }
        // The share's directory is made and opened relative to descriptors of groups/, the group
        // and files/, each opened without following a symlink: one swapped in after the check
        // above is refused, not written through.
        var chain: [Int32] = []
        defer { for fd in chain { FD.close(fd) } }
        func step(_ at: Int32, _ name: String, _ path: String) throws(StoreError) -> Int32 {
            let fd = at == ShareRecordStore.atFDCWD
                ? open(name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                : openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else {
                let e = currentErrno()
                throw StoreError("cannot open \(path) (a symlink?)", SystemError("open", errno: e))
            }
            chain.append(fd)
            return fd
        }
        let groupName = String(groupDirectory[groupDirectory.index(after: groupDirectory.lastIndex(of: "/") ?? groupDirectory.startIndex)...])
        let groupFD: Int32
        if parentDirectory.isEmpty || !groupDirectory.hasPrefix(parentDirectory + "/") {
            groupFD = try step(ShareRecordStore.atFDCWD, groupDirectory, groupDirectory)
        } else {
            groupFD = try step(try step(ShareRecordStore.atFDCWD, parentDirectory, parentDirectory), groupName, groupDirectory)
        }
        let filesFD = try step(groupFD, "files", filesDir)
        let id = String(dir[dir.index(after: dir.lastIndex(of: "/") ?? dir.startIndex)...])
        if mkdirat(filesFD, id, 0o700) != 0 {
            let e = currentErrno()
            throw StoreError("cannot create \(dir)", SystemError("mkdir", errno: e))
        }
        let dfd = openat(filesFD, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard dfd >= 0 else {
            let e = currentErrno()
            throw StoreError("cannot open \(dir)", SystemError("open", errno: e))
        }
        defer { FD.close(dfd) }
        var failure: StoreError? = nil
        for f in files {
            if failure != nil { break }
            let fd = openat(dfd, f.name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd < 0 {
                failure = StoreError("cannot create \(dir)/\(f.name)", SystemError("openat", errno: currentErrno()))
                continue
            }
            do {
                switch f.source {
                case .bytes(let b): try FD.writeAll(fd, b)
                case .descriptor(let src, let size): try ShareRecordStore.copy(from: src, to: fd, size: size)
                }
                _ = try retrying("fsync") { fsync(fd) }
            } catch {
                failure = StoreError("cannot write \(dir)/\(f.name)", error)
            }
            FD.close(fd)
        }
        if let failure { throw failure }
        // (the files' names must be durable before the share is acknowledged)
        if let e = faults?(.directorySync) ?? (fsync(dfd) == 0 ? nil : currentErrno()) {
            throw StoreError("cannot make the files of \(dir) durable", SystemError("fsync", errno: e))
        }
    }

    /// `open`'s "relative to the working directory" marker, for `step` above (an absolute path).
    static let atFDCWD: Int32 = AT_FDCWD

    /// Closes the descriptors `files` copy from.
    static func closeSources(_ files: [ShareFile]) {
        for f in files { if case .descriptor(let fd, _) = f.source { FD.close(fd) } }
    }

    /// Copies exactly `size` bytes of `src` into `dst`.
    static func copy(from src: Int32, to dst: Int32, size: Int) throws(SystemError) {
        var buf = [UInt8](repeating: 0, count: max(1, min(size, 256 * 1024)))
        var left = size
        while left > 0 {
            let want = min(left, buf.count)
            let n = try buf.withUnsafeMutableBytes { b in
                Result { () throws(SystemError) -> Int in
                    try FD.readBlocking(src, into: UnsafeMutableRawBufferPointer(rebasing: b[0..<want]))
                }
            }.get()
            if n == 0 {
                throw SystemError("read (the file became \(size - left) bytes long while being copied, from \(size))", errno: EIO)
            }
            try FD.writeAll(dst, n == buf.count ? buf : Array(buf[0..<n]))
            left -= n
        }
    }

    /// Removes a share (record durable at the commit; its files are deleted after it).
    public func complete(_ id: String) throws(StoreError) -> Bool {
        guard let s = shares[id] else { return false }
        try journal.append(type: RecordType.complete.rawValue, freeing: true) { out in
            JSONValue.object(["id": .string(id)]).write(to: &out)
        }
        shares[id] = nil
        counter?.add(-1)
        pendingBytes -= s.bytes
        ledger.live[s.segment, default: 0] -= 1
        ledger.records[journal.activeSegment, default: 0] += 1
        undo.append(.restoreShare(s))
        restorableCount += 1
        compactOrder()
        completedDirs.append(directory + "/files/" + id)
        turn?.touch(self)
        return true
    }

    /// True when `s`'s record is not durable yet: its commit is pending or being written, and
    /// may still fail (and take the share back).
    public func isUncommitted(_ s: StoredShare) -> Bool { s.batch > batchesDurable }

    /// Makes the current request wait for the commit of `s`'s record when it is not durable yet,
    /// so that an answer showing the share is not sent before the share is on disk, and becomes
    /// a storage failure if the share is rolled back (as a defaults read joins its commit).
    public func joinCommit(of s: StoredShare) {
        if s.batch > batchesDurable { turn?.join(self) }
    }

    /// Makes the current request wait for this store's commit when `listed` (its `all`, oldest
    /// first) shows a share not yet durable, or leaves out one whose completion is not durable
    /// yet: a list is answered from what is on disk, or fails with the commit it read from.
    public func joinCommit(ofListed listed: [StoredShare]) {
        // (shares not yet durable are the newest: the last one listed tells)
        if restorableCount > 0 || (listed.last.map { $0.batch > batchesDurable } ?? false) { turn?.join(self) }
    }

    /// Makes the current request wait for this store's commit when a completion of share `id`
    /// is not durable yet (it is pending or being written, and the share comes back should that
    /// commit fail); true when it does.
    public func joinCommit(ofCompletion id: String) -> Bool {
        guard restorableCount > 0 else { return false }
        for list in [undo, inflightUndo] {
            for case .restoreShare(let s) in list where s.id == id {
                turn?.join(self)
                return true
            }
        }
        return false
    }

    /// Takes out a share whose record was never made durable (a retracted or rolled-back add).
    func forget(_ id: String) {
        guard let s = shares.removeValue(forKey: id) else { return }
        s.neverStored = true
        counter?.add(-1)
        pendingBytes -= s.bytes
        ledger.live[s.segment, default: 0] -= 1
        if order.last == id { order.removeLast() }  // (otherwise it stays behind as a removed id)
    }

    /// Drops the ids of removed shares from `order` once they outnumber the pending ones (so each
    /// removal costs O(1) amortized), keeping those a rollback of an uncommitted completion would
    /// bring back.
    /// Completions not yet durable (`.restoreShare` entries in `undo` and `inflightUndo`): their ids
    /// stay in `order` through `compactOrder`, so they do not count towards compacting it again.
    var restorableCount = 0
    /// How many times `compactOrder` scanned `order` (tests check it stays amortized O(1)).
    var orderScans = 0

    static func restorable(in list: [Undo]) -> Int {
        var n = 0
        for case .restoreShare in list { n += 1 }
        return n
    }

    func compactOrder() {
        // Ids a rollback could restore stay, so they do not count: otherwise every completion of a
        // turn holding thousands of them would scan `order` again and keep them all.
        let removed = order.count - shares.count - restorableCount
        guard removed > 1024 && removed > shares.count else { return }
        orderScans += 1
        var restorable = Set<String>()
        for case .restoreShare(let s) in undo { restorable.insert(s.id) }
        for case .restoreShare(let s) in inflightUndo { restorable.insert(s.id) }
        order.removeAll { shares[$0] == nil && !restorable.contains($0) }
    }

    /// Makes this turn's commit fail (everything this turn stored in the group is rolled back and
    /// its requests answer -32005): for a change that could not be undone any other way.
    public func failTurn(_ reason: String) {
        failedTurn = reason
        turn?.touch(self)
    }

    /// Undoes this turn's changes (memory, files written, records pending).
    public func rollback() {
        journal.discardPending()
        restorableCount -= ShareRecordStore.restorable(in: undo)
        undoAll(undo)
        for d in createdDirs { removeShareFiles(d) }
        createdDirs.removeAll()
        completedDirs.removeAll()
        undo.removeAll()
        lastAdded = nil
        carryPending = nil  // (its copies were pending: discarded above)
    }

    func undoAll(_ list: [Undo]) {
        for u in list.reversed() {
            switch u {
            case .removeShare(let id):
                forget(id)
            case .restoreShare(let s):
                // Its id is still in `order`, in its place (compactOrder keeps restorable ids).
                shares[s.id] = s
                counter?.add(1)
                pendingBytes += s.bytes
                ledger.live[s.segment, default: 0] += 1
            }
        }
    }

    // The changes handed to the sync worker and not yet durable (pipelined commit).
    var inflightUndo: [Undo] = []
    var inflightCreatedDirs: [String] = []
    var inflightCompletedDirs: [String] = []

    public func beginCommit() throws(StoreError) -> SyncJob? {
        if let reason = failedTurn {
            failedTurn = nil
            rollback()
            throw StoreError(reason)
        }
        let batch: JournalBatch?
        do { batch = try journal.takeBatch() } catch {
            rollback()
            throw error
        }
        removeFilesOfCutRecords()  // (taking a batch cuts what was owed first)
        // The in-flight lists are empty (finishCommit clears them keeping capacity): swapping hands
        // the turn's lists over without copying or allocating.
        swap(&inflightUndo, &undo)
        swap(&inflightCreatedDirs, &createdDirs)
        swap(&inflightCompletedDirs, &completedDirs)
        carryInflight = carryPending  // (pending copies are in the batch taken)
        carryPending = nil
        lastAdded = nil
        batchesTaken += 1
        let job = SyncJob(directories: inflightCreatedDirs.isEmpty ? [] : [directory + "/files"], batch: batch)
        return job.isEmpty ? nil : job
    }

    public func finishCommit(_ job: SyncJob?, error: StoreError?) {
        if error != nil {
            rollback()  // the changes made since, then the job's own
            undoAll(inflightUndo)
            if let b = job?.batch { journal.finishBatch(b, failed: true) }
            if journal.hasOwedCutBack {
                // The journal could not take the job's records back: they may come back at replay
                // (their requests were told so), and then with their files. The files go once the
                // records are cut (`removeFilesOfCutRecords`), else at the next start if the
                // records are not there (files without a record are removed then).
                filesOfOwedRecords += inflightCreatedDirs
            } else {
                for d in inflightCreatedDirs { removeShareFiles(d) }
            }
            carryInflight = nil  // (the originals stay where they are)
        } else {
            if let b = job?.batch { journal.finishBatch(b, failed: false) }
            batchesDurable = batchesTaken  // (one commit in flight at a time: the one just ended)
            if let c = carryInflight {
                carryInflight = nil
                rehome(c)
            }
            // Their completions are durable: the files go, unless `files/` or the group's own
            // directory was replaced by a symlink meanwhile (deleting through it would reach
            // outside the state directory).
            removeLeftoverFiles()
            if !inflightCompletedDirs.isEmpty && plainPath {
                for d in inflightCompletedDirs { removeShareFiles(d) }
            }
        }
        restorableCount -= ShareRecordStore.restorable(in: inflightUndo)
        inflightUndo.removeAll(keepingCapacity: true)
        inflightCreatedDirs.removeAll(keepingCapacity: true)
        inflightCompletedDirs.removeAll(keepingCapacity: true)
        // Every completion made so far is durable and nothing waits: old segments may go.
        if error == nil && !journal.hasPending && !journal.batchInFlight && undo.isEmpty { compactIfUseful() }
    }

    /// Deletes the sealed segments (oldest first) that hold no pending share; while the sealed
    /// segments are mostly dead, copies the oldest one's pending shares forward (record type 3,
    /// same ids; a chunk per call) to go to disk with the next commit, off the loop like any
    /// other (`rehome` then moves them), and deletes the segment once they all are. Called only
    /// when nothing is pending and every completion is durable, so a deleted segment's shares can
    /// never come back through a rollback.
    func compactIfUseful() {
        guard let oldest = segmentToCarry(), !carryingPaused else { return }
        // At most `carryChunk` per commit, oldest first.
        var carried: [StoredShare] = []
        for id in order {
            guard let s = shares[id], s.segment == oldest else { continue }
            carried.append(s)
            if carried.count == carryChunk { break }
        }
        let copies = journal.appendCopies(carried, from: oldest, type: RecordType.carried.rawValue) { s, out in
            ShareRecordStore.writeRecord(s, carried: true, to: &out)
        }
        guard let copies else { return }
        carryPending = copies
        turn?.touch(self)
    }

    /// Compaction's copies are durable: each carried share lives in their segment now, completed
    /// meanwhile or not (a completion of a later commit that fails puts the share back, and then
    /// in its new segment, where it is counted). The old segment goes at the next quiet commit
    /// once no live share is left in it (not here: a share of it that was not carried may have a
    /// completion that is not durable yet).
    func rehome(_ c: CarriedCopies<StoredShare>) {
        var live = 0
        for s in c.items where s.segment == c.from {
            s.segment = c.to
            if shares[s.id] === s { live += 1 }
        }
        ledger.carried(written: c.items.count, live: live, from: c.from, to: c.to)
    }

    /// Test seam: called right before segments up to the number given are deleted.
    var willDeleteSegments: ((Int) -> Void)? = nil

    func forgetSegments(through last: Int) {
        willDeleteSegments?(last)
        guard let deleted = journal.deleteSegments(through: last) else { return }
        ledger.forget(through: deleted)
    }

    /// Test seam: the journal's reservation chunk and headroom for completions (`Journal.setSpace`).
    public func setJournalSpace(_ space: (reserveChunk: Int, freeingHeadroom: Int)) { journal.setSpace(space) }

    /// Test seam: failures injected into this group's journal.
    public var faultInjector: (@Sendable (JournalFaultPoint) -> Int32?)? {
        get { journal.faultInjector }
        set { journal.faultInjector = newValue }
    }

    /// Removes a directory tree without following symlinks; false when something of it could not
    /// be removed (it is gone, or was never there: true).
    @discardableResult
    public static func removeTree(_ path: String) -> Bool {
        var st = stat()
        guard lstat(path, &st) == 0 else { return errno == ENOENT }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            for name in FileIO.listDirectory(path) ?? [] { removeTree(path + "/" + name) }
            return rmdir(path) == 0 || errno == ENOENT
        }
        return unlink(path) == 0 || errno == ENOENT
    }
}
