// Shared helpers for the ShareProtocol tests: byte conversions, a seeded RNG, framer drivers.

import Testing

@testable import ShareProtocol

/// UTF-8 bytes of a string.
func utf8(_ s: String) -> [UInt8] { Array(s.utf8) }

/// A string from UTF-8 bytes (for readable failure messages).
func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// Parses bytes, returning the error (nil when parsing succeeded).
func parseError(_ bytes: [UInt8]) -> JSONParseError? {
    do {
        _ = try JSONParser.parse(bytes)
        return nil
    } catch {
        return error
    }
}

/// SplitMix64: small, fast, deterministic; good enough for property tests.
struct SeededRNG: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One frame delivered by a Framer.
struct Frame: Equatable, CustomStringConvertible {
    var body: [UInt8]
    var mode: FramingMode
    var description: String { "\(mode):\(text(body).debugDescription)" }
}

extension Framer {
    /// Feeds one chunk given as an array and returns the frames it completed.
    mutating func feedBytes(_ chunk: [UInt8]) throws(FramingError) -> [Frame] {
        var frames: [Frame] = []
        try chunk.withUnsafeBytes { buf in
            Result { () throws(FramingError) -> Void in
                try self.feed(buf) { frame, mode in frames.append(Frame(body: Array(frame), mode: mode)) }
            }
        }.get()
        return frames
    }
}

/// Feeds `stream` split into chunks of at most `chunkSize` bytes (0 = all at once).
func frames(of stream: [UInt8], chunkSize: Int = 0, maxMessage: Int = 1 << 20) throws(FramingError) -> [Frame] {
    var framer = Framer(maxMessage: maxMessage)
    if chunkSize <= 0 { return try framer.feedBytes(stream) }
    var out: [Frame] = []
    var i = 0
    while i < stream.count {
        let end = min(i + chunkSize, stream.count)
        out += try framer.feedBytes(Array(stream[i..<end]))
        i = end
    }
    expectSearchedOnce(framer, stream)
    return out
}

/// Feeds `stream` split at the given cut points.
func frames(of stream: [UInt8], cuts: [Int], maxMessage: Int = 1 << 20) throws(FramingError) -> [Frame] {
    var framer = Framer(maxMessage: maxMessage)
    var out: [Frame] = []
    var start = 0
    for cut in cuts.sorted() + [stream.count] where cut >= start {
        out += try framer.feedBytes(Array(stream[start..<cut]))
        start = cut
    }
    expectSearchedOnce(framer, stream)
    return out
}

/// However a stream is cut into reads, newline framing searches each of its bytes for the '\n' at most once.
func expectSearchedOnce(_ framer: Framer, _ stream: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(
        framer.newlineSearchBytes <= stream.count,
        "searched \(framer.newlineSearchBytes) bytes of a \(stream.count)-byte stream", sourceLocation: sourceLocation)
}

/// The error thrown while feeding `stream` in chunks, or nil.
func framingError(_ stream: [UInt8], chunkSize: Int = 0, maxMessage: Int) -> FramingError? {
    do {
        _ = try frames(of: stream, chunkSize: chunkSize, maxMessage: maxMessage)
        return nil
    } catch {
        return error
    }
}

/// A Content-Length frame for `body`.
func lspFrame(_ body: String, headerName: String = "Content-Length", extraHeaders: [String] = []) -> [UInt8] {
    let b = utf8(body)
    var header = "\(headerName): \(b.count)\r\n"
    for h in extraHeaders { header += h + "\r\n" }
    header += "\r\n"
    return utf8(header) + b
}

/// Decodes a frame given as a string with RPCCodec.
func decodeFrame(_ s: String) -> IncomingMessage {
    utf8(s).withUnsafeBytes { RPCCodec.decode($0) }
}

/// `frame` with `edits` random one-byte edits (a byte replaced, removed or inserted from `alphabet`).
func mutated(
    _ frame: [UInt8], alphabet: [UInt8], edits: ClosedRange<Int>, using rng: inout SystemRandomNumberGenerator
) -> [UInt8] {
    var frame = frame
    for _ in 0..<Int.random(in: edits, using: &rng) {
        if frame.isEmpty { break }
        let i = Int.random(in: 0..<frame.count, using: &rng)
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: frame[i] = alphabet.randomElement(using: &rng)!
        case 1: frame.remove(at: i)
        default: frame.insert(alphabet.randomElement(using: &rng)!, at: i)
        }
    }
    return frame
}
