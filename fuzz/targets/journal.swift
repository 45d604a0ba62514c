// Fuzz target: journal recovery and the stores replayed from it (Sources/ShareStore/Journal.swift, EventStore.swift,
// DefaultsStore.swift, ShareRecordStore.swift). The input is a text recipe for a state directory, so that
// mutations keep records checksum-valid and reach the record decoders:
//
//   line 1: options: E (events, default) | D (defaults) | S (shares); R = the rest of the input is the segment
//           file verbatim; T = tear the last record; C = corrupt record 0 (checksum failure); Z = trailing zeros;
//           G = garbage between records 0 and 1; 2 = split into two segments; L = tiny segment and compaction
//           limits; #NAME (last) = the first segment file is `<journal>-NAME.log`.
//   other lines: one record each: a type character ('1'...'9' = 1...9, any other byte its own value) then the
//           payload (JSON in the stores' own records).
//
// Properties: opening never traps; opening again after recovery's repairs gives the same state; a change made
// and committed after recovery is there after reopening (for events: when every replayed id is `ev-SEQ`).

import CShareSystem
import ShareProtocol
import ShareStore
import ShareSystem

#if canImport(Glibc)
    @preconcurrency import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

private enum Kind { case events, defaults, shares }

private struct Recipe {
    var kind = Kind.events
    var raw = false, tear = false, corrupt = false, zeros = false, garbage = false, split = false, small = false
    var firstName = "000001"
    var records: [(type: UInt8, payload: [UInt8])] = []
    var rawBytes: [UInt8] = []

    init(_ input: [UInt8]) {
        let nl = input.firstIndex(of: 0x0A) ?? input.count
        let header = input[..<nl]
        let rest = nl < input.count ? Array(input[(nl + 1)...]) : []
        var i = header.startIndex
        while i < header.endIndex {
            switch header[i] {
            case UInt8(ascii: "E"): kind = .events
            case UInt8(ascii: "D"): kind = .defaults
            case UInt8(ascii: "S"): kind = .shares
            case UInt8(ascii: "R"): raw = true
            case UInt8(ascii: "T"): tear = true
            case UInt8(ascii: "C"): corrupt = true
            case UInt8(ascii: "Z"): zeros = true
            case UInt8(ascii: "G"): garbage = true
            case UInt8(ascii: "2"): split = true
            case UInt8(ascii: "L"): small = true
            case UInt8(ascii: "#"):
                // File names with '/' or NUL would leave the directory: keep them out.
                let name = header[(i + 1)...].filter { $0 != UInt8(ascii: "/") && $0 != 0 }
                if !name.isEmpty { firstName = String(decoding: name, as: UTF8.self) }
                i = header.endIndex
                continue
            default: break
            }
            i += 1
        }
        if raw {
            rawBytes = rest
            return
        }
        for line in rest.split(separator: 0x0A, omittingEmptySubsequences: true) {
            let c = line[line.startIndex]
            let type = (c >= 0x30 && c <= 0x39) ? c - 0x30 : c
            records.append((type, Array(line.dropFirst())))
        }
    }

    /// One record with a valid header and CRC-32C (magic A5 53, type, flags 0, length, crc).
    static func encode(_ type: UInt8, _ payload: [UInt8]) -> [UInt8] {
        var r: [UInt8] = [0xA5, 0x53, type, 0]
        withUnsafeBytes(of: UInt32(payload.count).littleEndian) { r.append(contentsOf: $0) }
        var crc = r.withUnsafeBytes { sb_crc32c(0, $0.baseAddress! + 2, 6) }
        crc = payload.withUnsafeBytes { sb_crc32c(crc, $0.baseAddress, $0.count) }
        withUnsafeBytes(of: crc.littleEndian) { r.append(contentsOf: $0) }
        return r + payload
    }

