import Foundation
import Testing
@testable import XTalkBleSdk

/// The connection lifecycle as a value: driven input by input, with no
/// client and no backend (issue 13: one method per input).
@Suite("Connection state machine: scan, connect, discover, subscribe, end", .timeLimit(.minutes(1)))
struct ConnectionStateMachineTests {
    let device = UUID()
    let advertisement = BleAdvertisement(localName: "xTalk-0001", manufacturerData: nil, serviceUUIDs: [XTalkGatt.passthroughService])
    let tx = BleCharacteristicInfo(uuid: XTalkGatt.passthroughTX, properties: [.write, .writeWithoutResponse])
    let rx = BleCharacteristicInfo(uuid: XTalkGatt.passthroughRX, properties: [.notify])
    let rxRef = BleCharacteristicRef(service: XTalkGatt.passthroughService, characteristic: XTalkGatt.passthroughRX)

    /// A machine with the radio on, scanning, that has seen the device.
    func scanned() -> ConnectionStateMachine {
        var machine = ConnectionStateMachine(connectTimeout: .seconds(10), radio: .poweredOn)
        #expect(machine.startScan() == [.backend(.scan)])
        #expect(machine.peripheralDiscovered(device, advertisement, rssi: -60).isEmpty)
        #expect(machine.published.scanResults.map(\.name) == ["xTalk-0001"])
        return machine
    }

    /// Connects and walks discovery up to the subscription.
    func subscribing(_ machine: inout ConnectionStateMachine) {
        let connect = machine.connect(device)
        #expect(connect.contains(.backend(.stopScan)) && connect.contains(.backend(.connect(device))))
        #expect(machine.published.connectionState == .connecting)
        #expect(machine.connected(device) == [.backend(.discoverServices(device))])
        #expect(machine.published.connectionState == .connected)
        #expect(machine.servicesDiscovered(device, [XTalkGatt.passthroughService], failure: nil)
                == [.backend(.discoverCharacteristics(device, service: XTalkGatt.passthroughService,
                                                      characteristics: [XTalkGatt.passthroughTX, XTalkGatt.passthroughRX]))])
        #expect(machine.characteristicsDiscovered(device, service: XTalkGatt.passthroughService, [tx, rx], failure: nil)
                == [.backend(.subscribe(device))])
        #expect(!machine.published.atReady)
    }

    @Test("the happy path: ready when notifications are on, with write without response when TX allows it")
    func happyPath() {
        var machine = scanned()
        subscribing(&machine)
        let ready = machine.notificationStateUpdated(device, rxRef, isNotifying: true, failure: nil)
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
        #expect(waiting.radioStateChanged(.poweredOn) == [.backend(.scan)])
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
        _ = refused.notificationStateUpdated(device, rxRef, isNotifying: false, failure: "not permitted")
        #expect(refused.published.connectionState
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
        #expect(machine.notificationStateUpdated(other, rxRef, isNotifying: true, failure: nil).isEmpty)
        #expect(!machine.published.atReady)
        _ = machine.disconnect()
        #expect(machine.notificationStateUpdated(device, rxRef, isNotifying: true, failure: nil).isEmpty)
        #expect(!machine.published.atReady)
    }
}
