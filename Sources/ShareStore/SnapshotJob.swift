// A defaults suite's snapshot compaction, written off the loop thread. The loop captures the
// suite (an O(1) copy-on-write copy of its dictionary: the loop's next change copies its own
// table, the worker reads the captured one, whose keys and values are immutable Sendable values)
// and its version, reserves segment S for the snapshot and moves the live journal to S+1; a
// worker thread then serializes the suite into one record, writes it into `NAME-S.log.tmp`,
// fdatasyncs it, renames it to `NAME-S.log`, fsyncs the directory, unlinks the segments before S
// and fsyncs the directory again. The loop learns the outcome afterwards (`DefaultsStore`).
//
// Crash safety: until the rename is durable the old segments are all there and S is absent (a
// temporary file left behind is removed when the journal is opened; the gap at S is skipped), so
// replay reads the old segments and then S+1 onwards. Once it is, S holds a complete,
// checksummed snapshot of everything before it, which replaces whatever old segments a crash
// left, and S+1 onwards follow. Either way replay yields the suite as last acknowledged.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import CShareSystem
import Dispatch
import ShareProtocol
import ShareSystem

/// One snapshot compaction's disk work and its outcome. Made on the loop, run once on a worker
/// thread (or the caller's, for `DefaultsStore.compact()`), its outcome read back on the loop.
final class SnapshotJob: @unchecked Sendable {  // inputs immutable; outcome written before `finished`
    /// The segment number reserved for the snapshot.
    let segment: Int
    /// The suite's version and values when it was captured (the worker empties `values` once
    /// written, so a table only it still holds is freed on its thread, not on the loop's).
    let version: UInt64
    private var values: [ExactKey: DefaultsStore.Entry]
    /// Bytes the suite's record will take, about (to allocate the buffer once).
    let sizeHint: Int
    let directory: String
    let tempPath: String
    let finalPath: String
    /// The segments the snapshot replaces (all before `segment`), to delete once it is in place.
    let replaced: [(number: Int, path: String)]
    let faults: (@Sendable (JournalFaultPoint) -> Int32?)?
    /// The store's `journalBytes` when the suite was captured.
    let journalBytesAtStart: Int

    /// Outcome (written by the running thread before `done` is signalled, read after the
    /// hand-back: the pool's lock, or `done`, orders the two).
    private(set) var error: StoreError? = nil
    /// Bytes of the snapshot record.
    private(set) var bytes = 0
    /// Replaced segments whose unlink failed (still on disk).
    private(set) var kept: [Int] = []
    /// True once `run` has ended.
    private(set) var finished = false
    private let done = DispatchSemaphore(value: 0)

    init(
        segment: Int, version: UInt64, values: [ExactKey: DefaultsStore.Entry], sizeHint: Int, journal: Journal,
        replaced: [Int], journalBytesAtStart: Int
    ) {
        self.segment = segment
        self.version = version
        self.values = values
        self.sizeHint = sizeHint
        directory = journal.directory
        finalPath = journal.path(of: segment)
        tempPath = finalPath + Journal.tempSuffix
        self.replaced = replaced.map { ($0, journal.path(of: $0)) }
        faults = journal.faultInjector
        self.journalBytesAtStart = journalBytesAtStart
    }

    /// Writes the snapshot and puts it in place of the replaced segments. Runs once.
    func run() {
        error = write()
        values = [:]
        finished = true
        done.signal()
    }

    /// Blocks until `run` has ended (it must have been handed to a thread, or run already).
    func waitUntilFinished() {
        done.wait()
        done.signal()  // (for any later waiter)
    }

    private func fault(_ points: JournalFaultPoint...) -> Int32? {
        guard let faults else { return nil }
        for p in points { if let e = faults(p) { return e } }
        return nil
    }

    private func write() -> StoreError? {
        var record: [UInt8] = []
        record.reserveCapacity(sizeHint)
        Journal.encodeRecord(type: DefaultsStore.RecordType.snapshot.rawValue, to: &record) { out in
            out.append(contentsOf: #"{"version":"#.utf8)
            out.append(contentsOf: String(version).utf8)
            out.append(contentsOf: #","values":"#.utf8)
            DefaultsStore.writeValues(values, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        bytes = record.count
        // Into a temporary file, made durable, then renamed: the segment's name only ever names a
        // complete snapshot.
        let fd = open(tempPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd < 0 { return StoreError("cannot create \(tempPath)", SystemError("open", errno: currentErrno())) }
        do throws(SystemError) {
            defer { FD.close(fd) }
            if let e = fault(.snapshotWrite, .write) { throw SystemError("write", errno: e) }
            try record.withUnsafeBytes { buf in
                Result { () throws(SystemError) in try FD.pwriteAll(fd, buf, at: 0) }
            }.get()
            if let e = fault(.snapshotSync, .sync) { throw SystemError("fdatasync", errno: e) }
            _ = try retrying("fdatasync") { sb_datasync(fd) }
        } catch {
            unlink(tempPath)
            return StoreError("cannot write the snapshot \(tempPath)", error)
        }
        record = []
        let renamed = fault(.snapshotRename) ?? (rename(tempPath, finalPath) == 0 ? 0 : currentErrno())
        if renamed != 0 {
            unlink(tempPath)
            return StoreError("cannot rename \(tempPath) to \(finalPath)", SystemError("rename", errno: renamed))
        }
        // The rename must be durable before any replaced segment goes. When that cannot be made
        // sure, the snapshot is taken back (the replaced segments stand; it is tried again later).
        if let e = fault(.snapshotDirectorySync) ?? FD.syncDirectory(directory) {
            unlink(finalPath)
            FD.syncDirectory(directory)
            return StoreError("cannot make the snapshot \(finalPath) durable", SystemError("fsync", errno: e))
        }
        for old in replaced where unlink(old.path) != 0 && currentErrno() != ENOENT { kept.append(old.number) }
        // (Best effort: a deletion a crash undoes leaves a segment the snapshot replaces at replay.)
        FD.syncDirectory(directory)
        return nil
    }
}
