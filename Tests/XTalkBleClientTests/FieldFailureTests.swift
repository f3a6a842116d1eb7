import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

/// Issue 16: CoreBluetooth as it behaves on real phones
/// (`corebluetooth-field-failures.md`). Each fault is a simulator knob; the
/// client suite runs on the simulator backend and on the CoreBluetooth backend
/// over the stand-in.
@Suite("CoreBluetooth field failures: the simulator produces them, the client survives them", .timeLimit(.minutes(5)))
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

    /// Field failure 1 as reported on iOS 26.4 (kable#1185): from the second
    /// write on, the flag stays false for the rest of the connection and no
    /// ready callback comes. One wait of `writeReadyTimeout`, then the writes
    /// are paced: a 240-byte RF send at MTU 23 (25 chunks; 24 waits of 300 ms
    /// would be 7.2 s, past its 5 s) and the commands after it complete
    /// within their own timeouts, nothing dropped. (The bound is kept under
    /// the radio's 500 ms inter-character timeout, which a longer wait in
    /// the middle of a line would pass: see `writeReadyTimeout`.)
    @Test("1. a flag false for good: one wait of writeReadyTimeout, then paced writes, every command in time")
    func stuckFlagForGood() async throws {
        var device = Self.narrowDevice()
        device.link.lostReadyCallbacksOneIn = 1
        device.link.lostReadyCallbackKeepsFlagFalse = true
        device.link.stuckReadyFlagSurvivesWrites = true
        let harness = ClientHarness(
            devices: [device], options: XTalkBleClientOptions(writeReadyTimeout: .milliseconds(300)))
        await harness.connect()
        let client = harness.client
        let payload = Data((0..<240).map { UInt8($0) })
        let sendStart = harness.clock.elapsed
        try await harness.run { try await client.sendRfPayload(payload) }
        #expect(harness.peripheral.transmittedFrames.last == payload)
        // The pace the README promises: "AT+SEND=" + 480 hex + CRLF is 490 bytes, 25 chunks of
        // 20. One wait of writeReadyTimeout, then each of the other 24 chunks at most one pace
        // (20 ms) plus one flag poll (10 ms) plus one connection event (7.5 ms) after the last,
        // then the frame's airtime (20 ms + 0.5 ms per byte) and one event for +SENDFIN.
        // A pace of 100 ms would take 2.4 s for the chunks alone.
        let chunkGap = Duration.milliseconds(20) + .milliseconds(10) + device.link.connectionInterval
        let sendBound =
            Duration.milliseconds(300) + chunkGap * 24
            + device.firmware.airtimeBase + device.firmware.airtimePerByte * 240 + device.link.connectionInterval * 2
        let sendTook = harness.clock.elapsed - sendStart
        #expect(sendTook <= sendBound, "the 240-byte send took \(sendTook), paced writes allow \(sendBound)")
        let start = harness.clock.elapsed
        for index in 0..<5 {
            let lines = try await harness.run { try await client.runAtCommand("AT+PING=p\(index)", timeoutMs: 800) }
            #expect(lines == ["+PING:p\(index)", "OK"])
        }
        #expect(harness.clock.elapsed - start < .seconds(2), "\(harness.clock.elapsed - start)")
        #expect(harness.peripheral.droppedWrites == 0)
        await harness.finish()
    }

    @Test(
        "5. the client asks for Bluetooth on the first startScan(), not in init: the prompt appears when the user acts")
    func managerCreatedOnFirstUse() async {
        let harness = ClientHarness()
        harness.environment.authorization = .notDetermined
        await harness.advance(.seconds(1))
        #expect(!harness.environment.isBluetoothInUse && harness.environment.permissionPromptsShown == 0)
        #expect(harness.client.connectionState == .idle && harness.events.isEmpty)
        harness.client.startScan()
        #expect(harness.environment.isBluetoothInUse && harness.environment.permissionPromptsShown == 1)
        // No answer yet: the scan waits (no result, no failure), however long the user takes.
        await harness.advance(.seconds(30))
        #expect(harness.client.connectionState == .scanning && harness.client.scanResults.isEmpty)
        harness.environment.answerPermissionPrompt(allow: true)
        await harness.advance(.seconds(1))
        #expect(harness.client.connectionState == .scanning && !harness.client.scanResults.isEmpty)
        harness.client.stopScan()
        harness.client.startScan()
        #expect(harness.environment.permissionPromptsShown == 1, "asked once")
        await harness.finish()
    }

    @Test("5. a user who denies the prompt: .failed(.permissionDenied); a policy's restriction is the same")
    func promptDenied() async {
        let harness = ClientHarness()
        harness.environment.authorization = .notDetermined
        harness.client.startScan()
        await harness.advance(.seconds(2))
        harness.environment.answerPermissionPrompt(allow: false)
        await harness.advance(.milliseconds(10))
        #expect(harness.client.connectionState == .failed(.permissionDenied))
        #expect(harness.stateEvents == [.scanning, .failed(.permissionDenied)])
        let restricted = ClientHarness()
        restricted.environment.authorization = .restricted
        restricted.client.startScan()
        await restricted.advance(.milliseconds(10))
        #expect(restricted.client.connectionState == .failed(.permissionDenied))
        #expect(restricted.environment.permissionPromptsShown == 0, "a restriction asks nobody")
        await harness.finish()
        await restricted.finish()
    }

    @Test("5. permission taken away in Settings while connected: the link ends, pending work fails, the state says why")
    func permissionRevoked() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let pending = await harness.pendingSilentCommand()
        harness.environment.authorization = .denied
        await harness.advance(.milliseconds(10))
        #expect(harness.client.connectionState == .failed(.permissionDenied))
        #expect(!harness.client.atReady && !harness.peripheral.isConnected)
        await #expect(throws: XTalkBleError.notConnected) { _ = try await pending.value }
        // Given back: the app scans and connects again.
        harness.environment.authorization = .allowedAlways
        await harness.advance(.milliseconds(10))
        #expect(harness.client.connectionState == .failed(.permissionDenied), "the radio's state alone starts nothing")
        await harness.connect()
        #expect(harness.client.atReady)
        await harness.finish()
    }

    @Test("5. the system's power alert: shown by default when Bluetooth is off, never with showsPowerAlert false")
    func powerAlertOption() async {
        for shows in [true, false] {
            let harness = ClientHarness(
                bluetoothState: .poweredOff, options: XTalkBleClientOptions(showsPowerAlert: shows))
            harness.client.startScan()
            await harness.advance(.milliseconds(10))
            #expect(harness.client.connectionState == .failed(.bluetoothUnavailable))
            #expect(harness.environment.powerAlertsShown == (shows ? 1 : 0))
            await harness.finish()
        }
        #expect(XTalkBleClientOptions().showsPowerAlert, "iOS's default")
    }

    @Test(
        "2. a service added mid-session (didModifyServices, empty list) or an unused one invalidated: the link goes on")
    func serviceAddedMidSession() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.modifyServices()
        await harness.advance(.milliseconds(50))
        harness.peripheral.modifyServices(invalidating: [.dfu])
        await harness.advance(.milliseconds(50))
        #expect(harness.peripheral.serviceModifications == 2, "the fault happened")
        #expect(harness.client.connectionState == .connected && harness.client.atReady)
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=after") }
        #expect(lines == ["+PING:after", "OK"])
        await harness.finish()
    }

    @Test("2. the passthrough service invalidated: the link ends for good, pending work fails, a reconnect works")
    func passthroughInvalidated() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let pending = await harness.pendingSilentCommand()
        harness.peripheral.modifyServices(invalidating: [.passthrough])
        await harness.advance(.milliseconds(50))
        #expect(harness.client.connectionState == .disconnected && !harness.client.atReady)
        #expect(!harness.peripheral.isConnected, "no half-open link")
        await #expect(throws: XTalkBleError.notConnected) { _ = try await pending.value }
        await harness.connect()
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=again") }
        #expect(lines == ["+PING:again", "OK"])
        await harness.finish()
    }

    static func pairingDevice(_ pairing: XTalkSimulatedPairing) -> XTalkSimulatedDevice {
        var device = ClientHarness.fastDevice()
        device.gatt.pairing = pairing
        return device
    }

    /// Connects and waits up to `limit` for atReady or a failure.
    /// Connects to the first scan result, checking for the outcome every `step`.
    static func connect(
        _ harness: ClientHarness, within limit: Duration, step: Duration = .milliseconds(50)
    ) async throws {
        await harness.scan()
        let result = try #require(harness.client.scanResults.first)
        harness.client.connect(id: result.id)
        let deadline = harness.clock.elapsed + limit
        while !harness.client.atReady, harness.clock.elapsed < deadline {
            if case .failed = harness.client.connectionState { return }
            await harness.advance(step)
        }
    }

    @Test("6. a pairing dialog the user answers in 4 s: connected, not ready meanwhile, then ready; never asked again")
    func pairingDialog() async throws {
        let harness = ClientHarness(devices: [Self.pairingDevice(.userPairs(after: .seconds(4)))])
        try await Self.connect(harness, within: .seconds(2))
        #expect(harness.peripheral.pairingDialogsShown == 1)
        #expect(harness.client.connectionState == .connected && !harness.client.atReady, "waiting on the user")
        for _ in 0..<100 where !harness.client.atReady { await harness.advance(.milliseconds(50)) }
        #expect(harness.client.atReady && harness.peripheral.isBonded)
        harness.client.disconnect()
        await harness.connect()
        #expect(harness.client.atReady && harness.peripheral.pairingDialogsShown == 1, "bonded: no second dialog")
        await harness.finish()
    }

    @Test("6. connectTimeout counts the time the pairing dialog waits; a longer timeout lets a slow user pair")
    func pairingCountsAgainstConnectTimeout() async throws {
        let slow = Self.pairingDevice(.userPairs(after: .seconds(12)))
        let harness = ClientHarness(devices: [slow])
        // Half-second checks: fifteen virtual seconds in 50 ms steps cost 77 s under TSan in CI.
        try await Self.connect(harness, within: .seconds(15), step: .milliseconds(500))
        #expect(harness.client.connectionState == .failed(.timeout), "the default 10 s ran out first")
        #expect(!harness.peripheral.isConnected, "no link left behind")
        let patient = ClientHarness(devices: [slow], options: XTalkBleClientOptions(connectTimeout: .seconds(30)))
        try await Self.connect(patient, within: .seconds(15), step: .milliseconds(500))
        #expect(patient.client.atReady)
        await harness.finish()
        await patient.finish()
    }

    @Test("6. pairing errors are distinct .connectionFailed reasons: the user cancelled; the device removed the bond")
    func pairingErrors() async throws {
        let cancelled = ClientHarness(devices: [Self.pairingDevice(.userCancels(after: .seconds(3)))])
        try await Self.connect(cancelled, within: .seconds(6))
        guard case .failed(.connectionFailed(let reason)) = cancelled.client.connectionState else {
            Issue.record("state \(cancelled.client.connectionState)")
            return
        }
        #expect(reason.hasPrefix("pairing failed: "), "\(reason)")
        #expect(!cancelled.peripheral.isConnected)
        let removed = ClientHarness(devices: [Self.pairingDevice(.peerRemovedPairing)])
        try await Self.connect(removed, within: .seconds(3))
        guard case .failed(.connectionFailed(let removedReason)) = removed.client.connectionState else {
            Issue.record("state \(removed.client.connectionState)")
            return
        }
        #expect(removedReason.hasPrefix("pairing removed by the device: "), "\(removedReason)")
        await cancelled.finish()
        await removed.finish()
    }

    @Test(
        "7. a device already connected to the phone does not advertise: a scan still lists it (retrieval)"
    )
    func systemConnectedDevice() async throws {
        let harness = ClientHarness()
        harness.peripheral.isConnectedToSystem = true  // e.g. another app holds a connection
        harness.client.startScan()
        await harness.advance(.milliseconds(300))
        let result = try #require(harness.client.scanResults.first, "found without an advertisement")
        #expect(result.id == harness.peripheral.id && result.name == "xTalk-0001")
        #expect(result.rssi == 127, "RSSI not available")
        await harness.advance(.seconds(2))
        #expect(harness.client.scanResults.count == 1, "listed once")
        harness.client.connect(id: result.id)
        for _ in 0..<400 where !harness.client.atReady { await harness.advance(.milliseconds(5)) }
        #expect(harness.client.atReady)
        await harness.finish()
    }

    /// A second client on the harness's environment: the app relaunched.
    static func relaunch(_ harness: ClientHarness, options: XTalkBleClientOptions) -> XTalkBleClient {
        ClientHarness.makeClient(harness.environment, options)
    }

    @Test("8. state restoration: the app terminated in the background gets its connection back, atReady, no new scan")
    func stateRestoration() async throws {
        let options = XTalkBleClientOptions(restoreIdentifier: "com.example.radio")
        let harness = ClientHarness(options: options)
        await harness.connect()
        harness.environment.terminateApp(harness.client)
        await harness.advance(.seconds(5))
        #expect(harness.peripheral.isConnected, "iOS kept the connection")
        let relaunched = Self.relaunch(harness, options: options)
        var states: [XTalkConnectionState] = []
        relaunched.onEvent = { if case .connectionStateChanged(let state) = $0 { states.append(state) } }
        #expect(harness.environment.isBluetoothInUse, "a restoring client asks for Bluetooth at once")
        for _ in 0..<400 where !relaunched.atReady { await harness.advance(.milliseconds(5)) }
        #expect(relaunched.atReady && relaunched.connectionState == .connected)
        #expect(states == [.connecting, .connected], "as a connection does")
        #expect(relaunched.connectedPeripheralId == harness.peripheral.id)
        #expect(harness.peripheral.connections == 1, "the same connection, not a new one")
        let lines = try await harness.clock.run { try await relaunched.runAtCommand("AT+PING=back") }
        #expect(lines == ["+PING:back", "OK"])
        relaunched.teardown()
        await harness.finish()
    }

    @Test("8. without a restore identifier the connection ends with the app; a relaunch starts idle")
    func noRestoration() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.environment.terminateApp(harness.client)
        await harness.advance(.milliseconds(100))
        #expect(!harness.peripheral.isConnected)
        let relaunched = Self.relaunch(harness, options: XTalkBleClientOptions(restoreIdentifier: "com.example.radio"))
        await harness.advance(.seconds(1))
        #expect(relaunched.connectionState == .idle && !relaunched.atReady)
        relaunched.teardown()
        await harness.finish()
    }

    @Test("8. a kept connection lost while the app was gone is let go: idle, no half-open link")
    func restoredButLost() async throws {
        let options = XTalkBleClientOptions(restoreIdentifier: "com.example.radio")
        let harness = ClientHarness(options: options)
        await harness.connect()
        harness.environment.terminateApp(harness.client)
        harness.peripheral.disconnect(.terminatedByDevice)
        await harness.advance(.seconds(1))
        let relaunched = Self.relaunch(harness, options: options)
        await harness.advance(.seconds(1))
        #expect(relaunched.connectionState == .idle && !relaunched.atReady)
        #expect(!harness.peripheral.isConnected)
        relaunched.teardown()
        await harness.finish()
    }

    /// The system hands back a connection still being made (a connect never
    /// times out in CoreBluetooth), before it reports the radio's state: the
    /// client does not adopt it, so it must cancel it once the radio is on,
    /// or the link comes up later behind the app's back, half-open, and the
    /// device (connected, no longer advertising) can no longer be found.
    @Test("8. a restored connection still being made is cancelled, never left to come up half-open")
    func restoredPendingConnectCancelled() async throws {
        var device = ClientHarness.fastDevice()
        device.link.connectDelay = .seconds(3)
        let options = XTalkBleClientOptions(restoreIdentifier: "com.example.radio")
        let harness = ClientHarness(devices: [device], options: options)
        await harness.scan()
        harness.client.connect(id: try #require(harness.client.scanResults.first?.id))
        await harness.advance(.milliseconds(100))
        #expect(harness.client.connectionState == .connecting)
        harness.environment.terminateApp(harness.client)
        let relaunched = Self.relaunch(harness, options: options)
        await harness.advance(.seconds(4))
        #expect(relaunched.connectionState == .idle && !relaunched.atReady)
        #expect(!harness.peripheral.isConnected, "the pending connect was cancelled: never half-open")
        relaunched.startScan()
        await harness.advance(.seconds(2))
        #expect(!relaunched.scanResults.isEmpty, "the device can be found again")
        relaunched.teardown()
        await harness.finish()
    }

    @Test("8. a restored connection that cannot be set up ends cleanly within the connect timeout")
    func restoredThenFails() async throws {
        let options = XTalkBleClientOptions(connectTimeout: .seconds(2), restoreIdentifier: "com.example.radio")
        let harness = ClientHarness(options: options)
        await harness.connect()
        harness.environment.terminateApp(harness.client)
        harness.peripheral.device.link.connectionInterval = .seconds(3)  // rediscovery cannot finish in time
        let relaunched = Self.relaunch(harness, options: options)
        await harness.advance(.milliseconds(2_100))
        #expect(relaunched.connectionState == .failed(.timeout))
        await harness.advance(.seconds(1))
        #expect(!harness.peripheral.isConnected, "the link was cancelled: never half-open")
        relaunched.teardown()
        await harness.finish()
    }

    /// Once starved, the backend says there is no room and takes nothing (a
    /// write length of 0): what a platform says of a link it no longer has
    /// before the client heard. Counts the pump's polls; a pump that polls
    /// more than 100 times at one instant is spinning, and is let through so
    /// that the test ends and fails instead of hanging.
    @MainActor
    final class Starvation {
        var starved = false
        private(set) var polls = 0
        private(set) var mostPollsAtOneInstant = 0
        private var instant: Duration = .zero
        private var pollsAtInstant = 0

        func install(on backend: InterceptingBackend) {
            backend.canSendOverride = { [unowned self] _ in starved ? false : nil }
            backend.maximumWriteLengthOverride = { [unowned self, unowned backend] _, _ in
                guard starved else { return nil }
                polls += 1
                if backend.scheduler.elapsed != instant {
                    instant = backend.scheduler.elapsed
                    pollsAtInstant = 0
                }
                pollsAtInstant += 1
                mostPollsAtOneInstant = max(mostPollsAtOneInstant, pollsAtInstant)
                return pollsAtInstant > 100 ? nil : 0
            }
        }
    }

    @Test("1. no room and nothing taken past writeReadyTimeout: the pump polls every 10 ms, never spins")
    func starvedPumpPolls() async throws {
        let clock = XTalkVirtualClock()
        let environment = XTalkSimulatedEnvironment(devices: [Self.narrowDevice()], clock: clock, seed: 5)
        let backend = InterceptingBackend(environment.backend)
        let starvation = Starvation()
        starvation.install(on: backend)
        let client = XTalkBleClient(
            backend: backend, options: XTalkBleClientOptions(writeReadyTimeout: .milliseconds(200)),
            keepingAlive: environment)
        client.startScan()
        for _ in 0..<100 where client.scanResults.isEmpty { await clock.advance(by: .milliseconds(10)) }
        client.connect(id: try #require(client.scanResults.first?.id))
        for _ in 0..<400 where !client.atReady { await clock.advance(by: .milliseconds(5)) }
        #expect(client.atReady)
        starvation.starved = true
        do {
            _ = try await clock.run { try await client.runAtCommand("AT+PING=starved", timeoutMs: 1_000) }
            Issue.record("the command went through a backend that takes nothing")
        } catch {
            #expect(error as? XTalkBleError == .timeout)
        }
        #expect(
            starvation.mostPollsAtOneInstant <= 2,
            "the pump spun: \(starvation.mostPollsAtOneInstant) polls at one instant")
        // One poll per 10 ms over the command's second, and the first writes.
        #expect((50...110).contains(starvation.polls), "\(starvation.polls) polls")
        client.teardown()
        environment.shutDown()
        await clock.settle()
    }
}
