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
    /// OneKey's profile (*iOS: Connect via Bluetooth*): service, write and notify characteristics.
    package static let oneKeyService = BleUUID("00000001-0000-1000-8000-00805F9B34FB")
    package static let oneKeyWrite = BleUUID("00000002-0000-1000-8000-00805F9B34FB")
    package static let oneKeyNotify = BleUUID("00000003-0000-1000-8000-00805F9B34FB")
}

/// Which device family's GATT profile (and firmware) a simulated device has.
public enum XTalkSimulatedProfile: Sendable, Hashable {
    /// An xTalk radio: the passthrough service, the AT firmware (PROTOCOL.md).
    case xTalk
    /// A device with OneKey's BLE profile (service 0001, write 0002, notify
    /// 0003) whose firmware notifies every written packet back unchanged,
    /// split at its notification size and never merged with another: an echo
    /// device for the low-level bridge (*iOS: Connect via Bluetooth*).
    case oneKeyEcho
}

extension XTalkSimulatedGatt {
    /// The passthrough's service, write (TX) and notify (RX) characteristics in this profile.
    package var passthroughServiceUUID: BleUUID {
        profile == .xTalk ? SimulatedGatt.passthroughService : SimulatedGatt.oneKeyService
    }
    package var txUUID: BleUUID { profile == .xTalk ? SimulatedGatt.passthroughTX : SimulatedGatt.oneKeyWrite }
    package var rxUUID: BleUUID { profile == .xTalk ? SimulatedGatt.passthroughRX : SimulatedGatt.oneKeyNotify }
}

/// A service of the simulated device's GATT database.
public enum XTalkSimulatedGattService: Sendable, Hashable {
    /// xTalk's passthrough service (TX and RX).
    case passthrough
    /// The Battery service (180F).
    case battery
    /// The Device Information service (180A).
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
