// URLRouter: the url.open / url.canOpen decision (custom scheme, universal link, browser, fallback),
// with indexes built once (scheme → apps, domain → apps) so a decision never scans every app, and an
// explanation mode that records every step in words.

import ShareProtocol

/// How a URL reached its app (the contract's `via`).
public enum RouteVia: String, Sendable, Equatable {
    /// The app registered the URL's custom scheme.
    case scheme
    /// The app's associated domain and the host's association document give it the https URL.
    case universalLink
    /// No universal link: the app registering `https` (or `http`) opens it.
    case browser
    /// The URL had no handler; its `fallback` URL was opened instead.
    case fallback
}

/// The `app.event` kind the app receives.
public enum RouteKind: String, Sendable, Equatable {
    /// `openURL {url}`: schemes and browsers.
    case openURL
    /// `continueUserActivity {activityType: NSUserActivityTypeBrowsingWeb, webpageURL}`: universal links.
    case continueUserActivity
}

/// The outcome of routing a URL: who opens what, or the JSON-RPC error to answer with.
public enum RouteDecision: Sendable, Equatable {
    /// `app` (bundle ID) opens `url` (the fallback URL when `via` is `.fallback`), delivered as `kind`.
    case routed(app: String, via: RouteVia, kind: RouteKind, url: String)
    /// The URL is not a valid URL (-32602).
    case invalidURL(URLParseError)
    /// The fallback is not a valid URL (-32602).
    case invalidFallback(URLParseError)
    /// Nothing opens the URL, nor its fallback if one was given (-32004).
    case noHandler(url: String, fallback: String?)

    /// The bundle ID that opens the URL, when routed.
    public var app: String? { if case .routed(let a, _, _, _) = self { return a } else { return nil } }
    /// `via`, when routed.
    public var via: RouteVia? { if case .routed(_, let v, _, _) = self { return v } else { return nil } }
    /// The event kind, when routed.
    public var kind: RouteKind? { if case .routed(_, _, let k, _) = self { return k } else { return nil } }
    /// The URL that is opened, when routed.
    public var url: String? { if case .routed(_, _, _, let u) = self { return u } else { return nil } }
    /// True when routed.
    public var isRouted: Bool { app != nil }

    /// The JSON-RPC error code: -32602 (invalid URL or fallback), -32004 (no handler); nil when routed.
    public var errorCode: Int? {
        switch self {
        case .routed: return nil
        case .invalidURL, .invalidFallback: return -32602
        case .noHandler: return -32004
        }
    }

    /// The error message (names the URL); nil when routed.
    public var errorMessage: String? {
        switch self {
        case .routed: return nil
        case .invalidURL(let e): return e.message
        case .invalidFallback(let e):
            return "invalid fallback URL '\(URLParseError.display(e.input))': \(e.reason)"
        case .noHandler(let url, let fallback):
            if let fallback {
                return "no handler for '\(URLParseError.display(url))', nor for its fallback '\(URLParseError.display(fallback))'"
            }
            return "no handler for '\(URLParseError.display(url))' and no fallback was given"
        }
    }

    /// `{app, via, kind, url}` when routed, `{error: {code, message}}` otherwise.
    public var json: JSONValue {
        switch self {
        case .routed(let app, let via, let kind, let url):
            return ["app": .string(app), "via": .string(via.rawValue), "kind": .string(kind.rawValue), "url": .string(url)]
        default:
            return ["error": ["code": .int(errorCode ?? 0), "message": .string(errorMessage ?? "")]]
        }
    }
}

/// The decision plus every step that led to it, in order, in words (what `explain` prints).
public struct RouteExplanation: Sendable, Equatable {
    /// The URL as given.
    public var url: String
    /// The fallback as given.
    public var fallback: String?
    /// The steps, e.g. "scheme 'stats' is registered by com.example.stats".
    public var steps: [String]
    /// The decision (identical to `resolve`'s).
    public var decision: RouteDecision

    /// `{url, fallback?, steps, decision, text}`.
    public var json: JSONValue {
        var o: JSONObject = ["url": .string(url)]
        if let fallback { o["fallback"] = .string(fallback) }
        o["steps"] = .array(steps.map { .string($0) })
        o["decision"] = decision.json
        o["text"] = .string(text)
        return .object(o)
    }

