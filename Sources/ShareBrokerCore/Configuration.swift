// The broker's settings: where it listens and keeps state, limits, logging.

import ShareStore
import ShareSystem

/// Settings of one broker instance.
public struct BrokerConfiguration: Sendable {
    /// Path of the listening Unix socket.
    public var socketPath: String
    /// The state directory (apps/, associations/, groups/).
    public var stateDirectory: String
    /// Largest accepted message, in bytes (default 4 MiB).
    public var maxMessage: Int = 4 * 1024 * 1024
    /// Largest output buffer per connection before the client is dropped as too slow.
    public var maxOutputBuffer: Int = 0
    /// Unwritten output all connections together may hold before the broker pushes back: then a
    /// connection holding more than a fair share (1/1024 of this, at most 1 MiB) unread gets
    /// -32007 for new requests, and one over its own cap is dropped at once.
    public var maxTotalOutput: Int = 1 << 30
    /// Permission bits of the socket file (0o600: the broker's user only). Connecting takes
    /// write permission: 0o660 lets the socket's group in, 0o666 every user (whom manifests'
    /// `uids` then admit or not). Must include 0o600 and nothing above 0o777.
    public var socketMode: UInt32 = 0o600
    /// Group the socket file is given, so that a mode such as 0o660 lets that group's members in
    /// (the broker's user must be root or in the group); nil: the broker's own group.
    public var socketGroup: UInt32? = nil
    /// Lowest log level written.
    public var logLevel: LogLevel = .info
    /// Whether SIGTERM/SIGINT/SIGHUP are handled (off for brokers embedded in tests).
    public var handleSignals: Bool = true
    /// How long shutdown waits for replies to drain.
    public var shutdownGraceSeconds: Double = 3.0
    /// Size at which a journal (the events, and each group's shares and defaults) starts a new segment
    /// (nil: the journal's default, 16 MiB).
    public var journalSegmentLimit: Int? = nil
    /// How long a client whose output waits (a subscriber with queued events, or any client over
    /// `maxOutputBuffer`) may go without reading before it is dropped as a slow client.
    public var stalledReaderSeconds: Double = 30
    /// Most connections one user id may hold open; further ones are closed at once (with a log line).
    public var maxConnectionsPerUID: Int = 16384
    /// Most pending (unacked) events one app may have; url.open beyond it fails with -32005.
    public var maxPendingEventsPerApp: Int = 1_000_000
    /// Most journal bytes one app's pending events may take (128 MiB); url.open beyond it fails
    /// with -32005. Events are small (a few hundred bytes); this bounds an app fed huge URLs.
    public var maxPendingEventBytesPerApp: Int = 128 * 1024 * 1024
    /// Most requests one connection may have waiting for their replies (held for the turn's
    /// commit). At the limit the broker runs nothing more of what the connection sent, and reads
    /// nothing more from it, until replies have gone out: the client waits, nothing is refused.
    /// (A JSON-RPC batch is run whole: it may pass the limit by its members, bounded by
    /// `maxMessage`.)
    public var maxRequestsInFlight: Int = 4096
    /// Most members one JSON-RPC batch may have: a larger batch is refused whole, with one
    /// -32600 error (id null), and nothing of it runs. (A 4 MiB batch of two million `1`s asked
    /// for two million error replies: 230 MB of output and seconds of the loop for every client.)
    public var maxBatchMembers: Int = 10_000
    /// Whether a group commit may wait, up to one commit's duration, for the clients whose
    /// replies the previous commit just released (`CommitPacer`); off, each commit starts as soon
    /// as the previous one is durable.
    public var commitPacing: Bool = true
    /// The longest a paced commit waits, in nanoseconds, however long commits take (2 ms); the
    /// loop writes commits itself only while they take no longer (one limit for both: a commit
    /// longer than the longest wait is one the loop should not block for either). Meant for
    /// tests, whose own clients are slower than real ones under a sanitizer.
    public var commitPacingLongestWait: UInt64 = CommitPacer.maximumWait
    /// Largest share (sum of its items' sizes), in bytes.
    public var maxShareBytes: Int = 256 * 1024 * 1024
    /// Most items in one share.
    public var maxFilesPerShare: Int = 64
    /// What one group's pending shares may hold together (files, URLs, texts), in bytes: one app
    /// cannot fill the disk the others write to.
    public var maxGroupShareBytes: Int = 4 * 1024 * 1024 * 1024
    /// First retry delay of a failed launch, in seconds; doubles per failure up to 60 s.
    public var launchRetryBase: Double = 5.0
    /// How long a child launched on demand may run without subscribing before it is stopped
    /// (SIGTERM, then SIGKILL after `launchStopGraceSeconds`) and its launch counted as failed;
    /// 0: never stopped. iOS's launch watchdog is of the same order (about 20 s).
    public var launchTimeoutSeconds: Double = 30
    /// How long after its start the broker waits before launching the apps whose events a
    /// previous run left pending (seconds): an app that was running when the broker stopped or
    /// crashed reconnects and subscribes in the meantime, instead of finding a second instance
    /// started for its events (ShareBrokerClient's reconnection retries within 2 s). Launches for
    /// events opened after the start are not delayed. 0: at once.
    public var launchGraceAtStartSeconds: Double = 2
    /// Time between SIGTERM and SIGKILL for a launched child that did not subscribe in time.
    public var launchStopGraceSeconds: Double = 5
    /// Test seam: the open-file limit the broker budgets its connections with, instead of the
    /// process's (which it raises to the hard limit); the real limit is unchanged.
    public var openFileLimitForBudget: Int? = nil
    /// Test seam: fails the broker's read of an input file or directory (a manifest, an
    /// association document, `STATE/apps`, `STATE/associations`) with the errno it returns.
    public var inputReadFaults: (@Sendable (String) -> Int32?)? = nil
    /// Test seam: injects failures into the event journal (see `JournalFaultPoint`).
    public var storeFaults: (@Sendable (JournalFaultPoint) -> Int32?)? = nil
    /// Test seam: every journal's reservation chunk and the headroom it keeps reserved for
    /// space-freeing records (acks, completions), instead of 1 MiB and 64 KiB. With a chunk of 1
    /// and no headroom, each record reserves exactly its own bytes, so a `storeFaults` that fails
    /// `.reserve` reaches a space-freeing record too.
    public var journalSpace: (reserveChunk: Int, freeingHeadroom: Int)? = nil
    /// Test seam: runs on a worker thread before each piece of off-loop work (reading the files
    /// of `path` items, writing a share's files), so a test can hold that work back.
    public var offLoopGate: (@Sendable () -> Void)? = nil
    /// Test seam: called on the loop as each commit starts: whether the loop writes it itself
    /// (`inline`) and whether it carries the stores' upkeep (compaction's copies).
    public var commitStarted: (@Sendable (_ inline: Bool, _ upkeep: Bool) -> Void)? = nil
    /// Test seam: asked on the loop at the end of a turn, before it starts the commit of what the
    /// turn changed: true holds that commit back (it starts at the end of a later turn, once this
    /// answers false), so a test can run requests in the time between a commit's outcome and the
    /// next commit's start, which is otherwise as short as the rest of a turn. Meanwhile the loop
    /// sleeps until a readiness event (a request): the test sends one after releasing the hold.
    public var holdCommit: (@Sendable () -> Bool)? = nil
    /// Test seam: runs on the worker thread that starts a launch, before it looks the user up,
    /// so a test can hold a launch back (and see the loop go on meanwhile).
    public var launchGate: (@Sendable () -> Void)? = nil
    /// Test seam: runs on the launch thread that checks every app's launch after a reload, before
    /// it starts (so a test can hold the checks back and see the loop go on meanwhile).
    public var launchCheckGate: (@Sendable () -> Void)? = nil
    /// Test seam: called on the loop once launch checks that ran on a launch thread are taken in:
    /// whether they were recorded (false: dropped, of manifests a later reload replaced).
    public var launchChecksTakenIn: (@Sendable (_ recorded: Bool) -> Void)? = nil
    /// Test seam: runs on that thread after the launch's process was spawned (or failed to be),
    /// before the loop records it.
    public var launchSpawnedGate: (@Sendable () -> Void)? = nil

