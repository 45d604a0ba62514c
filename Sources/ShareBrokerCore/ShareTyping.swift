// The bridge between shared items and the routing core's UTI table and activation rules:
// the types each item carries, safe file names, and whether an extension accepts the items.

import ShareProtocol
import ShareRouting

enum ShareTyping {
    // MARK: Types (interim table; replaced by the UTI core)

    static func urlTypes(_ ref: URLReference, given: String?) -> [String] {
        if let given { return [given] }
        return ref.normalizedScheme == "file" ? ["public.file-url", "public.url"] : ["public.url"]
    }

    static func textTypes(_ text: String, given: String?) -> [String] {
        if let given { return [given] }
        let trimmed = text.trimmingSpaces()
        if let ref = try? URLReference(parsing: trimmed), ref.authority != nil || ref.normalizedScheme == "mailto" {
            return ["public.plain-text", "public.url"]
        }
        return ["public.plain-text"]
    }

    static func urls(in text: String) -> [String] {
        var out: [String] = []
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }) {
            let w = String(word).trimmingCharacters(in: "()<>\"',.;")
            if (w.hasPrefix("http://") || w.hasPrefix("https://")), (try? URLReference(parsing: w)) != nil { out.append(w) }
        }
        return out
    }

    static func fileTypes(name: String?, head: [UInt8], given: String?) -> [String] {
        if let given { return [given] }
        let ext = name.flatMap { n -> String? in
            guard let dot = n.lastIndex(of: "."), dot != n.startIndex else { return nil }
            return String(n[n.index(after: dot)...]).lowercased()
        }
        switch ext {
        case "pdf"?: return ["com.adobe.pdf"]
        case "png"?: return ["public.png"]
        case "jpg"?, "jpeg"?: return ["public.jpeg"]
        case "txt"?: return ["public.plain-text"]
        default: break
        }
        if head.starts(with: Array("%PDF-".utf8)) { return ["com.adobe.pdf"] }
        if head.starts(with: [0x89, 0x50, 0x4E, 0x47]) { return ["public.png"] }
        if head.starts(with: [0xFF, 0xD8, 0xFF]) { return ["public.jpeg"] }
        return ["public.data"]
    }

    static func preferredExtension(for type: String) -> String? {
        switch type {
        case "com.adobe.pdf": return "pdf"
        case "public.png": return "png"
        case "public.jpeg": return "jpg"
        case "public.plain-text": return "txt"
        default: return nil
        }
    }

    // MARK: Acceptance (interim; replaced by the activation-rule core)

    static func accepts(_ rule: JSONValue?, items: [PreparedItem]) -> (accepted: Bool, reason: String) {
        guard let rule else { return (false, "the extension has no activation rule, so it accepts nothing") }
        switch rule {
        case .string(let s) where s.trimmingSpaces() == "TRUEPREDICATE": return (true, "TRUEPREDICATE")
        case .object(let o):
            let webMax = o["NSExtensionActivationSupportsWebURLWithMaxCount"]?.intValue ?? 0
            let urls = items.filter { $0.types.contains("public.url") }.count
            if urls == items.count && urls <= webMax { return (true, "web URLs within the maximum") }
            return (false, "only \(webMax) web URL(s) accepted")
        default: return (false, "unsupported rule")
        }
    }

    // MARK: File names

    /// A name safe as one file name: the last path component, no control characters, no leading
    /// dots, at most 200 bytes; empty names become `file` (+ the type's extension).
    static func safeFileName(_ name: String?, type: String) -> String {
        var base = name.map { n -> String in String(n.split(separator: "/").last ?? "") } ?? ""
        base = String(base.unicodeScalars.filter { $0.value >= 0x20 && $0 != "\u{7F}" && $0 != "\\" && $0 != ":" }.map(Character.init))
        while base.hasPrefix(".") { base.removeFirst() }
        base = base.trimmingSpaces()
        if base.isEmpty {
            base = "shared"
            if let ext = preferredExtension(for: type) { base += "." + ext }
        }
        while base.utf8.count > 200 { base.removeFirst() }
        return base
    }

    /// `name`, or `name (2).ext`, ... so two items of one share never overwrite each other.
    static func uniqueName(_ name: String, used: inout Set<String>) -> String {
        if used.insert(name.lowercased()).inserted { return name }
        var stem = name
        var ext = ""
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            stem = String(name[..<dot])
            ext = String(name[dot...])
        }
        var n = 2
        while true {
            let candidate = "\(stem) (\(n))\(ext)"
            if used.insert(candidate.lowercased()).inserted { return candidate }
            n += 1
        }
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\n" || f == "\t" || f == "\r" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\n" || l == "\t" || l == "\r" { s.removeLast() }
        return String(s)
    }

    func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}
