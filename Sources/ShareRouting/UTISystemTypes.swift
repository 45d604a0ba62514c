// Apple's common system-declared uniform type identifiers, with their parents, extensions and MIME types.
// Source: "System-declared uniform type identifiers" (developer.apple.com/documentation/uniformtypeidentifiers/
// system-declared-uniform-type-identifiers) and the UTType constants (UTCoreTypes); order matters for tag lookups.

/// The system table's declarations, in lookup order (the first type claiming an extension or MIME type keeps it).
enum UTISystemTypes {
    private static func t(_ id: String, _ parents: [String], _ ext: [String], _ mime: [String], _ desc: String)
        -> DeclaredType
    {
        DeclaredType(id, conformsTo: parents, extensions: ext, mimeTypes: mime, description: desc)
    }

    private static func t(_ id: String, _ parents: [String], _ ext: [String] = [], desc: String) -> DeclaredType {
        DeclaredType(id, conformsTo: parents, extensions: ext, mimeTypes: [], description: desc)
    }

    static let declarations: [DeclaredType] = base + text + images + audiovisual + documents + archives

    // Roots and abstract types. Physical hierarchy: public.item > public.data / public.directory;
    // functional hierarchy: public.content > public.composite-content etc.
    static let base: [DeclaredType] = [
        t("public.item", [], desc: "item"),
        t("public.content", [], desc: "content"),
        t("public.composite-content", ["public.content"], desc: "composite content"),
        t("public.data", ["public.item"], [], ["application/octet-stream"], "data"),
        t("public.directory", ["public.item"], desc: "directory"),
        t("public.folder", ["public.directory"], desc: "folder"),
        t("public.volume", ["public.folder"], desc: "volume"),
        t("com.apple.package", ["public.directory"], desc: "package"),
        t("com.apple.bundle", ["public.directory"], desc: "bundle"),
        t("public.symlink", ["public.item"], desc: "symbolic link"),
        t("public.executable", ["public.item"], desc: "executable"),
        t(
            "public.unix-executable", ["public.data", "public.executable"], [], ["application/x-executable"],
            "Unix executable"),
        t(
            "com.microsoft.windows-executable", ["public.data", "public.executable"], ["exe"],
            ["application/x-msdownload", "application/vnd.microsoft.portable-executable"], "Windows executable"),
        t("com.apple.application", ["public.executable"], desc: "application"),
        t(
            "com.apple.application-bundle", ["com.apple.application", "com.apple.bundle", "com.apple.package"], ["app"],
            desc: "application bundle"),
        t("public.url", ["public.data"], desc: "URL"),
        t("public.file-url", ["public.url"], desc: "file URL"),
        t("public.message", ["public.item"], desc: "message"),
        t("public.email-message", ["public.message"], desc: "email message"),
        t("com.apple.mail.email", ["public.email-message", "public.data"], ["eml"], ["message/rfc822"], "email"),
        t("public.contact", ["public.item"], desc: "contact"),
        t("public.calendar-event", ["public.item"], desc: "calendar event"),
        t(
            "com.apple.ical.ics", ["public.data", "public.calendar-event"], ["ics", "ical"], ["text/calendar"],
            "iCalendar"),
        t("com.apple.property-list", ["public.data"], ["plist"], ["application/x-plist"], "property list"),
        t("com.apple.binary-property-list", ["com.apple.property-list"], desc: "binary property list"),
        t(
            "com.apple.pkpass", ["public.data", "public.content"], ["pkpass"], ["application/vnd.apple.pkpass"],
            "Wallet pass"),
        t("public.font", ["public.data", "public.content"], desc: "font"),
        t("public.truetype-ttf-font", ["public.font"], ["ttf"], ["font/ttf"], "TrueType font"),
        t("public.opentype-font", ["public.font"], ["otf"], ["font/otf"], "OpenType font"),
    ]

