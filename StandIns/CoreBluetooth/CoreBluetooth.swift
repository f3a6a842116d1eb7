// A stand-in for Apple's CoreBluetooth (central role), so that the SDK's
// CoreBluetooth backend compiles and runs on Linux, unchanged.
//
// It declares the Swift-visible API the backend uses with Apple's names,
// labels, optionality, class hierarchy and weak delegates, as recorded in
// shared/reference/corebluetooth-central-subset.md, whose sources are:
// [A] Apple's documentation, https://developer.apple.com/documentation/corebluetooth/<symbol>;
// [H] the SDK headers CBCentralManager.h, CBPeripheral.h, CBManager.h, CBError.h;
// [N] NordicSemiconductor/IOS-CoreBluetooth-Mock (how optional delegate
//     methods are emulated without the Objective-C runtime).
// Each declaration names its source. Nothing here talks to a radio: a
// `CBStandInRadio` (the simulator, or a test script) drives it through the
// `XTalkStandIn` SPI, which Apple's framework does not have.
//
// Like Apple's classes, these are not Sendable; the stand-in guards its own
// mutable state with a lock, as CoreBluetooth's objects are used from the
// app's threads and the manager's queue alike.

import Dispatch
import Foundation

// MARK: Managers and state  [A cbmanager, cbmanagerstate; H CBManager.h]

/// [A cbmanagerstate] Imported NS_ENUM: switches need `@unknown default` on Apple.
public enum CBManagerState: Int, Sendable {
    case unknown = 0
    case resetting
    case unsupported
    case unauthorized
    case poweredOff
    case poweredOn
}

/// [A cbmanagerauthorization]
public enum CBManagerAuthorization: Int, Sendable {
    case notDetermined = 0
    case restricted
    case denied
    case allowedAlways
}

/// [A cbmanager] `init()` is unavailable to apps.
open class CBManager: NSObject {
    let lock = NSLock()
    private var _state: CBManagerState = .unknown

    /// [A cbmanager/state] Starts at `.unknown`.
    open var state: CBManagerState { lock.withLock { _state } }

    /// [A cbmanager/authorization] iOS 13.1. The app's Bluetooth permission,
    /// for the whole app (the stand-in's radio sets it).
    open class var authorization: CBManagerAuthorization { authorizationLock.withLock { standInAuthorization } }

    private static let authorizationLock = NSLock()
    nonisolated(unsafe) private static var standInAuthorization: CBManagerAuthorization = .allowedAlways

    @_spi(XTalkStandIn) public static func standInSetAuthorization(_ authorization: CBManagerAuthorization) {
        authorizationLock.withLock { standInAuthorization = authorization }
    }

    /// Apps cannot make a plain manager; subclasses call this.
    init(standIn: Void) {
        super.init()
    }

    @_spi(XTalkStandIn) public func standInSetState(_ state: CBManagerState) {
        lock.withLock { _state = state }
    }
}

// MARK: CBCentralManager  [A cbcentralmanager; H CBCentralManager.h]

/// [A cbcentralmanager] Events arrive on `queue` (the main queue when nil).
open class CBCentralManager: CBManager {
    /// [A cbcentralmanager/delegate] Weak, as in the header.
    open weak var delegate: (any CBCentralManagerDelegate)?
    private var _isScanning = false
    @_spi(XTalkStandIn) public let queue: DispatchQueue
    private var _radio: (any CBStandInRadio)?
    /// The radio driving this manager; without one it reports `.unsupported`.
    @_spi(XTalkStandIn) public var radio: (any CBStandInRadio)? {
        get { lock.withLock { _radio } }
        set { lock.withLock { _radio = newValue } }
    }

    /// [A cbcentralmanager/isscanning] iOS 9.
    open var isScanning: Bool { lock.withLock { _isScanning } }

    /// [A cbcentralmanager/init()]
    public convenience init() {
        self.init(delegate: nil, queue: nil, options: nil)
    }

