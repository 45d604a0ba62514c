// URL routing and durable event delivery: url.open / url.canOpen / url.explain, app.subscribe,
// app.ack, the delivery of events after each commit, and launching apps on demand.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import CShareSystem
import ShareProtocol
import ShareRouting
import ShareStore
import ShareSystem

/// Launch-on-demand bookkeeping for one app.
struct LaunchState {
    /// The child's pid while it runs (nil: not running).
    var pid: Int32?
    /// The launch is being started off the loop (`startLaunch`): not started again meanwhile.
    var starting = false
    /// Since when (monotonic ns), and whether that it takes long was logged.
    var startingSince: UInt64 = 0
    var startingWarned = false
    /// The start being made (the loop calls it off when a reload changes the launch).
    var ticket: LaunchTicket? = nil
    /// The running child was started with a launch a reload then changed: it was sent SIGTERM,
    /// and its end is no failure (the launch as it is now follows, if events wait).
    var superseded = false
    /// When it was started (monotonic ns).
    var startedAt: UInt64 = 0
    /// Consecutive launches that ended while events still waited (the command could not start,
    /// or the process exited without subscribing or before acking them); 0 again once the app has
    /// acked all its events, or a launched process ends with none waiting. Sets the backoff.
    var failures = 0
    /// When to try again (monotonic ns), if a retry is scheduled.
    var retryAt: UInt64? = nil
    /// Launches made.
    var launches = 0
    /// Whether the app subscribed since the running child was launched.
    var subscribed = false
    /// Whether the running (or last) child subscribed at all, even if it lost the subscription since.
    var everSubscribed = false
    /// When the running child, which did not subscribe in time, was sent SIGTERM (monotonic ns).
    var stopSentAt: UInt64? = nil
    /// Launched children stopped because they did not subscribe within the launch timeout.
    var timeouts = 0
}

/// The event queues when they could not be opened (an I/O error, a file in the way of
/// `STATE/queues`...): they are tried again, at the next request that needs them (the first at
/// once, then at most once a second) and on a timer with a backoff (1 s, 2 s, 4 s... up to a
/// minute), so waiting events get their apps launched without a request. A failure is logged
/// once per streak, not at each try.
struct StoreReopen {
    /// Failed opens (the one at start included); kept once they opened (`broker.status`).
    var failures = 0
    /// When the first failed (monotonic ns).
    var since: UInt64 = 0
    /// When they were tried last (monotonic ns).
    var lastAttempt: UInt64 = 0
    /// When the timer tries them next (monotonic ns; 0: not scheduled).
    var timerDue: UInt64 = 0
    /// A request has tried them (the first one tries at once, whenever the last try was).
    var requestTried = false
}

extension Broker {
    /// Methods of routing and delivery, added to the method table.
    static func eventMethods() -> [MethodSpec] {
        [
            MethodSpec("url.open", encoding: { b, c, p throws(RPCError) in try b.urlOpen(c, p) }),
            MethodSpec("url.canOpen") { b, _, p throws(RPCError) in try b.urlCanOpen(p) },
            MethodSpec("url.explain") { b, _, p throws(RPCError) in try b.urlExplain(p) },
            MethodSpec("app.subscribe", roles: [.app]) { b, c, p throws(RPCError) in try b.appSubscribe(c, p) },
            MethodSpec("app.ack", roles: [.app]) { b, c, p throws(RPCError) in try b.appAck(c, p) },
            MethodSpec("app.unsubscribe", roles: [.app]) { b, c, _ throws(RPCError) in try b.appUnsubscribe(c) },
        ]
    }

    /// Least time between two tries of the event queues that requests make (`requireStore`).
    static let storeRetrySpacing: UInt64 = 1_000_000_000

    /// The timer's wait after `failures` failed opens of the event queues: 1 s, doubling up to a minute.
    static func storeRetryBackoff(_ failures: Int) -> UInt64 {
        UInt64(min(60, 1 << min(max(failures - 1, 0), 6))) * 1_000_000_000
    }