    /// The steps and the decision as plain text, one step a line.
    public var text: String {
        var lines = steps
        switch decision {
        case .routed(let app, let via, let kind, let url):
            lines.append("decision: \(app) opens '\(url)' via \(via.rawValue) (\(kind.rawValue))")
        default:
            lines.append("decision: error \(decision.errorCode ?? 0): \(decision.errorMessage ?? "")")
        }
        return lines.joined(separator: "\n")
    }
}

/// The answer to `url.canOpen`: `app` and `via` are set whenever `canOpen` is true.
public struct CanOpenAnswer: Sendable, Equatable {
    /// Whether some app opens the URL.
    public var canOpen: Bool
    /// Who opens it.
    public var app: String?
    /// How.
    public var via: RouteVia?

    /// Creates an answer.
    public init(canOpen: Bool, app: String? = nil, via: RouteVia? = nil) {
        self.canOpen = canOpen
        self.app = app
        self.via = via
    }

    /// The answer `decision` gives (nil for an invalid URL or fallback: the decision says why).
    public init?(_ decision: RouteDecision) {
        switch decision {
        case .routed(let app, let via, _, _): self.init(canOpen: true, app: app, via: via)
        case .noHandler: self.init(canOpen: false)
        case .invalidURL, .invalidFallback: return nil
        }
    }

    /// `{canOpen, app?, via?}`.
    public var json: JSONValue {
        var o: JSONObject = ["canOpen": .bool(canOpen)]
        if let app { o["app"] = .string(app) }
        if let via { o["via"] = .string(via.rawValue) }
        return .object(o)
    }
}

/// Decides which app opens a URL, as the contract says (CONTRACT.md, url.open / url.canOpen):
///
/// - a scheme other than http/https: the app registering the scheme (case-insensitive) → `.scheme`;
/// - `https`: a universal link (an app whose `applinks:` entries cover the host and whose app ID the
///   host's association document gives the URL to) → `.universalLink`, else an app registering `https`
///   → `.browser`; `http` skips the universal-link step and its browser is an app registering `http`;
/// - otherwise the fallback, routed the same way → `.fallback` (a fallback reached through a universal
///   link is delivered as `continueUserActivity`); otherwise no handler.
///
/// Which document: `applinks:HOST` uses HOST's; `applinks:*.DOMAIN` covers the subdomains of DOMAIN (at
/// any depth, not DOMAIN itself) and uses DOMAIN's document (TN3155: a wildcard's file is served by the
/// root domain). When several entries of one app cover a host the most specific counts: the exact host,
/// then the longest wildcard domain. Hosts compare case-insensitively. Ports: a URL's port is part of the
/// domain it is matched against, except https's default 443 (`https://h:443/` is `https://h/`);
/// `applinks:h:8443` (the iOS 9.3 `host:port` form) covers `https://h:8443/` and uses the document
/// registered under `h:8443`; `applinks:h` does not cover `https://h:8443/`. `?mode=developer|managed`
/// suffixes are honoured as on a device with both modes active (the broker reads documents from disk,
/// as developer mode bypasses Apple's CDN).
///
/// Precedence: two apps registering one scheme, or two browsers: the earlier in `apps` wins, and
/// `conflicts` lists them. Two apps that both get a universal link: the earlier in `apps` wins, except
/// that when they use the same document its order decides (Apple: "The first match wins, allowing you
/// to designate one app to handle specified URLs in your website, and another app to handle the rest").
public struct URLRouter: Sendable {
    /// The tables, built once and never changed, behind one reference: a copy of the router (the
    /// broker makes one per request) retains one object instead of six arrays and dictionaries.
    final class Tables: Sendable {
        let apps: [AppManifest]
        let conflicts: [String: [String]]
        let associations: [String: AssociationDocumentResult]
        let schemeIndex: [String: [Int]]
        let exactDomains: [String: [DomainClaim]]
        let wildcardDomains: [String: [DomainClaim]]

