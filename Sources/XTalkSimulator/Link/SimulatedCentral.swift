import Foundation
import XTalkBleSdk

/// The simulated Bluetooth stack seen from the app: a central that behaves
/// like CoreBluetooth's (as Apple documents CBCentralManager and CBPeripheral).
///
/// - It starts in `.unknown` and reports its state shortly after the app
///   first needs it (`activate`: CoreBluetooth's manager is created then);
///   while the user has not answered the permission prompt it stays `.unknown`.
/// - Commands are honoured only in `.poweredOn`; otherwise they are ignored
///   and recorded as API misuse, as CoreBluetooth logs them.
/// - Every event arrives later through `eventHandler`, never during a call.
/// - After a connection ends, nothing more arrives for it.
/// - Writes without response beyond the flow-control credits are dropped;
///   `maximumWriteValueLength` is MTU − 3 (at most 512) without response, 512 with.
@MainActor
package final class SimulatedCentral: BleBackend, BleBackendKeepingAlive {
    package var eventHandler: (@MainActor (BleBackendEvent) -> Void)?
    package private(set) var state: BleManagerState = .unknown
    private unowned let environment: XTalkSimulatedEnvironment

    init(environment: XTalkSimulatedEnvironment) {
        self.environment = environment
    }

    package var scheduler: any TimerScheduling { environment.scheduler }

    /// The environment (it owns this central, which holds it unowned): a
    /// client keeps it alive, so `XTalkBleClient(simulator: XTalkSimulatedEnvironment(...))` is safe.
    package var keptAlive: AnyObject { environment }

    // MARK: Delivery

    /// Events scheduled and not yet delivered, so that shutdown can cancel them.
    private var inFlight: [UInt64: TimerToken] = [:]
    private var nextPost: UInt64 = 0

    /// Delivers `event` after `delay`, in posting order among equal deadlines,
    /// unless `isValid`, asked at delivery, says no (it may also apply what
    /// the delivery means to the model, e.g. end the link the event reports ended).
    func post(
        after delay: Duration = .zero, _ event: BleBackendEvent,
        isValid: @escaping @MainActor () -> Bool = { true }
    ) {
        guard !environment.isShutDown else { return }
        nextPost += 1
        let key = nextPost
        inFlight[key] = environment.scheduler.schedule(after: delay) { [weak self] in
            guard let self, self.inFlight.removeValue(forKey: key) != nil, isValid() else { return }
            if case .stateChanged(let state) = event { self.state = state }
            self.eventHandler?(event)
        }
    }

    /// Drops every event not yet delivered (environment shutdown).
    func cancelInFlight() {
        for token in inFlight.values { environment.scheduler.cancel(token) }
        inFlight.removeAll()
    }

    /// Commands need the radio on, both as the app last heard and as it
    /// really is (a power-off the app has not heard of yet also refuses them).
    private func poweredOn(_ call: String) -> Bool {
        guard state == .poweredOn, environment.managerState == .poweredOn else {
            environment.recordMisuse(
                "\(call) while Bluetooth is \(environment.managerState): can only accept this command while "
                    + "powered on"
            )
            return false
        }
        return true
    }

    /// The connected peripheral with `id`, or nil (recording the misuse).
    private func connected(_ id: UUID, _ call: String) -> (XTalkSimulatedPeripheral, SimulatedLink)? {
        guard poweredOn(call) else { return nil }
        guard let peripheral = environment.peripheral(id: id), let link = peripheral.link else {
            environment.recordMisuse("\(call) on a peripheral that is not connected")
            return nil
        }
        return (peripheral, link)
    }

    // MARK: BleBackend

    /// Whether the app created its manager (the first `activate`).
    private(set) var isActive = false
    /// The state the app was last told (or is about to be).
    private var reported: BleManagerState = .unknown

    /// The restore identifier the app's manager was created with.
    private var restoreIdentifier: String?

    package func activate(showPowerAlert: Bool, restoreIdentifier: String?) {
        guard !isActive else { return }
        isActive = true
        self.restoreIdentifier = restoreIdentifier
        environment.managerCreated(showPowerAlert: showPowerAlert)
        // State restoration comes first, before the state (willRestoreState).
        if let restoreIdentifier, let kept = environment.takeRestoration(restoreIdentifier) {
            post(.restored(kept))
        }
        reportState()
    }

    /// The app's process ended: its manager is gone (nothing more is
    /// delivered to it) and a new one starts from `.unknown`. Returns the
    /// restore identifier the manager had, if any.
    func appTerminated() -> String? {
        cancelInFlight()
        eventHandler = nil
        isActive = false
        state = .unknown
        reported = .unknown
        defer { restoreIdentifier = nil }
        return restoreIdentifier
    }

    /// Reports the platform's state as the app's manager would see it, if it changed.
    func reportState() {
        guard isActive else { return }
        let state = environment.managerState
        guard state != reported else { return }
        reported = state
        post(.stateChanged(state))
    }

    package func scanForPeripherals(withServices services: [BleUUID]) {
        guard poweredOn("scanForPeripherals") else { return }
        environment.startScanning(filter: services)
        // Like the CoreBluetooth backend: devices already connected to the
        // phone do not advertise; retrieval finds them (RSSI 127: not available).
        // (Behind the CoreBluetooth stand-in, the backend itself retrieves them.)
        #if os(Linux)
            guard environment.coreBluetoothRadio == nil else { return }
        #endif
        for peripheral in environment.systemConnected(withServices: services) where !peripheral.isConnected {
            post(
                .discovered(
                    peripheral: peripheral.id,
                    advertisement: BleAdvertisement(
                        localName: peripheral.device.name, manufacturerData: nil, serviceUUIDs: services),
                    rssi: 127))
        }
    }

    package func stopScan() {
        guard poweredOn("stopScan") else { return }
        environment.stopScanning()
    }

    package func connect(_ id: UUID) {
        guard poweredOn("connect") else { return }
        guard let peripheral = environment.peripheral(id: id) else {
            post(
                .failedToConnect(peripheral: id, error: BleBackendError(.connectionFailed, "unknown peripheral \(id)")))
            return
        }
        peripheral.beginConnecting()
    }

    package func cancelPeripheralConnection(_ id: UUID) {
        guard poweredOn("cancelPeripheralConnection") else { return }
        environment.peripheral(id: id)?.cancelConnection()
    }

    /// The services each connection asked to discover (nil: all).
    private var requestedServices: [UUID: Set<BleUUID>?] = [:]

    /// The device changed its services. Like the CoreBluetooth backend: only
    /// when a service the connection uses became invalid does the link end
    /// (for good, reported as a disconnection); an added service changes nothing.
    func servicesModified(_ id: UUID, invalidated: [BleUUID]) {
        guard let peripheral = environment.peripheral(id: id), peripheral.link != nil else { return }
        let inUse = requestedServices[id] ?? nil
        guard !invalidated.isEmpty, inUse.map({ !$0.isDisjoint(with: invalidated) }) ?? true else { return }
        peripheral.cancelConnection()
        post(
            .disconnected(
                peripheral: id, error: BleBackendError(.connectionFailed, "the device changed its services")))
    }

    package func discoverServices(_ services: [BleUUID]?, for id: UUID) {
        guard let (peripheral, link) = connected(id, "discoverServices") else { return }
        requestedServices[id] = services.map(Set.init)
        link.after(link.procedureDelay) { [weak peripheral] in
            guard let peripheral else { return }
            let all = SimulatedGattDatabase(peripheral.device.gatt).services.map(\.uuid)
            let found = services.map { wanted in all.filter { wanted.contains($0) } } ?? all
            peripheral.post(.servicesDiscovered(peripheral: id, services: found, error: nil))
        }
    }

    package func discoverCharacteristics(_ characteristics: [BleUUID]?, for service: BleUUID, of id: UUID) {
        guard let (peripheral, link) = connected(id, "discoverCharacteristics") else { return }
        link.after(link.procedureDelay) { [weak peripheral] in
            guard let peripheral else { return }
            guard
                let entry = SimulatedGattDatabase(peripheral.device.gatt).services.first(where: { $0.uuid == service })
            else {
                peripheral.post(
                    .characteristicsDiscovered(
                        peripheral: id, service: service, characteristics: [],
                        error: BleBackendError(.attribute(0x0A), "attribute not found: service \(service)")))
                return
            }
            let found =
                characteristics.map { wanted in entry.characteristics.filter { wanted.contains($0.uuid) } }
                ?? entry.characteristics
            peripheral.post(
                .characteristicsDiscovered(peripheral: id, service: service, characteristics: found, error: nil))
        }
    }

    package func setNotifyValue(_ enabled: Bool, for characteristic: BleCharacteristicRef, of id: UUID) {
        guard let (peripheral, link) = connected(id, "setNotifyValue") else { return }
        // RX is encrypted on a device that requires pairing: without a bond,
        // iOS pairs first (its dialog waits on the user), then subscribes.
        if enabled, characteristic.characteristic == peripheral.device.gatt.rxUUID, !peripheral.isBonded {
            switch peripheral.device.gatt.pairing {
            case .notRequired:
                break
            case .userPairs(let after):
                peripheral.pairingDialogsShown += 1
                link.after(after) { [weak self, weak peripheral] in
                    peripheral?.isBonded = true
                    self?.setNotifyValue(enabled, for: characteristic, of: id)
                }
                return
            case .userCancels(let after):
                peripheral.pairingDialogsShown += 1
                link.after(after + link.procedureDelay) { [weak peripheral] in
                    peripheral?.post(
                        .notificationStateUpdated(
                            peripheral: id, characteristic: characteristic, isNotifying: false,
                            error: BleBackendError(.insufficientEncryption, "Encryption is insufficient.")))
                }
                return
            case .peerRemovedPairing:
                // The phone holds a bond the device forgot: encryption fails and iOS drops the link.
                link.after(link.procedureDelay) { [weak peripheral] in
                    peripheral?.loseLink(
                        after: .zero,
                        reporting: BleBackendError(.peerRemovedPairing, "Peer removed pairing information"))
                }
                return
            }
        }
        link.after(link.procedureDelay) { [weak peripheral, weak link] in
            guard let peripheral, let link else { return }
            let database = SimulatedGattDatabase(peripheral.device.gatt)
            guard let info = database.characteristic(characteristic), info.properties.contains(.notify) else {
                peripheral.post(
                    .notificationStateUpdated(
                        peripheral: id, characteristic: characteristic, isNotifying: false,
                        error: BleBackendError(.operationNotSupported, "\(characteristic) does not notify")))
                return
            }
            if let refusal = peripheral.device.gatt.subscriptionRefusal,
                characteristic.characteristic == peripheral.device.gatt.rxUUID
            {
                peripheral.post(
                    .notificationStateUpdated(
                        peripheral: id, characteristic: characteristic, isNotifying: false,
                        error: BleBackendError(Self.attError(named: refusal), refusal)))
                return
            }
            if characteristic.characteristic == peripheral.device.gatt.rxUUID { link.setSubscribed(enabled) }
            peripheral.post(
                .notificationStateUpdated(
                    peripheral: id, characteristic: characteristic, isNotifying: enabled, error: nil))
        }
    }

    /// The ATT error an error text names (CoreBluetooth's texts, or words of them).
    static func attError(named text: String) -> BleBackendError.Code {
        let words = text.lowercased()
        // ATT 0x08: the device's own authorization check, not pairing.
        if words.contains("authorization") { return .attribute(0x08) }
        if words.contains("authentication") { return .insufficientAuthentication }
        if words.contains("encryption") { return .insufficientEncryption }
        if words.contains("write not permitted") { return .writeNotPermitted }
        if words.contains("read not permitted") { return .readNotPermitted }
        return .unknown
    }

    package func readValue(for characteristic: BleCharacteristicRef, of id: UUID) {
        guard let (peripheral, link) = connected(id, "readValue") else { return }
        let key = characteristic.characteristic.description
        guard !peripheral.device.gatt.silentReads.contains(key) else { return }
        link.after(link.procedureDelay) { [weak peripheral] in
            guard let peripheral else { return }
            let gatt = peripheral.device.gatt
            let database = SimulatedGattDatabase(gatt)
            guard let info = database.characteristic(characteristic), info.properties.contains(.read),
                !gatt.failingReads.contains(key), let value = database.value(of: characteristic)
            else {
                peripheral.post(
                    .valueUpdated(
                        peripheral: id, characteristic: characteristic, value: nil,
                        error: BleBackendError(.readNotPermitted, "reading \(characteristic) is not permitted")))
                return
            }
            peripheral.post(.valueUpdated(peripheral: id, characteristic: characteristic, value: value, error: nil))
        }
    }

    package func writeValue(_ data: Data, for characteristic: BleCharacteristicRef, of id: UUID, type: BleWriteType) {
        guard let (peripheral, link) = connected(id, "writeValue") else { return }
        let info = SimulatedGattDatabase.characteristic(characteristic, in: peripheral.device.gatt)
        let isTX = characteristic.characteristic == peripheral.device.gatt.txUUID && info != nil
        if isTX { peripheral.hostWrote(data) }
        if isTX, let refusal = peripheral.device.gatt.writeRefusal {
            peripheral.droppedWrites += 1
            guard type == .withResponse else { return }
            link.after(link.procedureDelay) { [weak peripheral] in
                peripheral?.post(
                    .writeCompleted(
                        peripheral: id, characteristic: characteristic,
                        error: BleBackendError(.writeNotPermitted, refusal)))
            }
            return
        }
        switch type {
        case .withoutResponse:
            guard isTX, info?.properties.contains(.writeWithoutResponse) == true else {
                peripheral.droppedWrites += 1
                environment.recordMisuse("write without response to \(characteristic), which does not support it")
                return
            }
            if case .dropped = link.writeWithoutResponse(data) { peripheral.droppedWrites += 1 }
        case .withResponse:
            guard isTX, info?.properties.contains(.write) == true else {
                link.after(link.procedureDelay) { [weak peripheral] in
                    peripheral?.post(
                        .writeCompleted(
                            peripheral: id, characteristic: characteristic,
                            error: BleBackendError(.writeNotPermitted, "writing \(characteristic) is not permitted")))
                }
                return
            }
            guard data.count <= BleAttribute.maximumValueLength else {
                link.after(link.procedureDelay) { [weak peripheral] in
                    peripheral?.post(
                        .writeCompleted(
                            peripheral: id, characteristic: characteristic,
                            error: BleBackendError(.attribute(0x0D), "invalid attribute value length \(data.count)")))
                }
                return
            }
            link.writeWithResponse(data, characteristic: characteristic)
        }
    }

    package func canSendWriteWithoutResponse(_ id: UUID) -> Bool {
        guard state == .poweredOn, let link = environment.peripheral(id: id)?.link else { return false }
        return link.canSendWriteWithoutResponse
    }

    package func maximumWriteValueLength(for type: BleWriteType, of id: UUID) -> Int {
        guard state == .poweredOn, let link = environment.peripheral(id: id)?.link else { return 0 }
        switch type {
        case .withoutResponse: return BleAttribute.packetPayload(mtu: link.mtu)
        case .withResponse: return BleAttribute.maximumValueLength
        }
    }
}

