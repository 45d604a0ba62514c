// Durable per-app event queues on top of one journal (STATE/queues/events-NNNNNN.log).
// Events keep stable ids (`ev-SEQ`) and their order; acks remove them. Changes made during a
// loop turn can be undone when the turn's commit fails, so nothing unstored is ever visible.

import ShareProtocol
import ShareSystem

/// One pending event.
///
/// A class: an event sits in its app's queue, in the commit that writes it and in the undo log at
/// once, and a copy is one reference instead of four. Only the loop thread touches events.
public final class StoredEvent: @unchecked Sendable, Equatable {
    /// Stable id, e.g. `ev-42`.
    public let id: String
    /// Global sequence number (order of opening).
    public let seq: UInt64
    /// The app it is for.
    public let app: String
    /// The notification params (`id`, `kind`, `url`, ...), as sent in `app.event`.
    public let body: JSONObject
    /// The journal segment holding it (changed when compaction carries the event forward).
    var segment: Int
    /// Its record's size in the journal, in bytes (what it counts against its app's byte quota).
    public let size: Int

    init(id: String, seq: UInt64, app: String, body: JSONObject, segment: Int, size: Int = 0) {
        self.size = size
        self.id = id
        self.seq = seq
        self.app = app
        self.body = body
        self.segment = segment
    }

    /// Same id, sequence number, app, body and segment.
    public static func == (a: StoredEvent, b: StoredEvent) -> Bool {
        a === b || (a.id == b.id && a.seq == b.seq && a.app == b.app && a.body == b.body && a.segment == b.segment)
    }
}

/// Counts per journal segment (live events, records). Nearly every change is to the active
/// segment, so that one is kept outside the dictionary: no hashing on every url.open.
struct SegmentCounts {
    private var cold: [Int: Int] = [:]
    private var hotKey: Int? = nil
    private var hotValue = 0

    /// The count of `segment`, `d` when it has none; setting it makes `segment` the hot one.
    subscript(segment: Int, default d: Int) -> Int {
        get { segment == hotKey ? hotValue : cold[segment] ?? d }
        set {
            if segment != hotKey {
                if let h = hotKey { cold[h] = hotValue }
                cold[segment] = nil
                hotKey = segment
            }
            hotValue = newValue
        }
    }

    /// The count of `segment`, nil when it has none; nil removes it.
    subscript(segment: Int) -> Int? {
        get { segment == hotKey ? hotValue : cold[segment] }
        set {
            if segment == hotKey {
                if let v = newValue { hotValue = v } else { hotKey = nil }
            } else {
                cold[segment] = newValue
            }
        }
    }

    /// The segments that have a count.
    var keys: [Int] {
        guard let h = hotKey else { return Array(cold.keys) }
        return Array(cold.keys) + [h]
    }

    /// Adds `n` to the count of `segment` (the hot one without a dictionary lookup).
    @inline(__always) mutating func add(_ n: Int, to segment: Int) {
        if segment == hotKey {
            hotValue += n
        } else {
            self[segment, default: 0] += n
        }
    }

    /// Drops the counts of the segments up to `last` (deleted).
    mutating func forget(through last: Int) {
        for s in keys where s <= last { self[s] = nil }
    }

    /// The sum over `segments`.
    func total(_ segments: ArraySlice<Int>) -> Int { segments.reduce(0) { $0 + (self[$1] ?? 0) } }

    /// Taken as live counts: the last of the oldest `sealed` segments that hold nothing live (they
    /// can go), nil when the oldest holds something.
    func deadPrefix(of sealed: ArraySlice<Int>) -> Int? {
        var last: Int? = nil
        for s in sealed {
            if (self[s] ?? 0) == 0 { last = s } else { break }
        }
        return last
    }
}

