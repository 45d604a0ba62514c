// Percent-encoding and -decoding (RFC 3986 §2.1), byte by byte over UTF-8, without Foundation:
// the Router builds URLs with it (everything outside the unreserved set encoded) and decodes
// captured path segments and query values with it (`+` stays a plus unless form decoding is asked).

/// Percent-encoding helpers used by `Router` and `RoutePattern`.
public enum PercentEncoding {
    /// RFC 3986 unreserved characters: `A-Z a-z 0-9 - . _ ~`. They are never encoded.
    @inlinable
    public static func isUnreserved(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// RFC 3986 `sub-delims`: `! $ & ' ( ) * + , ; =`.
    @inlinable
    public static func isSubDelim(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="):
            return true
        default:
            return false
        }
    }

    /// RFC 3986 `pchar` without `pct-encoded`: unreserved, sub-delims, `:` and `@`.
    @inlinable
    public static func isPathChar(_ b: UInt8) -> Bool {
        isUnreserved(b) || isSubDelim(b) || b == UInt8(ascii: ":") || b == UInt8(ascii: "@")
    }

    /// Encodes every UTF-8 byte of `s` for which `allowed` is false as `%XX` (upper-case hex).
    public static func encode(_ s: some StringProtocol, allowing allowed: (UInt8) -> Bool = isUnreserved) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            if allowed(b) {
                out.append(b)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigit(b >> 4))
                out.append(hexDigit(b & 0x0F))
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Encodes a value for use as one path segment or one query value: everything outside the
    /// unreserved set is encoded, so `/ ? # & = + %`, space and non-ASCII all survive a round trip.
    /// The segments `.` and `..` are encoded as `%2E` / `%2E%2E` so no URL normalizer removes them.
    public static func encodeComponent(_ s: some StringProtocol) -> String {
        if s == "." { return "%2E" }
        if s == ".." { return "%2E%2E" }
        return encode(s)
    }

    /// Decodes `%XX` escapes (a `%` not followed by two hex digits is kept as it is). With
    /// `plusAsSpace` (HTML form encoding) `+` decodes to a space; otherwise it stays a `+`.
    /// Bytes that are not valid UTF-8 after decoding become U+FFFD.
    public static func decode(_ s: some StringProtocol, plusAsSpace: Bool = false) -> String {
        let bytes = Array(s.utf8)
        if !bytes.contains(UInt8(ascii: "%")) && !(plusAsSpace && bytes.contains(UInt8(ascii: "+"))) {
            return String(s)
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "%"), i + 2 < bytes.count, let hi = hexValue(bytes[i + 1]),
                let lo = hexValue(bytes[i + 2])
            {
                out.append(hi << 4 | lo)
                i += 3
                continue
            }
            if b == UInt8(ascii: "+") && plusAsSpace {
                out.append(UInt8(ascii: " "))
            } else {
                out.append(b)
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    @usableFromInline
    static func hexDigit(_ v: UInt8) -> UInt8 {
        v < 10 ? UInt8(ascii: "0") + v : UInt8(ascii: "A") + v - 10
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
