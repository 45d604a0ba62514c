// Tests for --help/-h/help SUB and --version on every command, and for help text layout:
// usage line, sections, inherited globals, defaults, (repeatable), alignment, 100-column wrapping.

import ShareCommandLine
import XCTest

final class HelpTests: XCTestCase {
    func testHelpOnEveryCommand() {
        for path in [[], ["status"], ["send"], ["call"], ["open"], ["defaults"], ["defaults", "get"],
                     ["defaults", "watch"]] {
            for flag in ["--help", "-h"] {
                let text = help(path + [flag])
                let usage = (["Usage: shareclient"] + path).joined(separator: " ")
                XCTAssertEqual(text?.contains(usage + " [options]"), true, "\(path) \(flag)")
                XCTAssertEqual(text, helpText(root: client, path: path))
            }
        }
    }

    func testHelpAnywhereWinsOverErrors() {
        let sendHelp = helpText(root: client, path: ["send"])
        XCTAssertEqual(help(["send", "--help"]), sendHelp)
        XCTAssertEqual(help(["--help", "send"]), sendHelp)
        XCTAssertEqual(help(["send", "--frob", "-h"]), sendHelp)  // unknown option ignored
        XCTAssertEqual(help(["send", "--text", "--help"]), sendHelp)  // missing value ignored
        XCTAssertEqual(help(["send", "-jh"]), sendHelp)  // bundled
        XCTAssertEqual(help(["send", "a", "b", "c", "--help"]), sendHelp)  // too many arguments ignored
        XCTAssertEqual(help(["frob", "--help"]), helpText(root: client, path: []))
        XCTAssertEqual(help(["-s", "/x", "defaults", "get", "--help"]), helpText(root: client, path: ["defaults", "get"]))
    }

    func testHelpAsOptionValueOrAfterDoubleDashIsLiteral() throws {
        XCTAssertEqual(try parseRun(["send", "--text=--help", "bob"]).value("text"), "--help")
        XCTAssertEqual(try parseRun(["send", "bob", "--", "-h"]).argument("message"), "-h")
    }

    func testHelpSubcommand() {
        XCTAssertEqual(help(["help"]), helpText(root: client, path: []))
        XCTAssertEqual(help(["help", "send"]), helpText(root: client, path: ["send"]))
        XCTAssertEqual(help(["help", "defaults", "get"]), helpText(root: client, path: ["defaults", "get"]))
        XCTAssertEqual(help(["defaults", "help", "set"]), helpText(root: client, path: ["defaults", "set"]))
        XCTAssertEqual(help(["--socket", "/x", "help", "status"]), helpText(root: client, path: ["status"]))
        XCTAssertEqual(help(["--frob", "help", "status"]), helpText(root: client, path: ["status"]))
        XCTAssertEqual(help(["help", "--json", "defaults", "list"]), helpText(root: client, path: ["defaults", "list"]))
    }

    func testVersionOnEveryCommand() throws {
        for args in [["--version"], ["status", "--version"], ["defaults", "get", "--version"],
                     ["--version", "defaults"], ["send", "--frob", "--version"]] {
            guard case .version(let text) = try parse(args, root: client, version: version) else {
                return XCTFail("\(args)")
            }
            XCTAssertEqual(text, "shareclient 1.2.3")
        }
        XCTAssertEqual(try parseRun(["call", "m", "--", "--version"]).arguments("params"), ["--version"])
    }

    func testRunPrintsHelpAndVersionToStdout() {
        let helpResult = capture(["status", "--help"]) { _ in XCTFail("handler must not run"); return 9 }
        XCTAssertEqual(helpResult.code, 0)
        XCTAssertEqual(helpResult.out, helpText(root: client, path: ["status"]))
        XCTAssertEqual(helpResult.err, "")
        let versionResult = capture(["defaults", "list", "--version"])
        XCTAssertEqual(versionResult.code, 0)
        XCTAssertEqual(versionResult.out, "shareclient 1.2.3\n")
    }

