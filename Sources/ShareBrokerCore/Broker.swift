// The broker's event loop: one thread owns all state. It accepts connections, reads and frames
// requests, dispatches them, and flushes replies at the end of each loop turn (the point where a
// group commit will make the turn's writes durable before any reply leaves). No thread per
// connection, no busy polling: the loop sleeps in epoll/kqueue.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareProtocol
import ShareRouting
import ShareStore
import ShareSystem

/// Why the broker could not start.
public struct BrokerStartError: Error, Sendable, CustomStringConvertible {
    /// A message naming the path and the cause.
    public var message: String
    /// True when another broker is live on the socket path.
    public var alreadyRunning: Bool
    /// Creates an error.
    public init(_ message: String, alreadyRunning: Bool = false) {
        self.message = message
        self.alreadyRunning = alreadyRunning
    }
    /// The message.
    public var description: String { message }
}

/// A thread-safe way to ask a running broker to stop (as SIGTERM would) or reload.
public struct BrokerControl: Sendable {
    let wakeFD: Int32
    /// Asks the loop to shut down gracefully.
    public func stop() { send(1) }
    /// Asks the loop to re-read manifests (as SIGHUP would).
    public func reload() { send(2) }
    private func send(_ byte: UInt8) {
        var b = byte
        _ = write(wakeFD, &b, 1)
    }
}

/// Open sessions per role (kept as counters so `broker.status` costs O(1)).
struct SessionCounts {
    var app = 0
    var `extension` = 0
    var tool = 0
    mutating func adjust(_ role: SessionRole, by d: Int) {
        switch role {
        case .app: app += d
        case .extension: `extension` += d
        case .tool: tool += d
        }
    }
}

/// The broker. Create it on the thread that will run it; only `control` may leave that thread.
public final class Broker {
    static let listenerToken: UInt64 = 1
    static let signalToken: UInt64 = 2
    static let wakeToken: UInt64 = 3
    static let syncToken: UInt64 = 4
    static let offLoopToken: UInt64 = 5
    static let launchToken: UInt64 = 6
    static let firstConnectionID: UInt64 = 16
    static let readChunk = 64 * 1024
    static let readsPerWakeup = 4

    /// The settings in force.
    public let config: BrokerConfiguration
    var log: Logger
    let poller: Poller
    var listenerFD: Int32 = -1
    var listenerInode: UInt64? = nil
    var spareFD: Int32 = -1
    var signalPipe: SignalPipe? = nil
    let wakeRead: Int32
    let wakeWrite: Int32
    var connections: [UInt64: Connection] = [:]
    var nextConnectionID = Broker.firstConnectionID
    var dirty: [Connection] = []
    let scratch: UnsafeMutableRawBufferPointer
    /// The registered apps.
    var registry = AppRegistry() {
        didSet { registryGeneration &+= 1 }
    }
    /// Counts registry reloads: what a connection caches from the registry (`Connection.sender`)
    /// is valid while this has not moved.
    var registryGeneration = 0
    let startedAt = Clock.monotonicNanos()
    var stopping = false
    var stopDeadline: UInt64 = 0
    var finished = false
    var totalRequests: UInt64 = 0
    /// This process (for broker.status).
    let brokerPID = ProcessInfoLite.pid
    /// Warnings a flood could repeat thousands of times a second (refused connections), by
    /// kind: when one was last written and how many were left out since (`throttledWarning`).
    var throttledWarnings: [String: (at: UInt64, skipped: Int)] = [:]
    /// broker.status's unchanging leading members, encoded once.
    var statusPrefix: [UInt8] = []
    /// The same without the broker's pid, paths and open-file limit: for callers of other users.
    var statusPrefixForOthers: [UInt8] = []
    /// `totalRequests` when the current loop turn began.
    var requestsAtTurnStart: UInt64 = 0
    var droppedSlowClients: UInt64 = 0
    var sessionCounts = SessionCounts()
    /// Open connections per peer uid (for the per-user limit).
    var connectionsByUID: [UInt32: Int] = [:]
    /// Durable event queues (nil while they cannot be opened: the event methods answer -32005,
    /// and the broker tries again, `storeReopen`).
    var store: EventStore? = nil
    /// Why the event queues could not be opened last (nil once they are open).
    var storeOpenError: String? = nil
    /// The event queues' failed opens and when they are tried again.
    var storeReopen = StoreReopen()
    /// The input files as last read: a reload that cannot read one again for a reason that may
    /// pass keeps it as read then (`StateFiles.load(previous:)`).
    var lastInputs: StateFiles.Inputs? = nil
    /// Loads in a row that could not read every input (a reason that may pass), and when the
    /// timer loads them again (monotonic ns; 0: not scheduled).
    var inputRetry = (failures: 0, due: UInt64(0))
    /// The routing decisions, rebuilt on reload.
    var router = URLRouter(apps: [], associations: [:])
    /// Association documents that failed to load (host → reason), for status and logs.
    var associationErrors: [String: String] = [:]
    /// What is wrong with apps' launches, found when the manifests were loaded (`launchWarnings`):
    /// listed with the manifests' warnings in `apps.list`.
    var launchIssues: [ManifestIssue] = []
    /// Counts manifest loads: launch checks of an older load are dropped.
    var manifestLoads = 0
    /// The manifest load whose launch checks `launchIssues` holds.
    var checkedLoad = 0
    /// True while the launch checks of the manifests loaded last run (off the loop).
    var launchChecksRunning: Bool { checkedLoad != manifestLoads }
    /// Set when `closeUnlistedGroups` found work under way: it runs again at the end of a turn
    /// once none is.
    var closeGroupsDue = false
    /// Groups no manifest lists whose defaults stayed open at the last `closeUnlistedGroups`
    /// only because a connection still watched them (a session a reload ended, closing): the
    /// last watcher's going makes the close due again.
    var unlistedWatchedGroups: Set<ExactKey> = []
    /// The pool-work id of the last launch checks started in the background (`startLaunchChecks`).
    var queuedLaunchChecks: UInt64? = nil
    /// The live subscriber of each app.
    var subscribers: [String: Connection] = [:]
    /// Connections with replies held for this turn's commit.
    var heldConnections: [Connection] = []
    /// Events queued this turn, delivered after the commit.
    var turnEvents: [StoredEvent] = []
    /// Redos (`Compensation.redo`) of requests whose take-back's commit failed and whose records
    /// could not be cut off (a cut owed, `failedRecordsMayRemain`): the take-back may be replayed
    /// at the next start, the share then gone, so its event is queued again only once the cut is
    /// made (`runRedosAfterCut`): at a later commit of the store, or at shutdown.
    var redosAfterCut: [(store: TurnParticipant, redo: () -> Void)] = []
    /// Actions to run after the current request's reply is queued.
    var afterReply: [() -> Void] = []
    /// Launch-on-demand state per app.
    var launches: [String: LaunchState] = [:]
    /// The loop runs (apps may be launched: the socket is listening).
    var loopStarted = false
    /// When `runTimers` has work (a launched child to look at, a retry due; monotonic ns, .max:
    /// none): the loop does not walk `launches` on every turn.
    var nextTimerDue: UInt64 = .max
    /// When the launches for events a previous run left pending are due (monotonic ns; 0: not
    /// waiting): `launchGraceAtStartSeconds` after the start.
    var startLaunchesDue: UInt64 = 0
    /// `Configuration.stalledReaderSeconds` in ns (30 s when it is not a usable number).
    lazy var stallNanos: UInt64 = {
        let s = config.stalledReaderSeconds
        return s.isFinite && s >= 0 && s < 1e9 ? UInt64(s * 1e9) : 30_000_000_000
    }()
    /// Connections whose output waits and that are dropped if they do not read within
    /// `stallNanos` (subscribers with queued events, clients over the cap): looked at by
    /// `runTimers`, so a hung app is dropped even when nothing more is written to it.
    var stallWatch: [UInt64: Connection] = [:]
    /// Connections holding a large unfinished message (`Connection.partialSince`).
    var partialWatch: [UInt64: Connection] = [:]
    /// Pending shares across every open group store.
    let shareCounter = ShareCounter()
    /// Parsed activation rules by extension bundle ID (rebuilt on reload).
    var activationRules: [String: LoadedActivationRule] = [:]
    /// Shares, per group (opened on first use).
    var shareStores: [String: ShareRecordStore] = [:]
    /// Group defaults: stores and watchers.
    var defaults = DefaultsState()
    /// The stores changed this turn (group commit at the end of the turn).
    let turn = TurnLog()
    /// Work that runs once a store's changes of this turn are durable (e.g. delivering events).
    var afterCommit: [(ObjectIdentifier, () -> Void)] = []
    /// Work that undoes, in another store, what a request did when this store's commit fails
    /// (a share whose announcing event could not be stored is completed again).
    var compensations: [Compensation] = []
    var openFileLimit = 0
    /// `STATE/broker.lock`, flock'ed while this broker uses the state directory.
    var stateLockFD: Int32 = -1
    /// Writes and fdatasyncs each commit off the loop thread (pipelined group commit).
    let syncWorker: SyncWorker
    /// The commit the worker is writing, with everything that waits for it (at most one).
    var inflight: CommitTicket? = nil
    /// When the next commit starts (it may wait for clients whose replies were just released).
    var pacer = CommitPacer()
    /// The next commit has been held back by the pacer at least once.
    var commitHeldBack = false
    /// `totalRequests` when the last commit started (a commit of one request runs inline).
    var requestsAtCommitStart: UInt64 = 0
    var nextCommitID: UInt64 = 1
    /// Requests refused with -32007 (too much unread output), for `broker.status`.
    var rejectedOverQuota = 0
    /// Random bytes for share IDs (`randomHex`), refilled from the kernel's CSPRNG.
    var randomPool: [UInt8] = []
    var randomPoolIndex = 0
    /// Stamps shares' `created` (keeps the date and time up to the second between calls).
    var shareClock = TimestampClock()
    let methods: [String: MethodSpec]
    /// Threads for request work that may block (files a share names): see BrokerOffLoop.swift.
    let workers: WorkerPool
    /// Work handed to `workers` and not finished yet, by id.
    var offLoop: [UInt64: OffLoopTask] = [:]
    var nextOffLoopID: UInt64 = 1
    /// Off-loop work finished and taken up by its request / dropped (its connection gone).
    var offLoopFinished: UInt64 = 0
    var offLoopAbandoned: UInt64 = 0
    /// Work handed to a pool outside any request (defaults snapshots on `workers`, launch starts
    /// on `launchWorkers`), by id: what the loop runs when it is done (`runPoolWork`).
    var poolWork: [UInt64: () -> Void] = [:]
    /// Threads of their own for starting launches (`startLaunch`): file work hung on a network
    /// file system holds `workers`, not launches, and a directory service that does not answer
    /// holds launches, not file work.
    let launchWorkers: WorkerPool
    /// Set by a handler that continues off the loop (`suspendRequest`), taken by the caller.
    var suspension: OffLoopTask? = nil
    /// Requests whose work is done but whose batch has members in the commit being written
    /// (`resumeWaiting`, at the end of each turn).
    var resumeAfterCommit: [(Connection, OffLoopTask)] = []
    /// Connections stopped at their in-flight quota (`throttle`), read on at the end of a turn
    /// once their replies have gone out.
    var throttledConnections: [Connection] = []
    /// Unwritten output of all connections (`--max-total-output`).
    let outputMeter = OutputMeter()
    /// `outputMeter` was over the budget at the end of the last turn.
    var overOutputBudget = false
    /// Bytes of shares whose files are being written, per group (they count for its quota).
    var shareBytesInFlight: [String: Int] = [:]
    /// Output the `share.read` replies being read off the loop will take (counted against the
    /// broker's output budget before they exist).
    var shareReadOutputReserved = 0
    /// While a batch member runs: the bytes of the replies its earlier members made (not yet
    /// the connection's output; `share.read` counts them in its room).
    var batchPendingOutput = 0
    /// The path items' files read off the loop, while the handler that asked runs again.
    var pathProbe: PathProbe? = nil

    /// A handle other threads may use to stop or reload this broker.
    public var control: BrokerControl { BrokerControl(wakeFD: wakeWrite) }

    /// Why `path` cannot be a socket's path: it does not fit in `sun_path`.
    public static func socketPathTooLong(_ path: String) -> String {
        "the socket path \(path) is \(path.utf8.count) bytes; a Unix socket's path holds at most \(UnixSocket.maxPathLength) (choose a shorter one with --socket or $SHAREBROKER_SOCKET)"
    }

