import Foundation
import Testing
import XTalkTestSupport
import XTalkBleSdk
import XTalkFakeBlueZ
import XTalkSimulator

@Suite(
    "The client on Linux: BlueZ over D-Bus (a private dbus-daemon and the fake BlueZ)",
    .enabled(if: dbusDaemonAvailable, dbusMissing), .serialized, .timeLimit(.minutes(2)))
@MainActor
struct BlueZClientTests {
    @Test("scan shows the device with BlueZ's name, RSSI and address")
    func scan() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let client = rig.client()
        client.startScan()
        #expect(await eventually { !client.scanResults.isEmpty })
        let result = try #require(client.scanResults.first)
        #expect(result.name == "xTalk-0001")
        #expect(result.address == "C0:FF:EE:00:00:01")
        #expect((-70 ... -45).contains(result.rssi))
        #expect(client.connectionState == .scanning)
        client.stopScan()
        #expect(await eventually { rig.fake.callCounts["StopDiscovery"] == 1 })
        client.teardown()
    }

    /// BlueZ answers StartDiscovery and StopDiscovery once the controller has
    /// done it, and refuses either while the other is pending: Scan tapped
    /// again (the client stops and starts in one turn) must start after the
    /// stop's answer, or discovery ends for good with no error.
    @Test("Scan tapped again while scanning: discovery is on again, and results keep coming")
    func scanAgain() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let client = rig.client()
        client.startScan()
        #expect(await eventually { !client.scanResults.isEmpty })
        client.startScan()
        #expect(
            await eventually {
                rig.fake.callCounts["StartDiscovery"] == 2 && rig.fake.isDiscovering
                    && !rig.fake.isDiscoveryCallPending
            })
        #expect(client.connectionState == .scanning)
        // Fresh advertisements again: the RSSI BlueZ forgot at the stop comes back.
        rig.peripheral.device.rssi = -51
        rig.peripheral.device.rssiJitter = 0
        #expect(await eventually { client.scanResults.first?.rssi == -51 })
        client.teardown()
    }

    /// Through the backend itself: when a client's stop reaches it is not
    /// observable from the client, so a client-level test could not know
    /// whether the start was still unanswered.
    @Test("Stop right after Scan: BlueZ is told to stop once it has answered the start")
    func stopRightAfterScan() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let backend = BlueZBackend(
            scheduler: ClockTimerScheduler(clock: ContinuousClock()), environment: rig.systemEnvironment)
        var failures: [BleBackendError] = []
        backend.eventHandler = { event in if case .scanFailed(let error) = event { failures.append(error) } }
        backend.activate(showPowerAlert: false, restoreIdentifier: nil)
        #expect(await eventually { backend.state == .poweredOn })
        backend.scanForPeripherals(withServices: [])
        backend.stopScan()
        #expect(
            await eventually {
                rig.fake.callCounts["StopDiscovery"] == 1 && !rig.fake.isDiscovering
                    && !rig.fake.isDiscoveryCallPending
            })
        #expect(rig.fake.callCounts["StartDiscovery"] == 1)
        #expect(failures.isEmpty)
    }

    /// A gateway restarted with the identifier it stored (the bridge's
    /// `connect(uuid)` after a relaunch): bluetoothd still has the device's
    /// object, and the connect needs no scan, as on iOS.
    /// (Also after bluetoothd restarted: it loads the devices once connected from its storage.)
    @Test(
        "a device bluetoothd knows connects by its identifier without a scan in this process",
        arguments: [false, true])
    func connectsByKnownIdentifier(bluetoothdRestarted: Bool) async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let first = rig.client()
        let result = try await first.connectFirstDevice(rig: rig)
        first.teardown()
        #expect(await eventually { !rig.fake.isConnected(address: "C0:FF:EE:00:00:01") })
        if bluetoothdRestarted { try await rig.fake.restart(after: .milliseconds(50)) }
        let backend = BlueZBackend(
            scheduler: ClockTimerScheduler(clock: ContinuousClock()), environment: rig.systemEnvironment)
        var events: [String] = []
        backend.eventHandler = { event in
            switch event {
            case .connected: events.append("connected")
            case .failedToConnect(_, let error): events.append("failed: \(error?.message ?? "")")
            default: break
            }
        }
        backend.activate(showPowerAlert: false, restoreIdentifier: nil)
        #expect(await eventually { backend.state == .poweredOn })
        backend.connect(result.id)
        #expect(await eventually { !events.isEmpty })
        #expect(events == ["connected"])
        backend.cancelPeripheralConnection(result.id)
    }

    /// BlueZ keeps a link for 2 s after Disconnect and answers Connect at
    /// once while it stands: a connect right after a disconnect must wait
    /// for the old link to go, or it is "connected" on a link about to drop.
    @Test("Disconnect, then connect at once: the new link comes up after BlueZ has dropped the old one")
    func reconnectAtOnce() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let client = rig.client()
        let result = try await client.connectFirstDevice(rig: rig)
        var states: [XTalkConnectionState] = []
        client.onEvent = { event in if case .connectionStateChanged(let state) = event { states.append(state) } }
        client.disconnect()
        client.connect(id: result.id)
        #expect(rig.fake.callCounts["Connect"] == 1)
        #expect(await eventually { client.atReady })
        #expect(try await client.runAtCommand("AT+PING=again") == ["+PING:again", "OK"])
        #expect(states == [.disconnected, .connecting, .connected])
        #expect(rig.fake.callCounts["Connect"] == 2)
        client.teardown()
    }

    /// A device whose advertisement carries no address (no xTalk manufacturer
    /// data): the address is the one BlueZ gives.
    @Test("without an address in the advertisement, the scan result has BlueZ's address")
    func addressFromBlueZ() async throws {
        let rig = try await BlueZRig.start(devices: [BlueZRig.device(address: nil)])
        defer { rig.stop() }
        let client = rig.client()
        client.startScan()
        #expect(await eventually { !client.scanResults.isEmpty })
        let result = try #require(client.scanResults.first)
        let expected = try #require(rig.fake.deviceAddresses.first)
        #expect(result.address == expected)
        #expect(result.address?.count == 17)
        client.teardown()
    }

    @Test("connect, AT commands, RF sends and radio frames, end to end through BlueZ's API")
    func endToEnd() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let client = rig.client()
        var frames: [Data] = []
        client.onEvent = { event in if case .diPayload(let payload, _) = event { frames.append(payload) } }
        let result = try await client.connectFirstDevice(rig: rig)
        #expect(client.connectionState == .connected)
        #expect(client.connectedAddress == result.address)
        #expect(try await client.runAtCommand("AT+PING=bluez") == ["+PING:bluez", "OK"])
        #expect(try await client.runAtCommand("AT+VER?") == ["+VER:2.1.0", "OK"])
        // A payload longer than one write: split at the MTU BlueZ reports.
        let payload = Data((0..<200).map { UInt8($0) })
        try await client.sendRfPayload(payload)
        #expect(rig.peripheral.transmittedFrames == [payload])
        rig.peripheral.receiveRadioFrame(Data([0xCA, 0xFE]))
        #expect(await eventually { frames == [Data([0xCA, 0xFE])] })
        #expect(await client.fetchBatteryLevel() != nil)
        #expect(await client.fetchHardwareVersion() != nil)
        client.disconnect()
        #expect(client.connectionState == .disconnected)
        #expect(await eventually { !rig.peripheral.isConnected })
        client.teardown()
    }

    /// An exclusive AT session through BlueZ: its commands run back to back,
    /// a caller outside it waits its turn (nothing inserted), and the channel
    /// is free again afterwards.
    @Test("an exclusive AT session: back to back through BlueZ, an outside command waits its turn")
    func exclusiveSession() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let client = rig.client()
        _ = try await client.connectFirstDevice(rig: rig)
        var entered = false
        var outsideSubmitted = false
        let session = Task {
            try await client.withExclusiveAtSession { client in
                entered = true
                _ = await eventually { outsideSubmitted }
                var replies: [[String]] = []
                for index in 0..<3 { replies.append(try await client.runAtCommand("AT+PING=\(index)")) }
                return replies
            }
        }
        #expect(await eventually { entered })
        // Outside the session (a task started inside it would belong to it).
        let outside = Task { try await client.runAtCommand("AT+PING=outside") }
        await Task.yield()
        outsideSubmitted = true
        let inside = try await session.value
        #expect(inside == [["+PING:0", "OK"], ["+PING:1", "OK"], ["+PING:2", "OK"]])
        #expect(try await outside.value == ["+PING:outside", "OK"])
        #expect(
            rig.peripheral.processedCommands.suffix(4) == ["AT+PING=0", "AT+PING=1", "AT+PING=2", "AT+PING=outside"])
        client.teardown()
    }

    /// BlueZ keeps a link until someone disconnects it: a gateway that drops
    /// a client without `teardown()` must not leave the radio connected, and
    /// out of every other central's reach, for the rest of the process.
    @Test("a client released without teardown() disconnects its device; a new client connects")
    func releasedClientDisconnects() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        var client: XTalkBleClient? = rig.client()
        _ = try await client?.connectFirstDevice(rig: rig)
        #expect(rig.peripheral.isConnected)
        weak let released = client
        client = nil
        #expect(released == nil, "nothing keeps a released client alive")
        #expect(await eventually { !rig.peripheral.isConnected }, "the link went with the client")
        #expect(rig.fake.callCounts["Disconnect"] == 1)
        let next = rig.client()
        _ = try await next.connectFirstDevice(rig: rig)
        #expect(try await next.runAtCommand("AT+PING=next") == ["+PING:next", "OK"])
        next.teardown()
    }

    /// Released while its Connect is still unanswered: the connect is
    /// cancelled (the same Disconnect), not left to complete with nobody there.
    @Test("a client released while connecting cancels the connect")
    func releasedWhileConnecting() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        rig.peripheral.device.link.connectDelay = .milliseconds(500)
        var client: XTalkBleClient? = rig.client()
        client?.startScan()
        #expect(await eventually { client?.scanResults.isEmpty == false })
        let id = try #require(client?.scanResults.first?.id)
        client?.connect(id: id)
        #expect(await eventually { rig.fake.callCounts["Connect"] == 1 })
        client = nil
        #expect(await eventually { rig.fake.callCounts["Disconnect"] == 1 })
        #expect(await eventually { !rig.fake.isDiscovering })
        // Past the 500 ms the link takes to come: a connect that was not cancelled would be up by now.
        let linked = await eventually(within: .seconds(1)) { rig.peripheral.isConnected }
        #expect(!linked, "the cancelled connect never made the link")
    }
}