    static let text: [DeclaredType] = [
        t("public.text", ["public.data", "public.content"], desc: "text"),
        t("public.plain-text", ["public.text"], ["txt", "text"], ["text/plain"], "plain text"),
        t("public.utf8-plain-text", ["public.plain-text"], desc: "UTF-8 plain text"),
        t("public.utf16-plain-text", ["public.plain-text"], desc: "UTF-16 plain text"),
        t("public.utf16-external-plain-text", ["public.plain-text"], desc: "UTF-16 text with byte-order mark"),
        t("public.delimited-values-text", ["public.text"], desc: "delimited values text"),
        t(
            "public.comma-separated-values-text", ["public.delimited-values-text"], ["csv"],
            ["text/csv", "text/comma-separated-values"], "CSV"),
        t(
            "public.tab-separated-values-text", ["public.delimited-values-text"], ["tsv", "tab"],
            ["text/tab-separated-values"], "TSV"),
        t("public.utf8-tab-separated-values-text", ["public.tab-separated-values-text"], desc: "UTF-8 TSV"),
        t("public.rtf", ["public.text"], ["rtf"], ["text/rtf", "application/rtf"], "rich text"),
        t(
            "com.apple.rtfd", ["com.apple.package", "public.composite-content"], ["rtfd"],
            desc: "rich text with attachments"),
        t("public.html", ["public.text"], ["html", "htm", "shtml"], ["text/html"], "HTML"),
        t("public.xml", ["public.text"], ["xml"], ["application/xml", "text/xml"], "XML"),
        t("public.xhtml", ["public.xml"], ["xhtml", "xht"], ["application/xhtml+xml"], "XHTML"),
        t("com.apple.xml-property-list", ["public.xml", "com.apple.property-list"], desc: "XML property list"),
        t("public.css", ["public.text"], ["css"], ["text/css"], "CSS"),
        t("public.json", ["public.text"], ["json"], ["application/json", "text/json"], "JSON"),
        t("public.geojson", ["public.json"], ["geojson"], ["application/geo+json"], "GeoJSON"),
        t(
            "public.yaml", ["public.text"], ["yaml", "yml"], ["application/yaml", "application/x-yaml", "text/yaml"],
            "YAML"),
        t("net.daringfireball.markdown", ["public.plain-text"], ["md", "markdown"], ["text/markdown"], "Markdown"),
        t("public.log", ["public.plain-text"], ["log"], desc: "log"),
        t("public.source-code", ["public.plain-text"], desc: "source code"),
        t("public.c-source", ["public.source-code"], ["c"], ["text/x-c"], "C source"),
        t("public.c-header", ["public.source-code"], ["h"], desc: "C header"),
        t(
            "public.c-plus-plus-source", ["public.source-code"], ["cpp", "cc", "cxx", "c++"], ["text/x-c++src"],
            "C++ source"),
        t("public.objective-c-source", ["public.source-code"], ["m"], desc: "Objective-C source"),
        t("public.swift-source", ["public.source-code"], ["swift"], ["text/x-swift"], "Swift source"),
        t("com.sun.java-source", ["public.source-code"], ["java"], ["text/x-java-source"], "Java source"),
        t("public.assembly-source", ["public.source-code"], ["s"], desc: "assembly source"),
        t("public.script", ["public.source-code"], desc: "script"),
        t(
            "public.shell-script", ["public.script"], ["sh", "command"], ["application/x-sh", "text/x-shellscript"],
            "shell script"),
        t("public.bash-script", ["public.shell-script"], ["bash"], desc: "Bash script"),
        t("public.zsh-script", ["public.shell-script"], ["zsh"], desc: "Zsh script"),
        t(
            "public.python-script", ["public.script"], ["py"], ["text/x-python", "text/x-python-script"],
            "Python script"),
        t("public.ruby-script", ["public.script"], ["rb"], ["text/x-ruby"], "Ruby script"),
        t("public.perl-script", ["public.script"], ["pl", "pm"], ["text/x-perl"], "Perl script"),
        t("public.php-script", ["public.script"], ["php"], ["application/x-php", "text/x-php"], "PHP script"),
        t(
            "com.netscape.javascript-source", ["public.script"], ["js", "mjs"],
            ["text/javascript", "application/javascript"],
            "JavaScript"),
        t(
            "public.vcard", ["public.text", "public.contact"], ["vcf", "vcard"],
            ["text/vcard", "text/x-vcard", "text/directory"],
            "vCard"),
    ]

