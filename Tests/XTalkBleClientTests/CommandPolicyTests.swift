import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

/// Issue 14, item 4: `.automatic` completes by command policy.
@Suite("Command policy: AT+RST holds the channel until the radio is ready again", .timeLimit(.minutes(5)))
@MainActor
struct CommandPolicyTests {
    @Test("AT+RST followed at once by AT+VER?: the version is answered, not lost in the reboot")
    func resetThenVersion() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let client = harness.client
        let reset = harness.start { try await client.runAtCommand("AT+RST") }
        let version = harness.start { try await client.runAtCommand("AT+VER?") }
        #expect(try await harness.run { try await reset.value } == ["OK"])
        #expect(harness.atLines.contains("+READY"), "the reset completed at +READY")
        #expect(try await harness.run { try await version.value } == ["+VER:2.1.0", "OK"])
        #expect(harness.peripheral.processedCommands.suffix(2) == ["AT+RST", "AT+VER?"])
        await harness.finish()
    }

    @Test("sendAtCommandNoWait(\"AT+RST\"): its window lasts until +READY, so the next command is answered")
    func noWaitResetThenVersion() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let client = harness.client
        try client.sendAtCommandNoWait("AT+RST")
        let version = harness.start { try await client.runAtCommand("AT+VER?") }
        await harness.advance(.milliseconds(100))
        #expect(harness.atLines.contains("OK") && !harness.atLines.contains("+READY"))
        #expect(throws: XTalkBleError.busy) { try client.sendAtCommandNoWait("AT") }
        #expect(try await harness.run { try await version.value } == ["+VER:2.1.0", "OK"])
        #expect(harness.atLines.contains("+READY"))
        #expect(harness.peripheral.processedCommands.suffix(2) == ["AT+RST", "AT+VER?"])
        await harness.finish()
    }

    @Test("a radio that never reports ready fails AT+RST with .timeout; the next command still runs")
    func resetNeverReady() async throws {
        var device = ClientHarness.fastDevice()
        device.firmware.resetDuration = .seconds(30)
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        let client = harness.client
        let error = await harness.error { try await client.runAtCommand("AT+RST", timeoutMs: 1_000) }
        #expect(error as? XTalkBleError == .timeout)
        await harness.advance(.seconds(30))
        #expect(try await harness.run { try await client.runAtCommand("AT+VER?") } == ["+VER:2.1.0", "OK"])
        await harness.finish()
    }
}
