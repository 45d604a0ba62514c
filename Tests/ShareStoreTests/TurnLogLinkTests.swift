// Which stores of a commit wait for which: a store later in commit order is written only once the
// earlier stores that a request changed together with it are durable (`SyncJob.after`); a failure
// elsewhere does not stop it.

import Foundation
@testable import ShareStore
import XCTest

/// A store without a journal: its job syncs a directory, which fails when the directory is
/// missing (or it fails to begin when told to).
final class FakeParticipant: TurnParticipant {
    let participantName: String
    let commitOrder: Int
    var directory: String
    var failBegin = false
    private(set) var outcomes: [StoreError?] = []

    init(_ name: String, order: Int, directory: String) {
        participantName = name
        commitOrder = order
        self.directory = directory
    }

    func beginCommit() throws(StoreError) -> SyncJob? {
        if failBegin { throw StoreError("\(participantName) cannot begin") }
        return SyncJob(directories: [directory], batch: nil)
    }

    func finishCommit(_ job: SyncJob?, error: StoreError?) { outcomes.append(error) }
}

final class TurnLogLinkTests: XCTestCase {
    let good = NSTemporaryDirectory()
    let missing = NSTemporaryDirectory() + "sb-missing-\(UUID().uuidString)"

    /// Group A and group B (order 0), the event queues (order 1): a share.send {open} to A links
    /// A and the queues, a share to B and a url.open touch one store each.
    func turn(aFails: Bool) -> (TurnLog, FakeParticipant, FakeParticipant, FakeParticipant) {
        let log = TurnLog()
        let a = FakeParticipant("group A", order: 0, directory: aFails ? missing : good)
        let b = FakeParticipant("group B", order: 0, directory: good)
        let events = FakeParticipant("events", order: 1, directory: good)
        return (log, a, b, events)
    }

    func run(_ begun: [(TurnParticipant, SyncJob?)]) -> [String: StoreError?] {
        let errors = SyncWorker.run(begun.compactMap(\.1))
        var out: [String: StoreError?] = [:]
        for (i, (p, _)) in begun.enumerated() { out[p.participantName] = errors[i] }
        return out
    }

    func testAStoreLinkedToAFailedOneIsNotWrittenAndOthersAre() {
        let (log, a, b, events) = turn(aFails: true)
        log.beginRequest()
        log.touch(events)  // (a url.open first: the queues are dirty before the groups)
        log.beginRequest()
        log.touch(a)
        log.touch(events)  // share.send {open} to A
        log.beginRequest()
        log.touch(b)  // share.send to B
        let begun = log.beginAll()
        XCTAssertTrue(begun.failed.isEmpty)
        XCTAssertEqual(begun.stores.map(\.0.participantName), ["group A", "group B", "events"], "commit order")
        XCTAssertEqual(begun.stores[2].1?.after, [ObjectIdentifier(a)], "the queues follow A, which a request changed with them")
        XCTAssertEqual(begun.stores[1].1?.after, [], "B follows nothing")
        let errors = run(begun.stores)
        XCTAssertNotNil(errors["group A"] ?? nil)
        XCTAssertNil(errors["group B"] ?? nil, "B is written whatever A does")
        XCTAssertEqual((errors["events"] ?? nil)?.message, SyncJob.notWritten)
        XCTAssertFalse(log.hasDirty)
    }

    func testWithoutALinkTheQueuesAreWrittenAfterAGroupFailed() {
        let (log, a, _, events) = turn(aFails: true)
        log.beginRequest()
        log.touch(a)  // share.send to A, without open
        log.beginRequest()
        log.touch(events)  // url.open
        let begun = log.beginAll()
        XCTAssertEqual(begun.stores[1].1?.after, [])
        let errors = run(begun.stores)
        XCTAssertNotNil(errors["group A"] ?? nil)
        XCTAssertNil(errors["events"] ?? nil)
    }

    func testLinksLastOneCommit() {
        let (log, a, _, events) = turn(aFails: false)
        log.beginRequest()
        log.touch(a)
        log.touch(events)
        _ = run(log.beginAll().stores)
        a.directory = missing
        log.beginRequest()
        log.touch(a)
        log.beginRequest()
        log.touch(events)
        let begun = log.beginAll()
        XCTAssertEqual(begun.stores[1].1?.after, [], "the last commit's link is gone")
        XCTAssertNil(run(begun.stores)["events"] ?? nil)
    }

