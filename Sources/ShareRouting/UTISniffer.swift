// Content sniffing: the type of a file from its first bytes (magic numbers, ISO-BMFF brands, ZIP members,
// then text heuristics for JSON, HTML, XML, vCard, iCalendar, scripts). Pure Swift over [UInt8]; the caller
// passes as many leading bytes as it has (4 KiB is plenty).

import ShareProtocol

/// Sniffs a type identifier from the leading bytes of a file, or nil when nothing is recognised.
///
/// Binary signatures come first (PDF `%PDF-`, PNG, JPEG, GIF, WebP/WAVE/AVI in RIFF, HEIC/HEIF/AVIF and
/// MP4/QuickTime/M4A/3GP by their `ftyp` brand, ZIP `PK\u{3}\u{4}` with Office/EPUB/OpenDocument members,
/// gzip, bzip2, xz, 7-Zip, RAR, tar, TIFF, BMP, Photoshop, MP3, FLAC, Ogg, AIFF, Matroska/WebM, ELF/Mach-O/PE,
/// binary plists); then text: it must be UTF-8 (a cut-off last character is fine) without NULs, and is
/// recognised as vCard, iCalendar, HTML, SVG, XML/plist, RTF, PostScript, JSON, a script by its `#!` line,
/// or else plain text.
public func sniffType(of bytes: [UInt8]) -> String? {
    UTISniffer(bytes).sniff()
}

struct UTISniffer {
    let b: [UInt8]

    init(_ bytes: [UInt8]) { b = bytes }

    func at(_ offset: Int, _ ascii: String) -> Bool {
        let pattern = Array(ascii.utf8)
        guard offset >= 0, b.count >= offset + pattern.count else { return false }
        for i in 0..<pattern.count where b[offset + i] != pattern[i] { return false }
        return true
    }

    func at(_ offset: Int, bytes pattern: [UInt8]) -> Bool {
        guard offset >= 0, b.count >= offset + pattern.count else { return false }
        for i in 0..<pattern.count where b[offset + i] != pattern[i] { return false }
        return true
    }

    func contains(_ ascii: String, within limit: Int) -> Bool {
        let p = Array(ascii.utf8)
        let end = min(b.count, limit)
        guard !p.isEmpty, end >= p.count else { return false }
        var i = 0
        while i + p.count <= end {
            if b[i] == p[0] {
                var ok = true
                for j in 1..<p.count where b[i + j] != p[j] {
                    ok = false
                    break
                }
                if ok { return true }
            }
            i += 1
        }
        return false
    }

    func sniff() -> String? {
        guard !b.isEmpty else { return nil }
        if let t = binary() { return t }
        return textual()
    }

    // MARK: binary signatures

