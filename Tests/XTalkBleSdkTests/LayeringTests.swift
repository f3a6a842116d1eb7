import Foundation
import Testing

/// The layering the README promises, read off the sources: the sans-I/O core
/// names no client, no backend and does no I/O; the simulated device shares
/// no parsing or UUIDs with the SDK it tests; the authentication SDK does not
/// depend on the BLE SDK.
@Suite("Layering: what each layer may name", .timeLimit(.minutes(1)))
struct LayeringTests {
    /// The repository's root, from this file's path (Tests/XTalkBleSdkTests/…).
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every Swift file below `folder`, with comments removed (a rule is about code, not prose).
    static func sources(_ folder: String) throws -> [(path: String, code: String)] {
        let base = root.appendingPathComponent(folder)
        let enumerator = try #require(FileManager.default.enumerator(atPath: base.path))
        var files: [(String, String)] = []
        for case let relative as String in enumerator where relative.hasSuffix(".swift") {
            let text = try String(contentsOf: base.appendingPathComponent(relative), encoding: .utf8)
            let code = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
                guard let comment = line.range(of: "//") else { return line }
                return line[..<comment.lowerBound]
            }.joined(separator: "\n")
            files.append((folder + "/" + relative, code))
        }
        return files
    }

    /// The places where a forbidden name appears in `folder`'s code.
    static func violations(in folder: String, of names: [String]) throws -> [String] {
        let files = try sources(folder)
        #expect(!files.isEmpty, "no Swift sources found in \(folder)")
        return files.flatMap { file in
            names.filter { file.code.contains($0) }.map { "\(file.path) names \($0)" }
        }
    }

    @Test("the sans-I/O core names no client and no backend, and does no I/O, reads no clock")
    func coreIsSansIO() throws {
        let found = try Self.violations(
            in: "Sources/XTalkBleSdk/Protocol",
            of: [
                "XTalkBleClient", "BleBackend", "DispatchQueue", "FileManager", "FileHandle", "Thread.", "URLSession",
                "ProcessInfo", "ContinuousClock", "SuspendingClock", "Date()", "Task.sleep", "print(",
            ])
        #expect(found.isEmpty, "\(found)")
    }

    @Test("the simulated device has its own framing, parsing, codec, hex and GATT UUIDs")
    func simulatorIsIndependent() throws {
        let found = try Self.violations(
            in: "Sources/XTalkSimulator",
            of: [
                "LineFramer", "LineClassifier", "XTalkDeviceIDCodec", "Hex.", "AtInputValidation", "XTalkGatt",
                "encodeText(",
            ])
        #expect(found.isEmpty, "\(found)")
        // The host's one hex codec, XTalkSupport's `Hex`, is in reach through XTalkBleSdk's re-export of
        // XTalkSupport (package access): the identifier must not appear at all, qualified or not.
        let namingHex = try Self.sources("Sources/XTalkSimulator").filter { file in
            file.code.split { !($0.isLetter || $0.isNumber || $0 == "_") }.contains("Hex")
        }.map(\.path)
        #expect(namingHex.isEmpty, "name XTalkSupport's Hex: \(namingHex)")
    }

    @Test("the authentication SDK does not import the BLE SDK")
    func authDoesNotImportBle() throws {
        let found = try Self.violations(in: "Sources/XTalkDeviceAuthSdk", of: ["import XTalkBleSdk", "XTalkBleClient"])
        #expect(found.isEmpty, "\(found)")
    }

    @Test("the backend seam and the backends assume no device family: the GATT profile is a value they are given")
    func backendsAreProfileAgnostic() throws {
        let xTalk = ["XTalkGatt", "GattProfile.xTalk", ".xTalk", "6E58A1", "XTalkAtEncoding", "AtChannelStateMachine"]
        let found = try Self.violations(in: "Sources/XTalkBleSdk/Backends", of: xTalk)
        #expect(found.isEmpty, "\(found)")
        // The connection machine takes its profile as a value, too.
        let machine = try Self.sources("Sources/XTalkBleSdk/Protocol")
            .filter { $0.path.hasSuffix("/ConnectionStateMachine.swift") }
        #expect(machine.count == 1)
        for file in machine {
            #expect(!file.code.contains("XTalkGatt."), "\(file.path) names xTalk's UUIDs instead of its profile's")
        }
    }
}
