// Group commit across stores: every store that changes during a loop turn registers here; at the
// end of the turn the broker commits each one (one fdatasync per dirty journal) and learns which
// requests touched a store whose commit failed, so exactly those answer -32005.

/// A store whose changes of one turn are committed together.
public protocol TurnParticipant: AnyObject {
    /// A name for logs (e.g. "events", "group.com.example.app defaults").
    var participantName: String { get }
    /// Makes the turn's changes durable on the calling thread; on failure they are undone and the
    /// error thrown. The default runs both halves of the pipelined commit (below) back to back.
    func commitTurn() throws(StoreError)
    /// Stores commit in ascending order (group stores 0, the event queues 1): a share's record is
    /// durable before the event that announces it, so a crash between the two never leaves an
    /// event pointing at a missing share (recovery re-creates the event from the share's record).
    var commitOrder: Int { get }
    /// Pipelined commit, first half: hands the turn's changes over as a job for a `SyncWorker`
    /// (nil: nothing to write) and keeps what is needed to undo them until `finishCommit`.
    /// Changes made after it form the next commit. On a thrown error the turn's changes are undone.
    func beginCommit() throws(StoreError) -> SyncJob?
    /// Pipelined commit, second half: the job is durable (error nil), or it failed, and then every
    /// change not yet durable (the job's and any made since) is undone and the journal cut back.
    func finishCommit(_ job: SyncJob?, error: StoreError?)
    /// True when the store's own upkeep (compaction's copies, up to thousands of records no
    /// request waits for) is among what waits for the next commit.
    var pendingIncludesUpkeep: Bool { get }
    /// True after a failed commit whose records the journal could not take off (the disk
    /// refuses every write): they may be there after a restart, whatever the requests were told.
    var failedRecordsMayRemain: Bool { get }
}

extension TurnParticipant {
    /// Group stores commit first.
    public var commitOrder: Int { 0 }

    /// Changes are requests' unless a store says otherwise.
    public var pendingIncludesUpkeep: Bool { false }

    /// A store without a journal of its own keeps nothing of a failed commit.
    public var failedRecordsMayRemain: Bool { false }

    /// Makes the changes since the last commit durable on the calling thread (both halves of the
    /// pipelined commit, the job run in between); on failure they are undone and the error thrown.
    public func commitTurn() throws(StoreError) {
        let job = try beginCommit()
        let error = job.flatMap { SyncWorker.run([$0])[0] }
        finishCommit(job, error: error)
        if let error { throw error }
    }
}

/// A small set of stores (those one request changed): almost always one, kept inline so that a
/// reply waiting for its commit carries it without a heap allocation per request.
public struct TouchedStores: Sendable, Equatable {
    /// The first store changed, if any.
    public private(set) var first: ObjectIdentifier? = nil
    /// Any others, in the order they were first changed.
    public private(set) var more: [ObjectIdentifier] = []

    /// An empty set.
    public init() {}

    /// True when no store was changed.
    public var isEmpty: Bool { first == nil }

    /// Whether `id` is in the set.
    public func contains(_ id: ObjectIdentifier) -> Bool { first == id || (!more.isEmpty && more.contains(id)) }

    /// Calls `body` with each member, in insertion order.
    public func forEach(_ body: (ObjectIdentifier) -> Void) {
        guard let first else { return }
        body(first)
        for id in more { body(id) }
    }

    /// Adds `id` (no duplicates).
    public mutating func insert(_ id: ObjectIdentifier) {
        if first == nil {
            first = id
        } else if !contains(id) {
            more.append(id)
        }
    }

    /// The first member that `transform` maps to a value, in insertion order.
    public func firstMapped<T>(_ transform: (ObjectIdentifier) -> T?) -> T? {
        guard let first else { return nil }
        if let v = transform(first) { return v }
        for id in more { if let v = transform(id) { return v } }
        return nil
    }
}

/// Two stores, either way round.
struct StorePair: Hashable {
    let low: ObjectIdentifier
    let high: ObjectIdentifier
    init(_ a: ObjectIdentifier, _ b: ObjectIdentifier) { (low, high) = a < b ? (a, b) : (b, a) }
}

/// The stores changed during the current loop turn, and by which request.
public final class TurnLog {
    /// Stores with uncommitted changes, in the order they were first changed.
    public private(set) var dirty: [TurnParticipant] = []
    private var dirtyIDs = Set<ObjectIdentifier>()
    /// Stores changed by the request being handled (reset by `beginRequest`).
    public private(set) var requestTouched = TouchedStores()

    /// Creates an empty log.
    public init() {}

    /// Called by a store when it changes.
    public func touch(_ p: TurnParticipant) { note(p, changes: true) }

    /// Called by a store when the current request only waits for its commit (a read of what is not
    /// durable yet: `joinCommit`, `joinPendingCommit`): its answer fails with that commit, but it
    /// changed nothing there, so it ties that store to no other (`links`) unless the request
    /// changed another store as well.
    public func join(_ p: TurnParticipant) { note(p, changes: false) }

    private func note(_ p: TurnParticipant, changes: Bool) {
        let id = ObjectIdentifier(p)
        // Most turns change one store over and over: the set is consulted once per store and
        // turn, not hashed per request.
        if id != lastTouched {
            if dirtyIDs.insert(id).inserted { dirty.append(p) }
            lastTouched = id
        }
        // Outside a request (compaction's copies, a take-back, a withdrawn or restored event, made
        // after the last request's reply was taken) a change is no request's: it links nothing.
        guard inRequest else { return }
        // (a request changing a second store: rare, a share announced by its event)
        if changes {
            if !requestChanged.contains(id) {
                requestChanged.insert(id)
                requestTouched.forEach { if $0 != id { link($0, id) } }
            }
        } else if !requestTouched.contains(id) {
            requestChanged.forEach { link($0, id) }
        }
        requestTouched.insert(id)
    }

