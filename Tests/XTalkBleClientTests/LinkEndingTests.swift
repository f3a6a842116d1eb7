import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

/// Issue 14, items 2 and 3: a retried scan that fails again is published
/// again; whatever ends a link says so before the next state; `connect(id:)`
/// checks the id before touching the current link.
@Suite("Link endings and retried failures are always published", .timeLimit(.minutes(1)))
@MainActor
struct LinkEndingTests {
    /// The connection states the client published, in order, from its events.
    static func states(_ events: ArraySlice<XTalkBleEvent>) -> [XTalkConnectionState] {
        events.compactMap { event in
            if case .connectionStateChanged(let state) = event { state } else { nil }
        }
    }

    @Test("Bluetooth off: every startScan() publishes .failed, also when the state already says so")
    func retriedScanFailure() async {
        let harness = ClientHarness(bluetoothState: .poweredOff)
        await harness.advance(.milliseconds(10))
        harness.client.startScan()
        await harness.advance(.milliseconds(10))
        harness.client.startScan()
        await harness.advance(.milliseconds(10))
        #expect(harness.stateEvents == [.failed(.bluetoothUnavailable), .failed(.bluetoothUnavailable)])
        #expect(harness.client.connectionState == .failed(.bluetoothUnavailable))
    }

    @Test("startScan() while connected publishes .disconnected, then .scanning; pending work fails with .cancelled")
    func scanEndsLink() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.device.firmware.faults.silentCommands = ["AT+SLOW"]
        let pending = harness.start { try await harness.client.runAtCommand("AT+SLOW", timeoutMs: 2_000) }
        await harness.advance(.milliseconds(50))
        let before = harness.events.count
        harness.client.startScan()
        await harness.advance(.milliseconds(10))
        #expect(Self.states(harness.events[before...]) == [.disconnected, .scanning])
        await #expect(throws: XTalkBleError.cancelled) { _ = try await pending.value }
        #expect(!harness.client.atReady)
    }

    @Test("connect(id:) to another device while connected publishes .disconnected before .connecting")
    func connectElsewhereEndsLink() async throws {
        let harness = ClientHarness(devices: [
            ClientHarness.fastDevice(), ClientHarness.fastDevice(name: "xTalk-0002", address: "C0:FF:EE:00:00:02"),
        ])
        harness.client.startScan()
        for _ in 0..<100 where harness.client.scanResults.count < 2 { await harness.advance(.milliseconds(10)) }
        let first = try #require(harness.client.scanResults.first { $0.name == "xTalk-0001" })
        let other = try #require(harness.client.scanResults.first { $0.name == "xTalk-0002" })
        harness.client.connect(id: first.id)
        for _ in 0..<1_000 where !harness.client.atReady { await harness.advance(.milliseconds(5)) }
        #expect(harness.client.connectedName == "xTalk-0001" && harness.client.atReady)
        let before = harness.events.count
        harness.client.connect(id: other.id)
        for _ in 0..<1_000 where !harness.client.atReady { await harness.advance(.milliseconds(5)) }
        #expect(Self.states(harness.events[before...]) == [.disconnected, .connecting, .connected])
        #expect(harness.client.connectedName == "xTalk-0002")
    }

    @Test("connect(id:) with an unknown id publishes .deviceNotFound and leaves the working link as it was")
    func unknownIdKeepsLink() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let connections = harness.peripheral.connections
        let stranger = UUID()
        let before = harness.events.count
        harness.client.connect(id: stranger)
        await harness.advance(.milliseconds(10))
        #expect(Self.states(harness.events[before...]) == [.failed(.deviceNotFound(stranger)), .connected])
        #expect(harness.client.connectionState == .connected && harness.client.atReady)
        #expect(harness.peripheral.connections == connections && harness.peripheral.isConnected)
        let reply = try await harness.run { try await harness.client.runAtCommand("AT+VER?") }
        #expect(reply.last == "OK")
    }

    @Test("connect(id:) with the device already connected does nothing: a double tap keeps the link")
    func doubleTap() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let id = try #require(harness.client.connectedPeripheralId)
        let connections = harness.peripheral.connections
        let before = harness.events.count
        harness.client.connect(id: id)
        await harness.advance(.milliseconds(50))
        #expect(Self.states(harness.events[before...]).isEmpty)
        #expect(harness.client.atReady && harness.peripheral.connections == connections)
        let reply = try await harness.run { try await harness.client.runAtCommand("AT+VER?") }
        #expect(reply.last == "OK")
    }

    @Test("connect(id:) again while connecting does not restart the attempt")
    func doubleTapWhileConnecting() async throws {
        let harness = ClientHarness()
        await harness.scan()
        let id = try #require(harness.client.scanResults.first?.id)
        harness.client.connect(id: id)
        await harness.advance(.milliseconds(1))
        harness.client.connect(id: id)
        // Once more when the link is up but not ready yet (discovering).
        for _ in 0..<1_000 where harness.client.connectionState != .connected {
            await harness.advance(.milliseconds(1))
        }
        #expect(!harness.client.atReady)
        harness.client.connect(id: id)
        for _ in 0..<1_000 where !harness.client.atReady { await harness.advance(.milliseconds(5)) }
        #expect(harness.client.atReady)
        #expect(harness.stateEvents == [.scanning, .connecting, .connected])
        #expect(harness.peripheral.connections == 1)
    }
}
