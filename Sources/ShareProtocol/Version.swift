// The version of sharebroker and of its wire protocol.

/// Version information shared by the broker, the clients and the tools.
public enum SharebrokerVersion {
    /// The release version string.
    public static let string = "0.1.0"
    /// The wire protocol version `hello` reports.
    public static let protocolVersion = 1
    /// The broker's name in `hello`.
    public static let brokerName = "sharebroker"
}
