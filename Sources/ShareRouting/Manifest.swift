// App manifests (STATE/apps/*.json): the plain values the broker uses, and their validation.
// Every problem names the file and the field; one bad manifest never stops the others.

import ShareProtocol

/// Where each entry of a cleaned list stood in the manifest's own list, for the field paths of
/// warnings made later (`AppRegistry`). Not part of what a manifest says: two manifests equal but
/// for entries left out are equal.
struct SourceIndices: Sendable, Equatable {
    var list: [Int] = []
    init(_ list: [Int] = []) { self.list = list }
    static func == (_: SourceIndices, _: SourceIndices) -> Bool { true }
    /// The place of entry `i` (its own place when none was recorded).
    subscript(_ i: Int) -> Int { i < list.count ? list[i] : i }
}

/// An extension declared by an app (share, action, widget, ...).
public struct ExtensionManifest: Sendable, Equatable {
    /// The extension's bundle ID.
    public var bundleID: String
    /// `NSExtensionPointIdentifier`, e.g. `com.apple.share-services`.
    public var point: String
    /// Display name (defaults to the bundle ID).
    public var name: String
    /// App groups the extension is entitled to.
    public var appGroups: [String]
    /// Where each of `appGroups` stands in the manifest's list (which may hold entries left
    /// out), for the field paths of later warnings; empty: where it stands in `appGroups`.
    var appGroupIndices = SourceIndices()
    /// The activation rule as written: a dictionary or a predicate string; nil = accepts nothing.
    public var activationRule: JSONValue?
    /// The extension's own token; nil means the containing app's token applies.
    public var token: String?
    /// User ids allowed to act as this extension; nil means the containing app's rule applies.
    public var uids: [UInt32]?
    /// The executable a session must be running to act as this extension (checked through the peer's pid).
    public var executable: String?

    /// Creates an extension manifest.
    public init(
        bundleID: String, point: String, name: String? = nil, appGroups: [String] = [],
        activationRule: JSONValue? = nil, token: String? = nil, uids: [UInt32]? = nil, executable: String? = nil
    ) {
        self.bundleID = bundleID
        self.point = point
        self.name = name ?? bundleID
        self.appGroups = appGroups
        self.activationRule = activationRule
        self.token = token
        self.uids = uids
        self.executable = executable
    }

    /// Share (`com.apple.share-services`) and action (`com.apple.ui-services`) extensions are share targets.
    public var isShareTarget: Bool { point == "com.apple.share-services" || point == "com.apple.ui-services" }
}

/// One app, as its manifest declares it.
public struct AppManifest: Sendable, Equatable {
    /// The app's bundle ID.
    public var bundleID: String
    /// The team ID used for universal links (`TEAMID.BUNDLEID`).
    public var teamID: String?
    /// Display name (defaults to the bundle ID).
    public var name: String
    /// Custom URL schemes, as written.
    public var urlSchemes: [String]
    /// Associated domains, as written (`applinks:example.com`, `applinks:*.example.org?mode=developer`).
    public var associatedDomains: [String]
    /// App groups.
    public var appGroups: [String]
    /// Where each of `appGroups` stands in the manifest's list (see `ExtensionManifest`).
    var appGroupIndices = SourceIndices()
    /// A secret the app must give in `hello`.
    public var token: String?
    /// Command (argv) that starts the app on demand.
    public var launch: [String]?
    /// The user a broker running as root runs `launch` as: a user name, or a uid in decimal.
    /// Nil: the first user of `uids` other than root, else root. A broker that is not root
    /// always runs it as its own user (and cannot run it as another).
    public var launchUser: String?
    /// The app's extensions.
    public var extensions: [ExtensionManifest]
    /// User ids allowed to act as this app (and its extensions without their own list); nil means
    /// the broker's own user (and root) only.
    public var uids: [UInt32]?
    /// The executable a session must be running to act as this app (checked through the peer's pid).
    public var executable: String?
    /// The file it was loaded from (name only, e.g. `myapp.json`).
    public var file: String

