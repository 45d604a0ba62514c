// Upgrade compatibility: the broker starts on a state directory an old build wrote and serves
// everything that was pending there. Tests/Fixtures/upgrade/state-ae14b59 was written by the
// release build of ae14b59 (the first commit with durable events, shares and group defaults)
// and stopped with SIGTERM; Tests/Fixtures/upgrade/README.md says how. Its journals are the old
// build's bytes: a change to the record format or to replay that loses, reorders or quarantines
// any of it fails here.

import Foundation
import ShareClient
import ShareProtocol
import XCTest

private let upgradeFixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/upgrade").path

private let alpha = "com.example.alpha"
private let beta = "com.example.beta"
private let groupAlpha = "group.com.example.alpha"
private let groupBeta = "group.com.example.beta"
private let groupShared = "group.com.example.shared"
private let fileShare = "sh-e0df075a5f9c36c345266707"

final class UpgradeCompatibilityTests: XCTestCase {
    /// What ae14b59 held when it stopped: events ev-1...ev-8 opened (ev-7 by a share), ev-3, ev-4,
    /// ev-6 and ev-8 acked; five shares sent, one completed; three groups' defaults.
    let pendingEvents: [String: [JSONValue]] = [
        alpha: [
            ["id": "ev-1", "kind": "openURL", "url": "alpha://item?id=1", "via": "scheme"],
            [
                "id": "ev-2", "kind": "continueUserActivity", "activityType": "NSUserActivityTypeBrowsingWeb",
                "webpageURL": "https://example.com/items/2", "via": "universalLink",
            ],
            [
                "id": "ev-7", "kind": "openURL", "url": .string("alpha://open-from-share?share=\(fileShare)"),
                "via": "scheme",
                "sourceApp": "com.example.alpha.share", "shareID": .string(fileShare),
            ],
        ],
        beta: [["id": "ev-5", "kind": "openURL", "url": "beta://thing/5", "via": "scheme"]],
    ]

    /// Pending shares per group, oldest first; a file item's `path` is replaced by its bytes (`bytes`).
    let pendingShares: [String: [JSONValue]] = [
        groupAlpha: [
            [
                "shareID": "sh-2540543908b91bd15a113510", "extension": "com.example.alpha.share",
                "app": "com.example.alpha",
                "group": "group.com.example.alpha", "created": "2026-12-02T14:36:09.868Z",
                "items": [
                    ["url": "https://example.com/shared/1", "type": "public.url"],
                    ["text": "caf\u{E9} \u{2603} note", "type": "public.plain-text"],
                ],
            ],
            [
                "shareID": .string(fileShare), "extension": "com.example.alpha.share", "app": "com.example.alpha",
                "group": "group.com.example.alpha", "created": "2026-12-02T14:36:09.869Z",
                "items": [["name": "f.txt", "type": "public.plain-text", "size": 14, "bytes": "hello fixture\n"]],
            ],
        ],
        groupShared: [
            [
                "shareID": "sh-b85f0378aeae8f47106c3f9f", "extension": "com.example.alpha.share",
                "app": "com.example.alpha",
                "group": "group.com.example.shared", "created": "2026-12-02T14:36:09.873Z",
                "items": [["text": "to the shared group", "type": "public.plain-text"]],
            ]
        ],
        groupBeta: [
            [
                "shareID": "sh-2e082154bcc1ef5d0a7aa894", "extension": "com.example.beta.share",
                "app": "com.example.beta",
                "group": "group.com.example.beta", "created": "2026-12-02T14:36:09.878Z",
                "items": [
                    ["url": "https://example.com/beta/5", "type": "public.url"],
                    [
                        "name": "b.bin", "type": "public.data", "size": 256,
                        "bytes": .string(Data(0...255).base64EncodedString()),
                    ],
                ],
            ]
        ],
    ]

    let completedShare = "sh-1fecc230a1be382b8f520102"

    /// defaults.list of each group: values and version.
    let defaults: [String: JSONValue] = [
        groupAlpha: [
            "values": [
                "counter": 3, "cas": ["nested": [1, nil, "\u{E9}"]],
                "watchlist": [["id": 1, "name": "South Korea", "iso": "KR"], ["id": 2, "n": .number("1.5")]],
            ],
            "version": 7,
        ],
        groupShared: ["values": ["flag": false], "version": 2],
        groupBeta: ["values": ["k": "v1", "n": .number("12345678901234567890")], "version": 2],
    ]

    /// A harness on a private copy of the fixture (its directories made the broker's own, 0700).
    func harnessOnFixture() throws -> BrokerHarness {
        let h = BrokerHarness()
        try FileManager.default.copyItem(atPath: upgradeFixtures + "/state-ae14b59", toPath: h.state)
        let walk = FileManager.default.enumerator(atPath: h.state)
        var isDir: ObjCBool = false
        for path in [h.state] + (walk?.allObjects as? [String] ?? []).map({ h.state + "/" + $0 }) {
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else { continue }
            try FileManager.default.setAttributes(
                [.posixPermissions: isDir.boolValue ? 0o700 : 0o600], ofItemAtPath: path)
        }
        return h
    }

    func session(_ h: BrokerHarness, _ bundle: String, role: String = "app") throws -> BrokerConnection {
        let c = try h.connect()
        try c.hello(role: role, bundleID: bundle)
        return c
    }