    /// [A cbcentralmanager/init(delegate:queue:)]
    public convenience init(delegate: (any CBCentralManagerDelegate)?, queue: DispatchQueue?) {
        self.init(delegate: delegate, queue: queue, options: nil)
    }

    /// [A cbcentralmanager/init(delegate:queue:options:)] The designated initializer.
    public init(delegate: (any CBCentralManagerDelegate)?, queue: DispatchQueue?, options: [String: Any]? = nil) {
        self.queue = queue ?? .main
        super.init(standIn: ())
        self.delegate = delegate
        // Like CoreBluetooth, the state is reported shortly after creation. By
        // way of the main queue, so that a radio attached right after this
        // initializer (the SPI one) is seen even when `queue` is another thread.
        let manager = UncheckedBox(self)
        DispatchQueue.main.async {
            manager.value.standInAsync { manager in
                guard manager.radio == nil else { return }
                manager.standInSetState(.unsupported)
                manager.delegate?.centralManagerDidUpdateState(manager)
            }
        }
    }

    /// A manager driven by `radio` (the simulator or a test script).
    @_spi(XTalkStandIn) public convenience init(
        delegate: (any CBCentralManagerDelegate)?, queue: DispatchQueue?, options: [String: Any]? = nil,
        radio: any CBStandInRadio
    ) {
        self.init(delegate: delegate, queue: queue, options: options)
        self.radio = radio
        radio.attach(self, options: options)
    }

    /// [A cbcentralmanager/scanforperipherals(withservices:options:)]
    open func scanForPeripherals(withServices serviceUUIDs: [CBUUID]?, options: [String: Any]? = nil) {
        guard ensurePoweredOn("scanForPeripherals") else { return }
        lock.withLock { _isScanning = true }
        radio?.scan(self, services: serviceUUIDs)
    }

    /// [A cbcentralmanager/stopscan()]
    open func stopScan() {
        guard ensurePoweredOn("stopScan") else { return }
        lock.withLock { _isScanning = false }
        radio?.stopScan(self)
    }

    /// [A cbcentralmanager/connect(_:options:)] Never times out.
    open func connect(_ peripheral: CBPeripheral, options: [String: Any]? = nil) {
        guard ensurePoweredOn("connect") else { return }
        peripheral.standInSetState(.connecting)
        radio?.connect(self, peripheral)
    }

    /// [A cbcentralmanager/cancelperipheralconnection(_:)] Non-blocking.
    open func cancelPeripheralConnection(_ peripheral: CBPeripheral) {
        guard ensurePoweredOn("cancelPeripheralConnection") else { return }
        radio?.cancelConnection(self, peripheral)
    }

    /// [A cbcentralmanager/retrieveperipherals(withidentifiers:)]
    open func retrievePeripherals(withIdentifiers identifiers: [UUID]) -> [CBPeripheral] {
        radio?.knownPeripherals(self).filter { identifiers.contains($0.identifier) } ?? []
    }

    /// [A cbcentralmanager/retrieveconnectedperipherals(withservices:)]
    open func retrieveConnectedPeripherals(withServices serviceUUIDs: [CBUUID]) -> [CBPeripheral] {
        radio?.connectedPeripherals(self, services: serviceUUIDs) ?? []
    }

    /// [H, N ensurePoweredOn] Below `.poweredOn` a command is ignored with an API MISUSE log.
    private func ensurePoweredOn(_ call: String) -> Bool {
        guard state == .poweredOn else {
            radio?.apiMisuse("\(call): can only accept this command while in the powered on state")
            return false
        }
        return true
    }

    /// Runs `body` on the manager's queue (how every delegate callback arrives).
    @_spi(XTalkStandIn) public func standInAsync(_ body: @escaping (CBCentralManager) -> Void) {
        // Two boxes, not one holding a tuple: destructuring a captured generic
        // tuple over-releases its class member (seen with Swift 6.3 on Linux).
        let manager = UncheckedBox(self)
        let work = UncheckedBox(body)
        queue.async { work.value(manager.value) }
    }
}

