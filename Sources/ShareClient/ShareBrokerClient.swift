// ShareBrokerClient: the async Swift client of the broker for apps, extensions and tools. One
// connection (newline-framed JSON-RPC over the Unix socket) read by a dedicated thread; calls are
// matched to answers by id; app events and defaults changes arrive as AsyncSequences. With
// `reconnect: true` a dropped connection (the broker restarted) is re-established with backoff and
// `hello`, `app.subscribe` and `defaults.watch` are redone for the streams that are still open.
// The typed methods (urlOpen, shareSend, defaultsSet, …) are in ShareBrokerClient+Methods.swift.

import ShareProtocol
import ShareSystem

/// An async connection to sharebroker.
///
/// ```swift
/// let client = ShareBrokerClient(role: .app, bundleID: "com.mycompany.myapp", reconnect: true)
/// try await client.connect()
/// for try await event in try await client.subscribe() { … ; try await event.ack() }
/// ```
///
/// Calls in flight when the connection drops fail with `.connectionLost` and are never retried
/// (the broker may or may not have done them). Calls made while the client is reconnecting wait
/// until it is connected again (or gives up, or is closed), within their `requestTimeout`, and
/// end with `.cancelled` when their task is cancelled meanwhile.
///
/// Flow control: the streams (`subscribe()`, `defaultsWatch`) are bounded. Once one holds
/// `streamBufferLimit` bytes of messages its consumer has not taken, the client stops reading the
/// connection until the consumer takes some: the backlog stays in the broker (for events, in its
/// durable queue; its slow-subscriber rules apply, so a subscriber that reads nothing for 30 s
/// while events wait is dropped, and with `reconnect` comes back and resubscribes). Replies and
/// notifications share the connection: so that calls are never held behind unread events (a
/// handler that calls the client while its stream is full would wait for ever), a call made
/// while the client is not reading makes it read up to that call's reply, buffering what comes
/// before it. That is bounded: past four times the limit a stream drops what comes, and once its
/// consumer has taken the rest gets it again from the broker (events: `app.subscribe` again,
/// which sends every unacked event again from the oldest, so events already yielded but not
/// acked come again, as after a reconnection; defaults: a catch-up, `caughtUp: true`). The
/// trade-off: while the client does not read, nothing else on the connection arrives either
/// (another stream's notifications, a takeover notice) until a call is made or the full stream
/// is read; and the client notices a broker that closed the connection only then.
///
/// Besides the errors each method names, every call can throw: `.notConnected` before
/// `connect()`, after the connection dropped with `reconnect` off, or after the client gave up
/// reconnecting; `.closed` after `close()`; `.connectionLost` when the connection breaks while
/// the call is in flight; `.timeout` past `requestTimeout`; `.cancelled` when the calling task is
/// cancelled; `.tooManyRequests` when the broker holds too many unread replies for this
/// connection; `.invalidRequest` for a request over the broker's `maxMessage` (not sent; the
/// connection stays usable); and `.unauthorized` for a method the session's role may not use
/// (`share.list`, `share.get`, `share.read`, `share.complete` and `defaults.*` for a tool;
/// `app.subscribe` and `app.ack` for anything but an app; `share.send` for an app).
public actor ShareBrokerClient {
    /// The socket path: the one given, else `$SHAREBROKER_SOCKET`, else the contract's default
    /// (`$XDG_RUNTIME_DIR/sharebroker.sock`, else `/tmp/sharebroker-UID/sharebroker.sock`).
    public nonisolated let socketPath: String
    /// The role `hello` says.
    public nonisolated let role: Role
    /// The bundle ID `hello` says (for app and extension roles, `$SHAREBROKER_BUNDLE_ID` when
    /// none was given: the broker sets it for apps it launches).
    public nonisolated let bundleID: String?
    nonisolated let token: String?
    /// Whether the client reconnects after the connection drops.
    public nonisolated let reconnects: Bool
    /// Delays and limit of reconnection attempts.
    public nonisolated let reconnectPolicy: ReconnectPolicy
    /// How long a call waits for its answer, the wait for a reconnection included (nil: no limit).
    public nonisolated let requestTimeout: Duration?
    /// How many bytes of messages (as received) a stream (`subscribe()`, `defaultsWatch`) holds
    /// for a consumer that does not take them before the client stops reading the connection.
    /// See "Flow control" in `ShareBrokerClient`'s documentation.
    public nonisolated let streamBufferLimit: Int
    /// How long connecting may take: the socket's connect (which waits while the broker's listen
    /// queue is full) and then the answer to `hello`, each (10 s). A reconnection attempt that
    /// runs out of it counts as failed and is retried; `connect()` throws `.unreachable` (the
    /// connect) or `.timeout(method: "hello")`. `requestTimeout`, when shorter, bounds `hello` too.
    public nonisolated let connectTimeout: Duration

    enum State: Equatable {
        case idle, connecting, connected, reconnecting, closed
    }

    struct Pending {
        let method: String
        let generation: Int
        let continuation: CheckedContinuation<Result<JSONValue, ShareBrokerError>, Never>
        /// Keep the `data` of an error answer in `errorData` (the case drops it).
        var keepsErrorData = false
    }

    struct Watcher {
        let group: String
        let keys: Set<ExactKey>?  // (by their bytes, as the broker keys the suite)
        let continuation: StreamBuffer<DefaultsChange>
        /// Per key, the version of the last change this stream was given, whether it was a
        /// removal and whether it was caught up: a catch-up after a reconnection skips keys given
        /// a newer change meanwhile, and reports the removal of keys it had been given; a live
        /// change not newer than a caught-up one is not given (the broker answers the list
        /// before the notifications of the commit the list waited for).
        var given: [ExactKey: (version: Int, removed: Bool, caughtUp: Bool)] = [:]
    }

    var state: State = .idle
    var transport: SocketTransport?
    var generation = 0
    var nextRequestID = 1
    var pending: [Int: Pending] = [:]
    /// Ids of the requests sent on the current connection that the broker has not answered yet,
    /// in the order they were sent (those whose caller stopped waiting included: the broker still
    /// answers them). The broker answers a connection's messages in order, and an error it sends
    /// without an id that does not close the connection answers the oldest of them (a request it
    /// could not parse: nested too deep, a number that is no JSON number).
    var unanswered = Unanswered()
    var connectWaiters: [Int: CheckedContinuation<Result<Void, ShareBrokerError>, Never>] = [:]
    var nextWaiterID = 1
    /// The broker's message size limit on the current connection (its `hello` says it): a
    /// request over it fails here with `.invalidRequest`, as the broker would refuse it and then
    /// close the connection.
    var messageLimit: Int?
    var reconnectTask: Task<Void, Never>?
    /// Failed attempts of the current reconnection, and the wait before the next.
    var reconnectFailures = 0
    var reconnectDelay: Duration = .zero
    var lastBrokerNotice: String?
    var nextStreamID = 1
    var eventSink: (id: Int, continuation: StreamBuffer<AppEvent>)?
    /// The `app.subscribe` of `subscribe()` whose answer has not arrived yet, and the stream it
    /// is for: a takeover notice that comes before that answer concerns the subscription before
    /// it (the broker answers the new one after sending the notice), not the new stream.
    var subscribing: (requestID: Int, sinkID: Int)?
    /// The reason of such a notice (the stream before is taken over, should the new
    /// subscription fail).
    var takeoverWhileSubscribing: String?
    var watchers: [Int: Watcher] = [:]
    /// Per watched group, the version its watches are in step with: the last `defaults.watch`
    /// answer's, or a later change's. A reconnection whose renewed watch answers another one
    /// catches up (`catchUp`).
    var watchedVersions: [String: Int] = [:]
    /// Groups whose renewed watch found another version but whose catch-up failed (a refusal
    /// that may pass, tried again: `retryWatch`): the retry catches up whatever version it finds
    /// (a live change since, or the went-back case, has moved `watchedVersions` on meanwhile).
    var owedCatchUps: Set<String> = []
    var observers: [Int: AsyncStream<ConnectionEvent>.Continuation] = [:]
    /// How many of the streams' buffers are over `streamBufferLimit`: the transport's reader
    /// pauses while any is (and no call waits for its reply).
    nonisolated let flow = FlowControl()
    /// The size of the message being handled (what a stream's buffer counts for what it yields).
    var messageSize = 0
    /// The `data` of error answers to requests sent with `keepErrorData`, by request id, until
    /// their sender takes it.
    var errorData: [Int: JSONValue] = [:]

    /// The broker's answer to the last successful `hello` (nil while not connected).
    public private(set) var helloInfo: HelloInfo?

    /// Creates a client; nothing happens until `connect()`.
    ///
    /// - Parameters:
    ///   - socketPath: the broker's socket; nil for `$SHAREBROKER_SOCKET` or the default path.
    ///   - role: `.app`, `.extension` or `.tool`.
    ///   - bundleID: the app's or extension's bundle ID (nil: `$SHAREBROKER_BUNDLE_ID`).
    ///   - token: the manifest's token, when it sets one.
    ///   - reconnect: re-establish the connection (and the subscriptions) when it drops.
    ///   - reconnectPolicy: backoff and attempt limit for reconnection.
    ///   - requestTimeout: fail calls with `.timeout` when no answer comes in this time (counted
    ///     from the call, so a wait for a reconnection is part of it).
    ///   - streamBufferLimit: bytes of messages a stream holds for a consumer that does not read
    ///     it before the client stops reading the connection (1 MiB; at least 1).
    ///   - connectTimeout: the longest wait for the socket's connect, and then for the answer to
    ///     `hello` (10 s).
    public init(
        socketPath: String? = nil, role: Role, bundleID: String? = nil, token: String? = nil, reconnect: Bool = false,
        reconnectPolicy: ReconnectPolicy = ReconnectPolicy(), requestTimeout: Duration? = nil,
        streamBufferLimit: Int = 1 << 20, connectTimeout: Duration = .seconds(10)
    ) {
        self.connectTimeout = connectTimeout > .zero ? connectTimeout : .milliseconds(1)
        self.streamBufferLimit = max(1, streamBufferLimit)
        self.socketPath = socketPath ?? DefaultPaths.socket()
        self.role = role
        self.bundleID = bundleID ?? (role == .tool ? nil : ProcessInfoLite.env("SHAREBROKER_BUNDLE_ID"))
        self.token = token
        self.reconnects = reconnect
        self.reconnectPolicy = reconnectPolicy
        self.requestTimeout = requestTimeout
    }

    deinit {
        transport?.close()
        reconnectTask?.cancel()
        // A client dropped without close(): its streams end here (without error), as close() ends
        // them, so a task still iterating one does not wait forever (and leak).
        eventSink?.continuation.finish()
        for w in watchers.values { w.continuation.finish() }
        for o in observers.values { o.finish() }
    }

    /// True while the client is connected and has said `hello`.
    public var isConnected: Bool { state == .connected }

    /// What the streams hold that their consumers have not taken yet: messages and their bytes
    /// (as received), over every open stream (for tests and diagnostics).
    var streamBacklog: (count: Int, bytes: Int) {
        var out = (count: 0, bytes: 0)
        for b in [eventSink?.continuation.buffered].compactMap({ $0 }) + watchers.values.map(\.continuation.buffered) {
            out.count += b.count
            out.bytes += b.bytes
        }
        return out
    }

    /// Whether the current connection's reader is waiting for the streams' consumers (for tests).
    var isReadingPaused: Bool { transport?.isPaused ?? false }

    // MARK: Connecting

    /// Connects and says `hello`; returns the broker's answer. Throws `.unreachable` when nothing
    /// answers on the socket (or the connect does not complete within `connectTimeout`: the
    /// broker's listen queue stays full), `.timeout(method: "hello")` when `hello` is not answered
    /// within `connectTimeout`, or the broker's error for `hello` (`.unauthorized` for an unknown
    /// bundle ID or a wrong token, `.invalidParams` when the role needs a bundle ID). Calling it
    /// while connected returns the current session.
    @discardableResult
    public func connect() async throws(ShareBrokerError) -> HelloInfo {
        switch state {
        case .connected:
            if let helloInfo { return helloInfo }
        case .closed:
            throw .closed
        case .connecting, .reconnecting:
            try await waitForConnection(method: "hello", deadline: callDeadline())
            if let helloInfo { return helloInfo }
            throw .notConnected
        case .idle:
            break
        }
        state = .connecting
        do throws(ShareBrokerError) {
            let info = try await establish()
            guard state == .connecting, transport != nil else { throw .connectionLost(reason: "the connection dropped right after hello") }
            state = .connected
            helloInfo = info
            resumeWaiters(.success(()))
            emit(.connected(info))
            return info
        } catch {
            if state == .closed { throw .closed }
            state = .idle
            resumeWaiters(.failure(error))
            throw error
        }
    }

    /// Closes the connection for good: calls in flight fail with `.closed`, event and defaults
    /// streams finish (without error), reconnection stops. The client cannot be reused.
    public func close() {
        guard state != .closed else { return }
        state = .closed
        reconnectTask?.cancel()
        reconnectTask = nil
        transport?.close()
        transport = nil
        helloInfo = nil
        failPending(.closed, generation: nil)
        resumeWaiters(.failure(.closed))
        finishStreams(throwing: nil)
        emit(.closed)
        for o in observers.values { o.finish() }
        observers.removeAll()
    }

    /// Changes of the connection (connected, disconnected, reconnected, gave up, closed), from
    /// now on. Useful to show a "reconnecting…" state or to re-read state after a reconnection.
    public func connectionEvents() -> AsyncStream<ConnectionEvent> {
        let (stream, continuation) = AsyncStream<ConnectionEvent>.makeStream(bufferingPolicy: .unbounded)
        if state == .closed {
            continuation.finish()
            return stream
        }
        let id = nextStreamID
        nextStreamID += 1
        observers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            Task { await self.dropObserver(id) }
        }
        return stream
    }

    // MARK: Calls

    /// Sends any method with any params and returns its result: the escape hatch for methods
    /// without a typed wrapper. (Use `subscribe()` and `defaultsWatch` rather than calling
    /// `app.subscribe` / `defaults.watch` here: their notifications go to those streams only.)
    /// Throws the broker's error mapped to its case (`.methodNotFound` for a method the broker
    /// does not have, `.rpc` for a code without a case of its own).
    @discardableResult
    public func call(_ method: String, _ params: JSONValue? = nil) async throws(ShareBrokerError) -> JSONValue {
        try await callOnLiveConnection(method, params, deadline: callDeadline()).result.get()
    }

    /// Sends a request on the live connection (waiting while reconnecting) and waits for its
    /// answer. With `reconnects`, a request found unsendable as it was sent (the connection ended
    /// after `connectedTransport` looked: its reader's end is on its way) was never sent: it waits
    /// for the reconnection and is sent there, rather than failing with `.connectionLost`, which
    /// says the call may have been done.
    func callOnLiveConnection(
        _ method: String, _ params: JSONValue?, deadline: ContinuousClock.Instant?, keepErrorData: Bool = false
    ) async throws(ShareBrokerError) -> (result: Result<JSONValue, ShareBrokerError>, errorData: JSONValue?) {
        while true {
            let t = try await connectedTransport(method: method, deadline: deadline)
            let r = await exchange(method, params, on: t, deadline: deadline, keepErrorData: keepErrorData)
            if r.unsent && reconnects && t.isEnded { continue }
            return (r.result, r.errorData)
        }
    }

    /// Acks events (`app.ack`, role app); returns how many were removed. Ids the app does not hold
    /// (already acked, unknown) count 0 and are not an error, so acking twice is harmless.
    /// Throws `.unauthorized` when the session's role is not app.
    @discardableResult
    public func ack(_ ids: [String]) async throws(ShareBrokerError) -> Int {
        let r = try await call("app.ack", ["ids": .array(ids.map { .string($0) })])
        return try ResultReader(r, "app.ack").int("acked")
    }

    // MARK: Streams

    /// Subscribes the app (`app.subscribe`, role app) and returns its events: first every pending
    /// one (oldest first), then new ones as they are opened. The stream ends when the client is
    /// closed, or with an error when the connection is lost and not re-established. A stream that
    /// is not read holds at most about four times `streamBufferLimit` bytes (see "Flow control"
    /// in the type's documentation).
    ///
    /// With `reconnect: true` the subscription is renewed after a reconnection; events that were
    /// yielded but not acked are then yielded again with the same ids (at-least-once delivery),
    /// so handle and ack idempotently (a renewal the broker refuses with `-32005` because its
    /// event queues cannot be opened yet is tried again, the stream staying open). One
    /// subscription per client: subscribing again ends the
    /// previous stream. Ending iteration (or cancelling the task) unsubscribes (`app.unsubscribe`):
    /// the connection stays open and the app counts as having no subscriber, so new events wait
    /// for the next one (`url.open` answers `queued: true`; an app with a `launch` command is
    /// launched for them as when its subscriber goes away). Events yielded but not acked stay
    /// pending and come again on the next `subscribe()`. A `subscribe()` that ends with `.timeout`
    /// or `.cancelled` once its request went out unsubscribes too (the broker may have taken it).
    ///
    /// One subscriber per app: a `subscribe()` of the same app on another connection (a second
    /// instance of the app) takes over; this stream then ends with `.subscriptionEnded(reason:)`
    /// (the client stays connected; it is not renewed after a reconnection).
    ///
    /// Throws `.unauthorized` when the session's role is not app.
    public func subscribe() async throws(ShareBrokerError) -> AsyncThrowingStream<AppEvent, any Error> {
        let deadline = callDeadline()
        let t = try await connectedTransport(method: "app.subscribe", deadline: deadline)
        let continuation = StreamBuffer<AppEvent>(limit: streamBufferLimit, flow: flow)
        let stream = continuation.makeStream()
        let id = nextStreamID
        nextStreamID += 1
        let previous = eventSink
        eventSink = (id, continuation)
        continuation.onTermination = { [weak self] in
            guard let self else { return }
            Task { await self.dropEventSink(id) }
        }
        continuation.onDrained = { [weak self] in
            guard let self else { return }
            Task { await self.recoverEvents(id) }
        }
        let requestID = nextRequestID
        nextRequestID += 1
        subscribing = (requestID, id)
        takeoverWhileSubscribing = nil
        let result: Result<JSONValue, ShareBrokerError>
        do throws(ShareBrokerError) {
            result = .success(try await send("app.subscribe", Self.subscribeParams, on: t, deadline: deadline, requestID: requestID))
        } catch {
            result = .failure(error)
        }
        let takenOver = subscribing == nil || subscribing?.sinkID == id ? takeoverWhileSubscribing : nil
        if subscribing?.sinkID == id { subscribing = nil }
        if takenOver != nil { takeoverWhileSubscribing = nil }
        if case .failure(let error) = result {
            if eventSink?.id == id {
                if let takenOver {
                    // (The stream before was taken over meanwhile: it ends as it would have.)
                    eventSink = nil
                    previous?.continuation.finish(throwing: ShareBrokerError.subscriptionEnded(reason: takenOver))
                } else {
                    eventSink = previous
                }
            }
            continuation.finish()
            if eventSink == nil, error == .cancelled || error == .timeout(method: "app.subscribe"), transport === t {
                // The request went out and the broker may have taken it: with no stream for its
                // events, the subscription is given up (else the broker sends them here, where
                // they are dropped, and counts the app as subscribed).
                unsubscribe(on: t)
            }
            throw error
        }
        previous?.continuation.finish()
        return stream
    }

    /// Watches a group's defaults (`defaults.watch`) and returns its changes, after each is
    /// durable, in version order; only for `keys` when given (nil: every key). The sequence's
    /// `version` is the group's when the watch began: every later change comes. The stream ends
    /// with `.unauthorized` when a manifest reload takes the group from this bundle. Several watches
    /// may be open at once (the broker is asked for the union of their keys; each stream gets
    /// its own).
    ///
    /// Renewed after a reconnection. The broker does not replay the changes it took while this
    /// client was away; when the renewed watch finds the group at another version, the client
    /// reads the group (`defaults.list`) and catches up: the stream gets the current value of
    /// each watched key (`caughtUp: true`, at the group's version then), and a removal for each
    /// watched key that is gone (a watch of named keys: each of them; a watch of every key: those
    /// it had been given, or that a `defaultsList` of the group showed since it began). A
    /// catch-up may repeat a value the stream had; a key given a newer change meanwhile is skipped.
    /// A stream that is not read is bounded as the events' is (see "Flow control" in the type's
    /// documentation): changes it dropped past its hard limit are caught up the same way once
    /// its consumer has taken the rest.
    ///
    /// To start from the current values without missing a change (a widget): watch first, then
    /// read them with `defaultsList`; skip the changes whose `version` is at most the list's
    /// `version` (they are already in it).
    ///
    /// Throws `.invalidParams` for an empty `keys` array, without asking the broker (pass nil to
    /// watch every key), and `.unauthorized` when the group is not in the bundle's `appGroups`
    /// (or the session is a tool's).
    public func defaultsWatch(group: String, keys: [String]? = nil) async throws(ShareBrokerError) -> DefaultsWatch {
        if let keys, keys.isEmpty {
            throw .invalidParams(message: "Invalid params: 'keys' must not be empty; pass nil to watch every key")
        }
        let deadline = callDeadline()
        let t = try await connectedTransport(method: "defaults.watch", deadline: deadline)
        let continuation = StreamBuffer<DefaultsChange>(limit: streamBufferLimit, flow: flow)
        let stream = continuation.makeStream()
        let id = nextStreamID
        nextStreamID += 1
        watchers[id] = Watcher(group: group, keys: keys.map { Set($0.map(ExactKey.init)) }, continuation: continuation)
        continuation.onTermination = { [weak self] in
            guard let self else { return }
            Task { await self.dropWatcher(id) }
        }
        continuation.onDrained = { [weak self] in
            guard let self else { return }
            Task { await self.recoverWatcher(id, delay: .seconds(1)) }
        }
        let answer: JSONValue
        do throws(ShareBrokerError) {
            answer = try await send("defaults.watch", watchParams(group), on: t, deadline: deadline)
        } catch {
            watchers[id] = nil
            continuation.finish()
            throw error
        }
        let version = answer["version"]?.intValue ?? -1
        watchedVersions[group] = max(watchedVersions[group] ?? version, version)
        return DefaultsWatch(version: version, keys: keys, stream: stream)
    }

    // MARK: Internals

    /// `defaults.watch` params for a group: the union of its watchers' keys (none: all keys).
    func watchParams(_ group: String) -> JSONValue {
        var o: JSONObject = ["group": .string(group)]
        var union = Set<ExactKey>()
        for w in watchers.values where w.group == group {
            guard let keys = w.keys else { return .object(o) }
            union.formUnion(keys)
        }
        if !union.isEmpty { o["keys"] = .array(union.sorted().map { .string($0.text) }) }
        return .object(o)
    }

    /// The app's event stream `id` ended (its consumer stopped iterating, or its task was
    /// cancelled): the broker is told (`app.unsubscribe`, a notification: nothing waits for its
    /// answer), so that new events wait for the app's next subscriber instead of being sent here
    /// and dropped. Not sent when the stream ended for another reason (the client closed, the
    /// connection lost, another subscriber took over: `eventSink` is already gone or replaced).
    /// `app.subscribe`'s params: this client asks to be told of a takeover (`app.subscriptionEnded`).
    static let subscribeParams: JSONValue = ["takeoverNotice": true]

    func dropEventSink(_ id: Int) {
        guard eventSink?.id == id else { return }
        eventSink = nil
        // (Also while reconnecting: the renewal of this stream's subscription may be in flight.)
        guard state == .connected || state == .reconnecting, let t = transport else { return }
        unsubscribe(on: t)
    }

    /// Sends `app.unsubscribe` (a notification) on `t`.
    func unsubscribe(on t: SocketTransport) {
        var frame: [UInt8] = []
        RPCCodec.writeRequest(id: nil, method: "app.unsubscribe", params: .object([:]), to: &frame)
        frame.append(0x0A)
        try? t.send(frame)  // (a connection that fails here is noticed by its reader)
    }

    /// A `defaultsList` of `group` showed these keys: each watch of every key there counts them
    /// as known to be there (the widget's "watch, then list"), so that a catch-up after a
    /// reconnection reports their removal too. Keys it was given a change of are left as they are.
    func noteListed(group: String, keys: [ExactKey]) {
        for (id, w) in watchers where w.group == group && w.keys == nil {
            for key in keys where w.given[key] == nil { watchers[id]?.given[key] = (-1, false, false) }
        }
    }

    func dropWatcher(_ id: Int) {
        guard let w = watchers.removeValue(forKey: id) else { return }
        if !watchers.values.contains(where: { $0.group == w.group }) {
            watchedVersions[w.group] = nil
            owedCatchUps.remove(w.group)
        }
    }

    func dropObserver(_ id: Int) { observers[id] = nil }

    func emit(_ e: ConnectionEvent) {
        for o in observers.values { o.yield(e) }
    }

    func resumeWaiters(_ r: Result<Void, ShareBrokerError>) {
        let waiters = connectWaiters
        connectWaiters.removeAll()
        for w in waiters.values { w.resume(returning: r) }
    }

    func failPending(_ error: ShareBrokerError, generation gen: Int?) {
        for (id, p) in pending where gen == nil || p.generation == gen {
            pending[id] = nil
            p.continuation.resume(returning: .failure(error))
        }
    }

    /// Ends every stream, with `error` (nil: normally).
    func finishStreams(throwing error: ShareBrokerError?) {
        if let sink = eventSink {
            eventSink = nil
            sink.continuation.finish(throwing: error)
        }
        let ws = watchers
        watchers.removeAll()
        for w in ws.values { w.continuation.finish(throwing: error) }
    }

    /// When a call made now times out (nil: never).
    func callDeadline() -> ContinuousClock.Instant? {
        requestTimeout.map { ContinuousClock.now + $0 }
    }

    /// Waits until the client is connected (or gives up, or is closed); ends with `.timeout` at
    /// the deadline and with `.cancelled` when the calling task is cancelled.
    func waitForConnection(method: String, deadline: ContinuousClock.Instant?) async throws(ShareBrokerError) {
        if Task.isCancelled { throw .cancelled }
        let id = nextWaiterID
        nextWaiterID += 1
        var timer: Task<Void, Never>?
        let r = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<Void, ShareBrokerError>, Never>) in
                connectWaiters[id] = c
                if let deadline {
                    timer = ShareBrokerClient.timer(at: deadline) { [weak self] in await self?.finishWaiter(id, with: .timeout(method: method)) }
                }
            }
        } onCancel: {
            Task { [weak self] in await self?.finishWaiter(id, with: .cancelled) }
        }
        timer?.cancel()
        try r.get()
    }

    /// A task that runs `fire` at `deadline` unless cancelled before (it then ends at once: the
    /// callers cancel it as soon as their answer is in, so no sleeping task outlives its call).
    static func timer(at deadline: ContinuousClock.Instant, _ fire: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        Task {
            do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
            await fire()
        }
    }

    func finishWaiter(_ id: Int, with error: ShareBrokerError) {
        connectWaiters.removeValue(forKey: id)?.resume(returning: .failure(error))
    }

    /// The live transport, waiting while (re)connecting.
    func connectedTransport(method: String, deadline: ContinuousClock.Instant?) async throws(ShareBrokerError) -> SocketTransport {
        while true {
            switch state {
            case .connected:
                guard let transport else { throw .connectionLost(reason: "the connection is closed") }
                if reconnects && transport.isEnded {
                    // The connection ended and its reader's end is on its way here: nothing can be
                    // sent on it, so the call waits for the reconnection that end starts, as a
                    // call made while reconnecting does (rather than fail with `.connectionLost`,
                    // which says that the call may have been done).
                    try await waitForConnection(method: method, deadline: deadline)
                    continue
                }
                return transport
            case .idle: throw .notConnected
            case .closed: throw .closed
            case .connecting, .reconnecting: try await waitForConnection(method: method, deadline: deadline)
            }
        }
    }

    /// Opens a transport (connecting off the actor, within `connectTimeout`), starts its message
    /// pump and says hello on it (within `connectTimeout`, or the call's deadline when sooner).
    func establish() async throws(ShareBrokerError) -> HelloInfo {
        let t = try await SocketTransport.open(path: socketPath, flow: flow, timeout: connectTimeout)
        if state == .closed {  // (closed while connecting: the reader closes the descriptor)
            t.start()
            t.close()
            throw .closed
        }
        generation += 1
        let gen = generation
        transport = t
        lastBrokerNotice = nil
        messageLimit = nil
        unanswered = Unanswered()
        t.start()
        let inbound = t.inbound
        Task { [weak self] in
            for await item in inbound {
                guard let self else {
                    t.close()
                    return
                }
                await self.receive(item, generation: gen)
                if case .message(_, let size) = item { t.handled(size) }
            }
        }
        var p: JSONObject = ["role": .string(role.rawValue)]
        if let bundleID { p["bundleID"] = .string(bundleID) }
        if let token { p["token"] = .string(token) }
        do throws(ShareBrokerError) {
            let helloDeadline = min(callDeadline() ?? .now + connectTimeout, .now + connectTimeout)
            let info = try HelloInfo(json: try await send("hello", .object(p), on: t, deadline: helloDeadline))
            if generation == gen { messageLimit = info.maxMessage }
            return info
        } catch {
            t.close()
            if generation == gen { transport = nil }
            throw error
        }
    }

    /// Sends one request on `t` and waits for its answer, until `deadline` at most.
    /// (`requestID`: one the caller took from `nextRequestID`, to know its answer when it comes.)
    func send(
        _ method: String, _ params: JSONValue?, on t: SocketTransport, deadline: ContinuousClock.Instant?, requestID: Int? = nil
    ) async throws(ShareBrokerError) -> JSONValue {
        try await exchange(method, params, on: t, deadline: deadline, requestID: requestID).result.get()
    }

    /// `send`, with the `data` of the broker's error answer when there is one (the error's case
    /// drops it), and without throwing.
    func exchange(
        _ method: String, _ params: JSONValue?, on t: SocketTransport, deadline: ContinuousClock.Instant?, requestID: Int? = nil,
        keepErrorData: Bool = false
    ) async -> (result: Result<JSONValue, ShareBrokerError>, errorData: JSONValue?, unsent: Bool) {
        if Task.isCancelled { return (.failure(.cancelled), nil, true) }
        let id: Int
        if let requestID {
            id = requestID
        } else {
            id = nextRequestID
            nextRequestID += 1
        }
        var frame: [UInt8] = []
        RPCCodec.writeRequest(id: .number(String(id)), method: method, params: params, to: &frame)
        if let limit = messageLimit, frame.count > limit {
            // The broker would answer -32600 without an id and close the connection, failing
            // every other call in flight: refuse it here instead.
            return (.failure(.invalidRequest(
                message: "Invalid Request: the '\(method)' request is \(frame.count) bytes, over the broker's limit of \(limit) bytes; it was not sent")), nil, true)
        }
        frame.append(0x0A)
        let gen = generation
        var timer: Task<Void, Never>?
        var unsent = false
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<JSONValue, ShareBrokerError>, Never>) in
                pending[id] = Pending(method: method, generation: gen, continuation: c, keepsErrorData: keepErrorData)
                do throws(ShareBrokerError) {
                    try t.send(frame)
                } catch {
                    pending[id] = nil
                    unsent = true
                    c.resume(returning: .failure(error))
                    return
                }
                if t === transport {
                    unanswered.append(id)
                    t.setAwaiting(unanswered.count)
                }
                if let deadline {
                    timer = ShareBrokerClient.timer(at: deadline) { [weak self] in await self?.finishCall(id, with: .timeout(method: method)) }
                }
            }
        } onCancel: {
            Task { [weak self] in await self?.finishCall(id, with: .cancelled) }
        }
        timer?.cancel()
        return (result, keepErrorData ? errorData.removeValue(forKey: id) : nil, unsent)
    }

    func finishCall(_ id: Int, with error: ShareBrokerError) {
        pending.removeValue(forKey: id)?.continuation.resume(returning: .failure(error))
    }

    /// One item from a transport's reader, in arrival order.
    func receive(_ item: SocketTransport.Inbound, generation gen: Int) {
        switch item {
        case .message(let value, let size):
            messageSize = size
            handle(value, current: gen == generation)
            if gen == generation { transport?.setAwaiting(unanswered.count) }
        case .closed(let reason):
            var why = reason
            if gen == generation, let notice = lastBrokerNotice { why += " (the broker said: \(notice))" }
            failPending(.connectionLost(reason: why), generation: gen)
            guard gen == generation else { return }
            transportClosed(.connectionLost(reason: why))
        }
    }

    func handle(_ value: JSONValue, current: Bool) {
        switch RPCIncoming.decode(value) {
        case .response(let rid, let result)?:
            guard case .number(let text) = rid, let id = Int(text) else {
                guard case .failure(let e) = result else { return }
                if e.data?["closing"] == true || !current {
                    lastBrokerNotice = e.description  // (why the broker closes the connection)
                    return
                }
                // An error answering the oldest request still unanswered, which the broker could
                // not tie to its id (it could not parse it): that request fails with it.
                guard let oldest = unanswered.removeOldest() else {
                    lastBrokerNotice = e.description
                    return
                }
                if subscribing?.requestID == oldest { subscribing = nil }
                pending.removeValue(forKey: oldest)?.continuation.resume(returning: .failure(ShareBrokerError(e)))
                return
            }
            if current { unanswered.remove(id) }
            if subscribing?.requestID == id { subscribing = nil }  // (a notice from now on is the new stream's)
            guard let p = pending.removeValue(forKey: id) else { return }
            if p.keepsErrorData, case .failure(let e) = result, let data = e.data { errorData[id] = data }
            if current, p.method == "app.subscribe", case .success = result {
                // The broker sends every unacked event again after this reply, from the oldest:
                // those the stream dropped at its hard limit come again.
                eventSink?.continuation.endOverflow()
            }
            p.continuation.resume(returning: result.mapError { ShareBrokerError($0) })
        case .notification(let method, let params)?:
            guard current, let params else { return }
            switch method {
            case "app.event":
                if let sink = eventSink, let event = AppEvent(json: params, client: self) {
                    sink.continuation.yield(event, size: messageSize)
                }
            case "app.subscriptionEnded":
                // Another connection of the app subscribed (a second instance): this stream ends.
                guard let sink = eventSink else { return }
                let reason = params["reason"]?.stringValue ?? "another connection of the app subscribed"
                if let s = subscribing, s.sinkID == sink.id {
                    // Sent before the answer to the stream's app.subscribe: it concerns the
                    // subscription before, which that app.subscribe takes back.
                    takeoverWhileSubscribing = reason
                    return
                }
                eventSink = nil
                sink.continuation.finish(throwing: ShareBrokerError.subscriptionEnded(reason: reason))
            case "defaults.changed":
                guard let change = DefaultsChange(json: params) else { return }
                let key = ExactKey(change.key)
                for (id, w) in watchers where w.group == change.group && (w.keys?.contains(key) ?? true) {
                    // (Already in a caught-up value: giving it now would take the key back.)
                    if let g = w.given[key], g.caughtUp, g.version >= change.version { continue }
                    // (A change dropped at the stream's hard limit is not given: the catch-up
                    // that follows gives its key.)
                    guard w.continuation.yield(change, size: messageSize) else { continue }
                    watchers[id]?.given[key] = (change.version, change.removed, false)
                }
                if let v = watchedVersions[change.group], change.version > v { watchedVersions[change.group] = change.version }
            case "defaults.watchEnded":
                // A manifest reload took the group from this app or extension: its streams end.
                guard let group = params["group"]?.stringValue else { return }
                let reason = params["reason"]?.stringValue ?? "the group is no longer this bundle's"
                for (id, w) in watchers where w.group == group {
                    watchers[id] = nil
                    w.continuation.finish(throwing: ShareBrokerError.unauthorized(message: "Unauthorized: \(reason); the watch ended"))
                }
            default:
                break
            }
        case nil:
            break
        }
    }

    /// The current transport ended.
    func transportClosed(_ error: ShareBrokerError) {
        transport = nil
        guard state == .connected else { return }  // (re)connecting code sees its own failures
        helloInfo = nil
        emit(.disconnected(error))
        if reconnects {
            state = .reconnecting
            startReconnecting()
        } else {
            state = .idle
            finishStreams(throwing: error)
        }
    }

    /// Retries until connected again (redoing subscribe and watches), closed, or out of attempts.
    /// The task holds the client only during an attempt, not while it waits for the next one: a
    /// client released meanwhile (without `close()`) ends as one released while connected (its
    /// `deinit` ends the streams and cancels this task), instead of being kept alive by its own
    /// retries and coming back, subscription and all, when the broker does.
    func startReconnecting() {
        reconnectFailures = 0
        reconnectDelay = reconnectPolicy.initialDelay
        reconnectTask = Task { [weak self] in
            while !Task.isCancelled {
                guard let pause = await self?.reconnectAttempt() else { return }
                do { try await Task.sleep(for: pause) } catch { return }
            }
        }
    }

    /// One attempt to connect again; the wait before the next, or nil when there is none
    /// (connected, closed, gave up).
    func reconnectAttempt() async -> Duration? {
        guard state == .reconnecting, !Task.isCancelled else { return nil }
        let lastError: ShareBrokerError
        do throws(ShareBrokerError) {
            let info = try await establish()
            let gen = generation
            guard let t = transport else { throw .connectionLost(reason: "the connection dropped after hello") }
            try await restoreStreams(on: t)
            guard state == .reconnecting, generation == gen, transport != nil else {
                throw .connectionLost(reason: "the connection dropped while re-subscribing")
            }
            state = .connected
            helloInfo = info
            reconnectTask = nil
            resumeWaiters(.success(()))
            emit(.reconnected(info))
            return nil
        } catch {
            lastError = error
            if state != .reconnecting { return nil }
            var retryable = error.isConnectionError
            if case .timeout = error { retryable = true }
            if !retryable {
                // The broker refused hello (manifest changed, token wrong): retrying will not help.
                giveUp(error)
                return nil
            }
        }
        reconnectFailures += 1
        if let max = reconnectPolicy.maxAttempts, reconnectFailures >= max {
            giveUp(lastError)
            return nil
        }
        let pause = reconnectDelay
        reconnectDelay = min(reconnectDelay * 2, reconnectPolicy.maxDelay)
        return pause
    }

    func giveUp(_ error: ShareBrokerError) {
        guard state == .reconnecting else { return }
        state = .idle
        reconnectTask = nil
        helloInfo = nil
        transport?.close()
        transport = nil
        finishStreams(throwing: error)
        resumeWaiters(.failure(error))
        emit(.gaveUp(error))
    }

    /// Tries the renewal of the subscription `id` again on `t` after `delay` (its app.subscribe
    /// was refused with -32005 while the broker's event queues could not be opened), doubling the
    /// wait up to 30 s while it is refused so; a connection that drops meanwhile renews it itself,
    /// another refusal ends the stream.
    func renewSubscriptionLater(_ id: Int, on t: SocketTransport, after delay: Duration) {
        Task { [weak self] in
            try? await Task.sleep(for: delay)
            await self?.renewSubscription(id, on: t, delay: delay)
        }
    }

    func renewSubscription(_ id: Int, on t: SocketTransport, delay: Duration) async {
        guard let sink = eventSink, sink.id == id, transport === t, state == .connected || state == .reconnecting else { return }
        if state == .reconnecting {  // (still renewing the watches: not before it is connected)
            renewSubscriptionLater(id, on: t, after: .milliseconds(100))
            return
        }
        do throws(ShareBrokerError) {
            _ = try await send("app.subscribe", Self.subscribeParams, on: t, deadline: callDeadline())
        } catch {
            if error.isConnectionError { return }  // (the reconnection renews it)
            guard eventSink?.id == id else { return }
            if error.mayPass {
                renewSubscriptionLater(id, on: t, after: min(delay * 2, .seconds(30)))
                return
            }
            eventSink = nil
            sink.continuation.finish(throwing: error)
        }
    }

    /// The app's event stream `id` dropped events at its hard limit (a call's reply was read past
    /// its limit while its consumer did not read) and its consumer has now taken everything
    /// before them: `app.subscribe` again, after whose reply the broker sends every unacked event
    /// again, from the oldest (the stream takes events again from that reply on). While
    /// reconnecting, the renewal does it.
    func recoverEvents(_ id: Int) async {
        guard let sink = eventSink, sink.id == id, state == .connected, let t = transport else { return }
        await renewSubscription(id, on: t, delay: .seconds(1))
    }

    /// The defaults stream `id` dropped changes at its hard limit and its consumer has now taken
    /// everything before them: it is caught up (`defaults.list`, as after a reconnection), taking
    /// live changes again from now on. Tried again later while the broker refuses for a reason
    /// that may pass; while reconnecting, tried again once connected.
    func recoverWatcher(_ id: Int, delay: Duration) async {
        guard let w = watchers[id], w.continuation.isOverflowed else { return }
        guard state == .connected, let t = transport else {
            if state == .reconnecting || state == .connecting {
                Task { [weak self] in
                    try? await Task.sleep(for: .milliseconds(100))
                    await self?.recoverWatcher(id, delay: delay)
                }
            }
            return
        }
        w.continuation.endOverflow()
        do throws(ShareBrokerError) { try await catchUp(w.group, on: t, only: id) } catch {
            guard let w = watchers[id] else { return }
            if error.isConnectionError || error.mayPass {
                // (still owed: marked again, and tried again)
                w.continuation.markOverflowed()
                Task { [weak self] in
                    try? await Task.sleep(for: delay)
                    await self?.recoverWatcher(id, delay: min(delay * 2, .seconds(30)))
                }
                return
            }
            watchers[id] = nil
            w.continuation.finish(throwing: error)
        }
    }

    /// Renews the subscription and the watches on a new connection. Connection failures are
    /// thrown (the caller retries); a refusal ends only the stream it concerns.
    func restoreStreams(on t: SocketTransport) async throws(ShareBrokerError) {
        if let sink = eventSink {
            do throws(ShareBrokerError) {
                _ = try await send("app.subscribe", Self.subscribeParams, on: t, deadline: callDeadline())
            } catch {
                if error.isConnectionError { throw error }
                if error.mayPass {
                    // The broker's event queues cannot be opened yet (a transient fault it tries
                    // again itself), it is busy or slow (-32007, no answer in time: it may have
                    // taken the subscription, and send events here): the stream stays, and the
                    // subscription is tried again.
                    renewSubscriptionLater(sink.id, on: t, after: .seconds(1))
                } else {
                    if eventSink?.id == sink.id { eventSink = nil }
                    sink.continuation.finish(throwing: error)
                }
            }
        }
        var groups: [String] = []
        for w in watchers.values where !groups.contains(w.group) { groups.append(w.group) }
        for group in groups.sorted() {
            do throws(ShareBrokerError) { try await renewWatch(group, on: t) } catch {
                if error.isConnectionError { throw error }
                if error.mayPass {
                    // (the group's store cannot be opened now, the broker is slow: the streams
                    // stay, and the watch is tried again; its catch-up covers the wait)
                    renewWatchLater(group, on: t, after: .seconds(1))
                    continue
                }
                for (id, w) in watchers where w.group == group {
                    watchers[id] = nil
                    w.continuation.finish(throwing: error)
                }
                watchedVersions[group] = nil
            }
        }
    }

    /// Tries the renewal of `group`'s watch again after `delay` (doubling up to 30 s while it
    /// fails for a reason that may pass), while `t` is the connection; a connection that drops
    /// meanwhile renews it itself.
    func renewWatchLater(_ group: String, on t: SocketTransport, after delay: Duration) {
        Task { [weak self] in
            try? await Task.sleep(for: delay)
            guard let self else { return }
            await self.retryWatch(group, on: t, delay: delay)
        }
    }

    func retryWatch(_ group: String, on t: SocketTransport, delay: Duration) async {
        guard transport === t, watchers.values.contains(where: { $0.group == group }) else { return }
        if state == .reconnecting {
            renewWatchLater(group, on: t, after: .milliseconds(100))
            return
        }
        guard state == .connected else { return }
        do throws(ShareBrokerError) { try await renewWatch(group, on: t) } catch {
            if error.isConnectionError { return }  // (the reconnection renews it)
            if error.mayPass {
                renewWatchLater(group, on: t, after: min(delay * 2, .seconds(30)))
                return
            }
            for (id, w) in watchers where w.group == group {
                watchers[id] = nil
                w.continuation.finish(throwing: error)
            }
            watchedVersions[group] = nil
        }
    }

    /// `defaults.watch` of `group` on a new connection, and the catch-up when its version moved.
    func renewWatch(_ group: String, on t: SocketTransport) async throws(ShareBrokerError) {
        // (The version before the reconnection: live changes on the new connection may raise
        // `watchedVersions` while the watch and the list are in flight.)
        let before = watchedVersions[group]
        let answer = try await send("defaults.watch", watchParams(group), on: t, deadline: callDeadline())
        let version = answer["version"]?.intValue ?? -1
        if let before, version < before {
            // The group went back (its state was replaced): the versions the streams were given
            // count in another series (kept: which keys they were given, and whether removed, so
            // that those now gone are reported removed).
            watchedVersions[group] = version
            for (id, w) in watchers where w.group == group {
                watchers[id]?.given = w.given.mapValues { (-1, $0.removed, false) }
            }
        }
        if before != version || owedCatchUps.contains(group) {
            owedCatchUps.insert(group)
            try await catchUp(group, on: t)
            owedCatchUps.remove(group)
        }
    }

    /// A renewed watch found `group` at another version than its watches had seen: changes
    /// were made while this client was away. Each watcher is given the current value of its
    /// keys (from `defaults.list`), and a removal for those gone (a watch of named keys: each;
    /// of every key: those it was given present), skipping a key given a change at least as new
    /// meanwhile (the list's answer may come after such a notification).
    func catchUp(_ group: String, on t: SocketTransport, only: Int? = nil) async throws(ShareBrokerError) {
        let answer = try await send("defaults.list", .object(["group": .string(group)]), on: t, deadline: callDeadline())
        guard case .object(let listed)? = answer["values"], let version = answer["version"]?.intValue else {
            throw .unexpectedResponse("defaults.list of \(group) answered without values and version: \(answer.compactText)")
        }
        var values: [ExactKey: JSONValue] = [:]
        for m in listed { values[ExactKey(m.key)] = m.value }
        for (id, w) in watchers where w.group == group && (only == nil || only == id) {
            var keys: [ExactKey]
            if let named = w.keys {
                keys = Array(named)
            } else {
                keys = Array(values.keys)
                for (k, g) in w.given where !g.removed && values[k] == nil { keys.append(k) }
            }
            keys.sort()
            for key in keys {
                guard let current = watchers[id] else { break }  // (its consumer stopped meanwhile)
                if let g = current.given[key], g.version >= version { continue }
                let value = values[key]
                if value == nil, let g = current.given[key], g.removed { continue }  // (known to be gone)
                var params: JSONObject = ["group": .string(group), "key": .string(key.text)]
                if let value { params["value"] = value } else { params["removed"] = true }
                params["version"] = .number(String(version))
                params["caughtUp"] = true
                guard let change = DefaultsChange(json: .object(params)) else { continue }
                guard w.continuation.yield(change, size: value.map { $0.bytes.count + key.text.utf8.count + 100 } ?? 100) else { break }
                watchers[id]?.given[key] = (version, value == nil, true)
            }
        }
        // (Not back below a live change's version; not for a group whose watchers all went.)
        if watchers.values.contains(where: { $0.group == group }) {
            watchedVersions[group] = max(watchedVersions[group] ?? version, version)
        }
    }
}

/// Request ids in the order they were sent, answered ones taken out: a queue whose answers
/// normally come in order (the one answered is the oldest: taken out in constant time).
struct Unanswered {
    private var ids: [Int] = []
    private var head = 0

    mutating func append(_ id: Int) { ids.append(id) }

    /// How many are left.
    var count: Int { ids.count - head }

    /// Takes out the oldest id; nil when none is left.
    mutating func removeOldest() -> Int? {
        guard head < ids.count else { return nil }
        let id = ids[head]
        head += 1
        compact()
        return id
    }

    /// Takes `id` out (a no-op when it is not there).
    mutating func remove(_ id: Int) {
        if head < ids.count && ids[head] == id {
            head += 1
        } else if let i = ids[head...].firstIndex(of: id) {
            ids.remove(at: i)
        }
        compact()
    }

    private mutating func compact() {
        if head == ids.count {
            ids.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64 && head * 2 > ids.count {
            ids.removeSubrange(0..<head)
            head = 0
        }
    }
}
