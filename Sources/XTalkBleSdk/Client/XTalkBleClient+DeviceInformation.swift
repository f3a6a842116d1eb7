import Foundation

/// Reads of the battery and device-information characteristics in flight.
///
/// Concurrent queries of the same characteristic share one platform read;
/// every waiter resumes exactly once: with the value, or nil on failure,
/// timeout, cancellation or the end of the connection.
@MainActor
struct DeviceQueries {
    private struct Waiter {
        let characteristic: BleCharacteristicRef
        let continuation: CheckedContinuation<Data?, Never>
        let timer: TimerToken
    }

    private var waiters: [UInt64: Waiter] = [:]
    private var nextID: UInt64 = 0

    mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    func isReading(_ characteristic: BleCharacteristicRef) -> Bool {
        waiters.values.contains { $0.characteristic == characteristic }
    }

    mutating func add(
        _ id: UInt64, _ characteristic: BleCharacteristicRef,
        _ continuation: CheckedContinuation<Data?, Never>, timer: TimerToken
    ) {
        waiters[id] = Waiter(characteristic: characteristic, continuation: continuation, timer: timer)
    }

    /// Resumes one waiter with nil (timeout or cancellation), if still waiting.
    mutating func giveUp(_ id: UInt64, client: XTalkBleClient) {
        guard let waiter = waiters.removeValue(forKey: id) else { return }
        client.scheduler.cancel(waiter.timer)
        waiter.continuation.resume(returning: nil)
    }

    /// A read result (nil on error) resumes every waiter of that characteristic.
    mutating func valueArrived(for characteristic: BleCharacteristicRef, value: Data?, client: XTalkBleClient) {
        for (id, waiter) in waiters where waiter.characteristic == characteristic {
            waiters[id] = nil
            client.scheduler.cancel(waiter.timer)
            waiter.continuation.resume(returning: value)
        }
    }

    /// The connection ended: every waiter gets nil.
    mutating func cancelAll(client: XTalkBleClient) {
        let all = waiters.values
        waiters.removeAll()
        for waiter in all {
            client.scheduler.cancel(waiter.timer)
            waiter.continuation.resume(returning: nil)
        }
    }
}

extension XTalkBleClient {
    static let batteryLevel = BleCharacteristicRef(
        service: XTalkGatt.batteryService, characteristic: XTalkGatt.batteryLevel)
    static let firmwareRevision = BleCharacteristicRef(
        service: XTalkGatt.deviceInformationService, characteristic: XTalkGatt.firmwareRevision)
    static let hardwareRevision = BleCharacteristicRef(
        service: XTalkGatt.deviceInformationService, characteristic: XTalkGatt.hardwareRevision)

    /// The battery level exactly as the device holds it (not rescaled), or nil
    /// when `deviceControlReady` is false, on failure or after `timeoutMs`.
    public func fetchBatteryLevel(timeoutMs: Int = 2_000) async -> Int? {
        guard let value = await read(Self.batteryLevel, timeoutMs: timeoutMs), value.count == 1 else { return nil }
        return Int(value[value.startIndex])
    }

    /// The BLE firmware version (Firmware Revision String), trimmed; nil as `fetchBatteryLevel`.
    public func fetchBleFirmwareVersion(timeoutMs: Int = 2_000) async -> String? {
        await read(Self.firmwareRevision, timeoutMs: timeoutMs).map(Self.revisionString)
    }

    /// The hardware version (Hardware Revision String), trimmed; nil as `fetchBatteryLevel`.
    public func fetchHardwareVersion(timeoutMs: Int = 2_000) async -> String? {
        await read(Self.hardwareRevision, timeoutMs: timeoutMs).map(Self.revisionString)
    }

    /// UTF-8 (invalid bytes replaced), trimmed of whitespace and NUL characters.
    static func revisionString(_ data: Data) -> String {
        String(decoding: data, as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines.union(CharacterSet(charactersIn: "\0")))
    }

    private func read(_ characteristic: BleCharacteristicRef, timeoutMs: Int) async -> Data? {
        guard !isTornDown, deviceControlReady, timeoutMs > 0, !Task.isCancelled,
            let peripheral = machine.linkPeripheral
        else { return nil }
        let id = deviceQueries.makeID()
        return await resumingOnMainQueue {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Data?, Never>) in
                    let shared = deviceQueries.isReading(characteristic)
                    let timer = scheduler.schedule(after: .milliseconds(timeoutMs)) { [weak self] in
                        guard let self else { return }
                        self.deviceQueries.giveUp(id, client: self)
                    }
                    deviceQueries.add(id, characteristic, continuation, timer: timer)
                    if !shared { backend.readValue(for: characteristic, of: peripheral) }
                }
            } onCancel: {
                Task { @MainActor [weak self] in
                    guard let self else { return }
                    self.deviceQueries.giveUp(id, client: self)
                }
            }
        }
    }
}
