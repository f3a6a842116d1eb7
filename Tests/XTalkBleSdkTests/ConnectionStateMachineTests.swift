import Foundation
import Testing
@testable import XTalkBleSdk

/// The connection lifecycle as a value: driven input by input, with no
/// client and no backend (issue 13: one method per input).
@Suite("Connection state machine: scan, connect, discover, subscribe, end", .timeLimit(.minutes(1)))
struct ConnectionStateMachineTests {
    let device = UUID()
    let advertisement = BleAdvertisement(
        localName: "xTalk-0001", manufacturerData: nil, serviceUUIDs: [XTalkGatt.passthroughService])
    let tx = BleCharacteristicInfo(uuid: XTalkGatt.passthroughTX, properties: [.write, .writeWithoutResponse])
    let rx = BleCharacteristicInfo(uuid: XTalkGatt.passthroughRX, properties: [.notify])
    let rxRef = BleCharacteristicRef(service: XTalkGatt.passthroughService, characteristic: XTalkGatt.passthroughRX)

    /// A machine with the radio on, scanning, that has seen the device.
    func scanned() -> ConnectionStateMachine {
        var machine = ConnectionStateMachine(connectTimeout: .seconds(10), radio: .poweredOn)
        #expect(machine.startScan() == [.backend(.scan(services: [XTalkGatt.passthroughService]))])
        #expect(machine.peripheralDiscovered(device, advertisement, rssi: -60).isEmpty)
        #expect(machine.published.scanResults.map(\.name) == ["xTalk-0001"])
        return machine
    }

