// Group defaults (defaults.*): a shared key-value suite per App Group, like
// UserDefaults(suiteName: "group...") shared by an app and its extensions, with a version counter,
// compare-and-set, and defaults.changed notifications sent to watchers once a change is durable.

import ShareProtocol
import ShareRouting
import ShareStore
import ShareSystem

/// One session's watch of one group: one object, listed in each index of the group that it is in.
final class DefaultsWatch {
    /// The watching connection.
    let conn: Connection
    /// Only these keys, by their exact bytes (nil: every key).
    let keys: Set<ExactKey>?
    /// The change sequence number when the watch was set: older changes are not sent.
    let since: UInt64
    /// The watches of the group this one replaced on its connection (their keys together, and
    /// the earliest `since`): a change of one of those keys that they were to get, not yet sent
    /// when this one was set (its commit still under way), is still sent. Watching again to add
    /// keys does not lose a change of the keys watched already.
    let replaced: (keys: Set<ExactKey>?, since: UInt64)?
    /// The `Broker.registryGeneration` at which the session's bundle was last seen listing the
    /// group: while the registry has not been reloaded since, delivery needs no registry look-up.
    var entitledGeneration: Int

    init(conn: Connection, keys: Set<ExactKey>?, since: UInt64, entitledGeneration: Int, replacing old: DefaultsWatch? = nil) {
        self.conn = conn
        self.keys = keys
        self.since = since
        self.entitledGeneration = entitledGeneration
        if let old {
            var keys = old.keys
            var since = old.since
            if let earlier = old.replaced {
                since = min(since, earlier.since)
                if let k = keys, let e = earlier.keys { keys = k.union(e) } else { keys = nil }
            }
            replaced = (keys, since)
        } else {
            replaced = nil
        }
    }

    /// Whether the change `sequence` of `key` goes to this watch (its filter wants the key).
    func wants(_ key: ExactKey, sequence: UInt64) -> Bool {
        if since < sequence { return true }
        guard let replaced, replaced.since < sequence else { return false }
        return replaced.keys?.contains(key) ?? true
    }
}

/// The watches of one group, indexed so that a change visits only the watches of its key.
struct GroupWatches {
    /// Every watch of the group, by connection id.
    var byConnection: [UInt64: DefaultsWatch] = [:]
    /// The watches of every key (no `keys` filter), by connection id.
    var everyKey: [UInt64: DefaultsWatch] = [:]
    /// The watches with a `keys` filter: key → connection id → watch.
    var byKey: [ExactKey: [UInt64: DefaultsWatch]] = [:]

    var isEmpty: Bool { byConnection.isEmpty }

    /// Whether a change of `key` has any watch to go to.
    func isWatched(_ key: String) -> Bool { !everyKey.isEmpty || byKey[ExactKey(key)] != nil }

    /// Adds `watch`, replacing (and unlisting) the connection's previous watch of the group.
    /// Returns true when the connection had none.
    mutating func insert(_ watch: DefaultsWatch) -> Bool {
        let id = watch.conn.id
        let added = remove(id) == nil
        byConnection[id] = watch
        if let keys = watch.keys {
            for k in keys { byKey[k, default: [:]][id] = watch }
        } else {
            everyKey[id] = watch
        }
        return added
    }

    /// Removes the connection's watch from every index; returns it (nil: there was none).
    @discardableResult
    mutating func remove(_ id: UInt64) -> DefaultsWatch? {
        guard let old = byConnection.removeValue(forKey: id) else { return nil }
        if let keys = old.keys {
            for k in keys {
                byKey[k]?[id] = nil
                if byKey[k]?.isEmpty == true { byKey[k] = nil }
            }
        } else {
            everyKey[id] = nil
        }
        return old
    }
}

/// Per-broker state of group defaults: the open stores and the watchers.
struct DefaultsState {
    /// Open stores by group (opened on first use).
    var stores: [String: DefaultsStore] = [:]
    /// Watches by group (only groups with at least one watch).
    var watchers: [String: GroupWatches] = [:]
    /// Groups each connection watches (for clean-up).
    var watchedGroups: [UInt64: Set<String>] = [:]
    /// Watches in `watchers`, all groups together (kept so that `broker.status` costs O(1)).
    var watchCount = 0
    /// Open stores whose last compaction failed (kept by the stores' `compactionFailingChanged`).
    var compactionErrors = 0
    /// Counts every change made (never goes back, unlike a group's version after a failed commit).
    var changeSequence: UInt64 = 0
    /// defaults.changed notifications queued to watchers.
    var notificationsSent: UInt64 = 0
    /// Watchers dropped because they did not read their notifications.
    var droppedWatchers: UInt64 = 0
    init() {}

