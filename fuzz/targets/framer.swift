// Fuzz target: the Framer (Sources/ShareProtocol/Framer.swift). The input's first bytes pick the size
// limit and a seed for random chunk boundaries; the rest is the byte stream. Properties: feeding the stream
// in random chunks gives exactly the frames (and error) of feeding it at once; frames respect the limit;
// newline frames hold no '\n' and are not blank; Content-Length frames re-encode to the same frames.

import ShareProtocol

private struct Outcome: Equatable {
    var frames: [[UInt8]] = []
    var modes: [FramingMode] = []
    var error: FramingError? = nil
    var buffered = 0
    var mode: FramingMode = .undetermined
    /// What `finish` handed over at the end of the stream (when no error came first).
    var final: [UInt8]? = nil
}

/// Feeds `stream` in the given chunk sizes (nil: all at once), stopping at the first error.
private func run(_ stream: [UInt8], maxMessage: Int, chunks: [Int]?) -> Outcome {
    var framer = Framer(maxMessage: maxMessage)
    var out = Outcome()
    stream.withUnsafeBytes { all in
        let sizes = chunks ?? [all.count]
        var pos = 0
        for size in sizes {
            let end = min(all.count, pos + size)
            do throws(FramingError) {
                try framer.feed(UnsafeRawBufferPointer(rebasing: all[pos..<end])) { frame, mode in
                    out.frames.append(Array(frame))
                    out.modes.append(mode)
                }
            } catch {
                out.error = error
                break
            }
            pos = end
        }
    }
    out.buffered = framer.bufferedByteCount
    out.mode = framer.mode
    if out.error == nil {
        framer.finish { frame, _ in
            out.final = Array(frame)
            return true
        }
        fuzzCheck(framer.bufferedByteCount == 0, "finish left bytes buffered")
    }
    return out
}

/// As `run`, chunked, but the handler stops after every `stopEvery`-th frame and the reader
/// resumes at once (as the broker does when a request's work is done).
private func runStopping(_ stream: [UInt8], maxMessage: Int, chunks: [Int], stopEvery: Int) -> Outcome {
    var framer = Framer(maxMessage: maxMessage)
    var out = Outcome()
    var seen = 0
    let handler: (UnsafeRawBufferPointer, FramingMode) -> Bool = { frame, mode in
        out.frames.append(Array(frame))
        out.modes.append(mode)
        seen += 1
        return seen % stopEvery != 0
    }
    stream.withUnsafeBytes { all in
        var pos = 0
        for size in chunks {
            let end = min(all.count, pos + size)
            do throws(FramingError) {
                var going = try framer.feedUntilStopped(UnsafeRawBufferPointer(rebasing: all[pos..<end]), onFrame: handler)
                while !going { going = try framer.resume(onFrame: handler) }
            } catch {
                out.error = error
                break
            }
            pos = end
        }
    }
    out.buffered = framer.bufferedByteCount
    out.mode = framer.mode
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = inputBuffer(data, size)
    guard input.count >= 4 else { return 0 }
    // Limit: mostly small (to reach the size checks), sometimes the broker's default of 4 MiB.
    let raw = Int(input[0]) | Int(input[1]) << 8
    let maxMessage = raw == 0xFFFF ? 4 << 20 : raw % 600
    var rng = SplitMix64(state: UInt64(input[2]) | UInt64(input[3]) << 8)
    let stream = Array(UnsafeRawBufferPointer(rebasing: input[4...]))

    var chunks: [Int] = []
    var covered = 0
    while covered < stream.count {
        let n: Int
        switch rng.below(8) {
        case 0: n = 0  // an empty read
        case 1, 2, 3: n = 1 + rng.below(4)
        case 4, 5: n = 1 + rng.below(64)
        default: n = 1 + rng.below(stream.count)
        }
        chunks.append(n)
        covered += n
    }

    let whole = run(stream, maxMessage: maxMessage, chunks: nil)
    let chunked = run(stream, maxMessage: maxMessage, chunks: chunks)
    fuzzCheck(
        whole.frames == chunked.frames,
        "chunking changed the frames: \(whole.frames.count) at once vs \(chunked.frames.count) chunked (chunks \(chunks))"
    )
    fuzzCheck(whole.modes == chunked.modes, "chunking changed the frame modes")
    let stopping = runStopping(stream, maxMessage: maxMessage, chunks: chunks, stopEvery: 1 + rng.below(3))
    fuzzCheck(stopping.frames == chunked.frames, "stopping and resuming changed the frames")
    fuzzCheck(stopping.modes == chunked.modes, "stopping and resuming changed the frame modes")
    fuzzCheck(stopping.error == chunked.error, "stopping and resuming changed the error")
    if chunked.error == nil {
        fuzzCheck(stopping.buffered == chunked.buffered, "stopping and resuming changed the buffered byte count")
    }
    fuzzCheck(
        whole.error == chunked.error,
        "chunking changed the error: \(String(describing: whole.error)) at once vs \(String(describing: chunked.error)) chunked (chunks \(chunks))"
    )
    if whole.error == nil {
        fuzzCheck(
            whole.buffered == chunked.buffered,
            "chunking changed the buffered byte count: \(whole.buffered) vs \(chunked.buffered)")
        fuzzCheck(whole.mode == chunked.mode, "chunking changed the mode")
        fuzzCheck(whole.final == chunked.final, "chunking changed the last unterminated line")
        if let last = whole.final {
            fuzzCheck(whole.mode != .contentLength, "finish handed over part of a Content-Length frame")
            fuzzCheck(!last.contains(0x0A) && last.count <= maxMessage, "the last line holds '\\n' or passed the limit")
            fuzzCheck(last.contains { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A) }, "a blank last line was delivered")
        }
    }
    for (frame, mode) in zip(whole.frames, whole.modes) {
        fuzzCheck(frame.count <= maxMessage, "a frame of \(frame.count) bytes passed the limit \(maxMessage)")
        if mode == .newline {
            fuzzCheck(!frame.contains(0x0A), "a newline frame contains '\\n'")
            fuzzCheck(
                frame.contains { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A) }, "a blank line was delivered"
            )
        }
    }
    // Content-Length frames survive re-encoding with appendFrame.
    if whole.mode == .contentLength, !whole.frames.isEmpty {
        var encoded: [UInt8] = []
        for frame in whole.frames { Framer.appendFrame(frame, mode: .contentLength, to: &encoded) }
        let again = run(encoded, maxMessage: maxMessage, chunks: nil)
        fuzzCheck(
            again.error == nil && again.frames == whole.frames,
            "re-encoded Content-Length frames differ: \(String(describing: again.error))")
        fuzzCheck(again.buffered == 0, "re-encoded frames left \(again.buffered) bytes buffered")
    }
    return 0
}