        init(
            apps: [AppManifest], conflicts: [String: [String]], associations: [String: AssociationDocumentResult],
            schemeIndex: [String: [Int]], exactDomains: [String: [DomainClaim]], wildcardDomains: [String: [DomainClaim]]
        ) {
            self.apps = apps
            self.conflicts = conflicts
            self.associations = associations
            self.schemeIndex = schemeIndex
            self.exactDomains = exactDomains
            self.wildcardDomains = wildcardDomains
        }
    }
    let tables: Tables

    /// The apps, in precedence order (earlier wins).
    public var apps: [AppManifest] { tables.apps }
    /// Schemes (lowercased) registered by more than one app → their bundle IDs in precedence order.
    public var conflicts: [String: [String]] { tables.conflicts }
    /// The association documents, by host (lowercased; `host:port` for port entries).
    public var associations: [String: AssociationDocumentResult] { tables.associations }

    struct DomainClaim: Sendable {
        var app: Int
        var entry: AssociatedDomainEntry
        var text: String
        /// The association document's key: the entry's host (with its port, if any).
        var documentKey: String
    }

    var schemeIndex: [String: [Int]] { tables.schemeIndex }
    var exactDomains: [String: [DomainClaim]] { tables.exactDomains }
    var wildcardDomains: [String: [DomainClaim]] { tables.wildcardDomains }

    /// Builds the indexes. `apps` are in precedence order (earlier wins); `associations` maps a host
    /// (lowercased) to its parsed document or the reason it was rejected.
    public init(apps: [AppManifest], associations: [String: AssociationDocumentResult]) {
        var docs: [String: AssociationDocumentResult] = [:]
        for (k, v) in associations { docs[URLReference.asciiLowercased(k)] = v }

        var schemes: [String: [Int]] = [:]
        var exact: [String: [DomainClaim]] = [:]
        var wildcard: [String: [DomainClaim]] = [:]
        for (i, app) in apps.enumerated() {
            for s in app.urlSchemes {
                let key = URLScheme.normalize(s)
                if schemes[key]?.last != i { schemes[key, default: []].append(i) }
            }
            for text in app.associatedDomains {
                guard let e = AssociatedDomainEntry(text), e.service == "applinks" else { continue }
                let key = URLRouter.domainKey(e.host)
                let claim = DomainClaim(app: i, entry: e, text: text, documentKey: key)
                if e.wildcard { wildcard[key, default: []].append(claim) } else { exact[key, default: []].append(claim) }
            }
        }
        var c: [String: [String]] = [:]
        for (s, list) in schemes where list.count > 1 {
            var ids: [String] = []
            for i in list where !ids.contains(apps[i].bundleID) { ids.append(apps[i].bundleID) }
            if ids.count > 1 { c[s] = ids }
        }
        tables = Tables(
            apps: apps, conflicts: c, associations: docs, schemeIndex: schemes, exactDomains: exact, wildcardDomains: wildcard)
    }

    /// `host` or `host:port` lowercased, with https's default port 443 dropped: how documents
    /// (`STATE/associations/HOST.json`) and `applinks:` entries name a domain.
    public static func domainKey(_ hostMaybePort: String) -> String {
        let h = URLReference.asciiLowercased(hostMaybePort)
        if h.hasSuffix(":443") { return String(h.dropLast(4)) }
        return h
    }

    // MARK: - Public API

    /// The decision for `url.open {url, fallback?}`. Both URLs are validated first: an invalid `url` is
    /// `.invalidURL`, an invalid `fallback` is `.invalidFallback` even when `url` itself would resolve
    /// (both -32602). A fallback is routed like any URL (scheme, universal link, browser) but gets no
    /// fallback of its own; `kind` is how its app receives it.
    public func resolve(_ url: String, fallback: String?) -> RouteDecision {
        var trace = Trace(enabled: false)
        return decide(url, fallback: fallback, &trace)
    }

    /// The decision with every step explained.
    public func explain(_ url: String, fallback: String?) -> RouteExplanation {
        var trace = Trace(enabled: true)
        let d = decide(url, fallback: fallback, &trace)
        return RouteExplanation(url: url, fallback: fallback, steps: trace.steps, decision: d)
    }