/// The GATT database a device description yields (PROTOCOL.md section 2).
struct SimulatedGattDatabase {
    struct Service {
        let uuid: BleUUID
        let characteristics: [BleCharacteristicInfo]
    }

    let services: [Service]
    private let gatt: XTalkSimulatedGatt

    init(_ gatt: XTalkSimulatedGatt) {
        self.gatt = gatt
        var services: [Service] = []
        if gatt.hasPassthroughService {
            var characteristics: [BleCharacteristicInfo] = []
            if gatt.hasPassthroughTX {
                characteristics.append(Self.passthroughTX(gatt))
            }
            if gatt.hasPassthroughRX {
                characteristics.append(BleCharacteristicInfo(uuid: gatt.rxUUID, properties: [.notify]))
            }
            services.append(Service(uuid: gatt.passthroughServiceUUID, characteristics: characteristics))
        }
        if gatt.hasBatteryService {
            services.append(
                Service(
                    uuid: SimulatedGatt.batteryService,
                    characteristics: [
                        BleCharacteristicInfo(uuid: SimulatedGatt.batteryLevel, properties: [.read, .notify])
                    ]))
        }
        if gatt.hasDeviceInformationService {
            services.append(
                Service(
                    uuid: SimulatedGatt.deviceInformationService,
                    characteristics: [
                        BleCharacteristicInfo(uuid: SimulatedGatt.firmwareRevision, properties: [.read]),
                        BleCharacteristicInfo(uuid: SimulatedGatt.hardwareRevision, properties: [.read]),
                    ]))
        }
        self.services = services
    }

