// Fuzz target: URL parsing and scanning (Sources/ShareRouting/URLReference.swift; exactURL/urlsFoundIn in
// UTIShareItems.swift; AssociatedDomainEntry in Manifest.swift; the lenient IRI parse in URLReferenceIRI.swift).
// Properties: a parsed URL's components put back together give the original text; an IRI's encoded form
// is ASCII, parses to itself and is not encoded again; the host is the lowercased original host; ports are in range;
// every URL found in a text parses; a valid associatedDomains entry parses.

import ShareRouting

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = lossyString(Array(inputBuffer(data, size)))
    do {
        let url = try URLReference(parsing: text)
        var rebuilt = url.scheme + ":"
        if let authority = url.authority { rebuilt += "//" + authority }
        rebuilt += url.path
        if let q = url.query { rebuilt += "?" + q }
        if let f = url.fragment { rebuilt += "#" + f }
        fuzzCheck(rebuilt == text, "components do not rebuild the URL: \(rebuilt) vs \(text)")
        fuzzCheck(url.original == text, "original changed")
        fuzzCheck(url.normalizedScheme == url.scheme.lowercased(), "normalizedScheme is not the lowercased scheme")
        fuzzCheck(url.host == url.originalHost?.lowercased(), "host is not the lowercased original host")
        if let port = url.port { fuzzCheck((0...65535).contains(port), "port \(port) out of range") }
        if url.isWeb { fuzzCheck(!(url.host ?? "").isEmpty, "a web URL without a host was accepted") }
        _ = url.effectivePort
        for item in url.queryItems {
            _ = URLReference.percentDecoded(item.name)
            _ = item.value.map(URLReference.percentDecoded)
        }
        _ = URLReference.percentDecoded(url.path)
        fuzzCheck(URLReference.parse(text) == url, "parse(_:) disagrees with init(parsing:)")
    } catch {
        fuzzCheck(URLReference.parse(text) == nil, "parse(_:) accepted what init(parsing:) rejected")
        _ = error.message
        if let p = error.position {
            fuzzCheck(p >= 0 && p < max(1, text.unicodeScalars.count), "error position \(p) outside the input")
        }
    }
    _ = URLReference.percentDecoded(text)

    // Lenient parsing (IRIs): a valid URL parses as written; what it accepts otherwise is the
    // encoded form, plain ASCII, which parses strictly to itself and is not encoded again.
    if let lenient = try? URLReference(parsingLeniently: text) {
        if URLReference.parse(text) != nil { fuzzCheck(lenient.original == text, "a valid URL was changed: \(text)") }
        fuzzCheck(lenient.original.utf8.allSatisfy { $0 < 0x80 }, "the encoded form is not ASCII: \(lenient.original)")
        fuzzCheck(URLReference.parse(lenient.original) == lenient, "the encoded form does not parse to itself")
        fuzzCheck(URLReference.encodingIRI(lenient.original) == nil, "the encoded form was encoded again")
    }

    if let exact = exactURL(in: text) {
        fuzzCheck(URLReference.parse(exact) != nil, "exactURL returned a string that does not parse: \(exact)")
    }
    for found in urlsFoundIn(text) {
        fuzzCheck(URLReference.parse(found) != nil, "urlsFoundIn returned a string that does not parse: \(found)")
    }

    let problem = AssociatedDomainEntry.problem(in: text)
    let entry = AssociatedDomainEntry(text)
    fuzzCheck((problem == nil) == (entry != nil), "AssociatedDomainEntry init and problem(in:) disagree on \(text)")
    return 0
}
