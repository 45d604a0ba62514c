// Shared command tree for the ShareCommandLine tests, shaped like the real `shareclient`,
// plus small helpers to run the parser and capture `runCommandLine` output.

import ShareCommandLine
import XCTest

let version = "shareclient 1.2.3"

let client = CommandSpec(
    name: "shareclient", abstract: "Talk to the share broker.",
    discussion: "Connects to the broker over its Unix socket.",
    options: [
        .option("socket", short: "s", valueName: "path", help: "Broker socket path.",
                default: "$XDG_RUNTIME_DIR/sharebroker.sock", global: true),
        .flag("verbose", short: "v", help: "Log more.", global: true),
        .option("timeout", valueName: "seconds", help: "Request timeout.", global: true),
    ],
    subcommands: [
        CommandSpec(name: "status", abstract: "Show broker status.", options: [.flag("json", help: "Print JSON.")]),
        CommandSpec(
            name: "send", abstract: "Send a share to a target.",
            options: [
                .option("file", short: "f", valueName: "path", help: "Attach a file.", repeatable: true),
                .option("x", valueName: "n", help: "An offset."),
                .option("text", help: "Text body."),
                .option("max-message", valueName: "bytes", help: "Largest message.", default: "65536"),
                .flag("json", short: "j", help: "Print JSON."),
                .flag("dry-run", short: "n", help: "Do not send."),
            ],
            arguments: [
                ArgumentSpec("target", help: "Target identifier."),
                ArgumentSpec("message", help: "Optional message.", kind: .optional),
            ]),
        CommandSpec(
            name: "call", abstract: "Make a raw JSON-RPC call.",
            arguments: [
                ArgumentSpec("method", help: "Method name."),
                ArgumentSpec("params", help: "Parameters.", kind: .variadic),
            ]),
        CommandSpec(
            name: "open", abstract: "Open a URL.",
            arguments: [ArgumentSpec("urls", help: "URLs to open.", kind: .oneOrMore)]),
        CommandSpec(
            name: "defaults", abstract: "Read and write defaults.",
            options: [.option("domain", valueName: "name", help: "Defaults domain.", global: true)],
            subcommands: [
                CommandSpec(name: "get", abstract: "Print a default.", arguments: [ArgumentSpec("key", help: "Key.")]),
                CommandSpec(
                    name: "set", abstract: "Set a default.",
                    arguments: [ArgumentSpec("key", help: "Key."), ArgumentSpec("value", help: "Value.")]),
                CommandSpec(name: "remove", abstract: "Remove a default.", arguments: [ArgumentSpec("key", help: "Key.")]),
                CommandSpec(name: "list", abstract: "List defaults.", options: [.flag("json", help: "Print JSON.")]),
                CommandSpec(
                    name: "watch", abstract: "Watch keys for changes.",
                    arguments: [ArgumentSpec("keys", help: "Keys to watch.", kind: .variadic)]),
            ]),
    ])

/// Parses and expects `.run`.
func parseRun(_ args: [String], file: StaticString = #filePath, line: UInt = #line) throws -> ParsedCommand {
    switch try parse(args, root: client, version: version) {
    case .run(let parsed): return parsed
    case let other:
        XCTFail("expected .run, got \(other)", file: file, line: line)
        throw UsageError("not run")
    }
}

/// Parses and expects a thrown `UsageError`.
func usageError(_ args: [String], file: StaticString = #filePath, line: UInt = #line) -> UsageError? {
    do {
        let outcome = try parse(args, root: client, version: version)
        XCTFail("expected UsageError, got \(outcome)", file: file, line: line)
        return nil
    } catch {
        return error
    }
}

/// Parses and expects `.help`, returning its text.
func help(_ args: [String], file: StaticString = #filePath, line: UInt = #line) -> String? {
    guard case .help(let text)? = try? parse(args, root: client, version: version) else {
        XCTFail("expected .help for \(args)", file: file, line: line)
        return nil
    }
    return text
}

/// Output captured from `runCommandLine`.
struct Captured {
    var code: Int32
    var out: String
    var err: String
}

func capture(_ args: [String], handler: (ParsedCommand) throws -> Int32 = { _ in 0 }) -> Captured {
    var out = ""
    var err = ""
    let code = runCommandLine(
        root: client, version: version, args: args, output: { out += $0 }, errorOutput: { err += $0 },
        handler: handler)
    return Captured(code: code, out: out, err: err)
}
