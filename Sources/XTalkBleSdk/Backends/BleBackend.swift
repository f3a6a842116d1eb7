import Foundation

// The one seam between the client and a Bluetooth stack, shaped after
// CoreBluetooth's central role so that the CoreBluetooth and BlueZ backends
// map onto it one call for one call. The simulator is a backend too.
//
// Rules every backend follows (they are CoreBluetooth's, as Apple documents
// CBCentralManager and CBPeripheral):
// - Calls never deliver events synchronously: every event arrives later, on
//   the main actor, through `eventHandler`.
// - Commands are honoured only in `.poweredOn`; otherwise they are ignored.
// - After `.disconnected`, after `cancelPeripheralConnection`, and after a
//   state below `.poweredOn`, no further event arrives for that connection:
//   pending reads and writes never complete.
// - `.writeCompleted` is reported for with-response writes only.
// - Notifications and read results both arrive as `.valueUpdated`.

/// A 16-, 32- or 128-bit Bluetooth UUID, kept as its canonical 128-bit text.
package struct BleUUID: Hashable, Sendable, CustomStringConvertible {
    /// Uppercase, hyphenated, 128-bit form.
    package let uuidString: String

    /// Accepts 4 or 8 hex digits (expanded with the Bluetooth base UUID) or a
    /// 36-character UUID.
    package init(_ text: String) {
        let upper = text.uppercased()
        switch upper.count {
        case 4: uuidString = "0000\(upper)-0000-1000-8000-00805F9B34FB"
        case 8: uuidString = "\(upper)-0000-1000-8000-00805F9B34FB"
        default: uuidString = upper
        }
    }

    package var description: String {
        if uuidString.hasSuffix("-0000-1000-8000-00805F9B34FB") && uuidString.hasPrefix("0000") {
            return String(uuidString.dropFirst(4).prefix(4))
        }
        return uuidString
    }
}

/// The GATT layout of PROTOCOL.md section 2.
package enum XTalkGatt {
    package static let passthroughService = BleUUID("6E58A100-3C1F-4B7D-9F3A-5854414C4B00")
    package static let passthroughTX = BleUUID("6E58A101-3C1F-4B7D-9F3A-5854414C4B00")
    package static let passthroughRX = BleUUID("6E58A102-3C1F-4B7D-9F3A-5854414C4B00")
    package static let batteryService = BleUUID("180F")
    package static let batteryLevel = BleUUID("2A19")
    package static let deviceInformationService = BleUUID("180A")
    package static let firmwareRevision = BleUUID("2A26")
    package static let hardwareRevision = BleUUID("2A27")
    /// Manufacturer data: company id 0xFFFF (little-endian), version 0x01, 6-byte address.
    package static let manufacturerCompanyID: UInt16 = 0xFFFF
    package static let manufacturerDataVersion: UInt8 = 0x01
}

/// The central's Bluetooth state (CBManagerState).
package enum BleManagerState: Sendable, Hashable {
    case unknown
    case resetting
    case unsupported
    case unauthorized
    case poweredOff
    case poweredOn
}

/// Characteristic properties (CBCharacteristicProperties, the bits we use).
package struct BleCharacteristicProperties: OptionSet, Sendable, Hashable {
    package let rawValue: UInt
    package init(rawValue: UInt) { self.rawValue = rawValue }
    package static let read = BleCharacteristicProperties(rawValue: 0x02)
    package static let writeWithoutResponse = BleCharacteristicProperties(rawValue: 0x04)
    package static let write = BleCharacteristicProperties(rawValue: 0x08)
    package static let notify = BleCharacteristicProperties(rawValue: 0x10)
    package static let indicate = BleCharacteristicProperties(rawValue: 0x20)
}

package enum BleWriteType: Sendable, Hashable {
    case withResponse
    case withoutResponse
}

/// One characteristic, addressed by its service and its own UUID.
package struct BleCharacteristicRef: Hashable, Sendable, CustomStringConvertible {
    package let service: BleUUID
    package let characteristic: BleUUID
    package init(service: BleUUID, characteristic: BleUUID) {
        self.service = service
        self.characteristic = characteristic
    }
    package var description: String { "\(service)/\(characteristic)" }
}

package struct BleCharacteristicInfo: Sendable, Hashable {
    package let uuid: BleUUID
    package let properties: BleCharacteristicProperties
    package init(uuid: BleUUID, properties: BleCharacteristicProperties) {
        self.uuid = uuid
        self.properties = properties
    }
}

