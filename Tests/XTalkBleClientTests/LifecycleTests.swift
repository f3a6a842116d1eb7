import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

@Suite("Client lifecycle: scan, connect, readiness (seed 001 section 3)", .timeLimit(.minutes(5)))
@MainActor
struct LifecycleTests {
    @Test("scanning lists devices in first-seen order with name, address, RSSI and displayName")
    func scanResults() async {
        let harness = ClientHarness(devices: [
            ClientHarness.fastDevice(name: "xTalk-A", address: "AA:BB:CC:DD:EE:01"),
            ClientHarness.fastDevice(name: "xTalk-B", address: nil),
        ])
        harness.client.startScan()
        #expect(harness.client.connectionState == .scanning)
        await harness.advance(.seconds(1))
        let results = harness.client.scanResults
        #expect(results.count == 2)
        let a = results.first { $0.name == "xTalk-A" }
        let b = results.first { $0.name == "xTalk-B" }
        #expect(a?.address == "AA:BB:CC:DD:EE:01")
        #expect(a?.displayName == "xTalk-A (AA:BB:CC:DD:EE:01)")
        #expect(b?.address == nil)
        #expect(b?.displayName == "xTalk-B")
        #expect(results.allSatisfy { (-65 ... -50).contains($0.rssi) })
        // Re-advertisements update in place; the order stays.
        let order = results.map(\.id)
        await harness.advance(.seconds(1))
        #expect(harness.client.scanResults.map(\.id) == order)
        harness.client.stopScan()
        #expect(harness.client.connectionState == .idle)
        #expect(harness.stateEvents == [.scanning, .idle])
        await harness.finish()
    }

    @Test("a new scan clears the results")
    func rescanClears() async {
        let harness = ClientHarness()
        await harness.scan()
        harness.client.stopScan()
        harness.client.startScan()
        #expect(harness.client.scanResults.isEmpty)
        await harness.advance(.seconds(1))
        #expect(harness.client.scanResults.count == 1)
        await harness.finish()
    }

    @Test("connecting goes .connecting, .connected, then atReady and deviceControlReady")
    func readiness() async throws {
        let harness = ClientHarness()
        await harness.scan()
        let result = try #require(harness.client.scanResults.first)
        harness.client.connect(id: result.id)
        #expect(harness.client.connectionState == .connecting)
        #expect(harness.client.connectedName == "xTalk-0001")
        #expect(harness.client.connectedAddress == "C0:FF:EE:00:00:01")
        #expect(harness.client.connectedPeripheralId == result.id)
        #expect(!harness.client.atReady)
        var sawConnectedNotReady = false
        for _ in 0..<200 where !harness.client.atReady {
            await harness.advance(.milliseconds(1))
            if harness.client.connectionState == .connected && !harness.client.atReady { sawConnectedNotReady = true }
        }
        #expect(sawConnectedNotReady, ".connected only means the link is up")
        #expect(harness.client.atReady)
        #expect(harness.client.deviceControlReady)
        #expect(harness.stateEvents == [.scanning, .connecting, .connected])
        await harness.finish()
    }

    @Test("a connected but not ready passthrough refuses AT with .notReady")
    func notReady() async throws {
        var device = ClientHarness.fastDevice()
        device.link.connectionInterval = .milliseconds(100)  // discovery takes a while
        let harness = ClientHarness(devices: [device])
        await harness.scan()
        let result = try #require(harness.client.scanResults.first)
        harness.client.connect(id: result.id)
        while harness.client.connectionState != .connected { await harness.advance(.milliseconds(1)) }
        #expect(!harness.client.atReady)
        await #expect(throws: XTalkBleError.notReady) { try await harness.client.runAtCommand("AT") }
        #expect(throws: XTalkBleError.notReady) { try harness.client.sendAtCommandNoWait("AT") }
        await #expect(throws: XTalkBleError.notReady) { try await harness.client.sendRfPayload(Data([1])) }
        await harness.finish()
    }

