// Pure argument parsing: turns `[String]` plus a `CommandSpec` tree into a `ParseOutcome`.
// No I/O here; `runMain` (Run.swift) does the printing and exiting.

/// What `parse` decided: run a command, or show help/version text (exit status 0).
public enum ParseOutcome: Sendable {
    /// Run the (leaf) command described by the parsed values.
    case run(ParsedCommand)
    /// `--help`, `-h` or `help SUBCOMMAND` was given; the text (ending in a newline) goes to stdout.
    case help(String)
    /// `--version` was given; the payload is the root's version string.
    case version(String)
}

/// A command-line usage error; `runMain` prints it with a usage line and exits with 64 (EX_USAGE).
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Human-readable message, e.g. `unknown option '--frob'`.
    public var message: String
    /// The command the error is about, e.g. `["shareclient", "send"]`; empty means "the one being run".
    public var commandPath: [String]
    /// Whether to print the command's full help (to stderr) instead of just its usage line.
    public var showHelp: Bool

    /// Creates a usage error; command handlers may throw these for validation failures.
    public init(_ message: String, commandPath: [String] = [], showHelp: Bool = false) {
        self.message = message
        self.commandPath = commandPath
        self.showHelp = showHelp
    }

    /// The message.
    public var description: String { message }
}

/// The result of parsing: which command to run and the values given for its options and arguments.
public struct ParsedCommand: Sendable, Equatable {
    /// Command names from the root down, e.g. `["shareclient", "defaults", "get"]`.
    public var path: [String]
    /// Values of value-taking options, keyed by long name, in command-line order.
    public var optionValues: [String: [String]]
    /// Long names of the flags that were given.
    public var flags: Set<String>
    /// Values of positional arguments, keyed by argument name (absent if none were given).
    public var argumentValues: [String: [String]]

    /// Creates a parsed command directly (useful for testing command handlers).
    public init(
        path: [String], optionValues: [String: [String]] = [:], flags: Set<String> = [],
        argumentValues: [String: [String]] = [:]
    ) {
        self.path = path
        self.optionValues = optionValues
        self.flags = flags
        self.argumentValues = argumentValues
    }

    /// The path below the root joined by spaces, e.g. `"defaults get"` (empty for the root).
    public var subcommand: String { path.dropFirst().joined(separator: " ") }
    /// The last value given for option `--long`, or nil if absent.
    public func value(_ long: String) -> String? { optionValues[long]?.last }
    /// All values given for a (repeatable) option `--long`, in order.
    public func values(_ long: String) -> [String] { optionValues[long] ?? [] }
    /// Whether flag `--long` was given.
    public func flag(_ long: String) -> Bool { flags.contains(long) }
    /// The first value of positional argument `name`, or nil if absent.
    public func argument(_ name: String) -> String? { argumentValues[name]?.first }
    /// All values of a (variadic) positional argument `name`.
    public func arguments(_ name: String) -> [String] { argumentValues[name] ?? [] }

    /// A `UsageError` about this command, for handler-side validation failures.
    public func usageError(_ message: String) -> UsageError { UsageError(message, commandPath: path) }

    /// Option `--long` converted with `convert`; nil if absent. Error: "option '--long' expects <what>, got 'x'".
    public func value<T>(_ long: String, as what: String, _ convert: (String) -> T?) throws(UsageError) -> T? {
        guard let raw = value(long) else { return nil }
        guard let converted = convert(raw) else {
            throw usageError("option '--\(long)' expects \(what), got '\(raw)'")
        }
        return converted
    }

    /// Positional argument `name` converted with `convert`; nil if absent.
    public func argument<T>(_ name: String, as what: String, _ convert: (String) -> T?) throws(UsageError) -> T? {
        guard let raw = argument(name) else { return nil }
        guard let converted = convert(raw) else {
            throw usageError("argument '<\(name)>' expects \(what), got '\(raw)'")
        }
        return converted
    }

