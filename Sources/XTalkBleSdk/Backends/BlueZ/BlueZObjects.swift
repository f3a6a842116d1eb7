import Foundation
import XTalkDBus

// BlueZ's object tree as the central sees it (BlueZ's doc/org.bluez.*.rst):
// adapters, devices, GATT services and characteristics, kept from
// GetManagedObjects, InterfacesAdded/Removed and PropertiesChanged. A value
// type that does no I/O, plus the translations between BlueZ's words and the
// seam's (flags, error names, disconnect reasons, addresses).

package enum BlueZInterface {
    static let adapter = "org.bluez.Adapter1"
    static let device = "org.bluez.Device1"
    static let service = "org.bluez.GattService1"
    static let characteristic = "org.bluez.GattCharacteristic1"
    static let properties = "org.freedesktop.DBus.Properties"
    static let objectManager = "org.freedesktop.DBus.ObjectManager"
}

package struct BlueZObjectTree: Sendable {
    /// Object path → interface → properties.
    package private(set) var objects: [String: [String: [String: DBusValue]]] = [:]

    package init() {}

    /// Replaces everything with a GetManagedObjects reply (`a{oa{sa{sv}}}`).
    package mutating func load(managedObjects: DBusValue) {
        objects = [:]
        for (path, interfaces) in managedObjects.dictionaryEntries ?? [] {
            guard let path = path.stringValue else { continue }
            add(path: path, interfaces: interfaces)
        }
    }

    /// InterfacesAdded(o, a{sa{sv}}).
    package mutating func add(path: String, interfaces: DBusValue) {
        for (name, properties) in interfaces.dictionaryEntries ?? [] {
            guard let name = name.stringValue else { continue }
            objects[path, default: [:]][name, default: [:]].merge(properties.propertyMapValue ?? [:]) { $1 }
        }
    }

    /// InterfacesRemoved(o, as).
    package mutating func remove(path: String, interfaces: [String]) {
        for name in interfaces { objects[path]?[name] = nil }
        if objects[path]?.isEmpty == true { objects[path] = nil }
    }

    /// PropertiesChanged(s, a{sv}, as), for an object we know.
    package mutating func change(path: String, interface: String, changed: [String: DBusValue], invalidated: [String]) {
        guard objects[path]?[interface] != nil else { return }
        objects[path]?[interface]?.merge(changed) { $1 }
        for name in invalidated { objects[path]?[interface]?[name] = nil }
    }

    package func properties(_ path: String, _ interface: String) -> [String: DBusValue]? {
        objects[path]?[interface]
    }

    /// The adapters' paths, in name order (hci0 first).
    package var adapters: [String] {
        objects.filter { $0.value[BlueZInterface.adapter] != nil }.keys.sorted {
            $0.compare($1, options: .numeric) == .orderedAscending  // hci2 before hci10
        }
    }

    /// The devices of `adapter`.
    package func devices(of adapter: String) -> [String] {
        objects.filter { $0.value[BlueZInterface.device]?["Adapter"]?.stringValue == adapter }.keys.sorted()
    }

    /// A device's GATT services: (path, UUID), in handle (path) order.
    package func services(of device: String) -> [(path: String, uuid: BleUUID)] {
        objects.compactMap { path, interfaces in
            guard let service = interfaces[BlueZInterface.service], service["Device"]?.stringValue == device,
                let uuid = service["UUID"]?.stringValue
            else { return nil }
            return (path, BleUUID(uuid))
        }.sorted { $0.path < $1.path }
    }

    /// A service's characteristics: (path, UUID, properties), in handle order.
    package func characteristics(of service: String) -> [(path: String, info: BleCharacteristicInfo)] {
        objects.compactMap { path, interfaces in
            guard let characteristic = interfaces[BlueZInterface.characteristic],
                characteristic["Service"]?.stringValue == service, let uuid = characteristic["UUID"]?.stringValue
            else { return nil }
            let flags = characteristic["Flags"]?.stringArrayValue ?? []
            return (path, BleCharacteristicInfo(uuid: BleUUID(uuid), properties: BlueZ.properties(flags: flags)))
        }.sorted { $0.path < $1.path }
    }

    /// The path of a characteristic of a device, by service and characteristic UUID (the first of each).
    package func characteristicPath(_ reference: BleCharacteristicRef, of device: String) -> String? {
        guard let service = services(of: device).first(where: { $0.uuid == reference.service }) else { return nil }
        return characteristics(of: service.path).first { $0.info.uuid == reference.characteristic }?.path
    }

    /// The characteristic at `path` as the seam names it, with its device.
    package func reference(ofCharacteristic path: String) -> (device: String, reference: BleCharacteristicRef)? {
        guard let characteristic = objects[path]?[BlueZInterface.characteristic],
            let uuid = characteristic["UUID"]?.stringValue, let servicePath = characteristic["Service"]?.stringValue,
            let service = objects[servicePath]?[BlueZInterface.service],
            let serviceUUID = service["UUID"]?.stringValue, let device = service["Device"]?.stringValue
        else { return nil }
        return (device, BleCharacteristicRef(service: BleUUID(serviceUUID), characteristic: BleUUID(uuid)))
    }
}