    @Test("AT and RF methods throw .notConnected without a link")
    func notConnected() async {
        let harness = ClientHarness()
        await #expect(throws: XTalkBleError.notConnected) { try await harness.client.runAtCommand("AT") }
        #expect(throws: XTalkBleError.notConnected) { try harness.client.sendAtCommandNoWait("AT") }
        await #expect(throws: XTalkBleError.notConnected) { try await harness.client.sendRfPayload(Data([1])) }
        #expect(throws: XTalkBleError.notConnected) { try harness.client.sendRfPayloadNoWait(Data([1])) }
        await #expect(throws: XTalkBleError.notConnected) {
            try await harness.client.withExclusiveAtSession { _ in 1 }
        }
        await harness.finish()
    }

    @Test("connect(id:) with an id absent from the results publishes .deviceNotFound")
    func deviceNotFound() async {
        let harness = ClientHarness()
        let stranger = UUID()
        harness.client.connect(id: stranger)
        #expect(harness.client.connectionState == .failed(.deviceNotFound(stranger)))
        await harness.finish()
    }

    @Test(
        "Bluetooth states map to .bluetoothUnavailable and .permissionDenied",
        arguments: [
            (XTalkSimulatedBluetoothState.poweredOff, XTalkBleError.bluetoothUnavailable),
            (.unsupported, .bluetoothUnavailable),
            (.resetting, .bluetoothUnavailable),
            (.unauthorized, .permissionDenied),
        ])
    func bluetoothStates(_ state: XTalkSimulatedBluetoothState, _ error: XTalkBleError) async {
        let harness = ClientHarness(bluetoothState: state)
        harness.client.startScan()  // before the state is even known
        #expect(harness.client.connectionState == .scanning)
        await harness.advance(.milliseconds(10))
        #expect(harness.client.connectionState == .failed(error))
        harness.client.startScan()  // once known, at once
        #expect(harness.client.connectionState == .failed(error))
        #expect(harness.environment.apiMisuses.isEmpty, "the client never commands a radio that is not on")
        await harness.finish()
    }

    @Test(
        "a scan failure reported by the platform publishes .scanFailed",
        .enabled(if: ClientHarness.backendName != "corebluetooth", "CoreBluetooth reports no scan failures; BlueZ does")
    )
    func scanFailed() async {
        let harness = ClientHarness()
        harness.environment.scanFailure = "org.bluez.Error.InProgress"
        harness.client.startScan()
        await harness.advance(.milliseconds(10))
        #expect(harness.client.connectionState == .failed(.scanFailed("org.bluez.Error.InProgress")))
        harness.environment.scanFailure = nil
        harness.client.startScan()
        await harness.advance(.seconds(1))
        #expect(harness.client.connectionState == .scanning)
        #expect(!harness.client.scanResults.isEmpty, "a retry works")
        await harness.finish()
    }

    @Test("powering off while scanning or connected fails with .bluetoothUnavailable")
    func powerOff() async {
        let harness = ClientHarness()
        await harness.scan()
        harness.environment.setBluetoothState(.poweredOff)
        await harness.advance(.milliseconds(10))
        #expect(harness.client.connectionState == .failed(.bluetoothUnavailable))
        harness.environment.setBluetoothState(.poweredOn)
        await harness.advance(.milliseconds(10))
        await harness.connect()
        harness.environment.setBluetoothState(.unauthorized)
        await harness.advance(.milliseconds(10))
        #expect(harness.client.connectionState == .failed(.permissionDenied))
        #expect(!harness.client.atReady)
        #expect(harness.client.connectedPeripheralId == nil)
        await harness.finish()
    }

    @Test(
        "GATT problems map to .serviceMissing, .characteristicMissing and .connectionFailed",
        arguments: [
            (XTalkSimulatedGatt(hasPassthroughService: false), XTalkBleError.serviceMissing),
            (XTalkSimulatedGatt(hasPassthroughTX: false), .characteristicMissing),
            (XTalkSimulatedGatt(hasPassthroughRX: false), .characteristicMissing),
            (
                XTalkSimulatedGatt(subscriptionRefusal: "insufficient authentication"),
                .connectionFailed(
                    "pairing failed: the device requires pairing and it did not complete (insufficient authentication)")
            ),
            // ATT 0x08 is the device's own authorization check: no pairing helps, so none is named.
            (
                XTalkSimulatedGatt(subscriptionRefusal: "insufficient authorization"),
                .connectionFailed("the notification subscription was refused: insufficient authorization")
            ),
        ])
    func gattProblems(_ gatt: XTalkSimulatedGatt, _ error: XTalkBleError) async throws {
        var device = ClientHarness.fastDevice()
        device.gatt = gatt
        let harness = ClientHarness(devices: [device])
        await harness.scan()
        let result = try #require(harness.client.scanResults.first)
        harness.client.connect(id: result.id)
        await harness.advance(.seconds(1))
        #expect(harness.client.connectionState == .failed(error))
        #expect(!harness.client.atReady)
        #expect(!harness.peripheral.isConnected, "no half-open link is left")
        await harness.finish()
    }

    @Test("a device without device information is still atReady; deviceControlReady stays false")
    func noDeviceInformation() async {
        var device = ClientHarness.fastDevice()
        device.gatt.hasDeviceInformationService = false
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        #expect(harness.client.atReady)
        #expect(!harness.client.deviceControlReady)
        #expect(await harness.client.fetchBatteryLevel() == nil)
        await harness.finish()
    }

    @Test("a TX without write-without-response is written with response")
    func writeWithResponse() async throws {
        var device = ClientHarness.fastDevice()
        device.gatt.txSupportsWriteWithoutResponse = false
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        let lines = try await harness.run {
            try await harness.client.runAtCommand("AT+PING=" + String(repeating: "a", count: 32))
        }
        #expect(lines == ["+PING:" + String(repeating: "a", count: 32), "OK"])
        #expect(harness.environment.apiMisuses.isEmpty)
        await harness.finish()
    }

    @Test("a refused connection publishes .connectionFailed")
    func refused() async throws {
        var device = ClientHarness.fastDevice()
        device.link.refusesConnection = true
        let harness = ClientHarness(devices: [device])
        await harness.scan()
        let result = try #require(harness.client.scanResults.first)
        harness.client.connect(id: result.id)
        await harness.advance(.seconds(1))
        #expect(harness.client.connectionState == .failed(.connectionFailed("the device refused the connection")))
        await harness.finish()
    }

    @Test(
        "a connection that is not ready within the timeout fails with .timeout and leaves no link",
        arguments: [true, false])
    func connectTimeout(neverConnects: Bool) async throws {
        var device = ClientHarness.fastDevice()
        if neverConnects {
            device.link.connectionNeverCompletes = true
        } else {
            device.gatt.silentReads = []
            device.link.connectionInterval = .seconds(4)  // discovery needs several slow round trips
        }
        let harness = ClientHarness(devices: [device], options: XTalkBleClientOptions(connectTimeout: .seconds(10)))
        await harness.scan()
        let result = try #require(harness.client.scanResults.first)
        harness.client.connect(id: result.id)
        await harness.advance(.milliseconds(9_999))
        #expect(harness.client.connectionState != .failed(.timeout))
        await harness.advance(.milliseconds(1))
        #expect(harness.client.connectionState == .failed(.timeout))
        #expect(!harness.client.atReady)
        await harness.advance(.seconds(1))
        #expect(!harness.peripheral.isConnected, "the attempt was cancelled")
        await harness.finish()
    }

    @Test("a link lost while connecting is a failed connection; a lost ready link is .disconnected")
    func linkLoss() async {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.disconnect()
        // The phone notices after the supervision timeout (iOS's default 720 ms); until then the link looks up.
        await harness.advance(.milliseconds(719))
        #expect(harness.client.connectionState == .connected)
        await harness.advance(.milliseconds(1))
        #expect(harness.client.connectionState == .disconnected)
        #expect(!harness.client.atReady && !harness.client.deviceControlReady)
        #expect(harness.client.connectedPeripheralId == nil)
        await harness.finish()
    }

    @Test("after disconnect() the client scans and connects again")
    func reconnect() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.client.disconnect()
        #expect(harness.client.connectionState == .disconnected)
        #expect(!harness.client.atReady)
        await harness.advance(.milliseconds(100))
        await harness.connect()
        #expect(try await harness.run { try await harness.client.runAtCommand("AT") } == ["OK"])
        #expect(harness.peripheral.connections == 2)
        await harness.finish()
    }

    @Test("teardown is terminal and idempotent; later calls do nothing or throw, never hang")
    func teardown() async {
        let harness = ClientHarness()
        await harness.connect()
        let start = harness.events.count
        let consumer = harness.consumeEvents()
        harness.client.teardown()
        harness.client.teardown()
        #expect(harness.client.connectionState == .idle)
        #expect(!harness.client.atReady)
        // The stream finished: the consumer's loop ends (a bounded wait, a named failure otherwise).
        let received = await harness.consumed(by: consumer, "a consumer of events after teardown()")
        #expect(
            received == Array(harness.events[start...]),
            "the stream delivered what onEvent saw since it was read, then ended")

        harness.client.startScan()
        harness.client.connect(id: UUID())
        harness.client.setAtEncoding(.plain)
        #expect(harness.client.connectionState == .idle)
        await #expect(throws: XTalkBleError.notConnected) { try await harness.client.runAtCommand("AT") }
        #expect(throws: XTalkBleError.notConnected) { try harness.client.sendRfPayloadNoWait(Data([1])) }
        #expect(await harness.client.fetchHardwareVersion() == nil)
        let eventsBefore = harness.events.count
        await harness.advance(.seconds(1))
        #expect(harness.events.count == eventsBefore, "no event after teardown")
        await harness.finish()
    }
}