    /// Option `--long` as an `Int`, nil if absent; throws "option '--long' expects an integer, got 'x'".
    public func int(_ long: String) throws(UsageError) -> Int? { try value(long, as: "an integer") { Int($0) } }
    /// Option `--long` as an `Int` of at least `minimum`, nil if absent; throws "option '--long'
    /// must be at least N[ unit], got M" below it.
    /// With `atMost`, also "option '--long' must be at most N[ unit], got M" above it.
    public func int(_ long: String, atLeast minimum: Int, atMost maximum: Int = .max, unit: String = "") throws(UsageError) -> Int? {
        guard let n = try int(long) else { return nil }
        let unitText = unit.isEmpty ? "" : " " + unit
        guard n >= minimum else { throw usageError("option '--\(long)' must be at least \(minimum)\(unitText), got \(n)") }
        guard n <= maximum else { throw usageError("option '--\(long)' must be at most \(maximum)\(unitText), got \(n)") }
        return n
    }
    /// Option `--long` as a `Double`, nil if absent; throws "... expects a number, got 'x'".
    public func double(_ long: String) throws(UsageError) -> Double? {
        try value(long, as: "a number") { Double($0) }
    }
    /// Positional argument `name` as an `Int`, nil if absent.
    public func intArgument(_ name: String) throws(UsageError) -> Int? {
        try argument(name, as: "an integer") { Int($0) }
    }
    /// Option `--long` restricted to `choices`, nil if absent; throws "... expects one of a, b, got 'x'".
    public func choice(_ long: String, among choices: [String]) throws(UsageError) -> String? {
        try value(long, as: "one of " + choices.joined(separator: ", ")) { choices.contains($0) ? $0 : nil }
    }
}

/// Parses `args` (without the program name) against the command tree `root`. Pure: no I/O.
///
/// `--help`/`-h`/`help SUB` anywhere before `--` win over errors and yield `.help`; likewise
/// `--version` yields `.version(version)`. Otherwise the first problem is thrown as `UsageError`.
public func parse(_ args: [String], root: CommandSpec, version: String) throws(UsageError) -> ParseOutcome {
    var parser = Parser(chain: [root])
    return try parser.run(args, version: version)
}

private enum Special { case help, version }

private struct Parser {
    var chain: [CommandSpec]
    var optionValues: [String: [String]] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []
    var firstError: UsageError?
    var special: Special?

    var path: [String] { chain.map(\.name) }
    var current: CommandSpec { chain[chain.count - 1] }

    mutating func fail(_ message: String) {
        if firstError == nil { firstError = UsageError(message, commandPath: path) }
    }

    mutating func request(_ what: Special) { if special == nil { special = what } }

    /// Options visible at the current command: its own, then inherited globals (nearest first).
    func lookup(_ matches: (OptionSpec) -> Bool) -> OptionSpec? {
        if let own = current.options.first(where: matches) { return own }
        for ancestor in chain.dropLast().reversed() {
            if let inherited = ancestor.options.first(where: { $0.global && matches($0) }) { return inherited }
        }
        return nil
    }

    static func isNegativeNumber(_ token: String) -> Bool {
        let body = token.dropFirst()
        guard token.hasPrefix("-"), let first = body.first, first.isNumber || first == "." else { return false }
        return Double(token) != nil
    }

    static func looksLikeOption(_ token: String) -> Bool {
        token.hasPrefix("-") && token != "-" && !isNegativeNumber(token)
    }

    mutating func record(_ option: OptionSpec, _ value: String, spelled: String) {
        if !option.repeatable && optionValues[option.long] != nil {
            fail("option '\(spelled)' may only be given once")
        }
        optionValues[option.long, default: []].append(value)
    }

    mutating func run(_ args: [String], version: String) throws(UsageError) -> ParseOutcome {
        var index = 0
        var literal = false
        while index < args.count {
            let token = args[index]
            index += 1
            if literal || !Parser.looksLikeOption(token) {
                if Parser.isNegativeNumber(token), !literal, let short = token.dropFirst().first,
                    lookup({ $0.short == short }) != nil
                {
                    parseShort(token, args, &index)
                } else {
                    positional(token, args, &index)
                }
            } else if token == "--" {
                literal = true
            } else if token.hasPrefix("--") {
                parseLong(token, args, &index)
            } else {
                parseShort(token, args, &index)
            }
        }
        switch special {
        case .help?: return .help(helpText(chain: chain))
        case .version?: return .version(version)
        case nil: break
        }
        if let firstError { throw firstError }
        if !current.subcommands.isEmpty && current.arguments.isEmpty {
            throw UsageError("missing subcommand", commandPath: path, showHelp: true)
        }
        let arguments = try assignArguments()
        return .run(ParsedCommand(path: path, optionValues: optionValues, flags: flags, argumentValues: arguments))
    }