    /// Opens the event queues (at start, and again while they could not be). When they cannot be
    /// opened the broker still runs: url.open, app.subscribe, app.ack and share.send {open} answer
    /// -32005 and they are tried again (`StoreReopen`). Opened late, what the start does for them
    /// is done then (`storeOpenedLate`).
    func openStore() {
        guard store == nil else { return }
        let now = Clock.monotonicNanos()
        storeReopen.lastAttempt = now
        let s: EventStore
        do {
            s = try EventStore(directory: config.stateDirectory + "/queues", segmentLimit: config.journalSegmentLimit, turn: turn)
        } catch {
            storeOpenError = error.message
            storeReopen.failures += 1
            storeReopen.timerDue = now + Broker.storeRetryBackoff(storeReopen.failures)
            nextTimerDue = min(nextTimerDue, storeReopen.timerDue)
            if storeReopen.failures == 1 {
                storeReopen.since = now
                log.log(
                    .error,
                    "cannot open the event queues: \(error.message); url.open, app.subscribe, app.ack and share.send {open} answer -32005 until they can be (tried again at the next request that needs them, at most once a second, and every 1 s to 1 min meanwhile)")
            } else {
                log.log(.debug, "the event queues still cannot be opened (\(storeReopen.failures) tries): \(error.message)")
            }
            return
        }
        store = s
        storeOpenError = nil
        storeReopen.timerDue = 0
        let r = s.recovery
        let late =
            storeReopen.failures == 0
            ? ""
            : " (opened after \(storeReopen.failures) failed \(storeReopen.failures == 1 ? "try" : "tries"), \((now - storeReopen.since) / 1_000_000) ms after the first)"
        log.log(
            .info,
            "event queues recovered: \(s.pendingCount) pending events from \(r.records) records in \(r.segments) segments"
                + (r.quarantined > 0 ? ", \(r.quarantined) damaged records quarantined" : "")
                + (r.truncatedBytes > 0 ? ", torn tail of \(r.truncatedBytes) bytes truncated" : "") + late)
        for note in r.notes { log.log(.warning, "recovery: \(note)") }
        if let inject = config.storeFaults { s.journal.faultInjector = inject }
        if let space = config.journalSpace { s.journal.setSpace(space) }
        if loopStarted { storeOpenedLate(s) }
    }

    /// The event queues opened while the loop runs (they could not be at start): what the start
    /// does after opening them is done now. Events that shares announced but that were never
    /// written are re-created (committed with this turn, delivered after it), and apps whose
    /// events wait are launched after the start-up grace (`--launch-grace`: running apps, whose
    /// app.subscribe was refused meanwhile, have that long to subscribe again), at the end of the
    /// turn at the earliest (an app whose app.subscribe opened them is not launched).
    func storeOpenedLate(_ s: EventStore) {
        restoreAnnouncedEvents()
        guard !stopping, s.pendingCount > 0 else { return }
        let grace = config.launchGraceAtStartSeconds
        let due = Clock.monotonicNanos() + (grace > 0 ? UInt64(min(grace, 86_400) * 1e9) : 0)
        startLaunchesDue = startLaunchesDue == 0 ? due : min(startLaunchesDue, due)
        nextTimerDue = min(nextTimerDue, startLaunchesDue)
    }

    /// Tries the event queues again for a request that needs them, unless a request tried them
    /// less than `storeRetrySpacing` ago (the first request tries at once).
    func reopenStoreForRequest() {
        guard store == nil, !stopping else { return }
        if storeReopen.requestTried && Clock.monotonicNanos() - storeReopen.lastAttempt < Broker.storeRetrySpacing { return }
        storeReopen.requestTried = true
        openStore()
    }

    /// The event queues, tried again when they could not be opened; -32005 when they still cannot
    /// (`outcome`: what that means for the request).
    func requireStore(_ outcome: String = "nothing was stored") throws(RPCError) -> EventStore {
        if let store { return store }
        reopenStoreForRequest()
        guard let store else {
            let now = Clock.monotonicNanos()
            let retry = storeReopen.lastAttempt + Broker.storeRetrySpacing
            let due = storeReopen.timerDue
            throw RPCError(
                .storageFailure,
                "Storage failure: the event queues cannot be opened: \(storeOpenError ?? "unknown error"); \(outcome) (tried again for a request \(retry > now ? (retry - now + 999_999) / 1_000_000 : 0) ms from now at the earliest, and by the broker on its own in \(due > now ? (due - now + 999_999_999) / 1_000_000_000 : 0) s)"
            )
        }
        return store
    }

    // MARK: url.*

    /// The error for a decision that routes nowhere; `parameter` names the param the URL came in,
    /// when the message would not say (`url.open`'s own messages name `fallback`).
    func decisionError(_ d: RouteDecision, parameter: String? = nil) -> RPCError {
        let message = d.errorMessage ?? "cannot route"
        if d.errorCode == ErrorCode.noHandler.rawValue { return RPCError(.noHandler, message) }
        return RPCError(.invalidParams, "Invalid params: " + (parameter.map { "'\($0)': " } ?? "") + message)
    }