/// Hands a non-Sendable value to the manager's queue, as CoreBluetooth does internally.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

// MARK: CBCentralManagerDelegate  [A cbcentralmanagerdelegate; H CBCentralManager.h; N CBMCentralManagerDelegate.swift]

/// [A cbcentralmanagerdelegate] Only `centralManagerDidUpdateState` is required;
/// the `@objc optional` members get no-op defaults below, as Nordic's mock does.
public protocol CBCentralManagerDelegate: NSObjectProtocol {
    func centralManagerDidUpdateState(_ central: CBCentralManager)
    func centralManager(_ central: CBCentralManager, willRestoreState dict: [String: Any])
    func centralManager(
        _ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
        advertisementData: [String: Any], rssi RSSI: NSNumber)
    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral)
    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: (any Error)?)
    func centralManager(
        _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: (any Error)?)
}

extension CBCentralManagerDelegate {
    public func centralManager(_ central: CBCentralManager, willRestoreState dict: [String: Any]) {}
    public func centralManager(
        _ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
        advertisementData: [String: Any], rssi RSSI: NSNumber
    ) {}
    public func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {}
    public func centralManager(
        _ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: (any Error)?
    ) {}
    public func centralManager(
        _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: (any Error)?
    ) {}
}

// MARK: CBPeer and CBPeripheral  [A cbpeer, cbperipheral; H CBPeripheral.h]

/// [A cbpeer] `init()` is unavailable to apps.
open class CBPeer: NSObject {
    private let _identifier: UUID

    /// [A cbpeer/identifier] A system-assigned UUID (not an address).
    open var identifier: UUID { _identifier }

    init(identifier: UUID) {
        _identifier = identifier
        super.init()
    }
}

/// [A cbperipheralstate]
public enum CBPeripheralState: Int, Sendable {
    case disconnected = 0
    case connecting
    case connected
    case disconnecting
}

/// [A cbcharacteristicwritetype]
public enum CBCharacteristicWriteType: Int, Sendable {
    case withResponse = 0
    case withoutResponse
}

/// [A cbperipheral] Apps cannot construct one; the radio does, through the SPI.
open class CBPeripheral: CBPeer {
    let lock = NSLock()
    /// [A cbperipheral/delegate] Weak, as in the header.
    open weak var delegate: (any CBPeripheralDelegate)?
    private var _name: String?
    private var _state: CBPeripheralState = .disconnected
    private var _services: [CBService]?
    private var _canSendWriteWithoutResponse = false
    private var _canSendSource: (@Sendable () -> Bool)?
    @_spi(XTalkStandIn) public weak var manager: CBCentralManager?

    @_spi(XTalkStandIn) public init(identifier: UUID, name: String?, manager: CBCentralManager) {
        _name = name
        self.manager = manager
        super.init(identifier: identifier)
    }

    /// [A cbperipheral/name]
    open var name: String? { lock.withLock { _name } }
    /// [A cbperipheral/state]
    open var state: CBPeripheralState { lock.withLock { _state } }
    /// [A cbperipheral/services] Nil until discovered.
    open var services: [CBService]? { lock.withLock { _services } }
    /// [A cbperipheral/cansendwritewithoutresponse] iOS 11.
    open var canSendWriteWithoutResponse: Bool {
        let (stored, source) = lock.withLock { (_canSendWriteWithoutResponse, _canSendSource) }
        return source?() ?? stored
    }

    /// [A cbperipheral/readrssi()]
    open func readRSSI() {}

    /// [A cbperipheral/discoverservices(_:)] Nil discovers all services.
    open func discoverServices(_ serviceUUIDs: [CBUUID]?) {
        guard let manager, let radio = connectedRadio("discoverServices") else { return }
        radio.discoverServices(manager, self, serviceUUIDs)
    }

    /// [A cbperipheral/discovercharacteristics(_:for:)]
    open func discoverCharacteristics(_ characteristicUUIDs: [CBUUID]?, for service: CBService) {
        guard let manager, let radio = connectedRadio("discoverCharacteristics") else { return }
        radio.discoverCharacteristics(manager, self, characteristicUUIDs, for: service)
    }

