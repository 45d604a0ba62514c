// shareclient as a user runs it: roles inferred from --as, exit codes of explain and send, and
// what `defaults list` prints.

import Foundation
import XCTest

final class ShareclientCommandTests: XCTestCase {
    let manifest = """
        {"bundleID": "com.mycompany.myapp", "teamID": "ABCDE12345", "urlSchemes": ["deeplinkmyapp"],
         "associatedDomains": ["applinks:example.com"], "appGroups": ["group.com.mycompany.myapp"],
         "extensions": [
           {"bundleID": "com.mycompany.myapp.share", "point": "com.apple.share-services",
            "appGroups": ["group.com.mycompany.myapp"],
            "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1}},
           {"bundleID": "com.mycompany.myapp.widget", "point": "com.apple.widgetkit-extension",
            "appGroups": ["group.com.mycompany.myapp"]}]}
        """
    let association = #"{"applinks": {"details": [{"appIDs": ["ABCDE12345.com.mycompany.myapp"], "components": [{"/": "/computers/*"}]}]}}"#

    func shareclient(_ h: BrokerHarness, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try runProcess(Products.shareclient, args + ["--socket", h.socket], timeout: 20)
    }

    func testAsAnExtensionWithoutRoleSaysHelloAsAnExtension() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest])
        try h.start()
        let group = "group.com.mycompany.myapp"
        let set = try shareclient(h, ["defaults", "set", group, "watchlist", "[1,2]", "--as", "com.mycompany.myapp"])
        XCTAssertEqual(set.status, 0, set.err)
        // The widget is an extension: no --role needed.
        let get = try shareclient(h, ["defaults", "get", group, "watchlist", "--as", "com.mycompany.myapp.widget"])
        XCTAssertEqual(get.status, 0, get.err)
        XCTAssertTrue(get.out.contains("1"), get.out)
        let status = try shareclient(h, ["status", "--as", "com.mycompany.myapp.widget"])
        XCTAssertEqual(status.status, 0, status.err)
        // An explicit role is used as given.
        let wrong = try shareclient(h, ["status", "--as", "com.mycompany.myapp.widget", "--role", "app"])
        XCTAssertEqual(wrong.status, 1, wrong.err)
        XCTAssertTrue(wrong.err.contains("is an extension"), wrong.err)
        // `defaults list` prints the values, then the version.
        let list = try shareclient(h, ["defaults", "list", group, "--as", "com.mycompany.myapp.widget"])
        XCTAssertEqual(list.status, 0, list.err)
        XCTAssertTrue(list.out.hasSuffix("version 1\n"), list.out)
        h.stop()
    }

    func testExplainExitsOneWhenNothingOpensTheURL() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest], associations: ["example.com": association])
        try h.start()
        let opens = try shareclient(h, ["explain", "https://example.com/computers/pi"])
        XCTAssertEqual(opens.status, 0, opens.err)
        XCTAssertTrue(opens.out.contains("com.mycompany.myapp"), opens.out)
        let nothing = try shareclient(h, ["explain", "https://example.com/about"])
        XCTAssertEqual(nothing.status, 1, nothing.out + nothing.err)
        let fallback = try shareclient(h, ["explain", "nope://x", "--fallback", "deeplinkmyapp://home"])
        XCTAssertEqual(fallback.status, 0, fallback.out + fallback.err)
        h.stop()
    }

    func testOpenAndOpenURLAreAlternatives() throws {
        let h = BrokerHarness(manifests: ["myapp.json": manifest])
        try h.start()
        let both = try shareclient(
            h, ["send", "--url", "https://youtu.be/x", "--as", "com.mycompany.myapp.share", "--open", "--open-url", "deeplinkmyapp://x"])
        XCTAssertEqual(both.status, 64, both.err)
        XCTAssertTrue(both.err.contains("--open"), both.err)
        let one = try shareclient(h, ["send", "--url", "https://youtu.be/x", "--as", "com.mycompany.myapp.share", "--open"])
        XCTAssertEqual(one.status, 0, one.err)
        h.stop()
    }
}