    func urlOpen(_ conn: Connection, _ p: Params) throws(RPCError) -> MethodResult {
        let url = try p.string("url")
        let fallback = try p.optionalString("fallback")
        let decision = router.resolve(url, fallback: fallback)
        guard case .routed(let app, let via, let kind, let openedURL) = decision else { throw decisionError(decision) }
        let store = try requireStore()
        try checkEventQuota(store, app, url: openedURL, source: conn.bundleID)
        var members: [(key: String, value: JSONValue)] = []
        members.reserveCapacity(6)  // before the first append: one allocation
        members.append((key: "id", value: .null))  // the store writes the id in place (enqueue)
        members.append((key: "kind", value: .string(kind.rawValue)))
        switch kind {
        case .openURL:
            members.append((key: "url", value: .string(openedURL)))
        case .continueUserActivity:
            members.append((key: "activityType", value: "NSUserActivityTypeBrowsingWeb"))
            members.append((key: "webpageURL", value: .string(openedURL)))
        }
        if let source = conn.bundleID { members.append((key: "sourceApp", value: .string(source))) }
        members.append((key: "via", value: .string(via.rawValue)))
        let event: StoredEvent
        // Handed over, not copied: the store fills in the id without copying the members.
        do { event = try store.enqueue(app: app, fields: JSONObject(uniqueMembers: consume members)) } catch {
            throw RPCError(.storageFailure, "Storage failure: \(error.message); nothing was stored")
        }
        turnEvents.append(event)  // delivered once the commit is durable (finishCommit)
        let live = subscribers[app] != nil
        if !live { launchIfNeeded(app) }
        if log.enabled(.debug) {
            log.log(.debug, "url.open \(url) → \(app) via \(via.rawValue) as \(event.id) (\(live ? "delivering" : "queued"))", connection: conn.id)
        }
        var w = JSONObjectWriter(capacity: 256)
        w.string("app", app)
        w.string("via", via.rawValue)
        w.string("eventID", event.id)
        w.bool("delivered", live)
        w.bool("queued", !live)
        w.string("kind", kind.rawValue)
        return .encoded(w.finishInPlace())
    }

    func urlCanOpen(_ p: Params) throws(RPCError) -> JSONValue {
        // The decision url.open would take, without queuing anything. (`fallback` is an addition
        // to the contract's {url}; an invalid URL or fallback is -32602, as for url.open.)
        let decision = router.resolve(try p.string("url"), fallback: try p.optionalString("fallback"))
        guard let answer = CanOpenAnswer(decision) else { throw decisionError(decision) }
        return answer.json
    }

    func urlExplain(_ p: Params) throws(RPCError) -> JSONValue {
        let url = try p.string("url")
        let fallback = try p.optionalString("fallback")
        return router.explain(url, fallback: fallback).json
    }

    // MARK: app.*

    func appSubscribe(_ conn: Connection, _ p: Params) throws(RPCError) -> JSONValue {
        guard let app = conn.bundleID else { throw RPCError(.unauthorized, "Unauthorized: app.subscribe needs an app session") }
        let wantsNotice = try p.optionalBool("takeoverNotice") ?? false
        // (not `pending: 0` when they cannot be read: the app is not subscribed, and may try again)
        let store = try requireStore("not subscribed: the app's pending events cannot be read")
        if let old = subscribers[app], old !== conn {
            old.subscribedApp = nil
            Broker.dropQueuedEvents(old)
            log.log(.info, "\(app): subscription taken over by connection \(conn.id)", connection: old.id)
            // The old subscriber is told, when it asked to be (its event stream would otherwise
            // just go quiet; opt-in: a client that knows only the contract's notifications gets
            // none it does not expect).
            if old.wantsTakeoverNotice {
                let why = "another connection of \(app) subscribed (connection \(conn.id)); its events go there"
                old.emit {
                    RPCCodec.writeRequest(
                        id: nil, method: "app.subscriptionEnded", params: ["app": .string(app), "reason": .string(why)], to: &$0)
                }
                markDirty(old)
            }
        }
        subscribers[app] = conn
        conn.subscribedApp = app
        conn.wantsTakeoverNotice = wantsNotice
        Broker.dropQueuedEvents(conn)  // (subscribing again: the backlog below has them all)
        if var l = launches[app] {  // the launched app arrived (a retry still scheduled waits: see runTimers)
            l.subscribed = true
            l.everSubscribed = true
            launches[app] = l
        }
        // Events queued this turn are delivered after the commit; the rest now, after the reply.
        // (also those of the commit being written: they are delivered when it is durable)
        let fresh = Set((turnEvents + (inflight?.events ?? [])).filter { $0.app == app }.map(\.id))
        let backlog = store.pending(for: app).filter { !fresh.contains($0.id) }
        afterReply.append { [unowned self] in
            guard self.subscribers[app] === conn else { return }
            // The reply is held behind a reply that waits for a commit: the backlog waits for it.
            if conn.held != nil { conn.eventsWaitForReleases = conn.inFlight }
            for e in backlog { self.sendEvent(e, to: conn) }
        }
        log.log(.debug, "\(app) subscribed with \(backlog.count + fresh.count) pending events", connection: conn.id)
        return ["pending": .int(backlog.count + fresh.count)]
    }

