import Foundation
import Testing

/// Issue 16, "Shipping on iOS": each SDK product ships a privacy manifest
/// (`PrivacyInfo.xcprivacy`, a resource of its target). No tracking, no
/// collected data, and every required-reason API the product's code uses
/// declared: the declared categories must equal those whose APIs appear in
/// the sources the product is built from.
@Suite("Privacy manifests: one per SDK product, true to the code")
struct PrivacyManifestTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Apple's required-reason API categories and the names that use them
    /// ("Describing use of required reason API").
    static let categories: [String: [String]] = [
        "NSPrivacyAccessedAPICategoryFileTimestamp": [
            "creationDate", "modificationDate", "fileModificationDate", "contentModificationDateKey",
            "creationDateKey", "getattrlist", "fstat(", "stat(", "lstat(",
        ],
        "NSPrivacyAccessedAPICategorySystemBootTime": ["systemUptime", "mach_absolute_time"],
        "NSPrivacyAccessedAPICategoryDiskSpace": [
            "volumeAvailableCapacity", "systemFreeSize", "systemSize", "statfs(", "statvfs(",
        ],
        "NSPrivacyAccessedAPICategoryActiveKeyboards": ["activeInputModes"],
        "NSPrivacyAccessedAPICategoryUserDefaults": ["UserDefaults"],
    ]

    /// Each shipped product: its target and the targets its code comes from.
    static let products: [(target: String, sources: [String])] = [
        ("XTalkBleSdk", ["XTalkBleSdk", "XTalkSupport"]),
        ("XTalkDeviceAuthSdk", ["XTalkDeviceAuthSdk", "XTalkSupport", "XTalkCrypto", "XTalkLibCrypto"]),
    ]

    static func sourceText(of target: String) throws -> String {
        let directory = root.appendingPathComponent("Sources").appendingPathComponent(target)
        let files =
            FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        #expect(!files.isEmpty, "sources of \(target)")
        return try files.map { try String(contentsOf: $0, encoding: .utf8) }.joined(separator: "\n")
    }

    @Test("each product's manifest: no tracking, no collected data, the required-reason APIs its code uses")
    func manifests() throws {
        for product in Self.products {
            let url = Self.root.appendingPathComponent("Sources/\(product.target)/PrivacyInfo.xcprivacy")
            let data = try Data(contentsOf: url)
            let plist = try #require(
                try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
            #expect(plist["NSPrivacyTracking"] as? Bool == false, "\(product.target)")
            #expect((plist["NSPrivacyTrackingDomains"] as? [Any])?.isEmpty == true, "\(product.target)")
            #expect((plist["NSPrivacyCollectedDataTypes"] as? [Any])?.isEmpty == true, "\(product.target)")
            let declared = Set(
                (plist["NSPrivacyAccessedAPITypes"] as? [[String: Any]] ?? []).compactMap {
                    $0["NSPrivacyAccessedAPIType"] as? String
                })
            let code = try product.sources.map(Self.sourceText).joined(separator: "\n")
            let used = Set(Self.categories.filter { _, names in names.contains { code.contains($0) } }.keys)
            #expect(declared == used, "\(product.target): declared \(declared), used \(used)")
            // Every package manifest resource line names the file, so it ships.
            let package = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
            #expect(package.contains("resources: [.copy(\"PrivacyInfo.xcprivacy\")]"))
        }
    }
}
