// A segmented, checksummed, append-only journal with group commit: records appended during one
// loop turn are written with one write(2) and made durable with one fdatasync at `commit()`.
// Recovery truncates a torn tail and quarantines records whose checksum fails. Segment numbers
// may have gaps (a number reserved for a snapshot that was never put in place: see
// SnapshotJob.swift); a snapshot's temporary file (`NAME-NNNNNN.log.tmp`) found at open is removed.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import CShareSystem
import ShareSystem

/// A storage failure; maps to JSON-RPC -32005. Nothing of the failed operation was stored.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// What failed, naming the path and the cause.
    public var message: String
    /// True for "no space left on device".
    public var diskFull: Bool
    /// Set on a failed commit's error when its records could not be taken off the journal (the
    /// disk refuses the cut and the zeros too): they may be there after a restart.
    public var recordsMayRemain = false
    /// Creates an error.
    public init(_ message: String, diskFull: Bool = false) {
        self.message = message
        self.diskFull = diskFull
    }
    init(_ what: String, _ e: SystemError) {
        self.init("\(what): \(e)", diskFull: e.errno == ENOSPC || e.errno == EDQUOT)
    }
    /// The message.
    public var description: String { message }
}

/// What recovery found in a journal.
public struct RecoveryReport: Sendable, Equatable {
    /// Records replayed.
    public var records = 0
    /// Records whose checksum failed (copied aside into `quarantine/`).
    public var quarantined = 0
    /// Bytes cut off a torn tail.
    public var truncatedBytes = 0
    /// Segment files read.
    public var segments = 0
    /// Human-readable notes (one per problem).
    public var notes: [String] = []
    /// Creates an empty report.
    public init() {}
}

/// One record read back at recovery.
public struct JournalRecord {
    /// The record type (the owner's own numbering).
    public var type: UInt8
    /// The segment it was read from.
    public var segment: Int
    /// Where in the segment it starts.
    public var offset: Int = 0
    /// The payload bytes.
    public var payload: UnsafeRawBufferPointer
}

/// Where a test may inject a failure into the journal (a store seam for full-disk tests).
public enum JournalFaultPoint: Sendable {
    /// Reserving space for an append (a full disk shows here first).
    case reserve
    /// Writing a batch at commit.
    case write
    /// fdatasync at commit.
    case sync
    /// Writing a snapshot into its temporary file (off the loop; `write` fails it too).
    case snapshotWrite
    /// fdatasync of the snapshot's temporary file (`sync` fails it too).
    case snapshotSync
    /// Renaming the snapshot's temporary file to its segment's name.
    case snapshotRename
    /// fsync of the directory after that rename.
    case snapshotDirectorySync
    /// fsync of the directory after a new segment is created (its name must be durable before a
    /// record in it is acknowledged).
    case segmentDirectorySync
    /// Cutting a failed batch's records off the segment (ftruncate, then fdatasync).
    case cutBack
    /// Writing zeros over a failed batch's records when the cut failed (then fdatasync).
    case cutBackZeros
    /// Unlinking a dead segment.
    case unlinkSegment
    /// fsync of a directory whose new entries a commit's records name (a share's files, and the
    /// share's directory in `files/`).
    case directorySync
    /// Removing a share's files once it is completed (or refused): nothing is removed.
    case removeFiles
}

/// One journal's records of one commit, written and made durable off the loop thread.
/// An open segment file, closed when its last holder lets go: the journal while the segment is
/// active, and each batch written to it (a roll may replace the active segment while a batch is
/// in flight). One descriptor per segment, not a dup(2) and a close(2) per commit.
final class SegmentDescriptor: @unchecked Sendable {  // the descriptor never changes
    let fd: Int32
    init(_ fd: Int32) { self.fd = fd }
    deinit { FD.close(fd) }
}

/// Whether a batch's write put any of its bytes into the file (set by the thread that writes it,
/// read by the loop once the commit's outcome is in: the worker's lock orders the two).
final class BatchProgress: @unchecked Sendable {
    var wroteSome = false
}

