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

    /// Whether `a` and `b` are the same bytes: compared as two byte buffers when both strings hold
    /// contiguous UTF-8 (native and small strings do), else through their UTF-8 views. (No
    /// `String.==`: it compares canonical equivalence, and the views' generic iteration cost
    /// about 25 instructions a byte.)
    @inline(__always) public static func same(_ a: String, _ b: String) -> Bool {
        let bytes: Bool?? = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in x.count == y.count && x.elementsEqual(y) }
        }
        if let known = bytes, let equal = known { return equal }
        return a.utf8.count == b.utf8.count && a.utf8.elementsEqual(b.utf8)
    }
}
