// The importer's building blocks: the XML plist reader (order, entities, CDATA, errors with lines),
// binary and OpenStep plists through Foundation, and Xcode build-variable expansion.

import Foundation
import ShareProtocol
import ShareRouting
import XCTest

final class ProjectImportPlistTests: XCTestCase {
    func parse(_ text: String) throws -> PlistValue { try PropertyList.parse(Array(text.utf8)).value }

    func parseError(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> PropertyListError? {
        do {
            _ = try PropertyList.parse(Array(text.utf8))
            XCTFail("expected an error", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func testXMLValuesKeepOrderAndTypes() throws {
        let v = try parse(
            """
            \u{FEFF}<?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
              <!-- a comment -->
              <key>z</key><string>a &lt;b&gt; &amp; &quot;c&quot; &apos;d&apos; &#65;&#x42;</string>
              <key>a</key><integer> -12 </integer>
              <key>hex</key><integer>0x1F</integer>
              <key>r</key><real>1.5</real>
              <key>t</key><true/>
              <key>f</key><false></false>
              <key>empty</key><string/>
              <key>cdata</key><string><![CDATA[x < y && $url]]></string>
              <key>list</key><array><string>1</string><array/><dict/></array>
              <key>d</key><data>
                AAEC
              </data>
              <key>when</key><date>2024-12-22T00:00:00Z</date>
            </dict>
            </plist>
            """)
        guard case .dict(let d) = v else { return XCTFail("not a dict: \(v)") }
        XCTAssertEqual(d.keys, ["z", "a", "hex", "r", "t", "f", "empty", "cdata", "list", "d", "when"])
        XCTAssertEqual(d["z"], .string("a <b> & \"c\" 'd' AB"))
        XCTAssertEqual(d["a"], .integer("-12"))
        XCTAssertEqual(d["hex"], .integer("31"))
        XCTAssertEqual(d["r"], .real(1.5))
        XCTAssertEqual(d["t"], .bool(true))
        XCTAssertEqual(d["f"], .bool(false))
        XCTAssertEqual(d["empty"], .string(""))
        XCTAssertEqual(d["cdata"], .string("x < y && $url"))
        XCTAssertEqual(d["list"], .array([.string("1"), .array([]), .dict(PlistDictionary())]))
        XCTAssertEqual(d["d"], .data([0, 1, 2]))
        XCTAssertEqual(d["when"], .date("2024-12-22T00:00:00Z"))
        // As JSON: numbers stay numbers, booleans booleans, order kept.
        XCTAssertEqual(
            v.json.compactText,
            #"{"z":"a <b> & \"c\" 'd' AB","a":-12,"hex":31,"r":1.5,"t":true,"f":false,"empty":"","cdata":"x < y && $url","list":["1",[],{}],"d":"AAEC","when":"2024-12-22T00:00:00Z"}"#
        )
    }

    func testStringsKeepWhitespaceAndNewlines() throws {
        let v = try parse("<plist><string>\r\n\tSUBQUERY (\r\n x\r\n</string></plist>")
        XCTAssertEqual(v, .string("\n\tSUBQUERY (\n x\n"))
    }

    func testMalformedXMLIsReportedWithALine() {
        let e1 = parseError("<plist>\n<dict>\n<key>a</key>\n</dict>\n</plist>")
        XCTAssertEqual(e1?.line, 4)
        XCTAssertTrue(e1?.reason.contains("value missing for key 'a'") ?? false, "\(String(describing: e1))")

        let e2 = parseError("<plist>\n<dict>\n<key>a</key>\n<array>\n<string>x</string>\n</dict>")
        XCTAssertEqual(e2?.line, 6)
        XCTAssertTrue(e2?.reason.contains("</dict> inside <array>") ?? false, "\(String(describing: e2))")

        XCTAssertTrue(parseError("<plist><dict><string>x</string></dict></plist>")?.reason.contains("expected <key>") ?? false)
        XCTAssertTrue(parseError("<plist><integer>1.5</integer></plist>")?.reason.contains("not an integer") ?? false)
        XCTAssertTrue(parseError("<plist><foo/></plist>")?.reason.contains("unknown element <foo>") ?? false)
        XCTAssertTrue(parseError("<plist><string>a &bogus; b</string></plist>")?.reason.contains("unknown entity") ?? false)
        XCTAssertTrue(parseError("<plist><string>unterminated") != nil)
        XCTAssertTrue(parseError("<plist><string>x</string></plist> trailing")?.reason.contains("after the end") ?? false)
        XCTAssertTrue(parseError("")?.reason.contains("empty") ?? false)
        XCTAssertTrue(parseError("this is not a plist at all (") != nil)
    }

    func testBinaryPlistsAreReadThroughFoundation() throws {
        let source: [String: Any] = [
            "CFBundleIdentifier": "com.example.bin", "count": 1, "flag": true, "off": false, "ratio": 0.5,
            "list": ["a", "b"], "nested": ["NSExtensionActivationSupportsWebURLWithMaxCount": 1],
        ]
        let data = try PropertyListSerialization.data(fromPropertyList: source, format: .binary, options: 0)
        XCTAssertTrue(data.starts(with: Array("bplist00".utf8)))
        let (value, format) = try PropertyList.parse([UInt8](data))
        XCTAssertEqual(format, .binary)
        guard case .dict(let d) = value else { return XCTFail("not a dict") }
        XCTAssertEqual(d.keys, d.keys.sorted(), "binary plists have no key order to keep: keys are sorted")
        XCTAssertEqual(d["CFBundleIdentifier"], .string("com.example.bin"))
        XCTAssertEqual(d["count"], .integer("1"))
        XCTAssertEqual(d["flag"], .bool(true))
        XCTAssertEqual(d["off"], .bool(false))
        XCTAssertEqual(d["ratio"], .real(0.5))
        XCTAssertEqual(d["list"], .array([.string("a"), .string("b")]))
        XCTAssertEqual(d["nested"]?.json, ["NSExtensionActivationSupportsWebURLWithMaxCount": 1])

        // A damaged binary plist is an error, not a crash.
        var broken = [UInt8](data)
        broken.removeLast(12)
        XCTAssertThrowsError(try PropertyList.parse(broken))
        // Garbage after the magic is no binary plist (Foundation read it as old-style text: a string).
        XCTAssertThrowsError(try PropertyList.parse(Array("bplist00garbage".utf8))) { error in
            XCTAssertTrue("\(error)".contains("not a valid binary property list"), "\(error)")
        }
    }

    func testOpenStepPlists() throws {
        let (value, format) = try PropertyList.parse(Array(#"{ CFBundleIdentifier = "com.example.old"; n = (a, b); }"#.utf8))
        XCTAssertEqual(format, .openStep)
        XCTAssertEqual(value.dictValue?["CFBundleIdentifier"], .string("com.example.old"))
    }

    // MARK: build variables

    func testVariableExpansion() {
        let vars = BuildVariables(
            [
                "PRODUCT_BUNDLE_IDENTIFIER": "com.mycompany.myapp", "PRODUCT_NAME": "My App",
                "myappShareExtension:PRODUCT_BUNDLE_IDENTIFIER": "com.mycompany.myapp.share", "SUFFIX": "share",
                "INDIRECT": "$(PRODUCT_BUNDLE_IDENTIFIER).$(SUFFIX)", "NAME_SUFFIX": "SUFFIX",
            ], target: nil, teamID: "ABCDE12345")
        XCTAssertEqual(vars.expand("$(PRODUCT_BUNDLE_IDENTIFIER)").value, "com.mycompany.myapp")
        XCTAssertEqual(vars.expand("${PRODUCT_BUNDLE_IDENTIFIER}.share").value, "com.mycompany.myapp.share")
        XCTAssertEqual(vars.expand("$(INDIRECT)").value, "com.mycompany.myapp.share")
        XCTAssertEqual(vars.expand("x.$($(NAME_SUFFIX))").value, "x.share", "nested references")
        XCTAssertEqual(vars.expand("com.example.$(PRODUCT_NAME:rfc1034identifier)").value, "com.example.My-App")
        XCTAssertEqual(vars.expand("$(PRODUCT_NAME:c99extidentifier)").value, "My_App")
        XCTAssertEqual(vars.expand("$(PRODUCT_MODULE_NAME).ShareExtensionHandler").value, "My_App.ShareExtensionHandler")
        XCTAssertEqual(vars.expand("$(PRODUCT_NAME:lower)").value, "my app")
        XCTAssertEqual(vars.expand("$(AppIdentifierPrefix)com.x").value, "ABCDE12345.com.x")
        XCTAssertEqual(vars.expand("$(inherited)").value, "")
        XCTAssertEqual(vars.expand("$(NOPE:default=fallback)").value, "fallback")
        XCTAssertEqual(vars.expand("no variables; $url stays; $(unclosed").value, "no variables; $url stays; $(unclosed")

        let missing = vars.expand("$(A).$(B).$(A)")
        XCTAssertEqual(missing.unresolved, ["A", "B"])
        XCTAssertEqual(missing.value, "$(A).$(B).$(A)", "unresolved references stay as written")
        XCTAssertFalse(missing.isResolved)

        let odd = vars.expand("$(PRODUCT_NAME:sparkly)")
        XCTAssertEqual(odd.unknownModifiers, ["sparkly"])
        XCTAssertEqual(odd.value, "My App")

        // Per-target settings beat global ones.
        var scoped = vars
        scoped.target = "myappShareExtension"
        XCTAssertEqual(scoped.expand("$(PRODUCT_BUNDLE_IDENTIFIER)").value, "com.mycompany.myapp.share")
    }

    func testIdentifierModifiers() {
        XCTAssertEqual(BuildVariables.rfc1034Identifier("My App_2 (β).x"), "My-App-2----.x")
        XCTAssertEqual(BuildVariables.c99ExtIdentifier("2 Fast-App"), "_2_Fast_App")
    }
}
