import Foundation
import Testing
@testable import XTalkBleSdk
@testable import XTalkSimulator

/// Records every event the simulated central delivers.
@MainActor
final class CentralProbe {
    let environment: XTalkSimulatedEnvironment
    let clock: XTalkVirtualClock
    var backend: any BleBackend { environment.backend }
    private(set) var events: [BleBackendEvent] = []
    private(set) var eventTimes: [Duration] = []

    init(
        devices: [XTalkSimulatedDevice] = [XTalkSimulatedDevice()],
        bluetoothState: XTalkSimulatedBluetoothState = .poweredOn,
        seed: UInt64 = 7, activated: Bool = true
    ) {
        clock = XTalkVirtualClock()
        environment = XTalkSimulatedEnvironment(
            devices: devices, clock: clock, bluetoothState: bluetoothState, seed: seed)
        environment.backend.eventHandler = { [weak self] event in
            guard let self else { return }
            self.events.append(event)
            self.eventTimes.append(self.clock.elapsed)
        }
        // The app creates its manager (as on its first scan).
        if activated { environment.backend.activate(showPowerAlert: true, restoreIdentifier: nil) }
    }

    var peripheral: XTalkSimulatedPeripheral { environment.peripherals[0] }
    var id: UUID { peripheral.id }

    static let tx = BleCharacteristicRef(service: XTalkGatt.passthroughService, characteristic: XTalkGatt.passthroughTX)
    static let rx = BleCharacteristicRef(service: XTalkGatt.passthroughService, characteristic: XTalkGatt.passthroughRX)
    static let battery = BleCharacteristicRef(service: XTalkGatt.batteryService, characteristic: XTalkGatt.batteryLevel)
    static let firmwareRevision = BleCharacteristicRef(
        service: XTalkGatt.deviceInformationService,
        characteristic: XTalkGatt.firmwareRevision)

    func advance(_ duration: Duration) async { await clock.advance(by: duration) }

    /// Connects and subscribes to RX, then clears the recorded events.
    func connectAndSubscribe() async {
        await advance(.zero)
        backend.connect(id)
        await advance(.seconds(1))
        backend.setNotifyValue(true, for: Self.rx, of: id)
        await advance(.seconds(1))
        events.removeAll()
        eventTimes.removeAll()
    }

    /// Bytes of every RX notification, concatenated, and the chunk sizes.
    var notifications: [Data] {
        events.compactMap { event in
            if case .valueUpdated(_, let characteristic, let value?, nil) = event, characteristic == Self.rx {
                return value
            }
            return nil
        }
    }

    func count(where predicate: (BleBackendEvent) -> Bool) -> Int { events.filter(predicate).count }

    func finish() {
        environment.shutDown()
        #expect(clock.pendingTimerCount == 0, "no timer is left pending")
    }
}

extension BleBackendEvent {
    var isDisconnected: Bool { if case .disconnected = self { true } else { false } }
    var isReady: Bool { if case .readyToSendWriteWithoutResponse = self { true } else { false } }
    var isWriteCompleted: Bool { if case .writeCompleted = self { true } else { false } }
    var stateValue: BleManagerState? { if case .stateChanged(let state) = self { state } else { nil } }
}

@Suite("Simulated BLE link and central", .timeLimit(.minutes(5)))
@MainActor
struct SimulatedLinkTests {
    @Test(
        "the central starts unknown and reports its state shortly after the app first needs it, never from the call",
        arguments: [XTalkSimulatedBluetoothState.poweredOn, .poweredOff, .unauthorized, .unsupported, .resetting])
    func initialState(_ state: XTalkSimulatedBluetoothState) async {
        let probe = CentralProbe(bluetoothState: state, activated: false)
        await probe.advance(.seconds(1))
        #expect(probe.backend.state == .unknown)
        #expect(probe.events.isEmpty, "no manager yet: nothing is reported")
        #expect(!probe.environment.isBluetoothInUse)
        probe.backend.activate(showPowerAlert: true, restoreIdentifier: nil)
        #expect(probe.events.isEmpty && probe.backend.state == .unknown, "nothing from inside the call")
        await probe.advance(.zero)
        #expect(probe.backend.state == state.managerState)
        #expect(probe.events.compactMap(\.stateValue) == [state.managerState])
        probe.backend.activate(showPowerAlert: true, restoreIdentifier: nil)
        await probe.advance(.seconds(1))
        #expect(probe.events.count == 1, "activating again does nothing")
        probe.finish()
    }

