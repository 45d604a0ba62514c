// Entry points for executables: parse, print help/version/usage errors, call the handler, exit.
// Exit codes: 0 for help/version, 64 (EX_USAGE) for usage errors, 1 for other thrown errors.

import Foundation

/// Exit status for command-line usage errors (sysexits.h `EX_USAGE`).
public let exitUsage: Int32 = 64

/// Parses `args`, prints help/version to `output` or usage errors to `errorOutput`, otherwise runs
/// `handler` and returns its exit code. A `UsageError` thrown by the handler gives 64; any other
/// error is printed as `tool: error: ...` and gives 1. Testable: no process exit, no direct I/O.
public func runCommandLine(
    root: CommandSpec, version: String, args: [String],
    output: (String) -> Void, errorOutput: (String) -> Void,
    handler: (ParsedCommand) throws -> Int32
) -> Int32 {
    switch begin(root: root, version: version, args: args, output: output, errorOutput: errorOutput) {
    case .finished(let code):
        return code
    case .run(let parsed):
        do {
            return try handler(parsed)
        } catch {
            return report(error, parsed: parsed, root: root, errorOutput: errorOutput)
        }
    }
}

/// Runs `runCommandLine` with the process's arguments, stdout and stderr, then exits with its result.
public func runMain(
    root: CommandSpec, version: String, args: [String] = Array(CommandLine.arguments.dropFirst()),
    handler: (ParsedCommand) throws -> Int32
) -> Never {
    exit(runCommandLine(
        root: root, version: version, args: args, output: writeStdout, errorOutput: writeStderr,
        handler: handler))
}

/// Async variant of `runMain` for handlers that need `await`.
public func runMainAsync(
    root: CommandSpec, version: String, args: [String] = Array(CommandLine.arguments.dropFirst()),
    handler: (ParsedCommand) async throws -> Int32
) async -> Never {
    switch begin(root: root, version: version, args: args, output: writeStdout, errorOutput: writeStderr) {
    case .finished(let code):
        exit(code)
    case .run(let parsed):
        do {
            exit(try await handler(parsed))
        } catch {
            exit(report(error, parsed: parsed, root: root, errorOutput: writeStderr))
        }
    }
}

/// Formats a usage error the way `runMain` prints it (message, usage line, `--help` hint),
/// or the command's full help followed by the message when `error.showHelp` is set.
public func usageErrorText(_ error: UsageError, root: CommandSpec) -> String {
    let chain = resolveChain(root: root, path: error.commandPath) ?? [root]
    let line = "\(root.name): error: \(error.message)\n"
    if error.showHelp { return helpText(chain: chain) + "\n" + line }
    let name = chain.map(\.name).joined(separator: " ")
    return line + usageLine(chain: chain) + "\n" + "See '\(name) --help'.\n"
}

private enum Step {
    case finished(Int32)
    case run(ParsedCommand)
}

private func begin(
    root: CommandSpec, version: String, args: [String],
    output: (String) -> Void, errorOutput: (String) -> Void
) -> Step {
    do {
        switch try parse(args, root: root, version: version) {
        case .help(let text):
            output(text)
            return .finished(0)
        case .version(let text):
            output(text + "\n")
            return .finished(0)
        case .run(let parsed):
            return .run(parsed)
        }
    } catch {
        errorOutput(usageErrorText(error, root: root))
        return .finished(exitUsage)
    }
}

private func report(_ error: any Error, parsed: ParsedCommand, root: CommandSpec, errorOutput: (String) -> Void)
    -> Int32
{
    guard var usage = error as? UsageError else {
        errorOutput("\(root.name): error: \(error)\n")
        return 1
    }
    if usage.commandPath.isEmpty { usage.commandPath = parsed.path }
    errorOutput(usageErrorText(usage, root: root))
    return exitUsage
}

private func writeStdout(_ text: String) {
    FileHandle.standardOutput.write(Data(text.utf8))
}

private func writeStderr(_ text: String) {
    FileHandle.standardError.write(Data(text.utf8))
}
