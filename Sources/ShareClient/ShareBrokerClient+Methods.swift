// The typed methods of ShareBrokerClient, one per contract method: url.*, share.*, defaults.*,
// apps.*, broker.status and rpc.discover. Each builds the params, calls, and decodes the result
// into the types of ClientModels.swift; broker errors arrive as ShareBrokerError cases.

import Foundation
import ShareProtocol
import ShareSystem

extension ShareBrokerClient {
    // MARK: URLs

    /// Opens a URL (`url.open`): the broker routes it (scheme, universal link, browser, else
    /// `fallback`) and queues a durable event for the app. Throws `.noHandler` when nothing opens
    /// it and no fallback was given, `.invalidParams` for an invalid URL or fallback,
    /// `.storageFailure` when the event could not be stored (also when the app has too many
    /// unacked events: `serve --max-pending-events`).
    @discardableResult
    public func urlOpen(_ url: String, fallback: String? = nil) async throws(ShareBrokerError) -> OpenResult {
        var p: JSONObject = ["url": .string(url)]
        if let fallback { p["fallback"] = .string(fallback) }
        return try OpenResult(json: try await call("url.open", .object(p)))
    }

    /// Whether a URL can be opened, and by whom (`url.canOpen`); queues nothing. A URL nothing
    /// opens gives `canOpen: false`, not an error; throws `.invalidParams` for an invalid URL (or
    /// fallback). With a `fallback`, whether `urlOpen(_:fallback:)` would open the URL or its
    /// fallback (`via` `.fallback`).
    public func canOpen(_ url: String, fallback: String? = nil) async throws(ShareBrokerError) -> CanOpenResult {
        var params: JSONObject = ["url": .string(url)]
        if let fallback { params["fallback"] = .string(fallback) }
        return try CanOpenResult(json: try await call("url.canOpen", .object(params)))
    }

    /// The routing decision for a URL, step by step (`url.explain`). Does not throw for an
    /// invalid URL or one nothing opens: the error `url.open` would give is in
    /// `Explanation.error`.
    public func explain(_ url: String, fallback: String? = nil) async throws(ShareBrokerError) -> Explanation {
        var p: JSONObject = ["url": .string(url)]
        if let fallback { p["fallback"] = .string(fallback) }
        return Explanation(json: try await call("url.explain", .object(p)))
    }

    // MARK: Shares

    /// The share and action extensions whose activation rule accepts these items as a whole
    /// (`share.targets`); none is an empty list, not an error. Throws `.invalidParams` for an
    /// empty `items`, or a `.file` path that is not absolute or cannot be read. `.file` items to a
    /// broker of another user are sent as their bytes, as `shareSend` does.
    public func shareTargets(_ items: [ShareItem]) async throws(ShareBrokerError) -> [ShareTarget] {
        let r = try await callWithItems("share.targets", [:], items)
        return try ResultReader(r, "share.targets").array("targets").compactMap(ShareTarget.init(json:))
    }

    /// Sends a share (`share.send`); it is durable in the group when this returns.
    ///
    /// As an extension the share is sent as itself (`extension` may be left out); as a tool the
    /// broker picks the one extension that accepts the items, or the one named. `open: true`
    /// also opens `SCHEME://open-from-share?share=SHAREID` on the containing app; `.url(…)` opens
    /// that URL instead. Throws `.notAccepted` (with `candidates` when several extensions would
    /// and none was named; also for an extension that is not a share or action extension, such
    /// as a widget), `.unauthorized` for a group the extension is not entitled to, for an
    /// extension naming another extension, and for role app, `.notFound` when a tool names an
    /// extension no manifest declares, `.invalidParams` for a `.file` path that is not absolute
    /// or cannot be read, `.noHandler` when nothing opens `open: .url(…)` (nothing is stored),
    /// `.invalidRequest` when the items are over the broker's `maxMessage` (not sent).
    ///
    /// A broker running as another user than the caller's takes no `.file` item from it (it
    /// answers -32602 with `data.reason` `pathItemsRefused`): the files are then read here, with
    /// the caller's own rights, and sent again as `.data` items (named after the file, with the
    /// item's type), as `shareclient send --file` does. Sent so, they must fit in one message:
    /// files that would not are refused with `.invalidRequest` naming the broker's limit (before
    /// they are read); a file the caller cannot read gives `.invalidParams` naming it.
    @discardableResult
    public func shareSend(
        _ items: [ShareItem], extension ext: String? = nil, group: String? = nil, open: ShareOpen = .no
    ) async throws(ShareBrokerError) -> ShareSendResult {
        var p = JSONObject()
        if let ext { p["extension"] = .string(ext) }
        if let group { p["group"] = .string(group) }
        if let o = open.json { p["open"] = o }
        return try ShareSendResult(json: try await callWithItems("share.send", p, items))
    }

