// Helpers shared by every fuzz target (compiled into each target's module): splitting the input into
// NUL-separated parts, a deterministic RNG for chunking, and checks that abort so libFuzzer keeps the input.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The fuzz input as a buffer (libFuzzer may pass a dangling pointer with size 0).
func inputBuffer(_ data: UnsafePointer<UInt8>, _ size: Int) -> UnsafeRawBufferPointer {
    size == 0 ? UnsafeRawBufferPointer(start: nil, count: 0) : UnsafeRawBufferPointer(start: data, count: size)
}

/// Splits `bytes` at NUL bytes into at most `count` parts; the last part keeps any further NULs.
func splitParts(_ bytes: UnsafeRawBufferPointer, count: Int) -> [[UInt8]] {
    var parts: [[UInt8]] = []
    var start = 0
    var i = 0
    while i < bytes.count, parts.count < count - 1 {
        if bytes[i] == 0 {
            parts.append(Array(UnsafeRawBufferPointer(rebasing: bytes[start..<i])))
            start = i + 1
        }
        i += 1
    }
    parts.append(Array(UnsafeRawBufferPointer(rebasing: bytes[start..<bytes.count])))
    return parts
}

/// Bytes as a String, with invalid UTF-8 repaired (U+FFFD), as a socket or file reader would see it.
func lossyString(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// SplitMix64: a tiny deterministic generator, seeded from the input.
struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { n <= 1 ? 0 : Int(next() % UInt64(n)) }
}

/// Fails the run (libFuzzer saves the input as a crash) when a property does not hold.
func fuzzCheck(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() {
        let text = Array("FUZZ PROPERTY FAILED (\(file):\(line)): \(message())\n".utf8)
        _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        abort()
    }
}
