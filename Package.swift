// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "entitlement-service",
    products: [
        .executable(name: "entitlement-service", targets: ["EntitlementService"]),
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
        .target(name: "EntitlementModel"),
        .executableTarget(
            name: "EntitlementService",
            dependencies: [
                "CUV", "CPostgres", "CCurl", "EntitlementModel",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            resources: [.embedInCode("openapi.json")],
            swiftSettings: [
                // Release builds keep the compile-time exclusivity checks but drop the run-time ones, which
                // cost ~5 % of the request path (a thread-local access set per class property access).
                // Debug builds, which every test runs, keep both.
                .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
            ]
        ),
        .testTarget(
            name: "EntitlementTests",
            dependencies: [
                "EntitlementService", "EntitlementModel",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