    /// Creates an app manifest.
    public init(
        bundleID: String, teamID: String? = nil, name: String? = nil, urlSchemes: [String] = [],
        associatedDomains: [String] = [], appGroups: [String] = [], token: String? = nil,
        launch: [String]? = nil, extensions: [ExtensionManifest] = [], file: String = "",
        uids: [UInt32]? = nil, executable: String? = nil, launchUser: String? = nil
    ) {
        self.launchUser = launchUser
        self.uids = uids
        self.executable = executable
        self.bundleID = bundleID
        self.teamID = teamID
        self.name = name ?? bundleID
        self.urlSchemes = urlSchemes
        self.associatedDomains = associatedDomains
        self.appGroups = appGroups
        self.token = token
        self.launch = launch
        self.extensions = extensions
        self.file = file
    }

    /// `TEAMID.BUNDLEID` when a team ID is set.
    public var appID: String? { teamID.map { "\($0).\(bundleID)" } }

    /// The manifest as JSON, in the contract's shape. The token is never shown: `hasToken` says whether one is set.
    public var json: JSONValue {
        var o: JSONObject = ["bundleID": .string(bundleID)]
        if let teamID { o["teamID"] = .string(teamID) }
        o["name"] = .string(name)
        o["urlSchemes"] = .array(urlSchemes.map { .string($0) })
        o["associatedDomains"] = .array(associatedDomains.map { .string($0) })
        o["appGroups"] = .array(appGroups.map { .string($0) })
        if let launch { o["launch"] = .array(launch.map { .string($0) }) }
        if let launchUser { o["launchUser"] = .string(launchUser) }
        if let uids { o["uids"] = .array(uids.map { .int(Int($0)) }) }
        if let executable { o["executable"] = .string(executable) }
        o["hasToken"] = .bool(token != nil)
        o["extensions"] = .array(
            extensions.map { e in
                var x: JSONObject = [
                    "bundleID": .string(e.bundleID), "point": .string(e.point), "name": .string(e.name),
                    "appGroups": .array(e.appGroups.map { .string($0) }),
                ]
                if let rule = e.activationRule { x["activationRule"] = rule }
                if let uids = e.uids { x["uids"] = .array(uids.map { .int(Int($0)) }) }
                if let exe = e.executable { x["executable"] = .string(exe) }
                x["hasToken"] = .bool(e.token != nil)
                return .object(x)
            })
        o["file"] = .string(file)
        return .object(o)
    }
}

/// A problem found in a manifest. `fatal` problems reject the manifest; others are notes.
public struct ManifestIssue: Sendable, Equatable, CustomStringConvertible {
    /// The file, e.g. `myapp.json`.
    public var file: String
    /// The field path, e.g. `extensions[0].point` (empty for the whole file).
    public var field: String
    /// What is wrong.
    public var message: String
    /// Whether the manifest was rejected because of it.
    public var fatal: Bool

    /// Creates an issue.
    public init(file: String, field: String, message: String, fatal: Bool) {
        self.file = file
        self.field = field
        self.message = message
        self.fatal = fatal
    }

    /// "file: field: message".
    public var description: String { field.isEmpty ? "\(file): \(message)" : "\(file): \(field): \(message)" }

    /// As JSON for `apps.list`.
    public var json: JSONValue {
        ["file": .string(file), "field": .string(field), "message": .string(message), "fatal": .bool(fatal)]
    }
}

/// Validation of manifest JSON into `AppManifest`.
public enum ManifestDecoder {
    static let appKeys: Set<String> = [
        "bundleID", "teamID", "name", "urlSchemes", "associatedDomains", "appGroups", "token", "launch", "extensions",
        "uids", "executable", "launchUser",
        "$schema", "comment",
    ]
    static let extensionKeys: Set<String> = [
        "bundleID", "point", "name", "appGroups", "activationRule", "token", "comment", "uids", "executable",
    ]

