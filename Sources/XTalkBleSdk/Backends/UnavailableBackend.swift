import Foundation

/// The backend of a platform without a Bluetooth backend (yet): it reports
/// `.unsupported`, so scanning publishes `.failed(.bluetoothUnavailable)`.
@MainActor
final class UnavailableBackend: BleBackend {
    var eventHandler: (@MainActor (BleBackendEvent) -> Void)?
    let scheduler: any TimerScheduling
    private(set) var state: BleManagerState = .unknown

    init(scheduler: any TimerScheduling) {
        self.scheduler = scheduler
        // Like a real central, the state is reported shortly after creation.
        _ = scheduler.schedule(after: .zero) { [weak self] in
            guard let self else { return }
            self.state = .unsupported
            self.eventHandler?(.stateChanged(.unsupported))
        }
    }

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
enum PlatformBackend {
    static func make() -> any BleBackend {
        // CoreBluetooth (Apple) and BlueZ (Linux) backends plug in here.
        UnavailableBackend(scheduler: ClockTimerScheduler(clock: ContinuousClock()))
    }
}