    /// Calls `method` with `params` and `items`; when the broker refuses `.file` items because it
    /// runs as another user (`pathItemsRefused`), calls it again with the files' bytes.
    func callWithItems(_ method: String, _ params: JSONObject, _ items: [ShareItem]) async throws(ShareBrokerError) -> JSONValue {
        var p = params
        p["items"] = .array(items.map(\.json))
        let hasFiles = items.contains { if case .file = $0 { return true } else { return false } }
        guard hasFiles else { return try await call(method, .object(p)) }
        let deadline = callDeadline()
        let (result, data) = try await callOnLiveConnection(method, .object(p), deadline: deadline, keepErrorData: true)
        guard case .failure(.invalidParams) = result, data?["reason"]?.stringValue == "pathItemsRefused" else {
            return try result.get()
        }
        p["items"] = .array(try inlineFiles(items).map(\.json))
        return try await callOnLiveConnection(method, .object(p), deadline: deadline).result.get()
    }

    /// `items` with each `.file` replaced by its bytes (`.data`, named after the file, with the
    /// item's type), read with the caller's rights, symlinks followed. Throws `.invalidRequest`
    /// when they would be over the broker's message limit (checked from the files' sizes before
    /// reading them), `.invalidParams` for a file that cannot be read.
    func inlineFiles(_ items: [ShareItem]) throws(ShareBrokerError) -> [ShareItem] {
        let limit = messageLimit ?? Int.max
        var encoded = 1024
        var paths: [String] = []
        for item in items {
            if case .file(let path, _) = item { paths.append(path) } else { encoded += item.json.bytes.count }
        }
        do { encoded += try FileInlining.encodedSize(ofFiles: paths) } catch {
            throw .invalidParams(message: "Invalid params: cannot read \(error.path): \(error.reason)")
        }
        if encoded > limit {
            throw .invalidRequest(
                message: "Invalid Request: the files take about \(encoded) bytes sent inline, over the broker's message limit of \(limit) bytes (sharebroker serve --max-message); this broker runs as another user and takes no path from this caller, so its limit must be raised to share them; nothing was sent")
        }
        return try items.map { (item) throws(ShareBrokerError) -> ShareItem in
            guard case .file(let path, let type) = item else { return item }
            do throws(FileInlining.Failure) { return try FileInlining.dataItem(path: path, type: type, limit: limit) } catch {
                throw .invalidParams(message: "Invalid params: cannot read \(error.path): \(error.reason)")
            }
        }
    }

    /// The pending shares of the caller's groups (or of `group`), oldest first (`share.list`).
    /// Throws `.unauthorized` for a `group` the bundle does not list in its `appGroups` (and for
    /// a tool).
    public func shareList(group: String? = nil) async throws(ShareBrokerError) -> [Share] {
        var p = JSONObject()
        if let group { p["group"] = .string(group) }
        let r = try await call("share.list", .object(p))
        var out: [Share] = []
        for s in try ResultReader(r, "share.list").array("shares") { out.append(try Share(json: s)) }
        return out
    }

    /// One pending share (`share.get`); file items carry the path of the copy in the group
    /// directory. Throws `.notFound` for an unknown or completed id, `.unauthorized` when the
    /// share's group is not the bundle's (and for a tool).
    public func shareGet(_ shareID: String) async throws(ShareBrokerError) -> Share {
        try Share(json: try await call("share.get", ["shareID": .string(shareID)]))
    }

