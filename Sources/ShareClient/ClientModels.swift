// The typed values of `ShareBrokerClient`: session, url.* results, app events, share targets and
// results, defaults entries and changes, apps and status. Each keeps the broker's JSON as `raw`
// so fields added to the protocol later stay reachable.

import Foundation
import ShareProtocol

/// Reads required fields of a result, failing with `.unexpectedResponse` naming the field.
struct ResultReader {
    let value: JSONValue
    let context: String

    init(_ value: JSONValue, _ context: String) {
        self.value = value
        self.context = context
    }

    func fail(_ key: String, _ what: String) -> ShareBrokerError {
        .unexpectedResponse("\(context): '\(key)' should be \(what), got \(value[key]?.compactText ?? "nothing")")
    }

    func string(_ key: String) throws(ShareBrokerError) -> String {
        guard let s = value[key]?.stringValue else { throw fail(key, "a string") }
        return s
    }

    func int(_ key: String) throws(ShareBrokerError) -> Int {
        guard let i = value[key]?.intValue else { throw fail(key, "an integer") }
        return i
    }

    func bool(_ key: String) throws(ShareBrokerError) -> Bool {
        guard let b = value[key]?.boolValue else { throw fail(key, "a boolean") }
        return b
    }

    func array(_ key: String) throws(ShareBrokerError) -> [JSONValue] {
        guard let a = value[key]?.arrayValue else { throw fail(key, "an array") }
        return a
    }

    func optionalString(_ key: String) -> String? { value[key]?.stringValue }
}

/// The role a session says `hello` with.
public enum Role: String, Sendable, Hashable, CaseIterable {
    /// A containing app: receives events, reads its groups.
    case app
    /// A share, action or widget extension: sends shares as itself, reads its groups.
    case `extension`
    /// A command-line tool or the share sheet: opens URLs, sends shares as the share sheet.
    case tool
}

/// The broker's answer to `hello`.
public struct HelloInfo: Sendable, Equatable {
    /// The protocol version (1).
    public let protocolVersion: Int
    /// The broker's name (`sharebroker`).
    public let brokerName: String
    /// The broker's version string.
    public let brokerVersion: String
    /// The connection's session number, unique for the broker's lifetime.
    public let session: Int
    /// The role the session has.
    public let role: Role
    /// The bundle ID the session has (app and extension roles).
    public let bundleID: String?
    /// The largest message the broker reads, in bytes (nil from a broker that does not say).
    public let maxMessage: Int?
    /// The whole answer.
    public let raw: JSONValue

    init(json: JSONValue) throws(ShareBrokerError) {
        let r = ResultReader(json, "hello")
        protocolVersion = try r.int("protocol")
        brokerName = json["broker"]?["name"]?.stringValue ?? "sharebroker"
        brokerVersion = json["broker"]?["version"]?.stringValue ?? ""
        session = try r.int("session")
        guard let role = Role(rawValue: try r.string("role")) else { throw r.fail("role", "app, extension or tool") }
        self.role = role
        bundleID = r.optionalString("bundleID")
        maxMessage = json["maxMessage"]?.intValue
        raw = json
    }
}

/// How the broker opens a URL (`via` of `url.open` and of events).
public struct OpenVia: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The wire value.
    public let rawValue: String
    /// Creates a value from its wire text.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The app that registered the URL's scheme.
    public static let scheme = OpenVia(rawValue: "scheme")
    /// An https URL the app's associated domains and the site's association document give it.
    public static let universalLink = OpenVia(rawValue: "universalLink")
    /// The browser: an app registering `http`/`https`.
    public static let browser = OpenVia(rawValue: "browser")
    /// The `fallback` URL was opened instead.
    public static let fallback = OpenVia(rawValue: "fallback")
    /// The wire text.
    public var description: String { rawValue }
}

/// The answer to `url.open`.
public struct OpenResult: Sendable, Equatable {
    /// The bundle ID of the app that opens the URL.
    public let app: String
    /// How it is opened.
    public let via: OpenVia
    /// The id of the queued event (`ev-N`).
    public let eventID: String
    /// A live subscriber was sent the event.
    public let delivered: Bool
    /// No live subscriber was there; the event waits (and the app may be launched).
    public let queued: Bool
    /// The whole answer.
    public let raw: JSONValue

    init(json: JSONValue) throws(ShareBrokerError) {
        let r = ResultReader(json, "url.open")
        app = try r.string("app")
        via = OpenVia(rawValue: try r.string("via"))
        eventID = try r.string("eventID")
        delivered = try r.bool("delivered")
        queued = try r.bool("queued")
        raw = json
    }
}

