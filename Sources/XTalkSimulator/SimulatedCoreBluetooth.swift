// The simulator behind the CoreBluetooth stand-in (Linux): the stand-in's
// CBCentralManager, CBPeripheral and delegate callbacks, driven by the
// simulated devices, behaving as CoreBluetooth documents it. With it, the SDK's
// CoreBluetooth backend runs against the simulator exactly as it would run
// against Apple's framework.

#if os(Linux)
    #if canImport(XTalkCoreBluetoothStandIn)
        @_spi(XTalkStandIn) import XTalkCoreBluetoothStandIn
    #else
        @_spi(XTalkStandIn) import CoreBluetooth
    #endif
    import Dispatch
    import Foundation
    import XTalkBleSdk

    /// Makes the stand-in's CBCentralManager talk to a simulated environment.
    ///
    /// It takes the environment's central (the backend seam) and turns its
    /// events into CoreBluetooth objects and delegate callbacks on the manager's
    /// queue, adding what CoreBluetooth does and the seam does not: after
    /// `cancelPeripheralConnection`, `didDisconnectPeripheral` still arrives once.
    @MainActor
    package final class SimulatedCoreBluetoothRadio {
        private let central: any BleBackend
        private weak var manager: CBCentralManager?
        private var peripherals: [UUID: CBPeripheral] = [:]
        private var services: [UUID: [BleUUID: CBService]] = [:]
        private var characteristics: [UUID: [BleCharacteristicRef: CBCharacteristic]] = [:]
        /// Commands CoreBluetooth would have refused with an "API MISUSE" log.
        package private(set) var apiMisuses: [String] = []
        /// The size and type of every write the app issued, in order (tests).
        package private(set) var writes: [(bytes: Int, type: CBCharacteristicWriteType)] = []
        /// The manager this radio drives.
        package var centralManager: CBCentralManager? { manager }

        /// As iOS reports them: Bluetooth SIG UUIDs (on the base UUID) in their
        /// 16-bit form (180F, 2A19, 180A…), others in full.
        static func cbUUID(_ uuid: BleUUID) -> CBUUID { CBUUID(string: uuid.shortestForm) }
        /// How long CoreBluetooth takes to confirm a cancelled connection with
        /// didDisconnectPeripheral (tests: a confirmation that arrives late).
        package var cancelConfirmationDelay: Duration = .zero
        private let scheduler: any TimerScheduling
        private var pendingConfirmations: [UUID: TimerToken] = [:]
        /// Cancels not confirmed yet, per peripheral.
        private var unconfirmedCancels: [UUID: Int] = [:]
        /// Connects made while a cancel was unconfirmed: they start after it.
        private var connectsAfterConfirmation: Set<UUID> = []

        /// Cancels the confirmations still to come (environment shutdown).
        package func shutDown() {
            for token in pendingConfirmations.values { scheduler.cancel(token) }
            pendingConfirmations.removeAll()
            connectsAfterConfirmation.removeAll()
            unconfirmedCancels.removeAll()
        }

        /// `CBManager.authorization` follows the environment's (app-wide, as on iOS).
        package func authorizationChanged(_ authorization: XTalkSimulatedAuthorization) {
            let cbAuthorization: CBManagerAuthorization =
                switch authorization {
                case .notDetermined: .notDetermined
                case .restricted: .restricted
                case .denied: .denied
                case .allowedAlways: .allowedAlways
                }
            CBManager.standInSetAuthorization(cbAuthorization)
        }

        private unowned let environment: XTalkSimulatedEnvironment

        package init(environment: XTalkSimulatedEnvironment) {
            self.environment = environment
            central = environment.backend
            scheduler = environment.scheduler
            if environment.authorization != .allowedAlways { authorizationChanged(environment.authorization) }
            central.eventHandler = { [weak self] event in self?.handle(event) }
        }

        /// A manager on this radio, for the CoreBluetooth backend.
        package func makeManager(
            delegate: any CBCentralManagerDelegate, queue: DispatchQueue, options: [String: Any]
        ) -> CBCentralManager {
            CBCentralManager(delegate: delegate, queue: queue, options: options, radio: self)
        }

        // MARK: Events of the simulated central → CoreBluetooth callbacks

        private func handle(_ event: BleBackendEvent) {
            guard let manager else { return }
            switch event {
            case .restored(let kept):
                // willRestoreState, with the app's new objects for the kept peripherals.
                let objects = kept.map { restored in
                    let peripheral = peripheralObject(restored.id, name: restored.name, manager: manager)
                    peripheral.standInSetState(restored.isConnected ? .connected : .connecting)
                    return peripheral
                }
                let box = Box(objects)
                deliver { manager in
                    manager.delegate?.centralManager(
                        manager, willRestoreState: [CBCentralManagerRestoredStatePeripheralsKey: box.value])
                }
            case .stateChanged(let state):
                let cbState = Self.cbState(state)
                deliver { manager in
                    manager.standInSetState(cbState)
                    manager.delegate?.centralManagerDidUpdateState(manager)
                }
                if state != .poweredOn {
                    // CoreBluetooth: every peripheral is disconnected, without a callback.
                    for peripheral in peripherals.values {
                        peripheral.standInSetState(.disconnected)
                        peripheral.standInSetCanSendWriteWithoutResponse(false)
                    }
                }
            case .discovered(let id, let advertisement, let rssi):
                let peripheral = peripheralObject(id, name: advertisement.localName, manager: manager)
                var data: [String: Any] = [
                    CBAdvertisementDataServiceUUIDsKey: advertisement.serviceUUIDs.map(Self.cbUUID)
                ]
                if let name = advertisement.localName { data[CBAdvertisementDataLocalNameKey] = name }
                if let manufacturer = advertisement.manufacturerData {
                    data[CBAdvertisementDataManufacturerDataKey] = manufacturer
                }
                let peripheralBox = Box(peripheral)
                let dataBox = Box(data)
                deliver { manager in
                    let peripheral = peripheralBox.value
                    let data = dataBox.value
                    peripheral.standInSetName(data[CBAdvertisementDataLocalNameKey] as? String ?? peripheral.name)
                    manager.delegate?.centralManager(
                        manager, didDiscover: peripheral, advertisementData: data,
                        rssi: NSNumber(value: rssi))
                }
            case .scanFailed:
                break  // CoreBluetooth reports no scan failures
            case .connected(let id):
                guard let peripheral = peripherals[id] else { return }
                peripheral.standInSetState(.connected)
                peripheral.standInSetCanSendWriteWithoutResponse(central.canSendWriteWithoutResponse(id))
                let box = Box(peripheral)
                deliver { manager in manager.delegate?.centralManager(manager, didConnect: box.value) }
            case .failedToConnect(let id, let error):
                guard let peripheral = peripherals[id] else { return }
                peripheral.standInSetState(.disconnected)
                let box = Box(peripheral)
                let cbError = error.map { Self.cbError($0) }
                deliver { manager in
                    manager.delegate?.centralManager(manager, didFailToConnect: box.value, error: cbError)
                }
            case .disconnected(let id, let error):
                guard let peripheral = peripherals[id] else { return }
                disconnected(peripheral, error: error.map { Self.cbError($0) })
            case .servicesDiscovered(let id, let found, let error):
                guard let peripheral = peripherals[id] else { return }
                var table = services[id] ?? [:]
                let objects = found.map { uuid in
                    let service =
                        table[uuid] ?? CBService(uuid: Self.cbUUID(uuid), peripheral: peripheral)
                    table[uuid] = service
                    return service
                }
                services[id] = table
                let peripheralBox = Box(peripheral)
                let objectsBox = Box(objects)
                let cbError = error.map { Self.cbError($0) }
                deliver { _ in
                    let peripheral = peripheralBox.value
                    let objects = objectsBox.value
                    peripheral.standInSetServices(objects)
                    peripheral.delegate?.peripheral(peripheral, didDiscoverServices: cbError)
                }
            case .characteristicsDiscovered(let id, let serviceUUID, let found, let error):
                guard let peripheral = peripherals[id], let service = services[id]?[serviceUUID] else { return }
                var table = characteristics[id] ?? [:]
                let objects = found.map { info in
                    let ref = BleCharacteristicRef(service: serviceUUID, characteristic: info.uuid)
                    let characteristic =
                        table[ref]
                        ?? CBCharacteristic(
                            uuid: Self.cbUUID(info.uuid), service: service,
                            properties: CBCharacteristicProperties(rawValue: info.properties.rawValue))
                    table[ref] = characteristic
                    return characteristic
                }
                characteristics[id] = table
                let peripheralBox = Box(peripheral)
                let serviceBox = Box(service)
                let objectsBox = Box(objects)
                let cbError = error.map { Self.cbError($0) }
                deliver { _ in
                    let peripheral = peripheralBox.value
                    let service = serviceBox.value
                    let objects = objectsBox.value
                    service.standInSetCharacteristics(objects)
                    peripheral.delegate?.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: cbError)
                }
            case .notificationStateUpdated(let id, let ref, let isNotifying, let error):
                guard let (peripheral, characteristic) = objects(id, ref) else { return }
                let peripheralBox = Box(peripheral)
                let characteristicBox = Box(characteristic)
                let cbError = error.map { Self.cbError($0) }
                deliver { _ in
                    let peripheral = peripheralBox.value
                    let characteristic = characteristicBox.value
                    characteristic.standInSetNotifying(isNotifying)
                    peripheral.delegate?.peripheral(
                        peripheral, didUpdateNotificationStateFor: characteristic, error: cbError)
                }
            case .valueUpdated(let id, let ref, let value, let error):
                guard let (peripheral, characteristic) = objects(id, ref) else { return }
                let peripheralBox = Box(peripheral)
                let characteristicBox = Box(characteristic)
                let cbError = error.map { Self.cbError($0) }
                deliver { _ in
                    let peripheral = peripheralBox.value
                    let characteristic = characteristicBox.value
                    // Set on the queue right before the callback: the next update overwrites it.
                    if let value { characteristic.standInSetValue(value) }
                    peripheral.delegate?.peripheral(peripheral, didUpdateValueFor: characteristic, error: cbError)
                }
            case .writeCompleted(let id, let ref, let error):
                guard let (peripheral, characteristic) = objects(id, ref) else { return }
                let peripheralBox = Box(peripheral)
                let characteristicBox = Box(characteristic)
                let cbError = error.map { Self.cbError($0) }
                deliver { _ in
                    let peripheral = peripheralBox.value
                    let characteristic = characteristicBox.value
                    peripheral.delegate?.peripheral(peripheral, didWriteValueFor: characteristic, error: cbError)
                }
            case .readyToSendWriteWithoutResponse(let id):
                guard let peripheral = peripherals[id] else { return }
                peripheral.standInSetCanSendWriteWithoutResponse(true)
                let box = Box(peripheral)
                deliver { _ in box.value.delegate?.peripheralIsReady(toSendWriteWithoutResponse: box.value) }
            }
        }

        private func disconnected(_ peripheral: CBPeripheral, error: (any Error)?) {
            peripheral.standInSetState(.disconnected)
            peripheral.standInSetCanSendWriteWithoutResponse(false)
            peripheral.standInSetServices(nil)
            services[peripheral.identifier] = nil
            characteristics[peripheral.identifier] = nil
            let peripheralBox = Box(peripheral)
            let errorBox = Box(error)
            deliver { manager in
                let peripheral = peripheralBox.value
                let error = errorBox.value
                manager.delegate?.centralManager(manager, didDisconnectPeripheral: peripheral, error: error)
            }
        }

        private func objects(_ id: UUID, _ ref: BleCharacteristicRef) -> (CBPeripheral, CBCharacteristic)? {
            guard let peripheral = peripherals[id], let characteristic = characteristics[id]?[ref] else { return nil }
            return (peripheral, characteristic)
        }

        /// The device changed its services: `didModifyServices` with the ones
        /// that became invalid (the app's own objects where it has them).
        package func servicesModified(_ id: UUID, invalidated: [BleUUID]) {
            guard let peripheral = peripherals[id] else { return }
            let objects = invalidated.map { uuid in
                services[id]?[uuid] ?? CBService(uuid: Self.cbUUID(uuid), peripheral: peripheral)
            }
            let peripheralBox = Box(peripheral)
            let objectsBox = Box(objects)
            deliver { _ in
                let peripheral = peripheralBox.value
                peripheral.delegate?.peripheral(peripheral, didModifyServices: objectsBox.value)
            }
        }

        private func deliver(_ body: @escaping (CBCentralManager) -> Void) {
            manager?.standInAsync(body)
        }

        // MARK: Conversions

        private static func cbState(_ state: BleManagerState) -> CBManagerState {
            switch state {
            case .unknown: .unknown
            case .resetting: .resetting
            case .unsupported: .unsupported
            case .unauthorized: .unauthorized
            case .poweredOff: .poweredOff
            case .poweredOn: .poweredOn
            }
        }

        private static func cbError(_ error: BleBackendError) -> any Error {
            let info = [NSLocalizedDescriptionKey: error.message]
            switch error.code {
            case .unknown: return CBError(.unknown, userInfo: info)
            case .notConnected: return CBError(.notConnected, userInfo: info)
            case .connectionTimeout: return CBError(.connectionTimeout, userInfo: info)
            case .peripheralDisconnected: return CBError(.peripheralDisconnected, userInfo: info)
            case .connectionFailed: return CBError(.connectionFailed, userInfo: info)
            case .operationCancelled: return CBError(.operationCancelled, userInfo: info)
            case .operationNotSupported: return CBError(.operationNotSupported, userInfo: info)
            case .writeNotPermitted: return CBATTError(.writeNotPermitted, userInfo: info)
            case .readNotPermitted: return CBATTError(.readNotPermitted, userInfo: info)
            case .insufficientAuthentication: return CBATTError(.insufficientAuthentication, userInfo: info)
            case .insufficientEncryption: return CBATTError(.insufficientEncryption, userInfo: info)
            case .peerRemovedPairing: return CBError(.peerRemovedPairingInformation, userInfo: info)
            case .attribute(let code):
                return CBATTError(CBATTError.Code(rawValue: code) ?? .unlikelyError, userInfo: info)
            }
        }
    }

    /// Carries stand-in objects to the manager's queue. One value per box: a
    /// captured generic tuple, destructured, over-releases its class members
    /// (seen with Swift 6.3 on Linux).
    private struct Box<Value>: @unchecked Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    // MARK: CoreBluetooth calls → the simulated central

    extension SimulatedCoreBluetoothRadio: @preconcurrency CBStandInRadio {
        package func attach(_ manager: CBCentralManager, options: [String: Any]?) {
            self.manager = manager
            // Creating the manager is what asks the user (and may show the power alert).
            let showPowerAlert = options?[CBCentralManagerOptionShowPowerAlertKey] as? Bool ?? true
            central.activate(
                showPowerAlert: showPowerAlert,
                restoreIdentifier: options?[CBCentralManagerOptionRestoreIdentifierKey] as? String)
            // The environment reported its state before this manager existed: report it now.
            let state = Self.cbState(central.state)
            if state != .unknown {
                deliver { manager in
                    manager.standInSetState(state)
                    manager.delegate?.centralManagerDidUpdateState(manager)
                }
            }
        }

        /// The system forgets every peripheral (tests: one that cannot be retrieved).
        package func forgetPeripherals() {
            peripherals.removeAll()
        }

        package func connectedPeripherals(_ manager: CBCentralManager, services: [CBUUID]) -> [CBPeripheral] {
            let wanted = services.map { BleUUID($0.uuidString) }
            return environment.systemConnected(withServices: wanted).map { simulated in
                peripheralObject(simulated.id, name: simulated.device.name, manager: manager)
            }
        }

        /// The app's object for a peripheral: one per identifier, made on first sight.
        private func peripheralObject(_ id: UUID, name: String?, manager: CBCentralManager) -> CBPeripheral {
            if let known = peripherals[id] { return known }
            let peripheral = CBPeripheral(identifier: id, name: name, manager: manager)
            // The flag follows the link's buffer at once, also when a ready callback is lost.
            let central = UncheckedBox(self.central)
            peripheral.standInSetCanSendWriteWithoutResponseSource {
                MainActor.assumeIsolated { central.value.canSendWriteWithoutResponse(id) }
            }
            peripherals[id] = peripheral
            return peripheral
        }

        /// What `retrievePeripherals(withIdentifiers:)` can return: the
        /// peripherals this app has seen, and those the system knows from
        /// before (bonded with the phone: an app relaunched with an id it stored).
        package func knownPeripherals(_ manager: CBCentralManager) -> [CBPeripheral] {
            for simulated in environment.peripherals where simulated.isBonded && peripherals[simulated.id] == nil {
                _ = peripheralObject(simulated.id, name: simulated.device.name, manager: manager)
            }
            return Array(peripherals.values)
        }

        package func scan(_ manager: CBCentralManager, services: [CBUUID]?) {
            central.scanForPeripherals(withServices: (services ?? []).map { BleUUID($0.uuidString) })
        }

        package func stopScan(_ manager: CBCentralManager) {
            central.stopScan()
        }

        package func connect(_ manager: CBCentralManager, _ peripheral: CBPeripheral) {
            // CoreBluetooth works through one peripheral's requests in order: a
            // connect made while a cancel is still unconfirmed starts after its
            // confirmation (didDisconnectPeripheral) has been delivered.
            if unconfirmedCancels[peripheral.identifier, default: 0] > 0 {
                connectsAfterConfirmation.insert(peripheral.identifier)
                return
            }
            central.connect(peripheral.identifier)
        }

        package func cancelConnection(_ manager: CBCentralManager, _ peripheral: CBPeripheral) {
            guard peripheral.state != .disconnected else { return }
            // A connect still queued behind an earlier cancel never starts.
            connectsAfterConfirmation.remove(peripheral.identifier)
            central.cancelPeripheralConnection(peripheral.identifier)
            // CoreBluetooth confirms a cancelled connection (or attempt) with didDisconnectPeripheral.
            guard cancelConfirmationDelay > .zero else {
                disconnected(peripheral, error: nil)
                return
            }
            peripheral.standInSetState(.disconnecting)
            let box = Box(peripheral)
            let key = UUID()
            unconfirmedCancels[peripheral.identifier, default: 0] += 1
            pendingConfirmations[key] = scheduler.schedule(after: cancelConfirmationDelay) { [weak self] in
                guard let self else { return }
                self.pendingConfirmations[key] = nil
                let id = box.value.identifier
                let left = self.unconfirmedCancels[id, default: 1] - 1
                self.unconfirmedCancels[id] = left > 0 ? left : nil
                self.disconnected(box.value, error: nil)
                if self.connectsAfterConfirmation.remove(box.value.identifier) != nil {
                    self.central.connect(box.value.identifier)
                }
            }
        }

        package func discoverServices(_ manager: CBCentralManager, _ peripheral: CBPeripheral, _ uuids: [CBUUID]?) {
            central.discoverServices(uuids?.map { BleUUID($0.uuidString) }, for: peripheral.identifier)
        }

        package func discoverCharacteristics(
            _ manager: CBCentralManager, _ peripheral: CBPeripheral, _ uuids: [CBUUID]?,
            for service: CBService
        ) {
            central.discoverCharacteristics(
                uuids?.map { BleUUID($0.uuidString) }, for: BleUUID(service.uuid.uuidString),
                of: peripheral.identifier)
        }

        package func readValue(
            _ manager: CBCentralManager, _ peripheral: CBPeripheral, for characteristic: CBCharacteristic
        ) {
            guard let ref = Self.reference(characteristic) else { return }
            central.readValue(for: ref, of: peripheral.identifier)
        }

        package func writeValue(
            _ manager: CBCentralManager, _ peripheral: CBPeripheral, _ data: Data,
            for characteristic: CBCharacteristic, type: CBCharacteristicWriteType
        ) {
            guard let ref = Self.reference(characteristic) else { return }
            writes.append((data.count, type))
            central.writeValue(
                data, for: ref, of: peripheral.identifier,
                type: type == .withResponse ? .withResponse : .withoutResponse)
            // Like CoreBluetooth's, the flag follows the buffer at once.
            peripheral.standInSetCanSendWriteWithoutResponse(central.canSendWriteWithoutResponse(peripheral.identifier))
        }

        package func setNotifyValue(
            _ manager: CBCentralManager, _ peripheral: CBPeripheral, _ enabled: Bool,
            for characteristic: CBCharacteristic
        ) {
            guard let ref = Self.reference(characteristic) else { return }
            central.setNotifyValue(enabled, for: ref, of: peripheral.identifier)
        }

        package func maximumWriteValueLength(
            _ manager: CBCentralManager, _ peripheral: CBPeripheral,
            type: CBCharacteristicWriteType
        ) -> Int {
            central.maximumWriteValueLength(
                for: type == .withResponse ? .withResponse : .withoutResponse, of: peripheral.identifier)
        }

        package func apiMisuse(_ message: String) {
            apiMisuses.append(message)
        }

        private static func reference(_ characteristic: CBCharacteristic) -> BleCharacteristicRef? {
            guard let service = characteristic.service else { return nil }
            return BleCharacteristicRef(
                service: BleUUID(service.uuid.uuidString), characteristic: BleUUID(characteristic.uuid.uuidString))
        }
    }

    extension XTalkSimulatedEnvironment {
        /// The CoreBluetooth backend over the stand-in, driven by this
        /// environment (Linux): suites run through it as through the simulated central.
        package func coreBluetoothBackend(queue: DispatchQueue = .main) -> any BleBackend {
            let radio = SimulatedCoreBluetoothRadio(environment: self)
            let backend = CoreBluetoothBackend(scheduler: scheduler, queue: queue) { delegate, queue, options in
                radio.makeManager(delegate: delegate, queue: queue, options: options)
            }
            coreBluetoothRadio = radio  // kept alive with the environment
            return backend
        }
    }

    extension XTalkBleClient {
        /// A client on the CoreBluetooth backend over the stand-in, driven by the
        /// simulated environment (Linux): the same client suite runs through it.
        package convenience init(
            coreBluetoothSimulator environment: XTalkSimulatedEnvironment, queue: DispatchQueue = .main,
            options: XTalkBleClientOptions = XTalkBleClientOptions()
        ) {
            // The stand-in's radio holds its environment unowned: the client keeps it.
            self.init(
                backend: environment.coreBluetoothBackend(queue: queue), options: options, keepingAlive: environment)
        }
    }
#endif

/// Carries a main-actor object into a closure that runs on the main actor
/// (checked there with `MainActor.assumeIsolated`).
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