    /// Bytes of a share's file item (`share.read`): up to `length` bytes (the broker's default,
    /// 1 MiB, when nil; at most 4 MiB) from `offset`. For an app that cannot open the item's
    /// `path` itself (a broker of another user keeps its group directory to itself).
    /// Throws `.notFound` for an unknown or completed id, `.invalidParams` when `item` is out of
    /// range or not a file item (a URL or text item), `.unauthorized` when the share's group is
    /// not the bundle's, `.storageFailure` when the file cannot be read.
    public func shareRead(_ shareID: String, item: Int, offset: Int = 0, length: Int? = nil) async throws(ShareBrokerError)
        -> ShareChunk
    {
        var p: JSONObject = ["shareID": .string(shareID), "item": .int(item), "offset": .int(offset)]
        if let length { p["length"] = .int(length) }
        return try ShareChunk(json: try await call("share.read", .object(p)))
    }

    /// The whole content of a share's file item, read with `share.read` a chunk at a time.
    /// Throws as `shareRead`.
    public func shareItemBytes(_ shareID: String, item: Int) async throws(ShareBrokerError) -> [UInt8] {
        var out: [UInt8] = []
        while true {
            let chunk = try await shareRead(shareID, item: item, offset: out.count)
            out += chunk.data
            if chunk.eof || chunk.data.isEmpty { return out }
        }
    }

    /// Marks a share done (`share.complete`): its record and files are deleted. Throws
    /// `.notFound` for an unknown id, also one already completed (so a redelivered event's
    /// second `shareComplete` fails: treat `.notFound` as done), `.unauthorized` when the
    /// share's group is not the bundle's.
    public func shareComplete(_ shareID: String) async throws(ShareBrokerError) {
        _ = try await call("share.complete", ["shareID": .string(shareID)])
    }

    // MARK: Group defaults

    /// A key of a group's defaults (`defaults.get`). A missing key is `exists: false`, not an
    /// error. Throws `.unauthorized` when the group is not in the bundle's `appGroups` (and for a
    /// tool).
    public func defaultsGet(group: String, key: String) async throws(ShareBrokerError) -> DefaultsEntry {
        let r = try await call("defaults.get", ["group": .string(group), "key": .string(key)])
        let reader = ResultReader(r, "defaults.get")
        let exists = try reader.bool("exists")
        let value: JSONValue? = exists ? .some(r["value"] ?? .null) : .none
        return DefaultsEntry(exists: exists, value: value, version: r["version"]?.intValue ?? -1)
    }