    /// [A cbperipheral/readvalue(for:)-1bzwz] The result arrives in `didUpdateValueFor`.
    open func readValue(for characteristic: CBCharacteristic) {
        guard let manager, let radio = connectedRadio("readValue") else { return }
        radio.readValue(manager, self, for: characteristic)
    }

    /// [A cbperipheral/maximumwritevaluelength(for:)] iOS 9: MTU − 3 without
    /// response, 512 with (observed); 0 when not connected [N].
    open func maximumWriteValueLength(for type: CBCharacteristicWriteType) -> Int {
        guard let manager, state == .connected else { return 0 }
        return manager.radio?.maximumWriteValueLength(manager, self, type: type) ?? 0
    }

    /// [A cbperipheral/writevalue(_:for:type:)] Only `.withResponse` is acknowledged.
    open func writeValue(_ data: Data, for characteristic: CBCharacteristic, type: CBCharacteristicWriteType) {
        guard let manager, let radio = connectedRadio("writeValue") else { return }
        radio.writeValue(manager, self, data, for: characteristic, type: type)
    }

    /// [A cbperipheral/setnotifyvalue(_:for:)] The result arrives in `didUpdateNotificationStateFor`.
    open func setNotifyValue(_ enabled: Bool, for characteristic: CBCharacteristic) {
        guard let manager, let radio = connectedRadio("setNotifyValue") else { return }
        radio.setNotifyValue(manager, self, enabled, for: characteristic)
    }

    private func connectedRadio(_ call: String) -> (any CBStandInRadio)? {
        guard let radio = manager?.radio else { return nil }
        guard state == .connected else {
            radio.apiMisuse("\(call): the peripheral is not connected")
            return nil
        }
        return radio
    }

    @_spi(XTalkStandIn) public func standInSetState(_ state: CBPeripheralState) {
        lock.withLock { _state = state }
    }

    @_spi(XTalkStandIn) public func standInSetName(_ name: String?) {
        lock.withLock { _name = name }
    }

    @_spi(XTalkStandIn) public func standInSetServices(_ services: [CBService]?) {
        lock.withLock { _services = services }
    }

    @_spi(XTalkStandIn) public func standInSetCanSendWriteWithoutResponse(_ value: Bool) {
        lock.withLock { _canSendWriteWithoutResponse = value }
    }

    /// A model whose flag follows its buffer at any moment, as CoreBluetooth's
    /// does (read on the queue that reads the flag).
    @_spi(XTalkStandIn) public func standInSetCanSendWriteWithoutResponseSource(
        _ source: (@Sendable () -> Bool)?
    ) {
        lock.withLock { _canSendSource = source }
    }
}

// MARK: CBPeripheralDelegate: every member is optional  [A cbperipheraldelegate; H CBPeripheral.h; N
// CBMPeripheralDelegate.swift]

/// [A cbperipheraldelegate] Every member is `@objc optional` on Apple: no-op defaults below.
public protocol CBPeripheralDelegate: NSObjectProtocol {
    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: (any Error)?)
    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: (any Error)?)
    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: (any Error)?)
    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: (any Error)?)
    func peripheral(
        _ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic,
        error: (any Error)?)
    func peripheralIsReady(toSendWriteWithoutResponse peripheral: CBPeripheral)
    func peripheral(_ peripheral: CBPeripheral, didModifyServices invalidatedServices: [CBService])
    func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: (any Error)?)
}

extension CBPeripheralDelegate {
    public func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: (any Error)?) {}
    public func peripheral(
        _ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: (any Error)?
    ) {}
    public func peripheral(
        _ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: (any Error)?
    ) {}
    public func peripheral(
        _ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: (any Error)?
    ) {}
    public func peripheral(
        _ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic,
        error: (any Error)?
    ) {}
    public func peripheralIsReady(toSendWriteWithoutResponse peripheral: CBPeripheral) {}
    public func peripheral(_ peripheral: CBPeripheral, didModifyServices invalidatedServices: [CBService]) {}
    public func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: (any Error)?) {}
}

