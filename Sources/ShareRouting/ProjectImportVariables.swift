// Xcode build-variable substitution for imported plists: `$(NAME)`, `${NAME}`, nesting, modifiers
// such as `:rfc1034identifier`, and `$(inherited)`, from `--set NAME=VALUE` (optionally per target).

/// Resolves `$(NAME)` / `${NAME}` references the way Xcode expands them in Info.plist and entitlements.
///
/// Lookup order for NAME in target T: `variables["T:NAME"]`, then `variables["NAME"]`, then a few
/// derived settings (`PRODUCT_MODULE_NAME` and `EXECUTABLE_NAME` from `PRODUCT_NAME`,
/// `AppIdentifierPrefix`/`TeamIdentifierPrefix` from the team ID). `$(inherited)` is empty.
/// Modifiers: `rfc1034identifier`, `c99extidentifier`, `identifier`, `lower`, `upper`, `default=VALUE`;
/// others are reported and leave the value unchanged.
public struct BuildVariables: Sendable {
    /// NAME → VALUE and TARGET:NAME → VALUE.
    public var values: [String: String]
    /// The target being read (its folder or bundle name), for `TARGET:NAME` settings.
    public var target: String?
    /// The team ID, for `$(AppIdentifierPrefix)` / `$(TeamIdentifierPrefix)` when not set explicitly.
    public var teamID: String?

    /// Creates a resolver.
    public init(_ values: [String: String], target: String? = nil, teamID: String? = nil) {
        self.values = values
        self.target = target
        self.teamID = teamID
    }

    /// The result of expanding a string.
    public struct Expansion: Sendable, Equatable {
        /// The text with every resolvable reference replaced (unresolved ones stay as written).
        public var value: String
        /// Variables that had no value, in order of appearance (each once).
        public var unresolved: [String]
        /// Modifiers that are not understood (the value was left unmodified).
        public var unknownModifiers: [String]
        /// True when nothing was left unresolved.
        public var isResolved: Bool { unresolved.isEmpty }
    }

    /// The value of a setting, or nil.
    public func lookup(_ name: String) -> String? {
        if name == "inherited" { return "" }
        if let target, let v = values["\(target):\(name)"] { return v }
        if let v = values[name] { return v }
        switch name {
        case "PRODUCT_MODULE_NAME":
            return lookup("PRODUCT_NAME") == nil ? nil : "$(PRODUCT_NAME:c99extidentifier)"
        case "EXECUTABLE_NAME":
            return lookup("PRODUCT_NAME") == nil ? nil : "$(PRODUCT_NAME)"
        case "AppIdentifierPrefix", "TeamIdentifierPrefix":
            return (lookup("DEVELOPMENT_TEAM") ?? teamID).map { $0 + "." }
        default:
            return nil
        }
    }

    /// Expands every `$(...)` and `${...}` in `text`. Values are themselves expanded (up to 16 levels).
    public func expand(_ text: String) -> Expansion {
        var unresolved: [String] = []
        var unknown: [String] = []
        let value = expand(Array(text.unicodeScalars), depth: 0, &unresolved, &unknown)
        return Expansion(value: value, unresolved: unresolved, unknownModifiers: unknown)
    }

    private func expand(
        _ s: [Unicode.Scalar], depth: Int, _ unresolved: inout [String], _ unknown: inout [String]
    ) -> String {
        var out = String.UnicodeScalarView()
        var i = 0
        while i < s.count {
            let c = s[i]
            guard c == "$", i + 1 < s.count, s[i + 1] == "(" || s[i + 1] == "{" else {
                out.append(c)
                i += 1
                continue
            }
            let open = s[i + 1]
            let close: Unicode.Scalar = open == "(" ? ")" : "}"
            // Find the matching close, allowing nested references.
            var level = 0
            var j = i + 1
            var end: Int? = nil
            while j < s.count {
                if s[j] == open { level += 1 }
                if s[j] == close {
                    level -= 1
                    if level == 0 {
                        end = j
                        break
                    }
                }
                j += 1
            }
            guard let end else {
                out.append(contentsOf: s[i...])
                break
            }
            let literal = String(String.UnicodeScalarView(s[i...end]))
            let inner = expand(Array(s[(i + 2)..<end]), depth: depth + 1, &unresolved, &unknown)
            let parts = inner.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            let name = parts[0]
            var modifiers = Array(parts.dropFirst())
            var value: String? = nil
            if depth < 16, let raw = lookup(name) {
                value = expand(Array(raw.unicodeScalars), depth: depth + 1, &unresolved, &unknown)
            }
            if value == nil, let d = modifiers.firstIndex(where: { $0.hasPrefix("default=") }) {
                value = String(modifiers[d].dropFirst("default=".count))
                modifiers.remove(at: d)
            }
            guard var v = value else {
                if !unresolved.contains(name) { unresolved.append(name) }
                out.append(contentsOf: literal.unicodeScalars)
                i = end + 1
                continue
            }
            for m in modifiers {
                switch m {
                case "rfc1034identifier": v = BuildVariables.rfc1034Identifier(v)
                case "c99extidentifier", "identifier": v = BuildVariables.c99ExtIdentifier(v)
                case "lower": v = v.lowercased()
                case "upper": v = v.uppercased()
                default:
                    if m.hasPrefix("default=") {
                        if v.isEmpty { v = String(m.dropFirst("default=".count)) }
                    } else if !unknown.contains(m) {
                        unknown.append(m)
                    }
                }
            }
            out.append(contentsOf: v.unicodeScalars)
            i = end + 1
        }
        return String(out)
    }

    /// Xcode's `:rfc1034identifier`: characters other than ASCII letters, digits, '-' and '.' become '-'.
    public static func rfc1034Identifier(_ s: String) -> String {
        String(String.UnicodeScalarView(s.unicodeScalars.map { c in
            (c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c))) || c == "-" || c == "." ? c : "-"
        }))
    }

    /// Xcode's `:c99extidentifier`: characters other than ASCII letters, digits and '_' become '_';
    /// a leading digit gets a '_' in front.
    public static func c99ExtIdentifier(_ s: String) -> String {
        var out = String(String.UnicodeScalarView(s.unicodeScalars.map { c in
            (c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c))) || c == "_" ? c : "_"
        }))
        if let f = out.unicodeScalars.first, ("0"..."9").contains(f) { out = "_" + out }
        return out
    }
}