/// One commit's records of a journal, taken off it by `Journal.takeBatch` and written and made
/// durable by `writeAndSync` (on the sync worker, or the loop); `Journal.finishBatch` then
/// settles the journal with the outcome.
public struct JournalBatch: @unchecked Sendable {  // the bytes are the worker's alone
    let progress = BatchProgress()
    let file: SegmentDescriptor
    var fd: Int32 { file.fd }
    let bytes: [UInt8]
    let startOffset: Int
    /// Zeros written after the records (`zeroFrom..<zeroTo`, empty for most batches): see
    /// `Journal.zeroAhead`.
    let zeroFrom: Int
    let zeroTo: Int
    let path: String
    let faults: (@Sendable (JournalFaultPoint) -> Int32?)?

    /// A block of zeros for `zeroFrom..<zeroTo`, written from worker threads (read only).
    nonisolated(unsafe) static let zeros: UnsafeRawBufferPointer = {
        let size = 64 * 1024
        let p = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        p.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        return UnsafeRawBufferPointer(start: p, count: size)
    }()

    /// Writes zeros over `from..<to` of `fd`; false at the first write that fails.
    static func writeZeros(_ fd: Int32, from: Int, to: Int) -> Bool {
        var at = from
        while at < to {
            let n = min(to - at, zeros.count)
            guard (try? FD.pwriteAll(fd, UnsafeRawBufferPointer(rebasing: zeros[0..<n]), at: at)) != nil else { return false }
            at += n
        }
        return true
    }

    /// pwrite(2) at the batch's offset (plus the zero fill) + fdatasync. Runs on the worker thread.
    func writeAndSync() -> StoreError? {
        do throws(SystemError) {
            if let e = faults?(.write) { throw SystemError("write", errno: e) }
            var written = 0
            defer { progress.wroteSome = written > 0 }
            try bytes.withUnsafeBytes { buf in
                Result { () throws(SystemError) in try FD.pwriteAll(fd, buf, at: startOffset, written: &written) }
            }.get()
            // Best effort: a zero fill that fails costs only speed (the records are written).
            _ = JournalBatch.writeZeros(fd, from: zeroFrom, to: zeroTo)
            if let e = faults?(.sync) { throw SystemError("fdatasync", errno: e) }
            _ = try retrying("fdatasync") { sb_datasync(fd) }
        } catch {
            return StoreError("cannot write \(path)", error)
        }
        return nil
    }
}