    /// Decodes a manifest file's bytes. Returns the manifest (nil when rejected) and every issue found.
    public static func decode(bytes: [UInt8], file: String) -> (AppManifest?, [ManifestIssue]) {
        let value: JSONValue
        do { value = try JSONParser.parse(JSONParser.withoutByteOrderMark(bytes)) } catch {
            return (nil, [ManifestIssue(file: file, field: "", message: "invalid JSON: \(error)", fatal: true)])
        }
        return decode(value, file: file)
    }

    /// Decodes a parsed manifest.
    public static func decode(_ value: JSONValue, file: String) -> (AppManifest?, [ManifestIssue]) {
        var issues: [ManifestIssue] = []
        func fail(_ field: String, _ message: String) { issues.append(ManifestIssue(file: file, field: field, message: message, fatal: true)) }
        func note(_ field: String, _ message: String) { issues.append(ManifestIssue(file: file, field: field, message: message, fatal: false)) }

        guard case .object(let obj) = value else {
            fail("", "a manifest must be a JSON object, got \(value.typeName)")
            return (nil, issues)
        }
        for key in obj.keys where !appKeys.contains(key) { note(key, "unknown key, ignored") }

        func string(_ o: JSONObject, _ key: String, _ path: String, required: Bool) -> String? {
            guard let v = o[key] else {
                if required { fail(path, "required string is missing") }
                return nil
            }
            guard case .string(let s) = v else {
                fail(path, "expected a string, got \(v.typeName)")
                return nil
            }
            if s.isEmpty {
                fail(path, "must not be empty")
                return nil
            }
            return s
        }
        func strings(_ o: JSONObject, _ key: String, _ path: String) -> [String]? {
            guard let v = o[key] else { return nil }
            guard case .array(let items) = v else {
                fail(path, "expected an array of strings, got \(v.typeName)")
                return nil
            }
            var out: [String] = []
            for (i, item) in items.enumerated() {
                guard case .string(let s) = item, !s.isEmpty else {
                    fail("\(path)[\(i)]", item.stringValue == "" ? "expected a non-empty string, got an empty one" : "expected a non-empty string, got \(item.typeName)")
                    continue
                }
                out.append(s)
            }
            return out
        }

        let bundleID = string(obj, "bundleID", "bundleID", required: true)
        if let bundleID, !isValidBundleID(bundleID) {
            fail("bundleID", "'\(bundleID)' is not a valid bundle ID (letters, digits, '-', '.', no spaces)")
        }
        let teamID = string(obj, "teamID", "teamID", required: false)
        if let teamID, !teamID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
            fail("teamID", "'\(teamID)' is not a valid team ID (letters and digits)")
        }
        let name = string(obj, "name", "name", required: false)
        let schemes = strings(obj, "urlSchemes", "urlSchemes") ?? []
        for (i, s) in schemes.enumerated() where !URLScheme.isValid(s) {
            fail("urlSchemes[\(i)]", "'\(s)' is not a valid URL scheme (RFC 3986: a letter, then letters, digits, '+', '-', '.')")
        }
        let domains = strings(obj, "associatedDomains", "associatedDomains") ?? []
        for (i, d) in domains.enumerated() {
            if let problem = AssociatedDomainEntry.problem(in: d) { fail("associatedDomains[\(i)]", problem) }
        }
        func uidList(_ o: JSONObject, _ path: String) -> [UInt32]? {
            guard let v = o["uids"] else { return nil }
            guard case .array(let items) = v else {
                fail(path, "expected an array of user ids, got \(v.typeName)")
                return nil
            }
            var out: [UInt32] = []
            for (i, item) in items.enumerated() {
                guard let n = item.intValue, n >= 0, n <= Int(UInt32.max) else {
                    fail("\(path)[\(i)]", "expected a user id (a non-negative integer), got \(item.compactText)")
                    continue
                }
                out.append(UInt32(n))
            }
            return out
        }
        func executablePath(_ o: JSONObject, _ path: String) -> String? {
            guard let e = string(o, "executable", path, required: false) else { return nil }
            if !e.hasPrefix("/") { fail(path, "'\(e)' must be an absolute path") }
            return e
        }
        let uids = uidList(obj, "uids")
        let executable = executablePath(obj, "executable")
        /// An App Group name names a directory under the state directory: a bundle-ID-like name
        /// (ASCII letters, digits, '-', '_' and '.', no leading, trailing or doubled '.'), at most
        /// 200 bytes. One that is not could never be used (every defaults.* and share.send on it
        /// refused): it is left out, with a note (the rest of the manifest still counts); so is a
        /// group listed twice.
        func usableGroups(_ list: [String], _ path: String) -> (names: [String], indices: [Int]) {
            var out: [String] = []
            var indices: [Int] = []
            for (i, g) in list.enumerated() {
                if !isUsableGroupName(g) {
                    note(
                        "\(path)[\(i)]",
                        "'\(g)' is not a usable App Group name (ASCII letters, digits, '-', '_' and '.', no leading, trailing or doubled '.', at most \(maxGroupNameBytes) bytes, e.g. 'group.com.example.app'); left out")
                } else if out.contains(g) {
                    note("\(path)[\(i)]", "'\(g)' is listed twice; the second is left out")
                } else {
                    out.append(g)
                    indices.append(i)
                }
            }
            return (out, indices)
        }
        let (groups, groupIndices) = usableGroups(strings(obj, "appGroups", "appGroups") ?? [], "appGroups")
        let token = string(obj, "token", "token", required: false)
        var launch: [String]? = nil
        if obj["launch"] != nil {
            launch = strings(obj, "launch", "launch")
            if let l = launch, l.isEmpty {
                fail("launch", "must name a command (a non-empty array: program and arguments)")
                launch = nil
            }
        }
        var launchUser: String? = nil
        if let v = obj["launchUser"] {
            if let n = v.intValue, n >= 0, n < Int(UInt32.max) {
                launchUser = String(n)
            } else if case .string(let name) = v, !name.isEmpty, name.utf8.count <= 256,
                !name.contains(where: { $0 == ":" || $0 == "/" || $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 } == true })
            {
                launchUser = name
            } else {
                fail("launchUser", "expected a user name or a user id (a non-negative integer), got \(v.compactText)")
            }
            if launchUser != nil && launch == nil { note("launchUser", "there is no launch command: nothing runs as this user") }
        }
        var extensions: [ExtensionManifest] = []
        if let ev = obj["extensions"] {
            if case .array(let items) = ev {
                for (i, item) in items.enumerated() {
                    let path = "extensions[\(i)]"
                    guard case .object(let e) = item else {
                        fail(path, "expected an object, got \(item.typeName)")
                        continue
                    }
                    for key in e.keys where !extensionKeys.contains(key) { note("\(path).\(key)", "unknown key, ignored") }
                    let eid = string(e, "bundleID", "\(path).bundleID", required: true)
                    if let eid, !isValidBundleID(eid) {
                        fail("\(path).bundleID", "'\(eid)' is not a valid bundle ID")
                    }
                    let point = string(e, "point", "\(path).point", required: true)
                    let ename = string(e, "name", "\(path).name", required: false)
                    let (egroups, egroupIndices) = usableGroups(strings(e, "appGroups", "\(path).appGroups") ?? [], "\(path).appGroups")
                    for (j, g) in egroups.enumerated() where !groups.contains(g) {
                        note("\(path).appGroups[\(egroupIndices[j])]", "group '\(g)' is not one of the app's appGroups")
                    }
                    if egroups.isEmpty, point == "com.apple.share-services" || point == "com.apple.ui-services" {
                        note(
                            "\(path).appGroups",
                            "a share or action extension without appGroups has no group to store shares in: it is offered as a target, but every share.send to it is refused (-32001)")
                    }
                    var rule: JSONValue? = nil
                    if let r = e["activationRule"] {
                        switch r {
                        case .object, .string:
                            rule = r
                            for issue in ActivationRule.validate(r) {
                                let field = "\(path).activationRule" + (issue.key.isEmpty ? "" : ".\(issue.key)")
                                let text = issue.message  // (a predicate's syntax error names its position)
                                if issue.severity == .error { fail(field, text) } else { note(field, text) }
                            }
                        default: fail("\(path).activationRule", "expected a dictionary or a predicate string, got \(r.typeName)")
                        }
                    }
                    let etoken = string(e, "token", "\(path).token", required: false)
                    let euids = uidList(e, "\(path).uids")
                    let eexe = executablePath(e, "\(path).executable")
                    if let eid, let point {
                        var ext = ExtensionManifest(
                            bundleID: eid, point: point, name: ename, appGroups: egroups, activationRule: rule,
                            token: etoken, uids: euids, executable: eexe)
                        ext.appGroupIndices = SourceIndices(egroupIndices)
                        extensions.append(ext)
                    }
                }
            } else {
                fail("extensions", "expected an array, got \(ev.typeName)")
            }
        }
        if issues.contains(where: \.fatal) { return (nil, issues) }
        guard let bundleID else { return (nil, issues) }
        var manifest = AppManifest(
            bundleID: bundleID, teamID: teamID, name: name, urlSchemes: schemes, associatedDomains: domains,
            appGroups: groups, token: token, launch: launch, extensions: extensions, file: file, uids: uids,
            executable: executable, launchUser: launchUser)
        manifest.appGroupIndices = SourceIndices(groupIndices)
        return (manifest, issues)
    }

    /// The longest App Group name, in bytes (it names one directory; file systems allow 255).
    public static let maxGroupNameBytes = 200

    /// Whether `g` can be an App Group name: it names one directory under the state directory, so
    /// it must be a bundle-ID-like name (`isValidBundleID`) of at most `maxGroupNameBytes` bytes.
    /// The one rule for manifests (unusable names are left out at load) and for the broker's
    /// group directories.
    public static func isUsableGroupName(_ g: String) -> Bool {
        g.utf8.count <= maxGroupNameBytes && isValidBundleID(g)
    }

    /// Bundle IDs: ASCII letters, digits, '-', '.', '_' (no empty components).
    public static func isValidBundleID(_ s: String) -> Bool {
        guard !s.isEmpty, !s.hasPrefix("."), !s.hasSuffix("."), !s.contains("..") else { return false }
        return s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x2E
                || c == 0x5F
        }
    }
}

