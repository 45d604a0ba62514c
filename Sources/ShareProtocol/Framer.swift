// Message framing as a pure state machine: bytes in, complete frames out, leftover kept.
// Newline framing by default; a connection whose first bytes are a `Content-` header (`Content-Length:`,
// or another such as `Content-Type:` before it) uses LSP-style header framing in both directions.
// (No JSON text starts with a letter 'c', so the two cannot be confused.) The size limit is enforced before anything is buffered past it.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a connection frames its messages.
public enum FramingMode: Sendable, Equatable {
    /// Not decided yet: no bytes seen, or a first line that may still turn out to be a
    /// `Content-` header (at most `Framer.maxHeaderNameBytes` bytes are held to decide).
    case undetermined
    /// One JSON text per line, ended by `\n`.
    case newline
    /// `Content-Length: N\r\n\r\n` then N bytes, as LSP.
    case contentLength
}

/// Framing failed; the connection cannot continue.
public enum FramingError: Error, Sendable, Equatable {
    /// A message (or header section) is larger than the limit.
    case tooLarge(limit: Int)
    /// The header section of a Content-Length frame is malformed.
    case badHeader(String)
}

/// Splits a byte stream into frames. Feed it chunks as they are read; it calls back once per frame.
public struct Framer: Sendable {
    /// Appends raw bytes as typed ones (a memcpy; appending the raw buffer itself goes byte by byte).
    @inline(__always) static func append(_ raw: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        guard let base = raw.baseAddress, raw.count > 0 else { return }
        out.append(contentsOf: UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: raw.count))
    }

    /// Largest accepted message body, in bytes.
    public let maxMessage: Int
    /// The framing the connection uses (decided from its first bytes).
    public private(set) var mode: FramingMode = .undetermined
    /// Bytes of an incomplete frame.
    private var pending: [UInt8] = []
    /// Body length of the Content-Length frame being read, once its header is parsed.
    private var bodyLength: Int? = nil
    /// In newline mode, how many bytes at the start of `pending` were already searched for the
    /// line's '\n' (none was there): the next read searches only the bytes after them, so a line
    /// arriving in many small reads is searched once, not once per read (which was quadratic).
    /// Always 0 outside newline mode and when `pending` is empty; never more than `pending.count`.
    private var newlineSearched = 0
    /// The last feed or resume stopped at a frame its handler refused to go past.
    private var stopped = false
    /// The stream's first bytes were looked at for a UTF-8 byte order mark (skipped: RFC 8259
    /// lets a parser ignore one, and .NET's UTF-8 stream writers send it).
    private var startSeen = false
    /// Bytes memchr has looked at so far, up to and including each '\n' found (a counting seam for
    /// the tests: each byte of a stream is looked at once, however it is cut into reads).
    private(set) var newlineSearchBytes = 0
    /// Largest header section accepted.
    static let maxHeaderBytes = 8192
    static let headerPrefix: [UInt8] = Array("content-".utf8)

    /// Creates a framer with a message size limit.
    public init(maxMessage: Int) {
        self.maxMessage = maxMessage
    }

    /// Bytes buffered for an incomplete frame.
    public var bufferedByteCount: Int { pending.count }
    /// Bytes the buffer holds room for (what an idle connection's framer costs; tests).
    var bufferedCapacity: Int { pending.capacity }

    /// Feeds one chunk read from the socket; `onFrame` gets each complete frame body, in order, with the
    /// connection's framing mode (answer in the same framing).
    /// Frames are handed over without copying when no partial frame is pending.
    /// Throws `.tooLarge` for a message (or Content-Length value) over `maxMessage`, `.badHeader`
    /// for a malformed header section; the connection cannot continue after either.
    public mutating func feed(
        _ chunk: UnsafeRawBufferPointer, onFrame: (UnsafeRawBufferPointer, FramingMode) -> Void
    ) throws(FramingError) {
        _ = try feedUntilStopped(chunk, onFrame: { frame, mode in
            onFrame(frame, mode)
            return true
        })
    }

    /// Like `feed(_:onFrame:)`, but `onFrame` returns false to stop after that frame: the frames
    /// after it stay buffered, unread, until `resume(onFrame:)`. Returns false when stopped.
    /// (Its own name: with a trailing closure, a `feed` overload would be ambiguous.) Throws as
    /// `feed(_:onFrame:)`.
    @discardableResult
    public mutating func feedUntilStopped(
        _ chunk: UnsafeRawBufferPointer, onFrame: (UnsafeRawBufferPointer, FramingMode) -> Bool
    ) throws(FramingError) -> Bool {
        stopped = false
        if chunk.isEmpty { return true }
        if pending.isEmpty {
            let used = try consume(chunk, searched: 0, onFrame: onFrame)
            if used < chunk.count {
                Framer.append(UnsafeRawBufferPointer(rebasing: chunk[used...]), to: &pending)
            }
        } else {
            Framer.append(chunk, to: &pending)
            try consumePending(onFrame)
        }
        return try settle()
    }

    /// At the end of the stream (the peer shut its sending side): the last line, when it ended
    /// without its '\n' (`printf '{...}' | socat - UNIX-CONNECT:...`), in newline framing or
    /// before a framing was seen, is handed to `onFrame` as one frame (without a final '\r').
    /// Blank text, text over the size limit, a partial Content-Length frame (or header section)
    /// and frames held by a stop give nothing. The framer holds nothing afterwards. Returns
    /// whether a frame was handed over.
    @discardableResult
    public mutating func finish(onFrame: (UnsafeRawBufferPointer, FramingMode) -> Bool) -> Bool {
        guard !stopped, !pending.isEmpty else { return false }
        guard mode != .contentLength else {
            pending = []
            bodyLength = nil
            return false
        }
        var line = pending
        pending = []
        newlineSearched = 0
        // (`consume` has taken a whole byte order mark; a framing still undecided after all of
        // "content-" is text that starts as a header does, which `decideMode` could not yet
        // tell: half a header section)
        if mode == .undetermined && line.count >= Framer.headerPrefix.count { return false }
        if line.last == 0x0D { line.removeLast() }
        guard line.count <= maxMessage else { return false }  // (over the limit: no message)
        return line.withUnsafeBytes { frame in
            guard !Framer.isBlank(frame) else { return false }
            if mode == .undetermined { mode = .newline }
            _ = onFrame(frame, .newline)
            return true
        }
    }

    /// Hands over the complete frames buffered when `onFrame` stopped (`feedUntilStopped(_:onFrame:)`),
    /// in order, until it stops again. Returns false when stopped again. Throws as
    /// `feed(_:onFrame:)`.
    @discardableResult
    public mutating func resume(onFrame: (UnsafeRawBufferPointer, FramingMode) -> Bool) throws(FramingError) -> Bool {
        stopped = false
        if pending.isEmpty { return true }
        try consumePending(onFrame)
        return try settle()
    }

    private mutating func consumePending(_ onFrame: (UnsafeRawBufferPointer, FramingMode) -> Bool) throws(FramingError) {
        var p = pending
        pending = []
        let searched = newlineSearched
        newlineSearched = 0  // matches the empty `pending` if consume throws
        let used = try p.withUnsafeBytes { buf in
            Result { () throws(FramingError) -> Int in try consume(buf, searched: searched, onFrame: onFrame) }
        }.get()
        if used < p.count {
            let left = p.count - used
            if used > 0 && p.capacity > max(4096, 2 * left) {
                // What is left is kept in a buffer of its size: removing the front keeps the
                // capacity, and a 4 MB message followed by 100 bytes held 4 MB for ever (below
                // the size the broker times unfinished messages at; the review).
                pending = Array(p[used...])
            } else {
                if used > 0 { p.removeSubrange(0..<used) }
                pending = p
            }
        } else if p.capacity <= 4096 {
            p.removeAll(keepingCapacity: true)
            pending = p
        }
        // Otherwise `p` is released: an idle connection keeps no large buffer.
    }

    private mutating func settle() throws(FramingError) -> Bool {
        if stopped {
            // What is kept may hold whole frames not yet searched for, and is bounded by what
            // was read before the stop: the reader reads nothing more until it resumes.
            newlineSearched = 0
            return false
        }
        // In newline mode consume stops short only at a line without its '\n', having searched
        // all of it: what is kept (moved to the front of `pending`) has been searched.
        newlineSearched = mode == .newline ? pending.count : 0
        if pending.count - Framer.maxHeaderBytes > maxMessage {  // (no sum: maxMessage may be huge)
            throw .tooLarge(limit: maxMessage)
        }
        return true
    }

    /// Consumes as many complete frames as `buf` holds; returns the number of bytes used.
    /// `searched`: the first bytes of `buf` hold no '\n' (searched by an earlier read in newline mode).
    private mutating func consume(
        _ buf: UnsafeRawBufferPointer, searched: Int, onFrame: (UnsafeRawBufferPointer, FramingMode) -> Bool
    ) throws(FramingError) -> Int {
        var pos = 0
        var skip = searched  // applies to the first line only
        while pos < buf.count {
            if !startSeen {
                let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
                let n = min(3, buf.count - pos)
                if (0..<n).allSatisfy({ buf[pos + $0] == bom[$0] }) {
                    if n < 3 { return pos }  // (a mark cut by the read: decided with the next bytes)
                    pos += 3
                }
                startSeen = true
                continue
            }
            if mode == .undetermined {
                if !decideMode(UnsafeRawBufferPointer(rebasing: buf[pos...])) { return pos }
            }
            switch mode {
            case .newline:
                let rest = UnsafeRawBufferPointer(rebasing: buf[pos...])
                let from = min(skip, rest.count)
                skip = 0
                guard let base = rest.baseAddress, let hit = memchr(base + from, 0x0A, rest.count - from) else {
                    newlineSearchBytes &+= rest.count - from
                    // One byte more may be the '\r' of a CRLF ending, which is not part of the body.
                    if rest.count - 1 > maxMessage || (rest.count - 1 == maxMessage && rest[rest.count - 1] != 0x0D) {
                        throw .tooLarge(limit: maxMessage)
                    }
                    return pos
                }
                let len = base.distance(to: UnsafeRawPointer(hit))
                newlineSearchBytes &+= len + 1 - from
                var end = pos + len
                if end > pos && buf[end - 1] == 0x0D { end -= 1 }  // tolerate CRLF
                if end - pos > maxMessage { throw .tooLarge(limit: maxMessage) }
                let frame = UnsafeRawBufferPointer(rebasing: buf[pos..<end])
                pos += len + 1
                if !Framer.isBlank(frame), !onFrame(frame, .newline) {
                    stopped = true
                    return pos
                }
            case .contentLength:
                if bodyLength == nil {
                    // Empty lines between frames (a client that ends each body with CRLF) are
                    // skipped as they come, as newline framing skips blank lines.
                    if buf[pos] == 0x0A {
                        pos += 1
                        continue
                    }
                    if buf[pos] == 0x0D {
                        if buf.count - pos < 2 { return pos }  // (decided with the next byte)
                        if buf[pos + 1] == 0x0A {
                            pos += 2
                            continue
                        }
                    }
                    // A byte order mark before a later header section is skipped as before the
                    // first (a client that encodes each message with a preamble sends one each time).
                    let rest = buf.count - pos
                    if buf[pos] == 0xEF && (rest < 2 || buf[pos + 1] == 0xBB) && (rest < 3 || buf[pos + 2] == 0xBF) {
                        if rest < 3 { return pos }  // (a mark cut by the read: decided with the next bytes)
                        pos += 3
                        continue
                    }
                    guard let (length, headerEnd) = try parseHeader(UnsafeRawBufferPointer(rebasing: buf[pos...])) else {
                        return pos
                    }
                    bodyLength = length
                    pos += headerEnd
                }
                let length = bodyLength!
                guard buf.count - pos >= length else { return pos }
                let go = onFrame(UnsafeRawBufferPointer(rebasing: buf[pos..<(pos + length)]), .contentLength)
                pos += length
                bodyLength = nil
                if !go {
                    stopped = true
                    return pos
                }
            case .undetermined:
                return pos
            }
        }
        return pos
    }

    /// Decides the framing from the first bytes; false when more bytes are needed to decide.
    /// Header framing needs a first line that starts as a `Content-` header: `content-`, header-name
    /// characters, then ':' (any case). Anything else, even text that starts like one, is newline
    /// framing (and gets its parse error), so a newline client is never left waiting for a header.
    private mutating func decideMode(_ buf: UnsafeRawBufferPointer) -> Bool {
        let prefix = Framer.headerPrefix
        let n = min(buf.count, prefix.count)
        for i in 0..<n where Framer.lower(buf[i]) != prefix[i] {
            mode = .newline
            return true
        }
        if n < prefix.count { return false }
        var i = prefix.count
        while i < buf.count && i < Framer.maxHeaderNameBytes {
            let c = Framer.lower(buf[i])
            if c == UInt8(ascii: ":") {
                mode = i > prefix.count ? .contentLength : .newline
                return true
            }
            guard (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == UInt8(ascii: "-") else {
                mode = .newline
                return true
            }
            i += 1
        }
        if i >= Framer.maxHeaderNameBytes { mode = .newline }
        return mode != .undetermined
    }

    /// Longest first header name looked at when deciding the framing.
    static let maxHeaderNameBytes = 64

    @inline(__always) static func lower(_ c: UInt8) -> UInt8 { (c >= 0x41 && c <= 0x5A) ? c | 0x20 : c }

    static func isBlank(_ frame: UnsafeRawBufferPointer) -> Bool {
        for c in frame where !(c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A) { return false }
        return true
    }

    /// Parses a header section; returns (body length, header bytes) or nil when incomplete.
    /// Lines end with CRLF as LSP says, or with a bare LF (accepted: a client writing `\n\n`
    /// would otherwise wait for a reply forever); an empty line ends the section.
    private func parseHeader(_ buf: UnsafeRawBufferPointer) throws(FramingError) -> (Int, Int)? {
        let limit = min(buf.count, Framer.maxHeaderBytes)
        var length: Int? = nil
        var lineStart = 0
        var i = 0
        while i < limit {
            guard let base = buf.baseAddress, let hit = memchr(base + i, 0x0A, limit - i) else { break }
            let lf = base.distance(to: UnsafeRawPointer(hit))
            var lineEnd = lf
            if lineEnd > lineStart && buf[lineEnd - 1] == 0x0D { lineEnd -= 1 }
            if lineEnd == lineStart {  // the empty line that ends the section
                guard let length else { throw .badHeader("missing Content-Length header") }
                if length > maxMessage { throw .tooLarge(limit: maxMessage) }
                return (length, lf + 1)
            }
            let line = UnsafeRawBufferPointer(rebasing: buf[lineStart..<lineEnd])
            // A header name is a token (RFC 9110 §5.1): a JSON text sent where a header section
            // was due (`{"jsonrpc":...}` has a ':') is an error, not a header to ignore.
            try Framer.checkHeaderName(line, complete: true)
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                throw .badHeader("header line without ':'")
            }
            guard colon > 0 else { throw .badHeader("a header line without a name (it starts with ':')") }
            if colon == Framer.contentLengthName.count
                && zip(line[0..<colon], Framer.contentLengthName).allSatisfy({ Framer.lower($0) == $1 })
            {
                var value = 0
                var digits = 0
                for c in UnsafeRawBufferPointer(rebasing: line[(colon + 1)...]) {
                    if c == 0x20 || c == 0x09 { continue }
                    guard c >= 0x30 && c <= 0x39 else { throw .badHeader("Content-Length is not a number") }
                    digits += 1
                    if digits > 18 { throw .tooLarge(limit: maxMessage) }
                    value = value * 10 + Int(c - 0x30)
                }
                guard digits > 0 else { throw .badHeader("Content-Length is empty") }
                // Two that differ make the body's end ambiguous (RFC 9110 §8.6): an error. The
                // same value twice is harmless.
                if let earlier = length, earlier != value { throw .badHeader("two Content-Length headers that differ") }
                length = value
            }
            lineStart = lf + 1
            i = lf + 1
        }
        if buf.count >= Framer.maxHeaderBytes { throw .badHeader("header section longer than \(Framer.maxHeaderBytes) bytes") }
        // A line still unfinished that can be no header (a byte that is no token character
        // before any ':', as in a JSON text sent where a header section is due) is an error now,
        // not once its newline comes (it may never come).
        try Framer.checkHeaderName(UnsafeRawBufferPointer(rebasing: buf[lineStart..<limit]), complete: false)
        return nil
    }

    static let contentLengthName: [UInt8] = Array("content-length".utf8)

    /// Throws when a byte before the line's first ':' is no token character. For a line not yet
    /// `complete`, a CR at its end may be the start of its ending and is left for later. The
    /// error names the line up to that byte: the same however the line arrived.
    static func checkHeaderName(_ line: UnsafeRawBufferPointer, complete: Bool) throws(FramingError) {
        for (k, c) in line.enumerated() {
            if c == UInt8(ascii: ":") || (!complete && c == 0x0D && k == line.count - 1) { return }
            guard isTokenCharacter(c) else {
                throw .badHeader("a header name must be a token (RFC 9110), got a line starting '\(quoted(line[0...k].prefix(40)))'")
            }
        }
    }

    /// RFC 9110 `tchar`: ALPHA, DIGIT and ``!#$%&'*+-.^_`|~``.
    static func isTokenCharacter(_ c: UInt8) -> Bool {
        switch c {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default: return false
        }
    }

    /// Bytes of a header line for an error message: printable ASCII as it is, others as `\xNN`.
    static func quoted<C: Collection<UInt8>>(_ bytes: C) -> String {
        var out = ""
        for c in bytes {
            if c >= 0x20 && c < 0x7F {
                out.unicodeScalars.append(UnicodeScalar(c))
            } else {
                out += "\\x" + (c < 16 ? "0" : "") + String(c, radix: 16)
            }
        }
        return out
    }

    /// Appends one outgoing message framed for `mode` (header framing only when the peer used it).
    public static func appendFrame(_ body: [UInt8], mode: FramingMode, to out: inout [UInt8]) {
        if mode == .contentLength {
            out.append(contentsOf: "Content-Length: \(body.count)\r\n\r\n".utf8)
            out.append(contentsOf: body)
        } else {
            out.append(contentsOf: body)
            out.append(0x0A)
        }
    }
}