/// A FIFO with removal by id in O(1): slots are emptied on ack, the head skips empty slots.
///
/// Empty slots are reclaimed (the live ones moved down and re-indexed) once they outnumber
/// max(1024, live events), wherever they are: an oldest event that is never acked does not keep
/// the slots of every event acked behind it. Each compaction moves at most as many events as
/// slots were emptied since the last one, so it is amortized O(1) per removal.
///
/// Events are kept by `seq`. Appending one below the highest `seq` appended so far (replay meets
/// carried copies after newer events; undone acks and `restore` put old events back) costs O(1)
/// and marks the queue `disordered`; `normalize()` then sorts it once, however many came out of
/// order. `ordered` and `first` are right in either state.
struct AppQueue {
    var slots: [StoredEvent?] = []
    var head = 0
    /// Slot by the number N of an id `ev-N` (hashing an integer, not a string: this is on every
    /// url.open and ack); `others` holds any id not of that canonical form (none are made).
    var positions: [UInt64: Int] = [:]
    var others: [String: Int] = [:]
    /// The highest `seq` appended since the slots were last rebuilt (a bound: removals leave it).
    var highestSeq: UInt64 = 0
    /// True when a slot may hold an event of lower `seq` than an earlier slot's (until `normalize`).
    var disordered = false

    var count: Int { positions.count + others.count }
    /// The journal bytes of the events held (`StoredEvent.size`).
    var bytes = 0

    /// N of a canonical event id `ev-N` (decimal, no leading zero), else nil.
    static func number(_ id: String) -> UInt64? {
        var n: UInt64 = 0
        var digits = 0
        var i = 0
        for c in id.utf8 {
            switch i {
            case 0: guard c == UInt8(ascii: "e") else { return nil }
            case 1: guard c == UInt8(ascii: "v") else { return nil }
            case 2: guard c == UInt8(ascii: "-") else { return nil }
            default:
                guard c >= 0x30 && c <= 0x39, !(digits == 1 && n == 0) else { return nil }
                let (m, o1) = n.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(UInt64(c - 0x30))
                guard !o1 && !o2 else { return nil }
                n = a
                digits += 1
            }
            i += 1
        }
        return digits > 0 ? n : nil
    }

    /// The slot holding `id`, if any.
    func position(of id: String) -> Int? {
        if let n = AppQueue.number(id) {
            guard let pos = positions[n], slots[pos]?.id == id else { return nil }
            return pos
        }
        return others[id]
    }

    mutating func index(_ id: String, at pos: Int) {
        if let n = AppQueue.number(id) { positions[n] = pos } else { others[id] = pos }
    }

    /// Notes the `seq` of an appended event: one below an earlier one leaves the queue disordered.
    @inline(__always) mutating func note(_ seq: UInt64) {
        if seq < highestSeq { disordered = true } else { highestSeq = seq }
    }

    /// Appends `e`, in order or not (see `normalize`). Its id must not be in the queue.
    mutating func append(_ e: StoredEvent) {
        index(e.id, at: slots.count)
        slots.append(e)
        note(e.seq)
        bytes += e.size
    }

    /// Appends an event whose id is `ev-<seq>` (as `enqueue` makes them): indexed by its sequence
    /// number without reading the id back.
    mutating func append(canonical e: StoredEvent) {
        positions[e.seq] = slots.count
        slots.append(e)
        note(e.seq)
        bytes += e.size
    }

    /// Sorts the events by `seq` when appends came out of order: once, however many did (the
    /// sort is stable and merges runs, so a sorted queue with a sorted batch after it costs
    /// about one pass). Ids keep their events; only slots change.
    mutating func normalize() {
        guard disordered else { return }
        var all: [StoredEvent] = []
        all.reserveCapacity(count)
        for s in slots[head...] { if let e = s { all.append(e) } }
        all.sort { $0.seq < $1.seq }
        slots.removeAll(keepingCapacity: true)
        head = 0
        highestSeq = 0
        disordered = false
        let held = bytes
        for e in all { append(e) }  // re-indexes each id (the same keys: nothing is added)
        bytes = held
    }