    /// Ends the connection's subscription (the app stops taking events; it stays connected): its
    /// events are queued for the next subscriber, unacked ones included, and the app counts as
    /// having none, as when its subscriber disconnects (a launched app must subscribe again within
    /// its launch timeout while events wait; another is launched, its launch command permitting).
    /// `unsubscribed: false` when the connection was not the app's subscriber (never subscribed,
    /// already unsubscribed, taken over).
    func appUnsubscribe(_ conn: Connection) throws(RPCError) -> JSONValue {
        guard let app = conn.bundleID else { throw RPCError(.unauthorized, "Unauthorized: app.unsubscribe needs an app session") }
        guard conn.subscribedApp == app, subscribers[app] === conn else { return ["unsubscribed": false] }
        subscriberGone(conn)
        conn.subscribedApp = nil
        Broker.dropQueuedEvents(conn)
        log.log(.info, "\(app) unsubscribed", connection: conn.id)
        return ["unsubscribed": true]
    }

    func appAck(_ conn: Connection, _ p: Params) throws(RPCError) -> JSONValue {
        guard let app = conn.bundleID else { throw RPCError(.unauthorized, "Unauthorized: app.ack needs an app session") }
        guard let raw = p["ids"] else { throw .invalidParams("Invalid params: 'ids' is required (an array of event ids)") }
        guard case .array(let items) = raw else {
            throw .invalidParams("Invalid params: 'ids' must be an array of event ids, got \(raw.typeName)")
        }
        // An id that is not a string names no event the caller holds: it counts 0, like an
        // unknown one (the contract: never an error).
        var ids: [String] = []
        ids.reserveCapacity(items.count)
        for case .string(let s) in items { ids.append(s) }
        let store = try requireStore()
        let removed: [String]
        do { removed = try store.ack(app: app, ids: ids) } catch {
            throw RPCError(.storageFailure, "Storage failure: \(error.message); nothing was stored")
        }
        // All handled: the app's launches start afresh (no backoff left from earlier failures).
        if !launches.isEmpty, !removed.isEmpty, let f = launches[app]?.failures, f != 0, store.pendingCount(for: app) == 0 {
            launches[app]?.failures = 0
            launches[app]?.retryAt = nil
        }
        return ["acked": .int(removed.count)]
    }

    /// Unread event bytes a subscriber may have in its output (256 KiB, or half the output cap when
    /// that is smaller); further events wait as references (`Connection.queuedEvents`) and are
    /// written as it reads. A backlog of a million events costs its subscriber 8 bytes each, never
    /// a dropped connection.
    var eventWindow: Int { min(256 * 1024, config.effectiveMaxOutputBuffer / 2) }

    func sendEvent(_ e: StoredEvent, to conn: Connection) {
        // (Behind held replies too: they are written first, and the refill waits for them.)
        if conn.hasQueuedEvents || conn.eventsMustWait || conn.pendingOutput >= eventWindow {
            conn.queuedEvents.append(e)
            if conn.queuedEvents.count - conn.queuedEventsHead > 2 * (store?.pendingCount(for: e.app) ?? 0) + 1024 {
                pruneQueuedEvents(conn, app: e.app)
            }
        } else {
            conn.emit { RPCCodec.writeRequest(id: nil, method: "app.event", params: .object(e.body), to: &$0) }
        }
        markDirty(conn)
    }

    /// Writes queued events into the output while it is under the window, skipping those acked
    /// meanwhile; forgets them when the connection no longer receives its app's events.
    func refillEvents(_ conn: Connection) {
        guard let app = conn.subscribedApp, subscribers[app] === conn, let store else {
            Broker.dropQueuedEvents(conn)
            return
        }
        while conn.hasQueuedEvents && conn.pendingOutput < eventWindow {
            let e = conn.queuedEvents[conn.queuedEventsHead]
            conn.queuedEventsHead += 1
            guard store.isPending(app: app, id: e.id) else { continue }
            conn.emit { RPCCodec.writeRequest(id: nil, method: "app.event", params: .object(e.body), to: &$0) }
        }
        if !conn.hasQueuedEvents { Broker.dropQueuedEvents(conn) }
    }

    /// Forgets queued events acked meanwhile (by another session of the app), so a subscriber
    /// that does not read holds at most about twice its app's pending events.
    func pruneQueuedEvents(_ conn: Connection, app: String) {
        guard let store else { return }
        var kept: [StoredEvent] = []
        for e in conn.queuedEvents[conn.queuedEventsHead...] where store.isPending(app: app, id: e.id) { kept.append(e) }
        conn.queuedEvents = kept
        conn.queuedEventsHead = 0
    }

    static func dropQueuedEvents(_ conn: Connection) {
        guard !conn.queuedEvents.isEmpty else { return }
        conn.queuedEvents = []
        conn.queuedEventsHead = 0
    }

