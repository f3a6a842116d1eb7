// The CoreBluetooth backend: the backend seam over CBCentralManager and
// CBPeripheral. This one file compiles unchanged against Apple's framework
// and, on Linux, against the stand-in of StandIns/CoreBluetooth (the same
// Swift-visible API), where the simulator drives it in tests.
//
// CoreBluetooth facts it is built on (Apple's CBCentralManager and CBPeripheral documentation):
// commands only in .poweredOn; callbacks on the manager's queue, here a
// dedicated serial queue, hopped to the main actor in order; no callback after
// didDisconnectPeripheral, so pending work is failed by the client; after
// cancelPeripheralConnection CoreBluetooth still calls didDisconnectPeripheral
// once (swallowed here: the seam promises nothing more of a cancelled
// connection); characteristic.value is copied inside the callback; the
// maximum write length is read at write time; write-without-response is gated
// on canSendWriteWithoutResponse and resumed by peripheralIsReady; no address
// on Apple platforms except from manufacturer data. Nothing here traps on a
// delegate event: unexpected callbacks are ignored.

#if canImport(CoreBluetooth)
    import CoreBluetooth
#else
    @_spi(XTalkStandIn) import XTalkCoreBluetoothStandIn
#endif
import Dispatch
import Foundation

/// Carries CoreBluetooth objects (which are not Sendable) from the manager's
/// queue to the main actor; the backend only uses them there afterwards.
struct CoreBluetoothObject<Value>: @unchecked Sendable {
    let value: Value
}