    /// Empties the slot of `id` and returns the event with its slot; no other slot moves, so
    /// `putBack` can undo it until the next `settle`.
    mutating func take(_ id: String) -> (event: StoredEvent, slot: Int)? {
        let pos: Int
        if let n = AppQueue.number(id) {
            guard let p = positions[n], slots[p]?.id == id else { return nil }
            positions[n] = nil
            pos = p
        } else {
            guard let p = others.removeValue(forKey: id) else { return nil }
            pos = p
        }
        guard let e = slots[pos] else { return nil }
        slots[pos] = nil
        bytes -= e.size
        return (e, pos)
    }

    /// Undoes a `take` (no `settle` may have run since): the event is back in its own slot.
    mutating func putBack(_ e: StoredEvent, at slot: Int) {
        slots[slot] = e
        bytes += e.size
        index(e.id, at: slot)
        if slot < head { head = slot }
    }

    /// After `take`s: the head skips the empty slots, and the slots are compacted once the empty
    /// ones outnumber max(1024, live events).
    mutating func settle() {
        while head < slots.count && slots[head] == nil { head += 1 }
        if head == slots.count {
            slots.removeAll(keepingCapacity: slots.count < 1024)
            head = 0
            highestSeq = 0
            disordered = false
        } else {
            let live = count
            if slots.count - live > max(1024, live) { compact() }
        }
    }

    /// Moves the live events down over the empty slots (keeping their order) and re-indexes the
    /// moved ones; gives back most of the array's memory when it is far larger than needed.
    mutating func compact() {
        var w = 0
        for r in head..<slots.count {
            guard let e = slots[r] else { continue }
            if w != r {
                slots[w] = e
                // Found under its seq when its id is `ev-<seq>` (as `enqueue` makes them): the
                // entry is moved without reading the id back.
                if let i = positions.index(forKey: e.seq), positions.values[i] == r {
                    positions.values[i] = w
                } else {
                    index(e.id, at: w)
                }
            }
            w += 1
        }
        slots.removeSubrange(w...)
        head = 0
        if slots.capacity > 4 * max(1024, w) {
            var fitted: [StoredEvent?] = []
            fitted.reserveCapacity(w)
            fitted.append(contentsOf: slots)
            slots = fitted
        }
    }

    mutating func remove(_ id: String) -> StoredEvent? {
        guard let (e, _) = take(id) else { return nil }
        settle()
        return e
    }

    func contains(_ id: String) -> Bool { position(of: id) != nil }

    /// The events by `seq`.
    var ordered: [StoredEvent] {
        let events = slots[head...].compactMap { $0 }
        return disordered ? events.sorted { $0.seq < $1.seq } : events
    }

    /// The event of lowest `seq`.
    var first: StoredEvent? {
        if disordered { return ordered.first }
        return slots[head...].first { $0 != nil } ?? nil
    }
}

/// The event queues of every app.
public final class EventStore: TurnParticipant, SegmentCompacting {
    enum RecordType: UInt8 {
        case event = 1
        case ack = 2
        case sequence = 3
    }

    enum Undo {
        case removeEvent(app: String, id: String)
        case restoreEvent(StoredEvent)
    }

    /// Sequence numbers at or above this are treated as damage at replay (they could never be
    /// reached: 2^62 events), so arithmetic on them can never overflow.
    static let maxSequence: UInt64 = 1 << 62

    /// The journal (exposed for compaction settings in tests and benchmarks).
    public let journal: Journal
    var queues: [String: AppQueue] = [:]
    var nextSeq: UInt64 = 1
    /// Live events and records per journal segment (compaction).
    var ledger = SegmentLedger()
    var undo: [Undo] = []
    /// Events compaction copied forward, pending (joining the next commit), then in flight.
    var carryPending: CarriedCopies<StoredEvent>? = nil
    var carryInflight: CarriedCopies<StoredEvent>? = nil
    /// What recovery found.
    public private(set) var recovery = RecoveryReport()
    /// Events recovered at start.
    public private(set) var recoveredEvents = 0

    /// The turn log this store reports its changes to (nil: the caller commits by hand).
    public let turn: TurnLog?
    /// The participant's name in logs.
    public var participantName: String { "event queues" }

