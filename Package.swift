// swift-tools-version:6.0
//
// The xTalk Swift SDK: talk to xTalk radios over Bluetooth Low Energy.
//
// Module graph (arrow = imports), with no cycle:
//   XTalkSupport         what both SDKs share: observable state, transport error classes, hex
//   XTalkDBus            the D-Bus wire protocol in Swift (sans-I/O core + one socket driver)
//   XTalkBleSdk        → XTalkSupport (re-exported), XTalkDBus: client, sans-I/O core, backend seam,
//                        the CoreBluetooth backend (against a stand-in on Linux), the BlueZ backend
//   XTalkLibCrypto       the system libcrypto's Ed25519, loaded at run time (Linux)
//   XTalkCrypto        → XTalkLibCrypto (Linux): Ed25519 + CSPRNG seam (CryptoKit / libcrypto)
//   XTalkDeviceAuthSdk → XTalkSupport (re-exported), XTalkCrypto
//   XTalkSimulator     → XTalkBleSdk (the backend seam only), XTalkCrypto
//   XTalkBleBridge     → XTalkBleSdk (the backend seam), XTalkSupport (hex): seed 004's low-level transport
//                        bridge for OneKey's JavaScript SDK (sans-I/O device machine, driver, JSON router)
//   XTalkBleBridgeWebKit → XTalkBleBridge, WebKit (a stand-in on Linux): the bridge's WKWebView host and the
//                        JavaScript plugin file it ships
//   XTalkFakeBlueZ     → XTalkDBus, the simulator: a BlueZ of our own on a private dbus-daemon (tests, bench)
//   XTalkChaos         → the SDKs and the simulator: seeded chaos scenarios (tests, `xtalk chaos`)
//   XTalkCLI           → the SDKs, the bridge, the simulator, the chaos engine and the fake BlueZ: the tool's commands,
//                        testable in-process
//   xtalk              → XTalkCLI (the executable: real clock, stdin/stdout, signals)
//
// No dependency outside the Swift toolchain. On Linux, libcrypto.so.3 is
// loaded at run time (dlopen), so no -dev package and no linker flags are needed.
//
// Apple code on Linux. The CoreBluetooth backend compiles on every Linux build
// against StandIns/CoreBluetooth (the same Swift-visible API, driven by the
// simulator in tests). With XTALK_APPLE_STANDINS=1 in the environment (a CI
// step), the Apple-only lines (Combine, CryptoKit, Security, os, and SwiftUI
// in the documentation's samples) compile too,
// against stand-ins of those frameworks, and the CoreBluetooth stand-in takes
// the name CoreBluetooth, so that `canImport` selects the Apple code paths.

import PackageDescription

let appleStandIns = Context.environment["XTALK_APPLE_STANDINS"] == "1"
let onLinux = TargetDependencyCondition.when(platforms: [.linux])

/// The CoreBluetooth stand-in's module name.
let coreBluetoothStandIn = appleStandIns ? "CoreBluetooth" : "XTalkCoreBluetoothStandIn"
/// The WebKit stand-in's module name.
let webKitStandIn = appleStandIns ? "WebKit" : "XTalkWebKitStandIn"

/// Stand-ins of Apple frameworks, only in the Apple stand-in build.
let appleFrameworkStandIns: [Target] =
    appleStandIns
    ? [
        .target(name: "Combine", path: "StandIns/Combine"),
        .target(name: "CryptoKit", dependencies: ["XTalkLibCrypto"], path: "StandIns/CryptoKit"),
        .target(name: "Security", path: "StandIns/Security"),
        .target(name: "os", path: "StandIns/os"),
        .target(name: "SwiftUI", dependencies: ["Combine"], path: "StandIns/SwiftUI"),
    ] : []

func standIns(_ names: String...) -> [Target.Dependency] {
    appleStandIns ? names.map { .target(name: $0, condition: onLinux) } : []
}