    /// The answer for `url.canOpen {url, fallback?}`: the decision `url.open` would take
    /// (`resolve`), nothing queued. Throws why the URL, or the fallback, is not valid (-32602).
    public func canOpen(_ url: String, fallback: String? = nil) throws(URLParseError) -> CanOpenAnswer {
        let decision = resolve(url, fallback: fallback)
        if let answer = CanOpenAnswer(decision) { return answer }
        switch decision {
        case .invalidURL(let e), .invalidFallback(let e): throw e
        case .routed, .noHandler: return CanOpenAnswer(canOpen: false)  // (answered above)
        }
    }

    // MARK: - The decision

    struct Trace {
        let enabled: Bool
        var steps: [String] = []
        var indent = ""
        init(enabled: Bool) { self.enabled = enabled }
        mutating func add(_ s: @autoclosure () -> String) { if enabled { steps.append(indent + s()) } }
    }

    struct Hit {
        var app: String
        var via: RouteVia
        var kind: RouteKind
    }

    func decide(_ text: String, fallback: String?, _ trace: inout Trace) -> RouteDecision {
        let url: URLReference
        do { url = try URLReference(parsingLeniently: text) } catch {
            trace.add("'\(URLParseError.display(text))' is not a valid URL: \(error.reason)")
            return .invalidURL(error)
        }
        var fallbackURL: URLReference? = nil
        if let fallback {
            do { fallbackURL = try URLReference(parsingLeniently: fallback) } catch {
                trace.add("the fallback '\(URLParseError.display(fallback))' is not a valid URL: \(error.reason)")
                return .invalidFallback(error)
            }
        }
        if let hit = route(url, &trace) {
            return .routed(app: hit.app, via: hit.via, kind: hit.kind, url: url.original)
        }
        guard let fallbackURL, let fallback else {
            trace.add("no fallback was given: no handler")
            return .noHandler(url: url.original, fallback: nil)
        }
        trace.add("trying the fallback '\(fallback)', routed the same way")
        let saved = trace.indent
        trace.indent += "  "
        let hit = route(fallbackURL, &trace)
        trace.indent = saved
        if let hit {
            trace.add(
                "the fallback is opened by \(hit.app) (found via \(hit.via.rawValue), delivered as \(hit.kind.rawValue))")
            return .routed(app: hit.app, via: .fallback, kind: hit.kind, url: fallbackURL.original)
        }
        trace.add("the fallback has no handler either")
        return .noHandler(url: url.original, fallback: fallbackURL.original)
    }

    /// Scheme / universal link / browser for one URL (no fallback).
    func route(_ url: URLReference, _ trace: inout Trace) -> Hit? {
        let scheme = url.normalizedScheme
        if scheme != "http" && scheme != "https" {
            if let app = schemeOwner(scheme, &trace, role: "scheme") {
                return Hit(app: app, via: .scheme, kind: .openURL)
            }
            return nil
        }
        if scheme == "https" {
            if let app = universalLink(url, &trace) {
                return Hit(app: app, via: .universalLink, kind: .continueUserActivity)
            }
        } else {
            trace.add("http URLs skip the universal-link step (universal links are https only)")
        }
        if let app = schemeOwner(scheme, &trace, role: "browser") {
            return Hit(app: app, via: .browser, kind: .openURL)
        }
        return nil
    }

    func schemeOwner(_ scheme: String, _ trace: inout Trace, role: String) -> String? {
        guard let owners = schemeIndex[scheme], let first = owners.first else {
            trace.add(
                role == "browser"
                    ? "no app registers the '\(scheme)' scheme, so there is no browser"
                    : "no app registers the scheme '\(scheme)'")
            return nil
        }
        let winner = apps[first].bundleID
        if owners.count > 1 {
            trace.add(
                "the scheme '\(scheme)' is registered by \(owners.map { apps[$0].bundleID }.joined(separator: ", ")): "
                    + "\(winner) wins (earliest app: first manifest in file-name order)" + (role == "browser" ? " as the browser" : ""))
        } else {
            trace.add(
                role == "browser"
                    ? "\(winner) registers '\(scheme)': it is the browser"
                    : "the scheme '\(scheme)' is registered by \(winner)")
        }
        return winner
    }

