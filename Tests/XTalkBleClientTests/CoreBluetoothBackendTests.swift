#if os(Linux)
    import Dispatch
    import Foundation
    import Testing
    #if canImport(XTalkCoreBluetoothStandIn)
        @_spi(XTalkStandIn) import XTalkCoreBluetoothStandIn
    #else
        @_spi(XTalkStandIn) import CoreBluetooth  // the stand-in, under Apple's name (XTALK_APPLE_STANDINS=1)
    #endif
    import XTalkBleSdk
    import XTalkSimulator

    /// The CoreBluetooth backend under unusual callback sequences: the client on
    /// the CoreBluetooth backend over the stand-in, driven by the simulator, with
    /// extra callbacks injected straight into the manager's delegate.
    @MainActor
    final class CoreBluetoothProbe {
        let clock = XTalkVirtualClock()
        let environment: XTalkSimulatedEnvironment
        let client: XTalkBleClient
        private(set) var events: [XTalkBleEvent] = []

        init(device: XTalkSimulatedDevice = ClientHarness.fastDevice(), queue: DispatchQueue = .main) {
            environment = XTalkSimulatedEnvironment(devices: [device], clock: clock, seed: 5)
            client = XTalkBleClient(coreBluetoothSimulator: environment, queue: queue)
            client.onEvent = { [weak self] in self?.events.append($0) }
        }

        var radio: SimulatedCoreBluetoothRadio? { environment.coreBluetoothRadio }
        var manager: CBCentralManager? { radio?.centralManager }
        var simulated: XTalkSimulatedPeripheral { environment.peripherals[0] }
        var peripheral: CBPeripheral? { manager?.retrievePeripherals(withIdentifiers: [simulated.id]).first }
        var rx: CBCharacteristic? { characteristic("6E58A102-3C1F-4B7D-9F3A-5854414C4B00") }
        var tx: CBCharacteristic? { characteristic("6E58A101-3C1F-4B7D-9F3A-5854414C4B00") }

        func characteristic(_ uuid: String) -> CBCharacteristic? {
            peripheral?.services?.flatMap { $0.characteristics ?? [] }.first { $0.uuid == CBUUID(string: uuid) }
        }

        func advance(_ duration: Duration = .zero) async { await clock.advance(by: duration) }

        func connect() async {
            client.startScan()
            for _ in 0..<100 where client.scanResults.isEmpty { await advance(.milliseconds(10)) }
            guard let first = client.scanResults.first else {
                Issue.record("connect(): no scan result to connect to")
                return
            }
            client.connect(id: first.id)
            for _ in 0..<400 where !client.atReady { await advance(.milliseconds(5)) }
        }

        /// Calls the manager's delegate as CoreBluetooth would, on the main queue.
        func inject(_ body: @escaping (CBCentralManager, any CBCentralManagerDelegate, CBPeripheral) -> Void) async {
            guard let manager, let delegate = manager.delegate, let peripheral else {
                Issue.record("nothing to inject into")
                return
            }
            body(manager, delegate, peripheral)
            await clock.settle()
        }

        var atLines: [String] { events.compactMap { if case .atLine(let line) = $0 { line } else { nil } } }

        func finish() async {
            client.teardown()
            environment.shutDown()
            await clock.settle()
            #expect(clock.pendingTimerCount == 0)
        }
    }

    @Suite("CoreBluetooth backend: delegate handling", .timeLimit(.minutes(5)))
    @MainActor
    struct CoreBluetoothBackendTests {
        @Test("the client reaches atReady through CoreBluetooth, and runs commands")
        func happyPath() async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            #expect(probe.client.atReady && probe.client.deviceControlReady)
            #expect(
                probe.client.connectedAddress == "C0:FF:EE:00:00:01", "from manufacturer data, the only source on Apple"
            )
            #expect(
                try await probe.clock.run { try await probe.client.runAtCommand("AT+PING=cb") } == ["+PING:cb", "OK"])
            #expect(try await probe.clock.run { await probe.client.fetchBatteryLevel() } == 87)
            #expect(probe.radio?.apiMisuses.isEmpty == true, "no command outside .poweredOn or a connection")
            await probe.finish()
        }

        @Test("callbacks on a dedicated serial queue reach the main actor in order")
        func dedicatedQueue() async throws {
            let queue = DispatchQueue(label: "test.corebluetooth")
            let probe = CoreBluetoothProbe(queue: queue)
            // The queue is a real thread here: flush it, then let the main actor run the hops.
            func settle() async {
                for _ in 0..<20 {
                    queue.sync {}
                    await probe.clock.settle()
                }
            }
            probe.client.startScan()
            for _ in 0..<50 where probe.client.scanResults.isEmpty {
                await probe.advance(.milliseconds(10))
                await settle()
            }
            guard let first = probe.client.scanResults.first else {
                Issue.record("no device")
                return
            }
            probe.client.connect(id: first.id)
            for _ in 0..<400 where !probe.client.atReady {
                await probe.advance(.milliseconds(5))
                await settle()
            }
            #expect(probe.client.atReady)
            await probe.finish()
            await settle()
        }

        @Test("duplicate and out-of-order callbacks change nothing")
        func duplicates() async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            let states = probe.events.filter { if case .connectionStateChanged = $0 { true } else { false } }
            await probe.inject { manager, delegate, peripheral in
                delegate.centralManager(manager, didConnect: peripheral)  // a duplicate
                peripheral.delegate?.peripheral(peripheral, didDiscoverServices: nil)  // again, late
                if let service = peripheral.services?.first {
                    peripheral.delegate?.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: nil)
                }
                if let rx = peripheral.services?.first?.characteristics?.last {
                    peripheral.delegate?.peripheral(peripheral, didUpdateNotificationStateFor: rx, error: nil)
                }
                peripheral.delegate?.peripheralIsReady(toSendWriteWithoutResponse: peripheral)  // spurious
            }
            let statesAfter = probe.events.filter { if case .connectionStateChanged = $0 { true } else { false } }
            #expect(statesAfter == states, "no new state from duplicates")
            #expect(probe.client.atReady)
            #expect(
                try await probe.clock.run { try await probe.client.runAtCommand("AT+PING=dup") } == ["+PING:dup", "OK"])
            await probe.finish()
        }

        @Test("errors on a setup callback fail the connection with the platform's reason")
        func setupErrors() async throws {
            let probe = CoreBluetoothProbe()
            probe.client.startScan()
            for _ in 0..<100 where probe.client.scanResults.isEmpty { await probe.advance(.milliseconds(10)) }
            let first = try #require(probe.client.scanResults.first)
            probe.client.connect(id: first.id)
            // Let the link come up, then answer service discovery with an error before the device does.
            while probe.client.connectionState != .connected { await probe.advance(.milliseconds(1)) }
            await probe.inject { _, _, peripheral in
                peripheral.delegate?.peripheral(
                    peripheral,
                    didDiscoverServices: CBATTError(
                        .insufficientEncryption, userInfo: [NSLocalizedDescriptionKey: "Encryption is insufficient."]))
            }
            #expect(
                probe.client.connectionState
                    == .failed(.connectionFailed("service discovery failed: Encryption is insufficient.")))
            await probe.advance(.seconds(1))
            #expect(!probe.simulated.isConnected, "the link was cancelled")
            await probe.finish()
        }

        enum SetupStep: String, CaseIterable, Sendable {
            case services, characteristics, notification
        }

        @Test("an error on any setup callback fails the connection, naming the step", arguments: SetupStep.allCases)
        func errorOnEachSetupStep(_ step: SetupStep) async throws {
            var device = ClientHarness.fastDevice()
            device.link.connectionInterval = .milliseconds(30)  // room to answer before the device does
            let probe = CoreBluetoothProbe(device: device)
            probe.client.startScan()
            for _ in 0..<100 where probe.client.scanResults.isEmpty { await probe.advance(.milliseconds(10)) }
            let first = try #require(probe.client.scanResults.first)
            probe.client.connect(id: first.id)
            let error = CBATTError(
                .insufficientAuthentication, userInfo: [NSLocalizedDescriptionKey: "Authentication is insufficient."])
            switch step {
            case .services:
                while probe.client.connectionState != .connected { await probe.advance(.milliseconds(1)) }
                await probe.inject { _, _, peripheral in
                    peripheral.delegate?.peripheral(peripheral, didDiscoverServices: error)
                }
            case .characteristics:
                while probe.peripheral?.services == nil { await probe.advance(.milliseconds(1)) }
                let service = try #require(
                    probe.peripheral?.services?.first {
                        $0.uuid == CBUUID(string: "6E58A100-3C1F-4B7D-9F3A-5854414C4B00")
                    })
                await probe.inject { _, _, peripheral in
                    peripheral.delegate?.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: error)
                }
            case .notification:
                while probe.rx == nil { await probe.advance(.milliseconds(1)) }
                let rx = try #require(probe.rx)
                await probe.inject { _, _, peripheral in
                    peripheral.delegate?.peripheral(peripheral, didUpdateNotificationStateFor: rx, error: error)
                }
            }
            let expected: [SetupStep: String] = [
                .services: "service discovery failed: Authentication is insufficient.",
                .characteristics: "characteristic discovery failed: Authentication is insufficient.",
                .notification: "pairing failed: the device requires pairing and it did not complete "
                    + "(Authentication is insufficient.)",
            ]
            #expect(probe.client.connectionState == .failed(.connectionFailed(expected[step] ?? "")))
            #expect(!probe.client.atReady)
            await probe.advance(.seconds(1))
            #expect(!probe.simulated.isConnected, "the link was cancelled")
            #expect(!probe.client.atReady, "the device's own late answers change nothing")
            await probe.finish()
        }

        @Test("an error on a write acknowledgement fails the command; the client recovers")
        func writeError() async throws {
            var device = ClientHarness.fastDevice()
            device.gatt.txSupportsWriteWithoutResponse = false
            let probe = CoreBluetoothProbe(device: device)
            await probe.connect()
            probe.simulated.device.gatt.writeRefusal = "Writing is not permitted."
            let error: (any Error)?
            do {
                _ = try await probe.clock.run { try await probe.client.runAtCommand("AT") }
                error = nil
            } catch let caught {
                error = caught
            }
            #expect(error as? XTalkBleError == .writeFailed("Writing is not permitted."))
            probe.simulated.device.gatt.writeRefusal = nil
            #expect(
                try await probe.clock.run { try await probe.client.runAtCommand("AT+PING=ok") } == ["+PING:ok", "OK"])
            await probe.finish()
        }

        @Test("callbacks after a disconnect are ignored: no byte of the old link arrives")
        func callbacksAfterDisconnect() async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            let rx = try #require(probe.rx)
            probe.client.disconnect()
            await probe.inject { _, _, peripheral in
                rx.standInSetValue(Data("STALE\r\n".utf8.map { $0 ^ 0x5A }))
                peripheral.delegate?.peripheral(peripheral, didUpdateValueFor: rx, error: nil)
                peripheral.delegate?.peripheralIsReady(toSendWriteWithoutResponse: peripheral)
            }
            #expect(!probe.atLines.contains("STALE"))
            await probe.connect()
            #expect(try await probe.clock.run { try await probe.client.runAtCommand("AT") } == ["OK"])
            #expect(!probe.atLines.contains("STALE"))
            await probe.finish()
        }

        /// 50 ms: the reconnect waits for the confirmation. 1,500 ms: longer
        /// than the backend waits (`confirmationWait`), so the reconnect goes
        /// first, and the confirmation, when it comes, must not end it.
        @Test(
            "a late didDisconnect of a cancelled connection does not end the next one",
            arguments: [50, 1_500])
        func lateDisconnectOfCancelledConnection(delayMs: Int) async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            let id = try #require(probe.client.connectedPeripheralId)
            // CoreBluetooth confirms the cancel only after the app already reconnects.
            probe.radio?.cancelConfirmationDelay = .milliseconds(delayMs)
            probe.client.disconnect()
            probe.client.connect(id: id)
            for _ in 0..<400 where !probe.client.atReady { await probe.advance(.milliseconds(5)) }
            #expect(probe.client.atReady)
            // Past the confirmation: the new link is still the client's.
            await probe.advance(.milliseconds(delayMs) + .milliseconds(100))
            #expect(probe.client.atReady)
            #expect(probe.client.connectionState == .connected)
            #expect(try await probe.clock.run { try await probe.client.runAtCommand("AT") } == ["OK"])
            await probe.finish()
        }

        /// CoreBluetooth reports a lost link twice, both reports queued before
        /// the first reaches the main actor, and the app reconnects as soon
        /// as it hears of the first. The second report belongs to the old
        /// connection (each callback carries the connection it was sent for):
        /// it must not end the new one.
        @Test("a lost link reported twice: the second report does not end the app's immediate reconnect")
        func lossReportedTwice() async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            let id = try #require(probe.client.connectedPeripheralId)
            let manager = try #require(probe.manager)
            let sdk = try #require(manager.delegate)
            let twice = LossReportedTwice(forwardingTo: sdk) {
                MainActor.assumeIsolated { probe.client.connect(id: id) }
            }
            manager.delegate = twice
            probe.simulated.disconnect(.terminatedByDevice)
            await probe.advance(.milliseconds(5))
            #expect(twice.reports == 1)
            for _ in 0..<400 where !probe.client.atReady { await probe.advance(.milliseconds(5)) }
            #expect(probe.client.atReady)
            #expect(probe.client.connectionState == .connected)
            #expect(try await probe.clock.run { try await probe.client.runAtCommand("AT") } == ["OK"])
            manager.delegate = sdk
            await probe.finish()
        }

        @Test("Bluetooth powered off mid-write fails the pending command; power on and reconnect work")
        func powerCycleMidWrite() async throws {
            var device = ClientHarness.fastDevice()
            device.link.mtu = 23
            device.link.packetsPerConnectionEvent = 1
            device.link.writeWithoutResponseCredits = 1
            let probe = CoreBluetoothProbe(device: device)
            await probe.connect()
            let send = Task { @MainActor in try await probe.client.sendRfPayload(Data(repeating: 1, count: 200)) }
            await probe.advance(.milliseconds(40))
            #expect(probe.simulated.hostBytesDelivered > 0)
            probe.environment.setBluetoothState(.poweredOff)
            await probe.advance(.milliseconds(10))
            await #expect(throws: XTalkBleError.notConnected) { try await send.value }
            #expect(probe.client.connectionState == .failed(.bluetoothUnavailable))
            probe.environment.setBluetoothState(.poweredOn)
            await probe.advance(.milliseconds(10))
            await probe.connect()
            #expect(
                try await probe.clock.run { try await probe.client.runAtCommand("AT+PING=again") } == [
                    "+PING:again", "OK",
                ])
            await probe.finish()
        }

        @Test("readiness races: writes resume on peripheralIsReady and nothing is written twice or lost")
        func readiness() async throws {
            var device = ClientHarness.fastDevice()
            device.link.mtu = 23
            device.link.writeWithoutResponseCredits = 2
            device.link.packetsPerConnectionEvent = 1
            let probe = CoreBluetoothProbe(device: device)
            await probe.connect()
            let token = String(repeating: "r", count: 32)
            let task = Task { @MainActor in try await probe.client.runAtCommand("AT+PING=" + token) }
            // Spurious readiness signals while the pump waits for credits.
            for _ in 0..<5 {
                await probe.advance(.milliseconds(3))
                await probe.inject { _, _, peripheral in
                    peripheral.delegate?.peripheralIsReady(toSendWriteWithoutResponse: peripheral)
                }
            }
            #expect(try await probe.clock.run { try await task.value } == ["+PING:" + token, "OK"])
            #expect(probe.simulated.droppedWrites == 0, "never written while the platform had no room")
            await probe.finish()
        }

        @Test("the maximum write length is read at write time: chunks grow with the MTU")
        func mtuGrows() async throws {
            var device = ClientHarness.fastDevice()
            device.link.mtu = 185
            device.link.mtuExchangeDelay = .seconds(2)
            let probe = CoreBluetoothProbe(device: device)
            await probe.connect()
            let long = "AT+PING=" + String(repeating: "m", count: 32)
            _ = try await probe.clock.run { try await probe.client.runAtCommand(long) }
            let before = probe.radio?.writes.map(\.bytes) ?? []
            #expect(before.allSatisfy { $0 <= 20 } && before.count >= 3, "MTU 23: 20-byte chunks \(before)")
            await probe.advance(.seconds(2))
            _ = try await probe.clock.run { try await probe.client.runAtCommand(long) }
            let after = Array((probe.radio?.writes.map(\.bytes) ?? []).dropFirst(before.count))
            #expect(after == [long.count + 2], "one write once the MTU grew: \(after)")
            await probe.finish()
        }

        @Test("SIG services come in their 16-bit form, as iOS reports them; the battery query still finds its own")
        func sigUUIDsShortForm() async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            var reported: [String] = []
            await probe.inject { _, _, peripheral in
                reported = (peripheral.services ?? []).map(\.uuid.uuidString)
            }
            #expect(reported.contains("180F") && reported.contains("180A"), "\(reported)")
            // The stand-in is strict where Apple's documentation is silent: no equality across forms.
            #expect(CBUUID(string: "180F") != CBUUID(string: "0000180F-0000-1000-8000-00805F9B34FB"))
            let client = probe.client
            #expect(try await probe.clock.run { await client.fetchBatteryLevel() } != nil)
            await probe.finish()
        }

        @Test("a service added (didModifyServices with an empty list), or another one invalidated: the link goes on")
        func serviceAdded() async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            await probe.inject { _, _, peripheral in
                peripheral.delegate?.peripheral(peripheral, didModifyServices: [])
            }
            await probe.inject { _, _, peripheral in
                // A service the connection never asked for (e.g. a DFU service) was invalidated.
                let dfu = CBService(uuid: CBUUID(string: "FE59"), peripheral: peripheral)
                peripheral.delegate?.peripheral(peripheral, didModifyServices: [dfu])
            }
            await probe.advance(.milliseconds(100))
            #expect(probe.client.connectionState == .connected && probe.client.atReady)
            #expect(
                try await probe.clock.run { try await probe.client.runAtCommand("AT+VER?") } == ["+VER:2.1.0", "OK"])
            await probe.finish()
        }

        @Test("the device changing its services ends the link cleanly")
        func servicesChanged() async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            let pending = Task { @MainActor in try await probe.client.runAtCommand("AT+VER?") }
            await probe.inject { _, _, peripheral in
                peripheral.delegate?.peripheral(peripheral, didModifyServices: peripheral.services ?? [])
            }
            await #expect(throws: XTalkBleError.notConnected) { try await pending.value }
            #expect(probe.client.connectionState == .disconnected)
            await probe.advance(.seconds(1))
            #expect(!probe.simulated.isConnected, "no half-open link")
            await probe.finish()
        }

        @Test(
            "the manager is created on the first startScan() with the power-alert option; authorization follows"
        )
        func managerCreatedLazily() async {
            let probe = CoreBluetoothProbe()
            await probe.advance(.seconds(1))
            #expect(probe.manager == nil, "XTalkBleClient() creates no manager: no permission prompt yet")
            probe.environment.authorization = .notDetermined
            #expect(CBManager.authorization == .notDetermined)
            probe.client.startScan()
            #expect(probe.manager != nil && probe.environment.permissionPromptsShown == 1)
            await probe.advance(.seconds(1))
            #expect(probe.manager?.state == .unknown, "no answer yet")
            probe.environment.answerPermissionPrompt(allow: false)
            #expect(CBManager.authorization == .denied)
            await probe.advance(.milliseconds(10))
            #expect(probe.manager?.state == .unauthorized)
            #expect(probe.client.connectionState == .failed(.permissionDenied))
            probe.environment.authorization = .allowedAlways
            #expect(CBManager.authorization == .allowedAlways)
            await probe.advance(.milliseconds(10))
            #expect(probe.manager?.state == .poweredOn)
            await probe.finish()
        }

        @Test("after Bluetooth resets, connect(id:) to a known device retrieves it: no new scan needed")
        func retrievalAfterReset() async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            let id = try #require(probe.client.connectedPeripheralId)
            probe.environment.setBluetoothState(.resetting)
            await probe.advance(.milliseconds(10))
            #expect(probe.client.connectionState == .failed(.bluetoothUnavailable))
            probe.environment.setBluetoothState(.poweredOn)
            await probe.advance(.milliseconds(10))
            // Every CBPeripheral the backend held is invalid now; the id is still in the scan results.
            #expect(probe.client.scanResults.contains { $0.id == id })
            probe.client.connect(id: id)
            for _ in 0..<400 where !probe.client.atReady { await probe.advance(.milliseconds(5)) }
            #expect(probe.client.atReady, "state \(probe.client.connectionState)")
            await probe.finish()
        }

        @Test("connect(id:) of a peripheral CoreBluetooth cannot retrieve fails later, never from inside the call")
        func unknownPeripheralFailsAsynchronously() async throws {
            let probe = CoreBluetoothProbe()
            await probe.connect()
            let id = try #require(probe.client.connectedPeripheralId)
            probe.client.disconnect()
            probe.environment.setBluetoothState(.resetting)
            await probe.advance(.milliseconds(10))
            probe.environment.setBluetoothState(.poweredOn)
            await probe.advance(.milliseconds(10))
            probe.radio?.forgetPeripherals()  // e.g. the system no longer knows the device
            let before = probe.events.count
            probe.client.connect(id: id)
            #expect(probe.client.connectionState == .connecting, "nothing delivered from inside connect(id:)")
            #expect(probe.events.count == before + 1)
            await probe.advance(.milliseconds(10))
            guard case .failed(.connectionFailed) = probe.client.connectionState else {
                Issue.record("state \(probe.client.connectionState)")
                return
            }
            await probe.finish()
        }
    }

    /// A central manager delegate in front of the SDK's: it passes every callback
    /// on, and the first lost link twice, with the app's reaction queued on the
    /// main queue between the two (where a reconnect would run).
    private final class LossReportedTwice: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
        private let sdk: any CBCentralManagerDelegate
        private let between: @Sendable () -> Void
        private(set) var reports = 0

        init(forwardingTo sdk: any CBCentralManagerDelegate, between: @escaping @Sendable () -> Void) {
            self.sdk = sdk
            self.between = between
        }

        func centralManagerDidUpdateState(_ central: CBCentralManager) { sdk.centralManagerDidUpdateState(central) }

        func centralManager(
            _ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
            advertisementData: [String: Any], rssi RSSI: NSNumber
        ) {
            sdk.centralManager(central, didDiscover: peripheral, advertisementData: advertisementData, rssi: RSSI)
        }

        func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
            sdk.centralManager(central, didConnect: peripheral)
        }

        func centralManager(
            _ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: (any Error)?
        ) {
            sdk.centralManager(central, didFailToConnect: peripheral, error: error)
        }

        func centralManager(
            _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: (any Error)?
        ) {
            reports += 1
            sdk.centralManager(central, didDisconnectPeripheral: peripheral, error: error)
            guard reports == 1 else { return }
            DispatchQueue.main.async(execute: between)
            sdk.centralManager(central, didDisconnectPeripheral: peripheral, error: error)
        }
    }
#endif
