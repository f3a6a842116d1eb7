import Foundation

// The Bluetooth values the core reasons about: UUIDs, radio states,
// characteristic properties, write types, advertisements, restored
// peripherals (GATT profiles are in GattProfile.swift). The core owns them;
// the backend seam (Backends/BleBackend.swift) carries them between a
// Bluetooth stack and the core.

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

    /// The shortest form: 4 hex digits for a UUID on the Bluetooth base UUID
    /// (SIG services and characteristics, as iOS reports them), else the full form.
    package var shortestForm: String {
        guard uuidString.hasPrefix("0000"), uuidString.hasSuffix("-0000-1000-8000-00805F9B34FB") else {
            return uuidString
        }
        return String(uuidString.dropFirst(4).prefix(4))
    }

    package var description: String {
        if uuidString.hasSuffix("-0000-1000-8000-00805F9B34FB") && uuidString.hasPrefix("0000") {
            return String(uuidString.dropFirst(4).prefix(4))
        }
        return uuidString
    }
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

/// ATT's limits on one value.
package enum BleAttribute {
    /// The longest attribute value (Bluetooth Core, Vol 3, Part F, 3.2.9).
    package static let maximumValueLength = 512

    /// The most one packet (a write without response, a notification) carries
    /// at `mtu`: MTU − 3, and never more than an attribute value (an MTU of
    /// 517, BlueZ's default request, would otherwise allow 514).
    package static func packetPayload(mtu: Int) -> Int {
        min(mtu - 3, maximumValueLength)
    }
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
    /// The platform's own address of the peripheral, where it has one (BlueZ would); nil on Apple.
    package var platformAddress: String?
    package init(localName: String?, manufacturerData: Data?, serviceUUIDs: [BleUUID], platformAddress: String? = nil) {
        self.localName = localName
        self.manufacturerData = manufacturerData
        self.serviceUUIDs = serviceUUIDs
        self.platformAddress = platformAddress
    }
}

/// A peripheral the platform kept for the app while it was not running (state restoration).
package struct BleRestoredPeripheral: Sendable, Hashable {
    package let id: UUID
    package let name: String?
    /// Still connected (otherwise a connection attempt was pending).
    package let isConnected: Bool
    package init(id: UUID, name: String?, isConnected: Bool) {
        self.id = id
        self.name = name
        self.isConnected = isConnected
    }
}