/// Another program (another process, another client) disconnected the radio a
/// moment ago: BlueZ holds its link for 2 s, Connected, and answers a Connect
/// on it at once; StartNotify is refused ("Not connected") and the link then
/// drops. The connection waits for the held link to go and connects again,
/// without the app seeing anything but a slower connect.
@Suite("BlueZ: a link another client let go a moment ago", .serialized, .timeLimit(.minutes(2)))
@MainActor
struct BlueZInheritedLinkTests {
    /// Another client connects and lets go (Disconnect: BlueZ keeps the link
    /// for its hold); returns a new client, to connect during that hold.
    static func clientAfterAnotherLetGo(_ rig: BlueZRig) async throws -> XTalkBleClient {
        let first = rig.client()
        _ = try await first.connectFirstDevice(rig: rig)
        first.teardown()
        return rig.client()
    }

    @Test("a client that connects during another client's disconnect hold becomes ready")
    func connectDuringAnotherClientsHold() async throws {
        try #require(dbusDaemonAvailable, dbusMissing)
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let second = try await Self.clientAfterAnotherLetGo(rig)
        var states: [XTalkConnectionState] = []
        second.onEvent = { event in if case .connectionStateChanged(let state) = event { states.append(state) } }
        _ = try await second.connectFirstDevice(rig: rig)
        #expect(try await second.runAtCommand("AT+PING=second") == ["+PING:second", "OK"])
        #expect(!states.contains { if case .failed = $0 { true } else { false } }, "\(states)")
        #expect(!states.contains(.disconnected), "\(states)")
        second.teardown()
    }

