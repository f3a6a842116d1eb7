// The lifecycle example of the customer's BLE guide (seed 001, section 1),
// exactly as written there except that `import Combine` is left out: this
// file proves the example compiles against the SDK, and SeedExampleTests runs it.

import Foundation
import XTalkBleSdk

@MainActor
final class DeviceModel: ObservableObject {
    let ble = XTalkBleClient()
    private var eventTask: Task<Void, Never>?

    func start() {
        let stream = ble.events
        eventTask = Task { @MainActor [weak self] in
            for await event in stream {
                guard !Task.isCancelled else { break }
                self?.handle(event)
            }
        }
        ble.startScan()
    }

    func connect(_ result: XTalkScanResult) {
        ble.stopScan()
        ble.connect(id: result.id)
    }

    func waitUntilAtReady() async throws {
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while !ble.atReady {
            try Task.checkCancellation()
            guard ContinuousClock.now < deadline else { throw XTalkBleError.timeout }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    func stop() {
        eventTask?.cancel()
        eventTask = nil
        ble.teardown()
    }

    private func handle(_ event: XTalkBleEvent) {
        switch event {
        case .connectionStateChanged(let state):
            print("BLE state: \(state)")
        case .atLine(let line):
            print("AT: \(line)")
        case .sendFinished:
            print("RF send finished")
        case .diPayload(let data, let meta):
            print("RX \(data.count) bytes, RSSI: \(meta.rssi.map(String.init) ?? "-")")
        case .crcError(_, let line):
            print("CRC error: \(line)")
        case .passthroughRaw(let data):
            print("Raw passthrough: \(data.count) bytes")
        }
    }
}

// Section 2 and 3 snippets of the same guide, as methods of a model.
@MainActor
final class Seed001Snippets {
    let ble: XTalkBleClient

    init(ble: XTalkBleClient) {
        self.ble = ble
    }

    func selectStrongestDevice() {
        guard let selected = ble.scanResults.max(by: { $0.rssi < $1.rssi }) else { return }
        ble.stopScan()
        ble.connect(id: selected.id)
    }

    func atAndDeviceInformation(payload: Data) async throws -> ([String], Int?, String?, String?) {
        let lines = try await ble.runAtCommand(
            "AT+VER?",
            timeoutMs: 2_000,
            log: true,
            responseMode: .automatic
        )

        try await ble.sendRfPayload(payload, timeoutMs: 5_000)

        async let battery = ble.fetchBatteryLevel()
        async let firmware = ble.fetchBleFirmwareVersion()
        async let hardware = ble.fetchHardwareVersion()
        let deviceInfo = await (battery, firmware, hardware)
        return (lines, deviceInfo.0, deviceInfo.1, deviceInfo.2)
    }

    func exclusive() async throws -> ([String], [String]) {
        let values = try await ble.withExclusiveAtSession { session in
            let frequency = try await session.runAtCommand("AT+FREQ?")
            let version = try await session.runAtCommand("AT+VER?")
            return (frequency, version)
        }
        return values
    }
}
