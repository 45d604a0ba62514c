// One client connection: its descriptor, framer, bounded output buffer and session identity.
// Owned by the loop thread; never shared.

import ShareProtocol
import ShareRouting
import ShareStore
import ShareSystem

/// A session's role, as declared in `hello`.
public enum SessionRole: String, Sendable, CaseIterable {
    /// An app: receives events, reads its groups.
    case app
    /// An extension: sends shares as itself.
    case `extension`
    /// A tool: opens URLs, sends shares as the share sheet; reads no group.
    case tool
}

/// A connected client. Loop-owned (not Sendable).
final class Connection {
    /// Connection id (also the poller token and the `session` number).
    let id: UInt64
    /// The socket.
    let fd: Int32
    /// Kernel-reported peer credentials.
    let peer: PeerCredentials?
    /// When the connection was accepted (monotonic ns).
    let openedAt: UInt64
    /// Incoming frames.
    var framer: Framer
    /// The framing replies use (the framing the peer chose).
    var outputMode: FramingMode = .newline
    /// Bytes waiting to be written.
    var out: [UInt8] = []
    /// Offset of the first unwritten byte in `out`.
    var outOffset = 0
    /// Whether the poller watches for writability.
    var wantsWrite = false
    /// Listed in the loop's flush list this turn.
    var dirty = false
    /// Closing: no more reads; close once `out` drains (or at once when `abort`).
    var closing = false
    /// What the broker tells the client, without an id, once every reply it is owed is written
    /// and before it closes the connection (why a manifest reload ended the session).
    var lastWords: RPCError?
    /// Closed (gone from the broker's table; its descriptor is closed): set by `closeNow`.
    var closed = false
    /// The role from `hello`; nil before it.
    var role: SessionRole? = nil
    /// The bundle ID from `hello` (apps and extensions).
    var bundleID: String? = nil
    /// Requests handled.
    var requestCount: UInt64 = 0
    /// The method this connection called last (`dispatch` checks it before the method table).
    var lastMethod: MethodSpec? = nil
    /// An extension session's own registry entry and activation rule, looked up on its first
    /// share and kept while `Broker.registryGeneration` is unchanged (no name hashed per share).
    var sender: (generation: Int, target: ExtensionTarget, rule: LoadedActivationRule?)? = nil
    /// The group share store this connection sent to last (`share.send`, before `shareStores`).
    var lastShareStore: ShareRecordStore? = nil
    /// The app whose events this connection receives (after `app.subscribe`, until taken over).
    var subscribedApp: String? = nil
    /// The subscription asked for `app.subscriptionEnded` when another connection takes it over
    /// (`app.subscribe {takeoverNotice: true}`).
    var wantsTakeoverNotice = false
    /// Replies held until this turn's commit (non-nil while the connection has a reply that waits
    /// for durability; later replies queue behind it to keep their order).
    var held: [HeldReply]? = nil
    /// Requests whose replies wait for a commit: this turn's and the one being written
    /// (`Configuration.maxRequestsInFlight`).
    var inFlight = 0
    /// Of those, the requests whose replies are in `held` (not yet handed to a commit).
    var heldRequests = 0
    /// Commits being written that hold replies of this connection (taken from `held`, not yet
    /// released): a reply made meanwhile waits behind them (`Broker.emitReply`), and so do its
    /// events and its closing.
    var ticketHolds = 0

    /// Replies wait for a commit: in `held`, or in a commit being written.
    var repliesWait: Bool { held != nil || ticketHolds > 0 }

    /// Events wait behind replies still to come: held for a commit, released but counted
    /// (`eventsWaitForReleases`), or in a batch that waits for file work (it may hold its
    /// subscribe's reply).
    var eventsMustWait: Bool { repliesWait || eventsWaitForReleases > 0 || suspended?.batch != nil }

