// `routing`: the url.open decision in-process (no broker). A URLRouter over N generated apps and their
// association documents resolves a fixed mix of URLs; the figure is decisions per second, once with
// N apps and once with 10, which should be close if a decision never scans every app.

import Foundation
import ShareProtocol
import ShareRouting
import ShareSystem

/// A small deterministic generator (splitmix64), so every run resolves the same URLs.
struct BenchRandom {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}

/// The generated world: app i (0 ..< n-1) registers `bappI` and `bappI-alt` and claims `siteI.example`:
/// i%4 ∈ {0,1}: `applinks:siteI.example`; 2: `applinks:*.siteI.example`; 3: both. Every 20th app has no
/// team ID (so no universal links). The last app is the browser (`https`, `http`). siteI.example's
/// document uses the legacy `paths` format for even i (`NOT /private/*`, `/items/*`, `/u/?*`, and for
/// i%8 == 0 a preceding details entry for another app) and `components` for odd i (exclude `/buy/*`,
/// `/p/*` with `?ref=?*`, `/docs/*` with `#sec-*`, `/items/*`, `/u/?*` case-insensitive).
struct RoutingWorld {
    let count: Int
    var generated: Int { count - 1 }

    static func teamID(_ i: Int) -> String? { i % 20 == 19 ? nil : "T" + String(format: "%09d", i % 37) }
    static func bundleID(_ i: Int) -> String { "com.bench.app\(i)" }
    static func appID(_ i: Int) -> String? { teamID(i).map { "\($0).\(bundleID(i))" } }

    func apps() -> [AppManifest] {
        var out: [AppManifest] = []
        for i in 0..<generated {
            let host = "site\(i).example"
            let domains: [String]
            switch i % 4 {
            case 0, 1: domains = ["applinks:\(host)"]
            case 2: domains = ["applinks:*.\(host)"]
            default: domains = ["applinks:\(host)", "applinks:*.\(host)"]
            }
            out.append(
                AppManifest(
                    bundleID: RoutingWorld.bundleID(i), teamID: RoutingWorld.teamID(i), urlSchemes: ["bapp\(i)", "bapp\(i)-alt"],
                    associatedDomains: domains, file: "app\(i).json"))
        }
        out.append(AppManifest(bundleID: "com.bench.browser", urlSchemes: ["https", "http"], file: "browser.json"))
        return out
    }

    /// The document served by siteI.example, as bytes (parsed by AssociationDocument.load).
    func document(_ i: Int) -> [UInt8] {
        // Documents name the app even when it has no team ID of its own (a stale document).
        let appID = RoutingWorld.appID(i) ?? "TNONE00000.\(RoutingWorld.bundleID(i))"
        let text: String
        if i % 2 == 0 {
            let other = i % 8 == 0 ? #"{"appID": "TOTHER0000.com.other.app\#(i)", "paths": ["*"]},"# : ""
            text = """
                {"applinks": {"apps": [], "details": [\(other)
                  {"appID": "\(appID)", "paths": ["NOT /private/*", "/items/*", "/u/?*"]}]}}
                """
        } else {
            text = """
                {"applinks": {"details": [{"appIDs": ["\(appID)", "TOTHER0000.com.other.app\(i)"], "components": [
                  {"/": "/buy/*", "exclude": true, "comment": "checkout stays on the web"},
                  {"/": "/p/*", "?": {"ref": "?*"}},
                  {"/": "/docs/*", "#": "sec-*"},
                  {"/": "/items/*"},
                  {"/": "/u/?*", "caseSensitive": false}]}]}}
                """
        }
        return Array(text.utf8)
    }

    func documents() -> [String: AssociationDocumentResult] {
        var out: [String: AssociationDocumentResult] = [:]
        for i in 0..<generated { out["site\(i).example"] = AssociationDocument.load(document(i)) }
        return out
    }

    /// One URL (with its fallback) and the `via` the contract says it gets ("error" for no handler).
    func url(_ r: inout BenchRandom, serial k: Int) -> (url: String, fallback: String?, expected: String) {
        let i = r.below(generated)
        let hasTeam = RoutingWorld.teamID(i) != nil
        let legacy = i % 2 == 0
        let exactHost = i % 4 != 2
        let host = exactHost && (i % 4 != 3 || k % 2 == 0) ? "site\(i).example" : "w\(k % 7).site\(i).example"
        let roll = r.below(100)
        switch roll {
        case 0..<30:  // custom scheme (sometimes in capitals: schemes compare case-insensitively)
            let scheme = k % 3 == 0 ? "bapp\(i)-alt" : (k % 5 == 0 ? "BAPP\(i)" : "bapp\(i)")
            return ("\(scheme)://open/item/\(k)?src=bench", nil, "scheme")
        case 30..<55:  // universal link that the document gives the app
            let path: String
            switch k % 4 {
            case 0: path = "/items/\(k)"
            case 1: path = legacy ? "/u/\(k)" : "/U/\(k)"  // components: caseSensitive false
            case 2: path = legacy ? "/items/\(k)?q=1" : "/p/\(k)?ref=mail&x=1"
            default: path = legacy ? "/items/a/b/\(k)" : "/docs/intro#sec-\(k % 9)"
            }
            return ("https://\(host)\(path)", nil, hasTeam ? "universalLink" : "browser")
        case 55..<65:  // excluded by the document → browser
            return ("https://\(host)\(legacy ? "/private/\(k)" : "/buy/\(k)")", nil, "browser")
        case 65..<70:  // claimed domain, no pattern matches (components: query item missing) → browser
            return ("https://\(host)\(legacy ? "/other/\(k)" : "/p/\(k)")", nil, "browser")
        case 70..<80:  // nobody claims the host → browser
            return ("https://nowhere\(k % 1000).test/items/\(k)", nil, "browser")
        case 80..<85:  // http skips universal links → browser
            return ("http://\(host)/items/\(k)", nil, "browser")
        case 85..<95:  // unknown scheme with a fallback (a custom scheme, or a universal link)
            if k % 2 == 0 { return ("nosuch\(k % 50)://x/\(k)", "bapp\(i)://fallback/\(k)", "fallback") }
            return ("nosuch\(k % 50)://x/\(k)", "https://\(host)/items/\(k)", "fallback")
        default:  // unknown scheme, no fallback → -32004
            return ("nosuch\(k % 50)://x/\(k)", nil, "error")
        }
    }
}