    /// The app's pending events, in delivery order (subscribes; acks nothing).
    func events(_ h: BrokerHarness, _ app: String, file: StaticString = #filePath, line: UInt = #line) throws
        -> [JSONValue]
    {
        let c = try session(h, app)
        let pending = try XCTUnwrap(c.call("app.subscribe")["pending"]?.intValue, file: file, line: line)
        var got: [JSONValue] = []
        for _ in 0..<pending {
            let n = try XCTUnwrap(
                c.nextNotification(timeoutMillis: 5000), "event \(got.count + 1) of \(pending)", file: file, line: line)
            XCTAssertEqual(n.method, "app.event", file: file, line: line)
            got.append(n.params ?? nil)
        }
        c.assertNothingMore(timeoutMillis: 200, "no event beyond the pending ones", file: file, line: line)
        return got
    }

    /// share.list of a group, each share as share.get gives it, file items' paths read into `bytes`.
    func shares(_ h: BrokerHarness, _ app: String, _ group: String, file: StaticString = #filePath, line: UInt = #line)
        throws -> [JSONValue]
    {
        let c = try session(h, app)
        let listed = try XCTUnwrap(
            c.call("share.list", ["group": .string(group)])["shares"]?.arrayValue, file: file, line: line)
        return try listed.map { s in
            var got = try XCTUnwrap(
                c.call("share.get", ["shareID": try XCTUnwrap(s["shareID"])]).objectValue, file: file, line: line)
            let items = try XCTUnwrap(got["items"]?.arrayValue, file: file, line: line)
            got["items"] = .array(
                try items.map { item in
                    guard var o = item.objectValue, let path = o["path"]?.stringValue else { return item }
                    let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
                    o["path"] = nil
                    o["bytes"] = .string(
                        String(data: bytes, encoding: .utf8).flatMap {
                            $0.utf8.count == bytes.count && !$0.contains("\u{0}") ? $0 : nil
                        }
                            ?? bytes.base64EncodedString())
                    return .object(o)
                })
            return .object(got)
        }
    }

    func defaultsList(_ h: BrokerHarness, _ app: String, _ group: String) throws -> JSONValue {
        try session(h, app).call("defaults.list", ["group": .string(group)])
    }

    /// Everything the old build left pending is there, exactly, and nothing it acked or completed.
    func assertFixtureState(
        _ h: BrokerHarness, events expectedEvents: [String: [JSONValue]], shares expectedShares: [String: [JSONValue]],
        defaults expectedDefaults: [String: JSONValue], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let status = try h.tool().call("broker.status")
        XCTAssertEqual(status["store"]?["quarantinedRecords"]?.intValue, 0, "\(status)", file: file, line: line)
        XCTAssertEqual(status["store"]?["truncatedBytes"]?.intValue, 0, "\(status)", file: file, line: line)
        for app in [alpha, beta] {
            XCTAssertEqual(
                try events(h, app, file: file, line: line), expectedEvents[app], "events of \(app)", file: file,
                line: line)
        }
        for (app, group) in [(alpha, groupAlpha), (alpha, groupShared), (beta, groupBeta)] {
            XCTAssertEqual(
                try shares(h, app, group, file: file, line: line), expectedShares[group], "shares of \(group)",
                file: file, line: line)
            XCTAssertEqual(
                try defaultsList(h, app, group), expectedDefaults[group], "defaults of \(group)", file: file, line: line
            )
        }
        do {
            let got = try session(h, alpha).call("share.get", ["shareID": .string(completedShare)])
            XCTFail("a completed share came back: \(got)", file: file, line: line)
        } catch ClientError.rpc(let e) {
            XCTAssertEqual(e.code, -32002, "a completed share stays completed: \(e.message)", file: file, line: line)
        }
    }

    func testStateWrittenByTheFirstDurableBuildSurvivesTheUpgrade() throws {
        let h = try harnessOnFixture()
        try h.start()
        try assertFixtureState(h, events: pendingEvents, shares: pendingShares, defaults: defaults)

        // New writes on the old state: ids go on after the highest the old build used (ev-8,
        // acked), an ack, a completion, a compare-and-set at the old version.
        let opened = try h.tool().call("url.open", ["url": "alpha://after-upgrade"])
        XCTAssertEqual(opened["eventID"], "ev-9")
        let app = try session(h, alpha)
        XCTAssertEqual(try app.call("app.ack", ["ids": ["ev-1"]])["acked"]?.intValue, 1)
        XCTAssertEqual(try app.call("share.complete", ["shareID": "sh-2540543908b91bd15a113510"])["completed"], true)
        XCTAssertEqual(
            try app.call("defaults.set", ["group": .string(groupAlpha), "key": "counter", "value": 4, "ifVersion": 7])[
                "version"], 8)
        h.stop()

        // ... and survive a restart of the new build.
        var events = pendingEvents
        events[alpha] =
            Array(events[alpha]!.dropFirst()) + [
                ["id": "ev-9", "kind": "openURL", "url": "alpha://after-upgrade", "via": "scheme"]
            ]
        var shares = pendingShares
        shares[groupAlpha] = Array(shares[groupAlpha]!.dropFirst())
        var values = defaults
        values[groupAlpha] = [
            "values": [
                "counter": 4, "cas": ["nested": [1, nil, "\u{E9}"]],
                "watchlist": [["id": 1, "name": "South Korea", "iso": "KR"], ["id": 2, "n": .number("1.5")]],
            ],
            "version": 8,
        ]
        let again = BrokerHarness()
        try FileManager.default.copyItem(atPath: h.state, toPath: again.state)
        try again.start()
        try assertFixtureState(again, events: events, shares: shares, defaults: values)
        again.stop()
    }
}