    /// Sets the connection's watch of `group` (replacing its previous one, key filter included).
    mutating func setWatch(_ watch: DefaultsWatch, group: String) {
        if watchers[group, default: GroupWatches()].insert(watch) { watchCount += 1 }
        watchedGroups[watch.conn.id, default: []].insert(group)
    }

    /// Ends the connection's watch of `group`, if any.
    mutating func removeWatch(_ id: UInt64, group: String) {
        if watchers[group]?.remove(id) != nil { watchCount -= 1 }
        if watchers[group]?.isEmpty == true { watchers[group] = nil }
        watchedGroups[id]?.remove(group)
        if watchedGroups[id]?.isEmpty == true { watchedGroups[id] = nil }
    }

    /// Ends every watch of the connection (it closed).
    mutating func removeWatches(of id: UInt64) {
        guard let groups = watchedGroups.removeValue(forKey: id) else { return }
        for g in groups {
            if watchers[g]?.remove(id) != nil { watchCount -= 1 }
            if watchers[g]?.isEmpty == true { watchers[g] = nil }
        }
    }
}

extension Broker {
    /// The error code of a failed compare-and-set (`ifVersion` did not match); `data.version` is the
    /// group's current version. (Not in the contract's table, which stops at -32005.)
    static let versionConflictCode = -32006

    /// The defaults.* methods: for app and extension sessions (tools get -32001).
    static func defaultsMethods() -> [MethodSpec] {
        let roles: Set<SessionRole> = [.app, .extension]
        return [
            MethodSpec("defaults.get", roles: roles) { b, c, p throws(RPCError) in try b.defaultsGet(c, p) },
            MethodSpec("defaults.set", roles: roles) { b, c, p throws(RPCError) in try b.defaultsSet(c, p) },
            MethodSpec("defaults.remove", roles: roles) { b, c, p throws(RPCError) in try b.defaultsRemove(c, p) },
            MethodSpec("defaults.list", roles: roles) { b, c, p throws(RPCError) in try b.defaultsList(c, p) },
            MethodSpec("defaults.watch", roles: roles) { b, c, p throws(RPCError) in try b.defaultsWatch(c, p) },
        ]
    }

    /// Backlog a watcher may have unread before it is dropped: 1 MiB, or the output cap if lower.
    var defaultsWatcherBacklogLimit: Int { min(1 << 20, config.effectiveMaxOutputBuffer) }

    /// The group named in `params`, checked: the session's bundle lists it in its appGroups (-32001
    /// otherwise) and it is usable as a directory name (-32602 otherwise).
    func entitledGroup(_ conn: Connection, _ p: Params) throws(RPCError) -> String {
        let group = try p.string("group")
        guard let bundle = conn.bundleID else {
            throw RPCError(.unauthorized, "Unauthorized: '\(p.method)' needs an app or extension session of the group")
        }
        guard Broker.lists(registry.appGroups(of: bundle), group) else {
            throw RPCError(
                .unauthorized,
                "Unauthorized: '\(bundle)' is not entitled to the group '\(group)' (it is not in its appGroups)")
        }
        guard ManifestDecoder.isUsableGroupName(group) else {
            throw .invalidParams(
                "Invalid params: the group name '\(group)' cannot name a directory (letters, digits, '-', '_', '.'; no '..'; at most \(ManifestDecoder.maxGroupNameBytes) bytes)"
            )
        }
        return group
    }

    /// The group's store, opened (and recovered) on first use; -32005 when it cannot be opened.
    func defaultsStore(_ group: String) throws(RPCError) -> DefaultsStore {
        if let s = defaults.stores[group] { return s }
        if let why = groupsDirectoryProblem() {
            throw RPCError(.storageFailure, "Storage failure: \(why); nothing was stored")
        }
        let directory = groupDirectory(group)
        do {
            let s = try DefaultsStore(
                directory: directory, group: group, segmentLimit: config.journalSegmentLimit, turn: turn)
            if let inject = config.storeFaults { s.journal.faultInjector = inject }
            if let space = config.journalSpace { s.journal.setSpace(space) }
            // Its snapshots are written on the worker pool, not on the loop.
            s.backgroundRunner = { [unowned self] work, done in self.runPoolWork(work, then: done) }
            s.compactionFailingChanged = { [unowned self] failing in
                self.defaults.compactionErrors += failing ? 1 : -1
            }
            defaults.stores[group] = s
            let r = s.recovery
            log.log(
                r.records > 0 ? .info : .debug,
                "defaults of \(group) opened: \(s.count) keys at version \(s.version) from \(r.records) records in \(r.segments) segments"
                    + (r.quarantined > 0 ? ", \(r.quarantined) damaged records quarantined" : "")
                    + (r.truncatedBytes > 0 ? ", torn tail of \(r.truncatedBytes) bytes truncated" : ""))
            for note in r.notes { log.log(.warning, "recovery (\(group) defaults): \(note)") }
            return s
        } catch {
            log.log(.error, "cannot open the defaults of \(group) in \(directory): \(error.message)")
            throw RPCError(
                .storageFailure, "Storage failure: cannot open the defaults of group '\(group)': \(error.message)")
        }
    }

