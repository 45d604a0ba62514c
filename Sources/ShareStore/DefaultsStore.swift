// Group defaults: one App Group's key-value suite (any JSON value per key) on a journal in the
// group's directory (STATE/groups/GROUP/defaults-NNNNNN.log), with a version that rises with every
// change and never goes back, rollback of a failed turn, and whole-suite snapshot compaction.
//
// Compaction (once superseded records dominate, after a commit with nothing else pending) writes
// the committed suite as one snapshot record into a segment of its own, S, reserved on the loop
// while the live journal moves on to S+1; the snapshot is serialized, written to a temporary
// file, made durable and renamed to S off the loop (`backgroundRunner`, the broker's worker pool),
// and only then are the segments before S deleted (SnapshotJob.swift has the crash rules). Sets go
// on meanwhile, into S+1.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareProtocol
import ShareSystem

/// Why a defaults change was refused. Nothing of a refused change was stored.
public enum DefaultsError: Error, Sendable, Equatable {
    /// `ifVersion` did not match: the group is at `current`.
    case versionConflict(current: UInt64)
    /// The value's compact JSON text is `bytes` long, over `limit`.
    case valueTooLarge(bytes: Int, limit: Int)
    /// The value nests arrays/objects deeper than `limit` levels.
    case valueTooDeep(limit: Int)
    /// The key is empty or longer than `limit` UTF-8 bytes.
    case badKey(limit: Int)
    /// The suite would grow to `bytes` (keys plus values), over `limit`.
    case suiteFull(bytes: Int, limit: Int)
    /// The journal could not take the record (e.g. the disk is full).
    case storage(StoreError)

    /// Equal when the same case with the same numbers (storage errors compare by message).
    public static func == (a: DefaultsError, b: DefaultsError) -> Bool {
        switch (a, b) {
        case (.versionConflict(let x), .versionConflict(let y)): return x == y
        case (.valueTooLarge(let x, let l), .valueTooLarge(let y, let m)): return x == y && l == m
        case (.valueTooDeep(let x), .valueTooDeep(let y)): return x == y
        case (.badKey(let x), .badKey(let y)): return x == y
        case (.suiteFull(let x, let l), .suiteFull(let y, let m)): return x == y && l == m
        case (.storage(let x), .storage(let y)): return x.message == y.message
        default: return false
        }
    }
}

/// Size limits and compaction thresholds of a defaults suite.
public struct DefaultsLimits: Sendable, Equatable {
    /// Largest value, as compact JSON bytes (1 MiB).
    public var maxValueBytes = 1 << 20
    /// Largest suite: the UTF-8 bytes of every key plus the compact JSON bytes of every value (16 MiB).
    public var maxSuiteBytes = 16 << 20
    /// Longest key, in UTF-8 bytes.
    public var maxKeyBytes = 4096
    /// Deepest nesting of arrays/objects in a value (keeps every answer parseable by a 256-deep parser).
    public var maxValueDepth = 200
    /// Compaction waits until superseded records take at least this many bytes.
    public var compactMinBytes = 1 << 20
    /// ... and until they take more than this many times the live records' bytes.
    public var compactRatio = 2
    /// The defaults above.
    public init() {}
}

/// One group's defaults suite. Changes are visible at once, durable at the next `commit()` (the
/// broker's end-of-turn group commit), and undone when that commit fails.
///
/// Records (JSON payloads): set `{key, value, version}`, remove `{key, version}`, and snapshot
/// `{version, values}` (the whole suite in one checksummed record, so it is never half-written;
/// it is the only record of its segment, which replaces every segment before it).
public final class DefaultsStore: TurnParticipant {
    enum RecordType: UInt8 {
        case set = 1
        case remove = 2
        case snapshot = 3
    }

    struct Entry: Sendable {  // (a compaction's worker reads the entries the loop captured)
        var value: JSONValue
        /// Bytes of the value's compact JSON text.
        var size: Int
    }

    /// Approximate bytes a live key costs in a record besides its key and value text.
    static let recordOverhead = Journal.headerSize + 32

    /// The group's name.
    public let group: String
    /// The journal (exposed for fault injection and segment settings in tests).
    public let journal: Journal