/// Translations between BlueZ and the seam.
package enum BlueZ {
    /// GattCharacteristic1.Flags → the properties the core reasons about.
    package static func properties(flags: [String]) -> BleCharacteristicProperties {
        var properties: BleCharacteristicProperties = []
        for flag in flags {
            switch flag {
            case "read", "encrypt-read", "encrypt-authenticated-read", "secure-read": properties.insert(.read)
            case "write-without-response": properties.insert(.writeWithoutResponse)
            case "write", "encrypt-write", "encrypt-authenticated-write", "secure-write", "reliable-write":
                properties.insert(.write)
            case "notify": properties.insert(.notify)
            case "indicate": properties.insert(.indicate)
            default: break
            }
        }
        return properties
    }

    /// A Device1's advertisement as the seam carries it. Manufacturer data is
    /// `a{qv}` in BlueZ; the seam (like CoreBluetooth) carries the company id,
    /// little-endian, followed by the bytes (the first entry, when there are several).
    package static func advertisement(_ device: [String: DBusValue]) -> BleAdvertisement {
        var manufacturerData: Data?
        if let (company, value) = device["ManufacturerData"]?.dictionaryEntries?.first,
            let id = company.integerValue, let bytes = value.bytesValue
        {
            manufacturerData = Data([UInt8(id & 0xFF), UInt8(id >> 8 & 0xFF)]) + bytes
        }
        return BleAdvertisement(
            localName: device["Name"]?.stringValue, manufacturerData: manufacturerData,
            serviceUUIDs: (device["UUIDs"]?.stringArrayValue ?? []).map(BleUUID.init),
            platformAddress: device["Address"]?.stringValue)
    }

    /// A stable identifier for a device address (the seam names peripherals
    /// by UUID; BlueZ by address): the address's 12 hex digits after a fixed prefix.
    package static func identifier(address: String) -> UUID? {
        let hex = address.uppercased().filter { $0 != ":" }
        guard hex.count == 12, hex.allSatisfy(\.isHexDigit) else { return nil }
        return UUID(uuidString: "B1E2B1E2-0000-4000-8000-\(hex)")
    }

    /// A BlueZ error reply as the seam's error, in words.
    package static func error(_ error: DBusError, doing action: String) -> BleBackendError {
        let detail = error.message.isEmpty ? "" : " (\(error.message))"
        switch error.name {
        case "org.bluez.Error.NotConnected":
            return BleBackendError(.notConnected, "\(action): the device is not connected\(detail)")
        case "org.bluez.Error.NotPermitted":
            return BleBackendError(.writeNotPermitted, "\(action): BlueZ does not permit it\(detail)")
        case "org.bluez.Error.NotAuthorized", "org.bluez.Error.AuthenticationFailed",
            "org.bluez.Error.AuthenticationRejected", "org.bluez.Error.AuthenticationCanceled",
            "org.bluez.Error.AuthenticationTimeout":
            return BleBackendError(.insufficientAuthentication, "\(action): pairing or authorization failed\(detail)")
        case "org.bluez.Error.NotSupported":
            return BleBackendError(.operationNotSupported, "\(action): not supported by the device\(detail)")
        case "org.freedesktop.DBus.Error.NoReply":
            return BleBackendError(.connectionTimeout, "\(action): BlueZ did not answer\(detail)")
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.Disconnected":
            return BleBackendError(.unknown, "\(action): BlueZ is not running\(detail)")
        case "org.bluez.Error.Failed" where error.message.localizedCaseInsensitiveContains("not connected"):
            return BleBackendError(.notConnected, "\(action): the device is not connected\(detail)")
        default:
            let name = error.name.replacingOccurrences(of: "org.bluez.Error.", with: "")
            return BleBackendError(.connectionFailed, "\(action) failed: \(name)\(detail)")
        }
    }

    /// Device1.Disconnected's reason (BlueZ 5.82+: `org.bluez.Reason.*`) as the seam's link-loss error.
    package static func linkLoss(reason: String?, message: String?) -> BleBackendError {
        let detail = message.map { $0.isEmpty ? "" : " (\($0))" } ?? ""
        switch reason {
        case "org.bluez.Reason.Timeout":
            return BleBackendError(.connectionTimeout, "the link timed out: the device went out of range\(detail)")
        case "org.bluez.Reason.Remote":
            return BleBackendError(.peripheralDisconnected, "the device ended the link\(detail)")
        case "org.bluez.Reason.Local":
            return BleBackendError(.peripheralDisconnected, "the link was ended on this computer\(detail)")
        case "org.bluez.Reason.Authentication":
            return BleBackendError(.insufficientAuthentication, "the link ended: authentication failed\(detail)")
        case "org.bluez.Reason.Suspend":
            return BleBackendError(.peripheralDisconnected, "the link ended: the computer suspended\(detail)")
        case let other?:
            return BleBackendError(.peripheralDisconnected, "the link ended (\(other))\(detail)")
        case nil:
            return BleBackendError(.peripheralDisconnected, "the link ended")
        }
    }
}