    /// Nothing is left to write or wait for: a closing connection may close now.
    var drained: Bool { pendingOutput == 0 && !dirty && inFlight == 0 && !repliesWait }
    /// When a commit last released this connection's replies (monotonic ns), until its next
    /// request; 0 otherwise (`CommitPacer`).
    var releasedAt: UInt64 = 0
    /// How long this connection took, last time, from a release to its next request (ns; max:
    /// not seen yet).
    var thinkNanos: UInt64 = .max
    /// The next commit may wait for this connection's next request (`CommitPacer`).
    var expectedBack = false
    /// The largest message queued since the output was last empty (bytes): unread output may
    /// exceed the cap by this much before the connection is dropped (a big `share.list` to a
    /// reader that reads); forgotten once the output drains.
    var largestMessage = 0
    /// Bytes of messages held behind a reply that waits for the commit (`held`), not yet in `out`.
    var heldBytes = 0
    /// Bytes of the messages of `held` handed to commits in flight (written at their release).
    var ticketBytes = 0
    /// Since when the output has waited without a write making progress (monotonic ns; 0 while
    /// it drains). No clock is read while the output drains at once (the common case).
    var stalledSince: UInt64 = 0
    /// Listed in `Broker.stallWatch` (its output waits and it may be dropped for not reading).
    var inStallWatch = false
    /// The identity rule and token the session's bundle had when it was admitted (nil: no app
    /// or extension session); a reload that changes them checks the session again.
    var admitted: AdmittedIdentity? = nil
    /// Whether reads learn the writing process (SO_PASSCRED): until hello, and for the whole of a
    /// session whose bundle is pinned to an executable.
    var checksWriter = true
    /// A pid other than the connecting one that wrote to this connection (nil: none seen).
    var foreignWriter: Int32? = nil
    /// Since when at least `Broker.partialWatchBytes` of an unfinished message have been held
    /// without a message completing (monotonic ns; 0 otherwise): such a connection is dropped
    /// after `stalledReaderSeconds`, so a client cannot pin megabytes by never ending a message.
    var partialSince: UInt64 = 0
    /// The request whose work runs off the loop: nothing more is read or run until it is done.
    var suspended: SuspendedRequest? = nil
    /// At its in-flight quota (`Configuration.maxRequestsInFlight`): what it sent after the request
    /// that reached it waits, unread (in the framer, then in the socket), until replies have gone
    /// out (`Broker.resumeThrottled`). Nothing it sent is refused for the quota.
    var throttled = false
    /// Events for the subscribed app not yet in `out`: written as the app reads (`Broker.eventWindow`),
    /// so a large backlog never piles up as output. References to the store's events, no copies.
    var queuedEvents: [StoredEvent] = []
    /// Index of the next event of `queuedEvents` to write.
    var queuedEventsHead = 0
    /// Queued events wait until this many more requests' replies are released by commits: a
    /// subscribe's reply held behind a durable request goes out before its backlog.
    var eventsWaitForReleases = 0

    /// Unwritten output of every connection of the broker (its global output budget).
    let meter: OutputMeter

    init(id: UInt64, fd: Int32, peer: PeerCredentials?, maxMessage: Int, meter: OutputMeter = OutputMeter()) {
        self.id = id
        self.fd = fd
        self.peer = peer
        self.meter = meter
        self.framer = Framer(maxMessage: maxMessage)
        self.openedAt = Clock.monotonicNanos()
    }

    /// Output waiting for this connection to read it: written to `out` or held for the commit.
    var unreadOutput: Int { pendingOutput + heldBytes + ticketBytes }

    /// Unwritten bytes.
    var pendingOutput: Int { out.count - outOffset }

    /// Appends one framed message (response or notification), serialized by `build` straight into
    /// the output buffer when newline framing allows it (no intermediate copy).
    func enqueue(_ build: (inout [UInt8]) -> Void) {
        let start = out.count
        if outputMode == .contentLength {
            var body: [UInt8] = []
            build(&body)
            Framer.appendFrame(body, mode: .contentLength, to: &out)
        } else {
            build(&out)
            out.append(0x0A)
        }
        let added = out.count - start
        meter.bytes += added
        if added > largestMessage { largestMessage = added }
    }

    /// Events waiting in `queuedEvents`.
    var hasQueuedEvents: Bool { queuedEventsHead < queuedEvents.count }

    /// Appends serialized message bytes, or holds them behind a reply that waits for the commit.
    func emit(_ build: (inout [UInt8]) -> Void) {
        if held != nil {
            var bytes: [UInt8] = []
            build(&bytes)
            heldBytes += bytes.count
            held!.append(.bytes(bytes))
        } else {
            enqueue(build)
        }
    }