    static let images: [DeclaredType] = [
        t("public.image", ["public.data", "public.content"], desc: "image"),
        t(
            "public.jpeg", ["public.image"], ["jpeg", "jpg", "jpe"], ["image/jpeg", "image/jpg", "image/pjpeg"],
            "JPEG image"),
        t("public.png", ["public.image"], ["png"], ["image/png"], "PNG image"),
        t("com.compuserve.gif", ["public.image"], ["gif"], ["image/gif"], "GIF image"),
        t("public.tiff", ["public.image"], ["tiff", "tif"], ["image/tiff"], "TIFF image"),
        t(
            "com.microsoft.bmp", ["public.image"], ["bmp", "dib"], ["image/bmp", "image/x-bmp", "image/x-ms-bmp"],
            "BMP image"),
        t(
            "com.microsoft.ico", ["public.image"], ["ico"], ["image/vnd.microsoft.icon", "image/x-icon"], "Windows icon"
        ),
        t("com.apple.icns", ["public.image"], ["icns"], desc: "Apple icon image"),
        t("public.heif-standard", ["public.image"], desc: "HEIF standard image"),
        t("public.heic", ["public.heif-standard"], ["heic"], ["image/heic"], "HEIC image"),
        t("public.heics", ["public.heif-standard"], ["heics"], ["image/heic-sequence"], "HEIC image sequence"),
        t("public.heif", ["public.heif-standard"], ["heif"], ["image/heif"], "HEIF image"),
        t("public.avif", ["public.image"], ["avif"], ["image/avif"], "AVIF image"),
        t("org.webmproject.webp", ["public.image"], ["webp"], ["image/webp"], "WebP image"),
        t("public.svg-image", ["public.image"], ["svg", "svgz"], ["image/svg+xml"], "SVG image"),
        t("public.jpeg-2000", ["public.image"], ["jp2", "jpf", "jpx", "j2k"], ["image/jp2"], "JPEG 2000 image"),
        t("public.camera-raw-image", ["public.image"], desc: "camera raw image"),
        t("com.adobe.raw-image", ["public.camera-raw-image"], ["dng"], ["image/x-adobe-dng"], "DNG image"),
        t("com.adobe.photoshop-image", ["public.image"], ["psd"], ["image/vnd.adobe.photoshop"], "Photoshop image"),
        t("com.truevision.tga-image", ["public.image"], ["tga"], ["image/x-tga"], "TGA image"),
        t("public.xbitmap-image", ["public.image"], ["xbm"], ["image/x-xbitmap"], "X bitmap image"),
    ]