    @Test("no answer to the permission prompt yet: .unknown until the user answers; each authorization's state")
    func permissionPrompt() async {
        let probe = CentralProbe(activated: false)
        probe.environment.authorization = .notDetermined
        probe.backend.activate(showPowerAlert: true, restoreIdentifier: nil)
        #expect(probe.environment.permissionPromptsShown == 1, "creating the manager asks the user")
        await probe.advance(.seconds(10))
        #expect(probe.backend.state == .unknown && probe.events.isEmpty, "no answer, no state")
        probe.backend.scanForPeripherals(withServices: [])
        #expect(probe.environment.apiMisuses.count == 1, "nothing works while unknown")
        probe.environment.answerPermissionPrompt(allow: true)
        await probe.advance(.zero)
        #expect(probe.backend.state == .poweredOn)
        // Settings: the user (or a policy) takes the permission away, and gives it back.
        for (authorization, state) in [
            (XTalkSimulatedAuthorization.denied, BleManagerState.unauthorized), (.allowedAlways, .poweredOn),
            (.restricted, .unauthorized),
        ] {
            probe.environment.authorization = authorization
            await probe.advance(.zero)
            #expect(probe.backend.state == state, "\(authorization)")
        }
        #expect(probe.events.compactMap(\.stateValue) == [.poweredOn, .unauthorized, .poweredOn, .unauthorized])
        #expect(probe.environment.permissionPromptsShown == 1)
        probe.finish()
    }

    @Test("a user who denies the prompt: .unauthorized", arguments: [false, true])
    func promptAnswered(allow: Bool) async {
        let probe = CentralProbe(activated: false)
        probe.environment.authorization = .notDetermined
        probe.backend.activate(showPowerAlert: true, restoreIdentifier: nil)
        await probe.advance(.seconds(1))
        probe.environment.answerPermissionPrompt(allow: allow)
        await probe.advance(.zero)
        #expect(probe.backend.state == (allow ? .poweredOn : .unauthorized))
        #expect(probe.environment.authorization == (allow ? .allowedAlways : .denied))
        probe.finish()
    }

    @Test("the power alert shows when the manager is created while Bluetooth is off, unless the app opts out")
    func powerAlert() async {
        for (state, shows, alerts) in [
            (XTalkSimulatedBluetoothState.poweredOff, true, 1), (.poweredOff, false, 0), (.poweredOn, true, 0),
        ] {
            let probe = CentralProbe(bluetoothState: state, activated: false)
            probe.backend.activate(showPowerAlert: shows, restoreIdentifier: nil)
            probe.backend.activate(showPowerAlert: shows, restoreIdentifier: nil)
            #expect(probe.environment.powerAlertsShown == alerts, "\(state), shows \(shows)")
            probe.finish()
        }
    }

    @Test("scanning reports name, address, service and jittered RSSI at the advertising interval")
    func scanning() async {
        var device = XTalkSimulatedDevice(name: "xTalk-A1B2", address: "AA:BB:CC:DD:EE:0F", rssi: -60, rssiJitter: 4)
        device.advertisingInterval = .milliseconds(100)
        let probe = CentralProbe(devices: [device])
        await probe.advance(.zero)
        probe.backend.scanForPeripherals(withServices: [XTalkGatt.passthroughService])
        await probe.advance(.milliseconds(1000))
        let discoveries: [(BleAdvertisement, Int)] = probe.events.compactMap {
            if case .discovered(_, let advertisement, let rssi) = $0 {
                return (advertisement, rssi)
            } else {
                return nil
            }
        }
        #expect((9...11).contains(discoveries.count))
        for (advertisement, rssi) in discoveries {
            #expect(advertisement.localName == "xTalk-A1B2")
            #expect(advertisement.manufacturerData == Data([0xFF, 0xFF, 0x01, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0x0F]))
            #expect(advertisement.serviceUUIDs == [XTalkGatt.passthroughService])
            #expect((-64 ... -56).contains(rssi))
        }
        #expect(Set(discoveries.map(\.1)).count > 1, "RSSI varies")
        probe.backend.stopScan()
        let seen = probe.events.count
        await probe.advance(.seconds(1))
        #expect(probe.events.count == seen)
        probe.finish()
    }

    @Test("a device without an address advertises no manufacturer data")
    func noAddress() async {
        let probe = CentralProbe(devices: [XTalkSimulatedDevice(address: nil)])
        await probe.advance(.zero)
        probe.backend.scanForPeripherals(withServices: [])
        await probe.advance(.milliseconds(200))
        guard case .discovered(_, let advertisement, _)? = probe.events.last else {
            Issue.record("no discovery")
            return
        }
        #expect(advertisement.manufacturerData == nil)
        probe.finish()
    }

    @Test("the scan filter skips devices that do not advertise the passthrough service")
    func scanFilter() async {
        let probe = CentralProbe(devices: [
            XTalkSimulatedDevice(name: "other", advertisesPassthroughService: false),
            XTalkSimulatedDevice(name: "xTalk"),
        ])
        await probe.advance(.zero)
        probe.backend.scanForPeripherals(withServices: [XTalkGatt.passthroughService])
        await probe.advance(.milliseconds(500))
        let names = Set(
            probe.events.compactMap { if case .discovered(_, let adv, _) = $0 { adv.localName } else { nil } })
        #expect(names == ["xTalk"])
        probe.finish()
    }