/// Record layout (little endian): magic "\xA5S" (2 bytes), type (1), flags (1, zero),
/// payload length (4), CRC-32C (4) of bytes 2..<8 followed by the payload, then the payload.
///
/// Space on disk: the active segment's blocks are reserved ahead (`reserveChunk`, fallocate with
/// KEEP_SIZE) and, a little ahead of the records, written with zeros (`zeroAhead`), so that most
/// commits overwrite blocks that are already allocated, written and inside the file's size. Their
/// fdatasync then has no metadata to commit (no extent conversion, no size change), which on ext4
/// makes it about a third cheaper. Replay therefore treats a run of zeros after the last record as
/// free space, not as a torn tail.
public final class Journal {
    static let magic0: UInt8 = 0xA5
    static let magic1: UInt8 = 0x53
    static let headerSize = 12
    /// A header with the magic and zeros, copied in front of each record.
    static let headerTemplate: [UInt8] = [magic0, magic1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    /// Largest record payload accepted at replay (guards against a corrupt length).
    public static let maxPayload = 64 * 1024 * 1024

    /// Directory holding the segments (`NAME-000001.log`, ...) and `quarantine/`.
    public let directory: String
    /// The journal's name (segment file prefix).
    public let name: String
    /// Roll to a new segment once the active one is this large.
    public var segmentLimit: Int = 16 * 1024 * 1024
    /// Preallocate this much ahead of the active segment's end.
    public var reserveChunk: Int = 1 * 1024 * 1024
    /// Reserved space that only space-freeing records (`append(freeing: true)`: acks, share
    /// completions) may use, so that a full disk can still be freed through the broker.
    public var freeingHeadroom: Int = 64 * 1024

    /// Sets `reserveChunk` and `freeingHeadroom` (a test seam's shape).
    public func setSpace(_ space: (reserveChunk: Int, freeingHeadroom: Int)) {
        reserveChunk = space.reserveChunk
        freeingHeadroom = space.freeingHeadroom
    }
    /// Keep about this much of the reserved space ahead of the records written with zeros (the
    /// commit that extends it pays the metadata commit once for the commits that follow).
    public var zeroAhead: Int = 256 * 1024

    /// Segment numbers present, oldest first; the last is the active one.
    public private(set) var segments: [Int] = []
    var active: SegmentDescriptor? = nil
    var activeFD: Int32 { active?.fd ?? -1 }
    /// The active segment's path (built once per segment: every batch carries it for its errors).
    var activePath = ""
    var activeSize = 0
    var reservedEnd = 0
    /// The file's size: records, then zeros written ahead of them (`zeroAhead`).
    var writtenEnd = 0
    /// The end of the last valid record of the last segment, found by replay.
    var recoveredEnd = 0
    var pending: [UInt8] = []
    /// Records appended since the journal was opened (lets callers tell whether a call wrote).
    public private(set) var appendCount: UInt64 = 0
    /// Test seam: returns an errno to fail the given step with, or nil to proceed.
    public var faultInjector: (@Sendable (JournalFaultPoint) -> Int32?)? = nil
    /// Called when a new segment is started, to append its first record (e.g. a sequence
    /// high-water mark), which is committed before the segment takes any other; when that fails
    /// the segment is not started (the previous one stays active).
    public var onNewSegment: ((Journal) throws(StoreError) -> Void)? = nil
    /// A failed batch's records that could not be taken off the segment (`cutBack`): nothing is
    /// written until they are (a record the broker answered as not stored must not come back),
    /// no new segment is started, and a journal about to be closed tries once more
    /// (`settleOwedCutBack`). `file` is the segment they are in.
    /// True while a failed commit's records could not be taken off (`owedCutBack`).
    public var hasOwedCutBack: Bool { owedCutBack != nil }
    var owedCutBack: (file: SegmentDescriptor, start: Int, end: Int)? = nil
    /// A directory fsync after segments were deleted failed: no further segment is deleted until
    /// one succeeds (a later segment must not go while an earlier one's deletion may be undone).
    var directorySyncOwed = false

    /// Opens (creating if needed) the journal in `directory`. Call `replay` before appending.
    public convenience init(directory: String, name: String) throws(StoreError) {
        try self.init(directory: directory, name: name, listDirectory: FileIO.listDirectory)
    }

    /// The same, listing `directory` with `listDirectory` (`FileIO.listDirectory`; a test's
    /// stand-in may fail).
    init(directory: String, name: String, listDirectory: (String) -> [String]?) throws(StoreError) {
        self.directory = directory
        self.name = name
        let created: [String]
        do { created = try DefaultPaths.makeDirectories(directory) } catch { throw StoreError("cannot create \(directory)", error) }
        guard FileIO.isPlainDirectory(directory) else {
            throw StoreError("\(directory) is not a plain directory (a symlink?); refusing to keep a journal there")
        }
        guard let entries = listDirectory(directory) else {
            throw StoreError("cannot read the directory \(directory)")
        }
        let prefix = name + "-"
        for e in entries where e.hasPrefix(prefix) {
            if e.hasSuffix(".log") {
                if let n = Int(e.dropFirst(prefix.count).dropLast(4)) { segments.append(n) }
            } else if e.hasSuffix(".log" + Journal.tempSuffix) {
                // A snapshot a crash interrupted before its rename: the segments it was to replace
                // are all still there.
                unlink(directory + "/" + e)
            }
        }
        segments.sort()
        // The directories made for it must be durable before its first segment's name is (that
        // segment's directory fsync does not make the directory's own entry durable: a power
        // cut would take the journal with it). A journal without segments may be in a directory
        // an earlier try made without getting that far: its entry is made durable again.
        if !created.isEmpty || segments.isEmpty {
            if let (p, e) = DefaultPaths.syncParents(of: created.isEmpty ? [directory] : created) {
                throw StoreError("cannot make \(directory) durable", SystemError("fsync \(p)", errno: e))
            }
        }
    }


    /// Ends the name of a snapshot being written (`NAME-NNNNNN.log.tmp`) until it is renamed to
    /// its segment's name; one found when the journal is opened is a crash's leftover and removed.
    static let tempSuffix = ".tmp"

    func path(of segment: Int) -> String {
        let digits = String(segment)
        return directory + "/" + name + "-" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits + ".log"
    }

    /// True when records are waiting for `commit()`.
    public var hasPending: Bool { !pending.isEmpty }

    /// The files this replay copied into `quarantine/` (then it is pruned, never of these,
    /// whatever their clock says).
    var quarantinedFiles: Set<String> = []

    /// The active segment's number (after `replay`).
    public var activeSegment: Int { segments.last ?? 0 }

    // MARK: Recovery

    /// Reads every segment in order and calls `visit` per valid record; repairs what it must.
    /// Afterwards the last segment is open for appending (a first one is created when none exists).
    public func replay(_ visit: (JournalRecord) -> Void) throws(StoreError) -> RecoveryReport {
        var report = RecoveryReport()
        for (i, seg) in segments.enumerated() {
            let isLast = i == segments.count - 1
            let p = path(of: seg)
            let bytes: [UInt8]
            do { bytes = try FileIO.readFile(p, limit: Int.max) } catch { throw StoreError("cannot read \(p)", error) }
            report.segments += 1
            let validEnd = bytes.withUnsafeBytes { buf in
                scan(buf, segment: seg, isLast: isLast, report: &report, visit: visit)
            }
            if isLast { recoveredEnd = validEnd }
            if validEnd < bytes.count && !bytes[validEnd...].contains(where: { $0 != 0 }) {
                // Zeros written ahead of the records: free space, not damage. A sealed segment
                // gives it back (best effort; the zeros are harmless if the truncation fails).
                if !isLast { _ = truncate(p, off_t(validEnd)) }
            } else if validEnd < bytes.count {
                // A torn tail (or trailing garbage with nothing valid after it); zeros after its
                // last non-zero byte were written ahead and are not counted as damage.
                let torn = bytes[validEnd...].lastIndex(where: { $0 != 0 })! + 1 - validEnd
                report.truncatedBytes += torn
                report.notes.append("\(p): truncated a torn tail of \(torn) bytes at offset \(validEnd)")
                if truncate(p, off_t(validEnd)) != 0 {
                    throw StoreError("cannot truncate \(p)", SystemError("truncate", errno: currentErrno()))
                }
            }
        }
        if !quarantinedFiles.isEmpty { pruneQuarantine() }
        if segments.isEmpty {
            try startSegment(1)
        } else {
            try openActive()
        }
        return report
    }

    /// Most files kept in `quarantine/`: each recovery that finds damage adds one per damaged
    /// stretch (a torn tail after every crash mid-write), so the oldest go beyond this many.
    public static let quarantineKeep = 64

    /// Deletes the oldest files (by modification time) of `quarantine/` beyond `quarantineKeep`.
    func pruneQuarantine() {
        let dir = directory + "/quarantine"
        guard let names = FileIO.listDirectory(dir), names.count > Journal.quarantineKeep else { return }
        var aged: [(mtime: Int, name: String)] = []
        for name in names where !quarantinedFiles.contains(name) {
            var st = stat()
            guard lstat(dir + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            #if canImport(Darwin)
                aged.append((st.st_mtimespec.tv_sec * 1_000_000_000 + st.st_mtimespec.tv_nsec, name))
            #else
                aged.append((st.st_mtim.tv_sec * 1_000_000_000 + st.st_mtim.tv_nsec, name))
            #endif
        }
        aged.sort { $0.mtime != $1.mtime ? $0.mtime < $1.mtime : $0.name < $1.name }
        let keepOld = max(0, Journal.quarantineKeep - quarantinedFiles.count)
        for old in aged.dropLast(keepOld) { _ = unlink(dir + "/" + old.name) }
    }

    /// Scans one segment's bytes; returns the end offset of the last valid record.
    func scan(
        _ buf: UnsafeRawBufferPointer, segment: Int, isLast: Bool, report: inout RecoveryReport,
        visit: (JournalRecord) -> Void
    ) -> Int {
        var pos = 0
        var validEnd = 0
        while pos < buf.count {
            if let len = validRecord(at: pos, in: buf) {
                let payload = UnsafeRawBufferPointer(rebasing: buf[(pos + Journal.headerSize)..<(pos + Journal.headerSize + len)])
                visit(JournalRecord(type: buf[pos + 2], segment: segment, offset: pos, payload: payload))
                report.records += 1
                pos += Journal.headerSize + len
                validEnd = pos
                continue
            }
            // Damage at `pos`: find the next valid record, if any.
            var next = pos + 1
            while next < buf.count && validRecord(at: next, in: buf) == nil { next += 1 }
            if next >= buf.count {
                // Nothing valid follows: a torn tail. Keep a copy if it held more than zeros (up to
                // its last non-zero byte: what follows is space zeroed ahead).
                if let last = buf[pos...].lastIndex(where: { $0 != 0 }) {
                    quarantine(UnsafeRawBufferPointer(rebasing: buf[pos...last]), segment: segment, offset: pos, report: &report, counted: false)
                }
                return validEnd
            }
            quarantine(UnsafeRawBufferPointer(rebasing: buf[pos..<next]), segment: segment, offset: pos, report: &report, counted: true)
            pos = next
            validEnd = pos
        }
        return validEnd
    }

    /// The payload length when a whole, checksum-valid record starts at `pos`.
    func validRecord(at pos: Int, in buf: UnsafeRawBufferPointer) -> Int? {
        guard buf.count - pos >= Journal.headerSize, buf[pos] == Journal.magic0, buf[pos + 1] == Journal.magic1,
            buf[pos + 3] == 0
        else { return nil }
        let len = Int(buf.loadUnaligned(fromByteOffset: pos + 4, as: UInt32.self).littleEndian)
        guard len <= Journal.maxPayload, buf.count - pos - Journal.headerSize >= len else { return nil }
        let stored = buf.loadUnaligned(fromByteOffset: pos + 8, as: UInt32.self).littleEndian
        var crc = sb_crc32c(0, buf.baseAddress! + pos + 2, 6)
        crc = sb_crc32c(crc, buf.baseAddress! + pos + Journal.headerSize, len)
        return crc == stored ? len : nil
    }

    func quarantine(
        _ bytes: UnsafeRawBufferPointer, segment: Int, offset: Int, report: inout RecoveryReport, counted: Bool
    ) {
        let dir = directory + "/quarantine"
        _ = try? DefaultPaths.makeDirectories(dir)
        guard FileIO.isPlainDirectory(dir) else {
            report.notes.append("\(dir) is not a plain directory (a symlink?): \(bytes.count) damaged bytes at offset \(offset) of \(path(of: segment)) not copied")
            if counted { report.quarantined += 1 }
            return
        }
        let fileName = "\(name)-\(segment)@\(offset).bad"
        let file = dir + "/" + fileName
        try? FileIO.writeAtomically(file, Array(bytes))
        quarantinedFiles.insert(fileName)
        if counted {
            report.quarantined += 1
            report.notes.append("\(path(of: segment)): \(bytes.count) damaged bytes at offset \(offset) failed their checksum; copied to \(file)")
        } else {
            report.notes.append("\(path(of: segment)): torn tail of \(bytes.count) bytes at offset \(offset) copied to \(file)")
        }
    }

    // MARK: Appending

    /// Appends a record to the pending batch. The payload is written by `body`. Space is reserved
    /// on disk first, so a full disk fails here (nothing appended) rather than at commit. Returns
    /// the payload's length.
    @discardableResult
    public func append(type: UInt8, freeing: Bool = false, _ body: (inout [UInt8]) -> Void) throws(StoreError) -> Int {
        let start = pending.count
        Journal.encodeRecord(type: type, to: &pending, body)
        let len = pending.count - start - Journal.headerSize
        // Other records keep `freeingHeadroom` reserved behind them for space-freeing ones.
        let needed = activeSize + pending.count + (freeing ? 0 : freeingHeadroom)
        if needed > reservedEnd {
            let least = needed - reservedEnd
            var want = max(least, reserveChunk)
            var r = faultInjector?(.reserve) ?? sb_preallocate(activeFD, Int64(reservedEnd), Int64(want))
            if r == ENOSPC && want > least {
                // Not a whole chunk left: take exactly what this record needs.
                want = least
                r = faultInjector?(.reserve) ?? sb_preallocate(activeFD, Int64(reservedEnd), Int64(want))
            }
            if r != 0 {
                pending.removeSubrange(start...)
                throw StoreError("cannot reserve space in \(path(of: activeSegment))", SystemError("fallocate", errno: r))
            }
            reservedEnd += want
        }
        appendCount += 1
        return len
    }

    /// Appends one whole record (header, then the payload `body` writes) to `out`.
    @inline(__always)
    static func encodeRecord(type: UInt8, to out: inout [UInt8], _ body: (inout [UInt8]) -> Void) {
        let start = out.count
        out.append(contentsOf: Journal.headerTemplate)
        out[start + 2] = type
        body(&out)
        let len = out.count - start - Journal.headerSize
        out.withUnsafeMutableBytes { buf in
            let header = buf.baseAddress! + start
            header.storeBytes(of: UInt32(len).littleEndian, toByteOffset: 4, as: UInt32.self)
            let c = sb_crc32c(0, header + 2, 6)
            let crc = sb_crc32c(c, header + Journal.headerSize, len)
            header.storeBytes(of: crc.littleEndian, toByteOffset: 8, as: UInt32.self)
        }
    }

    /// Drops the pending batch (used when a turn is rolled back).
    public func discardPending() { pending.removeAll(keepingCapacity: true) }

    /// Where the next appended record starts in the pending batch (for `discardPending(from:)`).
    public var pendingMark: Int { pending.count }

    /// Where in the active segment the next record appended will start (the records before it
    /// are written or pending; a failed batch takes back the records appended after it too).
    public var nextRecordOffset: Int { activeSize + pending.count }

    /// Drops the records appended since `mark` (taken with `pendingMark` in the same turn).
    public func discardPending(from mark: Int) {
        if mark >= 0 && mark < pending.count { pending.removeSubrange(mark...) }
    }

    /// Writes the pending batch with one write and makes it durable with one fdatasync.
    /// On failure the segment is cut back to its previous length and the batch is dropped.
    public func commit() throws(StoreError) {
        precondition(!batchInFlight, "commit() with a batch in flight")
        // The same steps as the pipelined path, on the calling thread.
        guard let batch = try takeBatch() else { return }
        if let error = batch.writeAndSync() {
            finishBatch(batch, failed: true)
            throw error
        }
        finishBatch(batch, failed: false)
    }

    // MARK: Pipelined commit (the batch is written and synced by a SyncWorker thread)

    /// True while a batch taken with `takeBatch` waits for `finishBatch`.
    public private(set) var batchInFlight = false

    /// Takes the pending records out as a batch for a `SyncWorker` to write and fdatasync, so the
    /// loop can go on (records appended meanwhile form the next batch). Nil when nothing is pending.
    public func takeBatch() throws(StoreError) -> JournalBatch? {
        guard !pending.isEmpty else { return nil }
        precondition(!batchInFlight, "takeBatch() with a batch in flight")
        guard let file = active else {
            pending.removeAll(keepingCapacity: true)
            throw StoreError("cannot write \(path(of: activeSegment)): no segment is open")
        }
        if let owed = owedCutBack, !settleOwedCutBack() {
            pending.removeAll(keepingCapacity: true)
            throw StoreError(
                "cannot write \(activePath): the records of a failed commit could not be taken off it yet (\(owed.end - owed.start) bytes at offset \(owed.start))")
        }
        var bytes: [UInt8] = []
        swap(&bytes, &pending)
        pending.reserveCapacity(min(bytes.capacity, 1 << 20))
        let end = activeSize + bytes.count
        // Zero the next stretch of reserved space once the records come within half of
        // `zeroAhead` of the zeroed end (never beyond the reservation: zeros must not take space).
        var zeroFrom = 0
        var zeroTo = 0
        if writtenEnd < end + zeroAhead / 2 {
            zeroFrom = max(writtenEnd, end)
            zeroTo = max(zeroFrom, min(reservedEnd, zeroFrom + zeroAhead))
        }
        let batch = JournalBatch(
            file: file, bytes: bytes, startOffset: activeSize, zeroFrom: zeroFrom, zeroTo: zeroTo,
            path: activePath, faults: faultInjector)
        activeSize = end
        writtenEnd = max(writtenEnd, end, zeroTo)
        batchInFlight = true
        return batch
    }

    /// Ends a batch: on failure the segment is cut back to where the batch began (the store rolls
    /// back what it had changed since, pending records included); on success the next segment is
    /// started when this one is full and nothing newer is pending.
    public func finishBatch(_ batch: JournalBatch, failed: Bool) {
        batchInFlight = false
        if failed {
            // Cutting the file back also frees the blocks reserved past the cut: the next record
            // reserves them again (so a full disk still shows at append, not at commit). A batch
            // that put nothing in the file (its write failed at once, or it was never written: a
            // directory fsync before it failed) owes no cut when this one fails.
            if !cutBack(batch.fd, from: batch.startOffset, to: batch.startOffset + batch.bytes.count) && batch.progress.wroteSome {
                owedCutBack = (batch.file, batch.startOffset, batch.startOffset + batch.bytes.count)
            }
            activeSize = batch.startOffset
            writtenEnd = batch.startOffset
            reservedEnd = batch.startOffset
            return
        }
        if activeSize >= segmentLimit && pending.isEmpty { try? roll() }  // (else tried again at the next commit)
    }

    /// Takes a failed batch's records (`start..<end`) off the segment, durably: cuts the file
    /// back to `start`; when that fails, writes zeros over them (replay takes zeros after the
    /// last record for free space). False when neither could be done: they may be on disk (a
    /// failed fdatasync says nothing of what reached it) and would come back at replay.
    func cutBack(_ fd: Int32, from start: Int, to end: Int) -> Bool {
        if faultInjector?(.cutBack) == nil, ftruncate(fd, off_t(start)) == 0, sb_datasync(fd) == 0 { return true }
        guard faultInjector?(.cutBackZeros) == nil, JournalBatch.writeZeros(fd, from: start, to: end) else { return false }
        return sb_datasync(fd) == 0
    }

    /// Takes off the records of a failed commit that could not be taken off then (`owedCutBack`),
    /// if any; false when that still cannot be done (they may come back at replay).
    @discardableResult
    public func settleOwedCutBack() -> Bool {
        guard let owed = owedCutBack else { return true }
        guard cutBack(owed.file.fd, from: owed.start, to: owed.end) else { return false }
        owedCutBack = nil
        return true
    }

    /// Gives back the active segment's space reserved or zeroed past its last record, for a
    /// store about to be closed (nothing pending or in flight: else nothing is done), after
    /// taking off a failed commit's records still owed (`settleOwedCutBack`). Reopened, the
    /// journal appends after that record as usual.
    public func trimReserved() {
        guard !hasPending, !batchInFlight, activeFD >= 0 else { return }
        settleOwedCutBack()
        guard writtenEnd > activeSize || reservedEnd > activeSize else { return }
        _ = ftruncate(activeFD, off_t(activeSize))
        writtenEnd = activeSize
        reservedEnd = activeSize
    }

    /// Seals the active segment and starts the next one.
    public func roll() throws(StoreError) {
        try startSegment((segments.last ?? 0) + 1)
    }

    /// Starts segment `number` as the active one: its name made durable, then its first record
    /// (`onNewSegment`) committed. When any of that fails the previous segment stays active (the
    /// new file is removed) and the error is thrown: a segment without its first record must not
    /// take records (events after a lost sequence mark would reuse ids once the segments before
    /// it are gone).
    func startSegment(_ number: Int) throws(StoreError) {
        let p = path(of: number)
        // Records of a failed commit still owed a cut are in the active segment: it is not
        // sealed with them (its best-effort trim below is not durable, and the next commit
        // would cut the new segment instead).
        if let owed = owedCutBack, !settleOwedCutBack() {
            throw StoreError(
                "cannot start \(p): the records of a failed commit could not be taken off \(activePath) yet (\(owed.end - owed.start) bytes at offset \(owed.start))")
        }
        let fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd < 0 { throw StoreError("cannot create \(p)", SystemError("open", errno: currentErrno())) }
        if activeFD >= 0 {
            // The sealed segment gives back its zeroed and reserved space past its last record
            // (best effort: replay skips the zeros either way).
            _ = ftruncate(activeFD, off_t(activeSize))
        }
        let (previous, previousPath, previousSize) = (active, activePath, activeSize)
        active = SegmentDescriptor(fd)  // the sealed one closes when no batch holds it
        activePath = p
        activeSize = 0
        writtenEnd = 0
        reservedEnd = 0
        segments.append(number)
        do throws(StoreError) {
            if let e = faultInjector?(.segmentDirectorySync) ?? FD.syncDirectory(directory) {
                throw StoreError("cannot make \(p) durable", SystemError("fsync \(directory)", errno: e))
            }
            if let hook = onNewSegment {
                try hook(self)
                try commit()
            }
        } catch {
            discardPending()
            owedCutBack = nil  // (the new file goes)
            segments.removeLast()
            active = previous
            activePath = previousPath
            activeSize = previousSize
            writtenEnd = previousSize
            reservedEnd = previousSize
            unlink(p)
            FD.syncDirectory(directory)
            throw error
        }
    }

    func openActive() throws(StoreError) {
        let p = path(of: activeSegment)
        let fd = open(p, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 { throw StoreError("cannot open \(p)", SystemError("open", errno: currentErrno())) }
        var st = stat()
        fstat(fd, &st)
        active = SegmentDescriptor(fd)
        activePath = p
        writtenEnd = Int(st.st_size)
        activeSize = min(recoveredEnd, writtenEnd)
        // Space reserved before a restart stays allocated (fallocate KEEP_SIZE): count it, so a
        // full disk does not refuse what it accepted before the restart.
        reservedEnd = max(activeSize, Int(st.st_blocks) * 512)
    }

    // MARK: Snapshots written off the loop

    /// Reserves the next segment number for a snapshot written off the loop (`SnapshotJob`) and
    /// makes the one after it the active segment, so that records appended meanwhile follow the
    /// snapshot in replay order. The reserved number is not in `segments` until the snapshot is
    /// in place (`snapshotInstalled`); until then (and for good, when the snapshot fails) it is a
    /// gap, which replay skips.
    func reserveSnapshotSegment() throws(StoreError) -> Int {
        precondition(pending.isEmpty && !batchInFlight, "a snapshot with records pending or in flight")
        let reserved = activeSegment + 1
        try startSegment(reserved + 1)
        return reserved
    }

    /// The snapshot is durable in `segment` and the segments before it are deleted, except those
    /// listed in `kept` (an unlink that failed: replay reads them, then the snapshot replaces them).
    func snapshotInstalled(_ segment: Int, kept: [Int]) {
        segments = kept + [segment] + segments.filter { $0 > segment }
    }

    /// Deletes sealed segments numbered up to `through` (never the active one), oldest first, and
    /// returns the last one deleted (nil: none). It stops at one that cannot be unlinked: it and
    /// the later ones stay (a later segment may hold the acks or completions of its records, and
    /// replay must never find the records without them); it is tried again at the next call.
    @discardableResult
    public func deleteSegments(through: Int) -> Int? {
        if directorySyncOwed {
            guard FD.syncDirectory(directory) == nil else { return nil }
            directorySyncOwed = false
        }
        var last: Int? = nil
        var stopped = false
        var kept: [Int] = []
        for s in segments {
            if !stopped && s <= through && s != activeSegment {
                let failed = faultInjector?(.unlinkSegment) ?? (unlink(path(of: s)) == 0 ? nil : currentErrno())
                if failed == nil || failed == ENOENT {
                    last = s
                    continue
                }
                stopped = true
            }
            kept.append(s)
        }
        if last != nil {
            segments = kept
            if FD.syncDirectory(directory) != nil { directorySyncOwed = true }
        }
        return last
    }

    /// Bytes of records across segments (approximate: the active segment's records plus sealed
    /// file sizes; zeroed and reserved space is not counted).
    public var diskBytes: Int {
        var total = activeSize
        for s in segments where s != activeSegment {
            var st = stat()
            if stat(path(of: s), &st) == 0 { total += Int(st.st_size) }
        }
        return total
    }
}
