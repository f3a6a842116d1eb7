import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

/// Issue 14, items 2 and 3: a retried scan that fails again is published
/// again; whatever ends a link says so before the next state; `connect(id:)`
/// checks the id before touching the current link.
@Suite("Link endings and retried failures are always published", .timeLimit(.minutes(5)))
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
        // The first scan creates the platform's manager, whose state comes a moment later.
        #expect(harness.stateEvents == [.scanning, .failed(.bluetoothUnavailable), .failed(.bluetoothUnavailable)])
        #expect(harness.client.connectionState == .failed(.bluetoothUnavailable))
    }

    @Test("startScan() while connected publishes .disconnected, then .scanning; pending work fails with .cancelled")
    func scanEndsLink() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let pending = await harness.pendingSilentCommand()
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

/// Issue 16, item 4: a link lost out of range is reported as iOS reports it,
/// `CBError.connectionTimeout` after the supervision timeout, and the client
/// behaves in that window (on the simulator and on the CoreBluetooth backend).
@Suite("Link loss as iOS reports it: the supervision window", .timeLimit(.minutes(5)))
@MainActor
struct SupervisionWindowTests {
    @Test("work started in the supervision window ends once, typed; the next connection sees none of it")
    func workInTheWindow() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let supervision = harness.peripheral.device.link.supervisionTimeout
        #expect(supervision == .milliseconds(720))
        harness.peripheral.disconnect()
        await harness.advance(.milliseconds(100))
        // The phone does not know yet: the client is ready and takes work.
        #expect(harness.client.connectionState == .connected && harness.client.atReady)
        let short = harness.start { try await harness.client.runAtCommand("AT+PING=short", timeoutMs: 200) }
        await harness.advance(.milliseconds(300))
        await #expect(throws: XTalkBleError.timeout) { _ = try await short.value }
        let long = harness.start { try await harness.client.runAtCommand("AT+PING=long", timeoutMs: 5_000) }
        let send = harness.start {
            try await harness.client.sendRfPayload(Data(repeating: 0xA5, count: 200), timeoutMs: 5_000)
            return [String]()
        }
        await harness.advance(.milliseconds(10))
        #expect(harness.client.connectionState == .connected, "still inside the window")
        await harness.advance(supervision - .milliseconds(410))
        #expect(harness.client.connectionState == .disconnected)
        await #expect(throws: XTalkBleError.notConnected) { _ = try await long.value }
        await #expect(throws: XTalkBleError.notConnected) { _ = try await send.value }
        #expect(harness.peripheral.processedCommands.allSatisfy { !$0.contains("short") && !$0.contains("long") })
        // Reconnected: the window's writes went nowhere and reach nothing now.
        await harness.connect()
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=next") }
        #expect(lines == ["+PING:next", "OK"], "got \(lines)")
        #expect(harness.peripheral.processedCommands.last == "AT+PING=next")
        #expect(!harness.atLines.contains { $0.contains("short") || $0.contains("long") })
        await harness.finish()
    }
}