    public var failedRecordsMayRemain: Bool { journal.hasOwedCutBack }
    /// Size limits and compaction thresholds.
    public var limits: DefaultsLimits
    /// The turn log this store reports its changes to (nil: the caller commits by hand).
    public let turn: TurnLog?
    /// The group's version: 0 for a fresh group, +1 per set and per remove that removed something.
    public private(set) var version: UInt64 = 0
    /// Bytes of the suite: UTF-8 bytes of the keys plus compact JSON bytes of the values.
    public private(set) var suiteBytes = 0
    /// Bytes of records in the journal's segments (live and superseded).
    public private(set) var journalBytes = 0
    /// What recovery found when the store was opened.
    public private(set) var recovery = RecoveryReport()
    /// Snapshot compactions done since the store was opened.
    public private(set) var compactions = 0
    /// Why the last compaction failed (nil after a success); the suite is unaffected either way.
    public private(set) var lastCompactionError: String? = nil {
        didSet {
            if (oldValue == nil) != (lastCompactionError == nil) {
                compactionFailingChanged?(lastCompactionError != nil)
            }
        }
    }
    /// Called when `lastCompactionError` goes from nil to an error (true) or back (false), so that
    /// an owner of many stores can count the failing ones without visiting them all.
    public var compactionFailingChanged: ((Bool) -> Void)? = nil

    /// The suite, keyed by the keys' exact bytes (keys that are only canonically equivalent are
    /// two keys, as in UserDefaults: `ExactKey`).
    var values: [ExactKey: Entry] = [:]
    var undo: [(key: ExactKey, previous: Entry?)] = []
    var turnStart: (version: UInt64, suiteBytes: Int, journalBytes: Int)? = nil
    /// After a failed compaction, the journal size to wait for before trying again.
    var retryCompactionAt = 0
    var scratch: [UInt8] = []

    /// A name for logs.
    public var participantName: String { "defaults of group \(group)" }

    /// Opens (creating if needed) the suite in `directory` and replays its journal.
    public init(
        directory: String, group: String, limits: DefaultsLimits = DefaultsLimits(), segmentLimit: Int? = nil,
        turn: TurnLog? = nil
    ) throws(StoreError) {
        self.group = group
        self.limits = limits
        self.turn = turn
        // (Journal makes the directories it creates durable, the group's included.)
        journal = try Journal(directory: directory, name: "defaults")
        if let segmentLimit { journal.segmentLimit = segmentLimit }
        var maxVersion: UInt64 = 0
        recovery = try journal.replay { rec in
            journalBytes += Journal.headerSize + rec.payload.count
            guard let parsed = try? JSONParser.parseBuffer(rec.payload), case .object(let o) = parsed,
                case .number(let vtext)? = o["version"], let v = UInt64(vtext), v < (1 << 62)  // beyond: damage
            else { return }
            maxVersion = max(maxVersion, v)
            switch RecordType(rawValue: rec.type) {
            case .set?:
                guard let key = o["key"]?.stringValue, let value = o["value"] else { return }
                put(key, value)
            case .remove?:
                guard let key = o["key"]?.stringValue, let old = values.removeValue(forKey: ExactKey(key)) else { return }
                suiteBytes -= key.utf8.count + old.size
            case .snapshot?:
                guard case .object(let all)? = o["values"] else { return }
                values.removeAll(keepingCapacity: true)
                suiteBytes = 0
                values.reserveCapacity(all.count)
                for m in all { put(m.key, m.value) }
            case nil:
                return
            }
        }
        version = maxVersion
        scratch = []
    }

    /// Sets `key` during replay, measuring the value.
    func put(_ key: String, _ value: JSONValue) {
        scratch.removeAll(keepingCapacity: true)
        value.write(to: &scratch)
        let k = ExactKey(key)
        if let old = values[k] { suiteBytes -= key.utf8.count + old.size }
        values[k] = Entry(value: value, size: scratch.count)
        suiteBytes += key.utf8.count + scratch.count
    }

    // MARK: Reading

    /// Number of keys.
    public var count: Int { values.count }

    /// The keys, sorted.
    public var keys: [String] { values.keys.sorted().map(\.text) }

