import Foundation
import Testing
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkSimulator

@Suite("Seed 002: the end-to-end session and its acceptance sequence, on the simulator")
@MainActor
struct SeedSessionTests {
    @Test("the six-step acceptance sequence")
    func acceptanceSequence() async throws {
        let clock = XTalkVirtualClock()
        var device = XTalkSimulatedDevice()
        device.link.connectionInterval = .milliseconds(7.5)
        let environment = XTalkSimulatedEnvironment(devices: [device], clock: clock)
        let session = await environment.runAsPlatformBluetooth { XTalkSdkSession() }
        let peripheral = environment.peripherals[0]
        func advance(_ duration: Duration) async { await clock.advance(by: duration) }
        func advance(until condition: () -> Bool) async {
            for _ in 0..<2_000 where !condition() { await clock.advance(by: .milliseconds(5)) }
        }

        // 1. Bluetooth access is granted and scan results show.
        session.startScan()
        await advance(until: { !session.ble.scanResults.isEmpty })
        let result = try #require(session.ble.scanResults.first)
        #expect(result.displayName == "xTalk-0001 (C0:FF:EE:00:00:01)")

        // 2. Selection reaches .connected, then atReady.
        session.connect(result)
        await advance(until: { session.ble.atReady })
        #expect(session.ble.connectionState == .connected)

        // 3. A failed authentication cannot enter the business flow...
        session.sendBusinessPayload(Data("too early".utf8))
        #expect(session.lastError as? XTalkDeviceAuthError == .transportUnavailable)
        peripheral.device.firmware.faults.wrongSignature = true
        session.authenticateConnectedDevice()
        await advance(until: { session.lastError as? XTalkDeviceAuthError == .signatureVerificationFailed })
        #expect(session.lastError as? XTalkDeviceAuthError == .signatureVerificationFailed)
        #expect(session.authenticatedIdentity == nil)
        session.sendBusinessPayload(Data("still not".utf8))
        await advance(.milliseconds(200))
        #expect(peripheral.transmittedFrames.isEmpty)
        // ...a successful one shows the identity's DID.
        peripheral.device.firmware.faults.wrongSignature = false
        session.authenticateConnectedDevice()
        await advance(until: { session.authenticatedIdentity != nil })
        #expect(session.authenticatedIdentity?.did == "did:xtalk:B5803039")
        #expect(session.ble.atEncoding == .xor)

        // 4. AT queries and RF writes do not interleave responses, even under radio traffic.
        peripheral.startRadioTraffic(every: .milliseconds(40), payloadSize: 16)
        session.queryVersion()
        await advance(.milliseconds(200))
        session.sendBusinessPayload(Data("business".utf8))
        await advance(until: { peripheral.transmittedFrames.count == 1 })
        #expect(peripheral.transmittedFrames == [Data("business".utf8)])
        #expect(session.lastError == nil)
        let ble = session.ble
        let pings = (0..<10).map { index in Task { @MainActor in try await ble.runAtCommand("AT+PING=q\(index)") } }
        let sends = (0..<5).map { index in
            Task { @MainActor in try await ble.sendRfPayload(Data([UInt8(index)])) }
        }
        for (index, ping) in pings.enumerated() {
            let lines = try await clock.run { try await ping.value }
            #expect(lines == ["+PING:q\(index)", "OK"])
        }
        for send in sends { try await clock.run { try await send.value } }
        #expect(peripheral.transmittedFrames.count == 6)
        await advance(.milliseconds(200))
        #expect(!session.receivedPayloads.isEmpty, "radio frames reached the business layer")
        peripheral.stopRadioTraffic()

        // 5. Link loss clears the identity; reconnecting requires authentication again.
        peripheral.disconnect()
        await advance(.milliseconds(50))
        #expect(session.authenticatedIdentity == nil)
        #expect(session.ble.connectionState == .disconnected)
        session.startScan()
        await advance(until: { !session.ble.scanResults.isEmpty })
        session.connect(try #require(session.ble.scanResults.first))
        await advance(until: { session.ble.atReady })
        session.sendBusinessPayload(Data("after reconnect".utf8))
        #expect(session.lastError as? XTalkDeviceAuthError == .transportUnavailable)
        session.authenticateConnectedDevice()
        await advance(until: { session.authenticatedIdentity != nil })
        #expect(session.authenticatedIdentity?.did == "did:xtalk:B5803039")

        // 6. close() ends the event task and every transaction.
        peripheral.device.firmware.faults.silent = true
        let pending = Task { @MainActor in try await ble.runAtCommand("AT+VER?") }
        await advance(.milliseconds(50))
        session.close()
        await #expect(throws: XTalkBleError.cancelled) { try await pending.value }
        #expect(session.ble.connectionState == .idle)
        #expect(session.authenticatedIdentity == nil)
        let framesBefore = session.receivedPayloads.count
        peripheral.receiveRadioFrame(Data([1, 2, 3]))
        await advance(.milliseconds(100))
        #expect(session.receivedPayloads.count == framesBefore, "nothing is consumed after close()")

        environment.shutDown()
        await clock.settle()
        #expect(clock.pendingTimerCount == 0)
    }
}