    /// An app's pending events may not pass `maxPendingEventsPerApp` nor, in journal bytes,
    /// `maxPendingEventBytesPerApp` with the new event's (`url`: its URL, which sets its size):
    /// -32005 naming the quota, nothing stored.
    func checkEventQuota(_ store: EventStore, _ app: String, url: String = "", source: String? = nil) throws(RPCError) {
        let load = store.pendingLoad(for: app)
        // (about the record's size: its URL, its source's and its app's bundle IDs and ~250
        // bytes for the rest: ids, kind, via, a share's id, a universal link's activity type)
        let adding = url.utf8.count + (source?.utf8.count ?? 0) + app.utf8.count + 250
        guard load.bytes + adding <= config.maxPendingEventBytesPerApp else {
            throw RPCError(
                .storageFailure,
                "Storage failure: \(app)'s pending events take \(load.bytes) bytes, and this one about \(adding) more (its quota: \(config.maxPendingEventBytesPerApp)); nothing was stored")
        }
        guard load.count < config.maxPendingEventsPerApp else {
            throw RPCError(
                .storageFailure,
                "Storage failure: \(app) already has \(config.maxPendingEventsPerApp) pending events (its quota); nothing was stored")
        }
    }

    func subscriberGone(_ conn: Connection) {
        if let app = conn.subscribedApp, subscribers[app] === conn {
            subscribers[app] = nil
            // A launched app that goes away (or hangs and is dropped) while its process runs is
            // watched again: it must subscribe again within the launch timeout while events wait.
            if var l = launches[app], l.pid != nil, l.subscribed {
                l.subscribed = false
                l.startedAt = Clock.monotonicNanos()
                launches[app] = l
            } else if !stopping, loopStarted, (store?.pendingCount(for: app) ?? 0) > 0 {
                leftWithEventsUnacked(app)
            }
        }
    }

    /// An app the broker did not launch (or whose launched process has ended) went away with
    /// events unacked: they wait for no live subscriber, so it is launched, its launch command
    /// permitting. That counts as a failure: the first time it is launched at once, after that
    /// with the backoff (an app that crashes on an event, whatever started it, or a launch command
    /// that hands the app off and returns, is not restarted in a tight loop).
    func leftWithEventsUnacked(_ app: String) {
        guard registry.launchCommand(of: app) != nil else { return }
        var l = launches[app] ?? LaunchState()
        // A launch under way (being started, or a launched process that has not subscribed):
        // the launch watchdog sees to it; no retry besides it.
        if l.starting || l.pid != nil { return }
        l.failures += 1
        if l.failures == 1 && l.retryAt == nil {
            launches[app] = l
            launchIfNeeded(app)
            return
        }
        let at = Clock.monotonicNanos() + backoff(l.failures - 1)
        if l.retryAt.map({ $0 < at }) ?? true { l.retryAt = at }
        nextTimerDue = min(nextTimerDue, l.retryAt!)
        launches[app] = l
        log.log(
            .warning,
            "\(app) went away with \(store?.pendingCount(for: app) ?? 0) events not acked; launching it in \(Double(backoff(l.failures - 1)) / 1e9) s")
    }

    /// Launches every app with a launch command, no subscriber and events waiting: at start (what
    /// the previous run left pending, a launch retry it had scheduled) and after a reload (an app
    /// that now has a launch command).
    func launchAppsWithWaitingEvents() {
        guard let store, store.pendingCount > 0 else { return }
        for app in registry.apps where subscribers[app.bundleID] == nil && store.pendingCount(for: app.bundleID) > 0 {
            launchIfNeeded(app.bundleID)
        }
    }

    // MARK: Launch on demand

    /// Starts the app's `launch` command unless it is running, being started or waiting for a
    /// retry. The start runs off the loop (`startLaunch`, on `launchWorkers`: looking the user up
    /// can wait for a directory service, and a launch as another user waits for its child's
    /// exec), and `finishLaunch` records its outcome on the loop.
    func launchIfNeeded(_ app: String) {
        // (url.open calls this for every event of an app with no subscriber: nothing here copies
        // the app's manifest or writes to `launches` until a launch is started)
        guard let argv = registry.launchCommand(of: app), !argv.isEmpty else {
            // (its launch is gone: no retry is due)
            if !launches.isEmpty, launches[app]?.retryAt != nil { launches[app]?.retryAt = nil }
            return
        }
        var state = launches[app] ?? LaunchState()
        if state.pid != nil || state.starting { return }  // running or starting: not again
        if let retry = state.retryAt, retry > Clock.monotonicNanos() { return }  // backing off
        guard let manifest = registry.app(app) else { return }
        state.retryAt = nil
        state.launches += 1
        state.starting = true
        state.startingSince = Clock.monotonicNanos()
        state.startingWarned = false
        state.subscribed = false
        state.everSubscribed = false
        state.stopSentAt = nil
        let ticket = LaunchTicket()
        state.ticket = ticket
        launches[app] = state
        nextTimerDue = min(nextTimerDue, state.startingSince + launchStartWarning)
        let plan = LaunchPlan(
            app: app, argv: argv, launchUser: manifest.launchUser, uids: manifest.uids, socketPath: config.socketPath,
            stateDirectory: config.stateDirectory, ticket: ticket)
        let job = LaunchJob()
        let (gate, spawned) = (config.launchGate, config.launchSpawnedGate)
        let submitted = runPoolWork(
            {
                gate?()
                job.outcome = Broker.startLaunch(plan)
                spawned?()
            }, on: launchWorkers, then: { [unowned self] in finishLaunch(plan, job.outcome) })
        if !submitted { finishLaunch(plan, .failure(LaunchFailure("no thread to start it on"))) }
    }

