// Lenient input: an IRI (a URL written with non-ASCII characters or spaces, as people type and
// paste them: `https://de.wikipedia.org/wiki/Straße`, `https://bücher.de/`) becomes the URI that
// names the same resource, much as browsers and iOS 17's `URL(string:)` do: spaces around it
// dropped, the host's non-ASCII labels lowercased in IDNA's ASCII form (`xn--` + Punycode,
// RFC 3492; without Unicode normalization or UTS 46 mapping: a host typed in decomposed form
// gets another name), everything else not allowed raw percent-encoded as UTF-8. Control
// characters and malformed `%` escapes stay errors.

extension URLReference {
    /// Parses `text`; when it is not a URL as written only because it holds characters a URL
    /// must percent-encode (non-ASCII, spaces, `"<>\^`{|}`), parses its encoded form instead
    /// (`original` is then that form). Throws the error for `text` as written otherwise.
    public init(parsingLeniently text: String) throws(URLParseError) {
        do { try self.init(parsing: text) } catch {
            if let encoded = URLReference.encodingIRI(text), let ref = try? URLReference(parsing: encoded) {
                self = ref
                return
            }
            // The first thing wrong, as the text reads: without a valid scheme it is not a URL at
            // all ("not a url" is that, not a space to encode).
            let trimmed = Substring(text).drop(while: { $0 == " " })
            let offset = text.unicodeScalars.count - trimmed.unicodeScalars.count
            guard let colon = trimmed.firstIndex(where: { ":/?#".contains($0) }), trimmed[colon] == ":" else {
                throw URLParseError(input: text, reason: URLReference.missingScheme)
            }
            let scheme = trimmed[..<colon]
            if scheme.isEmpty { throw URLParseError(input: text, reason: URLReference.missingSchemeBeforeColon, position: offset) }
            if !URLScheme.isValid(String(scheme)) {
                throw URLParseError(input: text, reason: URLReference.invalidScheme(scheme), position: offset)
            }
            // What encoding cannot fix (a control character, a malformed '%' escape) is the cause,
            // not an earlier character it would have encoded.
            // (the text itself is looked at: a character encoding would replace is no hex digit
            // of an escape, and an escape is shown as written)
            let scalars = Array(text.unicodeScalars)
            for (i, u) in scalars.enumerated() {
                let v = u.value
                let control = v < 0x20 || v == 0x7F
                let malformed =
                    v == 0x25
                    && !(i + 2 < scalars.count && URLReference.isHex(scalars[i + 1]) && URLReference.isHex(scalars[i + 2]))
                if control || malformed {
                    try URLReference.checkRawCharacters(from: i, count: scalars.count, { scalars[$0].value }, input: text)
                }
            }
            throw error
        }
    }

    /// `text` with its host's non-ASCII labels in IDNA ASCII form and every other character a URL
    /// may not hold raw percent-encoded (UTF-8); nil when there is nothing to encode, or when it
    /// holds what encoding cannot fix (control characters).
    public static func encodingIRI(_ text: String) -> String? {
        // (most text that is not a URL has nothing to encode: no copy is made for it)
        guard text.utf8.contains(where: { $0 >= 0x80 || URLReference.mustEncode($0) }) else { return nil }
        // Spaces around the URL (a pasted link) are not part of it, as browsers say.
        var scalars = Array(text.unicodeScalars)
        let written = scalars.count
        while scalars.last == " " { scalars.removeLast() }
        if let first = scalars.firstIndex(where: { $0 != " " }) { scalars.removeFirst(first) } else { return nil }
        var needed = scalars.count != written
        for u in scalars {
            if u.value < 0x20 || u.value == 0x7F { return nil }
            if u.value > 0x7F || URLReference.mustEncode(UInt8(u.value)) { needed = true }
        }
        guard needed else { return nil }
        // The host: after "scheme://" and any userinfo, up to the port, path, query or fragment.
        var hostRange: Range<Int>? = nil
        if let colon = scalars.firstIndex(of: ":"), colon + 2 < scalars.count, scalars[colon + 1] == "/", scalars[colon + 2] == "/" {
            let start = colon + 3
            var end = start
            while end < scalars.count, !"/?#".unicodeScalars.contains(scalars[end]) { end += 1 }
            var hostStart = start
            if let at = scalars[start..<end].lastIndex(of: "@") { hostStart = at + 1 }
            var hostEnd = hostStart
            if hostStart < end, scalars[hostStart] != "[" {
                while hostEnd < end, scalars[hostEnd] != ":" { hostEnd += 1 }
                if hostEnd > hostStart { hostRange = hostStart..<hostEnd }  // (an empty host: nothing to map)
            }
        }
        var out = ""
        out.reserveCapacity(scalars.count + 16)
        var i = 0
        while i < scalars.count {
            if let h = hostRange, i == h.lowerBound {
                guard let host = URLReference.asciiHost(Array(scalars[h])) else { return nil }
                out += host
                i = h.upperBound
                continue
            }
            let u = scalars[i]
            if u.value > 0x7F {
                for b in String(u).utf8 { out += "%" + URLReference.hex2(b) }
            } else if URLReference.mustEncode(UInt8(u.value)) {
                out += "%" + URLReference.hex2(UInt8(u.value))
            } else {
                out.unicodeScalars.append(u)
            }
            i += 1
        }
        return out
    }