    /// Opens the queues under `directory`, replaying the journal.
    public init(directory: String, segmentLimit: Int? = nil, turn: TurnLog? = nil) throws(StoreError) {
        self.turn = turn
        journal = try Journal(directory: directory, name: "events")
        if let segmentLimit { journal.segmentLimit = segmentLimit }
        var maxSeq: UInt64 = 0
        var marked = Set<Int>()  // segments holding a sequence mark
        recovery = try journal.replay { rec in
            ledger.records[rec.segment, default: 0] += 1
            guard let value = try? JSONParser.parseBuffer(rec.payload), case .object(let o) = value else {
                return
            }
            switch RecordType(rawValue: rec.type) {
            case .event?:
                guard let app = o["app"]?.stringValue, let id = o["id"]?.stringValue,
                    let seqText = o["seq"], case .number(let s) = seqText, let seq = UInt64(s),
                    seq < EventStore.maxSequence, case .object(let body)? = o["body"]
                else { return }
                maxSeq = max(maxSeq, seq)
                // Mutated in place: copying the queue out of the dictionary would copy it per record.
                if queues[app]?.contains(id) == true { return }  // a copy made by compaction
                // Copies carried forward by compaction come after newer events: appended out of
                // order, each queue is sorted once after the replay (not once per copy).
                queues[app, default: AppQueue()].append(
                    StoredEvent(id: id, seq: seq, app: app, body: body, segment: rec.segment, size: rec.payload.count))
                ledger.live[rec.segment, default: 0] += 1
            case .ack?:
                guard let app = o["app"]?.stringValue, let ids = o["ids"]?.arrayValue else { return }
                for idv in ids {
                    if let id = idv.stringValue, let e = queues[app]?.remove(id) {
                        ledger.live[e.segment, default: 0] -= 1
                    }
                }
                if queues[app]?.count == 0 { queues[app] = nil }
            case .sequence?:
                if case .number(let s)? = o["next"], let n = UInt64(s), n > 0, n < EventStore.maxSequence {
                    maxSeq = max(maxSeq, n - 1)
                    marked.insert(rec.segment)
                }
            case nil:
                return
            }
        }
        normalizeQueues()
        pendingTotal = queues.values.reduce(0) { $0 + $1.count }
        nextSeq = maxSeq + 1
        recoveredNextSequence = nextSeq
        recoveredEvents = pendingCount
        // A crash between a new segment's creation and the commit of its mark leaves it empty;
        // reopened, it is the active segment without a mark (see `forgetSegments`).
        activeSegmentUnmarked = journal.segments.count > 1 && !marked.contains(journal.activeSegment)
        journal.onNewSegment = { [unowned self] j throws(StoreError) in
            try j.append(type: RecordType.sequence.rawValue) { out in
                JSONValue.object(["next": .number(String(self.nextSeq))]).write(to: &out)
            }
        }
    }

    /// Events not yet acked, across apps.
    public var pendingCount: Int { pendingTotal }

    /// `app`'s pending events and their journal bytes (one lookup: on every url.open).
    public func pendingLoad(for app: String) -> (count: Int, bytes: Int) {
        guard let q = queues[app] else { return (0, 0) }
        return (q.count, q.bytes)
    }
    /// Events not yet acked, kept as they change (no walk over every app's queue per call).
    var pendingTotal = 0

    /// Pending events of `app`, oldest first.
    public func pending(for app: String) -> [StoredEvent] {
        guard let i = queues.index(forKey: app) else { return [] }
        queues.values[i].normalize()  // after `restore`s out of order: sorted once, here
        return queues.values[i].ordered
    }

    /// Number of pending events of `app`.
    public func pendingCount(for app: String) -> Int { queues[app]?.count ?? 0 }

    /// Apps with pending events.
    public var appsWithPending: [String] { queues.keys.sorted() }