/// The answer to `url.canOpen`.
public struct CanOpenResult: Sendable, Equatable {
    /// Whether some app (or the fallback) would open the URL.
    public let canOpen: Bool
    /// Which app, when `canOpen`.
    public let app: String?
    /// How, when `canOpen`.
    public let via: OpenVia?
    /// The whole answer.
    public let raw: JSONValue

    init(json: JSONValue) throws(ShareBrokerError) {
        let r = ResultReader(json, "url.canOpen")
        canOpen = try r.bool("canOpen")
        app = r.optionalString("app")
        via = r.optionalString("via").map(OpenVia.init(rawValue:))
        raw = json
    }
}

/// The answer to `url.explain`: the routing decision step by step.
public struct Explanation: Sendable, Equatable {
    /// The steps and the decision as lines of text (what `shareclient explain` prints).
    public let text: String
    /// The app that would open the URL, when one would.
    public let app: String?
    /// How it would be opened.
    public let via: OpenVia?
    /// The error `url.open` would fail with, when no app would open it.
    public let error: ShareBrokerError?
    /// The individual steps, as the broker gives them.
    public let steps: [JSONValue]
    /// The whole answer.
    public let raw: JSONValue

    init(json: JSONValue) {
        text = json["text"]?.stringValue ?? ""
        let decision = json["decision"]
        app = decision?["app"]?.stringValue
        via = decision?["via"]?.stringValue.map(OpenVia.init(rawValue:))
        if let e = decision?["error"], let rpc = RPCError(json: e) {
            error = ShareBrokerError(rpc)
        } else {
            error = nil
        }
        steps = json["steps"]?.arrayValue ?? []
        raw = json
    }
}

/// An event for the app (`app.event`): a URL to open or a universal link to continue.
///
/// Events are delivered at least once: after a reconnection (or a crash) an event that was not
/// yet acked arrives again with the same `id`. Handle and ack idempotently (remember the ids
/// you handled, or make handling harmless to repeat).
public struct AppEvent: Sendable, Identifiable {
    /// What the event asks the app to do.
    public enum Kind: Sendable, Equatable {
        /// `application(_:open:options:)`: open `url`; `sourceApp` is the bundle ID of the
        /// session that opened it (absent for tools).
        case openURL(url: String, sourceApp: String?)
        /// `application(_:continue:restorationHandler:)` with a browsing-web activity.
        case continueUserActivity(activityType: String, webpageURL: String)
        /// A kind this client does not know (see `raw`).
        case other(String)
    }

    /// The event's stable id (`ev-N`); pass it to `ack`.
    public let id: String
    /// What to do.
    public let kind: Kind
    /// How the URL reached the app (`scheme`, `universalLink`, `fallback`, …), when given.
    public let via: OpenVia?
    /// The share this event announces (`share.send` with `open`), when it does.
    public let shareID: String?
    /// The whole notification params.
    public let raw: JSONValue
    let client: ShareBrokerClient?

    /// The URL to handle: `url` of openURL, `webpageURL` of continueUserActivity.
    public var url: String? {
        switch kind {
        case .openURL(let url, _): return url
        case .continueUserActivity(_, let url): return url
        case .other: return raw["url"]?.stringValue ?? raw["webpageURL"]?.stringValue
        }
    }

    /// Builds an event from `app.event` params; nil without an `id`.
    public init?(json: JSONValue) { self.init(json: json, client: nil) }

    init?(json: JSONValue, client: ShareBrokerClient?) {
        guard let id = json["id"]?.stringValue else { return nil }
        self.id = id
        let kindName = json["kind"]?.stringValue ?? ""
        switch kindName {
        case "openURL" where json["url"]?.stringValue != nil:
            kind = .openURL(url: json["url"]!.stringValue!, sourceApp: json["sourceApp"]?.stringValue)
        case "continueUserActivity" where json["webpageURL"]?.stringValue != nil:
            kind = .continueUserActivity(
                activityType: json["activityType"]?.stringValue ?? "NSUserActivityTypeBrowsingWeb",
                webpageURL: json["webpageURL"]!.stringValue!)
        default:
            kind = .other(kindName)
        }
        via = json["via"]?.stringValue.map(OpenVia.init(rawValue:))
        shareID = json["shareID"]?.stringValue
        raw = json
        self.client = client
    }

    /// Acks this event on the client that received it (`app.ack {ids: [id]}`). Acking an event
    /// twice is harmless (the second ack counts 0). Throws as `ShareBrokerClient.ack(_:)`, and
    /// `.notConnected` for an event made with `init?(json:)`, which belongs to no client.
    public func ack() async throws(ShareBrokerError) {
        guard let client else { throw .notConnected }
        _ = try await client.ack([id])
    }
}

