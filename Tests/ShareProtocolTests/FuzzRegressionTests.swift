// The properties the fuzz targets in fuzz/ check (fuzz/README.md), pinned on the edge cases their corpora
// exercise: chunking independence of the framer at every cut, JSON write/parse round trips, and JSON-RPC
// re-encoding. Minimized inputs of future fuzzer findings in ShareProtocol go here.

import Testing

@testable import ShareProtocol

/// Frames and error of feeding `stream` in the given way (nil: all at once).
private func outcome(_ stream: [UInt8], maxMessage: Int, cuts: [Int]?) -> ([Frame], FramingError?) {
    var framer = Framer(maxMessage: maxMessage)
    var frames: [Frame] = []
    var start = 0
    for cut in (cuts ?? []) + [stream.count] where cut >= start {
        do {
            // (frames handed over before an error in the same chunk count too)
            try Array(stream[start..<cut]).withUnsafeBytes { buf in
                Result { () throws(FramingError) -> Void in
                    try framer.feed(buf) { frame, mode in frames.append(Frame(body: Array(frame), mode: mode)) }
                }
            }.get()
        } catch {
            expectSearchedOnce(framer, stream)
            return (frames, error)
        }
        start = cut
    }
    expectSearchedOnce(framer, stream)
    return (frames, nil)
}

@Suite("Fuzz regressions: framer chunking")
struct FuzzFramerRegressionTests {
    static let cases: [(name: String, stream: [UInt8], maxMessage: Int)] = [
        ("line of max+1 bytes ending in CR", utf8("0123456789\r\n{}\n"), 10),
        ("line of max+1 bytes not ending in CR", utf8("01234567890\n{}\n"), 10),
        ("CR LF split from its line", utf8("{\"a\":1}\r") + utf8("\n \r\n\t\n[2]\n"), 64),
        (
            "Content-Length with extra header, lowercase",
            lspFrame("{}", headerName: "content-length", extraHeaders: ["X-Y: z"]) + lspFrame("[1,2]"), 64
        ),
        ("Content-Length body exactly the limit", lspFrame("12345678") + lspFrame("1"), 8),
        ("Content-Length body over the limit", lspFrame("123456789"), 8),
        ("Content-Length not a number", utf8("Content-Length: 1x\r\n\r\n{}"), 64),
        ("header line without colon", utf8("Content-Length: 2\r\nbogus\r\n\r\n{}"), 64),
        (
            "header section too long", utf8("Content-Length: 2\r\n") + Array(repeating: UInt8(ascii: "a"), count: 8200),
            64
        ),
        ("header prefix only", utf8("Content-Len"), 64),
        // (the fuzzer, on the unfinished-line check: the error quoted what had arrived of the line)
        ("JSON text where a header section is due", lspFrame("{}") + utf8(#"{"a":"#), 64),
        ("CR inside a header name", lspFrame("{}") + utf8("X\rY: z\r\nContent-Length: 2\r\n\r\n{}"), 64),
        ("empty header name", lspFrame("{}") + utf8(": z\r\nContent-Length: 2\r\n\r\n{}"), 64),
    ]

    @Test(arguments: 0..<cases.count)
    func everyCutGivesTheSameFramesAndError(_ index: Int) {
        let (name, stream, limit) = Self.cases[index]
        let whole = outcome(stream, maxMessage: limit, cuts: nil)
        // Every cut of short streams; for the long one, a stride plus the cuts around the header limit.
        let short = stream.count <= 512
        let cuts =
            short ? Array(0...stream.count) : Array(stride(from: 0, through: stream.count, by: 97)) + Array(8185...8200)
        for cut in cuts {
            let split = outcome(stream, maxMessage: limit, cuts: [cut])
            #expect(split.0 == whole.0 && split.1 == whole.1, "\(name): cut at \(cut)")
        }
        if short {
            let bytewise = outcome(stream, maxMessage: limit, cuts: Array(0...stream.count))
            #expect(bytewise.0 == whole.0 && bytewise.1 == whole.1, "\(name): one byte at a time")
        }
        for frame in whole.0 { #expect(frame.body.count <= limit, "\(name)") }
    }
}

@Suite("Fuzz regressions: JSON and JSON-RPC round trips")
struct FuzzJSONRegressionTests {
    @Test(arguments: [
        "-0", "1E+2", "0.5e-3", "123456789012345678901234567890", "\"\\u0000\\u001f\\u007f\"",
        "\"\\ud83d\\ude00\\u2028\\u2029\"", "\"é\u{1F600}\"", "{\"a\":1,\"a\":[{},{\"a\":null}]}",
        "{\"e\\u0301\":1,\"\\u00e9\":2}", String(repeating: "[", count: 256) + String(repeating: "]", count: 256),
        " \t\r\n[true,false,null] \n",
    ])
    func compactAndPrettyTextRoundTrip(_ text: String) throws {
        let value = try JSONParser.parse(text)
        let compact = value.bytes
        #expect(!compact.contains(0x0A))
        let again = try JSONParser.parse(compact)
        #expect(again == value)
        #expect(again.bytes == compact)
        #expect(try JSONParser.parse(value.prettyText()) == value)
    }

    @Test(arguments: [
        #"{"jsonrpc":"2.0","id":1.0e3,"method":"m","params":[1,{"x":null}]}"#,
        #"{"jsonrpc":"2.0","id":null,"method":"","params":{}}"#,
        #"{"jsonrpc":"2.0","id":"\u0000\n","method":"a\"b"}"#,
        #"{"method":"m","jsonrpc":"2.0"}"#,
        #"[{"jsonrpc":"2.0","id":-0,"method":"m"},1,{"jsonrpc":"2.0","id":[],"method":"m"}]"#,
    ])
    func requestsReEncodeToTheSameRequest(_ frame: String) {
        let members: [Result<RPCRequest, RPCErrorReply>]
        switch decodeFrame(frame) {
        case .single(let m): members = [m]
        case .batch(let ms): members = ms
        }
        for member in members {
            guard case .success(let request) = member else { continue }
            var out: [UInt8] = []
            RPCCodec.writeRequest(id: request.id, method: request.method, params: request.params, to: &out)
            guard case .single(.success(let again)) = decodeFrame(text(out)) else {
                Issue.record("re-encoded request does not decode: \(text(out))")
                continue
            }
            #expect(again.id == request.id && again.method == request.method && again.params == request.params)
        }
    }
}