    func defaultsKey(_ p: Params) throws(RPCError) -> String {
        try Broker.checkedDefaultsKey(try p.string("key"), name: "key")
    }

    /// A key as every defaults method takes it: 1 to `maxKeyBytes` bytes of UTF-8 (as `set`
    /// stores it), so `get`, `remove` and `watch` refuse what `set` would refuse.
    static func checkedDefaultsKey(_ key: String, name: String) throws(RPCError) -> String {
        if key.isEmpty { throw .invalidParams("Invalid params: '\(name)' must not be empty") }
        let limit = DefaultsLimits().maxKeyBytes
        if key.utf8.count > limit {
            throw .invalidParams("Invalid params: '\(name)' must be 1 to \(limit) bytes of UTF-8, got \(key.utf8.count)")
        }
        return key
    }

    /// `ifVersion`: absent/null, or a non-negative integer.
    func defaultsIfVersion(_ p: Params) throws(RPCError) -> UInt64? {
        guard let v = p["ifVersion"], !v.isNull else { return nil }
        if case .number(let s) = v, let n = UInt64(s) { return n }
        if let i = v.intValue, i >= 0 { return UInt64(i) }
        throw .invalidParams(
            "Invalid params: 'ifVersion' must be a non-negative integer (a group version), got \(v.typeName)")
    }

    /// Maps a refused change to its JSON-RPC error.
    func defaultsError(_ e: DefaultsError, group: String, key: String, ifVersion: UInt64?) -> RPCError {
        switch e {
        case .versionConflict(let current):
            return RPCError(
                code: Broker.versionConflictCode,
                message:
                    "Version conflict: the defaults of group '\(group)' are at version \(current), not \(ifVersion ?? 0) "
                    + "(ifVersion); nothing was stored",
                data: ["version": .number(String(current)), "group": .string(group)])
        case .valueTooLarge(let bytes, let limit):
            return .invalidParams("Invalid params: 'value' is \(bytes) bytes of JSON; the limit is \(limit) bytes")
        case .valueTooDeep(let limit):
            return .invalidParams("Invalid params: 'value' nests arrays/objects deeper than \(limit) levels")
        case .badKey(let limit):
            return .invalidParams("Invalid params: 'key' must be 1 to \(limit) bytes of UTF-8, got \(key.utf8.count)")
        case .suiteFull(let bytes, let limit):
            return RPCError(
                .storageFailure,
                "Storage failure: the defaults of group '\(group)' would grow to \(bytes) bytes, over the limit of \(limit) bytes; "
                    + "nothing was stored")
        case .storage(let s):
            return RPCError(.storageFailure, "Storage failure: \(s.message); nothing was stored")
        }
    }

    func versionJSON(_ v: UInt64) -> JSONValue { .number(String(v)) }

    // MARK: Methods

    func defaultsGet(_ conn: Connection, _ p: Params) throws(RPCError) -> JSONValue {
        let group = try entitledGroup(conn, p)
        let key = try defaultsKey(p)
        let store = try defaultsStore(group)
        store.joinPendingCommit()
        let value = store.value(forKey: key)
        return ["exists": .bool(value != nil), "value": value ?? .null, "version": versionJSON(store.version)]
    }

    func defaultsSet(_ conn: Connection, _ p: Params) throws(RPCError) -> JSONValue {
        let group = try entitledGroup(conn, p)
        let key = try defaultsKey(p)
        guard let value = p["value"] else {
            throw .invalidParams("Invalid params: 'value' is required (any JSON value)")
        }
        let ifVersion = try defaultsIfVersion(p)
        let store = try defaultsStore(group)
        let version: UInt64
        do { version = try store.set(key, value, ifVersion: ifVersion) } catch {
            throw defaultsError(error, group: group, key: key, ifVersion: ifVersion)
        }
        defaultsChanged(store, key: key, value: value, version: version)
        if log.enabled(.trace) {
            log.log(.trace, "defaults.set \(group) \(key) → version \(version)", connection: conn.id)
        }
        return ["version": versionJSON(version)]
    }