/// URL scheme rules (RFC 3986 §3.1).
public enum URLScheme {
    /// `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
    public static func isValid(_ s: String) -> Bool { isValid(bytes: s.utf8) }

    /// `isValid` over the scheme's bytes (URL parsing checks them in place).
    static func isValid<C: Collection<UInt8>>(bytes: C) -> Bool {
        var first = true
        for c in bytes {
            let alpha = (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
            if first {
                guard alpha else { return false }
                first = false
                continue
            }
            guard alpha || (c >= 0x30 && c <= 0x39) || c == 0x2B || c == 0x2D || c == 0x2E else { return false }
        }
        return !first
    }

    /// Lowercased ASCII (schemes compare case-insensitively).
    public static func normalize(_ s: String) -> String {
        // Schemes are ASCII (see isValid): lowercase them without the Unicode machinery.
        s.utf8.allSatisfy({ $0 < 0x80 }) ? URLReference.asciiLowercased(s) : s.lowercased()
    }
}

/// One `associatedDomains` entry, parsed: `service:host[?mode=...]`, host possibly `*.domain`.
extension AssociatedDomainEntry {
    /// The domain whose association document `written` names (a document's file name without
    /// `.json`, `STATE/associations/HOST.json`: HOST or HOST:PORT, a Unicode host in its IDNA
    /// form), as an `applinks:` entry names it; nil when it names no host.
    public static func documentDomain(_ written: String) -> String? {
        let host = URLReference.idnaHost(written) ?? written.lowercased()
        guard !host.isEmpty, !host.contains("*"), problem(in: "applinks:" + host) == nil else { return nil }
        return host
    }
}

public struct AssociatedDomainEntry: Sendable, Equatable {
    /// The service, e.g. `applinks`, `webcredentials`, `activitycontinuation`.
    public var service: String
    /// The host (lowercased), without a leading `*.`.
    public var host: String
    /// True for `*.domain` (covers subdomains only).
    public var wildcard: Bool
    /// The `mode` query (`developer`, `managed`, `developer+managed`), if any.
    public var mode: String?

