// Group defaults through the real socket: defaults.get/set/remove/list/watch, exact values,
// versions (also across restarts), compare-and-set under concurrent writers, defaults.changed
// after durability only, slow watchers dropped, access control, and SIGKILL of the real binary.

import Foundation
import ShareBrokerCore
import ShareClient
import ShareProtocol
import ShareStore
import XCTest

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

let defaultsGroup = "group.com.mycompany.myapp"
let defaultsManifests: [String: String] = [
    "10-myapp.json": manifestJSON(
        "com.mycompany.myapp", schemes: ["deeplinkmyapp"], groups: [defaultsGroup, "group.com.mycompany.shared"],
        extensions: [
            #"{"bundleID":"com.mycompany.myapp.share","point":"com.apple.share-services","appGroups":["group.com.mycompany.myapp"]}"#,
            #"{"bundleID":"com.mycompany.myapp.widget","point":"com.apple.widgetkit-extension"}"#,
        ]),
    "20-other.json": manifestJSON("org.other.app", groups: ["group.org.other"]),
    "30-odd.json": manifestJSON("org.odd.app", groups: ["../escape", "group/with/slash", "group.Kelvin"]),
    "40-case.json": manifestJSON(
        "org.case.app", groups: ["group.kelvin", "group.org.case", "group.org.other"],
        extensions: [#"{"bundleID":"org.case.app.share","point":"com.apple.share-services","appGroups":["GROUP.ORG.CASE"]}"#]),
]

final class DefaultsTests: XCTestCase {
    func makeBroker(_ configure: @escaping (inout BrokerConfiguration) -> Void = { _ in }) throws -> BrokerHarness {
        let h = BrokerHarness(manifests: defaultsManifests)
        try h.start(configure)
        return h
    }

    func session(_ h: BrokerHarness, _ bundle: String = "com.mycompany.myapp", role: String = "app") throws
        -> BrokerConnection
    {
        let c = try h.connect()
        try c.hello(role: role, bundleID: bundle)
        return c
    }

    func p(_ key: String? = nil, _ extra: JSONObject = [:], group: String = defaultsGroup) -> JSONValue {
        var o: JSONObject = ["group": .string(group)]
        if let key { o["key"] = .string(key) }
        for m in extra { o[m.key] = m.value }
        return .object(o)
    }

    func version(_ v: JSONValue?) -> Int? { v?["version"]?.intValue }

    // MARK: Methods

    func testGetSetRemoveListAndVersions() throws {
        let h = try makeBroker()
        let app = try session(h)
        let ext = try session(h, "com.mycompany.myapp.share", role: "extension")

        let missing = try app.call("defaults.get", p("greeting"))
        XCTAssertEqual(missing, ["exists": false, "value": nil, "version": 0], "a fresh group is at version 0")
        XCTAssertEqual(try app.call("defaults.list", p()), ["values": [:], "version": 0])

        XCTAssertEqual(version(try app.call("defaults.set", p("greeting", ["value": "hello"]))), 1)
        XCTAssertEqual(version(try ext.call("defaults.set", p("watchlist", ["value": ["KR", "JP"]]))), 2)
        XCTAssertEqual(version(try app.call("defaults.set", p("greeting", ["value": "hi"]))), 3)
        XCTAssertEqual(try ext.call("defaults.get", p("greeting")), ["exists": true, "value": "hi", "version": 3])
        XCTAssertEqual(
            try ext.call("defaults.list", p()),
            ["values": ["greeting": "hi", "watchlist": ["KR", "JP"]], "version": 3])

        XCTAssertEqual(try ext.call("defaults.remove", p("greeting")), ["removed": true, "version": 4])
        XCTAssertEqual(
            try ext.call("defaults.remove", p("greeting")), ["removed": false, "version": 4],
            "nothing removed: same version")
        XCTAssertEqual(try app.call("defaults.remove", p("never-set")), ["removed": false, "version": 4])
        XCTAssertEqual(try app.call("defaults.get", p("greeting"))["exists"], false)

        // null is a value like any other: the key exists.
        XCTAssertEqual(version(try app.call("defaults.set", p("nothing", ["value": nil]))), 5)
        XCTAssertEqual(try app.call("defaults.get", p("nothing")), ["exists": true, "value": nil, "version": 5])

        // Groups are separate suites with their own versions.
        XCTAssertEqual(
            try app.call("defaults.list", p(group: "group.com.mycompany.shared")), ["values": [:], "version": 0])
        XCTAssertEqual(
            version(try app.call("defaults.set", p("x", ["value": 1], group: "group.com.mycompany.shared"))), 1)

        // Bad params.
        XCTAssertEqual(rpcCode { try app.call("defaults.set", p("k")) }, -32602, "value is required")
        XCTAssertEqual(rpcCode { try app.call("defaults.get", p()) }, -32602, "key is required")
        // A required member set to null counts as left out, and is said to be missing.
        expectRPCError(-32602, messageContains: "'key' is required") { try app.call("defaults.get", p(nil, ["key": .null])) }
        expectRPCError(-32602, messageContains: "'shareID' is required") { try app.call("share.get", ["shareID": .null]) }
        XCTAssertEqual(rpcCode { try app.call("defaults.get", p("")) }, -32602, "empty key")
        XCTAssertEqual(rpcCode { try app.call("defaults.get", ["key": "k"]) }, -32602, "group is required")
        XCTAssertEqual(rpcCode { try app.call("defaults.get", ["group": 5, "key": "k"]) }, -32602)
        XCTAssertEqual(rpcCode { try app.call("defaults.set", p("k", ["value": 1, "ifVersion": "5"])) }, -32602)
        XCTAssertEqual(rpcCode { try app.call("defaults.set", p("k", ["value": 1, "ifVersion": -1])) }, -32602)
        XCTAssertEqual(rpcCode { try app.call("defaults.watch", p(nil, ["keys": "a"])) }, -32602)
        XCTAssertEqual(rpcCode { try app.call("defaults.watch", p(nil, ["keys": [1]])) }, -32602)
        // Every method takes the keys `set` would store, and no others.
        let long = String(repeating: "k", count: 4097)
        XCTAssertEqual(rpcCode { try app.call("defaults.set", p(long, ["value": 1])) }, -32602)
        XCTAssertEqual(rpcCode { try app.call("defaults.get", p(long)) }, -32602, "a key set could never store")
        XCTAssertEqual(rpcCode { try app.call("defaults.remove", p(long)) }, -32602)
        XCTAssertEqual(rpcCode { try app.call("defaults.watch", p(nil, ["keys": [""]])) }, -32602, "an empty key")
        XCTAssertEqual(rpcCode { try app.call("defaults.watch", p(nil, ["keys": [.string(long)]])) }, -32602)
        XCTAssertEqual(version(try app.call("defaults.list", p())), 5, "refused calls changed nothing")

        // Stored in the group's directory.
        let files = try FileManager.default.contentsOfDirectory(atPath: h.state + "/groups/" + defaultsGroup)
        XCTAssertTrue(files.contains("defaults-000001.log"), "\(files)")
        h.stop()
    }

    func testValuesArePreservedExactlyAlsoAcrossRestart() throws {
        let texts = [
            "123456789012345678901234567890", "-123456789012345678901234567890.000000000000000000001", "1.5e-7",
            "1E+400",
            "-0", "0.1", "true", "null", #""""#,
            #""Grüße, 世界 🎉👩‍👩‍👧 \u0000\u001f \"q\" \\ / \n\r\t \u2028""#,
            #"{"nested":{"list":[1,2.50,{"deep":[[[]]]}],"big":98765432109876543210987654321,"f":6.02214076e23},"e":{},"s":"é"}"#,
            #"[1,"two",null,false,{"3":[4]}]"#,
        ]
        let h = try makeBroker()
        let app = try session(h)
        let watcher = try session(h, "com.mycompany.myapp.share", role: "extension")
        try watcher.call("defaults.watch", p())
        for (i, t) in texts.enumerated() {
            try app.call("defaults.set", p("k\(i)", ["value": try JSONParser.parse(t)]))
        }
        func check(_ c: BrokerConnection, _ when: String) throws {
            for (i, t) in texts.enumerated() {
                let got = try c.call("defaults.get", p("k\(i)"))["value"]
                XCTAssertEqual(got?.compactText, try JSONParser.parse(t).compactText, "\(when): \(t)")
            }
            let all = try c.call("defaults.list", p())["values"]
            for (i, t) in texts.enumerated() {
                XCTAssertEqual(all?["k\(i)"], try JSONParser.parse(t), "\(when) (list): \(t)")
            }
        }
        try check(app, "as set")
        for (i, t) in texts.enumerated() {
            let n = try XCTUnwrap(watcher.nextNotification(timeoutMillis: 5000))
            XCTAssertEqual(n.params?["key"]?.stringValue, "k\(i)")
            XCTAssertEqual(n.params?["value"]?.compactText, try JSONParser.parse(t).compactText, "notified exactly")
        }
        // Byte for byte on the wire, too: the number lexemes come back as sent.
        let raw = try RawClient(h.socket)
        raw.send(requestLine(id: "1", method: "hello", params: #"{"role":"app","bundleID":"com.mycompany.myapp"}"#))
        _ = raw.readJSON()
        raw.send(requestLine(id: "2", method: "defaults.get", params: #"{"group":"\#(defaultsGroup)","key":"k1"}"#))
        while raw.buffer.firstIndex(of: 0x0A) == nil && raw.fill() {}
        let line = String(decoding: raw.buffer, as: UTF8.self)
        XCTAssertTrue(line.contains("-123456789012345678901234567890.000000000000000000001"), line)
        h.stop()
        try h.start()
        try check(try session(h), "after restart")
        h.stop()
    }

    func testVersionsPersistAcrossRestartAndNeverGoBack() throws {
        let h = try makeBroker()
        do {
            let app = try session(h)
            for i in 0..<3 { try app.call("defaults.set", p("k\(i)", ["value": .int(i)])) }
            XCTAssertEqual(try app.call("defaults.remove", p("k0"))["version"], 4)
            XCTAssertEqual(try app.call("defaults.remove", p("k0"))["version"], 4)
        }
        h.stop()
        try h.start()
        let app = try session(h)
        XCTAssertEqual(try app.call("defaults.list", p()), ["values": ["k1": 1, "k2": 2], "version": 4])
        XCTAssertEqual(version(try app.call("defaults.set", p("k3", ["value": 3]))), 5)
        // Removing everything keeps the version.
        for k in ["k1", "k2", "k3"] { try app.call("defaults.remove", p(k)) }
        h.stop()
        try h.start()
        XCTAssertEqual(try session(h).call("defaults.list", p()), ["values": [:], "version": 8])
        h.stop()
    }

    // MARK: Compare-and-set

    func testIfVersionMakesACompareAndSet() throws {
        let h = try makeBroker()
        let app = try session(h)
        XCTAssertEqual(version(try app.call("defaults.set", p("n", ["value": 1, "ifVersion": 0]))), 1)
        let e = expectRPCError(-32006, messageContains: "version") {
            try app.call("defaults.set", p("n", ["value": 99, "ifVersion": 0]))
        }
        XCTAssertEqual(e?.data?["version"], 1, "the conflict says the current version")
        expectRPCError(-32006) { try app.call("defaults.remove", p("n", ["ifVersion": 7])) }
        XCTAssertEqual(
            try app.call("defaults.get", p("n")), ["exists": true, "value": 1, "version": 1], "nothing stored")
        XCTAssertEqual(version(try app.call("defaults.set", p("n", ["value": 2, "ifVersion": 1]))), 2)
        XCTAssertEqual(try app.call("defaults.remove", p("n", ["ifVersion": 2])), ["removed": true, "version": 3])
        h.stop()
    }

    func testConcurrentWritersWithIfVersionNeverLoseAnUpdate() throws {
        let h = try makeBroker()
        let socket = h.socket
        let writers = 4
        let increments = 50
        let wins = Box<[Int]>([])
        let problems = Box<[String]>([])
        let conflicts = Box(0)
        let lock = NSLock()
        let group = DispatchGroup()
        let start = DispatchSemaphore(value: 0)
        for w in 0..<writers {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    let c = try BrokerConnection(socketPath: socket)
                    try c.hello(
                        role: w % 2 == 0 ? "app" : "extension",
                        bundleID: w % 2 == 0 ? "com.mycompany.myapp" : "com.mycompany.myapp.share")
                    start.wait()
                    for _ in 0..<increments {
                        while true {
                            let g = try c.call("defaults.get", ["group": .string(defaultsGroup), "key": "counter"])
                            let n = g["value"]?.intValue ?? 0
                            do {
                                let r = try c.call(
                                    "defaults.set",
                                    [
                                        "group": .string(defaultsGroup), "key": "counter", "value": .int(n + 1),
                                        "ifVersion": g["version"]!,
                                    ])
                                lock.lock()
                                wins.value.append(r["version"]!.intValue!)
                                lock.unlock()
                                break
                            } catch {
                                guard case ClientError.rpc(let e) = error, e.code == -32006 else { throw error }
                                lock.lock()
                                conflicts.value += 1
                                lock.unlock()
                            }
                        }
                    }
                } catch {
                    lock.lock()
                    problems.value.append("writer \(w): \(error)")
                    lock.unlock()
                }
            }.start()
        }
        for _ in 0..<writers { start.signal() }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        lock.lock()
        defer { lock.unlock() }
        XCTAssertEqual(problems.value, [])
        XCTAssertEqual(wins.value.count, writers * increments)
        XCTAssertEqual(wins.value.sorted(), Array(1...(writers * increments)), "exactly one writer won each version")
        let final = try session(h).call("defaults.get", p("counter"))
        XCTAssertEqual(
            final["value"]?.intValue, writers * increments, "no update lost (\(conflicts.value) conflicts retried)")
        XCTAssertEqual(version(final), writers * increments)
        h.stop()
    }

    // MARK: Watching

    func testWatchersGetChangesInVersionOrderWithKeyFilters() throws {
        let h = try makeBroker()
        let writer = try session(h, "com.mycompany.myapp.share", role: "extension")
        try writer.call("defaults.set", p("before", ["value": 0]))
        let all = try session(h)
        XCTAssertEqual(try all.call("defaults.watch", p()), ["watching": true, "version": 1])
        let onlyA = try session(h)
        XCTAssertEqual(
            try onlyA.call("defaults.watch", p(nil, ["keys": ["a", "c"]])),
            ["watching": true, "version": 1, "keys": ["a", "c"]])
        let otherGroup = try session(h)
        try otherGroup.call("defaults.watch", p(group: "group.com.mycompany.shared"))

        try writer.call("defaults.set", p("a", ["value": 1]))  // 2
        try writer.call("defaults.set", p("b", ["value": ["x": true]]))  // 3
        try writer.call("defaults.set", p("a", ["value": 2]))  // 4
        try writer.call("defaults.remove", p("zz"))  // nothing: no notification
        try writer.call("defaults.remove", p("a"))  // 5
        try writer.call("defaults.set", p("b", ["value": "last"]))  // 6

        var got: [JSONValue] = []
        for _ in 0..<5 { got.append(try XCTUnwrap(all.nextNotification(timeoutMillis: 5000)).params ?? .null) }
        XCTAssertEqual(
            got,
            [
                ["group": .string(defaultsGroup), "key": "a", "value": 1, "version": 2],
                ["group": .string(defaultsGroup), "key": "b", "value": ["x": true], "version": 3],
                ["group": .string(defaultsGroup), "key": "a", "value": 2, "version": 4],
                ["group": .string(defaultsGroup), "key": "a", "removed": true, "version": 5],
                ["group": .string(defaultsGroup), "key": "b", "value": "last", "version": 6],
            ])
        var filtered: [JSONValue] = []
        for _ in 0..<3 { filtered.append(try XCTUnwrap(onlyA.nextNotification(timeoutMillis: 5000)).params ?? .null) }
        XCTAssertEqual(filtered.map { $0["version"] }, [2, 4, 5])
        XCTAssertEqual(filtered.map { $0["key"] }, ["a", "a", "a"])
        XCTAssertNil(filtered[2]["value"], "a removal carries no value")

        // Watching again replaces the filter.
        XCTAssertEqual(try onlyA.call("defaults.watch", p(nil, ["keys": ["b"]]))["version"], 6)
        try writer.call("defaults.set", p("a", ["value": 3]))  // 7: not for onlyA any more
        try writer.call("defaults.set", p("b", ["value": 4]))  // 8
        XCTAssertEqual(try onlyA.nextNotification(timeoutMillis: 5000)?.params?["version"], 8)
        XCTAssertEqual(try all.nextNotification(timeoutMillis: 5000)?.params?["version"], 7)
        XCTAssertEqual(try all.nextNotification(timeoutMillis: 5000)?.params?["version"], 8)
        otherGroup.assertNothingMore(timeoutMillis: 200, "another group's watcher hears nothing")
        onlyA.assertNothingMore(timeoutMillis: 200, "nothing more")

        // A watcher that disconnects is forgotten; the writer carries on.
        let status = try session(h)
        let before = try status.call("broker.status")["connections"]?.intValue ?? 0
        var gone: BrokerConnection? = try session(h)
        try gone!.call("defaults.watch", p())
        gone = nil
        XCTAssertTrue(waitUntil { ((try? status.call("broker.status"))?["connections"]?.intValue ?? 0) == before })
        XCTAssertEqual(version(try writer.call("defaults.set", p("a", ["value": 5]))), 9)
        XCTAssertEqual(try all.nextNotification(timeoutMillis: 5000)?.params?["version"], 9)
        h.stop()
    }

    // MARK: Watch index

    func defaultsStatus(_ c: BrokerConnection) throws -> JSONValue? { try c.call("broker.status")["defaults"] }

    /// The versions of the next `count` notifications of `c` (each waits for up to 5 s).
    func nextVersions(_ c: BrokerConnection, _ count: Int) throws -> [Int?] {
        var out: [Int?] = []
        for _ in 0..<count {
            out.append(try XCTUnwrap(c.nextNotification(timeoutMillis: 5000)).params?["version"]?.intValue)
        }
        return out
    }

    // Not timed: a watcher that must not get a change is shown a later change it must get, and
    // that later change has to be the next notification it reads (notifications come in version
    // order); broker.status's notificationsSent counts every one queued.
    func testAChangeGoesOnlyToTheWatchersOfItsKey() throws {
        let h = try makeBroker()
        let writer = try session(h, "com.mycompany.myapp.share", role: "extension")
        let onlyA = try session(h)
        try onlyA.call("defaults.watch", p(nil, ["keys": ["a"]]))
        let bAndC = try session(h, "com.mycompany.myapp.share", role: "extension")
        try bAndC.call("defaults.watch", p(nil, ["keys": ["b", "c"]]))
        let aAndB = try session(h)
        try aAndB.call("defaults.watch", p(nil, ["keys": ["a", "b"]]))
        let everything = try session(h)
        try everything.call("defaults.watch", p())
        let otherGroup = try session(h)
        try otherGroup.call("defaults.watch", p(group: "group.com.mycompany.shared"))
        XCTAssertEqual(try defaultsStatus(writer)?["watches"], 5)

        try writer.call("defaults.set", p("x", ["value": 1]))  // 1: only the watch of every key
        try writer.call("defaults.set", p("a", ["value": 2]))  // 2
        try writer.call("defaults.set", p("b", ["value": 3]))  // 3
        try writer.call("defaults.remove", p("a"))  // 4
        try writer.call("defaults.set", p("c", ["value": 5]))  // 5
        try writer.call("defaults.set", p("x", ["value": 6]))  // 6: only the watch of every key
        try writer.call("defaults.set", p("a", ["value": 7]))  // 7
        try writer.call("defaults.set", p("b", ["value": 8]))  // 8

        XCTAssertEqual(try nextVersions(onlyA, 3), [2, 4, 7], "only the changes of a")
        XCTAssertEqual(try nextVersions(bAndC, 3), [3, 5, 8], "only the changes of b and c")
        XCTAssertEqual(try nextVersions(aAndB, 5), [2, 3, 4, 7, 8], "only the changes of a and b")
        XCTAssertEqual(try nextVersions(everything, 8), [1, 2, 3, 4, 5, 6, 7, 8], "every change")
        // The same change reads the same to every watcher of it.
        try writer.call("defaults.set", p("a", ["value": ["n": 9]]))  // 9
        let seen = try [onlyA, aAndB, everything].map { try XCTUnwrap($0.nextNotification(timeoutMillis: 5000)).params }
        for s in seen {
            XCTAssertEqual(s, ["group": .string(defaultsGroup), "key": "a", "value": ["n": 9], "version": 9])
        }
        // The other group's watcher was never written to; the count is exact: nobody got more.
        try onlyA.call("defaults.set", p("x", ["value": 1], group: "group.com.mycompany.shared"))  // the app lists it
        XCTAssertEqual(try otherGroup.nextNotification(timeoutMillis: 5000)?.params?["version"], 1)
        XCTAssertEqual(try defaultsStatus(writer)?["notificationsSent"], .int(3 + 3 + 5 + 8 + 3 + 1))
        h.stop()
    }

    func testWatchingAgainReplacesTheKeyFilter() throws {
        let h = try makeBroker()
        let writer = try session(h, "com.mycompany.myapp.share", role: "extension")
        let w = try session(h)
        let alsoA = try session(h)  // shares the key a with w throughout: it keeps getting a
        try alsoA.call("defaults.watch", p(nil, ["keys": ["a"]]))
        try w.call("defaults.watch", p(nil, ["keys": ["a", "b"]]))
        XCTAssertEqual(try defaultsStatus(writer)?["watches"], 2)

        XCTAssertEqual(try w.call("defaults.watch", p(nil, ["keys": ["c"]]))["keys"], ["c"])
        XCTAssertEqual(try defaultsStatus(writer)?["watches"], 2, "watching again replaces the watch")
        try writer.call("defaults.set", p("a", ["value": 1]))  // 1
        try writer.call("defaults.set", p("b", ["value": 2]))  // 2
        try writer.call("defaults.set", p("c", ["value": 3]))  // 3
        XCTAssertEqual(try nextVersions(w, 1), [3], "a and b are no longer watched")

        XCTAssertEqual(try w.call("defaults.watch", p()), ["watching": true, "version": 3])  // every key
        try writer.call("defaults.set", p("a", ["value": 4]))  // 4
        try writer.call("defaults.set", p("z", ["value": 5]))  // 5
        XCTAssertEqual(try nextVersions(w, 2), [4, 5])
        try w.call("defaults.watch", p(nil, ["keys": ["b"]]))
        // An empty array (a client that always sends one) is every key too.
        XCTAssertEqual(try w.call("defaults.watch", p(nil, ["keys": []])), ["watching": true, "version": 5])
        try writer.call("defaults.set", p("q", ["value": 5]))  // 6
        XCTAssertEqual(try nextVersions(w, 1), [6])

        try w.call("defaults.watch", p(nil, ["keys": ["b"]]))  // from every key back to one
        try writer.call("defaults.set", p("a", ["value": 6]))  // 7
        try writer.call("defaults.set", p("c", ["value": 7]))  // 8
        try writer.call("defaults.set", p("b", ["value": 8]))  // 9
        XCTAssertEqual(try nextVersions(w, 1), [9], "no longer every key, nor c")

        XCTAssertEqual(try nextVersions(alsoA, 3), [1, 4, 7], "the other watcher of a kept every change of a")
        XCTAssertEqual(try defaultsStatus(writer)?["watches"], 2)
        XCTAssertEqual(try defaultsStatus(writer)?["notificationsSent"], .int(5 + 3))
        h.stop()
    }

    func testAClosedWatcherIsForgottenInEveryIndex() throws {
        let h = try makeBroker()
        let writer = try session(h, "com.mycompany.myapp.share", role: "extension")
        let stays = try session(h)
        try stays.call("defaults.watch", p(nil, ["keys": ["a"]]))
        var keyed: BrokerConnection? = try session(h)
        try keyed!.call("defaults.watch", p(nil, ["keys": ["a", "b"]]))
        try keyed!.call("defaults.watch", p(nil, ["keys": ["a"]], group: "group.com.mycompany.shared"))
        var everything: BrokerConnection? = try session(h)
        try everything!.call("defaults.watch", p())
        XCTAssertEqual(try defaultsStatus(writer)?["watches"], 4)

        keyed = nil
        everything = nil
        XCTAssertTrue(waitUntil { ((try? self.defaultsStatus(writer))?["watches"]?.intValue) == 1 }, "3 watches ended")
        try writer.call("defaults.set", p("b", ["value": 1]))  // 1: nobody watches b any more
        try writer.call("defaults.set", p("a", ["value": 2]))  // 2
        try stays.call("defaults.set", p("a", ["value": 1], group: "group.com.mycompany.shared"))  // the app lists it
        XCTAssertEqual(try nextVersions(stays, 1), [2])
        XCTAssertEqual(try defaultsStatus(writer)?["notificationsSent"], 1, "only to the watcher still there")
        h.stop()
    }

    /// Keys that are only canonically equivalent are two keys end to end: each keeps its value,
    /// defaults.list shows both, and a watch of one is not sent the other's changes.
    func testCanonicallyEquivalentKeysAreTwoKeys() throws {
        let h = try makeBroker()
        defer { h.stop() }
        let nfc = "\u{E9}", nfd = "e\u{301}"
        let writer = try session(h)
        let watcher = try session(h)
        try watcher.call("defaults.watch", p(nil, ["keys": [.string(nfc)]]))
        try writer.call("defaults.set", p(nfd, ["value": "nfd"]))  // 1: not for the watcher
        try writer.call("defaults.set", p(nfc, ["value": "nfc"]))  // 2
        let n = try XCTUnwrap(watcher.nextNotification(timeoutMillis: 5000))
        XCTAssertEqual(n.params?["version"], 2, "the watch of the precomposed key got the decomposed one's change: \(n)")
        XCTAssertTrue(n.params?["key"]?.stringValue?.utf8.elementsEqual(nfc.utf8) == true)
        XCTAssertEqual(try writer.call("defaults.get", p(nfd))["value"], "nfd")
        XCTAssertEqual(try writer.call("defaults.get", p(nfc))["value"], "nfc")
        XCTAssertEqual(try writer.call("defaults.list", p())["values"]?.objectValue?.count, 2)
    }

    func testAReloadThatRevokesTheGroupEndsTheWatches() throws {
        let h = try makeBroker()
        let tool = try h.tool()
        let writer = try session(h, "com.mycompany.myapp.share", role: "extension")  // keeps the group
        let extAll = try session(h, "com.mycompany.myapp.share", role: "extension")
        try extAll.call("defaults.watch", p())
        let appAll = try session(h)
        try appAll.call("defaults.watch", p())
        let appA = try session(h)
        try appA.call("defaults.watch", p(nil, ["keys": ["a"]]))
        let appB = try session(h)
        try appB.call("defaults.watch", p(nil, ["keys": ["b"]]))
        try writer.call("defaults.set", p("a", ["value": 1]))  // 1: delivered before the reload
        XCTAssertEqual(try nextVersions(appAll, 1), [1])
        XCTAssertEqual(try nextVersions(appA, 1), [1])

        // The app no longer lists the group (its share extension still does).
        let granted = defaultsManifests["10-myapp.json"]!
        h.dir.write(
            "state/apps/10-myapp.json",
            manifestJSON(
                "com.mycompany.myapp", schemes: ["deeplinkmyapp"], groups: ["group.com.mycompany.shared"],
                extensions: [
                    #"{"bundleID":"com.mycompany.myapp.share","point":"com.apple.share-services","appGroups":["group.com.mycompany.myapp"]}"#
                ]))
        _ = try tool.call("apps.reload")
        // Each of the app's sessions is told at once that its watch ended (they stay open).
        for c in [appAll, appA, appB] {
            let n = try XCTUnwrap(c.nextNotification(timeoutMillis: 5000))
            XCTAssertEqual(n.method, "defaults.watchEnded")
            XCTAssertEqual(n.params?["group"], "group.com.mycompany.myapp")
            XCTAssertEqual(
                n.params?["reason"], "com.mycompany.myapp no longer lists group.com.mycompany.myapp in its appGroups")
        }
        XCTAssertEqual(try defaultsStatus(writer)?["watches"], 1, "only the extension's watch is left, before any change")
        try writer.call("defaults.set", p("a", ["value": 2]))  // 2
        try writer.call("defaults.set", p("b", ["value": 3]))  // 3
        XCTAssertEqual(rpcCode { try appAll.call("defaults.watch", p()) }, -32001)
        XCTAssertEqual(try defaultsStatus(writer)?["watches"], 1, "only the extension's watch is left")

        // Listing the group again does not bring the ended watches back: watching again does.
        h.dir.write("state/apps/10-myapp.json", granted)
        _ = try tool.call("apps.reload")
        try writer.call("defaults.set", p("a", ["value": 4]))  // 4
        try writer.call("defaults.set", p("b", ["value": 5]))  // 5
        try appAll.call("defaults.watch", p())
        try appA.call("defaults.watch", p(nil, ["keys": ["a"]]))
        try appB.call("defaults.watch", p(nil, ["keys": ["b"]]))
        try writer.call("defaults.set", p("a", ["value": 6]))  // 6
        try writer.call("defaults.set", p("b", ["value": 7]))  // 7
        XCTAssertEqual(try nextVersions(appAll, 2), [6, 7], "nothing while the group was not listed")
        XCTAssertEqual(try nextVersions(appA, 1), [6])
        XCTAssertEqual(try nextVersions(appB, 1), [7])
        XCTAssertEqual(try nextVersions(extAll, 7), [1, 2, 3, 4, 5, 6, 7], "the extension was never revoked")
        XCTAssertEqual(try defaultsStatus(writer)?["notificationsSent"], .int(3 + 4 + 3 + 3))
        h.stop()
    }

    func testFailedCommitNotifiesNobodyAndAnswersStorageFailure() throws {
        let faults = FaultSwitch()
        let h = try makeBroker { $0.storeFaults = faults.injector }
        let app = try session(h)
        let watcher = try session(h, "com.mycompany.myapp.share", role: "extension")
        try watcher.call("defaults.watch", p())
        let big = JSONValue.string(String(repeating: "b", count: 600_000))
        XCTAssertEqual(version(try app.call("defaults.set", p("a", ["value": big]))), 1)
        XCTAssertEqual(try watcher.nextNotification(timeoutMillis: 5000)?.params?["version"], 1)
        for point in [JournalFaultPoint.reserve, .write, .sync] {
            faults.set(point, ENOSPC)
            // A big value needs more reserved space, so a full disk shows at reserve time too.
            expectRPCError(-32005, messageContains: "space") {
                try app.call("defaults.set", p("a", ["value": big, "ifVersion": 1]))
            }
            if point != .reserve {  // a small value fits in the space already reserved
                expectRPCError(-32005, messageContains: "space") { try app.call("defaults.set", p("b", ["value": 2])) }
            }
            faults.set(point, nil)
            XCTAssertEqual(try app.call("defaults.get", p("a"))["value"], big, "\(point): the old value stands")
            XCTAssertEqual(version(try app.call("defaults.list", p())), 1, "\(point): the version did not move")
            XCTAssertEqual(try app.call("defaults.get", p("b"))["exists"], false)
        }
        XCTAssertThrowsError(try watcher.nextNotification(timeoutMillis: 300), "a failed change notifies nobody")
        // Works again once the disk has room.
        XCTAssertEqual(version(try app.call("defaults.set", p("a", ["value": "ok", "ifVersion": 1]))), 2)
        let n = try XCTUnwrap(watcher.nextNotification(timeoutMillis: 5000))
        XCTAssertEqual(n.params?["value"], "ok")
        XCTAssertEqual(n.params?["version"], 2)
        h.stop()
        try h.start()
        XCTAssertEqual(try session(h).call("defaults.list", p()), ["values": ["a": "ok"], "version": 2])
        h.stop()
    }

    func testCompactionRunsOffTheLoopAndAFailedOneLosesNothing() throws {
        // Holds the snapshot's worker (the first time it gets there), or fails its rename.
        final class Gate: @unchecked Sendable {
            let reached = DispatchSemaphore(value: 0)
            let released = DispatchSemaphore(value: 0)
            let lock = NSLock()
            var hold = true
            var failRename = false
            var injector: @Sendable (JournalFaultPoint) -> Int32? {
                { [self] p in
                    lock.lock()
                    let h = p == .snapshotWrite && hold
                    if h { hold = false }
                    let fail = p == .snapshotRename && failRename
                    lock.unlock()
                    if h {
                        reached.signal()
                        _ = released.wait(timeout: .now() + 20)
                    }
                    return fail ? EIO : nil
                }
            }
        }
        let gate = Gate()
        defer { gate.released.signal() }
        let h = try makeBroker { $0.storeFaults = gate.injector }
        let app = try session(h)
        let other = try session(h, "org.other.app")
        let big = JSONValue.string(String(repeating: "c", count: 300_000))
        var expected: JSONObject = [:]
        // Superseded records pile up until the journal compacts (over 1 MiB and twice the live ones).
        var i = 0
        while gate.reached.wait(timeout: .now()) != .success && i < 40 {
            try app.call("defaults.set", p("big", ["value": big]))
            i += 1
        }
        XCTAssertLessThan(i, 40, "a compaction started")
        expected["big"] = big
        // The snapshot's worker is held: the loop still answers, commits and replays nothing lost.
        for n in 0..<10 {
            try app.call("defaults.set", p("during\(n)", ["value": .int(n)]))
            expected["during\(n)"] = .int(n)
        }
        try other.call("defaults.set", p("x", ["value": 1], group: "group.org.other"))
        XCTAssertNotNil(try other.call("broker.status")["defaults"])
        XCTAssertEqual(try app.call("defaults.get", p("during9"))["value"], 9)
        gate.released.signal()
        // A later compaction fails at its rename: reported, and nothing is lost.
        gate.lock.lock()
        gate.failRename = true
        gate.lock.unlock()
        var failing = false
        for _ in 0..<40 where !failing {
            try app.call("defaults.set", p("big", ["value": big]))
            failing = try defaultsStatus(app)?["compactionErrors"] == 1
        }
        XCTAssertTrue(failing, "the failed compaction is counted in broker.status")
        try app.call("defaults.set", p("last", ["value": "set after the failure"]))
        expected["last"] = "set after the failure"
        let listed = try app.call("defaults.list", p())
        h.stop()
        try h.start()
        let after = try session(h).call("defaults.list", p())
        XCTAssertEqual(after, listed, "the suite as acknowledged")
        XCTAssertEqual(after["values"], .object(JSONObject(expected.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })))
        XCTAssertEqual(
            try session(h, "org.other.app").call("defaults.get", p("x", group: "group.org.other"))["value"], 1)
        h.stop()
    }

    func testSlowWatcherIsDroppedWhileTheWriterContinues() throws {
        let h = try makeBroker { $0.maxOutputBuffer = 8 << 20 }  // the 1 MiB watcher limit applies
        let socket = h.socket
        // A watcher that never reads.
        let slow = try RawClient(socket)
        slow.send(requestLine(id: "1", method: "hello", params: #"{"role":"app","bundleID":"com.mycompany.myapp"}"#))
        slow.send(requestLine(id: "2", method: "defaults.watch", params: #"{"group":"\#(defaultsGroup)"}"#))
        XCTAssertNotNil(slow.readJSON())
        XCTAssertEqual(slow.readJSON()?["result"]?["watching"], true)
        // A watcher that keeps up, reading on its own thread (the writer lets it stay within 25
        // changes, far under the limit, so that only the silent watcher can fall behind).
        let writes = 400
        let progress = Box(0)
        let lock = NSLock()
        let ready = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            defer { done.signal() }
            guard let c = try? BrokerConnection(socketPath: socket),
                (try? c.hello(role: "extension", bundleID: "com.mycompany.myapp.share")) != nil,
                (try? c.call("defaults.watch", ["group": .string(defaultsGroup)])) != nil
            else {
                ready.signal()
                return
            }
            ready.signal()
            var count = 0
            while count < writes, let n = try? c.nextNotification(timeoutMillis: 10_000),
                n.params?["version"]?.intValue == count + 1
            {
                count += 1
                lock.lock()
                progress.value = count
                lock.unlock()
            }
        }.start()
        ready.wait()
        let writer = try session(h)
        let value = JSONValue.string(String(repeating: "w", count: 16 * 1024))
        let started = Date()
        var waited = 0.0
        for i in 0..<writes {
            XCTAssertEqual(version(try writer.call("defaults.set", p("k\(i % 10)", ["value": value]))), i + 1)
            if i % 25 == 24 {
                let pause = Date()
                XCTAssertTrue(
                    waitUntil(timeout: 10) {
                        lock.lock()
                        defer { lock.unlock() }
                        return progress.value >= i + 1
                    })
                waited += Date().timeIntervalSince(pause)
            }
        }
        let elapsed = Date().timeIntervalSince(started) - waited
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        lock.lock()
        XCTAssertEqual(progress.value, writes, "the watcher that reads gets every change, in order")
        lock.unlock()
        XCTAssertTrue(slow.waitForClose(timeout: 5), "the watcher that does not read is dropped")
        let status = try writer.call("broker.status")
        XCTAssertGreaterThanOrEqual(status["droppedSlowClients"]?.intValue ?? 0, 1)
        XCTAssertLessThan(elapsed, 30, "the writer was not held back")
        h.stop()
    }

    // MARK: Access

    func testOnlySessionsOfTheGroupGetIn() throws {
        let h = try makeBroker()
        let calls: [(String, JSONValue)] = [
            ("defaults.get", p("k")), ("defaults.set", p("k", ["value": 1])), ("defaults.remove", p("k")),
            ("defaults.list", p()), ("defaults.watch", p()),
        ]
        let tool = try h.tool()
        let anonymous = try h.connect()
        let other = try session(h, "org.other.app")
        let widget = try session(h, "com.mycompany.myapp.widget", role: "extension")  // lists no group
        for (method, params) in calls {
            XCTAssertEqual(rpcCode { try tool.call(method, params) }, -32001, "tool: \(method)")
            XCTAssertEqual(rpcCode { try anonymous.call(method, params) }, -32001, "no hello: \(method)")
            expectRPCError(-32001, messageContains: "not entitled") { try other.call(method, params) }
            XCTAssertEqual(rpcCode { try widget.call(method, params) }, -32001, "widget: \(method)")
        }
        // Its own group is fine; an unknown group is not.
        XCTAssertEqual(version(try other.call("defaults.set", p("k", ["value": 1], group: "group.org.other"))), 1)
        XCTAssertEqual(rpcCode { try other.call("defaults.get", p("k", group: "group.nobody")) }, -32001)
        let app = try session(h)
        XCTAssertEqual(rpcCode { try app.call("defaults.get", p("k", group: "group.org.other")) }, -32001)
        XCTAssertEqual(try app.call("defaults.get", p("k"))["exists"], false, "nothing leaked between groups")
        // Groups a manifest lists that cannot be directory names are left out at load, with a
        // note naming them (the app keeps the rest); asking for one is asking for a group the
        // bundle does not list, and nothing is created. A group is entitled by its exact bytes:
        // the Kelvin sign (U+212A, canonically equal to 'K') is not the listed 'K'.
        let odd = try session(h, "org.odd.app")
        let warnings = try tool.call("apps.list")["warnings"]?.compactText ?? ""
        XCTAssertTrue(warnings.contains("'../escape' is not a usable App Group name"), warnings)
        XCTAssertTrue(warnings.contains("'group/with/slash' is not a usable App Group name"), warnings)
        XCTAssertEqual(rpcCode { try odd.call("defaults.set", p("k", ["value": 1], group: "../escape")) }, -32001)
        XCTAssertEqual(rpcCode { try odd.call("defaults.set", p("k", ["value": 1], group: "group/with/slash")) }, -32001)
        XCTAssertEqual(rpcCode { try odd.call("defaults.set", p("k", ["value": 1], group: "group.\u{212A}elvin")) }, -32001)
        XCTAssertEqual(version(try odd.call("defaults.set", p("k", ["value": 1], group: "group.Kelvin"))), 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.state + "/escape"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.state + "/groups/group"))
        // A group that differs from another only in case would share its directory on a
        // case-insensitive file system: the later spelling (by manifest file order, the app's
        // own list before its extensions') is left out with a note, on every platform; the same
        // name in the same case stays shared, as App Groups are.
        XCTAssertTrue(
            warnings.contains(
                "'group.kelvin' differs only in case from the App Group 'group.Kelvin' of 30-odd.json"), warnings)
        XCTAssertTrue(
            warnings.contains("'GROUP.ORG.CASE' differs only in case from the App Group 'group.org.case' of 40-case.json"),
            warnings)
        let caseApp = try session(h, "org.case.app")
        expectRPCError(-32001, messageContains: "not entitled") {
            try caseApp.call("defaults.get", p("k", group: "group.kelvin"))
        }
        XCTAssertEqual(try caseApp.call("defaults.get", p("k", group: "group.org.other"))["exists"], true)
        XCTAssertEqual(version(try caseApp.call("defaults.set", p("k", ["value": 2], group: "group.org.case"))), 1)
        let caseShare = try session(h, "org.case.app.share", role: "extension")
        expectRPCError(-32001) { try caseShare.call("defaults.get", p("k", group: "GROUP.ORG.CASE")) }
        h.stop()
    }

    func testSizeLimits() throws {
        let h = try makeBroker()
        let app = try session(h)
        let tooBig = JSONValue.string(String(repeating: "x", count: 1 << 20))
        expectRPCError(-32602, messageContains: "limit") { try app.call("defaults.set", p("k", ["value": tooBig])) }
        var deep: JSONValue = 1
        for _ in 0..<210 { deep = [deep] }
        expectRPCError(-32602, messageContains: "deeper") { try app.call("defaults.set", p("k", ["value": deep])) }
        expectRPCError(-32602) { try app.call("defaults.set", p(String(repeating: "k", count: 5000), ["value": 1])) }
        // 16 MiB per suite: fill it with ~1 MiB values.
        let chunk = JSONValue.string(String(repeating: "y", count: 1_000_000))
        var refused: RPCError? = nil
        for i in 0..<20 {
            do { try app.call("defaults.set", p("c\(i)", ["value": chunk])) } catch {
                guard case ClientError.rpc(let e) = error else { throw error }
                refused = e
                XCTAssertEqual(i, 16, "refused once over 16 MiB")
                break
            }
        }
        XCTAssertEqual(refused?.code, -32005)
        XCTAssertTrue(refused?.message.contains("limit") ?? false, refused?.message ?? "")
        XCTAssertEqual(
            version(try app.call("defaults.set", p("c0", ["value": 0]))), 17, "replacing with something smaller is fine"
        )
        h.stop()
    }

    // MARK: Crash safety

    func testEveryAcknowledgedWriteSurvivesSIGKILL() throws {
        let dir = TempDir()
        for (name, text) in defaultsManifests { dir.write("state/apps/\(name)", text) }
        let socket = dir.path + "/s.sock"
        var broker = try BrokerProcess(socket: socket, state: dir.path + "/state", logDir: dir.path)
        XCTAssertTrue(broker.waitReady(), broker.stderrText)

        let writers = 4
        let keysPerWriter = 20
        let pad = String(repeating: "p", count: 2000)
        // Per writer: the last index acknowledged and the last attempted, per key slot.
        let acked = Box([[Int]](repeating: [Int](repeating: -1, count: keysPerWriter), count: writers))
        let attempted = Box([Int](repeating: -1, count: writers))
        let maxVersion = Box(0)
        let total = Box(0)
        let lock = NSLock()
        let group = DispatchGroup()
        for t in 0..<writers {
            group.enter()
            Thread {
                defer { group.leave() }
                guard let c = try? BrokerConnection(socketPath: socket),
                    (try? c.hello(
                        role: t % 2 == 0 ? "app" : "extension",
                        bundleID: t % 2 == 0 ? "com.mycompany.myapp" : "com.mycompany.myapp.share")) != nil
                else { return }
                for i in 0..<100_000 {
                    lock.lock()
                    attempted.value[t] = i
                    lock.unlock()
                    let value: JSONValue = ["t": .int(t), "i": .int(i), "pad": .string(pad)]
                    guard
                        let r = try? c.call(
                            "defaults.set",
                            [
                                "group": .string(defaultsGroup), "key": .string("w\(t)-k\(i % keysPerWriter)"),
                                "value": value,
                            ]),
                        let v = r["version"]?.intValue
                    else { return }
                    lock.lock()
                    acked.value[t][i % keysPerWriter] = i
                    maxVersion.value = max(maxVersion.value, v)
                    total.value += 1
                    lock.unlock()
                }
            }.start()
        }
        XCTAssertTrue(
            waitUntil(timeout: 60) {
                lock.lock()
                defer { lock.unlock() }
                return total.value >= 2000
            })
        broker.signal(SIGKILL)
        XCTAssertTrue(broker.waitExit())
        group.wait()
        lock.lock()
        let ackedNow = acked.value
        let attemptedNow = attempted.value
        let maxAcked = maxVersion.value
        let written = total.value
        lock.unlock()

        broker = try BrokerProcess(socket: socket, state: dir.path + "/state", logDir: dir.path)
        XCTAssertTrue(broker.waitReady(), broker.stderrText)
        let app = try BrokerConnection(socketPath: socket)
        try app.hello(role: "app", bundleID: "com.mycompany.myapp")
        let list = try app.call("defaults.list", ["group": .string(defaultsGroup)])
        let recovered = try XCTUnwrap(list["version"]?.intValue)
        XCTAssertGreaterThanOrEqual(recovered, maxAcked, "the version never goes back")
        XCTAssertLessThanOrEqual(recovered, written + writers, "at most one unanswered write per writer")
        let values = try XCTUnwrap(list["values"]?.objectValue)
        for t in 0..<writers {
            for k in 0..<keysPerWriter where ackedNow[t][k] >= 0 {
                guard let v = values["w\(t)-k\(k)"] else {
                    XCTFail("acknowledged key w\(t)-k\(k) is missing")
                    continue
                }
                let i = v["i"]?.intValue ?? -1
                XCTAssertEqual(v["t"]?.intValue, t)
                XCTAssertEqual(i % keysPerWriter, k)
                XCTAssertGreaterThanOrEqual(i, ackedNow[t][k], "w\(t)-k\(k): an acknowledged write was lost")
                XCTAssertLessThanOrEqual(i, attemptedNow[t], "w\(t)-k\(k): a write never sent appeared")
                XCTAssertEqual(v["pad"]?.stringValue, pad, "whole values, never half-written")
            }
        }
        // The journal was compacted along the way: far less on disk than was written.
        let groupDir = dir.path + "/state/groups/" + defaultsGroup
        let logs = try FileManager.default.contentsOfDirectory(atPath: groupDir).filter { $0.hasPrefix("defaults-") }
        let onDisk = try logs.reduce(0) {
            $0 + ((try FileManager.default.attributesOfItem(atPath: groupDir + "/" + $1)[.size] as? Int) ?? 0)
        }
        XCTAssertLessThan(onDisk, written * 2000 / 2, "\(logs): \(onDisk) bytes for \(written) writes of 2 KB")
        // Writing goes on from the recovered version.
        XCTAssertEqual(version(try app.call("defaults.set", p("after", ["value": true]))), recovered + 1)
        broker.signal(SIGTERM)
        XCTAssertTrue(broker.waitExit())
    }
}
