// Group defaults (defaults.*): placeholder hooks, filled in by the group-defaults work.

import ShareProtocol

/// Per-broker state of group defaults (stores, watchers).
struct DefaultsState {
    init() {}
}

extension Broker {
    /// The defaults.* methods.
    static func defaultsMethods() -> [MethodSpec] { [] }

    /// Clean-up when a connection closes (its watches).
    func defaultsConnectionClosed(_ conn: Connection) {}
}
