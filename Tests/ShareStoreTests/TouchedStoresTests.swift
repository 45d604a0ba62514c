// TouchedStores: the stores one request changed, kept inline for the usual single store.

import ShareStore
import Testing

@Suite("TouchedStores")
struct TouchedStoresTests {
    final class Store {}

    @Test func keepsOrderWithoutDuplicates() {
        let a = Store(), b = Store(), c = Store()
        let (ia, ib, ic) = (ObjectIdentifier(a), ObjectIdentifier(b), ObjectIdentifier(c))
        var s = TouchedStores()
        #expect(s.isEmpty)
        #expect(!s.contains(ia))
        #expect(s.firstMapped { _ in 1 } == nil)
        s.insert(ia)
        s.insert(ia)
        #expect(!s.isEmpty && s.contains(ia) && !s.contains(ib))
        #expect(s.more.isEmpty, "one store is kept inline")
        s.insert(ib)
        s.insert(ia)
        s.insert(ib)
        s.insert(ic)
        #expect(s.first == ia)
        #expect(s.more == [ib, ic])
        #expect(s.contains(ic))
        // The first member (in insertion order) that maps to a value.
        let failed: [ObjectIdentifier: String] = [ic: "c failed", ib: "b failed"]
        #expect(s.firstMapped { failed[$0] } == "b failed")
        #expect(s == { var t = TouchedStores(); t.insert(ia); t.insert(ib); t.insert(ic); return t }())
    }
}
