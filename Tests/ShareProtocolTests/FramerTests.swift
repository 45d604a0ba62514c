// Framer: newline and Content-Length framing, mode detection, chunking independence, size limits.

import Testing

@testable import ShareProtocol

private func nl(_ bodies: [String]) -> [Frame] { bodies.map { Frame(body: utf8($0), mode: .newline) } }
private func cl(_ bodies: [String]) -> [Frame] { bodies.map { Frame(body: utf8($0), mode: .contentLength) } }

@Suite("Framer: newline mode")
struct FramerNewlineTests {
    @Test func splitsLines() throws {
        var f = Framer(maxMessage: 1024)
        #expect(f.mode == .undetermined)
        let got = try f.feedBytes(utf8("{\"a\":1}\n[2]\n"))
        #expect(got == nl(["{\"a\":1}", "[2]"]))
        #expect(f.mode == .newline)
        #expect(f.bufferedByteCount == 0)
    }

    @Test func keepsPartialLineUntilNewline() throws {
        var f = Framer(maxMessage: 1024)
        #expect(try f.feedBytes(utf8("{\"a\":")) == [])
        #expect(f.bufferedByteCount == 5)
        #expect(try f.feedBytes(utf8("1}\n{\"b\"")) == nl(["{\"a\":1}"]))
        #expect(f.bufferedByteCount == 4)
        #expect(try f.feedBytes(utf8(":2}\n")) == nl(["{\"b\":2}"]))
        #expect(f.bufferedByteCount == 0)
    }

    /// `finish` hands over a last line without its '\n' (newline framing or none seen yet),
    /// once; nothing for blank text, a partial Content-Length frame, or an empty buffer.
    @Test func finishHandsOverTheLastUnterminatedLine() throws {
        func finished(_ text: String) throws -> [Frame] {
            var f = Framer(maxMessage: 1024)
            var got = try f.feedBytes(utf8(text))
            f.finish { frame, mode in
                got.append(Frame(body: Array(frame), mode: mode))
                return true
            }
            #expect(f.bufferedByteCount == 0)
            #expect(!f.finish { _, _ in true }, "only once")
            return got
        }
        #expect(try finished("{\"a\":1}") == nl(["{\"a\":1}"]))
        #expect(try finished("[1]\n{\"b\":2}\r") == nl(["[1]", "{\"b\":2}"]))
        #expect(try finished("\u{FEFF}[3]") == nl(["[3]"]))
        #expect(try finished("[4]\n") == nl(["[4]"]))
        #expect(try finished(" \t ") == [])
        #expect(try finished("Content-Length: 9\r\n\r\n{\"a\"") == [])
        #expect(try finished("Content-Lttttt1") == [], "half a header section (a fuzzing find)")
        #expect(try finished("content-type: x") == [])
        #expect(try finished("Cont") == nl(["Cont"]), "too short to be a header: a line (a parse error)")
    }

    /// What is left after a large frame is kept in a buffer of its own size: a 4 MB message
    /// followed by 100 bytes of the next kept 4 MB (the review).
    @Test func aSmallRestAfterALargeFrameKeepsNoLargeBuffer() throws {
        var f = Framer(maxMessage: 8 << 20)
        let big = "[\"" + String(repeating: "x", count: 4_000_000) + "\"]\n"
        var bytes = utf8(big) + utf8(String(repeating: "y", count: 100))
        var frames = 0
        // In 64 KiB reads, as the broker reads.
        while !bytes.isEmpty {
            let n = min(65536, bytes.count)
            frames += try f.feedBytes(Array(bytes[0..<n])).count
            bytes.removeFirst(n)
        }
        #expect(frames == 1)
        #expect(f.bufferedByteCount == 100)
        #expect(f.bufferedCapacity < 8192, "capacity \(f.bufferedCapacity)")
    }

    /// A limit near Int.max (a library caller's setting) must not overflow the framer's checks.
    @Test func aHugeLimitDoesNotOverflow() throws {
        for input in ["{\"a\":", "Content-Length: 5\r\n\r\n{}"] {
            var f = Framer(maxMessage: .max)
            #expect(try f.feedBytes(utf8(input)) == [])
            #expect(try f.feedBytes(utf8("1}\n")).count <= 1)
        }
    }

    @Test func stripsCRLF() throws {
        #expect(try frames(of: utf8("{}\r\n[]\r\n")) == nl(["{}", "[]"]))
        #expect(try frames(of: utf8("{}\r\n[]\r\n"), chunkSize: 1) == nl(["{}", "[]"]))
        // Only the CR right before the LF is dropped.
        #expect(try frames(of: utf8("a\rb\n")) == nl(["a\rb"]))
    }

