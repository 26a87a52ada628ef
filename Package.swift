// swift-tools-version:6.0
import PackageDescription

/// Release builds keep the compile-time exclusivity checks but drop the run-time ones, which cost ~5 % of the
/// request path (a thread-local access set per class property access); debug builds, which every test runs,
/// keep both. Release builds also optimise across modules: the request path crosses from the service into the
/// runtime on every call, and without it those calls lose inlining and generic specialisation.
let releaseFlags: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked", "-cross-module-optimization"], .when(configuration: .release)),
]

/// X.509 chains, ECDSA and DER: what signed App Store data is verified (and the fake signs) with.
let appleCrypto: [Target.Dependency] = [
    .product(name: "X509", package: "swift-certificates"),
    .product(name: "Crypto", package: "swift-crypto"),
    .product(name: "SwiftASN1", package: "swift-asn1"),
]

let package = Package(
    name: "entitlement-service",
    products: [
        .executable(name: "entitlement-service", targets: ["EntitlementService"]),
        .executable(name: "verify-bench", targets: ["VerifyBench"]),
        .executable(name: "signed-bench", targets: ["SignedBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
    ],
    targets: [
        .systemLibrary(
            name: "CUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev", "libhttp-parser-dev"])]
        ),
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // RFC 3339 and civil-calendar arithmetic, shared by the model and the database codec. Pure Swift.
        .target(name: "Timestamps", swiftSettings: releaseFlags),
        // The domain: catalog, Apple payloads, evaluation. Pure Swift, no C, no I/O.
        .target(name: "EntitlementModel", dependencies: ["Timestamps"], swiftSettings: releaseFlags),
        // The loop, HTTP server, PostgreSQL and curl clients, logging and metrics: nothing about entitlements.
        .target(
            name: "ServiceRuntime",
            dependencies: ["CUV", "CPostgres", "CCurl", "Timestamps"],
            swiftSettings: releaseFlags
        ),
        // Apple's interfaces as a client sees them: verifyReceipt and signed (JWS) payload verification.
        .target(
            name: "AppStore",
            dependencies: ["ServiceRuntime", "EntitlementModel"] + appleCrypto,
            swiftSettings: releaseFlags
        ),
        // A fake App Store for tests, benchmarks and demos (`entitlement-service fake-app-store`).
        .target(
            name: "FakeAppStore",
            dependencies: ["ServiceRuntime", "EntitlementModel"] + appleCrypto,
            swiftSettings: releaseFlags
        ),
        // The service: routes, stores, workers, configuration and `main`.
        .executableTarget(
            name: "EntitlementService",
            dependencies: [
                "ServiceRuntime", "AppStore", "FakeAppStore", "EntitlementModel",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            resources: [
                .embedInCode("openapi.json"),
                .embedInCode("Console/console.html"), .embedInCode("Console/console.css"), .embedInCode("Console/console.js"),
            ],
            swiftSettings: releaseFlags,
            // jemalloc in place of glibc's malloc in the release service: a cold entitlements read makes a few
            // dozen mid-sized allocations (libpq's results, their copies, the answer), and glibc's bins and
            // consolidation cost 6 % of its CPU (bench/entitlements/compare.sh; README, "The allocator").
            linkerSettings: [.linkedLibrary("jemalloc", .when(configuration: .release))]
        ),
        // bench/verify's driver: many verifyReceipt calls at once on one loop.
        .executableTarget(
            name: "VerifyBench",
            dependencies: ["ServiceRuntime", "AppStore", "FakeAppStore", "EntitlementModel"],
            swiftSettings: releaseFlags
        ),
        // bench/signed's driver: signed transactions verified per second, against bare ES256 verification.
        .executableTarget(
            name: "SignedBench",
            dependencies: ["AppStore"] + appleCrypto,
            swiftSettings: releaseFlags
        ),
        .testTarget(
            name: "EntitlementTests",
            dependencies: [
                "EntitlementService", "VerifyBench", "ServiceRuntime", "AppStore", "FakeAppStore", "EntitlementModel", "Timestamps",
            ] + appleCrypto
        ),
    ],
    swiftLanguageModes: [.v6]
)
