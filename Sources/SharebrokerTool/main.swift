// `sharebroker`: runs the broker (`serve`) and the offline tools that work on its state.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareBrokerCore
import ShareCommandLine
import ShareProtocol
import ShareSystem

let root = CommandSpec(
    name: "sharebroker",
    abstract: "A local share-and-deep-link broker: JSON-RPC 2.0 over a Unix domain socket.",
    discussion: """
        Apps, share extensions and tools connect to the broker's socket. It loads app manifests from
        STATE/apps/*.json and association documents from STATE/associations/HOST.json.
        """,
    subcommands: [
        CommandSpec(
            name: "serve",
            abstract: "Run the broker in the foreground until SIGTERM or SIGINT (SIGHUP reloads manifests).",
            options: [
                .option(
                    "socket", valueName: "path", help: "Unix socket to listen on.",
                    default: "$SHAREBROKER_SOCKET, else $XDG_RUNTIME_DIR/sharebroker.sock, else /tmp/sharebroker-UID/sharebroker.sock"),
                .option(
                    "state", valueName: "dir", help: "State directory (apps/, associations/, groups/).",
                    default: "$SHAREBROKER_STATE, else $XDG_STATE_HOME/sharebroker, else ~/.local/state/sharebroker"),
                .option("max-message", valueName: "bytes", help: "Largest accepted message.", default: "4194304"),
                .option(
                    "max-output", valueName: "bytes",
                    help: "Output buffered for a client that does not read before it is dropped.",
                    default: "2 x max-message + 1 MiB"),
                .option("log-level", valueName: "level", help: "trace, debug, info, warning or error.", default: "info"),
            ]),
    ])

func serve(_ cmd: ParsedCommand) throws -> Int32 {
    var config = BrokerConfiguration(socketPath: cmd.value("socket"), stateDirectory: cmd.value("state"))
    if let max = try cmd.int("max-message") {
        guard max >= 1024 else { throw cmd.usageError("option '--max-message' must be at least 1024 bytes, got \(max)") }
        config.maxMessage = max
    }
    if let out = try cmd.int("max-output") {
        guard out >= 4096 else { throw cmd.usageError("option '--max-output' must be at least 4096 bytes, got \(out)") }
        config.maxOutputBuffer = out
    }
    if let name = cmd.value("log-level") {
        guard let level = LogLevel(name: name) else {
            throw cmd.usageError("option '--log-level' must be one of trace, debug, info, warning, error; got '\(name)'")
        }
        config.logLevel = level
    }
    let broker: Broker
    do { broker = try Broker(config: config) } catch {
        FileHandleLite.stderr("sharebroker: error: \(error)\n")
        return 1
    }
    broker.run()
    return 0
}

enum FileHandleLite {
    static func stderr(_ s: String) {
        var bytes = Array(s.utf8)
        bytes.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
    }
}

runMain(root: root, version: "sharebroker \(SharebrokerVersion.string)") { cmd in
    switch cmd.subcommand {
    case "serve": return try serve(cmd)
    default: throw cmd.usageError("unknown command")
    }
}
