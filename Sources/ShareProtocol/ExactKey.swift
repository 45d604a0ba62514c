// ExactKey: a string compared and hashed by its UTF-8 bytes. Swift's String equality is Unicode
// canonical equivalence ("é" as U+00E9 equals "e" + U+0301), so as a dictionary key it merges
// what iOS keeps apart (NSString compares code units): two UserDefaults keys, or two members of
// a JSON object, that differ only in normalization. Stores and JSON objects key by these bytes.

/// A string whose identity is its exact bytes (not its canonical equivalence class).
public struct ExactKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The string.
    public let text: String

    /// Wraps `text`.
    @inline(__always) public init(_ text: String) { self.text = text }

    @inline(__always) public static func == (a: ExactKey, b: ExactKey) -> Bool { ExactKey.same(a.text, b.text) }

    /// Byte order (UTF-8 order is code point order).
    public static func < (a: ExactKey, b: ExactKey) -> Bool { a.text.utf8.lexicographicallyPrecedes(b.text.utf8) }

    public func hash(into h: inout Hasher) {
        let done: Void? = text.utf8.withContiguousStorageIfAvailable { h.combine(bytes: UnsafeRawBufferPointer($0)) }
        if done == nil { for b in text.utf8 { h.combine(b) } }
    }

    public var description: String { text }

    /// Whether `a` and `b` are the same bytes. (String's `==` first: it rejects most pairs at once,
    /// and for two ASCII strings it already compared their bytes.)
    @inline(__always) public static func same(_ a: String, _ b: String) -> Bool {
        a == b && (a.utf8.count == b.utf8.count && a.utf8.elementsEqual(b.utf8))
    }
}
