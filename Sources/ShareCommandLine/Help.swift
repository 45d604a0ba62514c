// Help and usage text generated from the same `CommandSpec` tables the parser uses.
// Output is wrapped at 100 columns with option/argument help aligned in one column.

/// Total width help text is wrapped to.
let helpWidth = 100
/// Widest label (e.g. `-s, --socket <path>`) kept on the same line as its help text.
let maxLabelWidth = 30

/// Full help for the command at `path` (names from the root, e.g. `["shareclient", "defaults"]`;
/// the root's own name may be included or omitted). Returns nil if the path names no command.
public func helpText(root: CommandSpec, path: [String]) -> String? {
    guard let chain = resolveChain(root: root, path: path) else { return nil }
    return helpText(chain: chain)
}

/// The `Usage: ...` line (no trailing newline) for the command at `path`, or nil if unknown.
public func usageLine(root: CommandSpec, path: [String]) -> String? {
    resolveChain(root: root, path: path).map(usageLine(chain:))
}

/// Commands from the root down to the one named by `path` (leading root name optional).
func resolveChain(root: CommandSpec, path: [String]) -> [CommandSpec]? {
    var chain = [root]
    for name in path.first == root.name ? path.dropFirst() : path[...] {
        guard let next = chain[chain.count - 1].subcommands.first(where: { $0.name == name }) else { return nil }
        chain.append(next)
    }
    return chain
}

func usageLine(chain: [CommandSpec]) -> String {
    let command = chain[chain.count - 1]
    var words = ["Usage:"] + chain.map(\.name) + ["[options]"]
    words += command.arguments.map(argumentUsage)
    if !command.subcommands.isEmpty { words.append("<subcommand>") }
    return words.joined(separator: " ")
}

func argumentUsage(_ argument: ArgumentSpec) -> String {
    switch argument.kind {
    case .required: return "<\(argument.name)>"
    case .optional: return "[<\(argument.name)>]"
    case .variadic: return "[<\(argument.name)> ...]"
    case .oneOrMore: return "<\(argument.name)> ..."
    }
}

/// Options accepted at the end of `chain`: its own, then inherited globals not shadowed by name.
func visibleOptions(chain: [CommandSpec]) -> [OptionSpec] {
    var options = chain[chain.count - 1].options
    for ancestor in chain.dropLast().reversed() {
        for option in ancestor.options where option.global && !options.contains(where: { $0.long == option.long }) {
            options.append(option)
        }
    }
    return options
}

func helpText(chain: [CommandSpec]) -> String {
    let command = chain[chain.count - 1]
    let name = chain.map(\.name).joined(separator: " ")
    var out: [String] = wrap(command.abstract, width: helpWidth)
    if let discussion = command.discussion, !discussion.isEmpty {
        out.append("")
        out += wrap(discussion, width: helpWidth)
    }
    out += ["", usageLine(chain: chain)]

    let argumentRows = command.arguments.map { (argumentUsage($0), $0.help) }
    var optionRows = visibleOptions(chain: chain).map { option -> (String, String) in
        var label = option.short.map { "-\($0), " } ?? "    "
        label += "--\(option.long)"
        if let valueName = option.valueName { label += " <\(valueName)>" }
        var help = option.help
        if let defaultDescription = option.defaultDescription { help += " (default: \(defaultDescription))" }
        if option.repeatable { help += " (repeatable)" }
        return (label, help)
    }
    optionRows += [("-h, --help", "Show help information."), ("    --version", "Show the version.")]
    let subcommandRows = command.subcommands.map { ($0.name, $0.abstract) }
    // One help column for all sections, so the page reads as a single table.
    let fitting = (argumentRows + optionRows + subcommandRows).map(\.0.count).filter { $0 <= maxLabelWidth }
    let labelWidth = fitting.max() ?? maxLabelWidth

    if !argumentRows.isEmpty { out += ["", "Arguments:"] + table(argumentRows, labelWidth: labelWidth) }
    out += ["", "Options:"] + table(optionRows, labelWidth: labelWidth)
    if !subcommandRows.isEmpty {
        out += ["", "Subcommands:"] + table(subcommandRows, labelWidth: labelWidth)
        out += ["", "See '\(name) help <subcommand>' for detailed help."]
    }
    return out.joined(separator: "\n") + "\n"
}

/// Two-column rows indented by 2; labels wider than `labelWidth` put their help on the next line.
func table(_ rows: [(label: String, help: String)], labelWidth: Int) -> [String] {
    let column = 2 + labelWidth + 2
    let indent = String(repeating: " ", count: column)
    var lines: [String] = []
    for row in rows {
        var wrapped = wrap(row.help, width: helpWidth - column)
        if wrapped.isEmpty { wrapped = [""] }
        let label = "  " + row.label
        if row.label.count > labelWidth {
            lines.append(label)
            lines += wrapped.map { indent + $0 }
        } else {
            let pad = String(repeating: " ", count: column - label.count)
            lines.append(label + pad + wrapped[0])
            lines += wrapped.dropFirst().map { indent + $0 }
        }
    }
    return lines.map { String($0.reversed().drop(while: { $0 == " " }).reversed()) }
}

/// Greedy word wrap; explicit newlines are kept, words longer than `width` stand alone.
func wrap(_ text: String, width: Int) -> [String] {
    var lines: [String] = []
    for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
        var line = ""
        for word in paragraph.split(separator: " ") {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        lines.append(line)
    }
    return lines
}
