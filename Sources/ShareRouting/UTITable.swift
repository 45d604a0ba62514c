// The UTI table: type identifiers with their conformance (transitive, reflexive), filename-extension and
// MIME mappings, and types that manifests declare. Model: Apple's Uniform Type Identifiers ("System-declared
// uniform type identifiers", developer.apple.com/documentation/uniformtypeidentifiers); identifiers compare case-insensitively.

import ShareProtocol

/// One type declaration: an identifier, the types it conforms to, and its tags.
///
/// The same shape serves Apple's system-declared types (`UTITable.system`) and the types a manifest
/// declares (Apple's `UTExportedTypeDeclarations` / `UTImportedTypeDeclarations` entries).
public struct DeclaredType: Sendable, Equatable {
    /// The identifier, e.g. `com.adobe.pdf`.
    public var identifier: String
    /// The direct parents, e.g. `["public.data", "public.composite-content"]`.
    public var conformsTo: [String]
    /// Filename extensions without the dot, preferred first (lowercased when the table is built).
    public var extensions: [String]
    /// MIME types, preferred first.
    public var mimeTypes: [String]
    /// A short human-readable description.
    public var description: String

    /// Creates a declaration.
    public init(
        _ identifier: String, conformsTo: [String] = [], extensions: [String] = [], mimeTypes: [String] = [],
        description: String = ""
    ) {
        self.identifier = identifier
        self.conformsTo = conformsTo
        self.extensions = extensions
        self.mimeTypes = mimeTypes
        self.description = description
    }
}

/// Why a type declaration in a manifest could not be read.
public struct DeclaredTypeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field, e.g. `UTTypeConformsTo[1]` (empty for the whole declaration).
    public var field: String
    /// What is wrong.
    public var message: String

    /// Creates an error.
    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    /// "field: message".
    public var description: String { field.isEmpty ? message : "\(field): \(message)" }
}

extension DeclaredType {
    /// Reads a declaration from JSON. Two shapes are accepted:
    /// - sharebroker's: `{"identifier", "conformsTo": [...], "extensions": [...], "mimeTypes": [...], "description"}`;
    /// - Apple's Info.plist entry: `{"UTTypeIdentifier", "UTTypeConformsTo", "UTTypeDescription",
    ///   "UTTypeTagSpecification": {"public.filename-extension": ..., "public.mime-type": ...}}`
    ///   where each list may also be a single string, as in plists.
    public static func parse(_ json: JSONValue) throws(DeclaredTypeError) -> DeclaredType {
        guard case .object(let o) = json else {
            throw DeclaredTypeError(field: "", message: "expected an object, got \(json.typeName)")
        }
        func strings(_ v: JSONValue?, _ field: String) throws(DeclaredTypeError) -> [String] {
            guard let v else { return [] }
            switch v {
            case .string(let s): return [s]
            case .array(let items):
                var out: [String] = []
                for (i, item) in items.enumerated() {
                    guard case .string(let s) = item, !s.isEmpty else {
                        throw DeclaredTypeError(
                            field: "\(field)[\(i)]", message: item.stringValue == "" ? "expected a non-empty string, got an empty one" : "expected a non-empty string, got \(item.typeName)")
                    }
                    out.append(s)
                }
                return out
            default:
                throw DeclaredTypeError(
                    field: field, message: "expected a string or an array of strings, got \(v.typeName)")
            }
        }
        let apple = o["UTTypeIdentifier"] != nil
        let idKey = apple ? "UTTypeIdentifier" : "identifier"
        guard case .string(let id)? = o[idKey], UTITable.isValidIdentifier(id) else {
            throw DeclaredTypeError(
                field: idKey,
                message: "required: a type identifier such as com.example.document (letters, digits, '-', '.')")
        }
        if apple {
            let tags = o["UTTypeTagSpecification"]
            if let tags, tags.objectValue == nil {
                throw DeclaredTypeError(
                    field: "UTTypeTagSpecification", message: "expected an object, got \(tags.typeName)")
            }
            return DeclaredType(
                id, conformsTo: try strings(o["UTTypeConformsTo"], "UTTypeConformsTo"),
                extensions: try strings(
                    tags?["public.filename-extension"], "UTTypeTagSpecification.public.filename-extension"),
                mimeTypes: try strings(tags?["public.mime-type"], "UTTypeTagSpecification.public.mime-type"),
                description: o["UTTypeDescription"]?.stringValue ?? "")
        }
        return DeclaredType(
            id, conformsTo: try strings(o["conformsTo"], "conformsTo"),
            extensions: try strings(o["extensions"], "extensions"),
            mimeTypes: try strings(o["mimeTypes"], "mimeTypes"), description: o["description"]?.stringValue ?? "")
    }
}