    mutating func takeValue(_ spelled: String, _ args: [String], _ index: inout Int) -> String? {
        if index < args.count && !Parser.looksLikeOption(args[index]) {
            index += 1
            return args[index - 1]
        }
        fail("option '\(spelled)' requires a value")
        return nil
    }

    mutating func parseLong(_ token: String, _ args: [String], _ index: inout Int) {
        let body = token.dropFirst(2)
        let name = String(body.prefix { $0 != "=" })
        let inline = body.firstIndex(of: "=").map { String(body[body.index(after: $0)...]) }
        if name == "help" { return request(.help) }
        if name == "version" { return request(.version) }
        guard let option = lookup({ $0.long == name }) else { return fail("unknown option '--\(name)'") }
        if option.takesValue {
            if let value = inline ?? takeValue("--\(name)", args, &index) {
                record(option, value, spelled: "--\(name)")
            }
        } else if inline != nil {
            fail("option '--\(name)' does not take a value")
        } else {
            flags.insert(option.long)
        }
    }

    /// `-s value`, `-svalue`, `-s=value`, and bundled flags such as `-jv`.
    mutating func parseShort(_ token: String, _ args: [String], _ index: inout Int) {
        var rest = token.dropFirst()
        while let char = rest.first {
            rest = rest.dropFirst()
            if char == "h" {
                request(.help)
                continue
            }
            guard let option = lookup({ $0.short == char }) else { return fail("unknown option '-\(char)'") }
            if !option.takesValue {
                flags.insert(option.long)
                continue
            }
            let attached = rest.hasPrefix("=") ? String(rest.dropFirst()) : String(rest)
            if let value = rest.isEmpty ? takeValue("-\(char)", args, &index) : attached {
                record(option, value, spelled: "-\(char)")
            }
            return
        }
    }

    mutating func positional(_ token: String, _ args: [String], _ index: inout Int) {
        let command = current
        if !command.subcommands.isEmpty && positionals.isEmpty {
            if let sub = command.subcommands.first(where: { $0.name == token }) {
                chain.append(sub)
                return
            }
            if token == "help" {
                // `help a b`: show help for the named descendant; ignore option-looking words.
                let words = args[index...]
                index = args.count
                for word in words where !Parser.looksLikeOption(word) {
                    guard let sub = current.subcommands.first(where: { $0.name == word }) else {
                        return fail(unknownSubcommand(word))
                    }
                    chain.append(sub)
                }
                return request(.help)
            }
            if command.arguments.isEmpty { fail(unknownSubcommand(token)) }
        }
        positionals.append(token)
    }

    func unknownSubcommand(_ word: String) -> String {
        let names = current.subcommands.map(\.name).joined(separator: ", ")
        return "unknown subcommand '\(word)' (expected one of: \(names))"
    }

    func assignArguments() throws(UsageError) -> [String: [String]] {
        var remaining = positionals[...]
        var result: [String: [String]] = [:]
        let specs = current.arguments
        for (position, spec) in specs.enumerated() {
            let neededLater = specs[(position + 1)...].filter { $0.kind == .required || $0.kind == .oneOrMore }.count
            let spare = max(0, remaining.count - neededLater)
            let take: Int
            switch spec.kind {
            case .required, .oneOrMore:
                guard !remaining.isEmpty else {
                    throw UsageError("missing required argument '<\(spec.name)>'", commandPath: path)
                }
                take = spec.kind == .required ? 1 : max(1, spare)
            case .optional: take = min(1, spare)
            case .variadic: take = spare
            }
            if take > 0 { result[spec.name] = Array(remaining.prefix(take)) }
            remaining = remaining.dropFirst(take)
        }
        if let extra = remaining.first {
            throw UsageError("too many arguments: unexpected '\(extra)'", commandPath: path)
        }
        return result
    }
}