    func characteristic(_ ref: BleCharacteristicRef) -> BleCharacteristicInfo? {
        services.first { $0.uuid == ref.service }?.characteristics.first { $0.uuid == ref.characteristic }
    }

    /// The characteristic `ref` names, if `gatt` has it. The passthrough TX,
    /// written for every AT line, is answered without building the database.
    static func characteristic(_ ref: BleCharacteristicRef, in gatt: XTalkSimulatedGatt) -> BleCharacteristicInfo? {
        guard ref.service == gatt.passthroughServiceUUID, ref.characteristic == gatt.txUUID else {
            return SimulatedGattDatabase(gatt).characteristic(ref)
        }
        guard gatt.hasPassthroughService, gatt.hasPassthroughTX else { return nil }
        return passthroughTX(gatt)
    }

    private static func passthroughTX(_ gatt: XTalkSimulatedGatt) -> BleCharacteristicInfo {
        BleCharacteristicInfo(
            uuid: gatt.txUUID,
            properties: gatt.txSupportsWriteWithoutResponse ? [.write, .writeWithoutResponse] : [.write])
    }

    func value(of ref: BleCharacteristicRef) -> Data? {
        switch ref.characteristic {
        case SimulatedGatt.batteryLevel: Data([gatt.batteryLevel])
        case SimulatedGatt.firmwareRevision: gatt.firmwareRevision
        case SimulatedGatt.hardwareRevision: gatt.hardwareRevision
        default: nil
        }
    }
}