    /// The launch pool reported work done: each start is recorded, each launch check taken up.
    func handleLaunchesDone() { finishPoolWork(launchWorkers.takeFinished()) }

    /// Threads for starting launches (`launchWorkers`).
    static let launchThreads = 2

    /// A launch still being started after this long is logged (its user's lookup, say, waits
    /// for a directory service that does not answer): it goes on, and counts as running.
    var launchStartWarning: UInt64 { UInt64(max(config.launchTimeoutSeconds, 5) * 1e9) }

    /// Records a launch's outcome (on the loop): the child's pid, or a failure retried with
    /// backoff. `outcome` nil: the start never ran. A start whose launch a reload changed or
    /// took away meanwhile is no failure: a child it spawned is stopped (SIGTERM), and the launch
    /// as the manifests now say is started for the events that wait.
    func finishLaunch(_ plan: LaunchPlan, _ outcome: LaunchOutcome?) {
        let app = plan.app
        guard var state = launches[app], state.starting, state.ticket === plan.ticket else { return }
        state.starting = false
        state.ticket = nil
        let now = Clock.monotonicNanos()
        let replaced = plan.ticket.isCalledOff || Broker.launchSpec(of: registry.app(app)) != plan.spec
        switch outcome {
        case nil:
            break
        case .success(let started):
            state.pid = started.pid
            state.retryAt = nil
            state.startedAt = now
            nextTimerDue = min(nextTimerDue, now + Broker.reapInterval)
            let who = started.account.map { " as \($0.name) (uid \($0.uid))" } ?? ""
            log.log(.info, "launched \(app) (pid \(started.pid))\(who): \(plan.argv.joined(separator: " "))")
            if replaced {
                log.log(.warning, "\(app): a manifest reload changed its launch while it was started; stopping the process started with the old one (pid \(started.pid), SIGTERM)")
                signalLaunched(started.pid, SIGTERM)
                state.stopSentAt = now
                state.superseded = true
            } else {
                // (the app may have subscribed already, and even left: the child runs before
                // this is recorded; `everSubscribed` was set then)
                state.subscribed = subscribers[app] != nil
                if let account = started.account, let problem = started.socketProblem {
                    log.log(
                        .warning,
                        "\(app) runs as \(account.name), who cannot reach \(plan.socketPath): \(problem); it will not be able to subscribe (see sharebroker serve --socket-mode and --socket-group)")
                }
            }
        case .failure(let failure):
            if replaced {
                log.log(.info, "\(app): its launch was not started: a manifest reload changed it meanwhile")
            } else {
                state.failures += 1
                state.retryAt = now + backoff(state.failures)
                nextTimerDue = min(nextTimerDue, state.retryAt!)
                log.log(
                    .warning,
                    "cannot launch \(app): \(failure.message); retrying in \(backoff(state.failures) / 1_000_000_000) s")
            }
        }
        launches[app] = state
        if replaced && state.pid == nil && !stopping && subscribers[app] == nil && (store?.pendingCount(for: app) ?? 0) > 0 {
            launchIfNeeded(app)
        }
    }

    func backoff(_ failures: Int) -> UInt64 {
        let seconds = min(60.0, config.launchRetryBase * Double(1 << min(failures - 1, 10)))
        return UInt64(seconds * 1e9)
    }