    func defaultsRemove(_ conn: Connection, _ p: Params) throws(RPCError) -> JSONValue {
        let group = try entitledGroup(conn, p)
        let key = try defaultsKey(p)
        let ifVersion = try defaultsIfVersion(p)
        let store = try defaultsStore(group)
        let outcome: (removed: Bool, version: UInt64)
        do { outcome = try store.remove(key, ifVersion: ifVersion) } catch {
            throw defaultsError(error, group: group, key: key, ifVersion: ifVersion)
        }
        if outcome.removed {
            defaultsChanged(store, key: key, value: nil, version: outcome.version)
        } else {
            store.joinPendingCommit()  // the version answered may be uncommitted
        }
        return ["removed": .bool(outcome.removed), "version": versionJSON(outcome.version)]
    }

    func defaultsList(_ conn: Connection, _ p: Params) throws(RPCError) -> JSONValue {
        let group = try entitledGroup(conn, p)
        let store = try defaultsStore(group)
        store.joinPendingCommit()
        return ["values": .object(store.valuesObject()), "version": versionJSON(store.version)]
    }

    func defaultsWatch(_ conn: Connection, _ p: Params) throws(RPCError) -> JSONValue {
        let group = try entitledGroup(conn, p)
        var keys: Set<ExactKey>? = nil
        if let raw = p["keys"], !raw.isNull {
            guard case .array(let items) = raw else {
                throw .invalidParams("Invalid params: 'keys' must be an array of key names, got \(raw.typeName)")
            }
            // An empty array is no filter, as null or leaving it out is: a client that always
            // sends the array means nothing else by it (a watch of no key would never notify).
            var set = Set<ExactKey>()
            for (i, item) in items.enumerated() {
                guard case .string(let k) = item else {
                    throw .invalidParams("Invalid params: 'keys[\(i)]' must be a string, got \(item.typeName)")
                }
                set.insert(ExactKey(try Broker.checkedDefaultsKey(k, name: "keys[\(i)]")))
            }
            if !set.isEmpty { keys = set }
        }
        let store = try defaultsStore(group)
        store.joinPendingCommit()  // the version answered may be uncommitted
        defaults.setWatch(
            DefaultsWatch(
                conn: conn, keys: keys, since: defaults.changeSequence, entitledGeneration: registryGeneration,
                replacing: defaults.watchers[group]?.byConnection[conn.id]),
            group: group)
        if log.enabled(.debug) {
            log.log(
                .debug,
                "watching the defaults of \(group)"
                    + (keys.map { " (keys: \($0.sorted().map(\.text).joined(separator: ", ")))" } ?? ""), connection: conn.id)
        }
        var result: JSONObject = ["watching": true, "version": versionJSON(store.version)]
        if let keys { result["keys"] = .array(keys.sorted().map { .string($0.text) }) }
        return .object(result)
    }

    // MARK: Notifications

    /// Records a change; once the store's commit succeeds, `defaults.changed` goes to the watchers
    /// of `key` (in version order: after-commit actions run in the order they were added). A change
    /// of a key nobody watches queues nothing: a watch set later has a later `since` and would not
    /// get it anyway.
    func defaultsChanged(_ store: DefaultsStore, key: String, value: JSONValue?, version: UInt64) {
        defaults.changeSequence += 1
        let sequence = defaults.changeSequence
        let group = store.group
        guard let watching = defaults.watchers[group], watching.isWatched(key) else { return }
        afterCommit.append(
            (
                ObjectIdentifier(store),
                { [unowned self] in
                    self.sendDefaultsChanged(group: group, key: key, value: value, version: version, sequence: sequence)
                }
            ))
    }

