// swift-tools-version:6.0
// Inkwire: a reliable whiteboard transport daemon.
// Pure core (InkCodec, InkProtocol, InkRelay) imports no Foundation, Glibc or libuv;
// C libraries come from Debian as systemLibrary shims (see deploy/apt-packages.txt).
import PackageDescription

/// Release builds of the daemon's per-datagram modules drop the runtime exclusivity checks
/// (swift_beginAccess/endAccess and their thread-local access set on every class-property
/// access the compiler cannot prove: ~3 % of the daemon's CPU in the 50 x 40 fan-out).
/// Debug builds, and so every test, keep them.
let releaseExclusivityUnchecked: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "Inkwire",
    products: [
        .library(name: "InkCodec", targets: ["InkCodec"]),
        .library(name: "InkProtocol", targets: ["InkProtocol"]),
        .library(name: "InkRelay", targets: ["InkRelay"]),
        .library(name: "InkClient", targets: ["InkClient"]),
        .library(name: "InkLegacy", targets: ["InkLegacy"]),
        .executable(name: "inkwired", targets: ["inkwired"]),
        .executable(name: "inkwire", targets: ["inkwire"]),
        .executable(name: "inkwire-sim", targets: ["inkwire-sim"]),
        .executable(name: "inkwire-bench", targets: ["inkwire-bench"]),
    ],
    targets: [
        // C libraries from Debian, one shim each.
        .systemLibrary(name: "CLibUV", path: "Sources/CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSodium", path: "Sources/CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CSSL", path: "Sources/CSSL", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CENet", path: "Sources/CENet", pkgConfig: "libenet", providers: [.apt(["libenet-dev"])]),
        .systemLibrary(name: "CMosquitto", path: "Sources/CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CPNG", path: "Sources/CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .systemLibrary(name: "CTurboJPEG", path: "Sources/CTurboJPEG", pkgConfig: "libturbojpeg", providers: [.apt(["libturbojpeg0-dev"])]),

        // The build's version and commit (VERSION, git), stamped before every build.
        .plugin(name: "VersionStamp", capability: .buildTool(), path: "Plugins/VersionStamp"),
        .target(name: "InkVersion", plugins: ["VersionStamp"]),

        // Pure, sans-IO core.
        .target(name: "InkCodec", swiftSettings: releaseExclusivityUnchecked),
        .target(name: "InkProtocol", dependencies: ["InkCodec"], swiftSettings: releaseExclusivityUnchecked),
        .target(name: "InkRelay", dependencies: ["InkCodec", "InkProtocol"], swiftSettings: releaseExclusivityUnchecked),
        .target(name: "InkSim", dependencies: ["InkProtocol"]),
        .target(name: "InkClient", dependencies: ["InkCodec", "InkProtocol"]),
        /// HTTP request heads and RFC 6455 WebSockets for the web listener (docs/protocol.md 8.4).
        .target(name: "InkWeb"),
        /// The browser client (web/), built into the binary at build time by the EmbedWebAssets plugin.
        .executableTarget(name: "web-embed"),
        .plugin(name: "EmbedWebAssets", capability: .buildTool(), dependencies: ["web-embed"]),
        .target(name: "InkWebAssets", plugins: ["EmbedWebAssets"]),
        .target(name: "InkLegacy", dependencies: ["InkCodec", "InkProtocol"]),

        // IO and storage.
        .target(name: "InkStore", dependencies: ["InkCodec", "CSQLite"]),
        .target(name: "InkUV", dependencies: ["CLibUV"], swiftSettings: releaseExclusivityUnchecked),
        /// Background images: a JPEG or PNG checked by decoding it (libturbojpeg, libpng).
        .target(name: "InkImage", dependencies: ["CPNG", "CTurboJPEG"]),
        // The primitives of sealed sessions, from OpenSSL and libsodium (injected into the pure core).
        .target(name: "InkCrypto", dependencies: ["InkProtocol", "CCrypto", "CSodium"], swiftSettings: releaseExclusivityUnchecked),
        .target(name: "InkDaemon", dependencies: ["InkCodec", "InkProtocol", "InkRelay", "InkLegacy", "InkStore", "InkUV", "InkVersion", "InkCrypto", "InkWeb", "InkWebAssets", "InkImage", "CCrypto", "CSSL", "CMosquitto"],
                swiftSettings: releaseExclusivityUnchecked),

        // Programs.
        .executableTarget(name: "inkwired", dependencies: ["InkDaemon"]),
        .executableTarget(name: "inkwire", dependencies: ["InkCodec", "InkProtocol", "InkUV", "InkDaemon", "InkClient", "InkVersion", "InkCrypto", "InkImage", "InkWeb"]),
        .executableTarget(name: "inkwire-sim", dependencies: ["InkSim", "InkProtocol"]),
        .target(name: "MQTTChaos", path: "Benchmarks/MQTTChaos"),
        // The HYWhiteboard app, written from its source: the fixture of every legacy test.
        .target(name: "LegacyAppModel", dependencies: ["InkCodec", "InkProtocol", "InkLegacy", "InkRelay", "InkSim"], path: "Benchmarks/LegacyAppModel"),
        .target(name: "InkBenchSupport", dependencies: ["CENet", "InkUV", "InkWeb", "InkImage", "MQTTChaos", "LegacyAppModel", "InkCodec", "InkProtocol", "InkSim"], path: "Benchmarks/InkBenchSupport"),
        .executableTarget(
            name: "inkwire-bench",
            dependencies: ["InkCodec", "InkProtocol", "InkSim", "InkUV", "InkDaemon", "CENet", "InkStore", "InkRelay", "InkClient", "InkCrypto", "InkBenchSupport", "MQTTChaos", "InkLegacy", "LegacyAppModel"],
            path: "Benchmarks/inkwire-bench"
        ),

        // Tests, one folder per module.
        .testTarget(name: "InkCodecTests", dependencies: ["InkCodec"]),
        .testTarget(name: "InkProtocolTests", dependencies: ["InkProtocol", "InkCodec", "InkCrypto"]),
        .testTarget(name: "InkSimTests", dependencies: ["InkSim", "InkProtocol"]),
        .testTarget(name: "InkRelayTests", dependencies: ["InkRelay", "InkCodec", "InkProtocol"]),
        .testTarget(name: "InkStoreTests", dependencies: ["InkStore", "InkCodec"]),
        .executableTarget(name: "inkstore-torture", dependencies: ["InkStore"], path: "Tests/InkStoreTorture"),
        .testTarget(name: "InkUVTests", dependencies: ["InkUV"]),
        .testTarget(name: "InkDaemonTests", dependencies: ["InkDaemon", "InkCodec", "InkProtocol", "InkStore", "InkVersion", "InkCrypto", "InkImage", "InkBenchSupport", "MQTTChaos", "LegacyAppModel"]),
        .testTarget(name: "InkLegacyTests", dependencies: ["InkLegacy", "LegacyAppModel", "InkCodec", "InkProtocol", "InkRelay"]),
        .testTarget(name: "InkClientTests", dependencies: ["InkClient", "InkRelay", "InkCodec", "InkProtocol", "InkCrypto"]),
        .testTarget(name: "PurityTests"),
        .testTarget(name: "InkWebTests", dependencies: ["InkWeb"]),
        .testTarget(name: "InkImageTests", dependencies: ["InkImage"]),
        .testTarget(name: "InkwireBenchTests", dependencies: ["inkwire-bench", "InkSim", "InkProtocol", "InkUV"]),
        .testTarget(name: "InkBenchSupportTests", dependencies: ["InkBenchSupport"]),
        .testTarget(name: "MQTTChaosTests", dependencies: ["MQTTChaos"]),
    ]
)
