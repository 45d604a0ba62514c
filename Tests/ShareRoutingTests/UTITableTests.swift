// Table-driven tests for the UTI table: conformance chains as Apple declares them, extension and MIME lookups,
// preferred tags, types that manifests declare, and content sniffing.

import ShareProtocol
import ShareRouting
import XCTest

final class UTITableTests: XCTestCase {
    let table = UTITable.system

    func testConformance() {
        let cases: [(String, String, Bool, UInt)] = [
            // public.jpeg → public.image → public.data → public.item (and public.content)
            ("public.jpeg", "public.image", true, #line),
            ("public.jpeg", "public.data", true, #line),
            ("public.jpeg", "public.item", true, #line),
            ("public.jpeg", "public.content", true, #line),
            ("public.image", "public.jpeg", false, #line),
            ("public.png", "public.image", true, #line),
            ("public.heic", "public.heif-standard", true, #line),
            ("public.heic", "public.image", true, #line),
            ("com.compuserve.gif", "public.image", true, #line),
            ("org.webmproject.webp", "public.image", true, #line),
            // public.plain-text → public.text → public.data / public.content
            ("public.plain-text", "public.text", true, #line),
            ("public.plain-text", "public.data", true, #line),
            ("public.plain-text", "public.content", true, #line),
            ("public.utf8-plain-text", "public.text", true, #line),
            ("public.text", "public.plain-text", false, #line),
            // Apple: public.url conforms to public.data; public.file-url to public.url.
            ("public.url", "public.data", true, #line),
            ("public.url", "public.text", false, #line),
            ("public.file-url", "public.url", true, #line),
            ("public.url", "public.file-url", false, #line),
            ("public.html", "public.text", true, #line),
            ("public.json", "public.text", true, #line),
            ("public.xml", "public.text", true, #line),
            ("public.vcard", "public.text", true, #line),
            ("public.vcard", "public.contact", true, #line),
            ("public.python-script", "public.script", true, #line),
            ("public.shell-script", "public.source-code", true, #line),
            ("public.source-code", "public.plain-text", true, #line),
            ("public.comma-separated-values-text", "public.text", true, #line),
            ("public.mpeg-4", "public.movie", true, #line),
            ("com.apple.quicktime-movie", "public.audiovisual-content", true, #line),
            ("public.video", "public.movie", true, #line),
            ("public.mp3", "public.audio", true, #line),
            ("public.mp3", "public.movie", false, #line),
            ("com.apple.m4a-audio", "public.audio", true, #line),
            ("com.adobe.pdf", "public.data", true, #line),
            ("com.adobe.pdf", "public.composite-content", true, #line),
            ("com.adobe.pdf", "public.text", false, #line),
            ("public.zip-archive", "public.archive", true, #line),
            ("public.zip-archive", "com.pkware.zip-archive", true, #line),
            ("org.openxmlformats.wordprocessingml.document", "public.zip-archive", true, #line),
            ("org.openxmlformats.spreadsheetml.sheet", "public.spreadsheet", true, #line),
            ("org.gnu.gnu-zip-tar-archive", "public.archive", true, #line),
            ("com.apple.ical.ics", "public.calendar-event", true, #line),
            ("com.apple.mail.email", "public.email-message", true, #line),
            ("public.folder", "public.directory", true, #line),
            ("public.folder", "public.data", false, #line),
            ("com.apple.xml-property-list", "com.apple.property-list", true, #line),
            // case-insensitive, reflexive
            ("PUBLIC.JPEG", "Public.Image", true, #line),
            ("com.adobe.pdf", "com.adobe.pdf", true, #line),
            // undeclared and dynamic types: public.data and public.item, nothing else
            ("com.example.custom", "com.example.custom", true, #line),
            ("com.example.custom", "public.data", true, #line),
            ("com.example.custom", "public.item", true, #line),
            ("com.example.custom", "public.image", false, #line),
            ("dyn.ah62d4rv4ge80", "public.data", true, #line),
        ]
        for (a, b, expected, line) in cases {
            XCTAssertEqual(table.conforms(a, to: b), expected, "\(a) conforms to \(b)", line: line)
        }
    }

    func testSupertypesNearestFirst() {
        XCTAssertEqual(Array(table.supertypes(of: "public.jpeg").prefix(2)), ["public.jpeg", "public.image"])
        XCTAssertTrue(table.supertypes(of: "public.jpeg").contains("public.item"))
        XCTAssertEqual(table.supertypes(of: "com.example.x"), ["com.example.x", "public.data", "public.item"])
    }

    func testExtensionsAndFilenames() {
        let cases: [(String, String?, UInt)] = [
            ("pdf", "com.adobe.pdf", #line), ("PDF", "com.adobe.pdf", #line), (".pdf", "com.adobe.pdf", #line),
            ("jpg", "public.jpeg", #line), ("jpeg", "public.jpeg", #line), ("png", "public.png", #line),
            ("heic", "public.heic", #line), ("gif", "com.compuserve.gif", #line),
            ("webp", "org.webmproject.webp", #line),
            ("svg", "public.svg-image", #line), ("tiff", "public.tiff", #line), ("bmp", "com.microsoft.bmp", #line),
            ("mov", "com.apple.quicktime-movie", #line), ("mp4", "public.mpeg-4", #line), ("avi", "public.avi", #line),
            ("m4a", "com.apple.m4a-audio", #line), ("mp3", "public.mp3", #line),
            ("wav", "com.microsoft.waveform-audio", #line),
            ("txt", "public.plain-text", #line), ("json", "public.json", #line), ("html", "public.html", #line),
            ("htm", "public.html", #line), ("xml", "public.xml", #line), ("rtf", "public.rtf", #line),
            ("csv", "public.comma-separated-values-text", #line), ("tsv", "public.tab-separated-values-text", #line),
            ("py", "public.python-script", #line), ("sh", "public.shell-script", #line),
            ("md", "net.daringfireball.markdown", #line),
            ("zip", "public.zip-archive", #line), ("gz", "org.gnu.gnu-zip-archive", #line),
            ("tar", "public.tar-archive", #line),
            ("doc", "com.microsoft.word.doc", #line), ("docx", "org.openxmlformats.wordprocessingml.document", #line),
            ("xls", "com.microsoft.excel.xls", #line), ("xlsx", "org.openxmlformats.spreadsheetml.sheet", #line),
            ("ppt", "com.microsoft.powerpoint.ppt", #line),
            ("pptx", "org.openxmlformats.presentationml.presentation", #line),
            ("vcf", "public.vcard", #line), ("ics", "com.apple.ical.ics", #line),
            ("eml", "com.apple.mail.email", #line),
            ("pkpass", "com.apple.pkpass", #line), ("epub", "org.idpf.epub-container", #line),
            ("plist", "com.apple.property-list", #line), ("webarchive", "com.apple.webarchive", #line),
            ("nosuchext", nil, #line), ("", nil, #line),
        ]
        for (ext, expected, line) in cases {
            XCTAssertEqual(table.type(forExtension: ext), expected, ext, line: line)
        }
        let names: [(String, String?, UInt)] = [
            ("Report.PDF", "com.adobe.pdf", #line), ("/var/tmp/photo.jpeg", "public.jpeg", #line),
            ("backup.tar.gz", "org.gnu.gnu-zip-tar-archive", #line), ("notes.v2.txt", "public.plain-text", #line),
            (".bashrc", nil, #line), ("README", nil, #line), ("trailingdot.", nil, #line),
            (".hidden.json", "public.json", #line),
        ]
        for (name, expected, line) in names {
            XCTAssertEqual(table.type(forFilename: name), expected, name, line: line)
        }
    }

    func testMIMETypes() {
        let cases: [(String, String?, UInt)] = [
            ("application/pdf", "com.adobe.pdf", #line), ("image/jpeg", "public.jpeg", #line),
            ("IMAGE/PNG", "public.png", #line),
            ("text/plain; charset=utf-8", "public.plain-text", #line), ("text/html", "public.html", #line),
            ("application/json", "public.json", #line), ("video/quicktime", "com.apple.quicktime-movie", #line),
            ("video/mp4", "public.mpeg-4", #line), ("audio/mpeg", "public.mp3", #line),
            ("application/zip", "public.zip-archive", #line),
            ("text/vcard", "public.vcard", #line), ("text/calendar", "com.apple.ical.ics", #line),
            ("application/octet-stream", "public.data", #line), ("application/x-unknown", nil, #line),
        ]
        for (mime, expected, line) in cases {
            XCTAssertEqual(table.type(forMIME: mime), expected, mime, line: line)
        }
    }

    func testPreferredTags() {
        XCTAssertEqual(table.preferredExtension(for: "public.jpeg"), "jpeg")
        XCTAssertEqual(table.preferredExtension(for: "com.adobe.pdf"), "pdf")
        XCTAssertEqual(table.preferredExtension(for: "public.utf8-plain-text"), "txt")  // from public.plain-text
        XCTAssertEqual(table.preferredExtension(for: "public.mpeg-4"), "mp4")
        XCTAssertNil(table.preferredExtension(for: "public.url"))
        XCTAssertNil(table.preferredExtension(for: "public.data"))
        XCTAssertEqual(table.preferredMIMEType(for: "com.adobe.pdf"), "application/pdf")
        XCTAssertEqual(table.suggestedFilename(base: "item-1", type: "com.adobe.pdf"), "item-1.pdf")
        XCTAssertEqual(table.suggestedFilename(base: "item-2", type: "public.data"), "item-2")
        XCTAssertEqual(table.preferredMIMEType(for: "com.example.unknown"), "application/octet-stream")
    }

    func testTypesManifestsDeclare() throws {
        let sketch = DeclaredType(
            "com.example.sketch", conformsTo: ["public.image"], extensions: ["sketchy"],
            mimeTypes: ["application/x-sketchy"],
            description: "Sketch")
        let chained = DeclaredType("com.example.sketch.v2", conformsTo: ["com.example.sketch"])
        let clash = DeclaredType("com.example.pdfish", conformsTo: ["public.data"], extensions: ["pdf"])
        let redeclared = DeclaredType("com.adobe.pdf", conformsTo: ["public.text"])
        let extended = table.adding([sketch, chained, clash, redeclared])
        XCTAssertTrue(extended.conforms("com.example.sketch", to: "public.image"))
        XCTAssertTrue(extended.conforms("com.example.sketch.v2", to: "public.data"))
        XCTAssertTrue(extended.conforms("com.example.sketch.v2", to: "public.image"))
        XCTAssertEqual(extended.type(forExtension: "sketchy"), "com.example.sketch")
        XCTAssertEqual(extended.type(forMIME: "application/x-sketchy"), "com.example.sketch")
        XCTAssertEqual(extended.type(forExtension: "pdf"), "com.adobe.pdf", "system mapping kept")
        XCTAssertFalse(extended.conforms("com.adobe.pdf", to: "public.text"), "system declaration wins")
        XCTAssertFalse(table.isDeclared("com.example.sketch"), "adding returns a copy")
        let notes = table.adding([]).notes(adding: [sketch, clash, redeclared])
        XCTAssertTrue(notes.contains { $0.contains("com.adobe.pdf is already declared") }, "\(notes)")
        XCTAssertTrue(notes.contains { $0.contains("extension 'pdf' already means com.adobe.pdf") }, "\(notes)")

        // Apple's Info.plist shape (UTExportedTypeDeclarations entry) and sharebroker's own.
        let apple: JSONValue = [
            "UTTypeIdentifier": "com.example.board", "UTTypeConformsTo": ["public.data", "public.content"],
            "UTTypeDescription": "Board", "UTTypeTagSpecification": ["public.filename-extension": "board"],
        ]
        let parsed = try DeclaredType.parse(apple)
        XCTAssertEqual(
            parsed,
            DeclaredType(
                "com.example.board", conformsTo: ["public.data", "public.content"], extensions: ["board"],
                description: "Board"))
        let own: JSONValue = ["identifier": "com.example.x", "conformsTo": ["public.json"], "extensions": ["exj"]]
        XCTAssertEqual(try DeclaredType.parse(own).conformsTo, ["public.json"])
        XCTAssertThrowsError(try DeclaredType.parse(["identifier": "not an id"])) { error in
            XCTAssertEqual((error as? DeclaredTypeError)?.field, "identifier")
        }
        XCTAssertThrowsError(try DeclaredType.parse(["identifier": "com.x.y", "conformsTo": [1]])) { error in
            XCTAssertEqual((error as? DeclaredTypeError)?.field, "conformsTo[0]")
        }
    }

    func testSniffing() {
        func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
        func box(_ major: String, _ compatible: [String]) -> [UInt8] {
            let size = 16 + 4 * compatible.count
            return [0, 0, 0, UInt8(size)] + bytes("ftyp") + bytes(major) + [0, 0, 0, 0] + compatible.flatMap(bytes)
        }
        var docx =
            [0x50, 0x4B, 0x03, 0x04] + [UInt8](repeating: 0, count: 22) + [19, 0, 0, 0] + bytes("[Content_Types].xml")
        docx += [UInt8](repeating: 0x20, count: 40) + bytes("PK") + bytes("word/document.xml")
        let zip =
            [0x50, 0x4B, 0x03, 0x04] + [UInt8](repeating: 0, count: 22) + [9, 0, 0, 0] + bytes("hello.txt")
            + bytes("hi")
        let epub =
            [0x50, 0x4B, 0x03, 0x04] + [UInt8](repeating: 0, count: 22) + [8, 0, 0, 0] + bytes("mimetype")
            + bytes("application/epub+zip")
        var tar = [UInt8](repeating: 0, count: 512)
        tar.replaceSubrange(257..<262, with: bytes("ustar"))
        let cases: [([UInt8], String?, UInt)] = [
            (bytes("%PDF-1.7\n%âãÏÓ"), "com.adobe.pdf", #line),
            ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13], "public.png", #line),
            ([0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, 0x4A, 0x46], "public.jpeg", #line),
            (bytes("GIF89a\u{1}\u{0}"), "com.compuserve.gif", #line),
            (box("heic", ["mif1", "heic"]), "public.heic", #line),
            (box("heix", []), "public.heic", #line),
            (box("mif1", ["mif1", "heic"]), "public.heic", #line),
            (box("avif", ["avif", "mif1"]), "public.avif", #line),
            (box("isom", ["isom", "iso2", "mp41"]), "public.mpeg-4", #line),
            (box("mp42", []), "public.mpeg-4", #line),
            (box("qt  ", ["qt  "]), "com.apple.quicktime-movie", #line),
            (box("M4A ", ["M4A ", "mp42"]), "com.apple.m4a-audio", #line),
            (box("3gp5", []), "public.3gpp", #line),
            (bytes("RIFF") + [0, 0, 0, 0] + bytes("WEBPVP8 "), "org.webmproject.webp", #line),
            (bytes("RIFF") + [0, 0, 0, 0] + bytes("WAVEfmt "), "com.microsoft.waveform-audio", #line),
            (zip, "public.zip-archive", #line),
            (docx, "org.openxmlformats.wordprocessingml.document", #line),
            (epub, "org.idpf.epub-container", #line),
            ([0x1F, 0x8B, 0x08, 0x00], "org.gnu.gnu-zip-archive", #line),
            (tar, "public.tar-archive", #line),
            (bytes("ID3\u{4}\u{0}"), "public.mp3", #line),
            (bytes("fLaC"), "org.xiph.flac", #line),
            ([0x7F, 0x45, 0x4C, 0x46, 2, 1, 1], "public.unix-executable", #line),
            (bytes("bplist00"), "com.apple.binary-property-list", #line),
            (bytes("BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Jane Doe\r\nEND:VCARD\r\n"), "public.vcard", #line),
            (bytes("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n"), "com.apple.ical.ics", #line),
            (bytes("<!DOCTYPE html>\n<html><head>"), "public.html", #line),
            (bytes("  <html lang=\"en\">"), "public.html", #line),
            (
                bytes("<?xml version=\"1.0\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\">"),
                "com.apple.xml-property-list", #line
            ),
            (bytes("<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\">"), "public.svg-image", #line),
            (bytes("<?xml version=\"1.0\"?><feed>"), "public.xml", #line),
            (bytes("{\"a\": 1, \"b\": [true, null, \"x\"]}"), "public.json", #line),
            (bytes("[1, 2, {\"cut off"), "public.json", #line),
            (bytes("\u{FEFF}{}"), "public.json", #line),
            (bytes("[INFO] server started"), "public.plain-text", #line),
            (bytes("{not json at all}"), "public.plain-text", #line),
            (bytes("#!/usr/bin/env python3\nprint(1)\n"), "public.python-script", #line),
            (bytes("#!/bin/sh\necho hi\n"), "public.shell-script", #line),
            (bytes("{\\rtf1\\ansi hello}"), "public.rtf", #line),
            (bytes("Return-Path: <a@b.c>\r\nFrom: A <a@b.c>\r\nSubject: hi\r\n"), "com.apple.mail.email", #line),
            (bytes("hello world\nsecond line"), "public.plain-text", #line),
            (bytes("caf") + [0xC3], "public.plain-text", #line),  // a character cut off at the end
            ([0x00, 0x01, 0x02, 0xFF, 0xFE, 0x00], nil, #line),
            ([0xC3, 0x28, 0x41], nil, #line),  // invalid UTF-8
            ([], nil, #line),
        ]
        for (input, expected, line) in cases {
            XCTAssertEqual(sniffType(of: input), expected, "\(input.prefix(16))", line: line)
        }
    }

    /// `wellKnownConformance(of:)` (the activation check's one lookup per type) says exactly what
    /// `conforms(_:to:)` says for each of its eight types: for every system type, types a manifest
    /// adds (one of them a cycle, one conforming to the undeclared web archive type), undeclared
    /// ones, and identifiers in other letter cases.
    func testWellKnownConformanceAgreesWithConformsForEveryType() {
        let table = UTITable.system.adding([
            DeclaredType("com.example.board", conformsTo: ["public.json"]),
            DeclaredType("com.example.clip", conformsTo: ["public.file-url", "public.mpeg-4"]),
            DeclaredType("com.example.page", conformsTo: ["com.apple.webarchive"]),
            DeclaredType("com.example.loop-a", conformsTo: ["com.example.loop-b"]),
            DeclaredType("com.example.loop-b", conformsTo: ["com.example.loop-a", "public.png"]),
        ])
        var identifiers = table.declaredTypes.map(\.identifier)
        identifiers += identifiers.map { $0.uppercased() }
        identifiers += ["com.apple.webarchive", "COM.Apple.WebArchive", "public.undeclared", "", "dyn.ah62d4rv4ge8"]
        var checked = 0
        for id in identifiers {
            let mask = table.wellKnownConformance(of: id)
            for (member, wellKnown) in UTITable.WellKnownTypes.identifiers {
                XCTAssertEqual(mask.contains(member), table.conforms(id, to: wellKnown), "\(id) → \(wellKnown)")
                checked += 1
            }
        }
        XCTAssertGreaterThan(checked, 8 * 100)
        // (and it is not vacuous: these conform)
        XCTAssertEqual(table.wellKnownConformance(of: "com.example.clip"), [.fileURL, .url, .movie])
        XCTAssertEqual(table.wellKnownConformance(of: "com.example.page"), [.webArchive])
        XCTAssertEqual(table.wellKnownConformance(of: "public.HTML"), [.html, .text])
        XCTAssertEqual(table.wellKnownConformance(of: "com.example.loop-a"), [.image])
    }

    /// Two declared types that conform to each other (a manifest's mistake) each conform to what
    /// either conforms to. (The supertypes were memoized across types: in a cycle, a member got
    /// only those reached before the walk came back to it, so whether loop-a was an image
    /// depended on the order of a dictionary, which differs from run to run.)
    func testTypesInACycleConformToWhatEachMemberConformsTo() {
        for _ in 0..<20 {
            let table = UTITable.system.adding([
                DeclaredType("com.example.loop-a", conformsTo: ["com.example.loop-b"]),
                DeclaredType("com.example.loop-b", conformsTo: ["com.example.loop-a", "public.png"]),
                DeclaredType("com.example.loop-c", conformsTo: ["com.example.loop-a"]),
            ])
            for member in ["com.example.loop-a", "com.example.loop-b", "com.example.loop-c"] {
                XCTAssertTrue(table.conforms(member, to: "public.image"), member)
                XCTAssertTrue(table.conforms(member, to: "public.data"), member)
                XCTAssertTrue(table.conforms(member, to: "com.example.loop-b"), member)
            }
            XCTAssertFalse(table.conforms("com.example.loop-a", to: "com.example.loop-c"))
        }
    }
}