    /// Spawns a detached child (new session, stdin/stdout on /dev/null, stderr to STATE/logs/APP.log)
    /// with SHAREBROKER_SOCKET and SHAREBROKER_BUNDLE_ID set, as the broker's user or as the
    /// account `launchAccount` names (with that user's groups, environment and home directory).
    /// Returns the pid and the account, or why it could not start. Runs on a worker thread: it
    /// reads nothing of the broker's state but `plan`.
    static func startLaunch(_ plan: LaunchPlan) -> LaunchOutcome {
        let argv = plan.argv
        let app = plan.app
        let account: LaunchAccount?
        do { account = try launchAccount(launchUser: plan.launchUser, uids: plan.uids) } catch { return .failure(error) }
        // A program someone else than the user it runs as (or root) could change is not run: as
        // manifests another user could write are not read.
        if let why = launchProgramProblem(argv, account: account) {
            return .failure(LaunchFailure("its launch program is not run: \(why)"))
        }
        // (called off meanwhile: a reload changed the launch, or the broker stops)
        if plan.ticket.isCalledOff { return .failure(LaunchFailure("called off")) }
        _ = try? DefaultPaths.makeDirectories(plan.stateDirectory + "/logs")
        // (a logs/ replaced by a symlink is not written through: the app's stderr goes nowhere;
        // so does that of an app run as another user: it could fill the broker's file system
        // through it, and could not read the log anyway)
        let logsOK = account == nil && FileIO.isPlainDirectory(plan.stateDirectory + "/logs")
        let logPath = plan.stateDirectory + "/logs/\(app).log"
        // One megabyte per log: a longer one becomes APP.log.1 (replacing the previous) at launch,
        // so an app's stderr cannot fill the disk over its launches.
        var st = stat()
        if logsOK, lstat(logPath, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size > Broker.launchLogLimit {
            _ = rename(logPath, logPath + ".1")
        }
        let errFD = logsOK ? open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600) : -1
        defer { if errFD >= 0 { FD.close(errFD) } }
        var brokerEnv: [String] = []
        var e = sb_environ()
        while let p = e?.pointee {
            let s = String(cString: p)
            if !s.hasPrefix("SHAREBROKER_SOCKET=") && !s.hasPrefix("SHAREBROKER_BUNDLE_ID=") { brokerEnv.append(s) }
            e = e.map { $0 + 1 }
        }
        let ours = ["SHAREBROKER_SOCKET=\(plan.socketPath)", "SHAREBROKER_BUNDLE_ID=\(app)"]
        let env = account.map { $0.environment(from: brokerEnv, extra: ours) } ?? brokerEnv + ours
        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = env.map { strdup($0) } + [nil]
        defer {
            for p in cArgs { free(p) }
            for p in cEnv { free(p) }
        }
        let pid = cArgs.map { UnsafePointer($0) }.withUnsafeBufferPointer { a in
            cEnv.map { UnsafePointer($0) }.withUnsafeBufferPointer { en in
                guard let account else { return sb_spawn_detached(a.baseAddress, en.baseAddress, errFD) }
                // (PATH searched as the user, in the environment they get)
                let path = env.last(where: { $0.hasPrefix("PATH=") }).map { String($0.dropFirst(5)) } ?? LaunchAccount.defaultPath
                return account.groups.withUnsafeBufferPointer { groups in
                    sb_spawn_as_user(
                        a.baseAddress, en.baseAddress, errFD, account.uid, account.gid, groups.baseAddress, Int32(groups.count),
                        account.home, path, Broker.launchExecWaitMillis)
                }
            }
        }
        guard pid > 0 else {
            let err = String(cString: strerror(currentErrno()))
            return .failure(LaunchFailure("\(argv[0]): \(err)" + (account.map { " (as \($0.name), uid \($0.uid))" } ?? "")))
        }
        return .success(StartedLaunch(pid: pid, account: account, socketProblem: account?.socketProblem(plan.socketPath)))
    }

    /// How long a launch as another user waits for its child's exec (the child is that user's
    /// from its setuid on: they may stop it): longer, and the child counts as launched.
    static let launchExecWaitMillis: Int32 = 250

    /// The launch watchdog: a child the broker launched that has not subscribed within
    /// `launchTimeoutSeconds` is sent SIGTERM (its process group: it was started in a session of
    /// its own), and SIGKILL when it still runs `launchStopGraceSeconds` later; once reaped, its
    /// exit counts as a launch that failed (logged, retried with backoff while events wait). So a
    /// launch command that hangs cannot keep its app's events from ever being delivered.
    func stopIfLaunchTimedOut(_ app: String, pid: Int32, _ l: inout LaunchState, now: UInt64) {
        guard !l.subscribed, config.launchTimeoutSeconds > 0 else { return }
        if l.stopSentAt == nil && (store?.pendingCount(for: app) ?? 0) == 0 {
            l.startedAt = now  // nothing waits for it: it may take its time (the clock starts again)
            return
        }
        if let sent = l.stopSentAt {
            guard now - sent >= UInt64(config.launchStopGraceSeconds * 1e9) else { return }
            log.log(.warning, "\(app) (pid \(pid)) still runs \(config.launchStopGraceSeconds) s after SIGTERM; sending SIGKILL")
            signalLaunched(pid, SIGKILL)
            l.stopSentAt = now  // (again after another grace period, should it survive that)
        } else if now - l.startedAt >= UInt64(config.launchTimeoutSeconds * 1e9) {
            l.timeouts += 1
            l.stopSentAt = now
            log.log(
                .warning,
                "\(app) (pid \(pid)) did not subscribe within \(config.launchTimeoutSeconds) s of its launch; stopping it (SIGTERM)")
            signalLaunched(pid, SIGTERM)
        }
    }

    /// Sends `sig` to a launched child's process group, and to the child itself (should it have
    /// left the group).
    private func signalLaunched(_ pid: Int32, _ sig: Int32) {
        _ = kill(-pid, sig)
        _ = kill(pid, sig)
    }

    /// Size past which a launched app's log is rotated at its next launch (STATE/logs/APP.log → .1).
    static let launchLogLimit = 1 << 20

    /// How often running launched children are looked at (waitpid), while any runs.
    static let reapInterval: UInt64 = 200_000_000

