// Tests for successful parses: option spellings, flags, positionals, globals, nesting, `--`,
// negative numbers, and the typed accessors on ParsedCommand.

import ShareCommandLine
import XCTest

final class ParsingTests: XCTestCase {
    func testLongOptionWithSeparateValue() throws {
        let parsed = try parseRun(["send", "--text", "hello", "bob"])
        XCTAssertEqual(parsed.path, ["shareclient", "send"])
        XCTAssertEqual(parsed.subcommand, "send")
        XCTAssertEqual(parsed.value("text"), "hello")
        XCTAssertEqual(parsed.argument("target"), "bob")
        XCTAssertNil(parsed.argument("message"))
    }

    func testLongOptionWithEqualsValue() throws {
        let parsed = try parseRun(["send", "--text=a=b c", "bob"])
        XCTAssertEqual(parsed.value("text"), "a=b c")
        XCTAssertEqual(try parseRun(["send", "--text=", "bob"]).value("text"), "")
    }

    func testShortOptionForms() throws {
        XCTAssertEqual(try parseRun(["send", "-f", "a.txt", "bob"]).values("file"), ["a.txt"])
        XCTAssertEqual(try parseRun(["send", "-fa.txt", "bob"]).values("file"), ["a.txt"])
        XCTAssertEqual(try parseRun(["send", "-f=a.txt", "bob"]).values("file"), ["a.txt"])
    }

    func testBundledShortFlags() throws {
        let parsed = try parseRun(["send", "-jnv", "bob"])
        XCTAssertTrue(parsed.flag("json"))
        XCTAssertTrue(parsed.flag("dry-run"))
        XCTAssertTrue(parsed.flag("verbose"))
        let withValue = try parseRun(["send", "-jf", "x.png", "bob"])
        XCTAssertTrue(withValue.flag("json"))
        XCTAssertEqual(withValue.values("file"), ["x.png"])
    }

    func testFlags() throws {
        let parsed = try parseRun(["status", "--json"])
        XCTAssertTrue(parsed.flag("json"))
        XCTAssertFalse(parsed.flag("verbose"))
        XCTAssertFalse(try parseRun(["status"]).flag("json"))
        XCTAssertTrue(try parseRun(["status", "--json", "--json"]).flag("json"))
    }

    func testRepeatableOption() throws {
        let parsed = try parseRun(["send", "--file", "a", "bob", "--file=b", "-f", "c"])
        XCTAssertEqual(parsed.values("file"), ["a", "b", "c"])
        XCTAssertEqual(parsed.value("file"), "c")
        XCTAssertEqual(try parseRun(["send", "bob"]).values("file"), [])
    }

    func testPositionalsInterleavedWithOptions() throws {
        let parsed = try parseRun(["send", "bob", "--json", "hi there", "--text", "t"])
        XCTAssertEqual(parsed.argument("target"), "bob")
        XCTAssertEqual(parsed.argument("message"), "hi there")
        XCTAssertTrue(parsed.flag("json"))
        XCTAssertEqual(parsed.value("text"), "t")
    }

    func testDoubleDashEndsOptions() throws {
        let parsed = try parseRun(["send", "--json", "--", "--text", "-f"])
        XCTAssertEqual(parsed.argument("target"), "--text")
        XCTAssertEqual(parsed.argument("message"), "-f")
        XCTAssertNil(parsed.value("text"))
        let call = try parseRun(["call", "m", "--", "--help", "--version", "-h"])
        XCTAssertEqual(call.arguments("params"), ["--help", "--version", "-h"])
    }

    func testSingleDashIsPositional() throws {
        XCTAssertEqual(try parseRun(["send", "-", "-"]).argument("message"), "-")
    }

    func testNegativeNumbers() throws {
        XCTAssertEqual(try parseRun(["send", "--x", "-5", "bob"]).value("x"), "-5")
        XCTAssertEqual(try parseRun(["send", "--x", "-2.5", "bob"]).value("x"), "-2.5")
        XCTAssertEqual(try parseRun(["send", "--x=-5", "bob"]).value("x"), "-5")
        XCTAssertEqual(try parseRun(["send", "--x", "-5", "bob"]).int("x"), -5)
        // As a positional too, since no short option '-5' exists.
        let call = try parseRun(["call", "add", "-1", "-2.5"])
        XCTAssertEqual(call.arguments("params"), ["-1", "-2.5"])
    }

    func testGlobalOptionBeforeSubcommand() throws {
        let parsed = try parseRun(["--socket", "/x", "status"])
        XCTAssertEqual(parsed.path, ["shareclient", "status"])
        XCTAssertEqual(parsed.value("socket"), "/x")
        XCTAssertEqual(try parseRun(["-s", "/y", "-v", "status"]).value("socket"), "/y")
        XCTAssertEqual(try parseRun(["--socket=/z", "status"]).value("socket"), "/z")
    }

    func testGlobalOptionAfterSubcommand() throws {
        let parsed = try parseRun(["status", "--socket", "/x", "-v"])
        XCTAssertEqual(parsed.value("socket"), "/x")
        XCTAssertTrue(parsed.flag("verbose"))
        let split = try parseRun(["--timeout", "5", "status", "--socket", "/x"])
        XCTAssertEqual(split.value("timeout"), "5")
        XCTAssertEqual(split.value("socket"), "/x")
    }

