import Foundation

/// The backend of a platform without a Bluetooth backend (yet): it is
/// `.unsupported` from the start, so scanning publishes
/// `.failed(.bluetoothUnavailable)` at once.
@MainActor
final class UnavailableBackend: BleBackend {
    var eventHandler: (@MainActor (BleBackendEvent) -> Void)?
    let scheduler: any TimerScheduling
    let state: BleManagerState = .unsupported

    init(scheduler: any TimerScheduling) {
        self.scheduler = scheduler
    }

    func activate(showPowerAlert: Bool, restoreIdentifier: String?) {}
    func scanForPeripherals(withServices services: [BleUUID]) {}
    func stopScan() {}
    func connect(_ peripheral: UUID) {}
    func cancelPeripheralConnection(_ peripheral: UUID) {}
    func discoverServices(_ services: [BleUUID]?, for peripheral: UUID) {}
    func discoverCharacteristics(_ characteristics: [BleUUID]?, for service: BleUUID, of peripheral: UUID) {}
    func setNotifyValue(_ enabled: Bool, for characteristic: BleCharacteristicRef, of peripheral: UUID) {}
    func readValue(for characteristic: BleCharacteristicRef, of peripheral: UUID) {}
    func writeValue(_ data: Data, for characteristic: BleCharacteristicRef, of peripheral: UUID, type: BleWriteType) {}
    func canSendWriteWithoutResponse(_ peripheral: UUID) -> Bool { false }
    func maximumWriteValueLength(for type: BleWriteType, of peripheral: UUID) -> Int { 0 }
}

/// The platform's Bluetooth backend for `XTalkBleClient()`.
@MainActor
package enum PlatformBackend {
    /// Makes a backend; the simulator provides one to stand in for the platform.
    package typealias Provider = @MainActor @Sendable () -> any BleBackend

    /// Set for the duration of a task (and its children) to make
    /// `XTalkBleClient()` use another backend, e.g. a simulated environment.
    /// Task-local, so there is no global state.
    @TaskLocal package static var override: Provider?

    package static func make() -> any BleBackend {
        if let override { return override() }
        let scheduler = ClockTimerScheduler(clock: ContinuousClock())
        #if os(Linux)
            return BlueZBackend(scheduler: scheduler)
        #else
            return CoreBluetoothBackend(scheduler: scheduler)
        #endif
    }
}
