import Foundation

/// An error as the JavaScript SDK understands it: the numeric
/// `HardwareErrorCode` (OneKey's packages/shared/src/HardwareError.ts) and
/// words. The transport reads `message` for connect failures and `reason`
/// for send failures: hosts give both the same text.
package struct BridgeError: Error, Sendable, Hashable, CustomStringConvertible {
    package enum Code: Int, Sendable, Hashable, CaseIterable {
        case scan = 700
        case permission = 701
        case connected = 704
        case deviceNotBonded = 705
        case serviceNotFound = 706
        case characteristicNotFound = 707
        case characteristicNotify = 709
        case writeCharacteristic = 710
        case timeout = 713
        case notifyChangeFailure = 716
        case peerRemovedPairing = 719
        case deviceDisconnected = 720
        case poweredOff = 721
        case unsupported = 722
        case bondInvalid = 724
        case lowlevelTransportConnect = 900
    }

    package let code: Code
    package let message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "\(code.rawValue): \(message)" }
}
