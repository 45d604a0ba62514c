// The bridge between shared items and the routing core's UTI table and activation rules:
// the types each item carries, safe file names, and whether an extension accepts the items.

import ShareProtocol
import ShareRouting

enum ShareTyping {
    // MARK: Types (the UTI table of ShareRouting)

    static let table = UTITable.system

    /// The attachment of a URL item already parsed as `ref`.
    static func urlAttachment(_ url: String, _ ref: URLReference, given: String?) -> Attachment {
        table.urlAttachment(url, isFile: ref.normalizedScheme == "file", type: given)
    }

    static func textAttachment(_ text: String, given: String?) -> Attachment {
        table.attachment(for: .text(text, type: given))
    }

    static func urls(in text: String) -> [String] { urlsFoundIn(text) }

    /// Types of a file from its name and first bytes (data and path items).
    static func fileAttachment(name: String?, head: [UInt8], given: String?) -> Attachment {
        table.attachment(for: .data(head, name: name, type: given))
    }

    static func preferredExtension(for type: String) -> String? { table.preferredExtension(for: type) }

    // MARK: Acceptance

    /// Whether a parsed rule (nil: no rule, or a rule that failed to parse) accepts the attachments.
    static func accepts(_ rule: LoadedActivationRule?, items: [PreparedItem]) -> (accepted: Bool, reason: String) {
        switch rule?.result {
        case nil: return (false, "the extension has no activation rule, so it accepts nothing")
        case .failure(let e)?: return (false, "its activation rule is invalid (\(e)), so it accepts nothing")
        case .success(let r)?:
            // Only a refusal's reason is shown (in -32003); an acceptance needs none.
            let result = r.evaluate(items.map(\.attachment), table: table, explainAcceptance: false)
            return (result.accepted, result.reason)
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

    /// The name a data item is shown under: what the sender gave without any directories in it
    /// (nil when nothing is left), so `share.get`'s `name` never reads as a path.
    static func displayName(_ name: String) -> String? {
        let last = name.split(separator: "/").last.map(String.init) ?? ""
        return last.isEmpty ? nil : last
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

}

/// An extension's activation rule as read from its manifest (or why it could not be read), held
/// by reference: a share's check and a session's cache copy one pointer, not the rule's tree
/// (copying the `Result` retained the references inside the rule, about 500 instructions per
/// share.send).
final class LoadedActivationRule {
    let result: Result<ActivationRule, ActivationRuleError>

    init(_ result: Result<ActivationRule, ActivationRuleError>) {
        self.result = result
    }
}
