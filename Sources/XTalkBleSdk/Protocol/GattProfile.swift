import Foundation

/// A device's GATT layout as a central uses it: what a scan looks for, the
/// passthrough (one service with a characteristic the central writes and one
/// that notifies, both required), optional services whose characteristics the
/// central reads, and where an advertisement carries the device's address.
///
/// The connection machine, the backend seam and the backends take a profile
/// as a value and assume nothing else about the device: xTalk's radio is one
/// instance (`GattProfile.xTalk`); another device family (OneKey's hardware
/// wallets, for the seed-004 bridge) is another.
package struct GattProfile: Sendable, Hashable {
    /// The passthrough: a byte pipe over two characteristics of one service.
    package struct Passthrough: Sendable, Hashable {
        package var service: BleUUID
        /// Written by the central (with or without response, as its properties allow).
        package var write: BleUUID
        /// Notifies the central (notify or indicate).
        package var notify: BleUUID

        package init(service: BleUUID, write: BleUUID, notify: BleUUID) {
            self.service = service
            self.write = write
            self.notify = notify
        }

        package var writeRef: BleCharacteristicRef { BleCharacteristicRef(service: service, characteristic: write) }
        package var notifyRef: BleCharacteristicRef { BleCharacteristicRef(service: service, characteristic: notify) }
    }

    /// A service the device may lack: its absence never blocks the passthrough.
    package struct OptionalService: Sendable, Hashable {
        package var service: BleUUID
        /// The readable characteristics the central uses.
        package var characteristics: [BleUUID]

        package init(service: BleUUID, characteristics: [BleUUID]) {
            self.service = service
            self.characteristics = characteristics
        }
    }

    /// Manufacturer data that carries the device's address: a little-endian
    /// company identifier, a version byte, then six address bytes, most
    /// significant first.
    package struct AdvertisedAddress: Sendable, Hashable {
        package var companyID: UInt16
        package var version: UInt8

        package init(companyID: UInt16, version: UInt8) {
            self.companyID = companyID
            self.version = version
        }
    }

    /// The services a scan filters on.
    package var scanServices: [BleUUID]
    package var passthrough: Passthrough
    package var optionalServices: [OptionalService]
    package var advertisedAddress: AdvertisedAddress?

    package init(
        scanServices: [BleUUID]? = nil, passthrough: Passthrough, optionalServices: [OptionalService] = [],
        advertisedAddress: AdvertisedAddress? = nil
    ) {
        self.scanServices = scanServices ?? [passthrough.service]
        self.passthrough = passthrough
        self.optionalServices = optionalServices
        self.advertisedAddress = advertisedAddress
    }

    /// Every service a connection discovers: the passthrough's first.
    package var services: [BleUUID] { [passthrough.service] + optionalServices.map(\.service) }

    /// Every characteristic of the optional services.
    package var optionalCharacteristics: Set<BleUUID> { Set(optionalServices.flatMap(\.characteristics)) }

    /// The optional service `uuid`, if the profile has it.
    package func optionalService(_ uuid: BleUUID) -> OptionalService? {
        optionalServices.first { $0.service == uuid }
    }

    /// The platform's own address, uppercased, where it supplies one (BlueZ:
    /// the address `bluetoothctl` shows and connects to); else (CoreBluetooth
    /// hides addresses) the one the advertisement's manufacturer data carries
    /// in this profile's format (six bytes as uppercase hex pairs joined by colons).
    package func address(from advertisement: BleAdvertisement) -> String? {
        if let platform = advertisement.platformAddress { return platform.uppercased() }
        if let format = advertisedAddress, let data = advertisement.manufacturerData, data.count >= 9 {
            let bytes = Array(data)
            let company = UInt16(bytes[0]) | UInt16(bytes[1]) << 8
            if company == format.companyID && bytes[2] == format.version {
                return bytes[3..<9].map { Hex.encode([$0]) }.joined(separator: ":")
            }
        }
        return nil
    }
}

/// xTalk's GATT layout (PROTOCOL.md section 2).
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

extension GattProfile {
    /// The xTalk radio: the passthrough (TX written, RX notifying), the
    /// battery and device-information services for device control, and the
    /// address in manufacturer data.
    package static let xTalk = GattProfile(
        passthrough: Passthrough(
            service: XTalkGatt.passthroughService, write: XTalkGatt.passthroughTX, notify: XTalkGatt.passthroughRX),
        optionalServices: [
            OptionalService(service: XTalkGatt.batteryService, characteristics: [XTalkGatt.batteryLevel]),
            OptionalService(
                service: XTalkGatt.deviceInformationService,
                characteristics: [XTalkGatt.firmwareRevision, XTalkGatt.hardwareRevision]),
        ],
        advertisedAddress: AdvertisedAddress(
            companyID: XTalkGatt.manufacturerCompanyID, version: XTalkGatt.manufacturerDataVersion)
    )
}