    func binary() -> String? {
        if at(0, "%PDF-") { return "com.adobe.pdf" }
        if at(0, bytes: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "public.png" }
        if at(0, bytes: [0xFF, 0xD8, 0xFF]) { return "public.jpeg" }
        if at(0, "GIF87a") || at(0, "GIF89a") { return "com.compuserve.gif" }
        if at(0, "RIFF"), b.count >= 12 {
            if at(8, "WEBP") { return "org.webmproject.webp" }
            if at(8, "WAVE") { return "com.microsoft.waveform-audio" }
            if at(8, "AVI ") { return "public.avi" }
        }
        if at(4, "ftyp") { return isoBrand() }
        if at(0, bytes: [0x50, 0x4B, 0x03, 0x04]) { return zipMember() }
        if at(0, bytes: [0x50, 0x4B, 0x05, 0x06]) { return "public.zip-archive" }  // empty archive
        if at(0, bytes: [0x1F, 0x8B]) { return "org.gnu.gnu-zip-archive" }
        if at(0, "BZh") { return "public.bzip2-archive" }
        if at(0, bytes: [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00]) { return "org.tukaani.xz-archive" }
        if at(0, bytes: [0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C]) { return "org.7-zip.7-zip-archive" }
        if at(0, bytes: [0x52, 0x61, 0x72, 0x21, 0x1A, 0x07]) { return "com.rarlab.rar-archive" }
        if at(257, "ustar") { return "public.tar-archive" }
        if at(0, bytes: [0x49, 0x49, 0x2A, 0x00]) || at(0, bytes: [0x4D, 0x4D, 0x00, 0x2A]) { return "public.tiff" }
        if at(0, "BM"), b.count >= 14, b[6] == 0, b[7] == 0, b[8] == 0, b[9] == 0 { return "com.microsoft.bmp" }
        if at(0, "8BPS") { return "com.adobe.photoshop-image" }
        if at(0, bytes: [0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20]) { return "public.jpeg-2000" }
        if at(0, "icns") { return "com.apple.icns" }
        if at(0, "fLaC") { return "org.xiph.flac" }
        if at(0, "OggS") { return "org.xiph.ogg-audio" }
        if at(0, "ID3") { return "public.mp3" }
        if b.count >= 2, b[0] == 0xFF, b[1] & 0xE0 == 0xE0 {  // MPEG audio frame sync (11 bits set)
            let layer = (b[1] >> 1) & 0x03
            if layer == 0, b[1] & 0xF6 == 0xF0 { return "public.aac-audio" }  // ADTS
            if layer != 0 { return "public.mp3" }
        }
        if at(0, "FORM"), at(8, "AIFF") { return "public.aiff-audio" }
        if at(0, "FORM"), at(8, "AIFC") { return "public.aifc-audio" }
        if at(0, "MThd") { return "public.midi-audio" }
        if at(0, "caff") { return "com.apple.coreaudio-format" }
        if at(0, bytes: [0x1A, 0x45, 0xDF, 0xA3]) {
            return contains("webm", within: 64) ? "org.webmproject.webm" : "org.matroska.mkv"
        }
        if at(0, "bplist0") { return "com.apple.binary-property-list" }
        if at(0, bytes: [0x7F, 0x45, 0x4C, 0x46]) { return "public.unix-executable" }
        if at(0, bytes: [0xFE, 0xED, 0xFA, 0xCE]) || at(0, bytes: [0xFE, 0xED, 0xFA, 0xCF])
            || at(0, bytes: [0xCE, 0xFA, 0xED, 0xFE]) || at(0, bytes: [0xCF, 0xFA, 0xED, 0xFE])
        {
            return "public.unix-executable"
        }
        if at(0, "MZ"), b.count >= 64 { return "com.microsoft.windows-executable" }
        if at(0, bytes: [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]) { return oleDocument() }
        if at(0, "{\\rtf") { return "public.rtf" }
        return nil
    }

    /// ISO base media file format (`....ftypBRAND`): the major brand, then the compatible brands.
    func isoBrand() -> String? {
        guard b.count >= 12 else { return nil }
        let major = String(decoding: b[8..<12], as: UTF8.self)
        var compatible: [String] = []
        let boxSize = (Int(b[0]) << 24) | (Int(b[1]) << 16) | (Int(b[2]) << 8) | Int(b[3])
        var i = 16
        while i + 4 <= min(b.count, max(boxSize, 16)) {
            compatible.append(String(decoding: b[i..<i + 4], as: UTF8.self))
            i += 4
        }
        switch major {
        case "heic", "heix", "hevc", "hevx", "heim", "heis": return "public.heic"
        case "avif", "avis": return "public.avif"
        case "mif1", "msf1":
            if compatible.contains("avif") || compatible.contains("avis") { return "public.avif" }
            if compatible.contains(where: { ["heic", "heix", "hevc", "hevx"].contains($0) }) { return "public.heic" }
            return "public.heic"  // Apple's HEIC photos commonly carry mif1 as the major brand
        case "qt  ": return "com.apple.quicktime-movie"
        case "M4A ", "M4B ", "M4P ": return "com.apple.m4a-audio"
        case "M4V ", "M4VH", "M4VP": return "com.apple.m4v-video"
        case "3g2a", "3g2b", "3g2c": return "public.3gpp2"
        case "crx ": return "public.camera-raw-image"
        default:
            if major.hasPrefix("3gp") || major.hasPrefix("3ge") || major.hasPrefix("3gg") { return "public.3gpp" }
            return "public.mpeg-4"
        }
    }