    /// The segment files' contents.
    func segments() -> [[UInt8]] {
        if raw { return [rawBytes] }
        var encoded = records.map { Recipe.encode($0.type, $0.payload) }
        if corrupt, !encoded.isEmpty { encoded[0][encoded[0].count / 2 + 1] ^= 0x5A }
        if garbage, encoded.count > 1 { encoded[0] += [0xA5, 0x53, 0x01, 0x00, 0xFF] }
        if tear, let last = encoded.last { encoded[encoded.count - 1] = Array(last.prefix(last.count / 2)) }
        var files: [[UInt8]]
        if split, encoded.count > 1 {
            let mid = encoded.count / 2
            files = [encoded[..<mid].flatMap { $0 }, encoded[mid...].flatMap { $0 }]
        } else {
            files = [encoded.flatMap { $0 }]
        }
        if zeros { files[files.count - 1] += [UInt8](repeating: 0, count: 16) }
        return files
    }
}

// MARK: - Files

private nonisolated(unsafe) var iteration = 0
private let baseDirectory: String = {
    let root = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
    return "\(root)/sharebroker-fuzz-journal-\(getpid())"
}()

private func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { return }
    bytes.withUnsafeBytes { b in _ = write(fd, b.baseAddress, b.count) }
    close(fd)
}

private func removeTree(_ path: String) {
    var st = stat()
    guard lstat(path, &st) == 0 else { return }
    if (st.st_mode & S_IFMT) == S_IFDIR {
        for name in FileIO.listDirectory(path) ?? [] { removeTree(path + "/" + name) }
        rmdir(path)
    } else {
        unlink(path)
    }
}

// MARK: - Stores

private struct EventState: Equatable {
    var apps: [String]
    var events: [[String: String]]
}

private func state(_ s: EventStore) -> EventState {
    var events: [[String: String]] = []
    for app in s.appsWithPending {
        for e in s.pending(for: app) {
            events.append(["app": app, "id": e.id, "seq": String(e.seq), "body": JSONValue.object(e.body).compactText])
        }
    }
    return EventState(apps: s.appsWithPending, events: events)
}

private func fuzzEvents(_ dir: String, small: Bool) {
    let limit = small ? 200 : nil
    guard let first = try? EventStore(directory: dir, segmentLimit: limit) else { return }
    let before = state(first)
    fuzzCheck(
        first.pendingCount == before.events.count, "pendingCount \(first.pendingCount) != \(before.events.count) listed"
    )
    _ = first.recovery.notes
    guard let again = try? EventStore(directory: dir, segmentLimit: limit) else {
        fuzzCheck(false, "the event store opened once but not twice")
        return
    }
    fuzzCheck(state(again) == before, "a second recovery changed the events:\n\(state(again))\nvs\n\(before)")
    again.journal.reserveChunk = 4096
    let wellFormed = before.events.allSatisfy { $0["id"] == "ev-" + ($0["seq"] ?? "") }
    let app = before.apps.first ?? "com.example.app"
    let toAck = Array(again.pending(for: app).prefix(2).map(\.id))
    do {
        for i in 0..<3 { _ = try again.enqueue(app: app, fields: ["kind": "openURL", "url": .string("myapp://\(i)")]) }
        try again.commit()
        _ = try again.ack(app: app, ids: toAck + ["ev-404"])
        try again.commit()
    } catch {
        return  // a storage failure is an answer, not a crash
    }
    let expected = state(again)
    guard let third = try? EventStore(directory: dir, segmentLimit: limit) else {
        fuzzCheck(false, "the event store cannot be reopened after a successful commit")
        return
    }
    if wellFormed {
        fuzzCheck(
            state(third) == expected,
            "reopened events differ from the committed state:\n\(state(third))\nvs\n\(expected)")
    }
}