    @Test("the same seed gives the same scan; another seed another")
    func deterministic() async {
        func rssiTrace(seed: UInt64) async -> [Int] {
            let probe = CentralProbe(seed: seed)
            await probe.advance(.zero)
            probe.backend.scanForPeripherals(withServices: [])
            await probe.advance(.seconds(2))
            probe.finish()
            return probe.events.compactMap { if case .discovered(_, _, let rssi) = $0 { rssi } else { nil } }
        }
        let a = await rssiTrace(seed: 1)
        #expect(await rssiTrace(seed: 1) == a)
        #expect(await rssiTrace(seed: 2) != a)
    }

    @Test(
        "commands are ignored and recorded as misuse unless powered on",
        arguments: [XTalkSimulatedBluetoothState.poweredOff, .unauthorized, .unsupported, .resetting])
    func misuse(_ state: XTalkSimulatedBluetoothState) async {
        let probe = CentralProbe(bluetoothState: state)
        await probe.advance(.zero)
        probe.backend.scanForPeripherals(withServices: [])
        probe.backend.connect(probe.id)
        await probe.advance(.seconds(2))
        #expect(probe.events.count == 1)  // only the state
        #expect(probe.environment.apiMisuses.count == 2)
        #expect(!probe.peripheral.isConnected)
        probe.finish()
    }