    static let audiovisual: [DeclaredType] = [
        t("public.audiovisual-content", ["public.data", "public.content"], desc: "audiovisual content"),
        t("public.movie", ["public.audiovisual-content"], desc: "movie"),
        t("public.video", ["public.movie"], desc: "video"),
        t("public.audio", ["public.audiovisual-content"], desc: "audio"),
        t("public.mpeg-4", ["public.movie"], ["mp4", "mpeg4"], ["video/mp4"], "MPEG-4 movie"),
        t("com.apple.m4v-video", ["public.mpeg-4"], ["m4v"], ["video/x-m4v"], "M4V video"),
        t("com.apple.quicktime-movie", ["public.movie"], ["mov", "qt"], ["video/quicktime"], "QuickTime movie"),
        t(
            "public.avi", ["public.movie"], ["avi", "vfw"], ["video/avi", "video/x-msvideo", "video/msvideo"],
            "AVI movie"),
        t("public.mpeg", ["public.movie"], ["mpg", "mpeg", "mpe", "m1v"], ["video/mpeg"], "MPEG movie"),
        t("public.mpeg-2-video", ["public.video"], ["m2v"], desc: "MPEG-2 video"),
        t(
            "public.mpeg-2-transport-stream", ["public.movie"], ["m2ts", "mts"], ["video/mp2t"],
            "MPEG-2 transport stream"),
        t("public.3gpp", ["public.movie"], ["3gp", "3gpp"], ["video/3gpp", "audio/3gpp"], "3GPP movie"),
        t("public.3gpp2", ["public.movie"], ["3g2", "3gp2"], ["video/3gpp2", "audio/3gpp2"], "3GPP2 movie"),
        t("org.webmproject.webm", ["public.movie"], ["webm"], ["video/webm"], "WebM movie"),
        t("org.matroska.mkv", ["public.movie"], ["mkv"], ["video/x-matroska"], "Matroska movie"),
        t("public.mp3", ["public.audio"], ["mp3"], ["audio/mpeg", "audio/mp3", "audio/mpeg3"], "MP3 audio"),
        t("com.apple.m4a-audio", ["public.mpeg-4-audio"], ["m4a"], ["audio/x-m4a", "audio/m4a"], "M4A audio"),
        t("public.mpeg-4-audio", ["public.audio"], ["m4a", "m4b"], ["audio/mp4"], "MPEG-4 audio"),
        t("public.aiff-audio", ["public.audio"], ["aiff", "aif"], ["audio/aiff", "audio/x-aiff"], "AIFF audio"),
        t("public.aifc-audio", ["public.aiff-audio"], ["aifc"], desc: "AIFF-C audio"),
        t(
            "com.microsoft.waveform-audio", ["public.audio"], ["wav", "wave"],
            ["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"], "WAVE audio"),
        t("org.xiph.flac", ["public.audio"], ["flac"], ["audio/flac", "audio/x-flac"], "FLAC audio"),
        t("org.xiph.ogg-audio", ["public.audio"], ["ogg", "oga", "opus"], ["audio/ogg", "audio/opus"], "Ogg audio"),
        t("public.aac-audio", ["public.audio"], ["aac"], ["audio/aac", "audio/x-aac"], "AAC audio"),
        t("public.midi-audio", ["public.audio"], ["mid", "midi"], ["audio/midi", "audio/x-midi"], "MIDI audio"),
        t("com.apple.coreaudio-format", ["public.audio"], ["caf"], ["audio/x-caf"], "Core Audio format"),
    ]