    /// Pairs of stores one request touched together since the last commit began, one of them
    /// changed: the one later in commit order is written only once the other is durable
    /// (`SyncJob.after`). A set: a commit of thousands of `share.send {open}` holds one pair per
    /// group, not one per request.
    private var links = Set<StorePair>()

    private func link(_ a: ObjectIdentifier, _ b: ObjectIdentifier) { links.insert(StorePair(a, b)) }

    /// The stores linked to `p` that come before it in commit order (among `list`).
    private func predecessors(of p: TurnParticipant, in list: [TurnParticipant], links: Set<StorePair>) -> [ObjectIdentifier] {
        let id = ObjectIdentifier(p)
        var out: [ObjectIdentifier] = []
        for q in list where q.commitOrder < p.commitOrder {
            let qid = ObjectIdentifier(q)
            if links.contains(StorePair(qid, id)) { out.append(qid) }
        }
        return out
    }

    /// Stores the current request changed (a subset of `requestTouched`).
    private var requestChanged = TouchedStores()
    /// Between `beginRequest` and `endRequest`.
    private var inRequest = false

    /// The store `touch` saw last (always in `dirtyIDs`; nil once the log is taken).
    private var lastTouched: ObjectIdentifier? = nil

    /// Starts attributing changes to a new request.
    public func beginRequest() {
        if !requestTouched.isEmpty { requestTouched = TouchedStores() }
        if !requestChanged.isEmpty { requestChanged = TouchedStores() }
        inRequest = true
    }

    /// The current request's touches are over (its reply has taken `requestTouched`): what
    /// changes until the next `beginRequest` is no request's and links no stores.
    public func endRequest() {
        guard inRequest else { return }
        inRequest = false
        if !requestTouched.isEmpty { requestTouched = TouchedStores() }
        if !requestChanged.isEmpty { requestChanged = TouchedStores() }
    }

    /// Commits every dirty store; returns the ids of those that failed, with their errors. A store
    /// that a request changed together with an earlier one that failed is not written either.
    public func commitAll() -> [ObjectIdentifier: StoreError] {
        var failed: [ObjectIdentifier: StoreError] = [:]
        let (list, links) = takeDirtyAndLinks()
        for p in list {
            if !failed.isEmpty, predecessors(of: p, in: list, links: links).contains(where: { failed[$0] != nil }) {
                notWritten(p, &failed)
                continue
            }
            do { try p.commitTurn() } catch { failed[ObjectIdentifier(p)] = error }
        }
        return failed
    }

    /// Undoes what `p` holds (a store linked to an earlier one that failed) and counts it failed.
    private func notWritten(_ p: TurnParticipant, _ failed: inout [ObjectIdentifier: StoreError]) {
        let error = StoreError(SyncJob.notWritten)
        failed[ObjectIdentifier(p)] = error
        let job: SyncJob?
        do { job = try p.beginCommit() } catch { return }
        p.finishCommit(job, error: error)
    }

    /// The dirty stores in commit order (a stable sort), leaving the log clean.
    func takeDirty() -> [TurnParticipant] { takeDirtyAndLinks().list }

    /// `takeDirty`, with the links between them (`links`), which it clears too.
    func takeDirtyAndLinks() -> (list: [TurnParticipant], links: Set<StorePair>) {
        var list = dirty
        if list.count > 1 {
            list = list.enumerated().sorted { ($0.element.commitOrder, $0.offset) < ($1.element.commitOrder, $1.offset) }.map(\.element)
        }
        dirty.removeAll(keepingCapacity: true)
        dirtyIDs.removeAll(keepingCapacity: true)
        lastTouched = nil
        let taken = links
        if !links.isEmpty { links.removeAll(keepingCapacity: true) }
        return (list, taken)
    }

    /// True when some store waits for a commit.
    public var hasDirty: Bool { !dirty.isEmpty }

    /// True when a store's upkeep (compaction's copies) is among what waits for the next commit.
    public var hasUpkeep: Bool { dirty.contains { $0.pendingIncludesUpkeep } }

    /// Pipelined commit: `beginCommit` of every dirty store, in commit order. Returns the stores
    /// with their jobs (nil: nothing to write) and those that failed to begin (already rolled back).
    /// A store that a request changed together with one earlier in commit order that failed to
    /// begin is not written either (its changes are undone and it counts as failed): a share's
    /// event is never durable without its share, as `SyncWorker.run` keeps it once the jobs are
    /// handed over (each job names the stores it must follow, `SyncJob.after`). Stores no request
    /// linked to a failed one are written: a group's failure takes nothing from other groups, nor
    /// from the event queues' `url.open`s.
    public func beginAll() -> (stores: [(TurnParticipant, SyncJob?)], failed: [ObjectIdentifier: StoreError]) {
        var failed: [ObjectIdentifier: StoreError] = [:]
        var stores: [(TurnParticipant, SyncJob?)] = []
        let (list, links) = takeDirtyAndLinks()
        for p in list {
            let after = links.isEmpty ? [] : predecessors(of: p, in: list, links: links)
            if !failed.isEmpty, after.contains(where: { failed[$0] != nil }) {
                notWritten(p, &failed)
                continue
            }
            do {
                var job = try p.beginCommit()
                if job != nil {
                    job!.owner = ObjectIdentifier(p)
                    job!.after = after
                }
                stores.append((p, job))
            } catch {
                failed[ObjectIdentifier(p)] = error
            }
        }
        return (stores, failed)
    }
}