    /// Sends one `defaults.changed` to every watcher of `group` that wants `key` (serialized once):
    /// the watches of every key and those naming `key`, no others.
    /// A watcher with more than `defaultsWatcherBacklogLimit` bytes unread is dropped instead, so a
    /// slow reader never holds back writers or other watchers. A watcher whose bundle no longer
    /// lists the group loses its watch instead (a manifest reload ends those at once,
    /// `endUnlistedWatches`: this is the backstop); the registry is consulted only for watches
    /// not yet checked since the last reload.
    func sendDefaultsChanged(group: String, key: String, value: JSONValue?, version: UInt64, sequence: UInt64) {
        guard let watching = defaults.watchers[group] else { return }
        var message: [UInt8] = []
        var slow: [Connection] = []
        var revoked: [Connection] = []
        let limit = defaultsWatcherBacklogLimit
        let generation = registryGeneration
        let exactKey = ExactKey(key)
        func deliver(_ w: DefaultsWatch) {
            guard w.wants(exactKey, sequence: sequence), !w.conn.closed else { return }
            if w.entitledGeneration != generation {
                guard let bundle = w.conn.bundleID, Broker.lists(registry.appGroups(of: bundle), group) else {
                    revoked.append(w.conn)  // the manifest no longer lists the group
                    return
                }
                w.entitledGeneration = generation
            }
            // (A large reply it is reading, e.g. a whole suite, does not count against it.)
            if w.conn.pendingOutput > limit + w.conn.largestMessage {
                slow.append(w.conn)
                return
            }
            if message.isEmpty {
                var params: JSONObject = ["group": .string(group), "key": .string(key)]
                if let value { params["value"] = value } else { params["removed"] = true }
                params["version"] = versionJSON(version)
                RPCCodec.writeRequest(id: nil, method: "defaults.changed", params: .object(params), to: &message)
            }
            w.conn.emit { $0.append(contentsOf: message) }
            markDirty(w.conn)
            defaults.notificationsSent += 1
        }
        for (_, w) in watching.everyKey { deliver(w) }
        if let named = watching.byKey[exactKey] {
            for (_, w) in named { deliver(w) }
        }
        for c in revoked { endUnlistedWatch(c, group: group) }
        for c in slow {
            defaults.droppedWatchers += 1
            droppedSlowClients += 1
            log.log(
                .warning,
                "dropping slow defaults watcher \(c.identity) of \(group): \(c.pendingOutput) bytes of notifications not read "
                    + "(limit \(limit))",
                connection: c.id)
            closeNow(c, reason: "defaults watcher too slow")
        }
    }

    func removeDefaultsWatch(_ id: UInt64, group: String) {
        defaults.removeWatch(id, group: group)
        if !unlistedWatchedGroups.isEmpty { closeIfLastWatcherOfUnlisted(group) }
    }

    /// The last watch of a group kept open only for its watchers ended: its close is due (at the
    /// end of the turn).
    func closeIfLastWatcherOfUnlisted(_ group: String) {
        if defaults.watchers[group] == nil && unlistedWatchedGroups.contains(ExactKey(group)) { closeGroupsDue = true }
    }

    /// After a manifest reload: ends the watches of sessions whose bundle no longer lists the
    /// group, telling each at once (`defaults.watchEnded`) rather than at the group's next change;
    /// the others are marked as checked, so delivery needs no registry look-up for them.
    /// (Sessions the reload ended altogether are left to their closing.)
    func endUnlistedWatches() {
        let generation = registryGeneration
        var unlisted: [(Connection, String)] = []
        for (group, watching) in defaults.watchers {
            for (_, w) in watching.byConnection where !w.conn.closed && !w.conn.closing && w.entitledGeneration != generation {
                if let bundle = w.conn.bundleID, Broker.lists(registry.appGroups(of: bundle), group) {
                    w.entitledGeneration = generation
                } else {
                    unlisted.append((w.conn, group))
                }
            }
        }
        for (c, group) in unlisted { endUnlistedWatch(c, group: group) }
    }

    /// Ends a watch whose session's bundle no longer lists the group, with a
    /// `defaults.watchEnded {group, reason}` notification to the session (which stays open).
    func endUnlistedWatch(_ c: Connection, group: String) {
        let why = "\(c.bundleID ?? "the session") no longer lists \(group) in its appGroups"
        log.log(.info, "\(why); its watch ended", connection: c.id)
        removeDefaultsWatch(c.id, group: group)
        c.emit {
            RPCCodec.writeRequest(
                id: nil, method: "defaults.watchEnded", params: ["group": .string(group), "reason": .string(why)], to: &$0)
        }
        markDirty(c)
    }

    /// Clean-up when a connection closes (its watches).
    func defaultsConnectionClosed(_ conn: Connection) {
        guard !unlistedWatchedGroups.isEmpty, let groups = defaults.watchedGroups[conn.id] else {
            defaults.removeWatches(of: conn.id)
            return
        }
        defaults.removeWatches(of: conn.id)
        for g in groups { closeIfLastWatcherOfUnlisted(g) }
    }

    /// Group defaults in `broker.status`: open groups, watches, notifications and dropped watchers
    /// (running counters: O(1) whatever the number of groups and watches).
    func writeDefaultsStatus(_ w: inout JSONObjectWriter) {
        w.int("groupsOpen", defaults.stores.count)
        w.int("watches", defaults.watchCount)
        w.uint("notificationsSent", UInt64(defaults.notificationsSent))
        w.uint("droppedWatchers", UInt64(defaults.droppedWatchers))
        w.int("compactionErrors", defaults.compactionErrors)
    }
}