    @Test("a device connects after its delay, stops advertising, and its MTU grows after the exchange")
    func connectAndMTU() async {
        var device = XTalkSimulatedDevice()
        device.link.connectDelay = .milliseconds(40)
        device.link.mtu = 185
        device.link.mtuExchangeDelay = .milliseconds(30)
        let probe = CentralProbe(devices: [device])
        await probe.advance(.zero)
        probe.backend.scanForPeripherals(withServices: [])
        #expect(probe.backend.maximumWriteValueLength(for: .withoutResponse, of: probe.id) == 0)
        probe.backend.connect(probe.id)
        await probe.advance(.milliseconds(39))
        #expect(!probe.peripheral.isConnected)
        await probe.advance(.milliseconds(1))
        #expect(probe.peripheral.isConnected)
        guard let connectedAt = probe.events.firstIndex(where: { if case .connected = $0 { true } else { false } })
        else {
            Issue.record("no connected event")
            return
        }
        #expect(probe.eventTimes[connectedAt] == .milliseconds(40))
        #expect(probe.backend.maximumWriteValueLength(for: .withoutResponse, of: probe.id) == 20)
        #expect(probe.backend.maximumWriteValueLength(for: .withResponse, of: probe.id) == 512)
        await probe.advance(.milliseconds(30))
        #expect(probe.backend.maximumWriteValueLength(for: .withoutResponse, of: probe.id) == 182)
        let discoveries = probe.count { if case .discovered = $0 { true } else { false } }
        await probe.advance(.seconds(1))
        #expect(
            probe.count { if case .discovered = $0 { true } else { false } } == discoveries,
            "connected devices do not advertise")
        probe.finish()
    }

    /// MTU − 3 per packet, but never more than an attribute value (512): at
    /// MTU 516 and 517 one packet would otherwise carry 513 or 514 bytes.
    @Test("MTU is clamped to 23…517; a packet carries at most 512 bytes")
    func mtuBounds() async {
        for (configured, expected) in [(10, 20), (23, 20), (247, 244), (515, 512), (517, 512), (600, 512)] {
            var device = XTalkSimulatedDevice()
            device.link.mtu = configured
            let probe = CentralProbe(devices: [device])
            await probe.connectAndSubscribe()
            #expect(probe.backend.maximumWriteValueLength(for: .withoutResponse, of: probe.id) == expected)
            probe.finish()
        }
    }

    @Test("GATT discovery reports the layout of PROTOCOL.md section 2 and its variants")
    func gattVariants() async {
        func discover(_ gatt: XTalkSimulatedGatt) async -> (services: [BleUUID], passthrough: [BleCharacteristicInfo]) {
            let probe = CentralProbe(devices: [XTalkSimulatedDevice(gatt: gatt)])
            await probe.advance(.zero)
            probe.backend.connect(probe.id)
            await probe.advance(.seconds(1))
            probe.backend.discoverServices(nil, for: probe.id)
            await probe.advance(.seconds(1))
            probe.backend.discoverCharacteristics(nil, for: XTalkGatt.passthroughService, of: probe.id)
            await probe.advance(.seconds(1))
            probe.finish()
            var services: [BleUUID] = []
            var characteristics: [BleCharacteristicInfo] = []
            for event in probe.events {
                if case .servicesDiscovered(_, let found, nil) = event { services = found }
                if case .characteristicsDiscovered(_, _, let found, _) = event { characteristics = found }
            }
            return (services, characteristics)
        }
        let full = await discover(XTalkSimulatedGatt())
        #expect(
            full.services == [
                XTalkGatt.passthroughService, XTalkGatt.batteryService, XTalkGatt.deviceInformationService,
            ])
        #expect(
            full.passthrough == [
                BleCharacteristicInfo(uuid: XTalkGatt.passthroughTX, properties: [.write, .writeWithoutResponse]),
                BleCharacteristicInfo(uuid: XTalkGatt.passthroughRX, properties: [.notify]),
            ])
        #expect(
            await discover(XTalkSimulatedGatt(hasPassthroughService: false)).services
                == [XTalkGatt.batteryService, XTalkGatt.deviceInformationService])
        #expect(
            await discover(XTalkSimulatedGatt(hasPassthroughTX: false)).passthrough.map(\.uuid) == [
                XTalkGatt.passthroughRX
            ])
        #expect(
            await discover(XTalkSimulatedGatt(hasPassthroughRX: false)).passthrough.map(\.uuid) == [
                XTalkGatt.passthroughTX
            ])
        #expect(
            await discover(XTalkSimulatedGatt(txSupportsWriteWithoutResponse: false)).passthrough.first?.properties == [
                .write
            ])
        #expect(
            await discover(XTalkSimulatedGatt(hasBatteryService: false, hasDeviceInformationService: false)).services
                == [XTalkGatt.passthroughService])
    }

    @Test("subscribing confirms notifications, or reports the refusal")
    func subscription() async {
        let probe = CentralProbe(devices: [
            XTalkSimulatedDevice(gatt: XTalkSimulatedGatt(subscriptionRefusal: "insufficient authentication"))
        ])
        await probe.advance(.zero)
        probe.backend.connect(probe.id)
        await probe.advance(.seconds(1))
        probe.backend.setNotifyValue(true, for: CentralProbe.rx, of: probe.id)
        await probe.advance(.seconds(1))
        guard case .notificationStateUpdated(_, _, let notifying, let error)? = probe.events.last else {
            Issue.record("no notification state")
            return
        }
        #expect(!notifying)
        #expect(error?.message == "insufficient authentication")
        probe.finish()
    }

    @Test("reads return the stored values, failures and silence as configured")
    func reads() async {
        var gatt = XTalkSimulatedGatt(batteryLevel: 250)
        gatt.failingReads = ["2A27"]
        gatt.silentReads = ["2A26"]
        let probe = CentralProbe(devices: [XTalkSimulatedDevice(gatt: gatt)])
        await probe.connectAndSubscribe()
        probe.backend.readValue(for: CentralProbe.battery, of: probe.id)
        probe.backend.readValue(for: CentralProbe.firmwareRevision, of: probe.id)
        probe.backend.readValue(
            for: BleCharacteristicRef(
                service: XTalkGatt.deviceInformationService,
                characteristic: XTalkGatt.hardwareRevision), of: probe.id)
        await probe.advance(.seconds(1))
        let values = probe.events.compactMap { event -> (BleUUID, Data?, BleBackendError?)? in
            if case .valueUpdated(_, let ref, let value, let error) = event {
                return (ref.characteristic, value, error)
            }
            return nil
        }
        #expect(values.count == 2)
        #expect(values.first?.0 == XTalkGatt.batteryLevel && values.first?.1 == Data([250]))
        #expect(values.last?.0 == XTalkGatt.hardwareRevision && values.last?.2?.code == .readNotPermitted)
        probe.finish()
    }

    @Test("write without response honours credits; the readiness signal follows a connection event")
    func flowControl() async {
        var device = XTalkSimulatedDevice()
        device.link.writeWithoutResponseCredits = 4
        device.link.packetsPerConnectionEvent = 2
        device.link.connectionInterval = .milliseconds(15)
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        for _ in 0..<4 {
            #expect(probe.backend.canSendWriteWithoutResponse(probe.id))
            probe.backend.writeValue(Data("AT".utf8), for: CentralProbe.tx, of: probe.id, type: .withoutResponse)
        }
        #expect(!probe.backend.canSendWriteWithoutResponse(probe.id))
        probe.backend.writeValue(Data("XX".utf8), for: CentralProbe.tx, of: probe.id, type: .withoutResponse)
        #expect(probe.peripheral.droppedWrites == 1, "a write beyond the credits is dropped")
        await probe.advance(.milliseconds(15))
        #expect(probe.count { $0.isReady } == 1)
        #expect(probe.backend.canSendWriteWithoutResponse(probe.id))
        #expect(probe.peripheral.hostBytesDelivered == 4)  // two packets in the first event
        await probe.advance(.milliseconds(15))
        #expect(probe.peripheral.hostBytesDelivered == 8)
        #expect(probe.count { $0.isReady } == 1, "only when credits return from zero")
        probe.finish()
    }

    @Test("throughput is bounded by packets per connection event", arguments: [4, 6])
    func throughput(packetsPerEvent: Int) async {
        var device = XTalkSimulatedDevice()
        device.link.writeWithoutResponseCredits = 100
        device.link.packetsPerConnectionEvent = packetsPerEvent
        device.link.connectionInterval = .milliseconds(15)
        device.link.mtu = 23
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        let start = probe.clock.elapsed
        for _ in 0..<24 {
            probe.backend.writeValue(
                Data(repeating: 0x41, count: 20), for: CentralProbe.tx, of: probe.id, type: .withoutResponse)
        }
        var deliveredAt: Duration?
        while deliveredAt == nil {
            await probe.clock.advance(by: .milliseconds(1))
            if probe.peripheral.hostBytesDelivered == 480 { deliveredAt = probe.clock.elapsed }
        }
        let events = Int(((deliveredAt ?? .zero) - start) / .milliseconds(15) + 0.999)
        #expect(events == 24 / packetsPerEvent)
        probe.finish()
    }

    @Test("writes with response are acknowledged; over 512 bytes is an ATT error")
    func writeWithResponse() async {
        let probe = CentralProbe()
        await probe.connectAndSubscribe()
        probe.backend.writeValue(
            Data(repeating: 0x41, count: 300), for: CentralProbe.tx, of: probe.id, type: .withResponse)
        await probe.advance(.seconds(1))
        #expect(probe.peripheral.hostBytesDelivered == 300)
        #expect(probe.events.contains { if case .writeCompleted(_, _, nil) = $0 { true } else { false } })
        probe.backend.writeValue(
            Data(repeating: 0x41, count: 513), for: CentralProbe.tx, of: probe.id, type: .withResponse)
        await probe.advance(.seconds(1))
        #expect(
            probe.events.contains {
                if case .writeCompleted(_, _, let error?) = $0 { error.code == .attribute(0x0D) } else { false }
            })
        probe.finish()
    }

    @Test("device output is packed into notifications of at most MTU − 3 bytes")
    func packedNotifications() async {
        var device = XTalkSimulatedDevice()
        device.link.mtu = 23
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        let bytes = (0..<100).map { UInt8($0) }
        probe.peripheral.emitRawBytes(bytes)
        await probe.advance(.seconds(1))
        #expect(probe.notifications.map(\.count) == [20, 20, 20, 20, 20])
        #expect(Array(probe.notifications.joined()) == bytes)
        probe.finish()
    }

    @Test(
        "random and single-byte splits cut replies anywhere, losing nothing",
        arguments: [XTalkNotificationSplit.random, .singleBytes])
    func splitNotifications(_ split: XTalkNotificationSplit) async {
        var device = XTalkSimulatedDevice()
        device.link.notificationSplit = split
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        let bytes = (0..<500).map { UInt8(truncatingIfNeeded: $0 * 7) }
        probe.peripheral.emitRawBytes(bytes)
        await probe.advance(.seconds(5))
        #expect(Array(probe.notifications.joined()) == bytes)
        let sizes = Set(probe.notifications.map(\.count))
        if split == .singleBytes {
            #expect(sizes == [1])
        } else {
            #expect(sizes.count > 5 && sizes.allSatisfy { $0 <= 244 })
        }
        probe.finish()
    }

    @Test("without a subscription the device's output is lost")
    func unsubscribed() async {
        let probe = CentralProbe()
        await probe.advance(.zero)
        probe.backend.connect(probe.id)
        await probe.advance(.seconds(1))
        probe.peripheral.emitRawBytes([1, 2, 3])
        await probe.advance(.seconds(1))
        #expect(probe.notifications.isEmpty)
        #expect(probe.peripheral.droppedNotificationBytes == 3)
        probe.finish()
    }

    @Test("a lost link reports connectionTimeout after the supervision timeout; meanwhile writes go nowhere")
    func linkLoss() async {
        #expect(XTalkSimulatedLink().supervisionTimeout == .milliseconds(720), "iOS's default")
        var device = XTalkSimulatedDevice()
        device.link.supervisionTimeout = .milliseconds(500)
        device.link.writeWithoutResponseCredits = 4
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        probe.peripheral.emitRawBytes(Array(repeating: 0x41, count: 2000))
        await probe.advance(.milliseconds(16))
        let before = probe.notifications.count
        #expect(before > 0)
        probe.backend.writeValue(Data("AT\r\n".utf8), for: CentralProbe.tx, of: probe.id, type: .withResponse)
        probe.peripheral.disconnect()
        #expect(!probe.peripheral.isConnected)
        let delivered = probe.peripheral.hostBytesDelivered
        // The supervision window: the central still has the link, writes are taken and go nowhere.
        await probe.advance(.milliseconds(100))
        #expect(probe.backend.maximumWriteValueLength(for: .withoutResponse, of: probe.id) == 244)
        for _ in 0..<4 {
            #expect(probe.backend.canSendWriteWithoutResponse(probe.id))
            probe.backend.writeValue(Data("AT\r\n".utf8), for: CentralProbe.tx, of: probe.id, type: .withoutResponse)
        }
        #expect(!probe.backend.canSendWriteWithoutResponse(probe.id), "no credit comes back")
        probe.backend.writeValue(Data("AT\r\n".utf8), for: CentralProbe.tx, of: probe.id, type: .withResponse)
        probe.backend.readValue(for: CentralProbe.battery, of: probe.id)
        #expect(probe.environment.apiMisuses.isEmpty, "the link is up as far as the central knows")
        await probe.advance(.milliseconds(399))
        #expect(!probe.events.contains { $0.isDisconnected })
        #expect(probe.peripheral.hostBytesDelivered == delivered, "nothing reached the device")
        await probe.advance(.milliseconds(1))
        guard case .disconnected(_, let error)? = probe.events.last else {
            Issue.record("no disconnect")
            return
        }
        #expect(error?.code == .connectionTimeout)
        #expect(probe.notifications.count == before, "no byte of the lost link arrives")
        #expect(!probe.events.contains { $0.isWriteCompleted }, "pending writes never complete")
        #expect(
            !probe.events.contains {
                if case .valueUpdated(_, let characteristic, _, _) = $0 {
                    characteristic == CentralProbe.battery
                } else {
                    false
                }
            }, "reads never answer")
        #expect(probe.backend.maximumWriteValueLength(for: .withoutResponse, of: probe.id) == 0)
        #expect(!probe.backend.canSendWriteWithoutResponse(probe.id))
        // A new connection starts from nothing.
        await probe.connectAndSubscribe()
        await probe.advance(.seconds(1))
        #expect(probe.notifications.isEmpty)
        #expect(probe.peripheral.connections == 2)
        probe.finish()
    }

    @Test("a disconnect can land mid-write: the device got exactly the first bytes")
    func midWriteDisconnect() async {
        let probe = CentralProbe()
        await probe.connectAndSubscribe()
        probe.peripheral.disconnect(afterHostBytes: 7)
        probe.backend.writeValue(
            Data("AT+PING=abc\r\n".utf8), for: CentralProbe.tx, of: probe.id, type: .withoutResponse)
        await probe.advance(.seconds(1))
        #expect(!probe.peripheral.isConnected)
        #expect(probe.events.contains { $0.isDisconnected })
        probe.finish()
    }

    @Test("a disconnect can land mid-line: the host got exactly the first bytes")
    func midLineDisconnect() async {
        let probe = CentralProbe()
        await probe.connectAndSubscribe()
        probe.peripheral.disconnect(afterDeviceBytes: 5)
        probe.peripheral.emitRawBytes(Array("+VER:2.1.0\r\nOK\r\n".utf8))
        await probe.advance(.seconds(1))
        #expect(Array(probe.notifications.joined()) == Array("+VER:".utf8))
        #expect(probe.events.last?.isDisconnected == true)
        probe.finish()
    }

    @Test("cancelling a connection or an attempt ends it at once; nothing of it arrives afterwards")
    func cancelConnection() async {
        var device = XTalkSimulatedDevice()
        device.link.connectionNeverCompletes = true
        let probe = CentralProbe(devices: [device])
        await probe.advance(.zero)
        probe.backend.connect(probe.id)
        await probe.advance(.seconds(60))
        #expect(!probe.peripheral.isConnected, "CoreBluetooth never times a connection out")
        let before = probe.events.count
        probe.backend.cancelPeripheralConnection(probe.id)
        await probe.advance(.seconds(1))
        #expect(probe.events.count == before)
        probe.peripheral.device.link = .ideal
        await probe.connectAndSubscribe()
        // A notification posted but not yet delivered is dropped with the cancelled connection:
        // on the ideal link the connection event runs first, posts the notification, then the cancel runs.
        probe.peripheral.emitRawBytes([1, 2, 3])
        let backend = probe.backend
        let id = probe.id
        _ = probe.clock.schedule(after: .zero) { backend.cancelPeripheralConnection(id) }
        await probe.advance(.seconds(1))
        #expect(probe.events.isEmpty, "nothing of the cancelled connection: \(probe.events)")
        let delivered = probe.events.count
        // A new connection to the same peripheral right after the cancel is not confused with the old one.
        probe.backend.connect(probe.id)
        probe.backend.cancelPeripheralConnection(probe.id)
        probe.backend.connect(probe.id)
        await probe.advance(.seconds(1))
        let connectedEvents = probe.events.dropFirst(delivered).filter {
            if case .connected = $0 { true } else { false }
        }
        #expect(connectedEvents.count == 1)
        #expect(!probe.events.contains { $0.isDisconnected })
        probe.finish()
    }

    @Test("a refused connection fails to connect")
    func refused() async {
        var device = XTalkSimulatedDevice()
        device.link.refusesConnection = true
        let probe = CentralProbe(devices: [device])
        await probe.advance(.zero)
        probe.backend.connect(probe.id)
        await probe.advance(.seconds(1))
        #expect(
            probe.events.contains {
                if case .failedToConnect(_, let error?) = $0 { error.code == .connectionFailed } else { false }
            })
        probe.finish()
    }

    @Test("powering off drops every link without a disconnect callback; powering on needs a new connection")
    func powerCycle() async {
        let probe = CentralProbe()
        await probe.connectAndSubscribe()
        probe.backend.writeValue(Data("AT\r\n".utf8), for: CentralProbe.tx, of: probe.id, type: .withResponse)
        probe.environment.setBluetoothState(.poweredOff)
        await probe.advance(.seconds(1))
        #expect(probe.events.compactMap(\.stateValue) == [.poweredOff])
        #expect(!probe.events.contains { $0.isDisconnected })
        #expect(!probe.events.contains { $0.isWriteCompleted })
        #expect(!probe.peripheral.isConnected)
        probe.environment.setBluetoothState(.poweredOn)
        await probe.advance(.seconds(1))
        #expect(probe.backend.state == .poweredOn)
        #expect(!probe.peripheral.isConnected)
        probe.finish()
    }

    @Test("an unknown peripheral fails to connect")
    func unknownPeripheral() async {
        let probe = CentralProbe()
        await probe.advance(.zero)
        probe.backend.connect(UUID())
        await probe.advance(.zero)
        #expect(probe.events.contains { if case .failedToConnect = $0 { true } else { false } })
        probe.finish()
    }
}