    /// The app that gets `url` (https) as a universal link, if any.
    func universalLink(_ url: URLReference, _ trace: inout Trace) -> String? {
        let host = url.host ?? ""
        // A host with an empty label (`.example.org`, `a..example.org`) names no domain: it is
        // no subdomain of what a `*.` entry covers, nor any entry's host.
        if host.isEmpty || host.utf8.first == UInt8(ascii: ".") || host.contains("..") {
            trace.add("the host '\(host)' has an empty label: no universal link")
            return nil
        }
        let portSuffix = (url.port == nil || url.port == 443) ? "" : ":\(url.port!)"
        let hostKey = host + portSuffix
        // Most specific claim per app: exact host first, then wildcard domains from longest to shortest.
        var best: [Int: DomainClaim] = [:]
        var order: [Int] = []
        var shadowed: [DomainClaim] = []
        func consider(_ c: DomainClaim) {
            if best[c.app] == nil {
                best[c.app] = c
                order.append(c.app)
            } else if trace.enabled {
                shadowed.append(c)
            }
        }
        for c in exactDomains[hostKey] ?? [] { consider(c) }
        var rest = Substring(host)
        while let dot = rest.firstIndex(of: ".") {
            rest = rest[rest.index(after: dot)...]
            if rest.isEmpty { break }
            for c in wildcardDomains[String(rest) + portSuffix] ?? [] { consider(c) }
        }
        if order.isEmpty {
            trace.add("no app's associatedDomains has an applinks: entry covering '\(hostKey)': no universal link")
            return nil
        }
        order.sort()
        if trace.enabled {
            trace.add(
                "applinks: entries covering '\(hostKey)': "
                    + order.map { "\(apps[$0].bundleID) ('\(best[$0]!.text)')" }.joined(separator: ", "))
            for c in shadowed {
                trace.add("  \(apps[c.app].bundleID)'s '\(c.text)' is less specific than '\(best[c.app]!.text)' and does not count")
            }
        }
        var matched: [(app: Int, documentKey: String, detail: Int)] = []
        // One budget for the URL, whatever the number of apps and documents (AssociationDocument.matchingBudget).
        var budget = AssociationDocument.matchingBudget
        for i in order {
            let claim = best[i]!
            let app = apps[i]
            guard let appID = app.appID else {
                trace.add("  \(app.bundleID) has no teamID, so it has no app ID and cannot get universal links")
                continue
            }
            if trace.enabled, let mode = claim.entry.mode {
                trace.add("  '\(claim.text)' has ?mode=\(mode): honoured (the broker reads association files from disk, as developer mode does)")
            }
            func docNote() -> String {
                claim.entry.wildcard
                    ? "'\(claim.text)' covers subdomains of '\(claim.documentKey)' and uses its document"
                    : "'\(claim.text)' uses the document of '\(claim.documentKey)'"
            }
            guard let result = associations[claim.documentKey] else {
                trace.add("  \(app.bundleID): \(docNote()), but there is none (associations/\(claim.documentKey).json)")
                continue
            }
            switch result {
            case .failure(let e):
                trace.add("  \(app.bundleID): \(docNote()), which is malformed (\(e)); it matches nothing")
            case .success(let doc):
                trace.add("  \(app.bundleID) (\(appID)): \(docNote())")
                let m = doc.evaluate(url: url, appID: appID, trace: trace.enabled, budget: &budget)
                for line in m.trail { trace.add("    " + line) }
                if m.outcome == .matched, let d = m.detailIndex {
                    matched.append((i, claim.documentKey, d))
                }
            }
        }
        guard let first = matched.first else {
            trace.add("no app gets '\(url.original)' as a universal link")
            return nil
        }
        // The earliest app wins, except that the same document's own order decides between its apps.
        var winner = first
        for m in matched.dropFirst() where m.documentKey == first.documentKey && m.detail < winner.detail {
            winner = m
        }
        if trace.enabled {
            if matched.count > 1 {
                let names = matched.map { apps[$0.app].bundleID }.joined(separator: ", ")
                let why =
                    winner.app == first.app
                    ? "the earliest app in precedence order"
                    : "its details entry comes first in the shared document '\(winner.documentKey)'"
                trace.add("universal link matched for \(names): \(apps[winner.app].bundleID) wins (\(why))")
            } else {
                trace.add("universal link: \(apps[winner.app].bundleID) opens it")
            }
        }
        return apps[winner.app].bundleID
    }
}