    /// A UTF-8 byte order mark at the start of the stream is skipped, in either framing and
    /// however the reads cut it; one later in the stream is part of the frame.
    @Test func skipsALeadingByteOrderMark() throws {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        for chunkSize in [0, 1, 2, 4] {
            #expect(try frames(of: bom + utf8("{}\n[]\n"), chunkSize: chunkSize) == nl(["{}", "[]"]))
            #expect(try frames(of: bom + utf8("Content-Length: 2\r\n\r\n{}"), chunkSize: chunkSize) == cl(["{}"]))
            #expect(try frames(of: utf8("{}\n") + bom + utf8("[]\n"), chunkSize: chunkSize) == [
                Frame(body: utf8("{}"), mode: .newline), Frame(body: bom + utf8("[]"), mode: .newline),
            ])
            // Bytes that only start like a mark are the frame's own.
            #expect(try frames(of: [0xEF, 0xBB] + utf8("x\n"), chunkSize: chunkSize) == [Frame(body: [0xEF, 0xBB] + utf8("x"), mode: .newline)])
        }
    }

    @Test func skipsBlankLines() throws {
        let stream = utf8("\n\n{\"a\":1}\n   \n\t\r\n\r\n\n[2]\n \n")
        #expect(try frames(of: stream) == nl(["{\"a\":1}", "[2]"]))
        #expect(try frames(of: stream, chunkSize: 1) == nl(["{\"a\":1}", "[2]"]))
        #expect(try frames(of: utf8("\n\n\n")) == [])
    }

    @Test func emptyChunkIsANoOp() throws {
        var f = Framer(maxMessage: 16)
        #expect(try f.feedBytes([]) == [])
        #expect(f.mode == .undetermined)
        _ = try f.feedBytes(utf8("{"))
        #expect(try f.feedBytes([]) == [])
        #expect(try f.feedBytes(utf8("}\n")) == nl(["{}"]))
    }

    @Test func manyFramesInOneChunk() throws {
        let bodies = (0..<1000).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"m"}"# }
        let stream = utf8(bodies.map { $0 + "\n" }.joined())
        #expect(try frames(of: stream) == nl(bodies))
        #expect(try frames(of: stream, chunkSize: 4096) == nl(bodies))
        #expect(try frames(of: stream, chunkSize: 7) == nl(bodies))
    }

    @Test func frameExactlyAtLimitIsAccepted() throws {
        let body = String(repeating: "x", count: 64)
        #expect(try frames(of: utf8(body + "\n"), maxMessage: 64) == nl([body]))
        #expect(try frames(of: utf8(body + "\n"), chunkSize: 1, maxMessage: 64) == nl([body]))
        #expect(try frames(of: utf8(body + "\n" + body + "\n"), chunkSize: 10, maxMessage: 64) == nl([body, body]))
    }

    @Test func frameExactlyAtLimitWithCRLFIsAccepted() throws {
        // The CR is framing, not body: a 64-byte body ended by CRLF is within a 64-byte limit.
        let body = String(repeating: "x", count: 64)
        let stream = utf8(body + "\r\n")
        let variants: [(String, [Int])] = [
            ("all at once", []),
            ("CR and LF in separate reads", [65]),
            ("body, then CRLF", [64]),
            ("one byte at a time", Array(1..<stream.count)),
        ]
        for (label, cuts) in variants {
            do {
                let got = try frames(of: stream, cuts: cuts, maxMessage: 64)
                #expect(got == nl([body]), "\(label)")
            } catch {
                Issue.record("\(label): 64-byte body + CRLF rejected with \(error) (limit 64)")
            }
        }
    }

    @Test func frameOverLimitIsRejected() {
        let body = String(repeating: "x", count: 65)
        #expect(framingError(utf8(body + "\n"), maxMessage: 64) == .tooLarge(limit: 64))
        #expect(framingError(utf8(body + "\r\n"), maxMessage: 64) == .tooLarge(limit: 64))
        #expect(framingError(utf8("{}\n" + body + "\n"), chunkSize: 1, maxMessage: 64) == .tooLarge(limit: 64))
    }

    @Test func frameOverLimitIsRejectedBeforeItsNewline() throws {
        // No newline yet: still rejected as soon as more than the limit is buffered.
        #expect(framingError(utf8(String(repeating: "x", count: 65)), maxMessage: 64) == .tooLarge(limit: 64))
        #expect(framingError(utf8(String(repeating: "x", count: 10_000)), maxMessage: 64) == .tooLarge(limit: 64))
        var f = Framer(maxMessage: 64)
        _ = try f.feedBytes(utf8(String(repeating: "x", count: 64)))
        #expect(f.bufferedByteCount == 64)
        #expect(throws: FramingError.tooLarge(limit: 64)) { _ = try f.feedBytes(utf8("x")) }
        // One byte at a time, it is caught at byte 65, not later.
        var g = Framer(maxMessage: 64)
        var fed = 0
        var caught: FramingError? = nil
        for b in utf8(String(repeating: "y", count: 1000)) {
            do {
                _ = try g.feedBytes([b])
                fed += 1
            } catch {
                caught = error
                break
            }
        }
        #expect(caught == .tooLarge(limit: 64))
        #expect(fed == 64)
    }

    @Test func aLongLineInSmallReadsIsSearchedOnce() throws {
        // One 4 MiB message in 256-byte reads, as a slow or hostile client sends it: each byte is
        // searched for the newline once. (Searching the whole pending line on every read was
        // quadratic: about 34 GB of memchr here, a second of broker CPU per message.)
        let body = utf8("{\"pad\":\"" + String(repeating: "x", count: 4 << 20) + "\"}")
        for ending in ["\n", "\r\n"] {
            let stream = body + utf8(ending) + utf8("[1]\n")
            var f = Framer(maxMessage: 5 << 20)
            var got: [Frame] = []
            var i = 0
            while i < stream.count {
                let end = min(i + 256, stream.count)
                got += try f.feedBytes(Array(stream[i..<end]))
                if end < body.count { #expect(f.bufferedByteCount == end) }
                i = end
            }
            #expect(got == [Frame(body: body, mode: .newline)] + nl(["[1]"]))
            #expect(f.bufferedByteCount == 0)
            #expect(f.newlineSearchBytes <= stream.count, "searched \(f.newlineSearchBytes) bytes of \(stream.count)")
        }
    }

    @Test func searchedPrefixFollowsTheBuffer() throws {
        // What was searched is forgotten or moved with the bytes: a frame consumed with a partial
        // line after it, a line completed by a lone LF after its CR, the mode decided late.
        var f = Framer(maxMessage: 1024)
        #expect(try f.feedBytes(utf8("{\"a\":")) == [])
        #expect(try f.feedBytes(utf8("1}\n[2")) == nl(["{\"a\":1}"]))
        #expect(f.bufferedByteCount == 2)
        #expect(try f.feedBytes(utf8(",3")) == [])
        #expect(try f.feedBytes(utf8("]\r")) == [])
        #expect(try f.feedBytes(utf8("\n")) == nl(["[2,3]"]))
        #expect(try f.feedBytes(utf8("4")) == [])
        #expect(try f.feedBytes(utf8("\n5\n6")) == nl(["4", "5"]))
        #expect(try f.feedBytes(utf8("\n")) == nl(["6"]))
        #expect(f.bufferedByteCount == 0)
        #expect(f.newlineSearchBytes <= 21)  // the bytes fed

        var g = Framer(maxMessage: 1024)
        _ = try g.feedBytes(utf8("Content-L"))
        #expect(g.mode == .undetermined)
        _ = try g.feedBytes(utf8("?"))
        #expect(g.mode == .newline)
        #expect(try g.feedBytes(utf8("yz")) == [])
        #expect(try g.feedBytes(utf8("\n{}\n")) == nl(["Content-L?yz", "{}"]))
        #expect(g.newlineSearchBytes <= 16)
    }

    @Test func overLimitAfterEarlierFramesInSameChunk() {
        let stream = utf8("{}\n[]\n" + String(repeating: "z", count: 100))
        #expect(framingError(stream, maxMessage: 64) == .tooLarge(limit: 64))
    }

    @Test func appendFrameNewline() {
        var out: [UInt8] = utf8("x\n")
        Framer.appendFrame(utf8(#"{"a":"é"}"#), mode: .newline, to: &out)
        #expect(out == utf8("x\n{\"a\":\"é\"}\n"))
        var out2: [UInt8] = []
        Framer.appendFrame(utf8("[]"), mode: .undetermined, to: &out2)
        #expect(out2 == utf8("[]\n"))
    }
}

@Suite("Framer: Content-Length mode")
struct FramerContentLengthTests {
    /// Two Content-Length headers that differ are a header error (the body's end would be
    /// ambiguous; the last one won); the same value twice is fine.
    @Test func conflictingContentLengthsAreAnError() throws {
        var f = Framer(maxMessage: 1024)
        #expect(throws: FramingError.badHeader("two Content-Length headers that differ")) {
            _ = try f.feedBytes(utf8("Content-Length: 2\r\nContent-Length: 7\r\n\r\n{}"))
        }
        var g = Framer(maxMessage: 1024)
        #expect(try g.feedBytes(utf8("Content-Length: 2\r\ncontent-length: 2\r\n\r\n{}")) == cl(["{}"]))
    }

    @Test func readsOneFrame() throws {
        var f = Framer(maxMessage: 1024)
        let got = try f.feedBytes(lspFrame(#"{"a":1}"#))
        #expect(got == cl([#"{"a":1}"#]))
        #expect(f.mode == .contentLength)
        #expect(f.bufferedByteCount == 0)
    }

    @Test(arguments: ["Content-Length", "content-length", "CONTENT-LENGTH", "cOnTeNt-LeNgTh"])
    func detectsHeaderCaseInsensitively(_ name: String) throws {
        let stream = lspFrame("[1]", headerName: name) + lspFrame("[2]", headerName: name)
        #expect(try frames(of: stream) == cl(["[1]", "[2]"]))
        #expect(try frames(of: stream, chunkSize: 1) == cl(["[1]", "[2]"]))
    }

    @Test func headerWithoutSpaceOrWithTabs() throws {
        #expect(try frames(of: utf8("Content-Length:2\r\n\r\n{}")) == cl(["{}"]))
        #expect(try frames(of: utf8("Content-Length:\t 2 \t\r\n\r\n{}")) == cl(["{}"]))
    }

    @Test func extraHeadersAreIgnored() throws {
        let first = lspFrame("[1]", extraHeaders: ["Content-Type: application/vscode-jsonrpc; charset=utf-8"])
        // Later frames may put other headers first.
        let second = utf8("Content-Type: application/json\r\nX-Thing: a:b\r\nContent-Length: 3\r\n\r\n[2]")
        let stream = first + second
        #expect(try frames(of: stream) == cl(["[1]", "[2]"]))
        #expect(try frames(of: stream, chunkSize: 1) == cl(["[1]", "[2]"]))
    }

    @Test func aFirstFrameMayPutContentTypeFirst() throws {
        let stream = utf8("Content-Type: application/json\r\nContent-Length: 3\r\n\r\n[1]") + lspFrame("[2]")
        #expect(try frames(of: stream) == cl(["[1]", "[2]"]))
        #expect(try frames(of: stream, chunkSize: 1) == cl(["[1]", "[2]"]))
        var f = Framer(maxMessage: 1024)
        _ = try f.feedBytes(utf8("content-type: x\r\n"))
        #expect(f.mode == .contentLength)
        // Anything else is newline framing (JSON never starts with a letter 'c').
        var g = Framer(maxMessage: 1024)
        _ = try g.feedBytes(utf8("conte"))
        #expect(g.mode == .undetermined)
        _ = try g.feedBytes(utf8("xt\n"))
        #expect(g.mode == .newline)
    }

    @Test func bodyMayContainNewlinesAndCRLF() throws {
        let body = "{\r\n\"a\": \"x\\ny\"\n}\n"
        #expect(try frames(of: lspFrame(body) + lspFrame("\n")) == cl([body, "\n"]))
    }

    @Test func unicodeBodyIsCountedInBytes() throws {
        let body = #"{"t":"é中😀"}"#
        #expect(body.utf8.count != body.count)
        let stream = lspFrame(body) + lspFrame(body)
        #expect(try frames(of: stream) == cl([body, body]))
        #expect(try frames(of: stream, chunkSize: 1) == cl([body, body]))
    }

    @Test func manyFramesInOneChunk() throws {
        let bodies = (0..<500).map { #"{"id":\#($0)}"# }
        let stream = bodies.flatMap { lspFrame($0) }
        #expect(try frames(of: stream) == cl(bodies))
        #expect(try frames(of: stream, chunkSize: 13) == cl(bodies))
    }

    @Test func zeroLengthBody() throws {
        let stream = utf8("Content-Length: 0\r\n\r\n") + lspFrame("{}")
        #expect(try frames(of: stream) == cl(["", "{}"]))
    }

    @Test func partialBodyIsKept() throws {
        var f = Framer(maxMessage: 1024)
        let frame = lspFrame(#"{"hello":"world"}"#)
        #expect(try f.feedBytes(Array(frame[0..<30])) == [])
        #expect(try f.feedBytes(Array(frame[30...])) == cl([#"{"hello":"world"}"#]))
        #expect(f.bufferedByteCount == 0)
    }

    /// A byte order mark before a later header section is skipped, as before the first (the
    /// robustness audit: it killed the connection), whatever the reads' boundaries.
    @Test func aByteOrderMarkBeforeALaterHeaderSectionIsSkipped() throws {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        let stream = bom + lspFrame("[1]") + bom + lspFrame("[2]") + bom + lspFrame("[3]")
        #expect(try frames(of: stream) == cl(["[1]", "[2]", "[3]"]))
        #expect(try frames(of: stream, chunkSize: 1) == cl(["[1]", "[2]", "[3]"]))
        #expect(try frames(of: stream, chunkSize: 2) == cl(["[1]", "[2]", "[3]"]))
        // (only a whole mark: a lone 0xEF is an error, not a header)
        var f = Framer(maxMessage: 1024)
        _ = try f.feedBytes(lspFrame("[1]"))
        #expect(throws: FramingError.self) { _ = try f.feedBytes([0xEF, 0x41] + lspFrame("[2]")) }
    }

    /// A header name must be a token: a JSON text sent where a header section is due (it has a
    /// ':') is an error naming it, not a header ignored while the client waits for its answer.
    @Test func aHeaderNameThatIsNoTokenIsAnError() throws {
        var f = Framer(maxMessage: 1024)
        _ = try f.feedBytes(lspFrame("[1]"))
        #expect(
            throws: FramingError.badHeader(#"a header name must be a token (RFC 9110), got a line starting '{'"#)
        ) { _ = try f.feedBytes(utf8(#"{"jsonrpc":"2.0","id":2,"method":"rpc.nope"}"# + "\n") + lspFrame("[3]")) }
        for line in [": x", "Content Length: 3", "Content-Length : 3", "X\u{1}: y"] {
            var g = Framer(maxMessage: 1024)
            _ = try g.feedBytes(lspFrame("[1]"))
            #expect(throws: FramingError.self, "\(line)") { _ = try g.feedBytes(utf8(line + "\r\nContent-Length: 3\r\n\r\n[3]")) }
        }
        // An unfinished line that can be no header is an error at once (its newline may never come).
        var h = Framer(maxMessage: 1024)
        _ = try h.feedBytes(lspFrame("[1]"))
        #expect(throws: FramingError.self) { _ = try h.feedBytes(utf8(#"{"jsonrpc":"2.0","id":2"#)) }
        var k = Framer(maxMessage: 1024)
        _ = try k.feedBytes(lspFrame("[1]"))
        #expect(try k.feedBytes(utf8("Content-Len")) == [])
        #expect(try k.feedBytes(utf8("gth: 3\r")) == [])
        #expect(try k.feedBytes(utf8("\n\r")) == [])
        #expect(try k.feedBytes(utf8("\n[2]")) == cl(["[2]"]))
        // Every token character is fine.
        #expect(try frames(of: utf8("Content-Length: 3\r\nX-a.b_c~d|e^f`g!h#i$j%k&l'm*n+o: v\r\n\r\n[1]")) == cl(["[1]"]))
    }

    /// Empty lines between header frames (a client ending each body with CRLF) are skipped, as
    /// newline framing skips blank lines; an empty line after a header is still the section's end.
    @Test func emptyLinesBetweenHeaderFramesAreSkipped() throws {
        for chunkSize in [0, 1, 3] {
            let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
            let stream = lspFrame("{}") + utf8("\r\n") + lspFrame("[1]") + utf8("\n\r\n\n") + lspFrame("[2]") + utf8("\r\n") + bom + lspFrame("[3]")
            #expect(try frames(of: stream, chunkSize: chunkSize) == cl(["{}", "[1]", "[2]", "[3]"]))
        }
        var f = Framer(maxMessage: 1024)
        _ = try f.feedBytes(lspFrame("{}"))
        #expect(try f.feedBytes(utf8("\r\n\r\n")) == [], "no frame yet, no error")
        #expect(try f.feedBytes([UInt8](repeating: 0x0A, count: 20_000)) == [], "consumed as they come: no header section grows")
        #expect(throws: FramingError.self) { _ = try f.feedBytes(utf8("Content-Type: x\r\n\r\n{}")) }
    }

    @Test func missingContentLengthIsBadHeader() throws {
        var f = Framer(maxMessage: 1024)
        _ = try f.feedBytes(lspFrame("{}"))
        #expect(f.mode == .contentLength)
        #expect(throws: FramingError.self) { _ = try f.feedBytes(utf8("Content-Type: x\r\n\r\n{}")) }
        var g = Framer(maxMessage: 1024)
        _ = try g.feedBytes(lspFrame("{}"))
        do {
            _ = try g.feedBytes(utf8("Content-Type: x\r\n\r\n{}"))
            Issue.record("expected badHeader")
        } catch {
            guard case .badHeader = error else {
                Issue.record("expected badHeader, got \(error)")
                return
            }
        }
    }

    @Test(arguments: [
        "Content-Length: abc\r\n\r\n{}",
        "Content-Length: 12x\r\n\r\n{}",
        "Content-Length: -2\r\n\r\n{}",
        "Content-Length: 0x10\r\n\r\n{}",
        "Content-Length: 1.5\r\n\r\n{}",
        "Content-Length: \r\n\r\n{}",
        "Content-Length:\r\n\r\n{}",
        "Content-Length: 2\r\nno colon here\r\n\r\n{}",
    ])
    func malformedHeaderIsBadHeader(_ stream: String) {
        for chunkSize in [0, 1] {
            let error = framingError(utf8(stream), chunkSize: chunkSize, maxMessage: 1024)
            guard case .badHeader(let why)? = error else {
                Issue.record("\(stream.debugDescription) chunk \(chunkSize): expected badHeader, got \(String(describing: error))")
                continue
            }
            #expect(!why.isEmpty)
        }
    }

    /// Header lines may end with a bare LF too (an empty line ends the section either way).
    @Test func bareLFHeaderLinesAreAccepted() throws {
        for stream in [
            "Content-Length: 2\n\n{}Content-Length: 3\r\n\r\n[1]",
            "Content-Length: 2\r\nContent-Type: x\n\r\n{}Content-Type: y\nContent-Length: 3\n\n[1]",
        ] {
            for chunkSize in [0, 1, 5] {
                #expect(try frames(of: utf8(stream), chunkSize: chunkSize) == cl(["{}", "[1]"]), "\(stream.debugDescription) \(chunkSize)")
            }
        }
    }

    @Test func headerSectionTooLongIsRejected() {
        let stream = utf8("Content-Length: 2\r\nX-Pad: " + String(repeating: "p", count: 9000))
        let error = framingError(stream, maxMessage: 1 << 20)
        #expect(error != nil)
        let error1 = framingError(stream, chunkSize: 512, maxMessage: 1 << 20)
        #expect(error1 != nil)
    }

    @Test func bodyExactlyAtLimitIsAccepted() throws {
        let body = String(repeating: "b", count: 100)
        #expect(try frames(of: lspFrame(body), maxMessage: 100) == cl([body]))
        #expect(try frames(of: lspFrame(body) + lspFrame(body), chunkSize: 1, maxMessage: 100) == cl([body, body]))
    }

    @Test func declaredLengthOverLimitFailsBeforeTheBody() throws {
        // Only the header is sent: the framer must refuse now, not wait for (and buffer) 1 MB.
        var f = Framer(maxMessage: 100)
        #expect(throws: FramingError.tooLarge(limit: 100)) {
            _ = try f.feedBytes(utf8("Content-Length: 101\r\n\r\n"))
        }
        var g = Framer(maxMessage: 100)
        #expect(throws: FramingError.tooLarge(limit: 100)) {
            _ = try g.feedBytes(utf8("Content-Length: 1048576\r\n\r\n") + [UInt8](repeating: 0x20, count: 10))
        }
        // Byte by byte: it fails on the header's final LF.
        let header = utf8("Content-Length: 5000\r\n\r\n")
        var h = Framer(maxMessage: 100)
        for b in header.dropLast() { _ = try h.feedBytes([b]) }
        #expect(throws: FramingError.tooLarge(limit: 100)) { _ = try h.feedBytes([header.last!]) }
    }

    @Test func absurdContentLengthIsTooLarge() {
        let stream = utf8("Content-Length: 99999999999999999999999999\r\n\r\n")
        #expect(framingError(stream, maxMessage: 100) == .tooLarge(limit: 100))
    }

    @Test func modeIsReportedPerFrameAndSticks() throws {
        var f = Framer(maxMessage: 1024)
        var modes: [FramingMode] = []
        try lspFrame("[1]").withUnsafeBytes { buf in
            try f.feed(buf) { _, mode in modes.append(mode) }
        }
        #expect(modes == [.contentLength])
        #expect(f.mode == .contentLength)
        var g = Framer(maxMessage: 1024)
        _ = try g.feedBytes(utf8("[1]\n"))
        // Once newline mode, a later "Content-Length:" line is just a (bad) JSON line.
        #expect(try g.feedBytes(utf8("Content-Length: 3\n")) == nl(["Content-Length: 3"]))
        #expect(g.mode == .newline)
    }

    @Test func modeUndecidedUntilPrefixCompletes() throws {
        var f = Framer(maxMessage: 1024)
        _ = try f.feedBytes(utf8("Content-Le"))
        #expect(f.mode == .undetermined)
        _ = try f.feedBytes(utf8("ngth: 2\r\n"))
        #expect(f.mode == .contentLength)
        #expect(try f.feedBytes(utf8("\r\n{}")) == cl(["{}"]))

        // A first line that only starts like a header falls back to newline framing.
        var g = Framer(maxMessage: 1024)
        _ = try g.feedBytes(utf8("Content-Lx"))
        #expect(g.mode == .undetermined)
        #expect(try g.feedBytes(utf8("\n")) == nl(["Content-Lx"]))
        #expect(g.mode == .newline)
        var h = Framer(maxMessage: 1024)
        #expect(try h.feedBytes(utf8("content-: 2\n")) == nl(["content-: 2"]))
        // A header name is looked at for at most 64 bytes; longer is newline framing.
        var k = Framer(maxMessage: 1024)
        let long = "Content-" + String(repeating: "x", count: Framer.maxHeaderNameBytes)
        _ = try k.feedBytes(utf8(long))
        #expect(k.mode == .newline)
        var m = Framer(maxMessage: 1024)
        let fits = "Content-" + String(repeating: "x", count: Framer.maxHeaderNameBytes - 9) + ": 1\r\nContent-Length: 2\r\n\r\n{}"
        #expect(try m.feedBytes(utf8(fits)) == cl(["{}"]))
    }

    @Test func appendFrameContentLength() throws {
        var out: [UInt8] = []
        let body = utf8(#"{"t":"😀"}"#)
        Framer.appendFrame(body, mode: .contentLength, to: &out)
        #expect(out == utf8("Content-Length: \(body.count)\r\n\r\n") + body)
        #expect(text(out).hasPrefix("Content-Length: 12\r\n\r\n"))
        // What we write, we can read.
        Framer.appendFrame(utf8("[]"), mode: .contentLength, to: &out)
        #expect(try frames(of: out) == [Frame(body: body, mode: .contentLength), Frame(body: utf8("[]"), mode: .contentLength)])
    }
}

@Suite("Framer: chunking independence")
struct FramerChunkingTests {
    static let newlineStream: [UInt8] = utf8(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{\"name\":\"é中😀\"}}\n"
            + "\n"
            + "[{\"a\":\"\\n\"},2]\r\n"
            + "{\"emoji\":\"👩‍👩‍👧\"}\n"
            + "3\n")
    static let newlineExpected = nl([
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{\"name\":\"é中😀\"}}",
        "[{\"a\":\"\\n\"},2]",
        "{\"emoji\":\"👩‍👩‍👧\"}",
        "3",
    ])
    static let lspBodies = [
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{\"name\":\"é中😀\"}}",
        "[1,\n2]",
        "{\"emoji\":\"👩‍👩‍👧\"}",
        "",
        "\r\n\r\n",
    ]
    static var lspStream: [UInt8] {
        lspBodies.enumerated().flatMap { i, b in
            i == 2 ? lspFrame(b, headerName: "content-length", extraHeaders: ["Content-Type: a"]) : lspFrame(b)
        }
    }

    @Test(arguments: [0, 1, 2, 3, 5, 8, 64])
    func newlineSameFramesForAnyChunkSize(_ chunkSize: Int) throws {
        #expect(try frames(of: Self.newlineStream, chunkSize: chunkSize) == Self.newlineExpected)
    }

    @Test(arguments: [0, 1, 2, 3, 5, 8, 64])
    func contentLengthSameFramesForAnyChunkSize(_ chunkSize: Int) throws {
        #expect(try frames(of: Self.lspStream, chunkSize: chunkSize) == cl(Self.lspBodies))
    }

    @Test func randomSplitsGiveTheSameFrames() throws {
        var rng = SeededRNG(seed: 2024)
        for stream in [Self.newlineStream, Self.lspStream] {
            let reference = try frames(of: stream)
            #expect(!reference.isEmpty)
            for _ in 0..<200 {
                let cutCount = Int.random(in: 0...10, using: &rng)
                let cuts = (0..<cutCount).map { _ in Int.random(in: 0...stream.count, using: &rng) }
                #expect(try frames(of: stream, cuts: cuts) == reference, "cuts \(cuts.sorted())")
            }
        }
    }

    @Test func everySingleSplitPointGivesTheSameFrames() throws {
        for stream in [Self.newlineStream, Self.lspStream] {
            let reference = try frames(of: stream)
            for cut in 0...stream.count {
                #expect(try frames(of: stream, cuts: [cut]) == reference, "cut \(cut)")
            }
        }
    }
}

@Suite("Framer: stopping at a frame and resuming")
struct FramerStopTests {
    /// Feeds `chunks`, stopping after every frame whose body is in `stopAfter`; resumes after
    /// each stop until the frames run out. Returns the frames in order and the number of stops.
    private func run(_ f: inout Framer, _ chunks: [[UInt8]], stopAfter: Set<String>) throws -> ([String], Int) {
        var got: [String] = []
        var stops = 0
        let handler: (UnsafeRawBufferPointer, FramingMode) -> Bool = { frame, _ in
            let s = String(decoding: frame, as: UTF8.self)
            got.append(s)
            return !stopAfter.contains(s)
        }
        for c in chunks {
            var going = try c.withUnsafeBytes { try f.feedUntilStopped($0, onFrame: handler) }
            while !going {
                stops += 1
                going = try f.resume(onFrame: handler)
            }
        }
        return (got, stops)
    }

    @Test func newlineFramesAfterAStopWaitForResume() throws {
        var f = Framer(maxMessage: 1024)
        var got: [String] = []
        let stopped = try utf8("[1]\n[2]\n[3]\n[4").withUnsafeBytes { buf in
            try f.feedUntilStopped(buf) { frame, _ in
                got.append(String(decoding: frame, as: UTF8.self))
                return got.count != 2
            }
        }
        #expect(!stopped)
        #expect(got == ["[1]", "[2]"])
        #expect(f.bufferedByteCount == utf8("[3]\n[4").count, "the rest stays buffered, unread")
        let done = try f.resume { frame, _ in
            got.append(String(decoding: frame, as: UTF8.self))
            return true
        }
        #expect(done)
        #expect(got == ["[1]", "[2]", "[3]"])
        #expect(try f.feedBytes(utf8("]\n")) == nl(["[4]"]), "the partial frame completes as usual")
    }

    @Test func everyChunkingAndStopGivesTheSameFrames() throws {
        let stream = utf8("[1]\n\n[2]\r\n[3]\n[4]\n[5]\n")
        for size in 1...stream.count {
            var f = Framer(maxMessage: 1024)
            let chunks = stride(from: 0, to: stream.count, by: size).map { Array(stream[$0..<min($0 + size, stream.count)]) }
            let (got, stops) = try run(&f, chunks, stopAfter: ["[2]", "[3]", "[5]"])
            #expect(got == ["[1]", "[2]", "[3]", "[4]", "[5]"], "chunks of \(size)")
            #expect(stops == 3)
            #expect(f.bufferedByteCount == 0)
        }
    }

    @Test func contentLengthFramesStopAndResumeToo() throws {
        var f = Framer(maxMessage: 1024)
        let stream = utf8("Content-Length: 3\r\n\r\n[1]Content-Length: 3\r\n\r\n[2]Content-Length: 3\r\n\r\n[3]")
        let (got, stops) = try run(&f, [stream], stopAfter: ["[1]"])
        #expect(got == ["[1]", "[2]", "[3]"])
        #expect(stops == 1)
        #expect(f.mode == .contentLength)
    }

    @Test func stoppedFramesDoNotCountAsAnOversizedMessage() throws {
        // Complete frames kept after a stop may add up to more than one message's limit.
        var f = Framer(maxMessage: 8)
        let stream = utf8("[1]\n[22222]\n[33333]\n[44444]\n")
        var got: [String] = []
        let stopped = try stream.withUnsafeBytes { buf in
            try f.feedUntilStopped(buf) { frame, _ in
                got.append(String(decoding: frame, as: UTF8.self))
                return false
            }
        }
        #expect(!stopped)
        #expect(f.bufferedByteCount > 8)
        while try !f.resume(onFrame: { frame, _ in
            got.append(String(decoding: frame, as: UTF8.self))
            return false
        }) {}
        #expect(got == ["[1]", "[22222]", "[33333]", "[44444]"])
    }
}