    /// A short description for logs.
    var identity: String {
        var s = role?.rawValue ?? "anonymous"
        if let bundleID { s += " " + bundleID }
        if let peer { s += " (pid \(peer.pid), uid \(peer.uid))" }
        return s
    }
}

/// A reply waiting for the end of the turn: ready bytes, or a success that becomes -32005 if the
/// turn's commit fails.
/// What a method answers: a value, or a result it encoded itself (`JSONObjectWriter`).
enum MethodResult {
    case value(JSONValue)
    case encoded([UInt8])
    /// An error answer built from what a commit not yet durable changed (a share not found
    /// because its completion is being committed): like a success it waits for that commit when
    /// the request touched the store, and is `-32005` instead when the commit fails.
    case error(RPCError)

    /// Appends the whole success response for `id`.
    func writeResponse(id: RequestID, to out: inout [UInt8]) {
        switch self {
        case .value(let v): RPCCodec.writeResult(id: id, result: v, to: &out)
        case .encoded(let b): RPCCodec.writeResult(id: id, encodedResult: b, to: &out)
        case .error(let e): RPCCodec.writeError(id: id, error: e, to: &out)
        }
    }
}

enum HeldReply {
    /// A message already serialized (JSON only, unframed).
    case bytes([UInt8])
    /// A success reply that waits for durability of the stores it changed (`touched`).
    case deferred(RequestID, MethodResult, touched: TouchedStores)
    /// A batch response whose members may wait for durability.
    case batch([HeldReply])
}

/// The unwritten output of all of a broker's connections, in bytes (kept by `enqueue`, the
/// broker's flush and close).
final class OutputMeter {
    var bytes = 0
}

/// Work that undoes, in another store, what a request did when one store's commit fails: a share
/// whose announcing event could not be stored is completed again.
struct Compensation {
    /// The store whose failure calls for it.
    let failing: ObjectIdentifier
    /// The store it changes (its change joins that store's next commit).
    let undoes: TurnParticipant
    /// The change; the error when it could not be made.
    let undo: () -> StoreError?
    /// The take-back could not be made durable, so the request's durable change in `undoes`
    /// stays (answered -32603): what it had made in the failing store, lost with that store's
    /// failed commit, is made again (the share's event, with its id, with the next commit:
    /// recovery re-creates only events above the journal's last sequence number, and later
    /// events pass it), when that change is still there. nil: nothing to do.
    var redo: (() -> Void)? = nil
    /// The other way round: `undoes` failed and undid the request's change there (a share not
    /// yet durable, rolled back with its store's failed commit), so its change in the failing
    /// store, not yet committed either, is taken back (the share's event); nil: nothing to do.
    var withdraw: (() -> Void)? = nil
}

/// A commit handed to the sync worker, with everything that waits for it to be durable.
final class CommitTicket {
    let id: UInt64
    /// The stores in commit order, with their jobs (nil: nothing to write).
    let stores: [(TurnParticipant, SyncJob?)]
    /// Stores that failed before the commit was handed over (their changes are already undone).
    let failed: [ObjectIdentifier: StoreError]
    /// Replies that wait for it, per connection, with the number of requests they answer.
    let held: [(Connection, [HeldReply], Int, Int)]
    /// Work to run for each store once it is durable (e.g. delivering events).
    let afterCommit: [(ObjectIdentifier, () -> Void)]
    /// Work that undoes, in another store, what a request did when this store fails.
    let compensations: [Compensation]
    /// Events queued in it (not delivered before it is durable).
    let events: [StoredEvent]

    init(
        id: UInt64, stores: [(TurnParticipant, SyncJob?)], failed: [ObjectIdentifier: StoreError],
        held: [(Connection, [HeldReply], Int, Int)], afterCommit: [(ObjectIdentifier, () -> Void)],
        compensations: [Compensation], events: [StoredEvent]
    ) {
        self.id = id
        self.stores = stores
        self.failed = failed
        self.held = held
        self.afterCommit = afterCommit
        self.compensations = compensations
        self.events = events
    }
}

/// An app or extension session's admission terms: its manifest's uids, executable and token.
struct AdmittedIdentity: Equatable {
    var uids: [UInt32]?
    var executable: String?
    var token: String?
}
