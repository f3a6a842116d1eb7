import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

// The README's client example, verbatim, so the README stays true.
@MainActor
func readVersion() async throws -> [String] {
    let clock = XTalkVirtualClock()
    let environment = XTalkSimulatedEnvironment(devices: [XTalkSimulatedDevice()], clock: clock)
    let ble = XTalkBleClient(simulator: environment)
    ble.startScan()
    await clock.advance(by: .seconds(1))  // advertisements arrive
    guard let device = ble.scanResults.first else { throw XTalkBleError.deviceNotFound(UUID()) }
    ble.connect(id: device.id)
    await clock.advance(by: .seconds(1))  // connected, discovered, subscribed: atReady
    let lines = try await clock.run { try await ble.runAtCommand("AT+VER?") }  // ["+VER:2.1.0", "OK"]
    ble.teardown()
    return lines
}

@Suite("README", .timeLimit(.minutes(5)))
@MainActor
struct ReadmeExampleTests {
    @Test("the README's client example works as written")
    func example() async throws {
        #expect(try await readVersion() == ["+VER:2.1.0", "OK"])
    }
}
