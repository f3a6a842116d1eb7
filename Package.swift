// swift-tools-version:6.0
//
// The xTalk Swift SDK: talk to xTalk radios over Bluetooth Low Energy.
//
// Module graph (arrow = imports), with no cycle:
//   XTalkSupport         what both SDKs share: observable state, transport error classes
//   XTalkBleSdk        → XTalkSupport (re-exported): client, sans-I/O core, backend seam
//   XTalkCrypto          Ed25519 + CSPRNG seam (CryptoKit / system libcrypto)
//   XTalkDeviceAuthSdk → XTalkSupport (re-exported), XTalkCrypto
//   XTalkSimulator     → XTalkBleSdk (the backend seam only), XTalkCrypto
//   XTalkCLI           → the SDKs and the simulator: the tool's commands, testable in-process
//   xtalk              → XTalkCLI (the executable: real clock, stdin/stdout, signals)
//
// No dependency outside the Swift toolchain. On Linux, libcrypto.so.3 is
// loaded at run time (dlopen), so no -dev package and no linker flags are needed.

import PackageDescription

let package = Package(
    name: "xtalk-swift-sdk",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "XTalkBleSdk", targets: ["XTalkBleSdk"]),
        .library(name: "XTalkDeviceAuthSdk", targets: ["XTalkDeviceAuthSdk"]),
        .library(name: "XTalkSimulator", targets: ["XTalkSimulator"]),
        .executable(name: "xtalk", targets: ["xtalk"]),
    ],
    targets: [
        .target(name: "XTalkSupport"),
        .target(name: "XTalkBleSdk", dependencies: ["XTalkSupport"]),
        .target(name: "XTalkCrypto"),
        .target(name: "XTalkDeviceAuthSdk", dependencies: ["XTalkSupport", "XTalkCrypto"]),
        .target(name: "XTalkSimulator", dependencies: ["XTalkBleSdk", "XTalkCrypto"]),
        .target(
            name: "XTalkCLI",
            dependencies: ["XTalkBleSdk", "XTalkDeviceAuthSdk", "XTalkSimulator"]
        ),
        .executableTarget(name: "xtalk", dependencies: ["XTalkCLI"]),
        .testTarget(name: "XTalkBleSdkTests", dependencies: ["XTalkBleSdk", "XTalkSimulator"]),
        .testTarget(name: "XTalkBleClientTests", dependencies: ["XTalkBleSdk", "XTalkSimulator"]),
        .testTarget(name: "XTalkCLITests", dependencies: ["XTalkCLI", "xtalk", "XTalkBleSdk", "XTalkSimulator"]),
        .testTarget(name: "XTalkCryptoTests", dependencies: ["XTalkCrypto"]),
        .testTarget(
            name: "XTalkDeviceAuthSdkTests",
            dependencies: ["XTalkDeviceAuthSdk", "XTalkBleSdk", "XTalkSimulator", "XTalkCrypto"]
        ),
        .testTarget(name: "XTalkSimulatorTests", dependencies: ["XTalkSimulator", "XTalkBleSdk", "XTalkCrypto"]),
    ],
    swiftLanguageModes: [.v6]
)