    /// Queues an event for `app`: appended to the journal (durable at the next `commit`) and
    /// visible at once; undone if that commit fails. `fields` become the notification params.
    ///
    /// A caller that builds `fields` for this call can make `id` its first member (any value):
    /// it is then replaced in place, without copying the members.
    public func enqueue(app: String, fields: consuming JSONObject) throws(StoreError) -> StoredEvent {
        let seq = nextSeq
        let id = EventStore.canonicalID(seq)
        var body = consume fields
        if body.members.first?.key == "id", !body.members.dropFirst().contains(where: { $0.key == "id" }) {
            body["id"] = .string(id)  // found at once: the first member
        } else {
            var members: [(key: String, value: JSONValue)] = []
            members.reserveCapacity(body.count + 1)  // before the first append: one allocation
            members.append((key: "id", value: .string(id)))
            for m in body where m.key != "id" { members.append(m) }  // the store owns `id`
            body = JSONObject(uniqueMembers: members)
        }
        let size = try journal.append(type: RecordType.event.rawValue) { out in
            EventStore.writeEventRecord(app: app, id: id, seq: seq, body: body, to: &out)
        }
        nextSeq += 1
        let event = StoredEvent(id: id, seq: seq, app: app, body: body, segment: journal.activeSegment, size: size)
        queues[app, default: AppQueue()].append(canonical: event)
        pendingTotal += 1
        ledger.live[event.segment, default: 0] += 1
        ledger.records[event.segment, default: 0] += 1
        undo.append(.removeEvent(app: app, id: id))
        turn?.touch(self)
        return event
    }