    func testNestedSubcommands() throws {
        let get = try parseRun(["defaults", "get", "theme"])
        XCTAssertEqual(get.path, ["shareclient", "defaults", "get"])
        XCTAssertEqual(get.subcommand, "defaults get")
        XCTAssertEqual(get.argument("key"), "theme")

        let set = try parseRun(["-s", "/x", "defaults", "--domain", "d", "set", "k", "v"])
        XCTAssertEqual(set.path, ["shareclient", "defaults", "set"])
        XCTAssertEqual(set.value("socket"), "/x")
        XCTAssertEqual(set.value("domain"), "d")
        XCTAssertEqual(set.argument("key"), "k")
        XCTAssertEqual(set.argument("value"), "v")

        // Globals from grandparent and parent are accepted after the leaf name.
        let list = try parseRun(["defaults", "list", "--json", "--socket", "/s", "--domain=e"])
        XCTAssertTrue(list.flag("json"))
        XCTAssertEqual(list.value("socket"), "/s")
        XCTAssertEqual(list.value("domain"), "e")

        XCTAssertEqual(try parseRun(["defaults", "watch"]).arguments("keys"), [])
        XCTAssertEqual(try parseRun(["defaults", "watch", "a", "b"]).arguments("keys"), ["a", "b"])
    }

    func testSubcommandNameAfterOptionValueIsAValue() throws {
        // `status` here is the value of --socket, not the subcommand.
        let parsed = try parseRun(["--socket", "status", "defaults", "list"])
        XCTAssertEqual(parsed.value("socket"), "status")
        XCTAssertEqual(parsed.path, ["shareclient", "defaults", "list"])
    }

    func testSubcommandNamesAreLiteralAsPositionals() throws {
        XCTAssertEqual(try parseRun(["send", "status"]).argument("target"), "status")
    }

    func testVariadicAndOneOrMore() throws {
        let call = try parseRun(["call", "ping"])
        XCTAssertEqual(call.argument("method"), "ping")
        XCTAssertEqual(call.arguments("params"), [])
        XCTAssertNil(call.argument("params"))
        XCTAssertEqual(try parseRun(["call", "m", "a", "b", "c"]).arguments("params"), ["a", "b", "c"])
        XCTAssertEqual(try parseRun(["open", "u1"]).arguments("urls"), ["u1"])
        XCTAssertEqual(try parseRun(["open", "u1", "--verbose", "u2"]).arguments("urls"), ["u1", "u2"])
    }

    func testOptionalBeforeRequiredArgumentsAssignment() throws {
        let root = CommandSpec(
            name: "t", abstract: "",
            arguments: [
                ArgumentSpec("a", help: "", kind: .optional), ArgumentSpec("rest", help: "", kind: .variadic),
                ArgumentSpec("last", help: ""),
            ])
        guard case .run(let one)? = try? parse(["z"], root: root, version: "") else { return XCTFail() }
        XCTAssertNil(one.argument("a"))
        XCTAssertEqual(one.argument("last"), "z")
        guard case .run(let many)? = try? parse(["1", "2", "3", "4"], root: root, version: "") else {
            return XCTFail()
        }
        XCTAssertEqual(many.argument("a"), "1")
        XCTAssertEqual(many.arguments("rest"), ["2", "3"])
        XCTAssertEqual(many.argument("last"), "4")
    }

    func testTypedAccessors() throws {
        let parsed = try parseRun(["send", "--max-message", "1024", "--x", "1.5", "bob"])
        XCTAssertEqual(try parsed.int("max-message"), 1024)
        XCTAssertEqual(try parsed.double("x"), 1.5)
        XCTAssertNil(try parsed.int("text"))
        XCTAssertEqual(try parseRun(["send", "--text", "b", "bob"]).choice("text", among: ["a", "b"]), "b")
        XCTAssertEqual(try parseRun(["defaults", "get", "42"]).intArgument("key"), 42)
        XCTAssertNil(try parseRun(["send", "bob"]).intArgument("message"))
    }

    func testTypedAccessorErrors() throws {
        let parsed = try parseRun(["send", "--max-message", "x", "--x", "one", "--text", "c", "bob"])
        XCTAssertThrowsError(try parsed.int("max-message")) { error in
            XCTAssertEqual(
                error as? UsageError,
                UsageError("option '--max-message' expects an integer, got 'x'", commandPath: ["shareclient", "send"]))
        }
        XCTAssertThrowsError(try parsed.double("x")) { error in
            XCTAssertEqual((error as? UsageError)?.message, "option '--x' expects a number, got 'one'")
        }
        XCTAssertThrowsError(try parsed.choice("text", among: ["a", "b"])) { error in
            XCTAssertEqual((error as? UsageError)?.message, "option '--text' expects one of a, b, got 'c'")
        }
        XCTAssertThrowsError(try parseRun(["defaults", "get", "k"]).intArgument("key")) { error in
            XCTAssertEqual((error as? UsageError)?.message, "argument '<key>' expects an integer, got 'k'")
        }
    }

    func testParsedCommandIsConstructibleForHandlerTests() {
        let parsed = ParsedCommand(
            path: ["shareclient", "status"], optionValues: ["socket": ["/x"]], flags: ["json"])
        XCTAssertEqual(parsed.value("socket"), "/x")
        XCTAssertTrue(parsed.flag("json"))
        XCTAssertEqual(parsed.usageError("bad").commandPath, ["shareclient", "status"])
    }

    func testSubcommandOverridesInheritedOptionName() throws {
        let root = CommandSpec(
            name: "t", abstract: "", options: [.flag("x", help: "", global: true)],
            subcommands: [CommandSpec(name: "sub", abstract: "", options: [.option("x", help: "")])])
        guard case .run(let parsed)? = try? parse(["sub", "--x", "v"], root: root, version: "") else {
            return XCTFail()
        }
        XCTAssertEqual(parsed.value("x"), "v")
    }

    func testCommandSpecFind() {
        XCTAssertEqual(client.find(["defaults", "get"])?.name, "get")
        XCTAssertNil(client.find(["defaults", "nope"]))
        XCTAssertEqual(client.find([String]())?.name, "shareclient")
    }
}
