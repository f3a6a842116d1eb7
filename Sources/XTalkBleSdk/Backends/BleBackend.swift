import Foundation

// The one seam between the client and a Bluetooth stack, shaped after
// CoreBluetooth's central role so that a backend maps onto it one call for one
// call (CoreBluetooth on Apple platforms, BlueZ over D-Bus on Linux). The
// simulator is a backend too.
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

/// An error a backend reports (CBError / CBATTError, or another stack's error).
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
        /// The device no longer has this phone's pairing (CBError 14).
        case peerRemovedPairing
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
    /// State restoration: what the platform kept for the app (first, before any state).
    case restored([BleRestoredPeripheral])
    case stateChanged(BleManagerState)
    case discovered(peripheral: UUID, advertisement: BleAdvertisement, rssi: Int)
    /// The platform could not start or continue the scan (CoreBluetooth never reports this; BlueZ would).
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

extension BleBackend {
    package var unavailableReason: String? { nil }
}

/// A backend whose model lives in another object that does not keep itself
/// alive (the simulator's central, owned by its environment): the client keeps
/// `keptAlive` as long as the client exists, so an app may drop its own
/// reference to that object.
@MainActor
package protocol BleBackendKeepingAlive {
    var keptAlive: AnyObject { get }
}

/// A Bluetooth central: scan, connect, discover, subscribe, read, write.
@MainActor
package protocol BleBackend: AnyObject {
    /// Receives every event; set before the first call.
    var eventHandler: (@MainActor (BleBackendEvent) -> Void)? { get set }
    /// The scheduler this backend's events and the client's timers share.
    var scheduler: any TimerScheduling { get }
    var state: BleManagerState { get }
    /// Why the state is not `.poweredOn`, in words, where the platform says
    /// (BlueZ: no system bus, bluetoothd not running, no adapter, powered off).
    var unavailableReason: String? { get }

    /// The app needs Bluetooth now (its first `startScan()` or `connect`). A
    /// backend whose platform asks the user for permission creates its manager
    /// here, not earlier, so that the system prompt (and, with
    /// `showPowerAlert`, the "turn on Bluetooth" alert) appears when the user
    /// acts. The state is reported later, never from inside this call. Calls
    /// after the first do nothing. With a `restoreIdentifier` the platform
    /// may hand back the connections it kept while the app was not running
    /// (`.restored`, before the first state).
    func activate(showPowerAlert: Bool, restoreIdentifier: String?)

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
