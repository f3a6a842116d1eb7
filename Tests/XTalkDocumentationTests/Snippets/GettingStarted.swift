// The Swift samples of the Getting started article (XTalkBleSdk.docc),
// verbatim: DocumentationSnippetTests checks that every sample is here.
#if canImport(Combine)
    import Combine
#endif
import Foundation
import XTalkBleSdk
import XTalkSimulator

@MainActor
final class RadioModel: ObservableObject {
    let ble = XTalkBleClient()
    @Published private(set) var lines: [String] = []
    private var eventTask: Task<Void, Never>?

    func start() {
        let stream = ble.events
        eventTask = Task { @MainActor [weak self] in
            for await event in stream {
                if case .atLine(let line) = event { self?.lines.append(line) }
            }
        }
        ble.startScan()
    }

    func stop() {
        eventTask?.cancel()
        ble.teardown()
    }
}

extension RadioModel {
    func connectStrongest() {
        guard let strongest = ble.scanResults.max(by: { $0.rssi < $1.rssi }) else { return }
        ble.stopScan()
        ble.connect(id: strongest.id)
    }
}

extension RadioModel {
    func readVersion() async throws -> String? {
        guard ble.atReady else { throw XTalkBleError.notReady }
        let lines = try await ble.runAtCommand("AT+VER?", timeoutMs: 2_000)
        return lines.first { $0.hasPrefix("+VER:") }
    }
}

@MainActor
func firstCommandOnTheSimulator() async throws -> [String] {
    let clock = XTalkVirtualClock()
    let environment = XTalkSimulatedEnvironment(devices: [XTalkSimulatedDevice()], clock: clock)
    let ble = XTalkBleClient(simulator: environment)
    ble.startScan()
    await clock.advance(by: .seconds(1))
    guard let radio = ble.scanResults.first else { return [] }
    ble.connect(id: radio.id)
    await clock.advance(by: .seconds(1))
    let lines = try await clock.run { try await ble.runAtCommand("AT+VER?") }
    ble.teardown()
    return lines
}
