// What a journal's owner counts per segment for compaction (live and total records), and the
// rule both the event queues and a group's shares follow: delete the dead oldest segments; while
// the sealed segments are mostly dead, copy the oldest one's live records forward.

/// Live and total records per journal segment, and the compaction rule.
struct SegmentLedger {
    /// Live records (pending events, pending shares) per segment.
    var live = SegmentCounts()
    /// Records written per segment (live or dead).
    var records = SegmentCounts()

    /// What compaction does next.
    enum Step: Equatable {
        /// Nothing worth doing.
        case none
        /// Delete the sealed segments up to this one: nothing in them is live.
        case delete(through: Int)
        /// Copy this (oldest sealed) segment's live records forward.
        case carry(from: Int)
    }

    /// The next step for the `sealed` segments (oldest first). Copies are made only while the
    /// sealed segments are mostly dead (live records under a quarter of their records), however
    /// many live records the oldest holds (one app's old backlog must not keep every later
    /// segment on disk): the journal stays within about four times its live records plus the
    /// active segment, and a record pending for long is copied once per three times its size of
    /// later records.
    func nextStep(sealed: ArraySlice<Int>) -> Step {
        guard let oldest = sealed.first else { return .none }
        if let d = live.deadPrefix(of: sealed) { return .delete(through: d) }
        guard (live[oldest] ?? 0) > 0, live.total(sealed) * 4 < records.total(sealed) else { return .none }
        return .carry(from: oldest)
    }

    /// `written` copies of records of segment `from` are durable in segment `to`, `live` of them
    /// copies of records still live (the others were removed while the copies were on their way;
    /// their `from` count went down then). `from` goes once it holds no live record and every
    /// removal is durable (`nextStep`'s `.delete`, at a quiet commit): a record of `from` that was
    /// not copied may have been removed by a change not yet on disk.
    mutating func carried(written: Int, live moved: Int, from: Int, to: Int) {
        live.add(moved, to: to)
        records.add(written, to: to)
        live.add(-moved, to: from)
    }

    /// Forgets the counts of the deleted segments up to `last`.
    mutating func forget(through last: Int) {
        live.forget(through: last)
        records.forget(through: last)
    }
}

/// A store whose journal compacts by `SegmentLedger`'s rule (the event queues, a group's shares).
protocol SegmentCompacting: AnyObject {
    var journal: Journal { get }
    var ledger: SegmentLedger { get }
    /// Deletes the segments up to `last` and forgets their counts.
    func forgetSegments(through last: Int)
}

extension SegmentCompacting {
    /// Deletes the sealed segments (oldest first) that hold no live record; then the oldest
    /// sealed segment whose live records are due to be copied forward, if the sealed ones are
    /// mostly dead. Called when every change is durable.
    func segmentToCarry() -> Int? {
        var step = ledger.nextStep(sealed: journal.segments.dropLast())
        if case .delete(let through) = step {
            forgetSegments(through: through)
            step = ledger.nextStep(sealed: journal.segments.dropLast())
        }
        if case .carry(let oldest) = step { return oldest }
        return nil
    }
}

/// Copies of live records compaction appended to its journal, on their way to disk with the next
/// commit (pending, then in flight). Once durable, the records live in `to`; if that commit fails
/// the copies are gone with it and nothing changed (the originals in `from` stay).
struct CarriedCopies<Item> {
    let items: [Item]
    let from: Int
    let to: Int
}

extension Journal {
    /// Appends a copy of each item (`write` makes its payload) to the pending batch, for the next
    /// commit to make durable (written and fdatasync'd like any other, off the loop); returns the
    /// copies, or nil when they could not all be appended (then none of them is pending) or other
    /// records are pending or in flight (then none is appended).
    /// Compaction only: called when nothing is pending or in flight, so the copies come before
    /// any record of the requests of the same commit (an ack or completion of a carried record
    /// always follows its copy), and the journal cannot roll before they are written.
    func appendCopies<T>(_ items: [T], from: Int, type: UInt8, _ write: (T, inout [UInt8]) -> Void) -> CarriedCopies<T>? {
        guard !items.isEmpty, !hasPending, !batchInFlight else { return nil }
        for item in items {
            do { try append(type: type) { out in write(item, &out) } } catch {
                discardPending()
                return nil
            }
        }
        return CarriedCopies(items: items, from: from, to: activeSegment)  // (a journal rolls only with nothing pending)
    }
}