/// A share or action extension that accepts some items.
public struct ShareTarget: Sendable, Hashable {
    /// The extension's bundle ID.
    public let extensionID: String
    /// Its containing app's bundle ID.
    public let app: String
    /// Its display name.
    public let name: String

    /// Creates a target.
    public init(extensionID: String, app: String, name: String) {
        self.extensionID = extensionID
        self.app = app
        self.name = name
    }

    /// Reads `{extension, app, name}`.
    public init?(json: JSONValue) {
        guard let e = json["extension"]?.stringValue, let a = json["app"]?.stringValue else { return nil }
        self.init(extensionID: e, app: a, name: json["name"]?.stringValue ?? e)
    }
}

/// What `share.send` does after storing the share.
public enum ShareOpen: Sendable, Hashable, ExpressibleByBooleanLiteral {
    /// Nothing: the app finds the share with `shareList`.
    case no
    /// Opens `SCHEME://open-from-share?share=SHAREID` on the containing app (`open: true`).
    case containingApp
    /// Opens this URL instead (`open: "URL"`).
    case url(String)

    /// `true` is `.containingApp`, `false` is `.no`.
    public init(booleanLiteral value: Bool) { self = value ? .containingApp : .no }

    var json: JSONValue? {
        switch self {
        case .no: return .none
        case .containingApp: return .bool(true)
        case .url(let u): return .string(u)
        }
    }
}

/// The answer to `share.send`.
public struct ShareSendResult: Sendable, Equatable {
    /// The share's id.
    public let shareID: String
    /// The extension it was sent as (chosen by the broker for a tool).
    public let extensionID: String
    /// The containing app.
    public let app: String
    /// The group the share is stored in.
    public let group: String
    /// The event `open` queued, if any.
    public let eventID: String?
    /// The whole answer.
    public let raw: JSONValue

    init(json: JSONValue) throws(ShareBrokerError) {
        let r = ResultReader(json, "share.send")
        shareID = try r.string("shareID")
        extensionID = try r.string("extension")
        app = try r.string("app")
        group = try r.string("group")
        eventID = r.optionalString("eventID")
        raw = json
    }
}

/// A pending share as `share.list` / `share.get` give it.
public struct Share: Sendable, Equatable {
    /// Its id.
    public let shareID: String
    /// The extension that sent it.
    public let extensionID: String
    /// The containing app.
    public let app: String?
    /// The group it is stored in.
    public let group: String
    /// When it was stored (the broker's timestamp text).
    public let created: String?
    /// What was shared.
    public let items: [SharedItem]
    /// The whole record.
    public let raw: JSONValue

    init(json: JSONValue) throws(ShareBrokerError) {
        let r = ResultReader(json, "share")
        shareID = try r.string("shareID")
        extensionID = try r.string("extension")
        app = r.optionalString("app")
        group = try r.string("group")
        created = r.optionalString("created")
        items = try r.array("items").map(SharedItem.init(json:))
        raw = json
    }
}

/// One item of a received share. Data and file items are files in the group directory.
public struct SharedItem: Sendable, Equatable {
    /// The item's content.
    public enum Content: Sendable, Equatable {
        /// A URL.
        case url(String)
        /// Text.
        case text(String)
        /// A file: the absolute path of the copy inside the group directory.
        case file(path: String)
        /// Something else (see `raw`).
        case other
    }

    /// The content.
    public let content: Content
    /// Its type (a UTI such as `public.url`, `com.adobe.pdf`).
    public let type: String?
    /// The file name (file items).
    public let name: String?
    /// The size in bytes (file items).
    public let size: Int?
    /// The whole item.
    public let raw: JSONValue

    init(json: JSONValue) {
        if let u = json["url"]?.stringValue {
            content = .url(u)
        } else if let t = json["text"]?.stringValue {
            content = .text(t)
        } else if let p = json["path"]?.stringValue {
            content = .file(path: p)
        } else {
            content = .other
        }
        type = json["type"]?.stringValue
        name = json["name"]?.stringValue
        size = json["size"]?.intValue
        raw = json
    }

    /// The URL, for a URL item.
    public var url: String? { if case .url(let u) = content { return u } else { return nil } }
    /// The text, for a text item.
    public var text: String? { if case .text(let t) = content { return t } else { return nil } }
    /// The file's path, for a file item.
    public var path: String? { if case .file(let p) = content { return p } else { return nil } }
}