    func testSendHelpLayout() {
        XCTAssertEqual(
            helpText(root: client, path: ["shareclient", "send"]),
            """
            Send a share to a target.

            Usage: shareclient send [options] <target> [<message>]

            Arguments:
              <target>                   Target identifier.
              [<message>]                Optional message.

            Options:
              -f, --file <path>          Attach a file. (repeatable)
                  --x <n>                An offset.
                  --text <value>         Text body.
                  --max-message <bytes>  Largest message. (default: 65536)
              -j, --json                 Print JSON.
              -n, --dry-run              Do not send.
              -s, --socket <path>        Broker socket path. (default: $XDG_RUNTIME_DIR/sharebroker.sock)
              -v, --verbose              Log more.
                  --timeout <seconds>    Request timeout.
              -h, --help                 Show help information.
                  --version              Show the version.

            """)
    }

    func testRootHelpLayout() {
        XCTAssertEqual(
            helpText(root: client, path: []),
            """
            Talk to the share broker.

            Connects to the broker over its Unix socket.

            Usage: shareclient [options] <subcommand>

            Options:
              -s, --socket <path>      Broker socket path. (default: $XDG_RUNTIME_DIR/sharebroker.sock)
              -v, --verbose            Log more.
                  --timeout <seconds>  Request timeout.
              -h, --help               Show help information.
                  --version            Show the version.

            Subcommands:
              status                   Show broker status.
              send                     Send a share to a target.
              call                     Make a raw JSON-RPC call.
              open                     Open a URL.
              defaults                 Read and write defaults.

            See 'shareclient help <subcommand>' for detailed help.

            """)
    }

    func testUsageLineShapes() {
        XCTAssertEqual(usageLine(root: client, path: ["call"]), "Usage: shareclient call [options] <method> [<params> ...]")
        XCTAssertEqual(usageLine(root: client, path: ["open"]), "Usage: shareclient open [options] <urls> ...")
        XCTAssertEqual(usageLine(root: client, path: ["defaults"]), "Usage: shareclient defaults [options] <subcommand>")
        XCTAssertNil(usageLine(root: client, path: ["nope"]))
        XCTAssertNil(helpText(root: client, path: ["defaults", "nope"]))
    }

    func testNestedHelpShowsInheritedGlobals() {
        let text = helpText(root: client, path: ["defaults", "get"]) ?? ""
        XCTAssertTrue(text.contains("--domain <name>"))
        XCTAssertTrue(text.contains("--socket <path>"))
        XCTAssertFalse(text.contains("--json"))
    }

    func testWrapsAt100ColumnsAndAligns() {
        let long = Array(repeating: "word", count: 80).joined(separator: " ")
        let root = CommandSpec(
            name: "tool", abstract: long, discussion: "First paragraph.\n\n" + long,
            options: [.option("level", short: "l", valueName: "n", help: long, default: "3")],
            arguments: [ArgumentSpec("input", help: long)])
        let text = helpText(root: root, path: []) ?? ""
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertTrue(lines.allSatisfy { $0.count <= 100 }, text)
        XCTAssertTrue(text.contains("First paragraph.\n\nword word"))
        // Continuation lines of option help start at the help column.
        let optionLines = lines.drop(while: { $0 != "Options:" }).dropFirst()
        let first = optionLines.first ?? ""
        XCTAssertTrue(first.hasPrefix("  -l, --level <n>  word"), String(first))
        let column = first.distance(from: first.startIndex, to: first.range(of: "word")!.lowerBound)
        let continuation = optionLines.dropFirst().first ?? ""
        XCTAssertEqual(continuation.prefix(column).allSatisfy { $0 == " " }, true)
        XCTAssertEqual(continuation.dropFirst(column).first, "w")
        XCTAssertTrue(text.contains("(default: 3)"))
        XCTAssertFalse(lines.contains { $0.hasSuffix(" ") })
    }

    func testOverlongLabelPutsHelpOnNextLine() {
        let root = CommandSpec(
            name: "tool", abstract: "Tool.",
            options: [
                .option("an-extremely-long-option-name", valueName: "value", help: "Long one."),
                .flag("short", help: "Short one."),
            ])
        let text = helpText(root: root, path: []) ?? ""
        XCTAssertTrue(
            text.contains(
                """
                Options:
                      --an-extremely-long-option-name <value>
                                 Long one.
                      --short    Short one.
                  -h, --help     Show help information.
                """), text)
    }
}
