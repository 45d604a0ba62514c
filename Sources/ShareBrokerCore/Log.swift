// Logging: one line per event on stderr, with time, level and connection id. Loop-owned.

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ShareSystem

/// Log levels, least to most severe.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    /// Every message in and out.
    case trace
    /// Connections opening and closing, dispatch details.
    case debug
    /// Start, stop, reloads, dropped clients (the default).
    case info
    /// Problems the broker recovered from (bad manifests, ...).
    case warning
    /// Failures.
    case error

    /// Parses `trace|debug|info|warning|warn|error`.
    public init?(name: String) {
        switch name.lowercased() {
        case "trace": self = .trace
        case "debug": self = .debug
        case "info": self = .info
        case "warning", "warn": self = .warning
        case "error": self = .error
        default: return nil
        }
    }

    /// The level's name.
    public var name: String {
        switch self {
        case .trace: return "trace"
        case .debug: return "debug"
        case .info: return "info"
        case .warning: return "warning"
        case .error: return "error"
        }
    }

    /// Orders by severity.
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Writes log lines to stderr (fd 2) with one `write` each, so lines never interleave.
public struct Logger: Sendable {
    /// Lowest level written.
    public var level: LogLevel

    /// Creates a logger.
    public init(level: LogLevel) { self.level = level }

    /// True when `l` would be written (use to avoid building expensive messages).
    @inline(__always) public func enabled(_ l: LogLevel) -> Bool { l >= level }

    /// Writes one line: `TIME LEVEL [conn N] message`.
    public func log(_ l: LogLevel, _ message: @autoclosure () -> String, connection: UInt64? = nil) {
        guard l >= level else { return }
        var line = Logger.timestamp() + " " + l.name
        if let connection { line += " [conn \(connection)]" }
        line += " " + message().replacingNewlines() + "\n"
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buf in _ = write(2, buf.baseAddress, buf.count) }
    }

    /// Now, as ISO 8601 UTC with milliseconds: `2026-11-30T08:21:37.123Z`.
    static func timestamp() -> String {
        var clock = TimestampClock()
        return clock.now()
    }
}

extension String {
    func replacingNewlines() -> String {
        guard contains(where: { $0 == "\n" || $0 == "\r" }) else { return self }
        return String(map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}

/// ISO 8601 UTC timestamps with milliseconds (`2026-11-30T08:21:37.123Z`), written digit by digit;
/// the date and time up to the second are kept from the previous call within the same second
/// (share.send stamps every share: gmtime_r and 19 digits once a second, not once a share).
struct TimestampClock {
    private var second = Int.min
    private var prefix: [UInt8] = []  // "YYYY-MM-DDTHH:MM:SS"
    /// The last string made and its millisecond: a burst of shares in one millisecond shares it
    /// (a retain instead of a new string each).
    private var lastMillisecond = -1
    private var last = ""

    mutating func now() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        if Int(ts.tv_sec) != second {
            second = Int(ts.tv_sec)
            prefix = TimestampClock.secondPrefix(ts.tv_sec)
            lastMillisecond = -1
        }
        let ms = Int(ts.tv_nsec / 1_000_000)
        if ms == lastMillisecond { return last }
        lastMillisecond = ms
        last = make(ms)
        return last
    }

    private func make(_ ms: Int) -> String {
        // Written straight into the string's storage (24 ASCII bytes: no array, no copy).
        return prefix.withUnsafeBufferPointer { head in
            String(unsafeUninitializedCapacity: head.count + 5) { out in
                var i = 0
                for c in head {
                    out[i] = c
                    i += 1
                }
                out[i] = UInt8(ascii: ".")
                out[i + 1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: ms / 100)
                out[i + 2] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: ms / 10 % 10)
                out[i + 3] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: ms % 10)
                out[i + 4] = UInt8(ascii: "Z")
                return i + 5
            }
        }
    }

    static func secondPrefix(_ seconds: Int) -> [UInt8] {
        var t = time_t(seconds)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        var out = [UInt8]()
        out.reserveCapacity(24)
        func digits(_ v: Int32, _ width: Int) {
            var divisor: Int32 = 1
            for _ in 1..<width { divisor *= 10 }
            var rest = max(0, v)
            if width == 4 && rest > 9999 { rest %= 10000 }  // years past 9999 are not expected
            while divisor > 0 {
                out.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: (rest / divisor) % 10))
                divisor /= 10
            }
        }
        digits(tmv.tm_year + 1900, 4)
        out.append(UInt8(ascii: "-"))
        digits(tmv.tm_mon + 1, 2)
        out.append(UInt8(ascii: "-"))
        digits(tmv.tm_mday, 2)
        out.append(UInt8(ascii: "T"))
        digits(tmv.tm_hour, 2)
        out.append(UInt8(ascii: ":"))
        digits(tmv.tm_min, 2)
        out.append(UInt8(ascii: ":"))
        digits(tmv.tm_sec, 2)
        return out
    }
}
