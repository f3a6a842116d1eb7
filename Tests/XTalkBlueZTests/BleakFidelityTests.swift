import Foundation
import Testing
import XTalkTestSupport
import XTalkFakeBlueZ

/// Where bleak is installed (`Tests/BlueZFidelity/setup-venv`), if it is.
enum Bleak {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static var python: String {
        ProcessInfo.processInfo.environment["XTALK_BLEAK_PYTHON"]
            ?? packageRoot.appendingPathComponent(".build/bleak-venv/bin/python").path
    }
    static let script = packageRoot.appendingPathComponent("Tests/BlueZFidelity/bleak_check.py").path
    static var available: Bool { FileManager.default.isExecutableFile(atPath: python) }
    static let missing: Comment =
        "skipped: bleak is not installed (Tests/BlueZFidelity/setup-venv makes .build/bleak-venv with pinned packages)"

    /// The xtalk binary built next to the tests.
    static var xtalk: String? { BuiltProducts.xtalk }
}

/// On CI (`XTALK_REQUIRE_BLUEZ=1`), the BlueZ suites may not skip: what they
/// need must be there.
@Test func bluezSuitesCanRunWhereRequired() {
    guard ProcessInfo.processInfo.environment["XTALK_REQUIRE_BLUEZ"] == "1" else { return }
    #expect(dbusDaemonAvailable, "XTALK_REQUIRE_BLUEZ=1 but dbus-daemon was not found")
    #expect(Bleak.available, "XTALK_REQUIRE_BLUEZ=1 but bleak is not installed at \(Bleak.python)")
}

/// The fake BlueZ's fidelity, judged by a BlueZ client nobody here wrote:
/// bleak scans (name, RSSI, manufacturer data), connects, reads the GATT
/// database, subscribes, writes with and without response and gets the
/// device's reply, writes through AcquireWrite's socket (a packet of MTU − 3
/// arrives, a longer one is dropped), sees InProgress retried, a second session, link loss and
/// a reconnect, against `xtalk fake-bluez` in another process.
@Suite(
    "The fake BlueZ, checked by bleak",
    .enabled(if: dbusDaemonAvailable, dbusMissing), .enabled(if: Bleak.available, Bleak.missing),
    .timeLimit(.minutes(3)))
struct BleakFidelityTests {
    @Test("bleak_check.py passes every check against xtalk fake-bluez")
    func bleakAgainstTheFake() async throws {
        let xtalk = try #require(Bleak.xtalk, "the xtalk binary is built next to the tests")
        let fake = try ChildProcess(xtalk, ["fake-bluez", "--firmware-encoding", "plain"])
        defer { fake.stopGracefully() }
        let line = try #require(await fake.readLine(timeout: .seconds(30)), "xtalk fake-bluez printed its bus address")
        #expect(line.hasPrefix("DBUS_SYSTEM_BUS_ADDRESS="))
        fake.discardFurtherOutput()
        let address = String(line.dropFirst("DBUS_SYSTEM_BUS_ADDRESS=".count))
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
        let check = try ChildProcess(Bleak.python, [Bleak.script, "check"], environment: environment)
        defer { check.stop() }
        let output = await check.readToEnd(timeout: .seconds(120))
        let status = await check.wait(timeout: .seconds(10))
        #expect(status == 0, "bleak_check.py exited \(status.map(String.init) ?? "late"):\n\(output)")
        let passed = output.split(separator: "\n").filter { $0.hasPrefix("PASS ") }.count
        #expect(passed == 14, "every check ran:\n\(output)")
        #expect(!output.contains("FAIL "), "\(output)")
    }
}