    /// ASCII characters never allowed raw in a URL, that encoding fixes.
    static func mustEncode(_ c: UInt8) -> Bool {
        switch c {
        case 0x20, UInt8(ascii: "\""), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\\"), UInt8(ascii: "^"),
            UInt8(ascii: "`"), UInt8(ascii: "{"), UInt8(ascii: "|"), UInt8(ascii: "}"):
            return true
        default: return false
        }
    }

    /// `host` (optionally `:PORT`) lowercased, its non-ASCII labels in IDNA form (`bücher.de` →
    /// `xn--bcher-kva.de`), as URLs written as IRIs are routed; nil when a label has no such form.
    public static func idnaHost(_ host: String) -> String? {
        if host.utf8.allSatisfy({ $0 < 0x80 }) { return URLReference.asciiLowercased(host) }
        var name = Substring(host)
        var port = ""
        if let c = name.lastIndex(of: ":") {
            port = String(name[c...])
            name = name[..<c]
        }
        return asciiHost(Array(name.unicodeScalars)).map { URLReference.asciiLowercased($0) + port }
    }

    /// A host name's labels in ASCII: those with non-ASCII characters lowercased and written as
    /// `xn--` + Punycode; nil when a label cannot be (a space, or an empty non-ASCII label).
    static func asciiHost(_ host: [Unicode.Scalar]) -> String? {
        var labels: [String] = []
        var label: [Unicode.Scalar] = []
        func finish() -> Bool {
            defer { label.removeAll() }
            if label.allSatisfy({ $0.value < 0x80 }) {
                if label.contains(where: { URLReference.mustEncode(UInt8($0.value)) }) { return false }
                labels.append(String(String.UnicodeScalarView(label)))
                return true
            }
            // (a DNS label is at most 63 octets: a longer one has no A-label, and Punycode's cost
            // grows with the square of its length)
            guard label.count <= 63 else { return false }
            let lowered = Array(String(String.UnicodeScalarView(label)).lowercased().unicodeScalars)
            guard let code = URLReference.punycode(lowered.map(\.value)), code.utf8.count <= 59 else { return false }
            labels.append("xn--" + code)
            return true
        }
        for u in host {
            // (the ideographic and full-width full stops separate labels too, as IDNA says)
            if u == "." || u.value == 0x3002 || u.value == 0xFF0E || u.value == 0xFF61 {
                if !finish() { return nil }
            } else {
                label.append(u)
            }
        }
        if !finish() { return nil }
        return labels.joined(separator: ".")
    }

    /// RFC 3492 Punycode of `input` (code points); nil on overflow.
    static func punycode(_ input: [UInt32]) -> String? {
        let base = 36, tMin = 1, tMax = 26, skew = 38, damp = 700
        func digit(_ d: Int) -> Character { Character(Unicode.Scalar(UInt8(d < 26 ? 0x61 + d : 0x30 + d - 26))) }
        func adapt(_ delta: Int, _ points: Int, _ first: Bool) -> Int {
            var d = first ? delta / damp : delta / 2
            d += d / points
            var k = 0
            while d > ((base - tMin) * tMax) / 2 {
                d /= base - tMin
                k += base
            }
            return k + (base - tMin + 1) * d / (d + skew)
        }
        var out = ""
        for c in input where c < 0x80 { out.unicodeScalars.append(Unicode.Scalar(UInt8(c))) }
        let basic = out.unicodeScalars.count
        var handled = basic
        if basic > 0 { out += "-" }
        var n = 128
        var delta = 0
        var bias = 72
        while handled < input.count {
            guard let m = input.lazy.map({ Int($0) }).filter({ $0 >= n }).min() else { return nil }
            let (step, o1) = (m - n).multipliedReportingOverflow(by: handled + 1)
            if o1 || delta > Int(Int32.max) - step { return nil }
            delta += step
            n = m
            for c in input.lazy.map({ Int($0) }) {
                if c < n { delta += 1 }
                if c == n {
                    var q = delta
                    var k = base
                    while true {
                        let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                        if q < t { break }
                        out.append(digit(t + (q - t) % (base - t)))
                        q = (q - t) / (base - t)
                        k += base
                    }
                    out.append(digit(q))
                    bias = adapt(delta, handled + 1, handled == basic)
                    delta = 0
                    handled += 1
                }
            }
            delta += 1
            n += 1
        }
        return out
    }
}
