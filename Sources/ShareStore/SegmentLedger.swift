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

    /// `count` live records of segment `from` now have durable copies in segment `to`. Returns
    /// true when `from` holds no live record any more (it can go).
    mutating func moved(_ count: Int, from: Int, to: Int) -> Bool {
        live.add(count, to: to)
        records.add(count, to: to)
        live.add(-count, to: from)
        return (live[from] ?? 0) <= 0
    }

    /// Forgets the counts of the deleted segments up to `last`.
    mutating func forget(through last: Int) {
        live.forget(through: last)
        records.forget(through: last)
    }
}

extension Journal {
    /// Appends a copy of each item (`write` makes its payload) and commits them on the calling
    /// thread; returns the segment they landed in, or nil when they could not be made durable (then
    /// nothing of them is pending). Compaction only: nothing else may be pending.
    func commitCopies<T>(_ items: [T], type: UInt8, _ write: (T, inout [UInt8]) -> Void) -> Int? {
        for item in items {
            do { try append(type: type) { out in write(item, &out) } } catch {
                discardPending()
                return nil
            }
        }
        let target = activeSegment  // (the journal rolls only after the commit)
        do { try commit() } catch { return nil }  // the old segment stays (replay keeps the newest copy)
        return target
    }
}