    /// Parses an entry; nil when malformed (see `problem(in:)`).
    public init?(_ text: String) {
        guard AssociatedDomainEntry.problem(in: text) == nil else { return nil }
        let colon = text.firstIndex(of: ":")!
        service = String(text[..<colon])
        var rest = String(text[text.index(after: colon)...])
        mode = nil
        if let q = rest.firstIndex(of: "?") {
            let query = rest[rest.index(after: q)...]
            if query.hasPrefix("mode=") { mode = String(query.dropFirst(5)) }
            rest = String(rest[..<q])
        }
        wildcard = rest.hasPrefix("*.")
        // A host written in Unicode (`applinks:bücher.de`) is its IDNA form, as URLs' hosts are.
        host = URLReference.idnaHost(wildcard ? String(rest.dropFirst(2)) : rest) ?? ""
    }

    /// Why `text` is not a valid entry, or nil when it is.
    public static func problem(in text: String) -> String? {
        guard let colon = text.firstIndex(of: ":") else {
            return "'\(text)' must be 'SERVICE:HOST' (e.g. 'applinks:example.com')"
        }
        let service = text[..<colon]
        let known = ["applinks", "webcredentials", "activitycontinuation", "appclips"]
        guard known.contains(String(service)) else {
            return "unknown service '\(service)' (expected one of \(known.joined(separator: ", ")))"
        }
        var rest = text[text.index(after: colon)...]
        if let q = rest.firstIndex(of: "?") {
            let query = rest[rest.index(after: q)...]
            let modes = ["mode=developer", "mode=managed", "mode=developer+managed"]
            guard modes.contains(String(query)) else {
                return "'?\(query)' is not a valid suffix (expected ?mode=developer, ?mode=managed or ?mode=developer+managed)"
            }
            rest = rest[..<q]
        }
        var host = Substring(rest)
        if host.hasPrefix("*.") { host = host.dropFirst(2) }
        if host.isEmpty { return "missing host in '\(text)'" }
        if host.contains("*") { return "a wildcard is only allowed as a leading '*.' in '\(text)'" }
        if host.contains("/") { return "'\(text)' must name a host, not a URL or path" }
        // Host with optional :port.
        var hostOnly = host
        if let c = host.lastIndex(of: ":") {
            let digits = host[host.index(after: c)...]
            guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return "invalid port in '\(text)'" }
            guard let port = Int(digits), (1...65535).contains(port) else { return "port out of range (1-65535) in '\(text)'" }
            hostOnly = host[..<c]
        }
        let ok = hostOnly.unicodeScalars.allSatisfy {
            ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == ".")
        }
        if !ok || hostOnly.hasPrefix(".") || hostOnly.hasSuffix(".") || hostOnly.contains("..") {
            return "invalid host in '\(text)' (letters, digits and '-' in labels separated by single dots)"
        }
        if URLReference.idnaHost(String(hostOnly)) == nil { return "'\(hostOnly)' has no IDNA form (a label over 63 characters?) in '\(text)'" }
        return nil
    }
}
