// Fuzz target: app manifests (Sources/ShareRouting/Manifest.swift, AppRegistry.swift) and what the broker
// builds from them. Input: one or more manifest files separated by NUL. Properties: decoding never traps; a
// manifest is returned only without fatal issues; the registry, its JSON, the router and every extension's
// activation rule can be used without trapping.

import ShareProtocol
import ShareRouting

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let files = splitParts(inputBuffer(data, size), count: 4)
    var named: [(name: String, bytes: [UInt8])] = []
    for (i, bytes) in files.enumerated() {
        let (manifest, issues) = ManifestDecoder.decode(bytes: bytes, file: "app\(i).json")
        for issue in issues { _ = issue.description }
        if manifest != nil {
            fuzzCheck(!issues.contains(where: \.fatal), "a manifest was returned with fatal issues")
        }
        named.append((name: "app\(i).json", bytes: bytes))
    }
    let registry = AppRegistry(files: named)
    _ = registry.listJSON.compactText
    let attachments = UTITable.system.attachments(for: [
        .url("https://example.com/a"), .text("hello"), .data(Array("%PDF-1.7".utf8), name: "a.pdf"),
    ])
    var urls: [String] = []
    for app in registry.apps {
        _ = app.json.compactText
        _ = app.appID
        for bundle in [app.bundleID] + app.extensions.map(\.bundleID) {
            _ = registry.lookup(bundle)
            _ = registry.requiredToken(for: bundle)
            _ = registry.identityRule(for: bundle)
            _ = registry.appGroups(of: bundle)
        }
        for ext in app.extensions {
            _ = ext.isShareTarget
            _ = ActivationRule.evaluate(ext.activationRule, attachments: attachments)
        }
        for scheme in app.urlSchemes.prefix(3) { urls.append(scheme + "://open?x=1") }
        for entry in app.associatedDomains.prefix(3) {
            if let e = AssociatedDomainEntry(entry) {
                urls.append("https://" + (e.wildcard ? "a." : "") + e.host + "/p")
            }
        }
    }
    let router = URLRouter(apps: registry.apps, associations: [:])
    _ = router.conflicts
    for url in urls.prefix(12) {
        let fast = router.resolve(url, fallback: nil)
        fuzzCheck(fast == router.explain(url, fallback: nil).decision, "resolve and explain disagree for \(url)")
    }
    return 0
}