@Suite("The platform client on Linux", .timeLimit(.minutes(5)))
@MainActor
struct PlatformClientTests {
    @Test(
        "XTalkBleClient() on Linux without a system bus: scanning publishes .failed(.bluetoothUnavailable) and says why"
    )
    func noSystemBus() async {
        #if os(Linux)
            let client = PlatformBackend.$override.withValue({
                BlueZBackend(
                    scheduler: ClockTimerScheduler(clock: ContinuousClock()),
                    environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/xtalk-system-bus"])
            }) { XTalkBleClient() }
            var events: [XTalkBleEvent] = []
            client.onEvent = { events.append($0) }
            client.startScan()
            #expect(client.connectionState == .scanning, "the bus is asked later, never inside startScan()")
            // The bus is asked on another thread: wait for the answer however
            // busy the machine is (the suite's time limit ends a hang).
            while client.connectionState == .scanning { await Task.yield() }
            #expect(client.connectionState == .failed(.bluetoothUnavailable))
            #expect(
                events == [
                    .connectionStateChanged(.scanning), .connectionStateChanged(.failed(.bluetoothUnavailable)),
                ])
            #expect(client.bluetoothUnavailableReason?.contains("no D-Bus system bus") == true)
            #expect(client.bluetoothUnavailableReason?.contains("/nonexistent/xtalk-system-bus") == true)
            client.teardown()
        #endif
    }
}

@Suite("Reconnecting at once", .timeLimit(.minutes(5)))
@MainActor
struct ImmediateReconnectTests {
    @Test(
        "disconnect() and connect(id:) to the same device in one turn: the new connection is not confused with the old")
    func disconnectThenConnect() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let id = try #require(harness.client.connectedPeripheralId)
        harness.client.startScan()  // ends the connection, starts a new scan session
        await harness.advance(.seconds(1))
        harness.client.connect(id: id)
        harness.client.disconnect()
        harness.client.startScan()
        await harness.advance(.seconds(1))
        harness.client.connect(id: id)
        for _ in 0..<200 where !harness.client.atReady { await harness.advance(.milliseconds(5)) }
        #expect(harness.client.atReady)
        #expect(harness.client.connectionState == .connected)
        #expect(try await harness.run { try await harness.client.runAtCommand("AT") } == ["OK"])
        #expect(!harness.stateEvents.contains { if case .failed = $0 { true } else { false } })
        #expect(harness.environment.apiMisuses.isEmpty)
        await harness.finish()
    }
}
