import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator
import XTalkTestSupport

@Suite("The examples of the customer's BLE guide run against the simulator", .timeLimit(.minutes(5)))
@MainActor
struct SeedExampleTests {
    @Test("seed 001's DeviceModel scans, connects, reaches atReady and stops, unchanged")
    func deviceModel() async throws {
        let clock = XTalkVirtualClock()
        let environment = XTalkSimulatedEnvironment(devices: [ClientHarness.fastDevice()], clock: clock)
        try await environment.runAsPlatformBluetooth {
            let model = DeviceModel()
            model.start()
            for _ in 0..<100 where model.ble.scanResults.isEmpty { await clock.advance(by: .milliseconds(10)) }
            let result = try #require(model.ble.scanResults.first, "a scan result")
            model.connect(result)
            for _ in 0..<200 where !model.ble.atReady { await clock.advance(by: .milliseconds(5)) }
            // atReady already holds, so the guide's wall-clock polling returns at once.
            try await model.waitUntilAtReady()
            #expect(model.ble.connectedName == "xTalk-0001")
            // The event task is the guide's private property: reflection reads it, so that the
            // test sees it end because stop() cancelled it, not only because teardown() ended the stream.
            let eventTask = try #require(
                Mirror(reflecting: model).children.first { $0.label == "eventTask" }?.value
                    as? Task<Void, Never>, "the model's event task runs")
            #expect(!eventTask.isCancelled)
            model.stop()
            #expect(eventTask.isCancelled, "stop() cancelled the event task")
            #expect(await clock.awaitEnd(of: eventTask, "the model's event task after stop()") != nil)
            #expect(model.ble.connectionState == .idle)
        }
        environment.shutDown()
        await clock.settle()
        #expect(clock.pendingTimerCount == 0)
    }

    @Test("seed 001's snippets: strongest device, AT, RF, device information, exclusive session")
    func snippets() async throws {
        let harness = ClientHarness(devices: [
            ClientHarness.fastDevice(name: "far", address: "AA:00:00:00:00:01"),
            {
                var near = ClientHarness.fastDevice(name: "near", address: "AA:00:00:00:00:02")
                near.rssi = -40
                return near
            }(),
        ])
        let snippets = Seed001Snippets(ble: harness.client)
        harness.client.startScan()
        await harness.advance(.seconds(1))
        snippets.selectStrongestDevice()
        for _ in 0..<200 where !harness.client.atReady { await harness.advance(.milliseconds(5)) }
        #expect(harness.client.connectedName == "near")
        let (lines, battery, firmware, hardware) = try await harness.run {
            try await snippets.atAndDeviceInformation(payload: Data("hello".utf8))
        }
        #expect(lines == ["+VER:2.1.0", "OK"])
        #expect(battery == 87 && firmware == "1.4.2" && hardware == "XT-R2")
        let (frequency, version) = try await harness.run { try await snippets.exclusive() }
        #expect(frequency == ["+FREQ:868100000", "OK"])
        #expect(version == ["+VER:2.1.0", "OK"])
        await harness.finish()
    }
}