/// A table of uniform type identifiers: conformance, extension and MIME lookups.
///
/// `UTITable.system` holds Apple's common system-declared types; `adding(_:)` extends a table with the types
/// a manifest declares. Identifiers, extensions and MIME types compare case-insensitively.
public struct UTITable: Sendable {
    /// Declarations in table order (system first, then added ones).
    public private(set) var declaredTypes: [DeclaredType]
    private var index: [String: Int] = [:]
    private var byExtension: [String: String] = [:]
    private var byMIME: [String: String] = [:]
    /// Lowercased identifier → lowercased transitive supertypes (self excluded).
    private var ancestors: [String: Set<String>] = [:]
    /// Lowercased identifier → the well-known types it conforms to (`wellKnownConformance(of:)`).
    private var wellKnown: [String: WellKnownTypes] = [:]

    /// The types share activation rules classify attachments by, as a set: what one type
    /// conforms to among them is one lookup (`wellKnownConformance(of:)`) instead of one
    /// `conforms(_:to:)` each (a share's activation check asks for all eight).
    public struct WellKnownTypes: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let image = WellKnownTypes(rawValue: 1 << 0)  // public.image
        public static let movie = WellKnownTypes(rawValue: 1 << 1)  // public.movie
        public static let fileURL = WellKnownTypes(rawValue: 1 << 2)  // public.file-url
        public static let text = WellKnownTypes(rawValue: 1 << 3)  // public.text
        public static let url = WellKnownTypes(rawValue: 1 << 4)  // public.url
        public static let propertyList = WellKnownTypes(rawValue: 1 << 5)  // com.apple.property-list
        public static let html = WellKnownTypes(rawValue: 1 << 6)  // public.html
        public static let webArchive = WellKnownTypes(rawValue: 1 << 7)  // com.apple.webarchive