@Suite("Simulated device end to end over the link", .timeLimit(.minutes(5)))
@MainActor
struct SimulatedDeviceEndToEndTests {
    /// Writes one command line and returns the decoded notification text once
    /// `terminator` arrived, with the virtual time it took.
    func roundTrip(
        _ probe: CentralProbe, _ command: String, encoding: XTalkAtEncoding,
        until terminator: String = "OK\r\n"
    ) async -> (text: String, elapsed: Duration) {
        let key: UInt8 = encoding == .xor ? 0x5A : 0
        let start = probe.clock.elapsed
        let seen = probe.notifications.count
        probe.backend.writeValue(
            Data((command + "\r\n").utf8.map { $0 ^ key }), for: CentralProbe.tx, of: probe.id,
            type: .withoutResponse)
        var text = ""
        for _ in 0..<2_000 where !text.hasSuffix(terminator) {
            await probe.clock.advance(by: .milliseconds(1))
            text = String(decoding: probe.notifications.dropFirst(seen).joined().map { $0 ^ key }, as: UTF8.self)
        }
        return (text, probe.clock.elapsed - start)
    }

    @Test("AT commands travel over the link in the firmware's encoding", arguments: XTalkAtEncoding.allCases)
    func atOverLink(_ encoding: XTalkAtEncoding) async {
        var device = XTalkSimulatedDevice()
        device.firmware.encoding = encoding
        device.firmware.echo = true
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        #expect(await roundTrip(probe, "AT+VER?", encoding: encoding).text == "AT+VER?\r\n+VER:2.1.0\r\nOK\r\n")
        #expect(
            await roundTrip(probe, "AT+ID?", encoding: encoding).text
                == "AT+ID?\r\n+ID:A5812345,EFUSE,XT2648012345\r\nOK\r\n".replacingOccurrences(
                    of: "A5812345", with: hex(device.firmware.deviceID)))
        #expect(probe.peripheral.processedCommands == ["AT+VER?", "AT+ID?"])
        probe.finish()
    }

    @Test(
        "a round trip costs whole connection intervals plus the MCU's processing time",
        arguments: [Duration.milliseconds(15), .milliseconds(30)])
    func latency(_ interval: Duration) async {
        var device = XTalkSimulatedDevice()
        device.link.connectionInterval = interval
        device.firmware.processingDelay = .milliseconds(2)
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        let (text, elapsed) = await roundTrip(probe, "AT", encoding: .xor)
        #expect(text == "OK\r\n")
        // Up to one interval to the next event (write), 2 ms of processing, then the next event (notify).
        #expect(elapsed > interval && elapsed <= interval * 2 + .milliseconds(1))
        probe.finish()
    }

    @Test("an ideal link answers at once")
    func idealLink() async {
        var device = XTalkSimulatedDevice(link: .ideal)
        device.firmware.processingDelay = .zero
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        let (text, elapsed) = await roundTrip(probe, "AT+PING=abc", encoding: .xor)
        #expect(text == "+PING:abc\r\nOK\r\n")
        #expect(elapsed == .milliseconds(1))  // the first 1 ms step of the loop
        probe.finish()
    }

    @Test("a device that ends the connection is reported at once as peripheralDisconnected")
    func terminatedByDevice() async {
        let probe = CentralProbe()
        await probe.connectAndSubscribe()
        probe.peripheral.disconnect(.terminatedByDevice)
        await probe.advance(.zero)
        guard case .disconnected(_, let error)? = probe.events.last else {
            Issue.record("no disconnect")
            return
        }
        #expect(error?.code == .peripheralDisconnected)
        #expect(!probe.backend.canSendWriteWithoutResponse(probe.id))
        probe.finish()
    }

    @Test("the app cancelling during the supervision window ends the link at once, without a late report")
    func cancelDuringSupervision() async {
        let probe = CentralProbe()
        await probe.connectAndSubscribe()
        probe.peripheral.disconnect()
        await probe.advance(.milliseconds(100))
        probe.backend.cancelPeripheralConnection(probe.id)
        #expect(!probe.backend.canSendWriteWithoutResponse(probe.id))
        // A new connection before the old supervision timeout would have fired is not ended by it.
        await probe.connectAndSubscribe()
        await probe.advance(.seconds(2))
        #expect(!probe.events.contains { $0.isDisconnected })
        #expect(probe.peripheral.isConnected)
        #expect(probe.peripheral.connections == 2)
        probe.finish()
    }

    @Test("radio traffic reaches the host as +DI: lines while connected and is lost otherwise")
    func radioTraffic() async {
        let probe = CentralProbe()
        await probe.connectAndSubscribe()
        probe.peripheral.startRadioTraffic(every: .milliseconds(100), payloadSize: 8)
        // Ten frames in one second, each delivered at the connection event after it.
        await probe.advance(.milliseconds(1_020))
        let text = String(decoding: probe.notifications.joined().map { $0 ^ 0x5A }, as: UTF8.self)
        #expect(text.components(separatedBy: "\r\n").filter { $0.hasPrefix("+DI:") }.count == 10)
        probe.peripheral.disconnect()
        await probe.advance(.milliseconds(1_000))
        probe.peripheral.stopRadioTraffic()
        // Frames the radio received while no host was connected are not queued for the next connection.
        await probe.connectAndSubscribe()
        await probe.advance(.seconds(1))
        #expect(probe.notifications.isEmpty)
        probe.finish()
    }

    func hex(_ value: UInt32) -> String {
        let digits = Array("0123456789ABCDEF")
        return String((0..<8).reversed().map { digits[Int((value >> (UInt32($0) * 4)) & 0xF)] })
    }
}