/// The answer to `defaults.get`.
public struct DefaultsEntry: Sendable, Equatable {
    /// Whether the key has a value.
    public let exists: Bool
    /// The value (nil when the key is absent; `.null` when the stored value is JSON null).
    public let value: JSONValue?
    /// The group's version.
    public let version: Int

    /// Creates an entry.
    public init(exists: Bool, value: JSONValue?, version: Int) {
        self.exists = exists
        self.value = value
        self.version = version
    }
}

/// The answer to `defaults.remove`.
public struct DefaultsRemoval: Sendable, Equatable {
    /// False when there was no such key (nothing changed).
    public let removed: Bool
    /// The group's version after the call.
    public let version: Int

    /// Creates a removal result.
    public init(removed: Bool, version: Int) {
        self.removed = removed
        self.version = version
    }
}

/// The answer to `defaults.list`: the whole suite.
public struct DefaultsSnapshot: Sendable, Equatable {
    /// Every key and value, keys sorted.
    public let values: JSONObject
    /// The group's version.
    public let version: Int

    /// Creates a snapshot.
    public init(values: JSONObject, version: Int) {
        self.values = values
        self.version = version
    }
}

/// A `defaults.changed` notification.
public struct DefaultsChange: Sendable, Equatable {
    /// The group.
    public let group: String
    /// The key that changed.
    public let key: String
    /// The new value; nil for a removal.
    public let value: JSONValue?
    /// True when the key was removed.
    public let removed: Bool
    /// The group's version after this change.
    public let version: Int
    /// True for a change the client made up from the group's current values after a
    /// reconnection, for one the broker took while the client was away (see
    /// `ShareBrokerClient.defaultsWatch`): the key's value (or its removal) at `version`.
    public let caughtUp: Bool
    /// The whole notification params (for a caught-up change, as the client made them up).
    public let raw: JSONValue

    /// Reads `defaults.changed` params; nil when `group` or `key` is missing.
    public init?(json: JSONValue) {
        guard let g = json["group"]?.stringValue, let k = json["key"]?.stringValue else { return nil }
        group = g
        key = k
        removed = json["removed"]?.boolValue ?? false
        // (Not a ternary: JSONValue is ExpressibleByNilLiteral, so `nil` there would be `.null`.)
        if removed {
            value = Optional<JSONValue>.none
        } else {
            value = json["value"] ?? .null
        }
        version = json["version"]?.intValue ?? -1
        caughtUp = json["caughtUp"]?.boolValue ?? false
        raw = json
    }

    /// The new value decoded as `T` (as `defaultsSet(group:key:encoding:)` wrote it); nil for a
    /// removal. Throws `.unexpectedResponse` when the value is not a `T`.
    public func value<T: Decodable>(as type: T.Type) throws(ShareBrokerError) -> T? {
        guard let value else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: Data(value.bytes))
        } catch {
            throw .unexpectedResponse("the new value of '\(key)' in \(group) is not a \(T.self): \(error)")
        }
    }
}

/// What `ShareBrokerClient.defaultsWatch` returns: the changes, an async sequence of
/// `DefaultsChange`, and the group's version when the watch began.
public struct DefaultsWatch: AsyncSequence, Sendable {
    public typealias Element = DefaultsChange
    public typealias Failure = any Error
    /// The group's version when the broker began the watch (`defaults.watch`'s answer): every
    /// change after it comes in the sequence.
    public let version: Int
    /// The keys watched; nil: every key.
    public let keys: [String]?
    /// The changes.
    public let changes: AsyncThrowingStream<DefaultsChange, any Error>

    init(version: Int, keys: [String]?, stream: AsyncThrowingStream<DefaultsChange, any Error>) {
        self.version = version
        self.keys = keys
        self.changes = stream
    }

    public func makeAsyncIterator() -> AsyncThrowingStream<DefaultsChange, any Error>.AsyncIterator {
        changes.makeAsyncIterator()
    }
}

/// An extension as `apps.list` shows it.
public struct ExtensionInfo: Sendable, Equatable {
    /// Its bundle ID.
    public let bundleID: String
    /// Its extension point (`com.apple.share-services`, …).
    public let point: String
    /// Its name.
    public let name: String?
    /// Its app groups.
    public let appGroups: [String]
    /// The manifest entry.
    public let raw: JSONValue
}

/// An app as `apps.list` shows it.
public struct AppInfo: Sendable, Equatable {
    /// Its bundle ID.
    public let bundleID: String
    /// Its name.
    public let name: String?
    /// Its team ID (needed for universal links).
    public let teamID: String?
    /// The URL schemes it registers.
    public let urlSchemes: [String]
    /// Its associated domains (`applinks:…`).
    public let associatedDomains: [String]
    /// Its app groups.
    public let appGroups: [String]
    /// Whether its manifest sets a token (tokens are never shown).
    public let hasToken: Bool
    /// Its extensions.
    public let extensions: [ExtensionInfo]
    /// The manifest entry.
    public let raw: JSONValue