// MARK: Attributes, UUIDs and properties  [A cbattribute, cbservice, cbcharacteristic, cbuuid,
// cbcharacteristicproperties]

/// [A cbattribute] `init()` is unavailable to apps.
open class CBAttribute: NSObject {
    private let _uuid: CBUUID
    /// [A cbattribute/uuid]
    open var uuid: CBUUID { _uuid }

    init(uuid: CBUUID) {
        _uuid = uuid
        super.init()
    }
}

/// [A cbservice]
open class CBService: CBAttribute {
    private let lock = NSLock()
    private var _characteristics: [CBCharacteristic]?
    private weak var _peripheral: CBPeripheral?
    private let _isPrimary: Bool

    @_spi(XTalkStandIn) public init(uuid: CBUUID, peripheral: CBPeripheral, isPrimary: Bool = true) {
        _peripheral = peripheral
        _isPrimary = isPrimary
        super.init(uuid: uuid)
    }

    /// [A cbservice/peripheral] Weak.
    open var peripheral: CBPeripheral? { _peripheral }
    /// [A cbservice/isprimary]
    open var isPrimary: Bool { _isPrimary }
    /// [A cbservice/characteristics] Nil until discovered.
    open var characteristics: [CBCharacteristic]? { lock.withLock { _characteristics } }
    /// [A cbservice/includedservices]
    open var includedServices: [CBService]? { nil }

    @_spi(XTalkStandIn) public func standInSetCharacteristics(_ characteristics: [CBCharacteristic]?) {
        lock.withLock { _characteristics = characteristics }
    }
}

/// [A cbcharacteristicproperties] NS_OPTIONS(NSUInteger).
public struct CBCharacteristicProperties: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let broadcast = CBCharacteristicProperties(rawValue: 0x01)
    public static let read = CBCharacteristicProperties(rawValue: 0x02)
    public static let writeWithoutResponse = CBCharacteristicProperties(rawValue: 0x04)
    public static let write = CBCharacteristicProperties(rawValue: 0x08)
    public static let notify = CBCharacteristicProperties(rawValue: 0x10)
    public static let indicate = CBCharacteristicProperties(rawValue: 0x20)
    public static let authenticatedSignedWrites = CBCharacteristicProperties(rawValue: 0x40)
    public static let extendedProperties = CBCharacteristicProperties(rawValue: 0x80)
    public static let notifyEncryptionRequired = CBCharacteristicProperties(rawValue: 0x100)
    public static let indicateEncryptionRequired = CBCharacteristicProperties(rawValue: 0x200)
}

/// [A cbcharacteristic]
open class CBCharacteristic: CBAttribute {
    private let lock = NSLock()
    private weak var _service: CBService?
    private let _properties: CBCharacteristicProperties
    private var _value: Data?
    private var _isNotifying = false

    @_spi(XTalkStandIn) public init(uuid: CBUUID, service: CBService, properties: CBCharacteristicProperties) {
        _service = service
        _properties = properties
        super.init(uuid: uuid)
    }

    /// [A cbcharacteristic/service] Weak.
    open var service: CBService? { _service }
    /// [A cbcharacteristic/properties]
    open var properties: CBCharacteristicProperties { _properties }
    /// [A cbcharacteristic/value] Overwritten by the next update: copy it in the callback.
    open var value: Data? { lock.withLock { _value } }
    /// [A cbcharacteristic/descriptors]
    open var descriptors: [CBDescriptor]? { nil }
    /// [A cbcharacteristic/isnotifying]
    open var isNotifying: Bool { lock.withLock { _isNotifying } }

    @_spi(XTalkStandIn) public func standInSetValue(_ value: Data?) {
        lock.withLock { _value = value }
    }

