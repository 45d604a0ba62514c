// Strings from bytes that must be well-formed UTF-8 (JSON text, sniffed file heads): nil instead
// of repairing. `String(validating:as:)` where the standard library has it (Swift 6 runtimes:
// Linux, macOS 15); on older Apple runtimes, decoding with repair and checking nothing was repaired.

/// Strict UTF-8 decoding.
public enum UTF8Text {
    /// The text of `bytes`, or nil when they are not well-formed UTF-8.
    public static func validated<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            return String(validating: bytes, as: UTF8.self)
        }
        return validatedByRepairCheck(bytes)
    }

    /// The fallback: a repair writes U+FFFD (EF BF BD) where the ill-formed bytes were, so the
    /// decoded text's bytes then differ from the input.
    static func validatedByRepairCheck<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        let s = String(decoding: bytes, as: UTF8.self)
        return s.utf8.elementsEqual(bytes) ? s : nil
    }
}
