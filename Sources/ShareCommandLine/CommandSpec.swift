// Declarative description of a command-line interface: commands, options, positional arguments.
// The parser (Parser.swift) and the help generator (Help.swift) both read these tables.

/// A command (or subcommand) of a command-line tool, described as plain data.
///
/// A command that has `subcommands` is a dispatcher: it must be invoked with one of them.
/// `--help`/`-h` and `--version` are reserved and must not be declared.
public struct CommandSpec: Sendable {
    /// The word that invokes the command (for the root: the tool name, e.g. `shareclient`).
    public var name: String
    /// One-line summary, shown in help and in the parent's subcommand list.
    public var abstract: String
    /// Optional longer text shown after the abstract in help; wrapped at 100 columns.
    public var discussion: String?
    /// Options accepted by this command. Options marked `global` are also accepted by all descendants.
    public var options: [OptionSpec]
    /// Positional arguments, in order. Required ones should come before optional/variadic ones.
    public var arguments: [ArgumentSpec]
    /// Nested subcommands (e.g. `defaults` -> `get`, `set`, ...).
    public var subcommands: [CommandSpec]

    /// Creates a command description.
    public init(
        name: String, abstract: String, discussion: String? = nil,
        options: [OptionSpec] = [], arguments: [ArgumentSpec] = [], subcommands: [CommandSpec] = []
    ) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
        self.arguments = arguments
        self.subcommands = subcommands
    }

    /// Returns the descendant reached by following `path` (names below this command), or nil.
    public func find(_ path: some Sequence<String>) -> CommandSpec? {
        var current = self
        for name in path {
            guard let next = current.subcommands.first(where: { $0.name == name }) else { return nil }
            current = next
        }
        return current
    }
}

/// A named option (`--long`, optionally `-s`), either taking a value or being a flag.
public struct OptionSpec: Sendable {
    /// Long name without dashes, e.g. `socket` for `--socket`.
    public var long: String
    /// Optional single-character short name, e.g. `s` for `-s`.
    public var short: Character?
    /// Placeholder shown in help (e.g. `path` renders `<path>`); `nil` means the option is a flag.
    public var valueName: String?
    /// Help text for the option.
    public var help: String
    /// Default shown in help as `(default: ...)`; display only, the parser does not apply it.
    public var defaultDescription: String?
    /// Whether the option may be given more than once (values collected in order).
    public var repeatable: Bool
    /// Whether subcommands (at any depth) inherit the option, before or after their name.
    public var global: Bool

    /// Creates an option; prefer the `flag(...)` and `option(...)` factories.
    public init(
        long: String, short: Character? = nil, valueName: String? = nil, help: String,
        defaultDescription: String? = nil, repeatable: Bool = false, global: Bool = false
    ) {
        self.long = long
        self.short = short
        self.valueName = valueName
        self.help = help
        self.defaultDescription = defaultDescription
        self.repeatable = repeatable
        self.global = global
    }

    /// Whether the option takes a value (`valueName != nil`).
    public var takesValue: Bool { valueName != nil }

    /// A boolean flag such as `--json`; read it with `ParsedCommand.flag(_:)`.
    public static func flag(
        _ long: String, short: Character? = nil, help: String, global: Bool = false
    ) -> OptionSpec {
        OptionSpec(long: long, short: short, valueName: nil, help: help, global: global)
    }

    /// An option taking a value such as `--socket <path>`; read it with `value(_:)`/`values(_:)`.
    public static func option(
        _ long: String, short: Character? = nil, valueName: String = "value", help: String,
        default defaultDescription: String? = nil, repeatable: Bool = false, global: Bool = false
    ) -> OptionSpec {
        OptionSpec(
            long: long, short: short, valueName: valueName, help: help,
            defaultDescription: defaultDescription, repeatable: repeatable, global: global)
    }
}

/// A positional argument.
public struct ArgumentSpec: Sendable {
    /// How many values an argument takes.
    public enum Kind: Sendable, Equatable {
        /// Exactly one value, must be present.
        case required
        /// Zero or one value.
        case optional
        /// Zero or more values (should be the last argument).
        case variadic
        /// One or more values (should be the last argument).
        case oneOrMore
    }

    /// Name used for lookup and shown in help as `<name>`.
    public var name: String
    /// Help text for the argument.
    public var help: String
    /// How many values the argument takes.
    public var kind: Kind

    /// Creates an argument description.
    public init(_ name: String, help: String, kind: Kind = .required) {
        self.name = name
        self.help = help
        self.kind = kind
    }
}