    /// `ev-<seq>`, written straight into the string (no concatenation).
    static func canonicalID(_ seq: UInt64) -> String {
        var digits = 1
        var rest = seq
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return String(unsafeUninitializedCapacity: 3 + digits) { out in
            out[0] = UInt8(ascii: "e")
            out[1] = UInt8(ascii: "v")
            out[2] = UInt8(ascii: "-")
            var v = seq
            var i = 2 + digits
            repeat {
                out[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
                v /= 10
                i -= 1
            } while v > 0
            return 3 + digits
        }
    }

    /// An event record's payload: `{"app":…,"id":…,"seq":N,"body":{…}}`, written without a tree.
    static func writeEventRecord(app: String, id: String, seq: UInt64, body: JSONObject, to out: inout [UInt8]) {
        JSONValue.writeString(app, after: #"{"app":"#, to: &out)
        JSONValue.writeString(id, after: #","id":"#, to: &out)
        JSONValue.appendStatic(#","seq":"#, to: &out)
        JSONValue.writeInteger(seq, to: &out)
        JSONValue.appendStatic(#","body":"#, to: &out)
        JSONValue.object(body).write(to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// Removes the given events of `app`; ids it does not hold are ignored. Returns the ids removed.
    public func ack(app: String, ids: [String]) throws(StoreError) -> [String] {
        // The queue is taken out of the dictionary while it changes: one lookup of `app`, and
        // the queue is uniquely referenced (no copy on write).
        guard var q = queues.removeValue(forKey: app) else { return [] }
        // Slots are only emptied (`take`) until the record is appended, so a failed append puts
        // each event back in its own slot: O(ids), nothing re-sorted.
        var removed: [(event: StoredEvent, slot: Int)] = []
        for id in ids {
            if let r = q.take(id) { removed.append(r) }  // a repeated id is not found twice
        }
        guard !removed.isEmpty else {
            queues[app] = q
            return []
        }
        do {
            try journal.append(type: RecordType.ack.rawValue, freeing: true) { out in
                JSONValue.writeString(app, after: #"{"app":"#, to: &out)
                JSONValue.appendStatic(#","ids":["#, to: &out)
                for (i, r) in removed.enumerated() {
                    JSONValue.writeString(r.event.id, after: "", comma: i > 0, to: &out)
                }
                JSONValue.appendStatic("]}", to: &out)
            }
        } catch {
            for r in removed { q.putBack(r.event, at: r.slot) }  // nothing was stored
            queues[app] = q
            throw error
        }
        q.settle()
        if q.count > 0 { queues[app] = q }
        pendingTotal -= removed.count
        ledger.records[journal.activeSegment, default: 0] += 1
        var unique: [String] = []
        unique.reserveCapacity(removed.count)
        for (e, _) in removed {
            ledger.live[e.segment, default: 0] -= 1
            undo.append(.restoreEvent(e))
            unique.append(e.id)
        }
        turn?.touch(self)
        return unique
    }

    /// The event queues commit after the group stores (see `TurnParticipant.commitOrder`).
    public var commitOrder: Int { 1 }

    /// The sequence number the next event gets (its id is `ev-N`).
    public var nextSequence: UInt64 { nextSeq }

    /// The next sequence number as recovered at open: events with a lower one were written once.
    public private(set) var recoveredNextSequence: UInt64 = 1

    /// True when an event with this id is pending.
    public func isPending(app: String, id: String) -> Bool { queues[app]?.contains(id) ?? false }

    /// No event gets a sequence number up to `seq` from now on (an event announced by a share,
    /// to be re-created later with it: `restore`).
    public func reserveSequence(through seq: UInt64) { nextSeq = max(nextSeq, seq + 1) }

    /// Re-creates an event that was announced but never written (a crash between a share's record
    /// and its event): same id and sequence number.
    public func restore(app: String, id: String, seq: UInt64, body: JSONObject) throws(StoreError) {
        guard !isPending(app: app, id: id) else { return }
        let size = try journal.append(type: RecordType.event.rawValue) { out in
            EventStore.writeEventRecord(app: app, id: id, seq: seq, body: body, to: &out)
        }
        let event = StoredEvent(id: id, seq: seq, app: app, body: body, segment: journal.activeSegment, size: size)
        // Out of order (many shares' events re-created at start): sorted once, when next read.
        queues[app, default: AppQueue()].append(event)
        pendingTotal += 1
        ledger.live[event.segment, default: 0] += 1
        ledger.records[event.segment, default: 0] += 1
        nextSeq = max(nextSeq, seq + 1)
        undo.append(.removeEvent(app: app, id: id))
        turn?.touch(self)
    }

    /// True when changes wait for `commit`.
    public var hasPending: Bool { journal.hasPending }

    /// Makes this turn's changes durable (one write, one fdatasync). On failure they are undone.
    public func commit() throws(StoreError) { try commitTurn() }

    /// True when compaction's copies wait for the next commit (up to 4,096 records: the broker
    /// hands such a commit to its sync worker rather than writing it itself).
    public var pendingIncludesUpkeep: Bool { carryPending != nil }

    public var failedRecordsMayRemain: Bool { journal.hasOwedCutBack }

    /// Set at shutdown: no more copies are made (what is pending is written; the rest waits for
    /// the next start).
    public var carryingPaused = false

    /// The changes handed to the sync worker and not yet durable (pipelined commit).
    var inflightUndo: [Undo] = []

    /// Makes the next commit fail before it is handed over (everything not yet durable is rolled
    /// back and its requests answer -32005): for a change that could not be undone any other way
    /// (an event whose share was rolled back, when its ack cannot be appended).
    public func failTurn(_ reason: String) {
        failedTurn = reason
        turn?.touch(self)
    }

    var failedTurn: String? = nil

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
        swap(&inflightUndo, &undo)  // (inflightUndo is empty: no buffer is copied or allocated)
        carryInflight = carryPending  // (pending copies are in the batch taken)
        carryPending = nil
        return batch.map { SyncJob(batch: $0) }
    }

    public func finishCommit(_ job: SyncJob?, error: StoreError?) {
        if error != nil {
            rollback()  // the changes made since, then the job's own
            undoAll(inflightUndo)
            inflightUndo.removeAll(keepingCapacity: true)
            carryInflight = nil  // (the originals stay where they are)
            if let b = job?.batch { journal.finishBatch(b, failed: true) }
            return
        }
        inflightUndo.removeAll(keepingCapacity: true)
        if let b = job?.batch { journal.finishBatch(b, failed: false) }
        if let c = carryInflight {
            carryInflight = nil
            rehome(c)
        }
        // Segment clean-up once everything is durable: only then may a segment whose events
        // were all acked go (the acks must be on disk first).
        if !journal.hasPending && undo.isEmpty { compactIfUseful() }
    }

    /// Undoes this turn's changes in memory and drops its journal records.
    public func rollback() {
        journal.discardPending()
        undoAll(undo)
        undo.removeAll(keepingCapacity: true)
        carryPending = nil  // (its copies were pending: discarded above)
    }

    func undoAll(_ list: [Undo]) {
        var restored = false
        for u in list.reversed() {
            switch u {
            case .removeEvent(let app, let id):
                if let e = queues[app]?.remove(id) {
                    ledger.live[e.segment, default: 0] -= 1
                    pendingTotal -= 1
                }
                if queues[app]?.count == 0 { queues[app] = nil }
                nextSeq = min(nextSeq, AppQueue.number(id) ?? nextSeq)
            case .restoreEvent(let e):
                // Acked events go back at the end (found by id at once if a later entry removes
                // them again); each queue is sorted once below, not once per event.
                queues[e.app, default: AppQueue()].append(e)
                ledger.live[e.segment, default: 0] += 1
                pendingTotal += 1
                restored = true
            }
        }
        if restored { normalizeQueues() }
    }

    /// Sorts every queue that had events appended out of order (once each).
    func normalizeQueues() {
        // By index, in place (iterating `indices` would hold the storage and copy it on write).
        var i = queues.startIndex
        while i != queues.endIndex {
            queues.values[i].normalize()
            queues.formIndex(after: &i)
        }
    }

    /// Drops sealed segments (oldest first) that hold no live event; while the sealed segments are
    /// mostly dead, copies the oldest one's live events forward (a chunk per call) to go to disk
    /// with the next commit, off the loop like any other (`rehome` then moves them), and drops
    /// the segment once they all are. Called when every change is durable.
    func compactIfUseful() {
        guard let oldest = segmentToCarry(), !carryingPaused else { return }
        // At most `carryChunk` per commit, in sequence order.
        var carried: [StoredEvent] = []
        scan: for (_, q) in queues {
            for slot in q.slots[q.head...] {
                guard let e = slot, e.segment == oldest else { continue }
                carried.append(e)
                if carried.count == carryChunk { break scan }
            }
        }
        carried.sort { $0.seq < $1.seq }
        let copies = journal.appendCopies(carried, from: oldest, type: RecordType.event.rawValue) { e, out in
            EventStore.writeEventRecord(app: e.app, id: e.id, seq: e.seq, body: e.body, to: &out)
        }
        guard let copies else { return }
        carryPending = copies
        turn?.touch(self)
    }

    /// Compaction's copies are durable: each carried event lives in their segment now, acked
    /// meanwhile or not (an ack of the same commit is on disk too; one of a later commit that
    /// fails puts the event back, and then in its new segment, where it is counted). The old
    /// segment goes at the next quiet commit once no live event is left in it (not here: an
    /// event of it that was not carried may have an ack that is not durable yet).
    func rehome(_ c: CarriedCopies<StoredEvent>) {
        var live = 0
        for e in c.items where e.segment == c.from {
            e.segment = c.to  // (the queues hold these very objects)
            if let p = queues[e.app]?.position(of: e.id), queues[e.app]?.slots[p] === e { live += 1 }
        }
        ledger.carried(written: c.items.count, live: live, from: c.from, to: c.to)
    }

    /// Most events copied forward by one compaction (tests lower it).
    var carryChunk = 4096

    /// True while the active segment holds no sequence mark and follows older segments (a crash
    /// left it before its mark was committed): the older segments hold the highest ids used, so
    /// none goes before a segment with a mark is started (`forgetSegments`).
    var activeSegmentUnmarked = false

    /// Deletes the segments up to `last` and forgets their counts; first starts a new segment
    /// (with its mark) when the active one has none.
    func forgetSegments(through last: Int) {
        if activeSegmentUnmarked {
            do { try journal.roll() } catch { return }  // (tried again at the next compaction)
            activeSegmentUnmarked = false
        }
        guard let deleted = journal.deleteSegments(through: last) else { return }
        ledger.forget(through: deleted)
    }
}