    /// A ZIP whose first member tells what it is: OOXML (`[Content_Types].xml`, then `word/`, `xl/`, `ppt/`),
    /// EPUB and OpenDocument (`mimetype` stored first), else a plain ZIP archive.
    func zipMember() -> String? {
        guard b.count >= 30 else { return "public.zip-archive" }
        let nameLength = Int(b[26]) | (Int(b[27]) << 8)
        let extraLength = Int(b[28]) | (Int(b[29]) << 8)
        guard b.count >= 30 + nameLength else { return "public.zip-archive" }
        let name = String(decoding: b[30..<30 + nameLength], as: UTF8.self)
        if name == "mimetype" {
            let start = 30 + nameLength + extraLength
            let end = min(b.count, start + 80)
            if start < end {
                let mime = String(decoding: b[start..<end], as: UTF8.self)
                if mime.hasPrefix("application/epub+zip") { return "org.idpf.epub-container" }
                if mime.hasPrefix("application/vnd.oasis.opendocument.text") {
                    return "org.oasis-open.opendocument.text"
                }
                if mime.hasPrefix("application/vnd.oasis.opendocument.spreadsheet") {
                    return "org.oasis-open.opendocument.spreadsheet"
                }
                if mime.hasPrefix("application/vnd.oasis.opendocument.presentation") {
                    return "org.oasis-open.opendocument.presentation"
                }
            }
        }
        if name == "[Content_Types].xml" || name.hasPrefix("_rels/") || name.hasPrefix("docProps/")
            || name.hasPrefix("word/") || name.hasPrefix("xl/") || name.hasPrefix("ppt/")
        {
            if name.hasPrefix("word/") || contains("word/", within: b.count) {
                return "org.openxmlformats.wordprocessingml.document"
            }
            if name.hasPrefix("xl/") || contains("xl/", within: b.count) {
                return "org.openxmlformats.spreadsheetml.sheet"
            }
            if name.hasPrefix("ppt/") || contains("ppt/", within: b.count) {
                return "org.openxmlformats.presentationml.presentation"
            }
            return "org.openxmlformats.openxml"
        }
        return "public.zip-archive"
    }

    /// An OLE2 compound file: Word, Excel or PowerPoint by a directory entry name (UTF-16LE) when the bytes
    /// given reach it; nil otherwise (the container alone does not tell).
    func oleDocument() -> String? {
        func utf16(_ s: String) -> String { String(s.flatMap { [$0, "\u{0}"] }) }
        if contains(utf16("WordDocument"), within: b.count) { return "com.microsoft.word.doc" }
        if contains(utf16("Workbook"), within: b.count) || contains(utf16("Book"), within: b.count) {
            return "com.microsoft.excel.xls"
        }
        if contains(utf16("PowerPoint Document"), within: b.count) { return "com.microsoft.powerpoint.ppt" }
        return nil
    }

    // MARK: text