    init(json: JSONValue) {
        func strings(_ v: JSONValue?) -> [String] { v?.arrayValue?.compactMap(\.stringValue) ?? [] }
        bundleID = json["bundleID"]?.stringValue ?? ""
        name = json["name"]?.stringValue
        teamID = json["teamID"]?.stringValue
        urlSchemes = strings(json["urlSchemes"])
        associatedDomains = strings(json["associatedDomains"])
        appGroups = strings(json["appGroups"])
        hasToken = json["hasToken"]?.boolValue ?? false
        extensions = (json["extensions"]?.arrayValue ?? []).map { e in
            ExtensionInfo(
                bundleID: e["bundleID"]?.stringValue ?? "", point: e["point"]?.stringValue ?? "",
                name: e["name"]?.stringValue, appGroups: strings(e["appGroups"]), raw: e)
        }
        raw = json
    }
}

/// The answer to `apps.list` / `apps.reload`.
public struct AppsReport: Sendable, Equatable {
    /// The registered apps.
    public let apps: [AppInfo]
    /// Manifest errors (a manifest with one is not loaded), as the broker reports them.
    public let errors: [JSONValue]
    /// Manifest warnings.
    public let warnings: [JSONValue]
    /// URL-scheme conflicts and who won.
    public let conflicts: [JSONValue]
    /// True right after a reload by SIGHUP while the new manifests' launches are still being
    /// checked (off the broker's loop): the launch warnings are the previous manifests' until then.
    public let launchChecksRunning: Bool
    /// The whole answer.
    public let raw: JSONValue

    init(json: JSONValue) {
        apps = (json["apps"]?.arrayValue ?? []).map(AppInfo.init(json:))
        errors = json["errors"]?.arrayValue ?? []
        warnings = json["warnings"]?.arrayValue ?? []
        conflicts = json["conflicts"]?.arrayValue ?? []
        launchChecksRunning = json["launchChecksRunning"] == true
        raw = json
    }
}

/// The answer to `broker.status` (the contract's fields; everything else is in `raw`).
public struct BrokerStatus: Sendable, Equatable {
    /// The broker's version string.
    public let version: String
    /// Open connections (the caller's included).
    public let connections: Int
    /// Registered apps.
    public let apps: Int
    /// Apps with a live subscriber.
    public let subscribers: Int
    /// Events not yet acked (delivered or not).
    public let pendingEvents: Int
    /// Shares not yet completed.
    public let pendingShares: Int
    /// Seconds since the broker started.
    public let uptimeSeconds: Double
    /// The whole answer.
    public let raw: JSONValue

    init(json: JSONValue) throws(ShareBrokerError) {
        let r = ResultReader(json, "broker.status")
        version = try r.string("version")
        connections = try r.int("connections")
        apps = try r.int("apps")
        subscribers = try r.int("subscribers")
        pendingEvents = try r.int("pendingEvents")
        pendingShares = try r.int("pendingShares")
        uptimeSeconds = json["uptimeSeconds"]?.doubleValue ?? 0
        raw = json
    }
}

/// How a client with `reconnect` enabled retries after the connection drops.
public struct ReconnectPolicy: Sendable, Equatable {
    /// The delay before the second attempt (the first is immediate).
    public var initialDelay: Duration
    /// The delay doubles after each failed attempt up to this.
    public var maxDelay: Duration
    /// Give up after this many failed attempts (nil: keep trying until `close()`).
    public var maxAttempts: Int?

    /// 50 ms doubling to 2 s, without limit by default.
    public init(initialDelay: Duration = .milliseconds(50), maxDelay: Duration = .seconds(2), maxAttempts: Int? = nil) {
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.maxAttempts = maxAttempts
    }
}

/// A change of the client's connection, from `connectionEvents()`.
public enum ConnectionEvent: Sendable, Equatable {
    /// `connect()` succeeded.
    case connected(HelloInfo)
    /// The connection dropped; with reconnection enabled the client is retrying.
    case disconnected(ShareBrokerError)
    /// The client is connected again: `hello`, `app.subscribe` and `defaults.watch` were redone.
    case reconnected(HelloInfo)
    /// The client stopped retrying (attempts exhausted or `hello` refused); streams ended with it.
    case gaveUp(ShareBrokerError)
    /// `close()` was called.
    case closed
}
