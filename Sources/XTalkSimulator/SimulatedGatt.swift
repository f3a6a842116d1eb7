import XTalkBleSdk

/// The GATT layout the simulated device exposes (PROTOCOL.md section 2),
/// written out here on purpose rather than taken from the SDK: the device is
/// an independent implementation, so a typo in the SDK's UUIDs fails the
/// client's tests against the simulator instead of passing them.
package enum SimulatedGatt {
    package static let passthroughService = BleUUID("6E58A100-3C1F-4B7D-9F3A-5854414C4B00")
    package static let passthroughTX = BleUUID("6E58A101-3C1F-4B7D-9F3A-5854414C4B00")
    package static let passthroughRX = BleUUID("6E58A102-3C1F-4B7D-9F3A-5854414C4B00")
    package static let batteryService = BleUUID("180F")
    package static let batteryLevel = BleUUID("2A19")
    package static let deviceInformationService = BleUUID("180A")
    package static let firmwareRevision = BleUUID("2A26")
    package static let hardwareRevision = BleUUID("2A27")
    /// Nordic's secure DFU service (a firmware-update service that appears at run time).
    package static let dfuService = BleUUID("FE59")
}

/// A service of the simulated device's GATT database.
public enum XTalkSimulatedGattService: Sendable, Hashable {
    case passthrough
    case battery
    case deviceInformation
    /// A firmware-update service (Nordic DFU, FE59), which the SDK never uses.
    case dfu

    var uuid: BleUUID {
        switch self {
        case .passthrough: SimulatedGatt.passthroughService
        case .battery: SimulatedGatt.batteryService
        case .deviceInformation: SimulatedGatt.deviceInformationService
        case .dfu: SimulatedGatt.dfuService
        }
    }
}