@Suite("Simulated link buffering", .timeLimit(.minutes(5)))
@MainActor
struct SimulatedLinkBufferTests {
    @Test("device output beyond the notification buffer is dropped and counted")
    func bufferOverflow() async {
        var device = XTalkSimulatedDevice()
        device.link.notificationBufferLimit = 100
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        probe.peripheral.emitRawBytes(Array(repeating: 0x41, count: 150))
        await probe.advance(.seconds(1))
        #expect(probe.notifications.joined().count == 100)
        #expect(probe.peripheral.droppedNotificationBytes == 50)
        probe.finish()
    }

    @Test("deviceBytesQueued counts what still waits for a connection event, down to zero")
    func queuedBytes() async {
        var device = XTalkSimulatedDevice()
        device.link.mtu = 23
        device.link.connectionInterval = .milliseconds(30)
        device.link.packetsPerConnectionEvent = 1
        device.link.notificationSplit = .packed
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        #expect(probe.peripheral.deviceBytesQueued == 0)
        probe.peripheral.emitRawBytes(Array(repeating: 0x41, count: 100))
        #expect(probe.peripheral.deviceBytesQueued == 100)
        // One 20-byte notification per 30 ms event.
        await probe.advance(.milliseconds(45))
        let queued = probe.peripheral.deviceBytesQueued
        #expect(queued < 100 && queued > 0, "queued \(queued)")
        #expect(queued + probe.notifications.joined().count == 100)
        await probe.advance(.milliseconds(200))
        #expect(probe.peripheral.deviceBytesQueued == 0)
        #expect(probe.notifications.joined().count == 100)
        probe.finish()
    }
}
