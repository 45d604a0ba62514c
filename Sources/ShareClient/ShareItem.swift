// ShareItem: what an extension (or a tool, as the share sheet) shares, and its JSON form
// (`{"url"}`, `{"text"}`, `{"data": BASE64, "name"}`, `{"path"}`, each with an optional UTI `type`).

import Foundation
import ShareProtocol
import ShareSystem

/// One item to share. `type` is a UTI (`public.url`, `com.adobe.pdf`, …); when nil the broker
/// infers it (web URL, text, file extension, then content).
public enum ShareItem: Sendable, Equatable {
    /// A URL, e.g. `.url("https://youtu.be/dQw4w9WgXcQ")`.
    case url(String, type: String? = nil)
    /// Text.
    case text(String, type: String? = nil)
    /// Bytes, stored by the broker as a file named `name` (or one named after the type).
    case data([UInt8], name: String? = nil, type: String? = nil)
    /// A file the broker copies (a regular file the calling user can read, symlinks followed).
    /// It is read, never moved. The path must be absolute. A broker running as another user
    /// takes no path from this caller: `shareSend` and `shareTargets` then read the file
    /// themselves and send its bytes (as `.data`, named after the file), within the broker's
    /// message limit.
    case file(String, type: String? = nil)

    /// The item's JSON form.
    public var json: JSONValue {
        var o: JSONObject
        let type: String?
        switch self {
        case .url(let u, let t):
            o = ["url": .string(u)]
            type = t
        case .text(let s, let t):
            o = ["text": .string(s)]
            type = t
        case .data(let bytes, let name, let t):
            o = ["data": .string(Data(bytes).base64EncodedString())]
            if let name { o["name"] = .string(name) }
            type = t
        case .file(let path, let t):
            o = ["path": .string(path)]
            type = t
        }
        if let type { o["type"] = .string(type) }
        return .object(o)
    }
}

/// A `.file` item sent as its bytes (`.data`) instead of its path, for a broker that takes no
/// path from its caller (one running as another user) or when asked to (`shareclient --inline`):
/// shared by `ShareBrokerClient` and `shareclient`, which word the failures their own way.
public enum FileInlining {
    /// A file that cannot be read: its path and why.
    public struct Failure: Error, Sendable {
        public let path: String
        public let reason: String
    }

    /// About how many bytes the files at `paths` add to a request once sent as `.data` items
    /// (their base64 and names), from their sizes: none is read. Throws for a file that cannot be
    /// looked at.
    public static func encodedSize(ofFiles paths: [String]) throws(Failure) -> Int {
        var total = 0
        for path in paths {
            var st = stat()
            guard stat(path, &st) == 0 else { throw Failure(path: path, reason: String(cString: strerror(errno))) }
            total += (Int(st.st_size) + 2) / 3 * 4 + path.utf8.count
        }
        return total
    }

    /// The file at `path` as a `.data` item: its bytes (read with the caller's rights, symlinks
    /// followed, at most `limit` of them), named after the file, with `type`.
    public static func dataItem(path: String, type: String?, limit: Int) throws(Failure) -> ShareItem {
        let bytes: [UInt8]
        do { bytes = try FileIO.readFile(path, limit: limit, followSymlinks: true) } catch {
            throw Failure(path: path, reason: "\(error)")
        }
        return .data(bytes, name: String(path.split(separator: "/").last ?? "file"), type: type)
    }
}
