// Fuzz target: apple-app-site-association documents and matching (Sources/ShareRouting/AssociationDocument.swift,
// AssociationPattern.swift), through URLRouter as the broker uses them. Input: DOCUMENT [NUL URLS [NUL APPIDS]],
// URLS and APPIDS one per line (defaults: a few typical URLs; the document's own app IDs). Properties: loading
// and matching never trap; a deciding match names a details entry that lists the app and a pattern index in
// range; the router's fast path (resolve) agrees with its explained path (explain).

import ShareProtocol
import ShareRouting

private let defaultURLs = [
    "https://example.com/", "https://example.com/buy/item?id=42&ref=a#top", "https://example.com/%E5%93%88/x",
    "https://EXAMPLE.com/Help/FAQ?q=%20", "https://sub.example.com/path/a/b/c?x", "http://example.com/open",
]

private func lines(_ bytes: [UInt8]) -> [String] {
    lossyString(bytes).split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let parts = splitParts(inputBuffer(data, size), count: 3)
    let result = AssociationDocument.load(parts[0])
    var urls = parts.count > 1 ? lines(parts[1]) : defaultURLs
    if urls.isEmpty { urls = defaultURLs }
    if urls.count > 8 { urls = Array(urls.prefix(8)) }

    var appIDs = ["ABCDE12345.com.example.app"]
    if case .success(let doc) = result {
        _ = doc.notes
        appIDs = Array(doc.appIDs.prefix(6)) + appIDs
        if parts.count > 2 { appIDs += lines(parts[2]).prefix(4) }
        for text in urls {
            guard let url = URLReference.parse(text) else { continue }
            for appID in appIDs {
                let m = doc.match(url: url, appID: appID)
                if m.outcome == .noMatch { continue }
                guard let d = m.detailIndex, d >= 0, d < doc.details.count else {
                    fuzzCheck(false, "a deciding match has no valid detailIndex: \(String(describing: m.detailIndex))")
                    continue
                }
                let detail = doc.details[d]
                fuzzCheck(detail.appIDs.contains(appID), "details[\(d)] decided for \(appID) but does not list it")
                let count = detail.format == .components ? detail.components.count : detail.paths.count
                fuzzCheck(m.patternIndex.map { $0 >= 0 && $0 < count } ?? false, "patternIndex out of range")
            }
        }
    } else if case .failure(let error) = result {
        _ = error.description
    }

    // The router with one app per app ID, each claiming the URLs' hosts, and the document served by them.
    var apps: [AppManifest] = []
    var hosts = Set<String>()
    for text in urls { if let h = URLReference.parse(text)?.host, !h.isEmpty { hosts.insert(h) } }
    for (i, appID) in appIDs.enumerated() {
        guard let dot = appID.firstIndex(of: ".") else { continue }
        apps.append(
            AppManifest(
                bundleID: String(appID[appID.index(after: dot)...]), teamID: String(appID[..<dot]),
                urlSchemes: i == 0 ? ["https", "myapp"] : [],
                associatedDomains: hosts.sorted().map { "applinks:" + $0 } + ["applinks:*.example.com"]))
    }
    var associations: [String: AssociationDocumentResult] = [:]
    for h in hosts { associations[h] = result }
    associations["example.com"] = result
    let router = URLRouter(apps: apps, associations: associations)
    for text in urls {
        let fast = router.resolve(text, fallback: "myapp://fallback")
        let explained = router.explain(text, fallback: "myapp://fallback")
        fuzzCheck(
            fast == explained.decision, "resolve and explain disagree for \(text): \(fast) vs \(explained.decision)")
        _ = explained.text
        _ = try? router.canOpen(text)
    }
    return 0
}