    @_spi(XTalkStandIn) public func standInSetNotifying(_ value: Bool) {
        lock.withLock { _isNotifying = value }
    }
}

/// [A cbdescriptor] Declared for `descriptors`; the backend uses none.
open class CBDescriptor: CBAttribute {}

/// [A cbuuid] 16- and 32-bit UUIDs are pre-filled with the Bluetooth base UUID.
///
/// Whether a 16-bit UUID equals its 128-bit form is not documented; the
/// stand-in takes the strict reading (equal only in the same form, as the
/// bytes of `data` would compare), so code that relies on it fails here.
open class CBUUID: NSObject, NSCopying {
    private let canonical: String
    /// The form it was made in (the length of its `data`: 2, 4 or 16 bytes).
    private let written: String

    /// [A cbuuid/init(string:)] 4, 8 or 36 hex characters.
    public init(string theString: String) {
        let upper = theString.uppercased()
        written = upper
        switch upper.count {
        case 4: canonical = "0000\(upper)-0000-1000-8000-00805F9B34FB"
        case 8: canonical = "\(upper)-0000-1000-8000-00805F9B34FB"
        default: canonical = upper
        }
        super.init()
    }

    /// [A cbuuid/init(nsuuid:)]
    public convenience init(nsuuid theUUID: UUID) {
        self.init(string: theUUID.uuidString)
    }

    /// [A cbuuid/uuidstring] The short form for base UUIDs, as CoreBluetooth prints them.
    open var uuidString: String {
        if canonical.hasPrefix("0000") && canonical.hasSuffix("-0000-1000-8000-00805F9B34FB") {
            return String(canonical.dropFirst(4).prefix(4))
        }
        return canonical
    }

    open override func isEqual(_ object: Any?) -> Bool {
        (object as? CBUUID)?.written == written
    }

    open override var hash: Int { written.hashValue }

    open override var description: String { uuidString }

    public func copy(with zone: NSZone? = nil) -> Any { self }
}

// MARK: Errors  [H CBError.h; A cberror-swift.struct, cbatterror-swift.struct/code]

/// The domain of CoreBluetooth errors.
public let CBErrorDomain = "CBErrorDomain"
/// The domain of ATT errors.
public let CBATTErrorDomain = "CBATTErrorDomain"

/// [A cberror-swift.struct] A bridged error struct; `as? CBError` works on delegate errors.
public struct CBError: Error, Hashable, Sendable, CustomStringConvertible {
    /// [A cberror-swift.struct/code]
    public enum Code: Int, Sendable {
        case unknown = 0, invalidParameters, invalidHandle, notConnected, outOfSpace, operationCancelled,
            connectionTimeout, peripheralDisconnected, uuidNotAllowed, alreadyAdvertising, connectionFailed,
            connectionLimitReached, unknownDevice, operationNotSupported, peerRemovedPairingInformation,
            encryptionTimedOut, tooManyLEPairedDevices, leGattExceededBackgroundNotificationLimit,
            leGattNearBackgroundNotificationLimit
    }

    public let code: Code
    private let message: String?

    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.code = code
        message = userInfo[NSLocalizedDescriptionKey] as? String
    }

    public static var errorDomain: String { CBErrorDomain }
    public var localizedDescription: String { message ?? "CBError \(code)" }
    public var description: String { localizedDescription }
}

/// [A cbatterror-swift.struct] ATT protocol errors.
public struct CBATTError: Error, Hashable, Sendable, CustomStringConvertible {
    /// [A cbatterror-swift.struct/code]
    public enum Code: Int, Sendable {
        case success = 0, invalidHandle, readNotPermitted, writeNotPermitted, invalidPdu, insufficientAuthentication,
            requestNotSupported, invalidOffset, insufficientAuthorization, prepareQueueFull, attributeNotFound,
            attributeNotLong, insufficientEncryptionKeySize, invalidAttributeValueLength, unlikelyError,
            insufficientEncryption, unsupportedGroupType, insufficientResources
    }