    /// Prepares the state directory, loads manifests and binds the socket.
    /// Throws when another broker answers on the socket path (`alreadyRunning`) or on any setup
    /// failure (a socket path too long for `sun_path` before anything is created).
    public init(config: BrokerConfiguration) throws(BrokerStartError) {
        if let problem = config.problem { throw BrokerStartError(problem) }
        var config = config
        // Absolute, so that file paths in replies and the socket in a launched app's environment
        // mean the same from any directory (the socket's only when the absolute path still fits
        // in sun_path; the kernel resolves a relative one against this process's directory).
        config.stateDirectory = FileIO.absolutePath(config.stateDirectory)
        let socket = FileIO.absolutePath(config.socketPath)
        if socket.utf8.count <= UnixSocket.maxPathLength { config.socketPath = socket }
        // A path that cannot be bound is refused before anything is created (directories, the
        // state's recovery), not once the state is ready.
        if config.socketPath.utf8.count > UnixSocket.maxPathLength {
            throw BrokerStartError(Broker.socketPathTooLong(config.socketPath))
        }
        self.config = config
        self.log = Logger(level: config.logLevel)
        do {
            poller = try Poller()
            (wakeRead, wakeWrite) = try FD.pipe()
            syncWorker = try SyncWorker()
            workers = try WorkerPool(threads: Broker.offLoopThreads)
            launchWorkers = try WorkerPool(threads: Broker.launchThreads)
        } catch {
            throw BrokerStartError("cannot create the event loop: \(error)")
        }
        // Pacing waits for microseconds: not where the poller rounds them up to a millisecond.
        pacer.enabled = config.commitPacing && poller.hasPreciseTimeouts
        pacer.longestWait = config.commitPacingLongestWait
        scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: Broker.readChunk, alignment: 16)
        methods = Broker.methodTable()
        openFileLimit = ProcessInfoLite.raiseOpenFileLimit()
        if let budget = config.openFileLimitForBudget { openFileLimit = budget }
        // Signals are caught before the pid goes into STATE/broker.lock (where scripts read it to
        // send SIGHUP): one that arrives while the broker starts waits in the pipe for the loop
        // (a reload, or a clean stop) instead of killing the broker.
        if config.handleSignals {
            do { signalPipe = try SignalPipe(signals: [SIGTERM, SIGINT, SIGHUP]) } catch {
                throw BrokerStartError("cannot set up the signal handlers: \(error)")
            }
        }
        // A live broker on the socket: refuse before touching the state directory (bindSocket
        // checks again, race-free, once the state is ready).
        if UnixSocket.isLive(path: config.socketPath) {
            throw BrokerStartError(Broker.socketTakenMessage(config.socketPath), alreadyRunning: true)
        }
        try prepareStateDirectory()
        try lockStateDirectory()
        try checkStateFormat()
        openStore()
        reloadManifests(reason: "start")
        openExistingGroups()
        restoreAnnouncedEvents()
        closeUnlistedGroups()  // (opened for their recovery)
        try bindSocket()
        checkLaunches()
        do {
            try poller.add(listenerFD, interest: .readable, token: Broker.listenerToken)
            try poller.add(wakeRead, interest: .readable, token: Broker.wakeToken)
            try poller.add(syncWorker.wakeDescriptor, interest: .readable, token: Broker.syncToken)
            try poller.add(workers.wakeDescriptor, interest: .readable, token: Broker.offLoopToken)
            try poller.add(launchWorkers.wakeDescriptor, interest: .readable, token: Broker.launchToken)
            if let sp = signalPipe { try poller.add(sp.readFD, interest: .readable, token: Broker.signalToken) }
        } catch {
            closeListener()
            throw BrokerStartError("cannot set up the event loop: \(error)")
        }
        spareFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
        if let problem = socketReachProblem() { log.log(.warning, problem) }
        log.log(
            .info,
            "sharebroker \(SharebrokerVersion.string) listening on \(config.socketPath) (state \(config.stateDirectory), "
                + "\(registry.apps.count) apps, max message \(config.maxMessage) bytes, open-file limit \(openFileLimit))")
    }

    deinit {
        syncWorker.stop()
        workers.stop()
        launchWorkers.stop()
        scratch.deallocate()
        for c in connections.values { FD.close(c.fd) }
        closeListener()
        unlockStateDirectory()
        signalPipe?.close()
        FD.close(wakeRead)
        FD.close(wakeWrite)
        if spareFD >= 0 { FD.close(spareFD) }
    }

    // MARK: Setup

    func prepareStateDirectory() throws(BrokerStartError) {
        // Nothing is created where the broker would then refuse to work: the directories that
        // exist on the way to the state directory and to the socket are checked first (and again,
        // with the rest, once they are made).
        let socketDirectory = String(config.socketPath[..<(config.socketPath.lastIndex(of: "/") ?? config.socketPath.startIndex)])
        if let (path, why) = Broker.unsafeDirectory(onPathTo: Broker.nearestExisting(Broker.parentDirectory(config.stateDirectory))) {
            throw Broker.unsafeStateDirectory(config.stateDirectory, path, why)
        }
        if !socketDirectory.isEmpty {
            // (the private directory under $TMPDIR has its own check, which says more: made
            // already, it is checked now; the directories above it are, in any case)
            let privateTemp = socketDirectory == DefaultPaths.privateTempDirectory()
            if privateTemp, FileIO.exists(socketDirectory) { try checkPrivateTempDirectory(socketDirectory) }
            if let (path, why) = Broker.unsafeDirectory(
                onPathTo: Broker.nearestExisting(privateTemp ? Broker.parentDirectory(socketDirectory) : socketDirectory))
            {
                throw Broker.unsafeSocketDirectory(path, why)
            }
        }
        do {
            try DefaultPaths.makeDirectories(config.stateDirectory)
            try DefaultPaths.makeDirectories(config.stateDirectory + "/apps")
            try DefaultPaths.makeDirectories(config.stateDirectory + "/associations")
        } catch {
            throw BrokerStartError("cannot create the state directory \(config.stateDirectory): \(error)")
        }
        // Other apps' data lives here: refuse a directory another user owns or others may write.
        var st = stat()
        if stat(config.stateDirectory, &st) != 0 || (st.st_mode & S_IFMT) != S_IFDIR {
            throw BrokerStartError("the state directory \(config.stateDirectory) is not a directory")
        }
        if st.st_uid != getuid() {
            throw BrokerStartError(
                "the state directory \(config.stateDirectory) belongs to uid \(st.st_uid), not to this user (uid \(getuid())); refusing to use it")
        }
        if (st.st_mode & 0o022) != 0 {
            throw BrokerStartError(
                "the state directory \(config.stateDirectory) is writable by other users (mode \(String(st.st_mode & 0o777, radix: 8))); "
                    + "run 'chmod go-w \(config.stateDirectory)' first")
        }
        // And the directories above it: another user who may write in one could put a state
        // directory of their own in its place (manifests whose launch commands this broker runs).
        // (both ways to it when the state directory is a symlink: the link's and the target's)
        let parent = Broker.parentDirectory
        var target = config.stateDirectory
        if let r = realpath(target, nil) {
            target = String(cString: r)
            free(r)
        }
        if let (path, why) = Broker.unsafeDirectory(onPathTo: parent(config.stateDirectory))
            ?? Broker.unsafeDirectory(onPathTo: parent(target))
            ?? Broker.foreignSymlink(config.stateDirectory)
        {
            throw Broker.unsafeStateDirectory(config.stateDirectory, path, why)
        }
        var dir = config.socketPath
        if let slash = dir.lastIndex(of: "/") {
            dir = String(dir[..<slash])
            if !dir.isEmpty && !FileIO.exists(dir) {
                // 0700, and passable (only) for whom the socket's mode lets in: 0711 for 0666.
                let mode = mode_t(0o700 | Broker.searchBits(forSocketMode: config.socketMode))
                var missing: [String] = []
                var d = dir
                while !d.isEmpty && !FileIO.exists(d) {
                    missing.append(d)
                    d = String(d[..<(d.lastIndex(of: "/") ?? d.startIndex)])
                }
                do { try DefaultPaths.makeDirectories(dir, mode: mode) } catch {
                    throw BrokerStartError("cannot create the socket directory \(dir): \(error)")
                }
                for m in missing {
                    _ = chmod(m, mode)  // (whatever the umask took away)
                    // (passable for the socket's group: theirs, not the broker's)
                    if let g = config.socketGroup, lchown(m, uid_t.max, gid_t(g)) != 0 {
                        throw BrokerStartError(
                            "cannot give the socket directory \(m) to group \(g): \(String(cString: strerror(currentErrno()))) (the broker's user must be root or in the group)")
                    }
                }
            }
            // The private directory under /tmp must really be ours: another user could have made it first.
            if dir == DefaultPaths.privateTempDirectory() { try checkPrivateTempDirectory(dir) }
            // The socket directory and every directory above it: another user who may write in
            // one could replace the socket (or a directory on its path) with their own and hear
            // the next client's hello, token included. Each must belong to this user or root and
            // not be writable by group or others, unless sticky (as /tmp: there nobody removes or
            // renames another's file).
            if let (path, why) = Broker.unsafeDirectory(onPathTo: dir.isEmpty ? "/" : dir) {
                throw Broker.unsafeSocketDirectory(path, why)
            }
        }
    }

    /// The private directory under $TMPDIR must really be ours: another user could have made it first.
    func checkPrivateTempDirectory(_ dir: String) throws(BrokerStartError) {
        var st = stat()
        guard lstat(dir, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == getuid(),
            (st.st_mode & 0o066) == 0
        else {
            throw BrokerStartError(
                "\(dir) is not a private directory of this user (it must be a directory owned by uid \(getuid()) that only its owner may list or write: mode 0700, or 0711 for a socket others may use); "
                    + "remove it or pass --socket PATH")
        }
    }

    static func unsafeStateDirectory(_ state: String, _ path: String, _ why: String) -> BrokerStartError {
        BrokerStartError(
            "\(path), on the way to the state directory \(state), \(why): another user could put a state directory of their own in its place; use a directory of your own (--state DIR)")
    }

    static func unsafeSocketDirectory(_ path: String, _ why: String) -> BrokerStartError {
        BrokerStartError(
            "the socket's directory \(path) \(why): another user could replace the socket and hear clients' hellos; use a directory of your own (--socket PATH)")
    }

    /// `p` without its last component ("/" for a top-level path).
    static func parentDirectory(_ p: String) -> String {
        let d = String(p[..<(p.lastIndex(of: "/") ?? p.startIndex)])
        return d.isEmpty ? "/" : d
    }

    /// `p`, or its nearest ancestor that exists ("/" at the top, "." for a relative path none of
    /// whose components exists).
    static func nearestExisting(_ p: String) -> String {
        var d = p
        while !FileIO.exists(d) {
            guard let slash = d.lastIndex(of: "/") else { return "." }
            d = slash == d.startIndex ? "/" : String(d[..<slash])
        }
        return d
    }

    /// Search (x) bits a socket directory the broker creates gets, so that whom `mode` lets
    /// connect can reach the socket: group for a mode with group bits, others for one with others'.
    static func searchBits(forSocketMode mode: UInt32) -> UInt32 {
        (mode & 0o060 != 0 ? 0o010 : 0) | (mode & 0o006 != 0 ? 0o001 : 0)
    }

    /// When the socket's mode lets its group or every user connect but a directory on its way
    /// does not let them through (a private 0700 `$XDG_RUNTIME_DIR`): what to warn about.
    func socketReachProblem() -> String? {
        let mode = config.socketMode
        guard mode & 0o066 != 0 else { return nil }
        var st = stat()
        guard lstat(config.socketPath, &st) == 0 else { return nil }
        let socketGroup = st.st_gid
        var path = ""
        for part in [""] + config.socketPath.split(separator: "/").dropLast().map(String.init) {
            path = part.isEmpty ? "/" : (path == "/" ? "/" + part : path + "/" + part)
            guard stat(path, &st) == 0 else { continue }
            let dirMode = UInt32(st.st_mode) & 0o777
            let othersPass = dirMode & 0o001 != 0
            let groupPasses = st.st_gid == socketGroup ? dirMode & 0o010 != 0 : othersPass
            let blocked = (mode & 0o006 != 0 && !othersPass) ? "other users" : (mode & 0o060 != 0 && !groupPasses) ? "the socket's group" : nil
            if let blocked {
                return "the socket's mode is \(String(mode, radix: 8)), but \(path) (mode \(String(dirMode, radix: 8))) does not let \(blocked) through: they cannot reach the socket (put it in a directory they may pass, or let the broker create one: --socket NEW_DIR/sharebroker.sock)"
            }
        }
        return nil
    }

    /// The first directory on the way to `dir` (`dir` included, symlinks resolved) that another
    /// user could change: one that belongs to another user than this one or root, or that group
    /// or others may write and is not sticky (as /tmp: there nobody removes or renames another's
    /// file; group-writable is safe for a group of this user alone, as with umask 002). With why.
    static func unsafeDirectory(onPathTo dir: String) -> (path: String, why: String)? {
        // A symbolic link on the way that another user owns can be pointed elsewhere by them at
        // any time (even in a sticky directory): checking only where it points now is not enough.
        var walked = ""
        for part in dir.split(separator: "/") where dir.hasPrefix("/") {  // (a relative path: its target is checked below)
            walked += "/" + part
            if let found = foreignSymlink(walked) { return found }
        }
        var resolved = dir
        if let r = realpath(resolved, nil) {
            resolved = String(cString: r)
            free(r)
        }
        var path = ""
        for part in [""] + resolved.split(separator: "/").map(String.init) {
            path = part.isEmpty ? "/" : (path == "/" ? "/" + part : path + "/" + part)
            var ds = stat()
            guard stat(path, &ds) == 0 else { continue }
            let foreignOwner = !Broker.isBrokersOwnUID(ds.st_uid)
            let unsafeGroupWrite = (ds.st_mode & 0o020) != 0 && !Broker.groupIsThisUsersAlone(ds.st_gid)
            let othersWrite = ((ds.st_mode & 0o002) != 0 || unsafeGroupWrite) && (ds.st_mode & S_ISVTX) == 0
            if foreignOwner { return (path, "belongs to uid \(ds.st_uid)") }
            if othersWrite { return (path, "is writable by group or others (mode \(String(ds.st_mode & 0o7777, radix: 8)))") }
        }
        return nil
    }

    /// `path` itself when it is a symbolic link another user owns (they could point it elsewhere).
    static func foreignSymlink(_ path: String) -> (path: String, why: String)? {
        var ls = stat()
        guard lstat(path, &ls) == 0, (ls.st_mode & S_IFMT) == S_IFLNK, !Broker.isBrokersOwnUID(ls.st_uid) else { return nil }
        return (path, "is a symbolic link that belongs to uid \(ls.st_uid)")
    }

    /// True when `gid` is this user's primary group and no other user belongs to it (as primary or
    /// supplementary group): writable by that group means writable by this user only.
    public static func groupIsThisUsersAlone(_ gid: gid_t) -> Bool {
        groupIsUsersAlone(gid, uid: getuid(), primaryGroup: getgid())
    }

    /// True when `gid` is `primaryGroup`, the primary group of `uid`, and no other user belongs
    /// to it (as primary or supplementary group). Safe on any thread (a launch is checked on a
    /// worker while the loop may check manifests): the group and the user are looked up with the
    /// reentrant calls, and the walk of the user database (whose position is the process's) is
    /// taken one caller at a time.
    static func groupIsUsersAlone(_ gid: gid_t, uid me: uid_t, primaryGroup: gid_t) -> Bool {
        guard gid == primaryGroup else { return false }
        guard let members = groupMembers(gid) else { return false }  // (not to be looked at: not alone)
        if !members.isEmpty {
            let myName = LaunchAccount.lookUp(uid: me, name: nil)?.name
            if members.contains(where: { $0 != myName }) { return false }
        }
        userDatabaseWalk.lock()
        defer { userDatabaseWalk.unlock() }
        setpwent()
        defer { endpwent() }
        while let pw = getpwent() {
            if pw.pointee.pw_gid == gid && pw.pointee.pw_uid != me { return false }
        }
        return true
    }

    /// The supplementary members of group `gid` (empty for a group the system does not know);
    /// nil when its entry cannot be read (then the group is not taken to be anyone's alone).
    static func groupMembers(_ gid: gid_t) -> [String]? {
        let found = LaunchAccount.withEntryBuffer { buf, size -> (Int32, [String]?) in
            var grp = group()
            var result: UnsafeMutablePointer<group>? = nil
            let rc = getgrgid_r(gid, &grp, buf, size, &result)
            // (a group the system does not know: no error, or one of these, as getgrgid_r(3)
            // says some systems answer "not found")
            if rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM { return (rc, []) }
            guard rc == 0 else { return (rc, nil) }
            guard let g = result?.pointee, var member = g.gr_mem else { return (rc, []) }
            var out: [String] = []
            while let m = member.pointee {
                out.append(String(cString: m))
                member += 1
            }
            return (rc, out)
        }
        return found ?? nil
    }

    /// Held while the user database is walked (`getpwent`: one position for the whole process).
    static let userDatabaseWalk = Lock()

    /// Takes `STATE/broker.lock` (an exclusive flock, held for the broker's life and released by
    /// the kernel when it dies, even by SIGKILL): two brokers on one state directory would both
    /// append to the same journals and hand out the same event ids.
    func lockStateDirectory() throws(BrokerStartError) {
        let path = config.stateDirectory + "/broker.lock"
        var fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 {
            let e = currentErrno()
            // Only a state directory this broker cannot write goes on without the lock file: it
            // serves reads and answers every write -32005, and so would a second one.
            guard e == EROFS || access(config.stateDirectory, W_OK) != 0 else {
                throw BrokerStartError("cannot open \(path): \(String(cString: strerror(e)))")
            }
            fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            if fd < 0 {
                log.log(.warning, "the state directory \(config.stateDirectory) is not writable: running without \(path)")
                return
            }
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = currentErrno()
            var holder = ""
            if let text = try? FileIO.readFile(path, limit: 64),
                let pid = Int32(String(decoding: text, as: UTF8.self).split(separator: "\n").first ?? ""), pid > 0,
                kill(pid, 0) == 0 || currentErrno() == EPERM  // (a stale pid of a read-only holder is not named)
            {
                holder = " (pid \(pid))"
            }
            FD.close(fd)
            if e == EWOULDBLOCK || e == EAGAIN {
                if UnixSocket.isLive(path: config.socketPath) {
                    throw BrokerStartError(
                        "another broker\(holder) is already running on \(config.socketPath) with the state directory "
                            + "\(config.stateDirectory); stop it first", alreadyRunning: true)
                }
                throw BrokerStartError(
                    "another broker\(holder) is already running on the state directory \(config.stateDirectory); "
                        + "stop it first or pass --state DIR", alreadyRunning: true)
            }
            throw BrokerStartError("cannot lock \(path): \(String(cString: strerror(e)))")
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)  // (fails harmlessly on a read-only descriptor)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        stateLockFD = fd
    }

    /// The format of what this broker writes under the state directory. A later version that
    /// changes it in a way this one would misread (a record type it does not know, a layout)
    /// raises it, so that this one refuses the directory instead of losing what it cannot read.
    public static let stateFormat = 1

    /// Checks `STATE/format` ("sharebroker-state N"): a directory a newer broker wrote (a higher
    /// N) is refused before anything in it is read or cleaned up (this broker would drop the
    /// records it does not know, and remove their files as orphans); one without the file (new,
    /// or written before the file existed, which this broker reads) gets it. A directory this
    /// broker cannot write is checked but not marked.
    func checkStateFormat() throws(BrokerStartError) {
        let path = config.stateDirectory + "/format"
        let bytes: [UInt8]
        do { bytes = try FileIO.readFile(path, limit: 256) } catch {
            guard error.errno == ENOENT else {
                throw BrokerStartError("cannot read \(path) (the state directory's format): \(error)")
            }
            guard stateLockFD >= 0 else { return }  // (read-only: nothing is written anyway)
            do { try FileIO.writeAtomically(path, Array("sharebroker-state \(Broker.stateFormat)\n".utf8)) } catch {
                log.log(.warning, "cannot write \(path) (the state directory's format): \(error)")
            }
            return
        }
        let text = String(decoding: bytes.prefix { $0 != 0x0A && $0 != 0x0D }, as: UTF8.self)
        let prefix = "sharebroker-state "
        guard text.hasPrefix(prefix), let n = Int(text.dropFirst(prefix.count)), n >= 1 else {
            throw BrokerStartError("\(path) does not say the state directory's format ('sharebroker-state N'); refusing to guess: restore it or move it aside")
        }
        guard n <= Broker.stateFormat else {
            throw BrokerStartError(
                "the state directory \(config.stateDirectory) was written by a newer sharebroker (state format \(n); this one reads "
                    + "format \(Broker.stateFormat) and older): run that version, or give this one another --state")
        }
    }

    /// Releases the state directory's lock (when the loop has stopped).
    func unlockStateDirectory() {
        guard stateLockFD >= 0 else { return }
        FD.close(stateLockFD)  // closing the descriptor drops the flock
        stateLockFD = -1
    }

    /// Why the broker will not start on a socket something listens on: another broker (its pid,
    /// when it answers `broker.status` within a second) or another program.
    static func socketTakenMessage(_ path: String) -> String {
        var answer: JSONValue? = nil
        var connected = false
        var spoke = false
        if let fd = try? UnixSocket.connect(path: path) {
            connected = true
            defer { FD.close(fd) }
            // (read whatever it says even when the write fails: a program that talks first and
            // hangs up has said what it is)
            _ = try? FD.sendAll(fd, Array(#"{"jsonrpc":"2.0","id":1,"method":"broker.status"}"#.utf8) + [0x0A])
            var got: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            let deadline = Clock.monotonicNanos() + 1_000_000_000
            while !got.contains(0x0A), got.count < 1 << 20 {
                let now = Clock.monotonicNanos()
                guard now < deadline else { break }
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, Int32((deadline - now) / 1_000_000) + 1) > 0 else { break }
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                got += chunk[0..<n]
            }
            spoke = !got.isEmpty
            if let nl = got.firstIndex(of: 0x0A) { answer = try? JSONParser.parse(Array(got[..<nl])) }
        }
        if let pid = answer?["result"]?["pid"]?.intValue {
            return "another broker (pid \(pid)) is already running on \(path); stop it first or pass --socket PATH"
        }
        if answer?["result"]?["protocol"] != nil {  // (another user's broker tells no pid)
            return "another broker (another user's) is already running on \(path); pass --socket PATH"
        }
        if let refusal = answer?["error"]?["message"]?.stringValue {  // (e.g. this user's connection limit)
            return "another broker is already running on \(path) (it refused a connection: \(refusal)); stop it first or pass --socket PATH"
        }
        if connected && !spoke {
            return "something is already listening on \(path) but did not answer within 1 s (a busy or stopped broker, or another program); stop it or pass --socket PATH"
        }
        return "another program is already listening on \(path) (it does not answer as a broker); stop it or pass --socket PATH"
    }

    func bindSocket() throws(BrokerStartError) {
        do {
            listenerFD = try UnixSocket.listen(
                path: config.socketPath, mode: mode_t(config.socketMode), group: config.socketGroup.map { gid_t($0) })
            listenerInode = FileIO.inode(config.socketPath)
        } catch {
            if case .alreadyRunning = error {
                throw BrokerStartError(Broker.socketTakenMessage(config.socketPath), alreadyRunning: true)
            }
            throw BrokerStartError("cannot listen on \(config.socketPath): \(error)")
        }
    }

    func closeListener() {
        guard listenerFD >= 0 else { return }
        poller.remove(listenerFD)
        FD.close(listenerFD)
        listenerFD = -1
        // Remove the socket file only if it is still the one we created.
        if let ino = listenerInode, FileIO.inode(config.socketPath) == ino { FileIO.unlinkFile(config.socketPath) }
        listenerInode = nil
    }

    /// Re-reads STATE/apps/*.json and STATE/associations/*.json and rebuilds the routing tables.
    /// The launch checks of the apps (for `apps.list`'s warnings) are the caller's: `checkLaunches`
    /// at start, before any client is served; `startLaunchChecks` or `launchChecksTask` off the
    /// loop once they are.
    func reloadManifests(reason: String) {
        // The spare descriptor is lent to the reload: at the open-file limit (thousands of
        // connections), reading the manifests must not fail and make every app unknown.
        let loaded = withSpareDescriptorFreed {
            StateFiles.load(stateDirectory: config.stateDirectory, previous: lastInputs, readFault: config.inputReadFaults)
        }
        manifestLoads += 1
        lastInputs = loaded.inputs
        if loaded.transientFailures.isEmpty {
            if inputRetry.failures > 0 {
                log.log(.info, "every manifest and association document could be read again (after \(inputRetry.failures) \(inputRetry.failures == 1 ? "load" : "loads") that could not)")
            }
            inputRetry = (0, 0)
        } else {
            // Read again on a timer (1 s doubling to a minute) until every input could be.
            inputRetry.failures += 1
            inputRetry.due = Clock.monotonicNanos() + Broker.storeRetryBackoff(inputRetry.failures)
            nextTimerDue = min(nextTimerDue, inputRetry.due)
            log.log(
                inputRetry.failures == 1 ? .warning : .debug,
                "could not read \(loaded.transientFailures.joined(separator: "; ")) (\(reason)); "
                    + "what was read of them before is kept, and they are read again in \(Broker.storeRetryBackoff(inputRetry.failures) / 1_000_000_000) s")
        }
        let launchesBefore = Broker.launchSpecs(registry)
        registry = loaded.registry
        for issue in registry.issues {
            log.log(issue.fatal ? .warning : .info, "manifest \(issue.fatal ? "error" : "note"): \(issue)")
        }
        associationErrors = loaded.associationErrors
        for (_, e) in loaded.associationErrors.sorted(by: { $0.key < $1.key }) {
            log.log(.warning, "association document is malformed and matches nothing: \(e)")
        }
        router = loaded.router
        activationRules = [:]
        for app in registry.apps {
            for ext in app.extensions {
                guard let rule = ext.activationRule else { continue }
                activationRules[ext.bundleID] = LoadedActivationRule(
                    Result { () throws(ActivationRuleError) -> ActivationRule in try ActivationRule(json: rule) })
            }
        }
        log.log(
            .info,
            "loaded \(registry.apps.count) apps (\(reason)); \(registry.issues.filter(\.fatal).count) manifest errors, "
                + "\(router.associations.count) association documents (\(associationErrors.count) malformed)")
        // (A subscriber already closing stops getting events too.)
        for (app, conn) in subscribers where registry.app(app) == nil {
            conn.subscribedApp = nil
            Broker.dropQueuedEvents(conn)
            subscribers[app] = nil
        }
        // Sessions whose bundle is gone (its manifest removed, the extension taken out of it) or
        // now has the other role end: a subscriber would otherwise stay connected and silently
        // get nothing more; its client sees the connection close and can say hello again
        // (refused while the bundle stays away). Sessions whose bundle's identity rule changed
        // are checked again: one the manifest no longer admits (a uid or executable taken out, a
        // token changed) ends; one newly pinned to an executable has its writers checked from
        // now on. An unchanged rule is not checked again (the program's file may have been
        // replaced since: /proc then says "(deleted)").
        for conn in Array(connections.values) where !conn.closed && !conn.closing {
            guard let bundle = conn.bundleID, let was = conn.admitted else { continue }
            switch (registry.lookup(bundle), conn.role) {
            case (.app?, .app?), (.appExtension?, .extension?): break
            case (nil, _):
                revokeSession(conn, "its bundle \(bundle) is no longer registered")
                continue
            default:
                revokeSession(conn, "its bundle \(bundle) is now registered with another role")
                continue
            }
            let now = admittedIdentity(bundle)
            if now == was { continue }
            if now.token != was.token {
                revokeSession(conn, "its manifest's token changed")
                continue
            }
            do { try checkIdentity(conn, bundle) } catch {
                // (its message without the "Unauthorized: " the notice starts with)
                let prefix = "Unauthorized: "
                revokeSession(conn, error.message.hasPrefix(prefix) ? String(error.message.dropFirst(prefix.count)) : error.message)
                continue
            }
            conn.admitted = now
            if now.executable != nil && !conn.checksWriter {
                UnixSocket.startNamingWriters(conn.fd)
                conn.checksWriter = true
            }
        }
        // Watches of groups a bundle no longer lists end now, and their sessions are told; then
        // the stores of groups no manifest lists close.
        if !defaults.watchers.isEmpty { endUnlistedWatches() }
        if loopStarted { closeUnlistedGroups() }
        // A reload that changed an app's launch (it may have fixed it) ends its backoff: its
        // next launch is due at once.
        let launchesNow = Broker.launchSpecs(registry)
        for (app, state) in launches where launchesBefore[app] != launchesNow[app] {
            if state.pid == nil && state.retryAt != nil {
                launches[app]?.retryAt = nil
                launches[app]?.failures = 0
            }
            // (a launch being started with what the reload changed is called off, if it has not
            // spawned yet; `finishLaunch` starts the new one)
            state.ticket?.callOff()
        }
        // An app that now has a launch command (or a new one) is started for the events it has waiting
        // (within the start-up grace, at its end: running apps may still be reconnecting).
        if loopStarted && startLaunchesDue == 0 { launchAppsWithWaitingEvents() }
    }

    /// What decides an app's launch, to see which a reload changed.
    struct LaunchSpec: Equatable {
        var launch: [String]
        var launchUser: String?
        var uids: [UInt32]?
    }

    /// Each app's `LaunchSpec` (apps with a launch command).
    static func launchSpecs(_ registry: AppRegistry) -> [String: LaunchSpec] {
        var out: [String: LaunchSpec] = [:]
        for app in registry.apps { out[app.bundleID] = launchSpec(of: app) }
        return out
    }

    /// The `LaunchSpec` of `app` (nil: no app, or one without a launch command).
    static func launchSpec(of app: AppManifest?) -> LaunchSpec? {
        guard let app, let launch = app.launch else { return nil }
        return LaunchSpec(launch: launch, launchUser: app.launchUser, uids: app.uids)
    }

    /// What is wrong with the launches of `apps` (`launchWarnings`; looks users up and walks the
    /// file system: any thread).
    static func launchIssues(_ apps: [AppManifest], socketPath: String) -> [ManifestIssue] {
        var out: [ManifestIssue] = []
        for app in apps {
            for warning in launchWarnings(app, socketPath: socketPath) {
                out.append(ManifestIssue(file: app.file, field: "launch", message: "\(app.bundleID): \(warning)", fatal: false))
            }
        }
        return out
    }

    /// Lists (and logs) what is wrong with every app's launch, on the loop: at start, once the
    /// socket is there and before any client is served.
    func checkLaunches() {
        applyLaunchChecks(Broker.launchIssues(registry.apps, socketPath: config.socketPath), load: manifestLoads)
    }

    /// Records (and logs) the launch checks of manifest load `load`; those of an older load are
    /// dropped (a later reload's checks follow). True when recorded.
    @discardableResult
    func applyLaunchChecks(_ issues: [ManifestIssue], load: Int) -> Bool {
        guard load == manifestLoads else { return false }
        checkedLoad = load
        launchIssues = issues
        for issue in issues { log.log(.warning, "manifest \(issue.file): \(issue.message)") }
        return true
    }

    /// The launch checks of the manifests just loaded, as work for a launch thread (a user's
    /// lookup may wait for a directory service that does not answer: every client is served
    /// meanwhile) and what the loop does once it is done (true: its checks were recorded, they
    /// are of the manifests loaded last). `apps.list` shows the previous checks' warnings until
    /// then (`apps.reload` answers once they are done).
    func launchChecksTask() -> (work: @Sendable () -> Void, done: () -> Bool) {
        final class Found: @unchecked Sendable {  // written by the launch thread, read on the loop after it
            var issues: [ManifestIssue] = []
            var ran = false
        }
        let found = Found()
        let apps = registry.apps.filter { $0.launch != nil }
        let socketPath = config.socketPath
        let load = manifestLoads
        let gate = config.launchCheckGate
        return (
            { [found] in
                gate?()
                found.issues = Broker.launchIssues(apps, socketPath: socketPath)
                found.ran = true
            },
            { [unowned self] in
                if found.ran {
                    let recorded = applyLaunchChecks(found.issues, load: load)
                    config.launchChecksTakenIn?(recorded)
                    return recorded
                }
                // (work taken back before it ran: the request that wanted it closed)
                if load == manifestLoads { startLaunchChecks() }
                return false
            }
        )
    }

    /// Starts the launch checks of the manifests just loaded on a launch thread (a reload by
    /// SIGHUP or `BrokerControl`); on the loop when no thread can take them.
    func startLaunchChecks() {
        // Checks of an earlier reload not started yet are taken back (they would be dropped):
        // reloads in a row do not queue up checks ahead of launches on the two threads.
        if let earlier = queuedLaunchChecks, launchWorkers.cancel(earlier) { poolWork[earlier] = nil }
        let task = launchChecksTask()
        queuedLaunchChecks = nextOffLoopID  // (the id runPoolWork gives it)
        if !runPoolWork(task.work, on: launchWorkers, then: { _ = task.done() }) {
            queuedLaunchChecks = nil
            task.work()
            _ = task.done()
        }
    }

    /// What a session of `bundleID` was admitted under (compared at each reload).
    func admittedIdentity(_ bundleID: String) -> AdmittedIdentity {
        let rule = registry.identityRule(for: bundleID)
        return AdmittedIdentity(uids: rule.uids, executable: rule.executable, token: registry.requiredToken(for: bundleID) ?? nil)
    }

    /// Ends a session a reload no longer admits: it stops acting as its bundle at once (requests
    /// already read after the reload are not run: they would need a hello), its replies so far
    /// still go out, then the connection closes.
    func revokeSession(_ conn: Connection, _ why: String) {
        log.log(.warning, "\(conn.identity): \(why) after the reload; ending the session", connection: conn.id)
        // The client is told why before the connection closes (an error without an id, as for a
        // message over the limit), after every reply it is owed (`closeDrained`).
        conn.lastWords = RPCError(.unauthorized, "Unauthorized: session ended by a manifest reload: \(why)", data: Broker.closingData)
        endSession(conn)
        conn.role = nil  // (counted out once: closing it later does not count it again)
        if conn.subscribedApp != nil {
            conn.subscribedApp = nil
            Broker.dropQueuedEvents(conn)
        }
        conn.bundleID = nil
        conn.admitted = nil
        // Nothing more is read or run; the replies it has (the reload's own, when it asked for
        // it) go out at the end of the turn, and the flush closes it once they are written.
        markDirty(conn)
        beginClosing(conn)
    }

    // MARK: The loop

    /// Runs the loop until a stop is requested (signal or `control.stop()`) and the replies drain.
    public func run() {
        loopStarted = true
        // (events a previous run left pending: after a grace in which apps that were running
        // reconnect)
        if config.launchGraceAtStartSeconds > 0, (store?.pendingCount ?? 0) > 0 {
            startLaunchesDue = Clock.monotonicNanos() + UInt64(min(config.launchGraceAtStartSeconds, 86_400) * 1e9)
            nextTimerDue = min(nextTimerDue, startLaunchesDue)
        } else {
            launchAppsWithWaitingEvents()
        }
        while !finished {
            var timeout: Int32 = nextTimerMillis()
            if stopping {
                let now = Clock.monotonicNanos()
                timeout = now >= stopDeadline ? 0 : Int32(min(1000, (stopDeadline - now) / 1_000_000 + 1))
            }
            var timeoutNanos: Int64 = timeout < 0 ? -1 : Int64(timeout) * 1_000_000
            // (a commit the `holdCommit` test seam holds back waits for the next readiness event)
            if inflight == nil, turn.hasDirty, !(config.holdCommit?() ?? false) {
                // The next commit waits for clients coming back (CommitPacer): wake when it may start.
                let wait = pacer.remainingWait(at: Clock.monotonicNanos())
                // (0 when the wait ended meanwhile, e.g. an expected connection closed while its
                // replies were written: the turn ends at once and starts the commit.)
                if timeoutNanos < 0 || Int64(wait) < timeoutNanos { timeoutNanos = Int64(wait) }
            }
            do {
                // When the requests read this turn may have arrived (think times, CommitPacer).
                let enteredAt = Clock.monotonicNanos()
                var first = true
                try poller.wait(timeoutNanos: timeoutNanos) { token, events in
                    if first {
                        first = false
                        self.pacer.pollReturned(enteredAt: enteredAt, at: Clock.monotonicNanos())
                    }
                    self.handle(token: token, events: events)
                }
                if first { pacer.pollReturned(enteredAt: enteredAt, at: Clock.monotonicNanos()) }
            } catch {
                log.log(.error, "event loop: \(error)")
                break
            }
            runTimers()
            endOfTurn()
            if stopping { checkShutdownComplete() }
        }
        stopping = true  // (also when the loop ended on an error: closing subscribers launches nothing)
        drainCommits()
        finishStoreWork()
        settleOwedCuts()
        if !redosAfterCut.isEmpty {
            // (cuts made at the stop: the events of the shares they kept are written now)
            runRedosAfterCut()
            redosAfterCut.removeAll()
            if turn.hasDirty { for (_, e) in turn.commitAll() { log.log(.error, "commit failed: \(e.message)") } }
        }
        // Launches not started are not; one being started is called off before its spawn (a
        // stopped broker starts nothing). A spawn under way ends on its own: its child is
        // detached, as every launched app is when the broker stops.
        for (_, l) in launches { l.ticket?.callOff() }
        launchWorkers.stop()
        for c in Array(connections.values) { closeNow(c, reason: "broker stopped") }
        closeListener()
        syncWorker.stop()
        // Work left off the loop (the grace period ended first): what finished or never ran is
        // taken back; what still runs is left to end (its files are removed at the next start,
        // as orphans without a record).
        for id in workers.stop() + workers.takeFinished() { offLoop.removeValue(forKey: id)?.cancel(self) }
        offLoop.removeAll()
        for (_, task) in resumeAfterCommit { task.cancel(self) }
        resumeAfterCommit.removeAll()
        unlockStateDirectory()
        log.log(.info, "stopped")
    }

    func handle(token: UInt64, events: Readiness) {
        turn.endRequest()  // (what changes now is no earlier request's: see TurnLog.endRequest)
        switch token {
        case Broker.listenerToken: acceptConnections()
        case Broker.signalToken: handleSignals()
        case Broker.wakeToken: handleWake()
        case Broker.syncToken: completeCommits(syncWorker.takeOutcomes())
        case Broker.offLoopToken: handleOffLoopDone()
        case Broker.launchToken: handleLaunchesDone()
        default:
            guard let conn = connections[token] else { return }
            if conn.suspended != nil || conn.throttled {
                // Not read while its request's work runs, or while it is at its in-flight quota;
                // a peer that hung up cannot read the replies (and would be reported every turn).
                if events.contains(.hangup) || events.contains(.error) {
                    closeNow(conn, reason: conn.throttled ? "peer hung up at its in-flight quota" : "peer hung up while its request's work ran")
                } else if events.contains(.writable) {
                    flush(conn)
                }
                return
            }
            if events.contains(.readable) || events.contains(.hangup) || events.contains(.error) {
                if !conn.closing {
                    readFrom(conn)
                } else if events.contains(.error) || events.contains(.hangup) {
                    // (the peer is gone for good: it reads nothing more, and a hang-up would be
                    // reported on every turn while its replies wait for a commit)
                    closeNow(conn, reason: events.contains(.error) ? "socket error" : "peer hung up")
                }
            }
            if events.contains(.writable), !conn.closed { flush(conn) }
            if events.contains(.hangup), !conn.closed, conn.closing, conn.pendingOutput > 0 {
                // The peer is gone and cannot read what is left.
                if events.contains(.error) { closeNow(conn, reason: "peer hung up") }
            }
        }
    }

    /// Ends a loop turn: hands the turn's writes to the sync worker as one commit (group commit),
    /// unless a commit is still being written (then they join the next one, handed over as soon as
    /// that one is done), then writes every connection's output. Replies that wait for a commit
    /// go out when it is durable (as -32005 if it failed), and new events are delivered then.
    func endOfTurn() {
        turn.endRequest()
        let over = outputMeter.bytes > config.maxTotalOutput
        if over != overOutputBudget {
            overOutputBudget = over
            if over && !stallWatch.isEmpty { outputBudgetPassed() }
        }
        if !throttledConnections.isEmpty { resumeThrottled() }  // (what they run joins this turn's commit)
        if inflight == nil { startCommitUnlessPaced() }
        // (again after a commit the loop wrote itself: no event would wake it for them)
        if !throttledConnections.isEmpty { resumeThrottled() }
        if !resumeAfterCommit.isEmpty { resumeWaiting() }
        flushDirty()
        requestsAtTurnStart = totalRequests
        if closeGroupsDue && inflight == nil && !turn.hasDirty && offLoop.isEmpty { closeUnlistedGroups() }
    }

    /// Starts the next commit unless the pacer holds it back for clients whose replies were just
    /// released (the loop wakes again when the wait is over, or sooner when they are back).
    func startCommitUnlessPaced() {
        if pacer.enabled, !poller.stillHasPreciseTimeouts {
            // epoll_pwait2 refused after start-up: waits would round up to 1 ms. No pacing.
            pacer.disable()
            log.log(.warning, "commit pacing turned off: the kernel refuses nanosecond poll timeouts")
        }
        if turn.hasDirty, let hold = config.holdCommit, hold() { return }
        if turn.hasDirty, pacer.remainingWait(at: Clock.monotonicNanos()) > 0 {
            commitHeldBack = true
            return
        }
        if commitHeldBack {
            commitHeldBack = false
            pacer.countWaited()
        }
        // The loop writes the commit itself when it would otherwise only wait for it: a lone
        // request on an idle broker, or a batch that every client expected back has joined (the
        // pacer's). Handing it to the worker and being woken again would add two thread switches
        // to every request's latency and leave the loop idle meanwhile all the same. Not while
        // commits take longer than the pacer's longest wait: then other clients would wait for
        // every flush. Nor a commit that carries compaction's copies (up to 4,096 records): the
        // loop goes on serving meanwhile.
        startCommit(
            inline: pacer.inlineAllowed && (totalRequests - requestsAtCommitStart <= 1 || pacer.batchComplete)
                && !turn.hasUpkeep)
    }

    func flushDirty() {
        if dirty.isEmpty { return }
        let list = dirty
        dirty.removeAll(keepingCapacity: true)
        for c in list {
            c.dirty = false
            guard !c.closed else { continue }
            flush(c)
        }
    }

    /// Starts the commit of everything changed since the last one.
    func startCommit(inline: Bool = false) {
        requestsAtCommitStart = totalRequests
        guard turn.hasDirty else {
            // Nothing to write: replies held by requests that changed nothing after all go now.
            if !heldConnections.isEmpty { releaseHeld(takeHeld(), [:]) }
            if !afterCommit.isEmpty { afterCommit.removeAll(keepingCapacity: true) }
            if !compensations.isEmpty { compensations.removeAll(keepingCapacity: true) }
            if !turnEvents.isEmpty { turnEvents.removeAll(keepingCapacity: true) }
            return
        }
        // What is ready to go out (replies a commit just released) does not wait for a commit the
        // loop writes itself, nor counts in its measured duration.
        if inline { flushDirty() }
        config.commitStarted?(inline, turn.hasUpkeep)
        let begun = turn.beginAll()
        pacer.commitStarted(at: Clock.monotonicNanos())
        let ticket = CommitTicket(
            id: nextCommitID, stores: begun.stores, failed: begun.failed, held: takeHeld(), afterCommit: afterCommit,
            compensations: compensations, events: turnEvents)
        nextCommitID += 1
        afterCommit = []
        compensations = []
        turnEvents = []
        let jobs = begun.stores.compactMap(\.1)
        if jobs.isEmpty {
            finishCommit(ticket, errors: [])
            return
        }
        if inline {
            let errors = SyncWorker.run(jobs)
            pacer.commitFinished(at: Clock.monotonicNanos())
            finishCommit(ticket, errors: errors)
            return
        }
        inflight = ticket
        syncWorker.submit((ticket.id, jobs))
    }

    /// The worker finished commits: the stores learn the outcome, replies go out, events are
    /// delivered; then what accumulated meanwhile is handed over at once.
    func completeCommits(_ outcomes: [SyncWorker.Outcome]) {
        for outcome in outcomes {
            guard let ticket = inflight, ticket.id == outcome.id else {
                log.log(.error, "commit \(outcome.id) finished but was not in flight")
                continue
            }
            inflight = nil
            pacer.commitFinished(at: Clock.monotonicNanos())
            finishCommit(ticket, errors: outcome.errors)
        }
        // What accumulated meanwhile starts at the end of this turn (endOfTurn), with what else
        // the turn reads, unless the pacer waits for the clients just released.
    }

    func finishCommit(_ ticket: CommitTicket, errors: [StoreError?]) {
        // (compaction's copies, take-backs, withdrawn and queued-again events: no request's
        // changes, whichever request ran last)
        turn.endRequest()
        var failed = ticket.failed
        var failedHere: [(ObjectIdentifier, StoreError)] = []
        var next = 0
        for (store, job) in ticket.stores {
            var error: StoreError? = nil
            if job != nil {
                error = next < errors.count ? errors[next] : StoreError("the commit was not written")
                next += 1
            }
            store.finishCommit(job, error: error)
            if error != nil && store.failedRecordsMayRemain { error?.recordsMayRemain = true }
            if let error {
                failed[ObjectIdentifier(store)] = error
                failedHere.append((ObjectIdentifier(store), error))
            }
        }
        for (_, e) in failed { log.log(.error, "commit failed: \(e.message)") }
        var held = ticket.held
        // The requests accumulated since (the next commit's) whose store failed too have what they
        // did in other stores taken back with the commit's own requests, in the same durable
        // write, before any of them is answered (`failAccumulated` below answers the rest): a
        // take-back that cannot be made durable must turn their -32005 into -32603 as well.
        // (only stores that failed here undid what was changed since: one that failed to begin
        // the commit did so before the requests accumulated since came)
        var list = ticket.compensations
        if !failedHere.isEmpty && !compensations.isEmpty {
            let undoneSince = Set(failedHere.map(\.0))
            list += compensations.filter { undoneSince.contains($0.failing) }
            compensations.removeAll { undoneSince.contains($0.failing) }
        }
        var redos: [() -> Void] = []
        if !failed.isEmpty && !list.isEmpty {
            let (undoneFailed, toRedo) = compensate(list, failed: failed)
            redos = toRedo
            if !undoneFailed.isEmpty {
                held = held.map { ($0.0, $0.1.map { Broker.undoFailed($0, failed, undoneFailed) }, $0.2, $0.3) }
                // The requests accumulated since failed only in the stores that failed here (and
                // undid what they had changed since): a store that failed to begin this commit
                // did so before they came, and their changes there wait for the next commit.
                var failedSince: [ObjectIdentifier: StoreError] = [:]
                for (store, error) in failedHere { failedSince[store] = error }
                if !failedSince.isEmpty {
                    for c in heldConnections { c.held = c.held?.map { Broker.undoFailed($0, failedSince, undoneFailed) } }
                }
                for (_, b) in waitingBatches {
                    for a in b.awaiting where a.commit == ticket.id || (a.commit == nextCommitID && !failedSince.isEmpty) {
                        b.parts[a.index] = Broker.undoFailed(b.parts[a.index], a.commit == ticket.id ? failed : failedSince, undoneFailed)
                    }
                }
            }
        }
        for (store, error) in failedHere { failAccumulated(store, error) }
        // What stays of requests whose take-back failed is made again in the failing store now,
        // after `failAccumulated` (which empties the turn's events and runs, then drops, the
        // compensations of the requests accumulated since): the event queued again goes with the
        // next commit, with a compensation of its own should that commit fail too.
        for redo in redos { redo() }
        runRedosAfterCut()
        decideWaitingBatches(commit: ticket.id, failed: failed)
        releaseHeld(held, failed)
        // The commit's events go to their apps' live subscribers (no closure per event: the
        // ticket lists them), then the other work that waited for durability.
        if !ticket.events.isEmpty, let events = store, failed[ObjectIdentifier(events)] == nil {
            // Events are what the commit was for: each subscriber's go out now, before the
            // openers' replies (queued above, sent at the end of the turn), so an app hears of its
            // URL one write (and one wake-up of another process) sooner. Each connection's own
            // order is unchanged: its replies released above come before its events.
            var last: Connection? = nil
            for e in ticket.events {
                guard let conn = subscribers[e.app], !conn.closed else { continue }
                sendEvent(e, to: conn)
                if last !== conn {
                    if let l = last, !l.closed { flush(l) }
                    last = conn
                }
            }
            if let l = last, !l.closed { flush(l) }
        }
        for (participant, action) in ticket.afterCommit where failed[participant] == nil { action() }
    }

    /// Undoes, in other stores, what requests did whose own store failed in this commit, and
    /// makes that durable at once, before their replies go: their changes there were durable
    /// (a share whose announcing event failed), and "nothing was stored" holds only once the undo
    /// is (a crash, or a disk refusing it, would otherwise keep the share, and recovery would
    /// re-create its event). Rare (a failed commit), so on the loop. Returns the stores whose
    /// undo could not be made durable, with their errors (their other pending changes failed too).
    func compensate(_ list: [Compensation], failed: [ObjectIdentifier: StoreError]) -> (
        [ObjectIdentifier: StoreError], [() -> Void]
    ) {
        var undone: [TurnParticipant] = []
        var undoFailed: [ObjectIdentifier: StoreError] = [:]
        var notAppended: [Int] = []  // (indexes in `list` whose take-back could not be appended)
        for (i, c) in list.enumerated() where failed[c.failing] != nil {
            if var e = c.undo(), failed[ObjectIdentifier(c.undoes)] == nil {
                // (the take-back could not even be appended: the share stays, durable)
                e.recordsMayRemain = true
                log.log(.error, "cannot take back what a request stored with a failed commit of another store: \(e.message)")
                undoFailed[ObjectIdentifier(c.undoes)] = e
                notAppended.append(i)
            }
            if !undone.contains(where: { $0 === c.undoes }) { undone.append(c.undoes) }
        }
        var commitFailed: Set<ObjectIdentifier> = []
        for store in undone where failed[ObjectIdentifier(store)] == nil {
            do {
                try store.commitTurn()
                settleDurable(ObjectIdentifier(store))
            } catch {
                var e = error
                if store.failedRecordsMayRemain { e.recordsMayRemain = true }
                log.log(.error, "commit failed: \(e.message) (taking back what requests stored with a failed commit of another store)")
                undoFailed[ObjectIdentifier(store)] = e
                commitFailed.insert(ObjectIdentifier(store))
                failAccumulated(ObjectIdentifier(store), e, written: true)
            }
        }
        // What stays (a take-back not appended, or not made durable, of a change that was: its
        // store did not fail here) is whole again: its part in the failing store is made again
        // (by the caller, once the failing store's accumulated requests have been failed).
        var redos: [() -> Void] = []
        for (i, c) in list.enumerated() where failed[c.failing] != nil && failed[ObjectIdentifier(c.undoes)] == nil {
            if notAppended.contains(i) || commitFailed.contains(ObjectIdentifier(c.undoes)), let redo = c.redo { redos.append(redo) }
        }
        return (undoFailed, redos)
    }

    /// The redos waiting for a cut (`redosAfterCut`) whose store has made it run now (their
    /// events go with the next commit).
    func runRedosAfterCut() {
        guard !redosAfterCut.isEmpty else { return }
        let ready = redosAfterCut.filter { !$0.store.failedRecordsMayRemain }
        guard !ready.isEmpty else { return }
        redosAfterCut.removeAll { !$0.store.failedRecordsMayRemain }
        for r in ready { r.redo() }
    }

    /// `store` was just committed out of band (a take-back, `compensate`), and with it what the
    /// requests accumulated since (the next commit's) changed there. Those that changed nothing
    /// else are durable whatever the next commit does (its failure in `store` no longer undoes
    /// their change): their replies are successes now, still sent in their turn. (They used to
    /// wait for the next commit, and were answered -32005 when it failed in `store`.)
    func settleDurable(_ store: ObjectIdentifier) {
        func onlyThere(_ touched: TouchedStores) -> Bool { touched.first == store && touched.more.isEmpty }
        func convert(_ h: HeldReply) -> HeldReply {
            switch h {
            case .deferred(let id, let result, let touched) where onlyThere(touched):
                var out: [UInt8] = []
                result.writeResponse(id: id, to: &out)
                return .bytes(out)
            case .batch(let parts): return .batch(parts.map(convert))
            default: return h
            }
        }
        for c in heldConnections { c.held = c.held?.map(convert) }
        let next = nextCommitID
        settleAwaiting([:]) { a, part in
            guard a.commit == next, case .deferred(_, _, let touched) = part else { return false }
            return onlyThere(touched)
        }
    }

    /// A held reply of a request whose commit failed in one store while its change in another
    /// was durable and could not be taken back (`compensate`): not -32005 ("nothing was
    /// stored") but -32603, saying what may be there.
    static func undoFailed(
        _ h: HeldReply, _ failed: [ObjectIdentifier: StoreError], _ notUndone: [ObjectIdentifier: StoreError]
    ) -> HeldReply {
        switch h {
        case .deferred(let id, _, let touched):
            guard let cause = touched.firstMapped({ failed[$0] }), let e = touched.firstMapped({ notUndone[$0] }) else { return h }
            var out: [UInt8] = []
            RPCCodec.writeError(
                id: id,
                error: RPCError(
                    .internalError,
                    "Internal error: part of this request was stored and the rest could not be (\(cause.message)); taking the stored part back failed too (\(e.message)): it may be there after a restart"),
                to: &out)
            return .bytes(out)
        case .batch(let parts): return .batch(parts.map { undoFailed($0, failed, notUndone) })
        case .bytes: return h
        }
    }

    /// A commit of `store` failed, and the store undid what it had changed since too: the requests
    /// of the next commit that touched it answer -32005 (in place, so replies keep their order),
    /// their after-commit work is dropped and their compensations run now.
    /// `written`: their records were in the failed write (a take-back's commit, `compensate`),
    /// so they may remain when the journal could not take them back (-32603 then).
    func failAccumulated(_ store: ObjectIdentifier, _ error: StoreError, written: Bool = false) {
        let rpcError =
            written && error.recordsMayRemain
            ? Broker.commitFailure(error) : RPCError(.storageFailure, "Storage failure: \(error.message); nothing was stored")
        func convert(_ h: HeldReply) -> HeldReply {
            switch h {
            case .deferred(let id, _, let touched) where touched.contains(store):
                var out: [UInt8] = []
                RPCCodec.writeError(id: id, error: rpcError, to: &out)
                return .bytes(out)
            case .batch(let parts): return .batch(parts.map(convert))
            default: return h
            }
        }
        for c in heldConnections { c.held = c.held?.map(convert) }
        failWaitingBatches(store, error)
        afterCommit.removeAll { $0.0 == store }
        let undo = compensations.filter { $0.failing == store }
        compensations.removeAll { $0.failing == store }
        for c in undo { _ = c.undo() }  // (changes not written yet: they go with this store's next commit)
        // Requests whose change in `store` was just undone (not durable yet) have their change in
        // another store, pending with the next commit, taken back (a share's event).
        let orphaned = compensations.filter { ObjectIdentifier($0.undoes) == store }
        compensations.removeAll { ObjectIdentifier($0.undoes) == store }
        for c in orphaned { c.withdraw?() }
        // (An event still pending was queued again after the rollback, for a share whose
        // take-back failed (`Compensation.redo`, run by `compensate` before this): it is
        // delivered after the next commit with the others.)
        if let events = self.store, ObjectIdentifier(events) == store {
            turnEvents.removeAll { !events.isPending(app: $0.app, id: $0.id) }
        }
    }

    /// Takes the replies held since the last commit began (they wait for the next one).
    func takeHeld() -> [(Connection, [HeldReply], Int, Int)] {
        var list: [(Connection, [HeldReply], Int, Int)] = []
        list.reserveCapacity(heldConnections.count)
        for c in heldConnections {
            guard let held = c.held else { continue }
            list.append((c, held, c.heldRequests, c.heldBytes))
            c.held = nil
            c.ticketHolds += 1
            c.heldRequests = 0
            c.ticketBytes += c.heldBytes
            c.heldBytes = 0
            if c.hasQueuedEvents { markDirty(c) }  // its events may go out again (flush refills)
        }
        heldConnections.removeAll(keepingCapacity: true)
        return list
    }

    func releaseHeld(_ list: [(Connection, [HeldReply], Int, Int)], _ failed: [ObjectIdentifier: StoreError]) {
        let now = list.isEmpty ? 0 : Clock.monotonicNanos()
        for (c, held, requests, bytes) in list {
            c.inFlight -= requests
            c.ticketHolds -= 1
            c.ticketBytes -= bytes
            if c.eventsWaitForReleases > 0 { c.eventsWaitForReleases = max(0, c.eventsWaitForReleases - requests) }
            guard !c.closed else { continue }
            pacer.released(c, at: now)
            for h in held { c.enqueue { Broker.writeHeld(h, failed: failed, to: &$0) } }
            markDirty(c)
        }
    }

    /// Blocks until every change is durable (shutdown): the commit in flight, then the rest.
    func drainCommits() {
        // (compaction makes no more copies: one chunk would follow another to the end)
        store?.carryingPaused = true
        for s in shareStores.values { s.carryingPaused = true }
        while inflight != nil || turn.hasDirty || !heldConnections.isEmpty {
            if inflight == nil { startCommit() }
            if inflight != nil { completeCommits(syncWorker.waitForOutcomes()) }
        }
        flushDirty()
    }

    func markDirty(_ c: Connection) {
        if !c.dirty {
            c.dirty = true
            dirty.append(c)
        }
    }

    // MARK: Accepting

    func acceptConnections() {
        for _ in 0..<256 {
            let result: IOResult<Int32>
            do { result = try UnixSocket.accept(listenerFD) } catch {
                if error.errno == EMFILE || error.errno == ENFILE {
                    shedConnectionAtFDLimit()
                    return
                }
                if error.errno == ECONNABORTED { continue }
                log.log(.error, "accept: \(error)")
                return
            }
            guard case .done(let fd) = result else { return }
            let id = nextConnectionID
            nextConnectionID += 1
            let peer = UnixSocket.peerCredentials(fd)
            if let uid = peer?.uid, connectionsByUID[uid, default: 0] >= config.maxConnectionsPerUID {
                throttledWarning("per-user limit \(uid)", "refusing a connection from uid \(uid): it already has \(config.maxConnectionsPerUID) (the per-user limit)")
                refuseAccepted(fd, "Unauthorized: uid \(uid) already has \(config.maxConnectionsPerUID) connections (the per-user limit)")
                continue
            }
            if let uid = peer?.uid, !Broker.isBrokersOwnUID(uid), openFileLimit > 0 {
                // Other users' connections together may not take the descriptors kept for the
                // broker's own user's clients (an eighth, at least 64): two hostile users at their
                // per-user limits locked every app out.
                // (plus the broker's own: its journals, a few per open group, and its pipes,
                // listener and worker files)
                let reserve = max(64, openFileLimit / 8) + 32 + 2 * (shareStores.count + defaults.stores.count)
                let own = connectionsByUID[ProcessInfoLite.uid, default: 0] + (ProcessInfoLite.uid == 0 ? 0 : connectionsByUID[0, default: 0])
                if connections.count - own >= openFileLimit - reserve {
                    throttledWarning(
                        "other users' limit",
                        "refusing a connection from uid \(uid): other users' connections have reached \(openFileLimit - reserve) (the rest of the open-file limit is kept for this user's clients)")
                    refuseAccepted(fd, "Unauthorized: other users' connections to this broker have reached their limit of \(openFileLimit - reserve); try again later")
                    continue
                }
            }
            if openFileLimit > 0 && connections.count >= openFileLimit - ownFileReserve {
                // Connections, the broker's own user's too, leave the broker the descriptors its
                // own work needs (journals, a new group's files, a share's files being written,
                // launches, reading the manifests): past this, one client opening connections
                // in a loop made every share answer -32005.
                throttledWarning(
                    "own files' reserve",
                    "refusing a connection from uid \(peer.map { String($0.uid) } ?? "?"): \(connections.count) connections are open; the other \(ownFileReserve) descriptors of the open-file limit (\(openFileLimit)) are kept for the broker's own files")
                refuseAccepted(fd, "Unauthorized: this broker has \(connections.count) connections open, all its open-file limit (\(openFileLimit)) allows beside its own files; try again later")
                continue
            }
            let conn = Connection(id: id, fd: fd, peer: peer, maxMessage: config.maxMessage, meter: outputMeter)
            do { try poller.add(fd, interest: .readable, token: id) } catch {
                log.log(.error, "cannot watch new connection: \(error)")
                FD.close(fd)
                continue
            }
            connections[id] = conn
            if let uid = peer?.uid { connectionsByUID[uid, default: 0] += 1 }
            if log.enabled(.debug) { log.log(.debug, "connected: \(conn.identity)", connection: id) }
        }
    }

    /// Logs a warning of `kind` at most once a second; the next one written says how many were
    /// left out meanwhile (a client refused at a limit may try again thousands of times a second).
    func throttledWarning(_ kind: String, _ text: @autoclosure () -> String) {
        let now = Clock.monotonicNanos()
        if let last = throttledWarnings[kind], now - last.at < 1_000_000_000 {
            throttledWarnings[kind]!.skipped += 1
            return
        }
        let skipped = throttledWarnings[kind]?.skipped ?? 0
        log.log(.warning, text() + (skipped > 0 ? " (and \(skipped) more like it since the last such line, not logged)" : ""))
        throttledWarnings[kind] = (now, 0)
    }

    /// The `data` of the error the broker says last, without an id, when it closes a connection:
    /// it tells that error from the answer to a message it could not tie to a request (an error
    /// without an id too, after which the connection stays open).
    static let closingData: JSONValue = ["closing": true]

    /// Descriptors of the open-file limit no connection may take: the broker's own (its pipes,
    /// listener, lock, event journal, a journal and defaults file per open group) and room for
    /// its work in flight (a new group's files, a share's files, launches, reading the
    /// manifests, compaction); at most a quarter of the limit.
    var ownFileReserve: Int {
        min(openFileLimit / 4, 64 + 2 * (shareStores.count + defaults.stores.count))
    }

    /// Tells a connection just accepted why it is refused (an error without an id), and closes it.
    func refuseAccepted(_ fd: Int32, _ message: String) {
        var out: [UInt8] = []
        RPCCodec.writeError(id: .null, error: RPCError(.unauthorized, message, data: Broker.closingData), to: &out)
        out.append(0x0A)
        _ = out.withUnsafeBytes { try? FD.write(fd, $0) }
        FD.close(fd)
    }

    /// At the open-file limit, accept and close one pending connection using the spare descriptor,
    /// so the listener does not stay readable forever (no busy loop).
    func shedConnectionAtFDLimit() {
        throttledWarning("open-file limit", "open-file limit (\(openFileLimit)) reached; refusing a connection")
        withSpareDescriptorFreed {
            if case .done(let fd)? = try? UnixSocket.accept(listenerFD) { FD.close(fd) }
        }
    }

    /// Runs `body` with the spare descriptor (kept for the open-file limit) closed, so it has
    /// one to use there; takes it back after (before the loop: none yet, none taken).
    func withSpareDescriptorFreed<T>(_ body: () -> T) -> T {
        let had = spareFD >= 0 || loopStarted
        if spareFD >= 0 {
            FD.close(spareFD)
            spareFD = -1
        }
        defer { if had && spareFD < 0 { spareFD = open("/dev/null", O_RDONLY | O_CLOEXEC) } }
        return body()
    }

    // MARK: Reading

    func readFrom(_ conn: Connection) {
        for _ in 0..<Broker.readsPerWakeup {
            // Back-pressure: a connection at its in-flight quota (`throttle`) is read again once
            // a commit has released its replies; one whose request works off the loop, after it.
            if conn.throttled || conn.suspended != nil { return }
            let result: IOResult<Int>
            do {
                if conn.checksWriter {
                    let (r, writer) = try FD.readWithWriter(conn.fd, into: scratch)
                    result = r
                    // (pid 0: a writer the kernel cannot name in this pid namespace: foreign too)
                    if writer >= 0, let peer = conn.peer, peer.pid > 0, writer != peer.pid, conn.foreignWriter == nil {
                        conn.foreignWriter = writer
                        if conn.role != nil {  // a pinned session: another process is speaking in it
                            log.log(
                                .warning,
                                "\(conn.identity): pid \(writer) wrote to a session pinned to the process that connected (pid \(peer.pid)); closing it",
                                connection: conn.id)
                            closeNow(conn, reason: "written by another process")
                            return
                        }
                    }
                } else {
                    result = try FD.read(conn.fd, into: scratch)
                }
            } catch {
                closeNow(conn, reason: "read failed: \(error)")
                return
            }
            switch result {
            case .wouldBlock:
                return
            case .done(0):
                // The peer finished sending: answer what it sent, then close. A last line
                // without its '\n' is a message too (`printf '{...}' | socat ...`).
                if log.enabled(.debug) { log.log(.debug, "peer closed its side", connection: conn.id) }
                if !conn.closing {
                    let ran = conn.framer.finish { frame, mode in
                        conn.outputMode = mode
                        return self.handleFrame(conn, frame)
                    }
                    unwatchPartial(conn)
                    // (work off the loop, or replies owed at the quota: the end of the stream is
                    // read again, and the connection closed, once they are done)
                    if ran && (conn.suspended != nil || conn.throttled) { return }
                }
                beginClosing(conn)
                return
            case .done(let n):
                let requestsBefore = totalRequests
                do {
                    try conn.framer.feedUntilStopped(UnsafeRawBufferPointer(rebasing: scratch[0..<n])) { frame, mode in
                        conn.outputMode = mode
                        return conn.closing || self.handleFrame(conn, frame)
                    }
                } catch {
                    framingFailed(conn, error)
                    return
                }
                if conn.suspended != nil || conn.throttled { return }  // (the rest is read after its work, or its replies)
                if conn.framer.bufferedByteCount >= Broker.partialWatchBytes {
                    if conn.partialSince == 0 || totalRequests != requestsBefore { watchPartial(conn) }
                } else {
                    unwatchPartial(conn)
                }
                if conn.closing { return }
                if n < Broker.readChunk { return }
            }
        }
    }

    func framingFailed(_ conn: Connection, _ error: FramingError) {
        let rpcError: RPCError
        switch error {
        case .tooLarge(let limit):
            rpcError = RPCError(
                .invalidRequest, "Invalid Request: message larger than the limit of \(limit) bytes; closing the connection",
                data: Broker.closingData)
        case .badHeader(let why):
            rpcError = RPCError(.parseError, "Parse error: \(why); closing the connection", data: Broker.closingData)
        }
        log.log(.warning, "\(rpcError.message)", connection: conn.id)
        // Answer in the framing the peer chose, even when its first frame is the one that failed.
        if conn.framer.mode == .contentLength { conn.outputMode = .contentLength }
        emitReply(conn) { RPCCodec.writeError(id: .null, error: rpcError, to: &$0) }
        markDirty(conn)
        beginClosing(conn)
    }

    /// Runs one message; false when it suspended the connection (its work runs off the loop).
    func handleFrame(_ conn: Connection, _ frame: UnsafeRawBufferPointer) -> Bool {
        if conn.releasedAt != 0 { pacer.requestArrived(from: conn) }
        switch RPCCodec.decode(frame, readingShareSend: true, maxBatchMembers: config.maxBatchMembers) {
        case .single(let item):
            switch item {
            case .failure(let reply):
                emitReply(conn) { RPCCodec.writeError(id: reply.id, error: reply.error, to: &$0) }
            case .success(let request):
                if overQuota(conn) {
                    if let reply = refuseOverQuota(conn, request) { emitReply(conn) { $0.append(contentsOf: reply) } }
                    break
                }
                let response = dispatch(conn, request)
                if suspension != nil {
                    if suspend(conn, id: request.id, batch: nil) {
                        markDirty(conn)
                        runAfterReply(conn)
                        return false
                    }
                    if let id = request.id { emitReply(conn) { RPCCodec.writeError(id: id, error: Broker.noWorkerError, to: &$0) } }
                    break
                }
                guard let response else { break }
                reply(conn, request.id!, response)
            }
            markDirty(conn)
            runAfterReply(conn)
        case .batch(let items):
            if !runBatch(conn, SuspendedBatch(items: items)) { return false }
        }
        if conn.inFlight >= config.maxRequestsInFlight { return throttle(conn) }
        return true
    }

    /// Stops running what `conn` sent, at its in-flight quota: the frames after this one stay in
    /// its framer, the socket is not read (so its kernel buffer fills and the client's writes
    /// wait), until replies have gone out (`resumeThrottled`). Returns false (the framer stops).
    func throttle(_ conn: Connection) -> Bool {
        conn.throttled = true
        throttledConnections.append(conn)
        unwatchPartial(conn)  // (what it holds unread waits for its replies, not for the peer)
        updateInterest(conn)
        return false
    }

    /// End of a turn: connections stopped at their in-flight quota whose replies have gone out
    /// since run what they sent next, and are read again.
    func resumeThrottled() {
        let list = throttledConnections
        throttledConnections.removeAll(keepingCapacity: true)
        for conn in list {
            guard !conn.closed, conn.throttled else { continue }
            if conn.inFlight >= config.maxRequestsInFlight {
                throttledConnections.append(conn)
                continue
            }
            conn.throttled = false
            // (a connection that began closing meanwhile runs nothing more: readOn closes it
            // once its output is written)
            readOn(conn)
        }
    }

    /// -32007 for a request read while more than the output cap of its connection's replies wait
    /// unread (or more than its fair share, over the broker's output budget); it is not run.
    /// Returns the error reply's bytes (nil for a notification: it has no reply).
    func refuseOverQuota(_ conn: Connection, _ request: RPCRequest, batchBytes: Int = 0, briefly: Bool = false) -> [UInt8]? {
        rejectedOverQuota += 1
        if log.enabled(.debug) { log.log(.debug, "refusing \(request.method): quota reached", connection: conn.id) }
        guard let id = request.id else { return nil }
        let unread = conn.unreadOutput + batchBytes
        let error =
            briefly
            // (a batch's later refusals: each costs output too, so they are short)
            ? RPCError(.tooManyRequests, "Over quota; not run")
            : unread > config.effectiveMaxOutputBuffer
            ? RPCError(
                .tooManyRequests,
                "Too many unread replies: \(unread) bytes of output wait for this connection to read them (over the limit of \(config.effectiveMaxOutputBuffer), --max-output); read them before sending more. This request was not run")
            : RPCError(
                .tooManyRequests,
                "Too many unread replies: the broker's connections hold more output than its budget of \(config.maxTotalOutput) bytes (--max-total-output), and this one \(unread) bytes of it; read them before sending more. This request was not run")
        var reply: [UInt8] = []
        RPCCodec.writeError(id: id, error: error, to: &reply)
        return reply
    }

    /// How long a watched connection (over its output cap, or with events waiting) may go without
    /// reading: `stallNanos`, or 1 s for one over its cap while all connections' output is over
    /// the broker's budget (memory comes back from clients that do not read, sooner).
    func stallLimit(_ conn: Connection) -> UInt64 {
        conn.pendingOutput > config.effectiveMaxOutputBuffer && outputMeter.bytes > config.maxTotalOutput
            ? min(stallNanos, 1_000_000_000) : stallNanos
    }

    /// The budget was just passed: the watched connections' deadlines are worked out again
    /// (those over their cap get the shorter limit).
    func outputBudgetPassed() {
        for (_, c) in stallWatch where c.stalledSince != 0 { nextTimerDue = min(nextTimerDue, c.stalledSince + stallLimit(c)) }
    }

    /// What a connection may hold unread and still be served while all connections' output is
    /// over the broker's budget (1 MiB with the default budget).
    /// (At least a subscriber's event window and some: its acks, which shrink its backlog, pass.)
    var fairOutputShare: Int { max(eventWindow + 64 * 1024, min(1 << 20, config.maxTotalOutput / 1024)) }

    /// A request read now is refused (-32007): the connection's unread output (with `pending`, a
    /// batch's replies so far) is over its cap, or over its fair share while all output is over
    /// the broker's budget. (The in-flight quota refuses nothing: it stops reading, `throttle`.)
    @inline(__always)
    func overQuota(_ conn: Connection, pending: Int = 0) -> Bool {
        let unread = conn.unreadOutput + pending
        return unread > config.effectiveMaxOutputBuffer || (outputMeter.bytes > config.maxTotalOutput && unread > fairOutputShare)
    }

    /// A success reply that waits for the commit of the stores its request changed; it counts
    /// towards the connection's requests in flight until it is released.
    func deferred(_ conn: Connection, _ id: RequestID, _ result: MethodResult) -> HeldReply {
        conn.inFlight += 1
        conn.heldRequests += 1
        return .deferred(id, result, touched: turn.requestTouched)
    }

    /// Holds a reply until the end of the turn (after the commit).
    func hold(_ conn: Connection, _ reply: HeldReply) {
        if conn.held == nil {
            conn.held = []
            heldConnections.append(conn)
        }
        switch reply {
        case .batch(let parts): for case .bytes(let b) in parts { conn.heldBytes += b.count }
        case .bytes(let b): conn.heldBytes += b.count
        case .deferred: break
        }
        conn.held!.append(reply)
    }

    /// Answers a request that ran: a success that changed a store waits for the commit.
    @inline(__always)
    func reply(_ conn: Connection, _ id: RequestID, _ response: consuming Result<MethodResult, RPCError>) {
        switch consume response {
        case .success(let result) where !turn.requestTouched.isEmpty:
            hold(conn, deferred(conn, id, result))
        case .success(let result):
            emitReply(conn) { result.writeResponse(id: id, to: &$0) }
        case .failure(let error):
            emitReply(conn) { RPCCodec.writeError(id: id, error: error, to: &$0) }
        }
    }

    /// Queues a reply (or an error) to a request. Replies keep their requests' order: while
    /// replies of this connection wait in a commit being written, this one waits behind them (it
    /// goes out with the next commit's releases, or at the end of the turn that commit ends).
    @inline(__always)
    func emitReply(_ conn: Connection, _ build: (inout [UInt8]) -> Void) {
        if conn.held == nil && conn.ticketHolds > 0 {
            var bytes: [UInt8] = []
            build(&bytes)
            hold(conn, .bytes(bytes))
        } else {
            conn.emit(build)
        }
    }

    /// The answer of a request whose commit failed: -32005, nothing was stored; unless the
    /// journal could not take the commit's records back (the disk refuses every write): then the
    /// outcome is not known (-32603, which promises nothing, unlike -32005), and it says so.
    static func commitFailure(_ e: StoreError) -> RPCError {
        guard e.recordsMayRemain else { return RPCError(.storageFailure, "Storage failure: \(e.message); nothing was stored") }
        return RPCError(
            .internalError,
            "Internal error: the commit failed (\(e.message)) and what it wrote could not be taken back (the disk refuses the writes): the change may be there after a restart; no more is written there until it is taken back")
    }

    /// Serializes a held reply: deferred results become -32005 when a store they changed failed to commit.
    static func writeHeld(_ h: HeldReply, failed: [ObjectIdentifier: StoreError], to out: inout [UInt8]) {
        switch h {
        case .bytes(let b): out.append(contentsOf: b)
        case .deferred(let id, let result, let touched):
            // (Most commits fail nothing: then no store needs looking up.)
            if !failed.isEmpty, let e = touched.firstMapped({ failed[$0] }) {
                RPCCodec.writeError(id: id, error: Broker.commitFailure(e), to: &out)
            } else {
                result.writeResponse(id: id, to: &out)
            }
        case .batch(let parts):
            out.append(UInt8(ascii: "["))
            for (i, p) in parts.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeHeld(p, failed: failed, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// Work a handler asked to run once its reply is queued (e.g. the backlog after `app.subscribe`).
    func runAfterReply(_ conn: Connection) {
        guard !afterReply.isEmpty else { return }
        let actions = afterReply
        afterReply.removeAll()
        for a in actions { a() }
    }

    /// Runs one request; nil for notifications (no reply).
    func dispatch(_ conn: Connection, _ request: RPCRequest) -> Result<MethodResult, RPCError>? {
        totalRequests += 1
        conn.requestCount += 1
        let outcome: Result<MethodResult, RPCError>
        turn.beginRequest()
        // A connection mostly calls one method over and over: comparing the name with the last
        // one's (two words for a short name) instead of hashing it into the table.
        var spec = conn.lastMethod
        if spec?.name != request.method {
            spec = methods[request.method]
            if spec != nil { conn.lastMethod = spec }
        }
        if let spec {
            do {
                try spec.authorize(conn)
                let params = try Params(request.params, method: request.method, shareSend: request.shareSendParams)
                outcome = .success(try spec.handler(self, conn, params))
            } catch {
                outcome = .failure(error)
            }
        } else {
            outcome = .failure(RPCError(.methodNotFound, "Method not found: '\(request.method)'"))
        }
        if log.enabled(.trace) {
            let status: String
            switch outcome {
            case .success: status = "ok"
            case .failure(let e): status = "error \(e.code): \(e.message)"
            }
            log.log(.trace, "\(request.method) id=\(request.id?.description ?? "-") → \(status)", connection: conn.id)
        }
        return request.isNotification ? nil : outcome
    }

    // MARK: Writing

    func flush(_ conn: Connection) {
        var wrote = false
        while true {
            // A subscriber's queued events go out as its output drains (the window bounds them).
            if conn.hasQueuedEvents && conn.pendingOutput < eventWindow && !conn.eventsMustWait {
                refillEvents(conn)
            }
            guard conn.pendingOutput > 0 else { break }
            let result: IOResult<Int>
            do {
                result = try conn.out.withUnsafeBytes { buf in
                    Result { () throws(SystemError) -> IOResult<Int> in
                        try FD.write(conn.fd, UnsafeRawBufferPointer(rebasing: buf[conn.outOffset...]))
                    }
                }.get()
            } catch {
                closeNow(conn, reason: "write failed: \(error)")
                return
            }
            guard case .done(let n) = result else { break }
            conn.outOffset += n
            outputMeter.bytes -= n
            if n > 0 { wrote = true }
        }
        if conn.pendingOutput == 0 {
            conn.outOffset = 0
            conn.largestMessage = 0
            conn.stalledSince = 0
            unwatchStall(conn)
            if conn.out.capacity > 64 * 1024 { conn.out = [] } else { conn.out.removeAll(keepingCapacity: true) }
            if conn.wantsWrite {
                conn.wantsWrite = false
                updateInterest(conn)
            }
            // A closing connection still waiting for replies held for a commit stays until they are written.
            if conn.closing && conn.drained { closeDrained(conn) }
            return
        }
        // Past the cap, requests get -32007 (`refuseOverQuota`) instead of more replies; a client
        // that still does not read is dropped once its output passes the cap by more than its
        // largest message (so one large reply still reaches a client that reads it).
        // A subscriber whose events wait in its queue, or any client over the cap, that has not
        // read for `stalledReaderSeconds` is dropped too (a hung app: it can be launched again).
        let now = Clock.monotonicNanos()
        if wrote || conn.stalledSince == 0 { conn.stalledSince = now }
        let watched = conn.hasQueuedEvents || conn.pendingOutput > config.effectiveMaxOutputBuffer
        if conn.unreadOutput > config.effectiveMaxOutputBuffer + conn.largestMessage || (watched && now - conn.stalledSince > stallLimit(conn)) {
            dropSlowClient(conn)
            return
        }
        if watched && !conn.inStallWatch {
            conn.inStallWatch = true
            stallWatch[conn.id] = conn
        }
        if watched { nextTimerDue = min(nextTimerDue, conn.stalledSince + stallLimit(conn)) }
        if conn.outOffset > 1 << 20 && conn.outOffset * 2 > conn.out.count {
            conn.out.removeSubrange(0..<conn.outOffset)
            conn.outOffset = 0
        }
        if !conn.wantsWrite {
            conn.wantsWrite = true
            updateInterest(conn)
        }
    }

    /// Drops a client that does not read its output (counted, logged); a subscriber's app is
    /// launched again if its events wait and it has a launch command (a hung app's replacement).
    func dropSlowClient(_ conn: Connection) {
        droppedSlowClients += 1
        log.log(
            .warning,
            "dropping slow client \(conn.identity): \(conn.unreadOutput) bytes of output not read (limit \(config.effectiveMaxOutputBuffer))"
                + (conn.hasQueuedEvents ? ", \(conn.queuedEvents.count - conn.queuedEventsHead) events waiting" : ""),
            connection: conn.id)
        let app = conn.subscribedApp.flatMap { subscribers[$0] === conn ? $0 : nil }
        closeNow(conn, reason: "output buffer over limit")
        if let app, (store?.pendingCount(for: app) ?? 0) > 0 { launchIfNeeded(app) }
    }

    /// Drops the watched connections that have not read for the stall limit (`runTimers`).
    /// Unfinished messages at least this large are timed (`Connection.partialSince`): what a
    /// connection may hold unfinished for ever is below it (4 KiB: 16,384 connections of one
    /// user holding 64 KiB each were a gigabyte; the security audit).
    static let partialWatchBytes = 4 * 1024

    func unwatchPartial(_ conn: Connection) {
        guard conn.partialSince != 0 else { return }
        conn.partialSince = 0
        partialWatch[conn.id] = nil
    }

    func unwatchStall(_ conn: Connection) {
        guard conn.inStallWatch else { return }
        conn.inStallWatch = false
        stallWatch[conn.id] = nil
    }

    func watchPartial(_ conn: Connection) {
        conn.partialSince = Clock.monotonicNanos()
        partialWatch[conn.id] = conn
        nextTimerDue = min(nextTimerDue, conn.partialSince + stallNanos)
    }

    /// Drops connections that have held a large unfinished message for `stalledReaderSeconds`.
    func checkPartialMessages(now: UInt64) {
        for (id, conn) in partialWatch {
            if conn.closed || conn.partialSince == 0 {
                partialWatch[id] = nil
            } else if now - conn.partialSince > stallNanos {
                partialWatch[id] = nil
                log.log(
                    .warning,
                    "dropping \(conn.identity): \(conn.framer.bufferedByteCount) bytes of an unfinished message held for over \(config.stalledReaderSeconds) s",
                    connection: conn.id)
                closeNow(conn, reason: "unfinished message")
            }
        }
    }

    func checkStalledReaders(now: UInt64) {
        for (_, conn) in stallWatch where !conn.closed && conn.stalledSince != 0 && now - conn.stalledSince > stallLimit(conn) {
            dropSlowClient(conn)
        }
    }

    func updateInterest(_ conn: Connection) {
        var interest: Readiness = []
        if !conn.closing && conn.suspended == nil && !conn.throttled { interest.insert(.readable) }
        if conn.wantsWrite { interest.insert(.writable) }
        do { try poller.modify(conn.fd, interest: interest, token: conn.id) } catch {
            closeNow(conn, reason: "poller: \(error)")
        }
    }

    // MARK: Closing

    /// Stops reading; the connection closes once its output is written.
    func beginClosing(_ conn: Connection) {
        guard !conn.closing else { return }
        conn.closing = true
        if conn.drained {
            closeDrained(conn)
        } else {
            updateInterest(conn)
        }
    }

    /// Closes a closing connection that owes nothing more, once it has read its last words (why
    /// the broker ends it, when it says: `Connection.lastWords`).
    func closeDrained(_ conn: Connection) {
        if let words = conn.lastWords {
            conn.lastWords = nil
            conn.emit { RPCCodec.writeError(id: .null, error: words, to: &$0) }
            flush(conn)  // (closes it once that is written)
            return
        }
        closeNow(conn, reason: "closed")
    }

    func closeNow(_ conn: Connection, reason: String) {
        guard connections.removeValue(forKey: conn.id) != nil else { return }
        conn.closed = true
        outputMeter.bytes -= conn.pendingOutput
        conn.out = []
        conn.outOffset = 0
        poller.remove(conn.fd)
        FD.close(conn.fd)
        connectionClosed(conn)
        if log.enabled(.debug) { log.log(.debug, "disconnected (\(reason)): \(conn.identity)", connection: conn.id) }
    }

    /// Session clean-up (counters; later subscriptions and watches).
    func connectionClosed(_ conn: Connection) {
        pacer.closed(conn)
        if conn.suspended != nil { dropQueuedWork(conn) }
        endSession(conn)
        if let uid = conn.peer?.uid {
            let left = (connectionsByUID[uid] ?? 1) - 1
            connectionsByUID[uid] = left > 0 ? left : nil
        }
        unwatchStall(conn)
        unwatchPartial(conn)
    }

    /// The session's end (the connection closed, or a reload revoked it): its role stops
    /// counting, its subscription and its defaults watches go.
    func endSession(_ conn: Connection) {
        if let role = conn.role { sessionCounts.adjust(role, by: -1) }
        subscriberGone(conn)
        defaultsConnectionClosed(conn)
    }

    // MARK: Signals and shutdown

    func handleSignals() {
        guard let sp = signalPipe else { return }
        for sig in sp.drain() {
            switch sig {
            case SIGHUP:
                log.log(.info, "SIGHUP: reloading manifests")
                reloadManifests(reason: "SIGHUP")
                startLaunchChecks()
            case SIGTERM, SIGINT:
                beginShutdown(reason: sig == SIGTERM ? "SIGTERM" : "SIGINT")
            default: break
            }
        }
    }

    func handleWake() {
        var buf = [UInt8](repeating: 0, count: 64)
        let n = buf.withUnsafeMutableBytes { read(wakeRead, $0.baseAddress, $0.count) }
        guard n > 0 else { return }
        for b in buf[0..<n] {
            if b == 1 { beginShutdown(reason: "stop requested") }
            if b == 2 {
                reloadManifests(reason: "reload requested")
                startLaunchChecks()
            }
        }
    }

    /// Stops accepting, lets every connection's replies drain, and ends the loop (within the grace period).
    func beginShutdown(reason: String) {
        guard !stopping else { return }
        stopping = true
        stopDeadline = Clock.monotonicNanos() + UInt64(config.shutdownGraceSeconds * 1e9)
        log.log(.info, "\(reason): shutting down (\(connections.count) connections)")
        for (kind, t) in throttledWarnings where t.skipped > 0 {
            log.log(.warning, "\(t.skipped) more warnings of kind '\(kind)' since its last line were not logged")
        }
        closeListener()
        for c in Array(connections.values) { beginClosing(c) }
    }

    func checkShutdownComplete() {
        endOfTurn()
        if !connections.isEmpty && Clock.monotonicNanos() >= stopDeadline && !(offLoop.isEmpty && resumeAfterCommit.isEmpty) {
            // The grace period ended with file work still running (a long copy), or done and
            // waiting for the commit in flight: the commit ends, what waited for it runs on, and
            // what still runs is answered now rather than cut off without a word.
            drainCommits()
            resumeWaiting()
            answerUnfinishedWork()
            endOfTurn()
        }
        if connections.isEmpty || Clock.monotonicNanos() >= stopDeadline {
            drainCommits()  // nothing acknowledged or waiting is left unwritten
            finished = true
        }
    }
}