        /// Each member with its (lowercased) identifier.
        public static let identifiers: [(WellKnownTypes, String)] = [
            (.image, "public.image"), (.movie, "public.movie"), (.fileURL, "public.file-url"), (.text, "public.text"),
            (.url, "public.url"), (.propertyList, "com.apple.property-list"), (.html, "public.html"),
            (.webArchive, "com.apple.webarchive"),
        ]
    }

    /// The well-known types `identifier` conforms to: exactly those `t` for which
    /// `conforms(identifier, to: t)` is true.
    public func wellKnownConformance(of identifier: String) -> WellKnownTypes {
        let k = UTITable.key(identifier)
        if let m = wellKnown[k] { return m }
        // (not declared: it conforms to itself, public.data and public.item only)
        var m: WellKnownTypes = []
        for (t, id) in WellKnownTypes.identifiers where id == k { m.insert(t) }
        return m
    }

    /// Builds a table. When an identifier is declared twice the first declaration counts; when two types claim
    /// an extension or a MIME type, the first one in order keeps it.
    public init(declarations: [DeclaredType]) {
        declaredTypes = []
        for d in declarations { insert(d) }
        computeAncestors()
    }

    /// Apple's common system-declared types (see `UTISystemTypes.swift`).
    public static let system = UTITable(declarations: UTISystemTypes.declarations)

    /// A copy of this table with more types, e.g. those a manifest declares. Types already in the table are
    /// kept as they are (like Apple, system declarations win over imported ones); extensions and MIME types
    /// already mapped keep their mapping. `notes(adding:)` says what was ignored.
    public func adding(_ types: [DeclaredType]) -> UTITable {
        var copy = self
        for t in types { copy.insert(t) }
        copy.computeAncestors()
        return copy
    }

    /// What `adding(_:)` would ignore or could not resolve, as plain sentences (for manifest validation).
    public func notes(adding types: [DeclaredType]) -> [String] {
        var notes: [String] = []
        var seen = Set(index.keys)
        var exts = Set(byExtension.keys)
        var mimes = Set(byMIME.keys)
        let newIDs = Set(types.map { UTITable.key($0.identifier) })
        for t in types {
            let k = UTITable.key(t.identifier)
            if seen.contains(k) {
                notes.append("\(t.identifier) is already declared; this declaration is ignored")
                continue
            }
            seen.insert(k)
            for p in t.conformsTo where index[UTITable.key(p)] == nil && !newIDs.contains(UTITable.key(p)) {
                notes.append("\(t.identifier) conforms to \(p), which is not declared (treated as data)")
            }
            for e in t.extensions {
                let ek = UTITable.extensionKey(e)
                if exts.contains(ek) {
                    notes.append("extension '\(ek)' already means \(byExtension[ek] ?? "another declared type"); kept")
                } else {
                    exts.insert(ek)
                }
            }
            for m in t.mimeTypes {
                let mk = UTITable.mimeKey(m)
                if mimes.contains(mk) {
                    notes.append("MIME type '\(mk)' already means \(byMIME[mk] ?? "another declared type"); kept")
                } else {
                    mimes.insert(mk)
                }
            }
        }
        return notes
    }

    // MARK: lookups

    /// The declaration of `identifier`, if the table has one.
    public func declaration(for identifier: String) -> DeclaredType? {
        index[UTITable.key(identifier)].map { declaredTypes[$0] }
    }

    /// Whether the table declares `identifier`.
    public func isDeclared(_ identifier: String) -> Bool { index[UTITable.key(identifier)] != nil }

    /// Whether type `a` conforms to type `b`: reflexive and transitive over `conformsTo`.
    ///
    /// Every type conforms to `public.item`. A type the table does not declare (an app's own identifier, or
    /// Apple's dynamic `dyn.` identifiers) is treated like a dynamic type for a file: it conforms to
    /// `public.data` and `public.item`. Every item sharebroker carries is a byte stream (URLs and text too:
    /// `public.url` and `public.text` themselves conform to `public.data`), so this is true of them all.
    public func conforms(_ a: String, to b: String) -> Bool {
        let ka = UTITable.key(a)
        let kb = UTITable.key(b)
        if ka == kb || kb == "public.item" { return true }
        if let set = ancestors[ka] { return set.contains(kb) }
        return kb == "public.data"
    }

    /// `identifier` and all its supertypes, nearest first (breadth-first over `conformsTo`).
    public func supertypes(of identifier: String) -> [String] {
        var out: [String] = [identifier]
        var seen: Set<String> = [UTITable.key(identifier)]
        var i = 0
        while i < out.count {
            let parents = declaration(for: out[i])?.conformsTo ?? (i == 0 ? ["public.data"] : [])
            for p in parents where seen.insert(UTITable.key(p)).inserted { out.append(p) }
            i += 1
        }
        if seen.insert("public.item").inserted { out.append("public.item") }
        return out
    }

    /// The type of a filename extension (`"pdf"`, `".PDF"` → `com.adobe.pdf`), or nil.
    public func type(forExtension ext: String) -> String? { byExtension[UTITable.extensionKey(ext)] }

    /// The type of a MIME type (`"application/pdf"`, `"text/plain; charset=utf-8"` → ...), or nil.
    public func type(forMIME mime: String) -> String? { byMIME[UTITable.mimeKey(mime)] }

    /// The type of a file name by its extension; a double extension such as `tar.gz` is tried first.
    /// A leading dot is not an extension (`.bashrc` has none).
    public func type(forFilename name: String) -> String? {
        let base = name.split(separator: "/", omittingEmptySubsequences: false).last ?? Substring(name)
        var stem = base
        while stem.first == "." { stem = stem.dropFirst() }
        let parts = stem.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 2, let last = parts.last, !last.isEmpty else { return nil }
        if parts.count >= 3, let t = type(forExtension: "\(parts[parts.count - 2]).\(last)") { return t }
        return type(forExtension: String(last))
    }

    /// The preferred filename extension of a type: its own first one, else the nearest supertype's
    /// (`public.utf8-plain-text` → `txt`); nil when none has one.
    public func preferredExtension(for identifier: String) -> String? {
        for t in supertypes(of: identifier) {
            if let e = declaration(for: t)?.extensions.first { return UTITable.extensionKey(e) }
        }
        return nil
    }

    /// A file name for a data item sent without one ("without it the broker names the file from its type"):
    /// `base` plus the type's preferred extension, e.g. `suggestedFilename(base: "item-1", type: "com.adobe.pdf")`
    /// → `item-1.pdf`; `base` alone when the type has no extension.
    public func suggestedFilename(base: String, type: String) -> String {
        preferredExtension(for: type).map { "\(base).\($0)" } ?? base
    }

    /// The preferred MIME type of a type, found the same way as `preferredExtension(for:)`.
    public func preferredMIMEType(for identifier: String) -> String? {
        for t in supertypes(of: identifier) {
            if let m = declaration(for: t)?.mimeTypes.first { return UTITable.mimeKey(m) }
        }
        return nil
    }

    /// Whether `text` is shaped like a type identifier: ASCII letters, digits, '-', '.', '_' and '+', no empty component.
    public static func isValidIdentifier(_ text: String) -> Bool {
        guard !text.isEmpty, !text.hasPrefix("."), !text.hasSuffix("."), !text.contains("..") else { return false }
        return text.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x2E
                || c == 0x5F || c == 0x2B
        }
    }

    // MARK: building

    private mutating func insert(_ d: DeclaredType) {
        let k = UTITable.key(d.identifier)
        guard index[k] == nil else { return }
        index[k] = declaredTypes.count
        declaredTypes.append(d)
        for e in d.extensions {
            let ek = UTITable.extensionKey(e)
            if !ek.isEmpty, byExtension[ek] == nil { byExtension[ek] = d.identifier }
        }
        for m in d.mimeTypes {
            let mk = UTITable.mimeKey(m)
            if !mk.isEmpty, byMIME[mk] == nil { byMIME[mk] = d.identifier }
        }
    }

    private mutating func computeAncestors() {
        var memo: [String: Set<String>] = [:]
        var parents: [String: [String]] = [:]
        for d in declaredTypes { parents[UTITable.key(d.identifier)] = d.conformsTo.map(UTITable.key) }
        // Each type's supertypes by a walk of its own (a memo shared between types would, in a
        // cycle of declared types, give each member the supertypes reached before the walk
        // came back to it: which ones depended on the dictionary's order).
        for (k, ps) in parents {
            var out: Set<String> = ["public.item"]
            var next = ps
            while let p = next.popLast() {
                guard p != k, out.insert(p).inserted else { continue }
                if let more = parents[p] { next += more } else { out.insert("public.data") }  // undeclared: like a dynamic type
            }
            out.remove(k)  // (public.item is not its own supertype)
            memo[k] = out
        }
        ancestors = memo
        var known: [String: WellKnownTypes] = [:]
        for (k, supertypes) in memo {
            var m: WellKnownTypes = []
            for (t, id) in WellKnownTypes.identifiers where id == k || supertypes.contains(id) { m.insert(t) }
            known[k] = m
        }
        wellKnown = known
    }

    // MARK: keys

    /// ASCII-lowercased identifier (UTIs compare case-insensitively).
    static func key(_ s: String) -> String { URLReference.asciiLowercased(s) }

    static func extensionKey(_ s: String) -> String {
        var t = Substring(s)
        while t.first == "." { t = t.dropFirst() }
        return URLReference.asciiLowercased(String(t))
    }

    static func mimeKey(_ s: String) -> String {
        let base = s.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return URLReference.asciiLowercased(base.utiTrimmingASCIIWhitespace())
    }

}

extension Substring {
    /// The text without leading and trailing ASCII spaces and tabs.
    func utiTrimmingASCIIWhitespace() -> String {
        var t = self
        while let f = t.first, f == " " || f == "\t" { t = t.dropFirst() }
        while let l = t.last, l == " " || l == "\t" { t = t.dropLast() }
        return String(t)
    }
}
