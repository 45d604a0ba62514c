// A pthread mutex that stays put: the one lock type of the broker's threads (the worker pools,
// the sync worker, a launch's ticket, the walk of the user database).

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A mutex on the heap. A C lock must not move, and must not be passed as `&property` (an inout
/// access that lasts as long as the call, so a lock call still waiting would overlap the next
/// access); this one is allocated once and never moves.
public final class Lock: @unchecked Sendable {  // the mutex is the synchronization
    /// The mutex itself, for `pthread_cond_wait` (which releases and takes it again).
    public let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// An unlocked mutex.
    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Takes the mutex (waits while another thread holds it).
    @inlinable public func lock() { pthread_mutex_lock(mutex) }

    /// Lets the mutex go.
    @inlinable public func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` holding the mutex.
    @inlinable public func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
