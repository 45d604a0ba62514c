// Fuzz target: the predicate parser and evaluator (Sources/ShareRouting/Predicate*.swift).
// Input: PREDICATE [NUL SELF-as-JSON [NUL VARIABLES-as-JSON-object]]. Without a usable SELF, the predicate is
// evaluated over the extension context of a few typical attachments and over a web URL object (what
// activation rules see). Properties: parsing and evaluation never trap; the printed form parses back to an
// equal tree (PredicateFormat.description promises this).

import ShareProtocol
import ShareRouting

private let defaultObjects: [PredicateValue] = [
    ActivationContext.extensionContext([
        Attachment(kind: .url, registeredTypeIdentifiers: ["public.url"], url: "https://www.youtube.com/watch?v=1"),
        Attachment(kind: .data, registeredTypeIdentifiers: ["com.adobe.pdf"]),
        Attachment(kind: .text, registeredTypeIdentifiers: ["public.plain-text"]),
    ]),
    ActivationContext.webURL("https://youtu.be/abc?t=1#x"),
    .array([.number(1), .string("a"), .null, .bool(true), .array([]), .object(["k": .number(2.5)])]),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let parts = splitParts(inputBuffer(data, size), count: 3)
    let source = lossyString(parts[0])
    let predicate: PredicateFormat
    do {
        predicate = try PredicateFormat(parsing: source)
    } catch {
        _ = error.description
        fuzzCheck(
            error.position >= 0 && error.position <= source.unicodeScalars.count,
            "error position \(error.position) outside the source")
        return 0
    }

    let printed = predicate.description
    do {
        let again = try PredicateFormat(parsing: printed)
        fuzzCheck(
            again == predicate,
            "printed form parses to a different tree: \(source) -> \(printed) -> \(again.description)")
    } catch {
        fuzzCheck(false, "printed form does not parse: \(source) -> \(printed): \(error)")
    }

    var objects = defaultObjects
    if parts.count > 1, let json = try? JSONParser.parse(parts[1]) { objects = [PredicateValue(json: json)] }
    var variables: [String: PredicateValue] = ["url": .string("https://example.com/"), "n": .number(3)]
    if parts.count > 2, let json = try? JSONParser.parse(parts[2]), case .object(let o) = json {
        for m in o { variables[m.key] = PredicateValue(json: m.value) }
    }
    for object in objects {
        _ = try? predicate.evaluate(with: object, variables: variables)
    }
    return 0
}