    func textual() -> String? {
        if at(0, bytes: [0xFF, 0xFE]) || at(0, bytes: [0xFE, 0xFF]) { return "public.utf16-external-plain-text" }
        var start = 0
        if at(0, bytes: [0xEF, 0xBB, 0xBF]) { start = 3 }
        guard let text = UTISniffer.decodeUTF8Prefix(b[start...]) else { return nil }
        var controls = 0
        for s in text.unicodeScalars
        where s.value < 0x20 && s != "\n" && s != "\r" && s != "\t" && s != "\u{0C}" && s != "\u{1B}" {
            controls += 1
        }
        if controls * 100 > max(text.unicodeScalars.count, 1) { return nil }  // more than 1% control characters
        var body = Substring(text)
        while let f = body.first, f.isWhitespace { body = body.dropFirst() }
        if body.isEmpty { return "public.plain-text" }
        let head = String(body.prefix(1024)).lowercased()
        if head.hasPrefix("begin:vcard") { return "public.vcard" }
        if head.hasPrefix("begin:vcalendar") { return "com.apple.ical.ics" }
        if head.hasPrefix("{\\rtf") { return "public.rtf" }
        if head.hasPrefix("%!ps") { return "com.adobe.postscript" }
        if head.hasPrefix("<!doctype html") || head.hasPrefix("<html") || head.hasPrefix("<head")
            || head.hasPrefix("<body")
        {
            return "public.html"
        }
        if head.hasPrefix("<svg") { return "public.svg-image" }
        if head.hasPrefix("<?xml") || head.hasPrefix("<!doctype") {
            if head.contains("<svg") { return "public.svg-image" }
            if head.contains("<!doctype plist") || head.contains("<plist") { return "com.apple.xml-property-list" }
            if head.contains("<html") || head.contains("<!doctype html") { return "public.xhtml" }
            return "public.xml"
        }
        if head.hasPrefix("#!") {
            let line = head.prefix { $0 != "\n" && $0 != "\r\n" }
            if line.contains("python") { return "public.python-script" }
            if line.contains("ruby") { return "public.ruby-script" }
            if line.contains("perl") { return "public.perl-script" }
            if line.contains("node") || line.contains("deno") { return "com.netscape.javascript-source" }
            if line.contains("php") { return "public.php-script" }
            if line.contains("zsh") { return "public.zsh-script" }
            if line.contains("bash") { return "public.bash-script" }
            if line.hasSuffix("/sh") || line.contains("/sh ") || line.contains(" sh") || line.contains("dash") {
                return "public.shell-script"
            }
            return "public.script"
        }
        if let f = body.first, f == "{" || f == "[", JSONPrefixValidator.looksLikeJSON(Array(body.utf8)) {
            return "public.json"
        }
        if UTISniffer.looksLikeEmail(head) { return "com.apple.mail.email" }
        return "public.plain-text"
    }

    /// Decodes UTF-8, tolerating a multi-byte character cut off at the end; nil when the bytes are not UTF-8 or hold NUL.
    static func decodeUTF8Prefix(_ bytes: ArraySlice<UInt8>) -> String? {
        var end = bytes.endIndex
        // Drop an incomplete trailing sequence (at most 3 bytes).
        var back = 0
        var i = end - 1
        while i >= bytes.startIndex, back < 3, bytes[i] & 0xC0 == 0x80 {
            i -= 1
            back += 1
        }
        if i >= bytes.startIndex {
            let lead = bytes[i]
            let need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
            if need > 1, end - i < need { end = i }
        }
        let slice = bytes[bytes.startIndex..<end]
        if slice.contains(0) { return nil }
        return UTF8Text.validated(slice)  // validated in bulk, not a scalar at a time
    }