/// What an advertisement carried (the CBAdvertisementData keys we use).
package struct BleAdvertisement: Sendable, Hashable {
    package var localName: String?
    package var manufacturerData: Data?
    package var serviceUUIDs: [BleUUID]
    /// The platform's own address of the peripheral, where it has one (BlueZ); nil on Apple.
    package var platformAddress: String?
    package init(localName: String?, manufacturerData: Data?, serviceUUIDs: [BleUUID], platformAddress: String? = nil) {
        self.localName = localName
        self.manufacturerData = manufacturerData
        self.serviceUUIDs = serviceUUIDs
        self.platformAddress = platformAddress
    }
}

/// An error a backend reports (CBError / CBATTError, or a BlueZ error).
package struct BleBackendError: Error, Sendable, Hashable, CustomStringConvertible {
    package enum Code: Sendable, Hashable {
        case unknown
        case notConnected
        case connectionTimeout
        case peripheralDisconnected
        case connectionFailed
        case operationCancelled
        case operationNotSupported
        case writeNotPermitted
        case readNotPermitted
        case insufficientAuthentication
        case insufficientEncryption
        case attribute(Int)
    }
    package let code: Code
    package let message: String
    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
    package var description: String { message }
}

/// Everything a backend reports, on the main actor, never during a call.
package enum BleBackendEvent: Sendable {
    case stateChanged(BleManagerState)
    case discovered(peripheral: UUID, advertisement: BleAdvertisement, rssi: Int)
    /// The platform could not start or continue the scan (BlueZ reports this; CoreBluetooth does not).
    case scanFailed(error: BleBackendError)
    case connected(peripheral: UUID)
    case failedToConnect(peripheral: UUID, error: BleBackendError?)
    /// `error` is nil when the app asked for the disconnect.
    case disconnected(peripheral: UUID, error: BleBackendError?)
    case servicesDiscovered(peripheral: UUID, services: [BleUUID], error: BleBackendError?)
    case characteristicsDiscovered(
        peripheral: UUID, service: BleUUID, characteristics: [BleCharacteristicInfo], error: BleBackendError?)
    case notificationStateUpdated(
        peripheral: UUID, characteristic: BleCharacteristicRef, isNotifying: Bool, error: BleBackendError?)
    /// A notification or a read result: the value, copied at the callback.
    case valueUpdated(peripheral: UUID, characteristic: BleCharacteristicRef, value: Data?, error: BleBackendError?)
    case writeCompleted(peripheral: UUID, characteristic: BleCharacteristicRef, error: BleBackendError?)
    case readyToSendWriteWithoutResponse(peripheral: UUID)
}

/// A Bluetooth central: scan, connect, discover, subscribe, read, write.
@MainActor
package protocol BleBackend: AnyObject {
    /// Receives every event; set before the first call.
    var eventHandler: (@MainActor (BleBackendEvent) -> Void)? { get set }
    /// The scheduler this backend's events and the client's timers share.
    var scheduler: any TimerScheduling { get }
    var state: BleManagerState { get }

    func scanForPeripherals(withServices services: [BleUUID])
    func stopScan()
    func connect(_ peripheral: UUID)
    /// Ends a connection or a connection attempt at once. Nothing more of it
    /// is delivered afterwards, not even `.disconnected`: the backend drops
    /// every callback of a cancelled connection (CoreBluetooth's own
    /// `didDisconnectPeripheral` included), so that a reconnect to the same
    /// peripheral can never be confused with the connection it replaces.
    func cancelPeripheralConnection(_ peripheral: UUID)
    func discoverServices(_ services: [BleUUID]?, for peripheral: UUID)
    func discoverCharacteristics(_ characteristics: [BleUUID]?, for service: BleUUID, of peripheral: UUID)
    func setNotifyValue(_ enabled: Bool, for characteristic: BleCharacteristicRef, of peripheral: UUID)
    func readValue(for characteristic: BleCharacteristicRef, of peripheral: UUID)
    func writeValue(_ data: Data, for characteristic: BleCharacteristicRef, of peripheral: UUID, type: BleWriteType)
    /// Whether a write without response would be accepted now (flow control).
    func canSendWriteWithoutResponse(_ peripheral: UUID) -> Bool
    /// The largest value one write of `type` carries (read at write time: the MTU can grow).
    func maximumWriteValueLength(for type: BleWriteType, of peripheral: UUID) -> Int
}