    /// A held link that does not go in time: the connect fails with the
    /// refusal, bounded, and the client stays usable.
    @Test("a hold that outlasts the relink bound fails the connect with the refusal")
    func holdTooLong() async throws {
        try #require(dbusDaemonAvailable, dbusMissing)
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        rig.fake.disconnectDelay = .seconds(30)
        let second = try await Self.clientAfterAnotherLetGo(rig)
        let start = ContinuousClock.now
        await #expect(throws: BlueZTestFailure.self) { _ = try await second.connectFirstDevice(rig: rig) }
        guard case .failed(.connectionFailed(let reason)) = second.connectionState else {
            Issue.record("state \(second.connectionState)")
            return
        }
        #expect(reason.contains("not connected"), "\(reason)")
        #expect(ContinuousClock.now - start < .seconds(9), "bounded by the relink limit, inside the connect timeout")
        second.teardown()
    }

    /// BlueZ without a GATT cache removes the characteristic objects when the
    /// held link ends: that is the link's end, not a change of the device's
    /// services, and the relink goes on.
    @Test("without BlueZ's GATT cache the relink still becomes ready")
    func relinkWithoutGattCache() async throws {
        try #require(dbusDaemonAvailable, dbusMissing)
        let rig = try await BlueZRig.start(prepare: { $0.cachesGatt = false })
        defer { rig.stop() }
        let second = try await Self.clientAfterAnotherLetGo(rig)
        _ = try await second.connectFirstDevice(rig: rig)
        #expect(try await second.runAtCommand("AT+PING=nocache") == ["+PING:nocache", "OK"])
        second.teardown()
    }