    /// RFC 5322 headers at the start: at least two well-known header names, the first on line one.
    static func looksLikeEmail(_ head: String) -> Bool {
        let names = ["return-path:", "received:", "from:", "to:", "subject:", "date:", "message-id:", "mime-version:"]
        let lines = head.split(maxSplits: 12, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
        guard let first = lines.first, names.contains(where: { first.hasPrefix($0) }) else { return false }
        var found = 0
        for line in lines where names.contains(where: { line.hasPrefix($0) }) { found += 1 }
        return found >= 2
    }
}

/// Validates that bytes are a prefix of a JSON text (a cut-off document still counts): used by sniffing.
enum JSONPrefixValidator {
    /// True when the bytes start a JSON object or array and nothing seen contradicts JSON syntax.
    static func looksLikeJSON(_ s: [UInt8]) -> Bool {
        var stack: [UInt8] = []  // '{' or '['
        enum Expect { case value, keyOrClose, key, colon, commaOrClose, valueOrClose, end }
        var expect = Expect.value
        var i = 0
        var tokens = 0
        func isWS(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }
        while i < s.count {
            let c = s[i]
            if isWS(c) {
                i += 1
                continue
            }
            switch expect {
            case .end:
                return false
            case .colon:
                guard c == UInt8(ascii: ":") else { return false }
                expect = .value
                i += 1
                continue
            case .commaOrClose:
                if c == UInt8(ascii: ",") {
                    expect = stack.last == UInt8(ascii: "{") ? .key : .value
                    i += 1
                    continue
                }
                guard let top = stack.last,
                    (top == UInt8(ascii: "{") && c == UInt8(ascii: "}"))
                        || (top == UInt8(ascii: "[") && c == UInt8(ascii: "]"))
                else {
                    return false
                }
                stack.removeLast()
                expect = stack.isEmpty ? .end : .commaOrClose
                i += 1
                tokens += 1
                continue
            case .keyOrClose, .key:
                if expect == .keyOrClose, c == UInt8(ascii: "}") {
                    stack.removeLast()
                    expect = stack.isEmpty ? .end : .commaOrClose
                    i += 1
                    tokens += 1
                    continue
                }
                guard c == UInt8(ascii: "\"") else { return false }
                guard let next = skipString(s, i) else { return tokens > 0 }  // cut off inside a key
                i = next
                expect = .colon
                tokens += 1
                continue
            case .value, .valueOrClose:
                if expect == .valueOrClose, c == UInt8(ascii: "]") {
                    stack.removeLast()
                    expect = stack.isEmpty ? .end : .commaOrClose
                    i += 1
                    tokens += 1
                    continue
                }
                if stack.isEmpty, tokens == 0, c != UInt8(ascii: "{"), c != UInt8(ascii: "[") { return false }
                switch c {
                case UInt8(ascii: "{"):
                    stack.append(c)
                    expect = .keyOrClose
                    i += 1
                case UInt8(ascii: "["):
                    stack.append(c)
                    expect = .valueOrClose
                    i += 1
                case UInt8(ascii: "\""):
                    guard let next = skipString(s, i) else { return true }
                    i = next
                    expect = stack.isEmpty ? .end : .commaOrClose
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    var j = i + 1
                    while j < s.count,
                        (s[j] >= UInt8(ascii: "0") && s[j] <= UInt8(ascii: "9")) || s[j] == UInt8(ascii: ".")
                            || s[j] == UInt8(ascii: "e") || s[j] == UInt8(ascii: "E") || s[j] == UInt8(ascii: "+")
                            || s[j] == UInt8(ascii: "-")
                    {
                        j += 1
                    }
                    i = j
                    expect = stack.isEmpty ? .end : .commaOrClose
                case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                    let word: [UInt8] =
                        c == UInt8(ascii: "t")
                        ? Array("true".utf8) : c == UInt8(ascii: "f") ? Array("false".utf8) : Array("null".utf8)
                    var k = 0
                    while k < word.count, i + k < s.count {
                        if s[i + k] != word[k] { return false }
                        k += 1
                    }
                    i += k
                    expect = stack.isEmpty ? .end : .commaOrClose
                default:
                    return false
                }
                tokens += 1
            }
        }
        return tokens > 0
    }

    /// Index after the closing quote of the string starting at `i`, or nil when the input ends first.
    static func skipString(_ s: [UInt8], _ i: Int) -> Int? {
        var j = i + 1
        while j < s.count {
            if s[j] == UInt8(ascii: "\\") {
                j += 2
                continue
            }
            if s[j] == UInt8(ascii: "\"") { return j + 1 }
            j += 1
        }
        return nil
    }
}
