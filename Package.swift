// swift-tools-version:6.0
// sharebroker: a local share-and-deep-link broker (JSON-RPC 2.0 over a Unix socket).
// Layers, dependencies pointing down only:
//   CShareSystem (C) <- ShareSystem;  ShareProtocol;  ShareRouting <- ShareProtocol, ShareSystem
//   ShareStore <- ShareProtocol, ShareSystem
//   ShareBrokerCore <- ShareProtocol, ShareSystem, ShareRouting, ShareStore
//   ShareClient <- ShareProtocol, ShareSystem;  ShareCommandLine (pure)
//   executables: sharebroker, shareclient, sharebroker-bench
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]
/// Release builds of the two tools link the Swift runtime and Foundation statically on Linux
/// (what `swift build --static-swift-stdlib` does, but without the flag): `shareclient open URL`
/// then starts about three times faster (no dynamic loading of libFoundation and the rest;
/// README "Performance"), and the binaries run where no Swift toolchain is installed. The
/// libraries are named because the objects' own link entries name the shared Foundation.
let staticTools: [LinkerSetting] = [
    .unsafeFlags(
        ["-static-stdlib"]
            + ["CoreFoundation", "_FoundationICU", "_FoundationCShims", "_FoundationCollections", "FoundationEssentials",
               "FoundationInternationalization", "swiftSynchronization"].flatMap { ["-Xlinker", "-l" + $0] },
        .when(platforms: [.linux], configuration: .release)),
]

/// The broker's own layers (none is part of a library product, so packages that depend on
/// ShareClient never build them) drop Swift's run-time exclusivity checks in release builds:
/// on the request path they were about 11 % of all instructions (callgrind: swift_beginAccess,
/// AccessSet::insert, swift_endAccess, the TLS lookup), mostly the loop's mutations of class
/// properties (journal batches, connection buffers). Debug builds, and so `swift test` and the
/// sanitizer runs, keep the checks.
let brokerLayers: [SwiftSetting] =
    strict + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "sharebroker",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "sharebroker", targets: ["SharebrokerTool"]),
        .executable(name: "shareclient", targets: ["ShareclientTool"]),
        .executable(name: "sharebroker-bench", targets: ["ShareBench"]),
        .library(name: "ShareClient", targets: ["ShareClient"]),
        .library(name: "ShareProtocol", targets: ["ShareProtocol"]),
    ],
    targets: [
        .target(name: "CShareSystem"),
        .target(name: "ShareProtocol", swiftSettings: strict),
        .target(name: "ShareSystem", dependencies: ["CShareSystem"], swiftSettings: strict),
        .target(name: "ShareRouting", dependencies: ["ShareProtocol", "ShareSystem"], swiftSettings: brokerLayers),
        .target(name: "ShareStore", dependencies: ["ShareProtocol", "ShareSystem", "CShareSystem"], swiftSettings: brokerLayers),
        .target(
            name: "ShareBrokerCore",
            dependencies: ["ShareProtocol", "ShareSystem", "ShareRouting", "ShareStore"],
            swiftSettings: brokerLayers),
        .target(name: "ShareClient", dependencies: ["ShareProtocol", "ShareSystem"], swiftSettings: strict),
        .target(name: "ShareCommandLine", swiftSettings: strict),
        .executableTarget(
            name: "SharebrokerTool",
            dependencies: ["ShareBrokerCore", "ShareCommandLine", "ShareClient", "ShareRouting"],
            swiftSettings: brokerLayers, linkerSettings: staticTools),
        .executableTarget(
            name: "ShareclientTool",
            dependencies: ["ShareClient", "ShareCommandLine", "ShareProtocol", "ShareSystem"],
            swiftSettings: strict, linkerSettings: staticTools),
        .executableTarget(
            name: "ShareBench",
            dependencies: ["ShareClient", "ShareProtocol", "ShareSystem", "ShareCommandLine", "ShareRouting", "ShareStore"],
            swiftSettings: strict),
        .testTarget(name: "ShareProtocolTests", dependencies: ["ShareProtocol"], swiftSettings: strict),
        .testTarget(name: "ShareRoutingTests", dependencies: ["ShareRouting"], swiftSettings: strict),
        .testTarget(
            name: "ShareStoreTests", dependencies: ["ShareStore", "ShareProtocol", "ShareSystem", "CShareSystem"],
            swiftSettings: strict),
        .testTarget(
            name: "ShareClientTests", dependencies: ["ShareClient", "ShareProtocol", "ShareBrokerCore", "ShareSystem"],
            swiftSettings: strict),
        .testTarget(name: "ShareCommandLineTests", dependencies: ["ShareCommandLine"], swiftSettings: strict),
        .testTarget(
            name: "ShareBrokerCoreTests",
            dependencies: ["ShareBrokerCore", "ShareClient", "ShareProtocol", "ShareSystem", "ShareRouting", "CShareSystem"],
            swiftSettings: strict),
    ]
)