@MainActor
package final class CoreBluetoothBackend: BleBackend {
    package var eventHandler: (@MainActor (BleBackendEvent) -> Void)?
    package let scheduler: any TimerScheduling
    package private(set) var state: BleManagerState = .unknown
    private let delegate: CentralDelegate
    /// The manager's delegate (CoreBluetooth holds it weakly): `delegate`, or
    /// with a restore identifier the wrapper that also takes `willRestoreState`.
    private var managerDelegate: (any CBCentralManagerDelegate)?
    /// Created by `activate`: the app's first scan or connect, not its
    /// client's init (creating it shows the system's permission prompt).
    private var manager: CBCentralManager?
    private let queue: DispatchQueue
    private let makeManager: (any CBCentralManagerDelegate, DispatchQueue, [String: Any]) -> CBCentralManager
    /// Every peripheral seen, retained: CoreBluetooth cleans up what the app drops.
    private var peripherals: [UUID: CBPeripheral] = [:]
    /// Cancelled connections whose didDisconnectPeripheral is still to come (and to swallow).
    private var awaitingDisconnect: Set<UUID> = []
    /// Confirmations still owed for cancelled connections that a reconnect
    /// stopped waiting for (`confirmationWait`). CoreBluetooth's callback
    /// cannot say which connection it ends, but a cancel's confirmation comes
    /// without an error, and a link's own end always with one: the next
    /// error-free didDisconnectPeripheral is that confirmation, not the new link's end.
    private var owedConfirmations: [UUID: Int] = [:]
    /// The services each connection asked to discover (nil: all): only their
    /// invalidation ends the link.
    private var discoveredServices: [UUID: Set<BleUUID>?] = [:]
    /// Connects asked for while the previous connection's end is not yet confirmed.
    private var deferredConnects: [UUID: TimerToken] = [:]
    /// Connects to a peripheral that could not be retrieved, whose failure is still to be reported.
    private var failingConnects: [UUID: TimerToken] = [:]
    /// How long a deferred connect waits for that confirmation before going ahead.
    static let confirmationWait: Duration = .seconds(1)

    /// `makeManager` creates the manager with the backend's delegate, queue
    /// and options (tests pass one driven by a stand-in radio); `queue`
    /// receives callbacks.
    package init(
        scheduler: any TimerScheduling,
        queue: DispatchQueue = DispatchQueue(label: "com.xtalk.sdk.corebluetooth"),
        makeManager: @escaping (any CBCentralManagerDelegate, DispatchQueue, [String: Any]) -> CBCentralManager = {
            CBCentralManager(delegate: $0, queue: $1, options: $2)
        }
    ) {
        self.scheduler = scheduler
        self.queue = queue
        self.makeManager = makeManager
        delegate = CentralDelegate()
        delegate.backend = self
    }

    package func activate(showPowerAlert: Bool, restoreIdentifier: String?) {
        guard manager == nil else { return }
        var options: [String: Any] = [CBCentralManagerOptionShowPowerAlertKey: showPowerAlert]
        if let restoreIdentifier { options[CBCentralManagerOptionRestoreIdentifierKey] = restoreIdentifier }
        // A delegate that implements willRestoreState without a restore
        // identifier makes CoreBluetooth log "API MISUSE": only the wrapper does.
        let central: any CBCentralManagerDelegate =
            restoreIdentifier == nil ? delegate : RestoringCentralDelegate(delegate)
        managerDelegate = central
        // CoreBluetooth reports the state later, on the queue (never from init).
        manager = makeManager(central, queue, options)
    }

    // MARK: Commands

    package func scanForPeripherals(withServices services: [BleUUID]) {
        guard let manager, state == .poweredOn else { return }
        let uuids = services.map { CBUUID(string: $0.shortestForm) }
        manager.scanForPeripherals(withServices: uuids, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        // A device already connected to the phone (by another app, or before a
        // reset) does not advertise: the scan would never hear it. Report it
        // as found, without advertisement data (RSSI 127: not available).
        guard !services.isEmpty else { return }
        for object in manager.retrieveConnectedPeripherals(withServices: uuids) where object.state != .connected {
            let id = object.identifier
            peripherals[id] = object
            let advertisement = BleAdvertisement(localName: object.name, manufacturerData: nil, serviceUUIDs: services)
            _ = scheduler.schedule(after: .zero) { [weak self] in
                guard let self, self.state == .poweredOn else { return }
                self.emit(.discovered(peripheral: id, advertisement: advertisement, rssi: 127))
            }
        }
    }

    package func stopScan() {
        guard let manager, state == .poweredOn else { return }
        manager.stopScan()
    }

    package func connect(_ peripheral: UUID) {
        guard let manager, state == .poweredOn else { return }
        discoveredServices[peripheral] = nil  // a new connection discovers its own
        // After Bluetooth reset (or was unauthorized) every CBPeripheral is
        // invalid: the system still knows the device by its identifier.
        if peripherals[peripheral] == nil,
            let retrieved = manager.retrievePeripherals(withIdentifiers: [peripheral]).first
        {
            peripherals[peripheral] = retrieved
        }
        guard let object = peripherals[peripheral] else {
            // Reported later, as every seam event (unless the app cancels first).
            failingConnects[peripheral] = scheduler.schedule(after: .zero) { [weak self] in
                guard let self, self.failingConnects.removeValue(forKey: peripheral) != nil else { return }
                self.emit(
                    .failedToConnect(
                        peripheral: peripheral,
                        error: BleBackendError(.connectionFailed, "the system no longer knows this device: scan again"))
                )
            }
            return
        }
        if awaitingDisconnect.contains(peripheral) {
            // The previous connection's end is not confirmed yet: its callback
            // must not be taken for this connection's. Connect once it is.
            deferredConnects[peripheral] = scheduler.schedule(after: Self.confirmationWait) { [weak self] in
                self?.confirmEnded(peripheral, waitedTooLong: true)
            }
            return
        }
        delegate.beginConnection(peripheral)
        object.delegate = delegate
        manager.connect(object, options: nil)
    }

    package func cancelPeripheralConnection(_ peripheral: UUID) {
        if let token = failingConnects.removeValue(forKey: peripheral) {
            scheduler.cancel(token)
            return
        }
        if let token = deferredConnects.removeValue(forKey: peripheral) {
            scheduler.cancel(token)  // the connect never reached CoreBluetooth
            return
        }
        guard let manager, state == .poweredOn, let object = peripherals[peripheral] else { return }
        delegate.endConnection(peripheral)
        awaitingDisconnect.insert(peripheral)
        manager.cancelPeripheralConnection(object)
    }

    package func discoverServices(_ services: [BleUUID]?, for peripheral: UUID) {
        guard let object = connected(peripheral) else { return }
        discoveredServices[peripheral] = services.map(Set.init)
        object.discoverServices(services?.map { CBUUID(string: $0.shortestForm) })
    }

    package func discoverCharacteristics(_ characteristics: [BleUUID]?, for service: BleUUID, of peripheral: UUID) {
        guard let object = connected(peripheral), let cbService = self.service(service, of: object) else { return }
        object.discoverCharacteristics(characteristics?.map { CBUUID(string: $0.shortestForm) }, for: cbService)
    }

    package func setNotifyValue(_ enabled: Bool, for characteristic: BleCharacteristicRef, of peripheral: UUID) {
        guard let object = connected(peripheral), let cbCharacteristic = self.characteristic(characteristic, of: object)
        else { return }
        object.setNotifyValue(enabled, for: cbCharacteristic)
    }

    package func readValue(for characteristic: BleCharacteristicRef, of peripheral: UUID) {
        guard let object = connected(peripheral), let cbCharacteristic = self.characteristic(characteristic, of: object)
        else { return }
        object.readValue(for: cbCharacteristic)
    }

    package func writeValue(
        _ data: Data, for characteristic: BleCharacteristicRef, of peripheral: UUID, type: BleWriteType
    ) {
        guard let object = connected(peripheral), let cbCharacteristic = self.characteristic(characteristic, of: object)
        else { return }
        object.writeValue(data, for: cbCharacteristic, type: type == .withResponse ? .withResponse : .withoutResponse)
    }

    package func canSendWriteWithoutResponse(_ peripheral: UUID) -> Bool {
        connected(peripheral)?.canSendWriteWithoutResponse ?? false
    }

    package func maximumWriteValueLength(for type: BleWriteType, of peripheral: UUID) -> Int {
        // Read at write time: the MTU can grow after connecting.
        connected(peripheral)?.maximumWriteValueLength(for: type == .withResponse ? .withResponse : .withoutResponse)
            ?? 0
    }

    private func connected(_ peripheral: UUID) -> CBPeripheral? {
        guard state == .poweredOn, !awaitingDisconnect.contains(peripheral),
            let object = peripherals[peripheral], object.state == .connected
        else { return nil }
        return object
    }

    /// Compared in the seam's canonical 128-bit form, never `CBUUID ==`: iOS
    /// reports SIG UUIDs in their 16-bit form, and whether that equals the
    /// 128-bit one is not documented.
    private func service(_ uuid: BleUUID, of peripheral: CBPeripheral) -> CBService? {
        peripheral.services?.first { BleUUID($0.uuid.uuidString) == uuid }
    }

    private func characteristic(_ ref: BleCharacteristicRef, of peripheral: CBPeripheral) -> CBCharacteristic? {
        service(ref.service, of: peripheral)?.characteristics?.first {
            BleUUID($0.uuid.uuidString) == ref.characteristic
        }
    }

    // MARK: Callbacks, on the main actor, in order

    /// One callback from the manager's queue. `generation` is the
    /// peripheral's connection generation when CoreBluetooth delivered it.
    fileprivate func receive(_ callback: Callback, generation: UInt64?) {
        switch callback {
        case .state(let newState):
            state = newState
            if newState != .poweredOn {
                // Every connection is gone with the radio, without a disconnect callback to wait for.
                for token in deferredConnects.values { scheduler.cancel(token) }
                deferredConnects.removeAll()
                for token in failingConnects.values { scheduler.cancel(token) }
                failingConnects.removeAll()
                awaitingDisconnect.removeAll()
                owedConfirmations.removeAll()
                delegate.endAllConnections()
                switch newState {
                case .poweredOff, .poweredOn:
                    break
                case .unknown, .resetting, .unsupported, .unauthorized:
                    // Below powered off, every CBPeripheral is invalid: rediscover.
                    peripherals.removeAll()
                }
            }
            emit(.stateChanged(newState))
        case .restored(let objects):
            // The system kept these for the app while it was not running: take
            // them as current (a connected one's callbacks belong to a new generation).
            var restored: [BleRestoredPeripheral] = []
            for box in objects {
                let object = box.value
                let id = object.identifier
                peripherals[id] = object
                object.delegate = delegate
                delegate.beginConnection(id)
                restored.append(
                    BleRestoredPeripheral(id: id, name: object.name, isConnected: object.state == .connected))
            }
            emit(.restored(restored))
        case .discovered(let peripheral, let object, let advertisement, let rssi):
            peripherals[peripheral] = object.value
            emit(.discovered(peripheral: peripheral, advertisement: advertisement, rssi: rssi))
        case .ended(let peripheral, let failedToConnect, let error):
            if awaitingDisconnect.remove(peripheral) != nil {
                confirmEnded(peripheral)  // the end of a cancelled connection: swallowed
                return
            }
            if !failedToConnect, error == nil, let owed = owedConfirmations[peripheral] {
                owedConfirmations[peripheral] = owed > 1 ? owed - 1 : nil
                return  // a cancelled connection's late confirmation: not the new link's end
            }
            guard delegate.isCurrent(peripheral, generation) else { return }
            delegate.endConnection(peripheral)
            emit(
                failedToConnect
                    ? .failedToConnect(peripheral: peripheral, error: error)
                    : .disconnected(peripheral: peripheral, error: error))
        case .connection(let peripheral, let event):
            guard !awaitingDisconnect.contains(peripheral), delegate.isCurrent(peripheral, generation) else { return }
            emit(event)
        case .servicesChanged(let peripheral, let invalidated):
            // The GATT database changed under the connection. An empty list means
            // a service was added (e.g. a DFU service appearing): nothing in use
            // changed. When a service the connection uses is invalidated, its
            // characteristics are no longer known to be valid: end the link for
            // good (no half-open connection), so that pending work fails and a
            // reconnect rediscovers.
            guard !awaitingDisconnect.contains(peripheral), delegate.isCurrent(peripheral, generation) else { return }
            let inUse = discoveredServices[peripheral] ?? nil
            guard !invalidated.isEmpty, inUse.map({ !$0.isDisjoint(with: invalidated) }) ?? true else { return }
            cancelPeripheralConnection(peripheral)
            emit(
                .disconnected(
                    peripheral: peripheral,
                    error: BleBackendError(.connectionFailed, "the device changed its services")))
        }
    }

    /// The previous connection's end is confirmed (or waited for long enough,
    /// `waitedTooLong`: the confirmation is then owed): a deferred connect goes ahead.
    private func confirmEnded(_ peripheral: UUID, waitedTooLong: Bool = false) {
        if awaitingDisconnect.remove(peripheral) != nil, waitedTooLong {
            owedConfirmations[peripheral, default: 0] += 1
        }
        guard let token = deferredConnects.removeValue(forKey: peripheral) else { return }
        scheduler.cancel(token)
        connect(peripheral)
    }

    private func emit(_ event: BleBackendEvent) {
        eventHandler?(event)
    }

    // MARK: Error mapping

    /// A backend error from a delegate callback's error.
    nonisolated static func backendError(_ error: (any Error)?) -> BleBackendError? {
        guard let error else { return nil }
        if let error = error as? CBError {
            let code: BleBackendError.Code =
                switch error.code {
                case .notConnected: .notConnected
                case .connectionTimeout: .connectionTimeout
                case .peripheralDisconnected: .peripheralDisconnected
                case .peerRemovedPairingInformation: .peerRemovedPairing
                // The pairing dialog was not answered in time: the link is not encrypted.
                case .encryptionTimedOut: .insufficientEncryption
                case .connectionFailed, .connectionLimitReached, .unknownDevice, .tooManyLEPairedDevices:
                    .connectionFailed
                case .operationCancelled: .operationCancelled
                case .operationNotSupported: .operationNotSupported
                default: .unknown
                }
            return BleBackendError(code, error.localizedDescription)
        }
        if let error = error as? CBATTError {
            let code: BleBackendError.Code =
                switch error.code {
                case .readNotPermitted: .readNotPermitted
                case .writeNotPermitted: .writeNotPermitted
                case .insufficientAuthentication: .insufficientAuthentication
                // The device's own authorization check refused: no pairing helps (field failure 6).
                case .insufficientAuthorization: .attribute(error.code.rawValue)
                case .insufficientEncryption, .insufficientEncryptionKeySize: .insufficientEncryption
                default: .attribute(error.code.rawValue)
                }
            return BleBackendError(code, error.localizedDescription)
        }
        return BleBackendError(.unknown, error.localizedDescription)
    }

    nonisolated static func managerState(_ state: CBManagerState) -> BleManagerState {
        switch state {
        case .poweredOn: .poweredOn
        case .poweredOff: .poweredOff
        case .unauthorized: .unauthorized
        case .unsupported: .unsupported
        case .resetting: .resetting
        case .unknown: .unknown
        @unknown default: .unknown
        }
    }
}

/// What a callback carries to the main actor: only Sendable values, copied
/// on the manager's queue (`characteristic.value` included).
enum Callback: Sendable {
    case state(BleManagerState)
    case discovered(UUID, CoreBluetoothObject<CBPeripheral>, BleAdvertisement, rssi: Int)
    /// didDisconnectPeripheral, or didFailToConnect when `failedToConnect`.
    case ended(UUID, failedToConnect: Bool, BleBackendError?)
    case connection(UUID, BleBackendEvent)
    /// didModifyServices, with the services it invalidated (empty: one was added).
    case servicesChanged(UUID, invalidated: [BleUUID])
    /// willRestoreState: the peripherals the system kept for the app.
    case restored([CoreBluetoothObject<CBPeripheral>])
}

/// The manager's delegate when the app asked for state restoration: the
/// callbacks of `CentralDelegate`, and `willRestoreState`. CoreBluetooth logs
/// "API MISUSE" for a delegate that implements `willRestoreState` while the
/// manager has no restore identifier, so without one the manager gets
/// `CentralDelegate` itself, which does not implement it.
final class RestoringCentralDelegate: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    private let inner: CentralDelegate

    init(_ inner: CentralDelegate) {
        self.inner = inner
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        inner.centralManagerDidUpdateState(central)
    }

    func centralManager(_ central: CBCentralManager, willRestoreState dict: [String: Any]) {
        inner.restoreState(dict)
    }

    func centralManager(
        _ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
        advertisementData: [String: Any], rssi RSSI: NSNumber
    ) {
        inner.centralManager(central, didDiscover: peripheral, advertisementData: advertisementData, rssi: RSSI)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        inner.centralManager(central, didConnect: peripheral)
    }

    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: (any Error)?) {
        inner.centralManager(central, didFailToConnect: peripheral, error: error)
    }

    func centralManager(
        _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: (any Error)?
    ) {
        inner.centralManager(central, didDisconnectPeripheral: peripheral, error: error)
    }
}