    func testAStoreLinkedToOneThatFailedToBeginIsUndoneAndCountsFailed() {
        let (log, a, b, events) = turn(aFails: false)
        a.failBegin = true
        log.beginRequest()
        log.touch(a)
        log.touch(events)
        log.beginRequest()
        log.touch(b)
        let begun = log.beginAll()
        XCTAssertEqual(Set(begun.failed.keys), [ObjectIdentifier(a), ObjectIdentifier(events)])
        XCTAssertEqual(begun.failed[ObjectIdentifier(events)]?.message, SyncJob.notWritten)
        XCTAssertEqual(events.outcomes.count, 1, "the queues' changes were undone (finishCommit with the error)")
        XCTAssertEqual(events.outcomes.first??.message, SyncJob.notWritten)
        XCTAssertEqual(begun.stores.map(\.0.participantName), ["group B"], "B is written")
    }

    func testCommitAllKeepsTheSameRule() {
        let (log, a, b, events) = turn(aFails: true)
        log.beginRequest()
        log.touch(a)
        log.touch(events)
        log.beginRequest()
        log.touch(b)
        let failed = log.commitAll()
        XCTAssertEqual(Set(failed.keys), [ObjectIdentifier(a), ObjectIdentifier(events)])
        XCTAssertNil(b.outcomes.first ?? nil, "B committed")
        XCTAssertEqual(events.outcomes.first??.message, SyncJob.notWritten)

        let (log2, a2, _, events2) = turn(aFails: true)
        log2.beginRequest()
        log2.touch(a2)
        log2.beginRequest()
        log2.touch(events2)
        XCTAssertEqual(Set(log2.commitAll().keys), [ObjectIdentifier(a2)], "the queues, not linked to A, committed")
    }

    // (Review) Reads and changes outside a request link no stores.

    func testAReadThatWaitsForTwoStoresLinksNeither() {
        let (log, a, _, events) = turn(aFails: true)
        log.beginRequest()
        log.join(a)  // share.list of an announced share not yet durable
        log.join(events)
        log.beginRequest()
        log.touch(a)  // a share without open
        log.beginRequest()
        log.touch(events)  // url.open
        let begun = log.beginAll()
        XCTAssertEqual(begun.stores[1].1?.after, [], "a read changed nothing: it ties no store to another")
        XCTAssertNil(run(begun.stores)["events"] ?? nil)
    }

    func testAChangeAfterAReadOfAnotherStoreLinksThem() {
        let (log, a, _, events) = turn(aFails: false)
        log.beginRequest()
        log.join(a)
        log.touch(events)  // (its answer fails with A's commit: what it changed must not stay)
        XCTAssertEqual(log.beginAll().stores[1].1?.after, [ObjectIdentifier(a)])
        log.beginRequest()
        log.touch(events)
        log.join(a)
        XCTAssertEqual(log.beginAll().stores[1].1?.after, [ObjectIdentifier(a)])
    }

    func testAChangeOutsideARequestLinksNothing() {
        let (log, a, b, events) = turn(aFails: true)
        log.beginRequest()
        log.touch(b)  // the last request: a share to B
        log.endRequest()
        log.touch(events)  // (a withdrawn event's ack, compaction's copies: no request's)
        log.touch(a)
        let begun = log.beginAll()
        XCTAssertEqual(begun.stores.map(\.0.participantName), ["group B", "group A", "events"])
        XCTAssertEqual(begun.stores[2].1?.after, [])
        XCTAssertFalse(log.requestTouched.contains(ObjectIdentifier(events)), "not the last request's")
    }

    func testALinkIsKeptOncePerPair() {
        let (log, a, b, events) = turn(aFails: false)
        for _ in 0..<1000 {
            log.beginRequest()
            log.touch(a)
            log.touch(events)
        }
        log.beginRequest()
        log.touch(b)
        log.touch(events)
        XCTAssertEqual(log.beginAll().stores[2].1?.after, [ObjectIdentifier(a), ObjectIdentifier(b)])
    }
}