private func fuzzDefaults(_ dir: String, small: Bool) {
    var limits = DefaultsLimits()
    if small {
        limits.compactMinBytes = 64
        limits.compactRatio = 1
    }
    let limit = small ? 200 : nil
    guard let first = try? DefaultsStore(directory: dir, group: "group.fuzz", limits: limits, segmentLimit: limit)
    else {
        return
    }
    let before = (first.version, first.valuesObject())
    fuzzCheck(first.count == first.keys.count, "count and keys disagree")
    for k in first.keys { fuzzCheck(first.value(forKey: k) != nil, "listed key \(k) has no value") }
    guard let again = try? DefaultsStore(directory: dir, group: "group.fuzz", limits: limits, segmentLimit: limit)
    else {
        fuzzCheck(false, "the defaults store opened once but not twice")
        return
    }
    fuzzCheck(again.version == before.0 && again.valuesObject() == before.1, "a second recovery changed the defaults")
    again.journal.reserveChunk = 4096
    let key = again.keys.first ?? "k"
    do {
        try again.set(key, ["changed": true, "n": 1])
        try again.set("fuzz.new", .string("x"))
        _ = try again.remove("fuzz.new")
        try again.commit()
    } catch {
        return
    }
    let expected = (again.version, again.valuesObject())
    guard let third = try? DefaultsStore(directory: dir, group: "group.fuzz", limits: limits, segmentLimit: limit)
    else {
        fuzzCheck(false, "the defaults store cannot be reopened after a successful commit")
        return
    }
    fuzzCheck(third.version == expected.0, "reopened version \(third.version) != committed \(expected.0)")
    fuzzCheck(third.valuesObject() == expected.1, "reopened values differ from the committed ones")
}

private func fuzzShares(_ dir: String, small: Bool) {
    // Tiny segments: the commit below rolls and compacts (deletes dead segments, carries live shares).
    let limit = small ? 200 : nil
    guard let first = try? ShareRecordStore(group: "group.fuzz", directory: dir, segmentLimit: limit, turn: nil) else { return }
    let before = first.all
    fuzzCheck(first.count == before.count, "count \(first.count) != \(before.count) listed")
    guard let second = try? ShareRecordStore(group: "group.fuzz", directory: dir, segmentLimit: limit, turn: nil) else {
        fuzzCheck(false, "the share store opened once but not twice")
        return
    }
    fuzzCheck(second.all == before, "a second recovery changed the shares")
    do {
        if second.share("sh-fuzz-new") == nil {
            _ = try second.add(
                id: "sh-fuzz-new", extensionID: "com.example.app.share", app: "com.example.app",
                created: "2025-01-01T00:00:00Z", items: [["url": "https://example.com/"]], files: [])
        }
        if let old = before.first { _ = try second.complete(old.id) }
        try second.commitTurn()
    } catch {
        return
    }
    let expected = second.all
    guard let third = try? ShareRecordStore(group: "group.fuzz", directory: dir, segmentLimit: limit, turn: nil) else {
        fuzzCheck(false, "the share store cannot be reopened after a successful commit")
        return
    }
    fuzzCheck(third.all == expected, "reopened shares differ from the committed ones")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let recipe = Recipe(Array(inputBuffer(data, size)))
    iteration += 1
    let dir = "\(baseDirectory)/\(iteration)"
    removeTree(baseDirectory)
    try? DefaultPaths.makeDirectories(dir)
    defer { removeTree(baseDirectory) }

    let name: String
    switch recipe.kind {
    case .events: name = "events"
    case .defaults: name = "defaults"
    case .shares: name = "shares"
    }
    let files = recipe.segments()
    for (i, bytes) in files.enumerated() {
        let suffix = i == 0 ? recipe.firstName : "000002"
        writeFile("\(dir)/\(name)-\(suffix).log", bytes)
    }
    switch recipe.kind {
    case .events: fuzzEvents(dir, small: recipe.small)
    case .defaults: fuzzDefaults(dir, small: recipe.small)
    case .shares: fuzzShares(dir, small: recipe.small)
    }
    return 0
}
