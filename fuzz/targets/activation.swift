// Fuzz target: activation rules (Sources/ShareRouting/ActivationRule.swift, ActivationEvaluation.swift,
// ActivationValidation.swift). Input: RULE [NUL ITEMS]. RULE is JSON (a dictionary or a predicate string),
// or else taken as a raw predicate string; ITEMS is a JSON array of contract items ({url}, {text}, {data},
// {path}, with optional type/name), else a default mix. Properties: reading, validating and evaluating never
// trap; the manifest path (ActivationRule.evaluate(json)) agrees with reading then evaluating.

import ShareProtocol
import ShareRouting

private let defaultItems: [ShareItem] = [
    .url("https://www.youtube.com/watch?v=1"), .text("see https://example.com/a and more"),
    .data(Array("%PDF-1.4".utf8), name: "doc.pdf"), .data([0x89, 0x50, 0x4E, 0x47], type: "public.png"),
    .file(path: "/tmp/movie.mov"), .url("file:///tmp/x.txt"),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let parts = splitParts(inputBuffer(data, size), count: 2)
    let rule: JSONValue = (try? JSONParser.parse(parts[0])) ?? .string(lossyString(parts[0]))

    var itemSets: [[ShareItem]] = [defaultItems, [defaultItems[0]], [defaultItems[2], defaultItems[3]]]
    if parts.count > 1, let json = try? JSONParser.parse(parts[1]), case .array(let list) = json {
        var items: [ShareItem] = []
        for (i, v) in list.enumerated() {
            if let item = try? ShareItem.parse(v, field: "items[\(i)]") { items.append(item) }
        }
        itemSets = [items]
    }

    for issue in ActivationRule.validate(rule) { _ = issue.description }
    let parsed = Result { () throws(ActivationRuleError) -> ActivationRule in try ActivationRule(json: rule) }
    if case .success(let r) = parsed, case .dictionary(let d) = r {
        _ = d.supportsSomething
        for issue in r.issues() { _ = issue.description }
    }
    for items in itemSets {
        let attachments = UTITable.system.attachments(for: items)
        let viaJSON = ActivationRule.evaluate(rule, attachments: attachments)
        switch parsed {
        case .success(let r):
            let direct = r.evaluate(attachments)
            fuzzCheck(direct == viaJSON, "evaluate(json) and evaluate(rule) disagree: \(direct) vs \(viaJSON)")
        case .failure:
            fuzzCheck(!viaJSON.accepted, "an unreadable rule accepted items")
        }
        if attachments.isEmpty { fuzzCheck(!viaJSON.accepted, "a rule accepted no items") }
    }
    return 0
}
