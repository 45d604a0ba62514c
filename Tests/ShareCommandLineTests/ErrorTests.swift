// Tests for usage errors: every message the parser produces, the command it is attributed to,
// and how runCommandLine prints them (stderr text, usage line, hint, exit code 64).

import ShareCommandLine
import XCTest

final class ErrorTests: XCTestCase {
    func testUnknownLongOption() {
        let error = usageError(["send", "--frob", "bob"])
        XCTAssertEqual(error?.message, "unknown option '--frob'")
        XCTAssertEqual(error?.commandPath, ["shareclient", "send"])
        XCTAssertEqual(usageError(["--frob=1", "status"])?.message, "unknown option '--frob'")
    }

    func testUnknownShortOption() {
        XCTAssertEqual(usageError(["send", "-q", "bob"])?.message, "unknown option '-q'")
        XCTAssertEqual(usageError(["send", "-jq", "bob"])?.message, "unknown option '-q'")
    }

    func testSubcommandOptionNotAcceptedBeforeSubcommandName() {
        let error = usageError(["--json", "status"])
        XCTAssertEqual(error?.message, "unknown option '--json'")
        XCTAssertEqual(error?.commandPath, ["shareclient"])
    }

    func testNonGlobalOptionNotInherited() {
        let root = CommandSpec(
            name: "t", abstract: "", options: [.flag("local", help: "")],
            subcommands: [CommandSpec(name: "sub", abstract: "")])
        XCTAssertThrowsError(try parse(["sub", "--local"], root: root, version: "")) { error in
            XCTAssertEqual((error as? UsageError)?.message, "unknown option '--local'")
        }
    }

    func testMissingValue() {
        XCTAssertEqual(usageError(["send", "bob", "--text"])?.message, "option '--text' requires a value")
        XCTAssertEqual(usageError(["send", "--text", "--json", "bob"])?.message, "option '--text' requires a value")
        XCTAssertEqual(usageError(["send", "bob", "-f"])?.message, "option '-f' requires a value")
        XCTAssertEqual(usageError(["status", "--socket"])?.message, "option '--socket' requires a value")
    }

    func testFlagGivenValue() {
        XCTAssertEqual(usageError(["status", "--json=yes"])?.message, "option '--json' does not take a value")
    }

    func testNonRepeatableGivenTwice() {
        XCTAssertEqual(
            usageError(["send", "--text", "a", "--text", "b", "bob"])?.message, "option '--text' may only be given once")
        XCTAssertEqual(
            usageError(["--socket", "/a", "status", "--socket", "/b"])?.message,
            "option '--socket' may only be given once")
    }

    func testMissingRequiredArgument() {
        let error = usageError(["send", "--json"])
        XCTAssertEqual(error?.message, "missing required argument '<target>'")
        XCTAssertEqual(error?.commandPath, ["shareclient", "send"])
        XCTAssertEqual(usageError(["defaults", "set", "k"])?.message, "missing required argument '<value>'")
        XCTAssertEqual(usageError(["open"])?.message, "missing required argument '<urls>'")
    }

    func testTooManyArguments() {
        XCTAssertEqual(usageError(["send", "a", "b", "c"])?.message, "too many arguments: unexpected 'c'")
        XCTAssertEqual(usageError(["status", "extra"])?.message, "too many arguments: unexpected 'extra'")
    }

    func testUnknownSubcommand() {
        let error = usageError(["frob"])
        XCTAssertEqual(
            error?.message,
            "unknown subcommand 'frob' (expected one of: status, send, call, open, defaults)")
        XCTAssertEqual(error?.commandPath, ["shareclient"])
        let nested = usageError(["defaults", "nope"])
        XCTAssertEqual(
            nested?.message, "unknown subcommand 'nope' (expected one of: get, set, remove, list, watch)")
        XCTAssertEqual(nested?.commandPath, ["shareclient", "defaults"])
        XCTAssertEqual(usageError(["help", "nope"])?.message.hasPrefix("unknown subcommand 'nope'"), true)
    }

    func testMissingSubcommand() {
        let error = usageError([])
        XCTAssertEqual(error?.message, "missing subcommand")
        XCTAssertEqual(error?.showHelp, true)
        XCTAssertEqual(usageError(["--socket", "/x", "defaults"])?.commandPath, ["shareclient", "defaults"])
    }

    func testFirstErrorWins() {
        XCTAssertEqual(usageError(["send", "--frob", "--text"])?.message, "unknown option '--frob'")
    }

    func testRunPrintsUsageErrorAndExits64() {
        let result = capture(["send", "--frob", "bob"])
        XCTAssertEqual(result.code, 64)
        XCTAssertEqual(result.out, "")
        XCTAssertEqual(
            result.err,
            """
            shareclient: error: unknown option '--frob'
            Usage: shareclient send [options] <target> [<message>]
            See 'shareclient send --help'.

            """)
    }

    func testRunMissingSubcommandPrintsHelpToStderr() {
        let result = capture(["defaults"])
        XCTAssertEqual(result.code, 64)
        XCTAssertEqual(result.out, "")
        XCTAssertTrue(result.err.hasPrefix("Read and write defaults.\n"))
        XCTAssertTrue(result.err.contains("Subcommands:"))
        XCTAssertTrue(result.err.hasSuffix("shareclient: error: missing subcommand\n"))
    }

    func testHandlerUsageErrorExits64() {
        let result = capture(["send", "--max-message", "x", "bob"]) { parsed in
            _ = try parsed.int("max-message")
            return 0
        }
        XCTAssertEqual(result.code, 64)
        XCTAssertEqual(
            result.err,
            """
            shareclient: error: option '--max-message' expects an integer, got 'x'
            Usage: shareclient send [options] <target> [<message>]
            See 'shareclient send --help'.

            """)
    }

    func testHandlerUsageErrorWithoutPathUsesParsedPath() {
        let result = capture(["defaults", "get", "k"]) { _ in throw UsageError("bad key") }
        XCTAssertEqual(result.code, 64)
        XCTAssertTrue(result.err.hasPrefix("shareclient: error: bad key\nUsage: shareclient defaults get"))
        XCTAssertTrue(result.err.hasSuffix("See 'shareclient defaults get --help'.\n"))
    }

    func testHandlerOtherErrorExits1() {
        struct Boom: Error, CustomStringConvertible { var description: String { "boom" } }
        let result = capture(["status"]) { _ in throw Boom() }
        XCTAssertEqual(result.code, 1)
        XCTAssertEqual(result.err, "shareclient: error: boom\n")
    }

    func testHandlerExitCodeAndValuesPassThrough() {
        var seen: ParsedCommand?
        let result = capture(["status", "--json"]) { parsed in
            seen = parsed
            return 3
        }
        XCTAssertEqual(result.code, 3)
        XCTAssertEqual(seen?.path, ["shareclient", "status"])
        XCTAssertEqual(seen?.flag("json"), true)
        XCTAssertEqual(result.out, "")
        XCTAssertEqual(result.err, "")
    }

    func testUsageErrorTextForUnknownPathFallsBackToRoot() {
        let text = usageErrorText(UsageError("x", commandPath: ["nope"]), root: client)
        XCTAssertTrue(text.contains("Usage: shareclient [options] <subcommand>\nSee 'shareclient --help'."))
    }
}