    /// The device refuses the new connection once the held link is gone: the
    /// connect fails at once with BlueZ's reason, not after the client's
    /// connect timeout.
    @Test("a relink whose connect is refused fails the connect with the reason, not a timeout")
    func relinkRefused() async throws {
        try #require(dbusDaemonAvailable, dbusMissing)
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let second = try await Self.clientAfterAnotherLetGo(rig)
        rig.peripheral.device.link.refusesConnection = true
        let start = ContinuousClock.now
        await #expect(throws: BlueZTestFailure.self) { _ = try await second.connectFirstDevice(rig: rig) }
        #expect(ContinuousClock.now - start < .seconds(6), "not the 10 s connect timeout")
        guard case .failed(.connectionFailed) = second.connectionState else {
            Issue.record("state \(second.connectionState)")
            return
        }
        second.teardown()
    }

    /// A healthy link another client holds is shared: the subscription goes
    /// through on it, so when that client later disconnects the device, the
    /// link's end is a loss for this one too (no relink after a subscription).
    @Test("a healthy link another client holds is shared; its end is then a loss")
    func sharedHealthyLink() async throws {
        try #require(dbusDaemonAvailable, dbusMissing)
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let first = rig.client()
        _ = try await first.connectFirstDevice(rig: rig)
        let second = rig.client()
        _ = try await second.connectFirstDevice(rig: rig)
        #expect(try await second.runAtCommand("AT+PING=shared") == ["+PING:shared", "OK"])
        first.disconnect()
        #expect(await eventually { second.connectionState == .disconnected || !second.atReady })
        #expect(second.connectionState != .connected, "\(second.connectionState)")
        first.teardown()
        second.teardown()
    }
}