    /// The value of `key`, or nil when there is none (a stored JSON `null` is `.null`).
    public func value(forKey key: String) -> JSONValue? { values[ExactKey(key)]?.value }

    /// Appends the suite as a compact JSON object, keys sorted, to `out`.
    public func writeValues(to out: inout [UInt8]) { DefaultsStore.writeValues(values, to: &out) }

    /// Appends `values` as a compact JSON object, keys sorted, to `out` (also on a compaction's
    /// worker thread, from the suite it captured).
    static func writeValues(_ values: [ExactKey: Entry], to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        for key in values.keys.sorted() {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSONValue.writeString(key.text, to: &out)
            out.append(UInt8(ascii: ":"))
            values[key]!.value.write(to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// The suite as a JSON object, keys sorted (built in linear time, also for large suites).
    public func valuesObject() -> JSONObject {
        JSONObject(uniqueMembers: values.keys.sorted().map { (key: $0.text, value: values[$0]!.value) })
    }

    /// True when changes wait for `commit`.
    public var hasPending: Bool { journal.hasPending }

    /// Makes the current request wait for this store's commit when it has uncommitted changes, so
    /// that an answer built from them (a read, a version) is not sent before they are durable, and
    /// becomes a storage failure if they are not. Changes in flight (handed to the sync worker)
    /// count too: the request joins the next commit, which starts once they are decided, and its
    /// answer fails with them (the store's accumulated requests do when its commit fails).
    public func joinPendingCommit() {
        if journal.hasPending || !inflightUndo.isEmpty { turn?.join(self) }
    }

    // MARK: Changing

    func checkKey(_ key: String) throws(DefaultsError) {
        let n = key.utf8.count
        if n == 0 || n > limits.maxKeyBytes { throw .badKey(limit: limits.maxKeyBytes) }
    }

    static func depth(_ v: JSONValue, limit: Int) -> Bool {
        // Iterative, so a deep value cannot exhaust the stack.
        var stack: [(JSONValue, Int)] = [(v, 0)]
        while let (x, d) = stack.popLast() {
            switch x {
            case .array(let items):
                if d + 1 > limit { return false }
                for i in items { stack.append((i, d + 1)) }
            case .object(let o):
                if d + 1 > limit { return false }
                for m in o { stack.append((m.value, d + 1)) }
            default: break
            }
        }
        return true
    }

    func beginChange() {
        if turnStart == nil { turnStart = (version, suiteBytes, journalBytes) }
    }

    /// Sets `key` to `value` (any JSON value, kept exactly). With `ifVersion`, only when the group is
    /// at that version (compare-and-set). Returns the new version.
    @discardableResult
    public func set(_ key: String, _ value: JSONValue, ifVersion: UInt64? = nil) throws(DefaultsError) -> UInt64 {
        if let want = ifVersion, want != version { throw .versionConflict(current: version) }
        try checkKey(key)
        scratch.removeAll(keepingCapacity: true)
        value.write(to: &scratch)
        let size = scratch.count
        if size > limits.maxValueBytes { throw .valueTooLarge(bytes: size, limit: limits.maxValueBytes) }
        if !DefaultsStore.depth(value, limit: limits.maxValueDepth) { throw .valueTooDeep(limit: limits.maxValueDepth) }
        let k = ExactKey(key)
        let old = values[k]
        let keyBytes = key.utf8.count
        let newSuite = suiteBytes - (old.map { keyBytes + $0.size } ?? 0) + keyBytes + size
        if newSuite > limits.maxSuiteBytes && newSuite > suiteBytes {
            throw .suiteFull(bytes: newSuite, limit: limits.maxSuiteBytes)
        }
        let newVersion = version + 1
        let before = journal.pending.count
        do {
            try journal.append(type: RecordType.set.rawValue) { out in
                out.append(contentsOf: #"{"key":"#.utf8)
                JSONValue.writeString(key, to: &out)
                out.append(contentsOf: #","value":"#.utf8)
                out.append(contentsOf: scratch)
                out.append(contentsOf: #","version":"#.utf8)
                out.append(contentsOf: String(newVersion).utf8)
                out.append(UInt8(ascii: "}"))
            }
        } catch {
            throw .storage(error)
        }
        if scratch.capacity > 4 << 20 { scratch = [] }
        beginChange()
        journalBytes += journal.pending.count - before
        undo.append((k, old))
        values[k] = Entry(value: value, size: size)
        suiteBytes = newSuite
        version = newVersion
        turn?.touch(self)
        return newVersion
    }

    /// Removes `key`. A removal that removes nothing changes nothing (same version, no record).
    /// With `ifVersion`, only when the group is at that version.
    @discardableResult
    public func remove(_ key: String, ifVersion: UInt64? = nil) throws(DefaultsError) -> (
        removed: Bool, version: UInt64
    ) {
        if let want = ifVersion, want != version { throw .versionConflict(current: version) }
        let k = ExactKey(key)
        guard let old = values[k] else { return (false, version) }
        let newVersion = version + 1
        let before = journal.pending.count
        do {
            try journal.append(type: RecordType.remove.rawValue, freeing: true) { out in
                out.append(contentsOf: #"{"key":"#.utf8)
                JSONValue.writeString(key, to: &out)
                out.append(contentsOf: #","version":"#.utf8)
                out.append(contentsOf: String(newVersion).utf8)
                out.append(UInt8(ascii: "}"))
            }
        } catch {
            throw .storage(error)
        }
        beginChange()
        journalBytes += journal.pending.count - before
        undo.append((k, old))
        values[k] = nil
        suiteBytes -= key.utf8.count + old.size
        version = newVersion
        turn?.touch(self)
        return (true, newVersion)
    }

    // MARK: Durability

    /// Makes the changes since the last commit durable (one write, one fdatasync); on failure they
    /// are undone in memory and the error is thrown. Compacts afterwards when that pays.
    public func commit() throws(StoreError) { try commitTurn() }

    /// Undoes the uncommitted changes in memory and drops their journal records.
    public func rollback() {
        journal.discardPending()
        for u in undo.reversed() { values[u.key] = u.previous }
        if let s = turnStart {
            version = s.version
            suiteBytes = s.suiteBytes
            journalBytes = s.journalBytes
        }
        undo.removeAll(keepingCapacity: true)
        turnStart = nil
    }

    // The changes handed to the sync worker and not yet durable (pipelined commit).
    var inflightUndo: [(key: ExactKey, previous: Entry?)] = []
    var inflightStart: (version: UInt64, suiteBytes: Int, journalBytes: Int)? = nil

    public func beginCommit() throws(StoreError) -> SyncJob? {
        let batch: JournalBatch?
        do { batch = try journal.takeBatch() } catch {
            rollback()
            throw error
        }
        swap(&inflightUndo, &undo)  // (inflightUndo is empty: no buffer is copied or allocated)
        inflightStart = turnStart
        turnStart = nil
        return batch.map { SyncJob(batch: $0) }
    }

    public func finishCommit(_ job: SyncJob?, error: StoreError?) {
        if error != nil {
            rollback()  // the changes made since, then the job's own
            for u in inflightUndo.reversed() { values[u.key] = u.previous }
            if let s = inflightStart {
                version = s.version
                suiteBytes = s.suiteBytes
                journalBytes = s.journalBytes
            }
            if let b = job?.batch { journal.finishBatch(b, failed: true) }
        } else if let b = job?.batch {
            journal.finishBatch(b, failed: false)
        }
        inflightUndo.removeAll(keepingCapacity: true)
        inflightStart = nil
        if error == nil && !journal.hasPending && undo.isEmpty { compactIfUseful() }
    }

    /// Bytes the live keys would take as records.
    var liveRecordBytes: Int { suiteBytes + values.count * DefaultsStore.recordOverhead }

    /// True when superseded records dominate the journal (more than `compactRatio` × the live
    /// records and at least `compactMinBytes`).
    public var compactionDue: Bool {
        let live = liveRecordBytes
        let dead = journalBytes - live
        return dead >= limits.compactMinBytes && dead > limits.compactRatio * live && journalBytes >= retryCompactionAt
    }

    // MARK: Compaction

    /// Runs a compaction's disk work off the calling thread: `work` on another thread, then `done`
    /// back on this store's thread (the loop). Returns false when it cannot take the work (the
    /// compaction then fails, and is tried again later). Nil: compactions run on the calling thread.
    public var backgroundRunner: ((_ work: @escaping @Sendable () -> Void, _ done: @escaping () -> Void) -> Bool)? = nil

    /// The compaction whose disk work runs (at most one per store).
    var compacting: SnapshotJob? = nil

    /// True when nothing of the store waits for a commit or is being written (it may be closed).
    public var isIdle: Bool { !journal.hasPending && !journal.batchInFlight && undo.isEmpty && compacting == nil }

    /// Before the store is let go (its journal's descriptors close with it): its journal gives
    /// back the space it reserved ahead.
    public func prepareToClose() { journal.trimReserved() }

    /// True while a compaction's disk work runs (or waits for a thread).
    public var compactionRunning: Bool { compacting != nil }

    /// Starts a compaction when it pays and the suite is all committed (after a commit with nothing
    /// else pending): off the loop with a `backgroundRunner`, else on the calling thread.
    func compactIfUseful() {
        guard compactionDue, compacting == nil, !journal.hasPending, !journal.batchInFlight, undo.isEmpty else { return }
        guard let job = try? beginCompaction() else { return }
        if let runner = backgroundRunner {
            if !runner({ job.run() }, { [self] in finishCompaction(job) }) {
                compacting = nil
                compactionFailed(StoreError("cannot compact \(participantName): no thread to write the snapshot"))
            }
        } else {
            job.run()
            finishCompaction(job)
        }
    }

    /// Writes the whole suite and its version as one snapshot record, on the calling thread (the
    /// same steps as a compaction off the loop: see `SnapshotJob`), after any compaction running.
    public func compact() throws(StoreError) {
        precondition(!journal.hasPending, "compact() with uncommitted changes")
        waitForCompaction()
        let job = try beginCompaction()
        job.run()
        finishCompaction(job)
        if let error = job.error { throw error }
    }

    /// Blocks until the compaction running off the loop, if any, has ended, and takes its outcome
    /// (at shutdown: no snapshot is left being written behind the broker).
    public func waitForCompaction() {
        guard let job = compacting else { return }
        job.waitUntilFinished()
        finishCompaction(job)
    }

    /// On the loop: captures the committed suite (an O(1) copy: see `SnapshotJob`), reserves the
    /// snapshot's segment and moves the live journal past it.
    func beginCompaction() throws(StoreError) -> SnapshotJob {
        precondition(compacting == nil && undo.isEmpty && !journal.batchInFlight, "a compaction with changes not durable")
        let replaced = journal.segments
        let segment: Int
        do { segment = try journal.reserveSnapshotSegment() } catch {
            compactionFailed(error)
            throw error
        }
        let job = SnapshotJob(
            segment: segment, version: version, values: values, sizeHint: liveRecordBytes + 64, journal: journal,
            replaced: replaced, journalBytesAtStart: journalBytes)
        compacting = job
        return job
    }

    /// On the loop, once the job has run (or will never run: then it failed): on success the
    /// snapshot and what was appended since are the journal; on failure nothing changed but the
    /// empty segment reserved for the snapshot (a gap) and it is tried again later.
    func finishCompaction(_ job: SnapshotJob) {
        guard compacting === job else { return }  // (taken already, by `waitForCompaction`)
        compacting = nil
        guard job.finished else {
            compactionFailed(StoreError("cannot compact \(participantName): the snapshot was not written"))
            return
        }
        if let error = job.error {
            compactionFailed(error)
            return
        }
        journal.snapshotInstalled(job.segment, kept: job.kept)
        // The snapshot replaces the records counted when the suite was captured; those appended
        // since stay (also in the figures a rollback goes back to).
        let delta = job.bytes - job.journalBytesAtStart
        journalBytes += delta
        turnStart?.journalBytes += delta
        inflightStart?.journalBytes += delta
        compactions += 1
        lastCompactionError = nil
        retryCompactionAt = 0
    }

    func compactionFailed(_ error: StoreError) {
        lastCompactionError = error.message
        retryCompactionAt = journalBytes + limits.compactMinBytes
    }
}
