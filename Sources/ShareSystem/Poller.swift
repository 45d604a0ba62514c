// Readiness notification behind a small abstraction: epoll on Linux, kqueue elsewhere (C shim).
// The loop registers descriptors with a 64-bit token and waits; no busy polling.

import CShareSystem

/// Readiness interest and events.
public struct Readiness: OptionSet, Sendable {
    /// The raw bits (SB_* in the C shim).
    public let rawValue: UInt32
    /// Creates from raw bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Readable.
    public static let readable = Readiness(rawValue: UInt32(SB_READABLE))
    /// Writable.
    public static let writable = Readiness(rawValue: UInt32(SB_WRITABLE))
    /// Peer hung up.
    public static let hangup = Readiness(rawValue: UInt32(SB_HANGUP))
    /// Error condition.
    public static let error = Readiness(rawValue: UInt32(SB_ERROR))
}

/// An epoll/kqueue instance. Owned by one loop thread.
public final class Poller {
    /// The poller's own descriptor.
    public let fd: Int32
    private var events: [sb_event]

    /// Creates the poller (`epoll_create1` / `kqueue`).
    public init(capacity: Int = 256) throws(SystemError) {
        fd = try retrying("epoll_create1") { sb_poller_create() }
        events = Array(repeating: sb_event(), count: min(capacity, 256))
    }

    deinit { FD.close(fd) }

    /// Registers `descriptor` (`epoll_ctl(ADD)`).
    public func add(_ descriptor: Int32, interest: Readiness, token: UInt64) throws(SystemError) {
        _ = try retrying("epoll_ctl") { sb_poller_add(fd, descriptor, interest.rawValue, token) }
    }

    /// Changes the interest of `descriptor` (`epoll_ctl(MOD)`).
    public func modify(_ descriptor: Int32, interest: Readiness, token: UInt64) throws(SystemError) {
        _ = try retrying("epoll_ctl") { sb_poller_modify(fd, descriptor, interest.rawValue, token) }
    }

    /// Unregisters `descriptor`; errors are ignored (closing also unregisters).
    public func remove(_ descriptor: Int32) {
        _ = sb_poller_remove(fd, descriptor)
    }

    /// Waits up to `timeoutMillis` (-1: forever) and calls `body` for each ready descriptor.
    public func wait(timeoutMillis: Int32, _ body: (UInt64, Readiness) -> Void) throws(SystemError) {
        try wait(timeoutNanos: timeoutMillis < 0 ? -1 : Int64(timeoutMillis) * 1_000_000, body)
    }

    /// Whether `wait(timeoutNanos:)` keeps sub-millisecond timeouts here (kqueue; epoll_pwait2,
    /// Linux 5.11 and later, unless a sandbox refuses it). Without, they round up to 1 ms.
    public var hasPreciseTimeouts: Bool { sb_poller_precise(fd) != 0 }

    /// Whether sub-millisecond timeouts still hold, without a system call: false once the
    /// kernel (or a sandbox) has refused epoll_pwait2, which can happen after start-up.
    public var stillHasPreciseTimeouts: Bool { sb_poller_still_precise() != 0 }

    /// Waits up to `timeoutNanos` (-1: forever) and calls `body` for each ready descriptor. The
    /// timeout is kept to the nanosecond where the system allows (epoll_pwait2, kqueue), else
    /// rounded up to the millisecond.
    public func wait(timeoutNanos: Int64, _ body: (UInt64, Readiness) -> Void) throws(SystemError) {
        let n = try events.withUnsafeMutableBufferPointer { buf throws(SystemError) -> Int32 in
            let r = sb_poller_wait_ns(fd, buf.baseAddress, Int32(buf.count), timeoutNanos)
            if r < 0 {
                let e = currentErrno()
                if e == EINTR { return 0 }
                throw SystemError("epoll_wait", errno: e)
            }
            return r
        }
        for i in 0..<Int(n) { body(events[i].token, Readiness(rawValue: events[i].events)) }
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
