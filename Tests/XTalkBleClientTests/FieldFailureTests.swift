import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

/// Issue 16: CoreBluetooth as it behaves on real phones
/// (`corebluetooth-field-failures.md`). Each fault is a simulator knob; the
/// client suite runs on the simulator backend and on the CoreBluetooth backend
/// over the stand-in.
@Suite("CoreBluetooth field failures: the simulator produces them, the client survives them", .timeLimit(.minutes(1)))
@MainActor
struct FieldFailureTests {
    /// MTU 23 (20-byte chunks) and one write-without-response credit: every
    /// chunk after the first waits for the platform's "ready".
    static func narrowDevice() -> XTalkSimulatedDevice {
        var device = ClientHarness.fastDevice()
        device.link.mtu = 23
        device.link.writeWithoutResponseCredits = 1
        return device
    }

    @Test("1. every ready callback lost (the flag still follows the buffer): a 13-chunk send completes at link speed")
    func lostReadyCallbacks() async throws {
        var device = Self.narrowDevice()
        device.link.lostReadyCallbacksOneIn = 1
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        let client = harness.client
        let start = harness.clock.elapsed
        try await harness.run { try await client.sendRfPayload(Data(repeating: 0xA5, count: 120)) }
        #expect(harness.peripheral.lostReadyCallbacks >= 12, "the fault happened")
        #expect(harness.peripheral.transmittedFrames == [Data(repeating: 0xA5, count: 120)])
        // 250 bytes in 13 chunks, one per 7.5 ms event, then 80 ms of airtime: re-polling
        // every 10 ms adds at most one poll per chunk, never a command timeout.
        #expect(harness.clock.elapsed - start < .milliseconds(500), "took \(harness.clock.elapsed - start)")
        await harness.finish()
    }

    @Test("1. ready callback lost and the flag stuck false: after writeReadyTimeout the chunk goes anyway")
    func stuckFlagWritesAnyway() async throws {
        var device = Self.narrowDevice()
        device.link.lostReadyCallbacksOneIn = 1
        device.link.lostReadyCallbackKeepsFlagFalse = true
        let harness = ClientHarness(
            devices: [device], options: XTalkBleClientOptions(writeReadyTimeout: .milliseconds(200)))
        await harness.connect()
        let client = harness.client
        let start = harness.clock.elapsed
        // "AT+PING=abcdefghijklmno\r\n": 25 bytes, two chunks; the second waits on the stuck flag.
        let lines = try await harness.run { try await client.runAtCommand("AT+PING=abcdefghijklmno") }
        #expect(lines == ["+PING:abcdefghijklmno", "OK"])
        let took = harness.clock.elapsed - start
        #expect(took >= .milliseconds(200) && took < .milliseconds(400), "took \(took)")
        await harness.finish()
    }
}