    static let documents: [DeclaredType] = [
        t("com.adobe.pdf", ["public.data", "public.composite-content"], ["pdf"], ["application/pdf"], "PDF document"),
        t(
            "com.adobe.postscript", ["public.data", "public.composite-content"], ["ps"], ["application/postscript"],
            "PostScript"),
        t("com.adobe.encapsulated-postscript", ["com.adobe.postscript"], ["eps"], desc: "Encapsulated PostScript"),
        t("public.presentation", ["public.composite-content"], desc: "presentation"),
        t("public.spreadsheet", ["public.content"], desc: "spreadsheet"),
        t(
            "com.microsoft.word.doc", ["public.data", "public.composite-content"], ["doc"], ["application/msword"],
            "Word document"),
        t(
            "com.microsoft.excel.xls", ["public.data", "public.spreadsheet"], ["xls"], ["application/vnd.ms-excel"],
            "Excel workbook"),
        t(
            "com.microsoft.powerpoint.ppt", ["public.data", "public.presentation"], ["ppt"],
            ["application/vnd.ms-powerpoint"],
            "PowerPoint presentation"),
        t("org.openxmlformats.openxml", ["public.zip-archive"], desc: "Office Open XML"),
        t(
            "org.openxmlformats.wordprocessingml.document", ["org.openxmlformats.openxml", "public.composite-content"],
            ["docx"],
            ["application/vnd.openxmlformats-officedocument.wordprocessingml.document"], "Word document (OOXML)"),
        t(
            "org.openxmlformats.spreadsheetml.sheet", ["org.openxmlformats.openxml", "public.spreadsheet"], ["xlsx"],
            ["application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"], "Excel workbook (OOXML)"),
        t(
            "org.openxmlformats.presentationml.presentation", ["org.openxmlformats.openxml", "public.presentation"],
            ["pptx"],
            ["application/vnd.openxmlformats-officedocument.presentationml.presentation"],
            "PowerPoint presentation (OOXML)"),
        t(
            "org.oasis-open.opendocument.text", ["public.zip-archive", "public.composite-content"], ["odt"],
            ["application/vnd.oasis.opendocument.text"], "OpenDocument text"),
        t(
            "org.oasis-open.opendocument.spreadsheet", ["public.zip-archive", "public.spreadsheet"], ["ods"],
            ["application/vnd.oasis.opendocument.spreadsheet"], "OpenDocument spreadsheet"),
        t(
            "org.oasis-open.opendocument.presentation", ["public.zip-archive", "public.presentation"], ["odp"],
            ["application/vnd.oasis.opendocument.presentation"], "OpenDocument presentation"),
        t(
            "com.apple.iwork.pages.pages", ["public.data", "public.composite-content"], ["pages"],
            desc: "Pages document"),
        t(
            "com.apple.iwork.numbers.numbers", ["public.data", "public.spreadsheet"], ["numbers"],
            desc: "Numbers spreadsheet"),
        t(
            "com.apple.iwork.keynote.key", ["public.data", "public.presentation"], ["key"], desc: "Keynote presentation"
        ),
        t(
            "org.idpf.epub-container", ["public.zip-archive", "public.composite-content"], ["epub"],
            ["application/epub+zip"],
            "EPUB book"),
        t(
            "com.apple.webarchive", ["public.data", "public.composite-content"], ["webarchive"],
            ["application/x-webarchive"],
            "web archive"),
    ]

    static let archives: [DeclaredType] = [
        t("public.archive", ["public.data"], desc: "archive"),
        t("public.disk-image", ["public.archive"], desc: "disk image"),
        t("com.pkware.zip-archive", ["public.archive"], desc: "ZIP archive"),
        t(
            "public.zip-archive", ["com.pkware.zip-archive"], ["zip"],
            ["application/zip", "application/x-zip-compressed"],
            "ZIP archive"),
        t(
            "org.gnu.gnu-zip-archive", ["public.archive"], ["gz", "gzip"], ["application/gzip", "application/x-gzip"],
            "gzip archive"),
        t(
            "org.gnu.gnu-zip-tar-archive", ["org.gnu.gnu-zip-archive"], ["tgz", "tar.gz"],
            ["application/x-compressed-tar"],
            "gzipped tar archive"),
        t("public.tar-archive", ["public.archive"], ["tar"], ["application/x-tar"], "tar archive"),
        t("public.bzip2-archive", ["public.archive"], ["bz2", "bzip2"], ["application/x-bzip2"], "bzip2 archive"),
        t("org.tukaani.xz-archive", ["public.archive"], ["xz"], ["application/x-xz"], "xz archive"),
        t("org.7-zip.7-zip-archive", ["public.archive"], ["7z"], ["application/x-7z-compressed"], "7-Zip archive"),
        t(
            "com.rarlab.rar-archive", ["public.archive"], ["rar"],
            ["application/vnd.rar", "application/x-rar-compressed"],
            "RAR archive"),
        t("com.apple.disk-image-udif", ["public.disk-image"], ["dmg"], ["application/x-apple-diskimage"], "disk image"),
        t("public.iso-image", ["public.disk-image"], ["iso"], ["application/x-iso9660-image"], "ISO disk image"),
    ]
}