    /// Milliseconds until the next timer (launch retries, reaping launched children); -1 when none.
    func nextTimerMillis() -> Int32 {
        guard nextTimerDue != .max else { return -1 }
        let now = Clock.monotonicNanos()
        return nextTimerDue <= now ? 0 : Int32(min(60_000, (nextTimerDue - now) / 1_000_000 + 1))
    }

    /// Reaps launched children that exited and retries launches whose backoff has passed, when
    /// one of those is due (`nextTimerDue`); then works out when next.
    func runTimers() {
        turn.endRequest()
        let now = Clock.monotonicNanos()
        guard now >= nextTimerDue else { return }
        defer {
            var next = UInt64.max
            let at = Clock.monotonicNanos()
            for (_, l) in launches {
                if l.pid != nil { next = min(next, at + Broker.reapInterval) }
                if l.pid == nil && !l.starting, let r = l.retryAt { next = min(next, r) }
                if l.starting && !l.startingWarned { next = min(next, l.startingSince + launchStartWarning) }
            }
            if startLaunchesDue != 0 { next = min(next, startLaunchesDue) }
            if store == nil && storeReopen.timerDue != 0 { next = min(next, storeReopen.timerDue) }
            if inputRetry.due != 0 { next = min(next, inputRetry.due) }
            for (_, c) in stallWatch where c.stalledSince != 0 { next = min(next, c.stalledSince + stallLimit(c)) }
            for (_, c) in partialWatch where c.partialSince != 0 { next = min(next, c.partialSince + stallNanos) }
            nextTimerDue = next
        }
        // (the event queues could not be opened: tried again with a backoff, so the apps whose
        // events wait are launched without a request)
        if store == nil, storeReopen.timerDue != 0, now >= storeReopen.timerDue, !stopping { openStore() }
        // (manifests or association documents that could not be read for a reason that may pass)
        if inputRetry.due != 0, now >= inputRetry.due, !stopping {
            inputRetry.due = 0
            reloadManifests(reason: "read again after a failed read")
            startLaunchChecks()
        }
        if !stallWatch.isEmpty { checkStalledReaders(now: now) }
        if !partialWatch.isEmpty { checkPartialMessages(now: now) }
        for (app, var l) in launches {
            if l.starting && !l.startingWarned && now - l.startingSince >= launchStartWarning {
                l.startingWarned = true
                log.log(
                    .warning,
                    "\(app): its launch has been starting for \((now - l.startingSince) / 1_000_000_000) s (looking its user up or its program over waits: a directory service or file system that does not answer?); it is not started again meanwhile")
            }
            if let pid = l.pid {
                var status: Int32 = 0
                let r = waitpid(pid, &status, WNOHANG)
                if r == pid || (r < 0 && currentErrno() == ECHILD) {
                    l.pid = nil
                    l.stopSentAt = nil
                    let subscribed = subscribers[app] != nil
                    let waiting = store?.pendingCount(for: app) ?? 0
                    let code = (status & 0x7f) == 0 ? "exit status \((status >> 8) & 0xff)" : "signal \(status & 0x7f)"
                    if l.superseded {
                        // (stopped for a reload that changed its launch: no failure; the launch
                        // as it is now follows when events wait)
                        l.superseded = false
                        log.log(.info, "\(app) (pid \(pid)), started with the launch a reload replaced, exited (\(code))")
                        if !subscribed && waiting > 0 && !stopping {
                            launches[app] = l
                            launchIfNeeded(app)
                            continue
                        }
                    } else if subscribed {
                        log.log(.info, "\(app) (pid \(pid)) exited (\(code))")
                    } else if waiting > 0 {
                        // It ended with events unhandled: launched again, after a backoff that
                        // grows with each such end (a crash loop is not a tight loop).
                        l.failures += 1
                        l.retryAt = now + backoff(l.failures)
                        log.log(
                            .warning,
                            "\(app) (pid \(pid)) exited (\(code)) "
                                + (l.everSubscribed ? "after subscribing, with \(waiting) events not acked" : "without subscribing; \(waiting) events wait")
                                + "; launching it again in \(Double(backoff(l.failures)) / 1e9) s")
                    } else {
                        l.failures = 0
                        log.log(.info, "\(app) (pid \(pid)) exited (\(code))")
                    }
                } else if r == 0 {
                    stopIfLaunchTimedOut(app, pid: pid, &l, now: now)
                }
            }
            if l.pid == nil, let r = l.retryAt, r <= now {
                launches[app] = l
                if subscribers[app] == nil && (store?.pendingCount(for: app) ?? 0) > 0 {
                    launchIfNeeded(app)
                } else {
                    launches[app]?.retryAt = nil
                }
                continue
            }
            launches[app] = l  // kept for broker.status (one entry per app with a launch command)
        }
        // (after the loop above: the launches it starts are stamped later than `now`)
        if startLaunchesDue != 0 && now >= startLaunchesDue {
            startLaunchesDue = 0
            if !stopping { launchAppsWithWaitingEvents() }
        }
    }
}