    /// Connects and walks discovery up to the subscription.
    func subscribing(_ machine: inout ConnectionStateMachine) {
        let connect = machine.connect(device)
        #expect(connect.contains(.backend(.stopScan)) && connect.contains(.backend(.connect(device))))
        #expect(machine.published.connectionState == .connecting)
        #expect(
            machine.connected(device) == [
                .backend(
                    .discoverServices(
                        device,
                        [
                            XTalkGatt.passthroughService, XTalkGatt.batteryService, XTalkGatt.deviceInformationService,
                        ]))
            ])
        #expect(machine.published.connectionState == .connected)
        #expect(
            machine.servicesDiscovered(device, [XTalkGatt.passthroughService], failure: nil)
                == [
                    .backend(
                        .discoverCharacteristics(
                            device, service: XTalkGatt.passthroughService,
                            characteristics: [XTalkGatt.passthroughTX, XTalkGatt.passthroughRX]))
                ])
        #expect(
            machine.characteristicsDiscovered(device, service: XTalkGatt.passthroughService, [tx, rx], failure: nil)
                == [.backend(.subscribe(device, rxRef))])
        #expect(!machine.published.atReady)
    }

    @Test("the happy path: ready when notifications are on, with write without response when TX allows it")
    func happyPath() {
        var machine = scanned()
        subscribing(&machine)
        let ready = machine.notificationStateUpdated(device, rxRef, isNotifying: true, error: nil)
        #expect(ready.contains(.openPassthrough(peripheral: device, writeType: .withoutResponse)))
        #expect(ready.contains { if case .cancelTimer = $0 { true } else { false } }, "the connect timer stops")
        #expect(machine.published.atReady && machine.published.connectionState == .connected)
        #expect(machine.published.connectedName == "xTalk-0001")
        // The link is lost: not ready, the passthrough closes, the state says disconnected.
        let lost = machine.disconnected(device)
        #expect(lost == [.closePassthrough(error: .notConnected)])
        #expect(!machine.published.atReady && machine.published.connectionState == .disconnected)
        #expect(machine.published.connectedPeripheralId == nil)
    }

    @Test("scanning waits for the radio; an unusable radio fails the scan with its reason")
    func radio() {
        var waiting = ConnectionStateMachine(connectTimeout: .seconds(10), radio: .unknown)
        #expect(waiting.startScan().isEmpty, "no scan before the radio answers")
        #expect(waiting.radioStateChanged(.poweredOn) == [.backend(.scan(services: [XTalkGatt.passthroughService]))])
        var denied = ConnectionStateMachine(connectTimeout: .seconds(10), radio: .unknown)
        _ = denied.startScan()
        _ = denied.radioStateChanged(.unauthorized)
        #expect(denied.published.connectionState == .failed(.permissionDenied))
        var scanning = scanned()
        #expect(scanning.scanFailed("the adapter went away").isEmpty)
        #expect(scanning.published.connectionState == .failed(.scanFailed("the adapter went away")))
    }

    @Test("what the device lacks fails the connection with the seed's error and cancels the link")
    func missingPieces() {
        var noService = scanned()
        _ = noService.connect(device)
        _ = noService.connected(device)
        let failed = noService.servicesDiscovered(device, [XTalkGatt.batteryService], failure: nil)
        #expect(failed.contains(.backend(.cancelConnection(device))))
        #expect(noService.published.connectionState == .failed(.serviceMissing))

        var noRX = scanned()
        _ = noRX.connect(device)
        _ = noRX.connected(device)
        _ = noRX.servicesDiscovered(device, [XTalkGatt.passthroughService], failure: nil)
        _ = noRX.characteristicsDiscovered(device, service: XTalkGatt.passthroughService, [tx], failure: nil)
        #expect(noRX.published.connectionState == .failed(.characteristicMissing))

        var refused = scanned()
        subscribing(&refused)
        _ = refused.notificationStateUpdated(
            device, rxRef, isNotifying: false, error: .init(kind: .other, message: "not permitted"))
        #expect(
            refused.published.connectionState
                == .failed(.connectionFailed("the notification subscription was refused: not permitted")))
        #expect(!refused.published.atReady)
    }

    @Test("a link lost before it was ready is a failed connection; the connect timer fails a connection that hangs")
    func lostWhileConnecting() {
        var lost = scanned()
        subscribing(&lost)
        _ = lost.disconnected(device)
        #expect(lost.published.connectionState == .failed(.connectionFailed("the link was lost while connecting")))
        var hanging = scanned()
        let actions = hanging.connect(device)
        let timer = actions.compactMap { action -> ChannelTimerID? in
            if case .startTimer(let id, .seconds(10)) = action { id } else { nil }
        }.first
        #expect(timer != nil)
        let fired = hanging.timerFired(timer ?? ChannelTimerID(raw: 0))
        #expect(fired.contains(.backend(.cancelConnection(device))))
        #expect(hanging.published.connectionState == .failed(.timeout))
    }

    @Test("inputs about another peripheral, or after the link ended, change nothing")
    func strayInputs() {
        var machine = scanned()
        subscribing(&machine)
        let other = UUID()
        #expect(machine.connected(other).isEmpty)
        #expect(machine.disconnected(other).isEmpty)
        #expect(machine.notificationStateUpdated(other, rxRef, isNotifying: true, error: nil).isEmpty)
        #expect(!machine.published.atReady)
        _ = machine.disconnect()
        #expect(machine.notificationStateUpdated(device, rxRef, isNotifying: true, error: nil).isEmpty)
        #expect(!machine.published.atReady)
    }

    @Test("device control is ready once every optional characteristic is found readable; its absence never blocks")
    func deviceControl() {
        var machine = scanned()
        subscribing(&machine)
        _ = machine.notificationStateUpdated(device, rxRef, isNotifying: true, error: nil)
        #expect(machine.published.atReady && !machine.published.deviceControlReady)
        let battery = BleCharacteristicInfo(uuid: XTalkGatt.batteryLevel, properties: [.read, .notify])
        #expect(
            machine.characteristicsDiscovered(device, service: XTalkGatt.batteryService, [battery], failure: nil)
                .isEmpty)
        #expect(!machine.published.deviceControlReady, "the revisions are still missing")
        let firmware = BleCharacteristicInfo(uuid: XTalkGatt.firmwareRevision, properties: [.read])
        let hardware = BleCharacteristicInfo(uuid: XTalkGatt.hardwareRevision, properties: [.write])
        _ = machine.characteristicsDiscovered(
            device, service: XTalkGatt.deviceInformationService, [firmware, hardware], failure: nil)
        #expect(!machine.published.deviceControlReady, "a revision that cannot be read does not count")
        let readable = BleCharacteristicInfo(uuid: XTalkGatt.hardwareRevision, properties: [.read])
        _ = machine.characteristicsDiscovered(
            device, service: XTalkGatt.deviceInformationService, [firmware, readable], failure: nil)
        #expect(machine.published.deviceControlReady)
        _ = machine.disconnected(device)
        #expect(!machine.published.deviceControlReady)
    }

    @Test("the address: the platform's own where it gives one (BlueZ), else xTalk's manufacturer data")
    func address() {
        var machine = ConnectionStateMachine(connectTimeout: .seconds(10), radio: .poweredOn)
        _ = machine.startScan()
        let data = Data([0xFF, 0xFF, 0x01, 0xA0, 0xB1, 0xC2, 0xD3, 0xE4, 0xF5])
        _ = machine.peripheralDiscovered(
            device,
            BleAdvertisement(
                localName: "a", manufacturerData: data, serviceUUIDs: [], platformAddress: "00:11:22:33:44:55"),
            rssi: -50)
        let other = UUID()
        var otherCompany = data
        otherCompany[0] = 0x4C
        _ = machine.peripheralDiscovered(
            other,
            BleAdvertisement(
                localName: "b", manufacturerData: otherCompany, serviceUUIDs: [], platformAddress: "aa:bb:cc:dd:ee:ff"),
            rssi: -50)
        let third = UUID()
        _ = machine.peripheralDiscovered(
            third, BleAdvertisement(localName: "c", manufacturerData: data, serviceUUIDs: []), rssi: -50)
        let fourth = UUID()
        _ = machine.peripheralDiscovered(
            fourth, BleAdvertisement(localName: "d", manufacturerData: otherCompany, serviceUUIDs: []), rssi: -50)
        #expect(
            machine.published.scanResults.map(\.address) == [
                "00:11:22:33:44:55", "AA:BB:CC:DD:EE:FF", "A0:B1:C2:D3:E4:F5", nil,
            ])
    }

    @Test("another device family's profile: the machine asks for its services and characteristics, nothing of xTalk's")
    func anotherProfile() {
        // A profile shaped like OneKey's (seed 004): its own service, write and notify characteristics.
        let service = BleUUID("00000001-0000-1000-8000-00805F9B34FB")
        let write = BleUUID("00000002-0000-1000-8000-00805F9B34FB")
        let notify = BleUUID("00000003-0000-1000-8000-00805F9B34FB")
        let profile = GattProfile(passthrough: .init(service: service, write: write, notify: notify))
        var machine = ConnectionStateMachine(connectTimeout: .seconds(10), radio: .poweredOn, profile: profile)
        #expect(machine.startScan() == [.backend(.scan(services: [service]))])
        _ = machine.peripheralDiscovered(
            device,
            BleAdvertisement(
                localName: "K1", manufacturerData: Data([0xFF, 0xFF, 0x01, 1, 2, 3, 4, 5, 6]), serviceUUIDs: [service]),
            rssi: -40)
        #expect(machine.published.scanResults.first?.address == nil, "xTalk's manufacturer data means nothing here")
        _ = machine.connect(device)
        #expect(machine.connected(device) == [.backend(.discoverServices(device, [service]))])
        #expect(
            machine.servicesDiscovered(device, [XTalkGatt.passthroughService], failure: nil)
                .contains(.backend(.cancelConnection(device))))
        #expect(machine.published.connectionState == .failed(.serviceMissing), "xTalk's service is not this profile's")

        _ = machine.startScan()
        _ = machine.peripheralDiscovered(
            device,
            BleAdvertisement(
                localName: "K1", manufacturerData: nil,
                serviceUUIDs: [service]), rssi: -40)
        _ = machine.connect(device)
        _ = machine.connected(device)
        #expect(
            machine.servicesDiscovered(device, [service], failure: nil)
                == [.backend(.discoverCharacteristics(device, service: service, characteristics: [write, notify]))])
        let found = [
            BleCharacteristicInfo(uuid: write, properties: [.write]),
            BleCharacteristicInfo(uuid: notify, properties: [.notify]),
        ]
        let notifyRef = BleCharacteristicRef(service: service, characteristic: notify)
        #expect(
            machine.characteristicsDiscovered(device, service: service, found, failure: nil)
                == [.backend(.subscribe(device, notifyRef))])
        #expect(
            machine.notificationStateUpdated(device, rxRef, isNotifying: true, error: nil).isEmpty,
            "xTalk's RX is not this profile's notify characteristic")
        let ready = machine.notificationStateUpdated(device, notifyRef, isNotifying: true, error: nil)
        #expect(ready.contains(.openPassthrough(peripheral: device, writeType: .withResponse)))
        #expect(machine.published.atReady && !machine.published.deviceControlReady)
    }

    @Test("state restoration: the connected peripheral is adopted and set up once the radio is on; others let go")
    func restoration() {
        var machine = ConnectionStateMachine(connectTimeout: .seconds(10))  // a new manager: .unknown
        let other = UUID()
        let actions = machine.restored([
            BleRestoredPeripheral(id: device, name: "xTalk-0001", isConnected: true),
            BleRestoredPeripheral(id: other, name: nil, isConnected: false),
        ])
        // A backend ignores commands before the radio is on: the cancel waits for it.
        #expect(!actions.contains(.backend(.cancelConnection(other))), "radio unknown: owed")
        #expect(!actions.contains { if case .backend(.discoverServices) = $0 { true } else { false } }, "radio unknown")
        #expect(actions.contains { if case .startTimer = $0 { true } else { false } }, "bounded by the connect timeout")
        #expect(machine.published.connectionState == .connecting)
        #expect(machine.published.connectedPeripheralId == device && machine.published.connectedName == "xTalk-0001")
        let on = machine.radioStateChanged(.poweredOn)
        #expect(on.contains(.backend(.cancelConnection(other))), "the owed cancel, once the radio is on")
        #expect(on.contains { if case .backend(.discoverServices(device, _)) = $0 { true } else { false } })
        #expect(machine.published.connectionState == .connected)
        // A client that is already busy adopts nothing.
        var busy = scanned()
        #expect(
            busy.restored([BleRestoredPeripheral(id: other, name: nil, isConnected: true)])
                == [.backend(.cancelConnection(other))])
        #expect(busy.published.connectionState == .scanning)
        // The radio off before it was on: the platform dropped every connection, nothing is owed.
        var off = ConnectionStateMachine(connectTimeout: .seconds(10))
        _ = off.restored([BleRestoredPeripheral(id: other, name: nil, isConnected: false)])
        _ = off.radioStateChanged(.poweredOff)
        #expect(!off.radioStateChanged(.poweredOn).contains(.backend(.cancelConnection(other))))
    }

    @Test(
        "pairing failures have their own reasons: refused subscription, failed connect, link dropped while subscribing")
    func pairingFailures() {
        let notPaired = ConnectionStateMachine.StackError(
            kind: .pairingRequired, message: "Encryption is insufficient.")
        let removed = ConnectionStateMachine.StackError(
            kind: .pairingRemoved, message: "Peer removed pairing information")
        var refused = scanned()
        subscribing(&refused)
        let actions = refused.notificationStateUpdated(device, rxRef, isNotifying: false, error: notPaired)
        #expect(actions.contains(.backend(.cancelConnection(device))), "the link is not left half-open")
        guard case .failed(.connectionFailed(let reason)) = refused.published.connectionState else {
            Issue.record("state \(refused.published.connectionState)")
            return
        }
        #expect(reason.hasPrefix("pairing failed: ") && reason.hasSuffix("(Encryption is insufficient.)"))
        var dropped = scanned()
        subscribing(&dropped)
        _ = dropped.disconnected(device, error: removed)
        guard case .failed(.connectionFailed(let droppedReason)) = dropped.published.connectionState else {
            Issue.record("state \(dropped.published.connectionState)")
            return
        }
        #expect(droppedReason.hasPrefix("pairing removed by the device: "))
        var failed = scanned()
        _ = failed.connect(device)
        _ = failed.failedToConnect(device, error: removed)
        #expect(
            failed.published.connectionState == dropped.published.connectionState, "the same reason on a failed connect"
        )
        // Any other error keeps its own words.
        var other = scanned()
        _ = other.connect(device)
        _ = other.failedToConnect(device, error: .init(kind: .other, message: "Connection refused"))
        #expect(other.published.connectionState == .failed(.connectionFailed("Connection refused")))
    }
}