/// The CoreBluetooth delegate: runs on the manager's queue, turns each
/// callback into Sendable values stamped with the peripheral's connection
/// generation, and hops to the main actor in order.
final class CentralDelegate: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    /// Set once, before the manager exists; read on the main actor only.
    nonisolated(unsafe) weak var backend: CoreBluetoothBackend?
    private let lock = NSLock()
    /// Each peripheral's connection generation; a new connection (or the end
    /// of one) changes it, so callbacks of an older connection are dropped.
    private var generations: [UUID: UInt64] = [:]
    private var counter: UInt64 = 0

    func beginConnection(_ peripheral: UUID) { bump(peripheral) }
    func endConnection(_ peripheral: UUID) { bump(peripheral) }

    func endAllConnections() {
        lock.withLock {
            for key in generations.keys {
                counter += 1
                generations[key] = counter
            }
        }
    }

    func isCurrent(_ peripheral: UUID, _ generation: UInt64?) -> Bool {
        lock.withLock { generations[peripheral] == generation }
    }

    private func bump(_ peripheral: UUID) {
        lock.withLock {
            counter += 1
            generations[peripheral] = counter
        }
    }

    private func generation(_ peripheral: UUID) -> UInt64? {
        lock.withLock { generations[peripheral] }
    }

    /// Hops to the main actor, in the order callbacks arrived.
    private func deliver(_ callback: Callback, for peripheral: UUID?) {
        let generation = peripheral.flatMap(generation)
        DispatchQueue.main.async { [weak self] in
            MainActor.assumeIsolated {
                self?.backend?.receive(callback, generation: generation)
            }
        }
    }

    // MARK: CBCentralManagerDelegate

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        deliver(.state(CoreBluetoothBackend.managerState(central.state)), for: nil)
    }

    /// `willRestoreState`, from `RestoringCentralDelegate` (this class does not
    /// implement it: see there).
    func restoreState(_ dict: [String: Any]) {
        let peripherals = dict[CBCentralManagerRestoredStatePeripheralsKey] as? [CBPeripheral] ?? []
        deliver(.restored(peripherals.map { CoreBluetoothObject(value: $0) }), for: nil)
    }

    func centralManager(
        _ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
        advertisementData: [String: Any], rssi RSSI: NSNumber
    ) {
        let advertisement = BleAdvertisement(
            localName: advertisementData[CBAdvertisementDataLocalNameKey] as? String ?? peripheral.name,
            manufacturerData: advertisementData[CBAdvertisementDataManufacturerDataKey] as? Data,
            serviceUUIDs: (advertisementData[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID] ?? []).map {
                BleUUID($0.uuidString)
            })
        deliver(
            .discovered(
                peripheral.identifier, CoreBluetoothObject(value: peripheral), advertisement, rssi: RSSI.intValue),
            for: nil)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        deliver(
            .connection(peripheral.identifier, .connected(peripheral: peripheral.identifier)),
            for: peripheral.identifier)
    }

    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: (any Error)?) {
        deliver(
            .ended(peripheral.identifier, failedToConnect: true, CoreBluetoothBackend.backendError(error)),
            for: peripheral.identifier)
    }

    func centralManager(
        _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: (any Error)?
    ) {
        deliver(
            .ended(peripheral.identifier, failedToConnect: false, CoreBluetoothBackend.backendError(error)),
            for: peripheral.identifier)
    }

    // MARK: CBPeripheralDelegate

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: (any Error)?) {
        let services = (peripheral.services ?? []).map { BleUUID($0.uuid.uuidString) }
        deliver(
            .connection(
                peripheral.identifier,
                .servicesDiscovered(
                    peripheral: peripheral.identifier, services: services,
                    error: CoreBluetoothBackend.backendError(error))),
            for: peripheral.identifier)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: (any Error)?) {
        let characteristics = (service.characteristics ?? []).map {
            BleCharacteristicInfo(
                uuid: BleUUID($0.uuid.uuidString),
                properties: BleCharacteristicProperties(rawValue: $0.properties.rawValue & 0x3F))
        }
        deliver(
            .connection(
                peripheral.identifier,
                .characteristicsDiscovered(
                    peripheral: peripheral.identifier, service: BleUUID(service.uuid.uuidString),
                    characteristics: characteristics,
                    error: CoreBluetoothBackend.backendError(error))), for: peripheral.identifier)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: (any Error)?)
    {
        guard let ref = Self.reference(characteristic) else { return }
        // Copied here: the characteristic's value is overwritten by the next update.
        let value = characteristic.value.map { Data($0) }
        deliver(
            .connection(
                peripheral.identifier,
                .valueUpdated(
                    peripheral: peripheral.identifier, characteristic: ref, value: value,
                    error: CoreBluetoothBackend.backendError(error))),
            for: peripheral.identifier)
    }

    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: (any Error)?)
    {
        guard let ref = Self.reference(characteristic) else { return }
        deliver(
            .connection(
                peripheral.identifier,
                .writeCompleted(
                    peripheral: peripheral.identifier, characteristic: ref,
                    error: CoreBluetoothBackend.backendError(error))),
            for: peripheral.identifier)
    }

    func peripheral(
        _ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic,
        error: (any Error)?
    ) {
        guard let ref = Self.reference(characteristic) else { return }
        deliver(
            .connection(
                peripheral.identifier,
                .notificationStateUpdated(
                    peripheral: peripheral.identifier, characteristic: ref, isNotifying: characteristic.isNotifying,
                    error: CoreBluetoothBackend.backendError(error))), for: peripheral.identifier)
    }

    func peripheralIsReady(toSendWriteWithoutResponse peripheral: CBPeripheral) {
        deliver(
            .connection(peripheral.identifier, .readyToSendWriteWithoutResponse(peripheral: peripheral.identifier)),
            for: peripheral.identifier)
    }

    func peripheral(_ peripheral: CBPeripheral, didModifyServices invalidatedServices: [CBService]) {
        deliver(
            .servicesChanged(
                peripheral.identifier, invalidated: invalidatedServices.map { BleUUID($0.uuid.uuidString) }),
            for: peripheral.identifier)
    }

    /// The characteristic's service and own UUID, or nil for an orphan (never trap on a callback).
    private static func reference(_ characteristic: CBCharacteristic) -> BleCharacteristicRef? {
        guard let service = characteristic.service else { return nil }
        return BleCharacteristicRef(
            service: BleUUID(service.uuid.uuidString),
            characteristic: BleUUID(characteristic.uuid.uuidString))
    }
}
