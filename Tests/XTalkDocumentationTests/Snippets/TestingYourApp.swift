// The Swift samples of the Testing your app article (XTalkSimulator.docc),
// verbatim: DocumentationSnippetTests checks that every sample is here, and
// SnippetBehaviourTests runs them.
import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

@MainActor
func connectedClient() async -> (XTalkBleClient, XTalkSimulatedEnvironment, XTalkVirtualClock) {
    let clock = XTalkVirtualClock()
    let environment = XTalkSimulatedEnvironment(devices: [XTalkSimulatedDevice(name: "xTalk-0001")], clock: clock)
    let ble = XTalkBleClient(simulator: environment)
    ble.startScan()
    await clock.advance(by: .seconds(1))
    if let radio = ble.scanResults.first { ble.connect(id: radio.id) }
    await clock.advance(by: .seconds(1))
    return (ble, environment, clock)
}

@MainActor
func appCodeOnTheSimulator() async -> Bool {
    let clock = XTalkVirtualClock()
    let environment = XTalkSimulatedEnvironment(clock: clock)
    return await environment.runAsPlatformBluetooth {
        let ble = XTalkBleClient()  // the app's own line, unchanged
        ble.startScan()
        await clock.advance(by: .seconds(1))
        let found = !ble.scanResults.isEmpty
        ble.teardown()
        return found
    }
}

@MainActor
func linkLossDuringCommand() async throws {
    let (ble, environment, clock) = await connectedClient()
    let radio = try #require(environment.peripherals.first)
    radio.device.firmware.faults.silentCommands = ["AT+FREQ?"]  // the radio never answers it
    let pending = Task { @MainActor in try await ble.runAtCommand("AT+FREQ?", timeoutMs: 5_000) }
    await clock.advance(by: .milliseconds(100))
    radio.disconnect()  // out of range: reported after the supervision timeout
    await clock.advance(by: .seconds(1))
    await #expect(throws: XTalkBleError.notConnected) { try await pending.value }
    #expect(ble.connectionState == .disconnected)
}
