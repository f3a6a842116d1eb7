import Foundation
import XTalkBleSdk

/// A backend that passes every call and event through to another one, with
/// hooks to watch the events and to answer the flow-control questions
/// itself: for benchmarks and tests that need to see what a platform driver
/// sees, or a platform that behaves in a way the simulator does not (a link
/// that takes nothing).
package final class InterceptingBackend: BleBackend {
    package let inner: any BleBackend
    /// The client's handler (the seam's), called after `onEvent`.
    package var eventHandler: (@MainActor (BleBackendEvent) -> Void)?
    /// Sees every event of `inner` before the client does.
    package var onEvent: (@MainActor (BleBackendEvent) -> Void)?
    /// When set, answers `canSendWriteWithoutResponse` (nil: ask `inner`).
    package var canSendOverride: (@MainActor (UUID) -> Bool?)?
    /// When set, answers `maximumWriteValueLength` (nil: ask `inner`).
    package var maximumWriteLengthOverride: (@MainActor (BleWriteType, UUID) -> Int?)?

    package init(_ inner: any BleBackend) {
        self.inner = inner
        inner.eventHandler = { [unowned self] event in
            onEvent?(event)
            eventHandler?(event)
        }
    }

    package var scheduler: any TimerScheduling { inner.scheduler }
    package var state: BleManagerState { inner.state }
    package func activate(showPowerAlert: Bool, restoreIdentifier: String?) {
        inner.activate(showPowerAlert: showPowerAlert, restoreIdentifier: restoreIdentifier)
    }
    package func scanForPeripherals(withServices services: [BleUUID]) {
        inner.scanForPeripherals(withServices: services)
    }
    package func stopScan() { inner.stopScan() }
    package func connect(_ peripheral: UUID) { inner.connect(peripheral) }
    package func cancelPeripheralConnection(_ peripheral: UUID) { inner.cancelPeripheralConnection(peripheral) }
    package func discoverServices(_ services: [BleUUID]?, for peripheral: UUID) {
        inner.discoverServices(services, for: peripheral)
    }
    package func discoverCharacteristics(_ characteristics: [BleUUID]?, for service: BleUUID, of peripheral: UUID) {
        inner.discoverCharacteristics(characteristics, for: service, of: peripheral)
    }
    package func setNotifyValue(_ enabled: Bool, for characteristic: BleCharacteristicRef, of peripheral: UUID) {
        inner.setNotifyValue(enabled, for: characteristic, of: peripheral)
    }
    package func readValue(for characteristic: BleCharacteristicRef, of peripheral: UUID) {
        inner.readValue(for: characteristic, of: peripheral)
    }
    package func writeValue(
        _ data: Data, for characteristic: BleCharacteristicRef, of peripheral: UUID, type: BleWriteType
    ) {
        inner.writeValue(data, for: characteristic, of: peripheral, type: type)
    }
    package func canSendWriteWithoutResponse(_ peripheral: UUID) -> Bool {
        canSendOverride?(peripheral) ?? inner.canSendWriteWithoutResponse(peripheral)
    }
    package func maximumWriteValueLength(for type: BleWriteType, of peripheral: UUID) -> Int {
        maximumWriteLengthOverride?(type, peripheral) ?? inner.maximumWriteValueLength(for: type, of: peripheral)
    }
}
