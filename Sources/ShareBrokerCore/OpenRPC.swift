// rpc.discover: the embedded OpenRPC document (Protocol/openrpc.json, see scripts/embed-openrpc).

import ShareProtocol

/// Access to the OpenRPC document this broker serves.
public enum OpenRPC {
    static let parsed: Result<JSONValue, RPCError> = {
        do { return .success(try JSONParser.parse(openRPCDocumentText)) } catch {
            return .failure(RPCError(.internalError, "Internal error: embedded OpenRPC document is invalid: \(error)"))
        }
    }()

    /// The document as JSON.
    public static func document() throws(RPCError) -> JSONValue { try parsed.get() }

    /// The method names the document lists.
    public static var methodNames: [String] {
        guard case .success(let doc) = parsed, let methods = doc["methods"]?.arrayValue else { return [] }
        return methods.compactMap { $0["name"]?.stringValue }.sorted()
    }
}