    /// A key decoded with `JSONDecoder` (nil when the key does not exist). Throws
    /// `.unexpectedResponse` when the stored value is not a `T`, and as `defaultsGet(group:key:)`.
    public func defaultsGet<T: Decodable>(group: String, key: String, as type: T.Type) async throws(ShareBrokerError) -> T? {
        let entry = try await defaultsGet(group: group, key: key)
        guard entry.exists, let value = entry.value else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: Data(value.bytes))
        } catch {
            throw .unexpectedResponse("the value of '\(key)' in \(group) is not a \(T.self): \(error)")
        }
    }

    /// Sets a key (`defaults.set`) to any JSON value; returns the group's new version. With
    /// `ifVersion` it is a compare-and-set: when the group is not at that version nothing changes
    /// and the call throws `.versionConflict(current:)`. Also throws `.unauthorized` when the
    /// group is not in the bundle's `appGroups` (and for a tool), `.invalidParams` for an empty
    /// key or a value over 1 MiB, `.storageFailure` when the change could not be stored (the
    /// suite would pass 16 MiB, a full disk).
    @discardableResult
    public func defaultsSet(group: String, key: String, value: JSONValue, ifVersion: Int? = nil) async throws(ShareBrokerError)
        -> Int
    {
        var p: JSONObject = ["group": .string(group), "key": .string(key), "value": value]
        if let ifVersion { p["ifVersion"] = .int(ifVersion) }
        return try ResultReader(try await call("defaults.set", .object(p)), "defaults.set").int("version")
    }

    /// Sets a key to a value encoded with `JSONEncoder`; returns the group's new version.
    /// Throws `.invalidParams` when `JSONEncoder` cannot encode the value (`Double.nan`, say;
    /// nothing is sent), and as `defaultsSet(group:key:value:ifVersion:)`.
    @discardableResult
    public func defaultsSet<T: Encodable>(group: String, key: String, encoding value: T, ifVersion: Int? = nil)
        async throws(ShareBrokerError) -> Int
    {
        let json: JSONValue
        do {
            json = try JSONParser.parse([UInt8](try JSONEncoder().encode(value)))
        } catch {
            throw .invalidParams(message: "cannot encode the value for '\(key)' as JSON: \(error)")
        }
        return try await defaultsSet(group: group, key: key, value: json, ifVersion: ifVersion)
    }

    /// Removes a key (`defaults.remove`). `removed` is false when there was no such key (then
    /// nothing changes). `ifVersion` as for `defaultsSet`: throws `.versionConflict(current:)`
    /// when the group is not at that version. Throws `.unauthorized` when the group is not in
    /// the bundle's `appGroups` (and for a tool).
    @discardableResult
    public func defaultsRemove(group: String, key: String, ifVersion: Int? = nil) async throws(ShareBrokerError)
        -> DefaultsRemoval
    {
        var p: JSONObject = ["group": .string(group), "key": .string(key)]
        if let ifVersion { p["ifVersion"] = .int(ifVersion) }
        let r = ResultReader(try await call("defaults.remove", .object(p)), "defaults.remove")
        return DefaultsRemoval(removed: try r.bool("removed"), version: try r.int("version"))
    }

    /// Every key of a group's defaults and its version (`defaults.list`). Throws
    /// `.unauthorized` when the group is not in the bundle's `appGroups` (and for a tool).
    public func defaultsList(group: String) async throws(ShareBrokerError) -> DefaultsSnapshot {
        let r = try await call("defaults.list", ["group": .string(group)])
        guard let values = r["values"]?.objectValue else {
            throw ResultReader(r, "defaults.list").fail("values", "an object")
        }
        let snapshot = DefaultsSnapshot(values: values, version: try ResultReader(r, "defaults.list").int("version"))
        noteListed(group: group, keys: values.map { ExactKey($0.key) })
        return snapshot
    }

    // MARK: Apps and broker

    /// The registered apps, manifest errors, warnings and scheme conflicts (`apps.list`). Throws
    /// only what every call can (see `ShareBrokerClient`).
    public func appsList() async throws(ShareBrokerError) -> AppsReport {
        AppsReport(json: try await call("apps.list"))
    }

    /// Re-reads the manifests and association documents, then reports as `appsList` (`apps.reload`).
    /// Throws `.unauthorized` for a caller of another user than the broker's (a broker serving
    /// several users).
    public func appsReload() async throws(ShareBrokerError) -> AppsReport {
        AppsReport(json: try await call("apps.reload"))
    }

    /// The broker's counters (`broker.status`). Throws what every call can (see
    /// `ShareBrokerClient`), and `.unexpectedResponse` when a contract field is missing.
    public func status() async throws(ShareBrokerError) -> BrokerStatus {
        try BrokerStatus(json: try await call("broker.status"))
    }

    /// The broker's OpenRPC document (`rpc.discover`). Throws only what every call can (see
    /// `ShareBrokerClient`).
    public func discover() async throws(ShareBrokerError) -> JSONValue {
        try await call("rpc.discover")
    }
}

/// A piece of a share's file item (`share.read`).
public struct ShareChunk: Sendable, Equatable {
    /// The bytes read.
    public let data: [UInt8]
    /// Where they start in the file.
    public let offset: Int
    /// The file's whole size.
    public let size: Int
    /// Whether they reach the end of the file.
    public let eof: Bool

    /// Decodes a `share.read` result. Throws `.unexpectedResponse` naming the field when one is
    /// missing or of the wrong type, or `data` is not base64.
    public init(json: JSONValue) throws(ShareBrokerError) {
        let r = ResultReader(json, "share.read")
        guard let bytes = Data(base64Encoded: try r.string("data")) else { throw r.fail("data", "base64") }
        data = [UInt8](bytes)
        offset = try r.int("offset")
        size = try r.int("size")
        eof = try r.bool("eof")
    }
}