let package = Package(
    name: "xtalk-swift-sdk",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "XTalkBleSdk", targets: ["XTalkBleSdk"]),
        .library(name: "XTalkDeviceAuthSdk", targets: ["XTalkDeviceAuthSdk"]),
        .library(name: "XTalkSimulator", targets: ["XTalkSimulator"]),
        .library(name: "XTalkBleBridge", targets: ["XTalkBleBridge"]),
        .library(name: "XTalkBleBridgeWebKit", targets: ["XTalkBleBridgeWebKit"]),
        .executable(name: "xtalk", targets: ["xtalk"]),
    ],
    targets: [
        .target(name: "XTalkSupport", dependencies: standIns("Combine")),
        .target(name: "XTalkDBus"),
        .target(name: coreBluetoothStandIn, path: "StandIns/CoreBluetooth"),
        .target(
            name: "XTalkBleSdk",
            dependencies: ["XTalkSupport", "XTalkDBus", .target(name: coreBluetoothStandIn, condition: onLinux)]
                + standIns("Combine", "os"),
            // Apple requires a privacy manifest from SDKs (PrivacyManifestTests checks it).
            resources: [.copy("PrivacyInfo.xcprivacy")]
        ),
        .target(name: "XTalkLibCrypto"),
        .target(
            name: "XTalkCrypto",
            dependencies: [.target(name: "XTalkLibCrypto", condition: onLinux)] + standIns("CryptoKit", "Security")
        ),
        .target(
            name: "XTalkDeviceAuthSdk", dependencies: ["XTalkSupport", "XTalkCrypto"] + standIns("Combine", "os"),
            resources: [.copy("PrivacyInfo.xcprivacy")]
        ),
        .target(
            name: "XTalkSimulator",
            dependencies: ["XTalkBleSdk", "XTalkCrypto", .target(name: coreBluetoothStandIn, condition: onLinux)]
        ),
        .target(name: "XTalkBleBridge", dependencies: ["XTalkSupport", "XTalkBleSdk"]),
        .target(name: webKitStandIn, path: "StandIns/WebKit"),
        .target(
            name: "XTalkBleBridgeWebKit",
            dependencies: ["XTalkBleBridge", "XTalkBleSdk", .target(name: webKitStandIn, condition: onLinux)],
            resources: [.copy("Resources/xtalk-lowlevel-plugin.js")]
        ),
        .target(name: "XTalkFakeBlueZ", dependencies: ["XTalkDBus", "XTalkBleSdk", "XTalkSimulator"]),
        .target(name: "XTalkChaos", dependencies: ["XTalkBleSdk", "XTalkDeviceAuthSdk", "XTalkSimulator"]),
        .target(
            name: "XTalkCLI",
            dependencies: [
                "XTalkBleSdk", "XTalkDeviceAuthSdk", "XTalkSimulator", "XTalkCrypto", "XTalkChaos", "XTalkFakeBlueZ",
                "XTalkDBus", "XTalkBleBridge",
            ]
        ),
        .executableTarget(name: "xtalk", dependencies: ["XTalkCLI"]),
        .target(name: "XTalkTestSupport", dependencies: ["XTalkSimulator"], path: "Tests/XTalkTestSupport"),
        // Reads the compiler's index store through the toolchain's libIndexStore (loaded at run time), so the
        // API coverage matrix knows exactly which public symbols each test refers to.
        .target(name: "XTalkIndexStoreReader", path: "Tests/XTalkIndexStoreReader"),
        .testTarget(name: "XTalkBleSdkTests", dependencies: ["XTalkBleSdk", "XTalkSimulator", "XTalkTestSupport"]),
        .testTarget(
            name: "XTalkBleClientTests",
            dependencies: [
                "XTalkBleSdk", "XTalkSimulator", "XTalkTestSupport",
                .target(name: coreBluetoothStandIn, condition: onLinux),
            ]
        ),
        .testTarget(
            name: "XTalkCLITests",
            dependencies: ["XTalkCLI", "xtalk", "XTalkBleSdk", "XTalkSimulator", "XTalkFakeBlueZ", "XTalkTestSupport"]),
        .testTarget(
            name: "XTalkCryptoTests",
            dependencies: [
                "XTalkCrypto", "XTalkSimulator", "XTalkTestSupport",
                .target(name: "XTalkLibCrypto", condition: onLinux),
            ]),
        .testTarget(
            name: "XTalkDeviceAuthSdkTests",
            dependencies: ["XTalkDeviceAuthSdk", "XTalkBleSdk", "XTalkSimulator", "XTalkCrypto", "XTalkTestSupport"]
        ),
        .testTarget(name: "XTalkChaosTests", dependencies: ["XTalkChaos", "XTalkBleSdk", "XTalkSimulator"]),
        .testTarget(name: "XTalkDBusTests", dependencies: ["XTalkDBus", "XTalkFakeBlueZ", "XTalkTestSupport"]),
        .testTarget(
            name: "XTalkBlueZTests",
            dependencies: [
                "XTalkBleSdk", "XTalkDeviceAuthSdk", "XTalkSimulator", "XTalkFakeBlueZ", "XTalkDBus", "xtalk",
                "XTalkTestSupport",
            ]
        ),
        .testTarget(
            name: "XTalkBleBridgeTests",
            dependencies: [
                "XTalkBleBridge", "XTalkBleBridgeWebKit", "XTalkBleSdk", "XTalkSimulator", "XTalkTestSupport",
                "XTalkFakeBlueZ", "xtalk", .target(name: webKitStandIn, condition: onLinux),
            ]),
        .testTarget(
            name: "XTalkSimulatorTests",
            dependencies: ["XTalkSimulator", "XTalkBleSdk", "XTalkCrypto", "XTalkTestSupport"]
        ),
        // The documentation's code samples (Snippets/), compiled, and the checks that keep the articles true.
        .testTarget(
            name: "XTalkDocumentationTests",
            dependencies: [
                "XTalkBleSdk", "XTalkDeviceAuthSdk", "XTalkSimulator", "XTalkIndexStoreReader", "XTalkBleBridgeWebKit",
                "XTalkTestSupport", .target(name: webKitStandIn, condition: onLinux),
            ] + standIns("Combine", "SwiftUI")),
    ] + appleFrameworkStandIns,
    swiftLanguageModes: [.v6]
)