struct RoutingRun {
    var apps: Int
    var urls: Int
    var parseMs: Double
    var buildMs: Double
    var perSecond: Double
    var nsPerDecision: Double
    var counts: [String: Int]
    var mismatches: Int
    var firstMismatch: String?
}

/// One world, built and checked, ready to be timed.
final class RoutingSetup {
    let router: URLRouter
    let list: [(url: String, fallback: String?, expected: String)]
    var run: RoutingRun

    init(apps n: Int, urls: Int) {
        let world = RoutingWorld(count: max(2, n))
        let manifests = world.apps()
        let t0 = Clock.monotonicNanos()
        let docs = world.documents()
        let t1 = Clock.monotonicNanos()
        router = URLRouter(apps: manifests, associations: docs)
        let t2 = Clock.monotonicNanos()
        var rng = BenchRandom(state: 0x5EED)
        var list: [(url: String, fallback: String?, expected: String)] = []
        list.reserveCapacity(urls)
        for k in 0..<urls { list.append(world.url(&rng, serial: k)) }
        self.list = list

        // Correctness pass: the distribution, and every decision against the expected `via`.
        var counts: [String: Int] = [:]
        var mismatches = 0
        var firstMismatch: String? = nil
        for u in list {
            let d = router.resolve(u.url, fallback: u.fallback)
            let via = d.via?.rawValue ?? "error"
            counts[via, default: 0] += 1
            if via != u.expected {
                mismatches += 1
                if firstMismatch == nil {
                    firstMismatch =
                        "\(u.url) fallback=\(u.fallback ?? "-"): got \(via) (\(d.app ?? d.errorMessage ?? "")), expected \(u.expected)"
                }
            }
        }
        run = RoutingRun(
            apps: manifests.count, urls: list.count, parseMs: Double(t1 - t0) / 1e6, buildMs: Double(t2 - t1) / 1e6,
            perSecond: 0, nsPerDecision: .infinity, counts: counts, mismatches: mismatches, firstMismatch: firstMismatch)
    }

    /// One timed pass over the list; keeps the best.
    func timePass() {
        var sink = 0
        let s = Clock.monotonicNanos()
        for u in list { if case .routed(let app, _, _, _) = router.resolve(u.url, fallback: u.fallback) { sink &+= app.utf8.count } }
        let ns = Double(Clock.monotonicNanos() - s)
        if sink == 42 { print("") }  // keep the work observable
        let each = ns / Double(list.count)
        if each < run.nsPerDecision {
            run.nsPerDecision = each
            run.perSecond = 1e9 / each
        }
    }
}

func routingScenario(apps: Int, urls: Int, passes: Int) -> JSONValue {
    let bigSetup = RoutingSetup(apps: apps, urls: urls)
    let smallSetup = RoutingSetup(apps: 10, urls: urls)
    // Alternate the two so that both see the same machine (other load comes and goes); best pass counts.
    for _ in 0..<max(1, passes) {
        bigSetup.timePass()
        smallSetup.timePass()
    }
    let big = bigSetup.run
    let small = smallSetup.run
    let order = ["scheme", "universalLink", "browser", "fallback", "error"]
    func countsText(_ c: [String: Int]) -> String { order.map { "\($0)=\(c[$0] ?? 0)" }.joined(separator: " ") }
    for r in [big, small] {
        print(
            "routing    apps=\(r.apps) docs=\(r.apps - 1) urls=\(r.urls) rate=\(fmt(r.perSecond))/s (\(fmt(r.nsPerDecision))ns each) "
                + "parse_docs=\(fmt(r.parseMs, 1))ms build=\(fmt(r.buildMs, 1))ms via: \(countsText(r.counts)) mismatches=\(r.mismatches)")
        if let m = r.firstMismatch { print("  first mismatch: \(m)") }
    }
    let ratio = big.perSecond / small.perSecond
    print("routing    \(big.apps) apps vs 10 apps: \(fmt(ratio * 100))% of the 10-app rate")
    func json(_ r: RoutingRun) -> JSONValue {
        [
            "apps": .int(r.apps), "urls": .int(r.urls), "perSecond": .double(r.perSecond.rounded()),
            "nsPerDecision": .double((r.nsPerDecision * 10).rounded() / 10), "parseDocsMs": .double((r.parseMs * 10).rounded() / 10),
            "buildMs": .double((r.buildMs * 10).rounded() / 10),
            "counts": .object(JSONObject(order.map { ($0, JSONValue.int(r.counts[$0] ?? 0)) })), "mismatches": .int(r.mismatches),
        ]
    }
    return ["scenario": "routing", "large": json(big), "small": json(small), "ratio": .double((ratio * 1000).rounded() / 1000)]
}