    /// Settings with the contract's defaults (environment, then XDG, then the temporary directory).
    public init(socketPath: String? = nil, stateDirectory: String? = nil) {
        self.socketPath = socketPath ?? DefaultPaths.socket()
        self.stateDirectory = stateDirectory ?? DefaultPaths.state()
    }

    /// The output cap in force: the configured one, or 2 × maxMessage + 1 MiB.
    public var effectiveMaxOutputBuffer: Int {
        maxOutputBuffer > 0 ? maxOutputBuffer : 2 * min(maxMessage, Self.largestMaxMessage) + 1024 * 1024
    }

    /// The largest `maxMessage` the broker takes: 1 GiB (one message is held whole in memory,
    /// and limits derived from it must not overflow).
    public static let largestMaxMessage = 1 << 30

    /// What is wrong with these settings, if anything (the broker refuses to start with it).
    public var problem: String? {
        if maxMessage < 1024 || maxMessage > Self.largestMaxMessage {
            return "the message size limit must be between 1024 and \(Self.largestMaxMessage) bytes, got \(maxMessage)"
        }
        if socketMode & ~0o777 != 0 || socketMode & 0o600 != 0o600 {
            return "the socket's mode must grant its owner read and write (0600) and nothing past 0777, got \(String(socketMode, radix: 8))"
        }
        return nil
    }
}