    public let code: Code
    private let message: String?

    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.code = code
        message = userInfo[NSLocalizedDescriptionKey] as? String
    }

    public static var errorDomain: String { CBATTErrorDomain }
    public var localizedDescription: String { message ?? "CBATTError \(code)" }
    public var description: String { localizedDescription }
}

// MARK: Keys  [A cbadvertisementdata*, cbcentralmanageroption*; H CBCentralManagerConstants.h]

/// Value: String.
public let CBAdvertisementDataLocalNameKey = "kCBAdvDataLocalName"
/// Value: Data.
public let CBAdvertisementDataManufacturerDataKey = "kCBAdvDataManufacturerData"
/// Value: [CBUUID].
public let CBAdvertisementDataServiceUUIDsKey = "kCBAdvDataServiceUUIDs"
/// Value: NSNumber (Bool).
public let CBAdvertisementDataIsConnectable = "kCBAdvDataIsConnectable"
/// NSNumber (Bool), default false (coalesced); ignored in the background.
public let CBCentralManagerScanOptionAllowDuplicatesKey = "kCBScanOptionAllowDuplicates"
/// NSNumber (Bool), default true.
public let CBCentralManagerOptionShowPowerAlertKey = "kCBInitOptionShowPowerAlert"
/// String; must be stable across launches.
public let CBCentralManagerOptionRestoreIdentifierKey = "kCBInitOptionRestoreIdentifier"
/// Keys of `willRestoreState`'s dictionary: [CBPeripheral], [CBUUID], [String: Any].
public let CBCentralManagerRestoredStatePeripheralsKey = "kCBRestoredPeripherals"
public let CBCentralManagerRestoredStateScanServicesKey = "kCBRestoredScanServices"
public let CBCentralManagerRestoredStateScanOptionsKey = "kCBRestoredScanOptions"

// MARK: The radio behind the stand-in (SPI: not part of Apple's framework)

/// What drives a stand-in manager: the simulator, or a test that scripts
/// callbacks. Calls arrive on the app's thread; the radio delivers delegate
/// callbacks on the manager's queue (`standInAsync`), updating the objects'
/// state there first, as CoreBluetooth does.
@_spi(XTalkStandIn)
public protocol CBStandInRadio: AnyObject {
    /// A manager was created on this radio, with its init options.
    func attach(_ manager: CBCentralManager, options: [String: Any]?)
    func knownPeripherals(_ manager: CBCentralManager) -> [CBPeripheral]
    /// Peripherals connected to the system (by this app or another) that have all of `services`.
    func connectedPeripherals(_ manager: CBCentralManager, services: [CBUUID]) -> [CBPeripheral]
    func scan(_ manager: CBCentralManager, services: [CBUUID]?)
    func stopScan(_ manager: CBCentralManager)
    func connect(_ manager: CBCentralManager, _ peripheral: CBPeripheral)
    func cancelConnection(_ manager: CBCentralManager, _ peripheral: CBPeripheral)
    func discoverServices(_ manager: CBCentralManager, _ peripheral: CBPeripheral, _ uuids: [CBUUID]?)
    func discoverCharacteristics(
        _ manager: CBCentralManager, _ peripheral: CBPeripheral, _ uuids: [CBUUID]?,
        for service: CBService)
    func readValue(_ manager: CBCentralManager, _ peripheral: CBPeripheral, for characteristic: CBCharacteristic)
    func writeValue(
        _ manager: CBCentralManager, _ peripheral: CBPeripheral, _ data: Data,
        for characteristic: CBCharacteristic, type: CBCharacteristicWriteType)
    func setNotifyValue(
        _ manager: CBCentralManager, _ peripheral: CBPeripheral, _ enabled: Bool,
        for characteristic: CBCharacteristic)
    func maximumWriteValueLength(
        _ manager: CBCentralManager, _ peripheral: CBPeripheral,
        type: CBCharacteristicWriteType
    ) -> Int
    /// A command CoreBluetooth would refuse with an "API MISUSE" log.
    func apiMisuse(_ message: String)
}
