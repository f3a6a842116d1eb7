import Foundation
import Testing
import XTalkTestSupport
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkFakeBlueZ
import XTalkSimulator

/// The customer's own session (seed 002, verbatim) on a Linux gateway: its
/// `XTalkBleClient()` is the BlueZ backend on the system bus, which is the
/// fake BlueZ on a private dbus-daemon. The guide's acceptance sequence, on
/// the real clock, every wait bounded.
@Suite(
    "Seed 002's session through BlueZ: the acceptance sequence on a Linux gateway",
    .enabled(if: dbusDaemonAvailable, dbusMissing), .serialized, .timeLimit(.minutes(2)))
@MainActor
struct BlueZSeedSessionTests {
    @Test("scan, connect, atReady, authentication, AT and RF, link loss, re-authentication, close")
    func acceptanceSequence() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let session = rig.asPlatform { XTalkSdkSession() }
        let peripheral = rig.peripheral

        // 1. Scan results show.
        session.startScan()
        #expect(await eventually { !session.ble.scanResults.isEmpty })
        let result = try #require(session.ble.scanResults.first)
        #expect(result.displayName == "xTalk-0001 (C0:FF:EE:00:00:01)")

        // 2. .connected, then atReady. Recorded as each state change is
        // delivered (`onEvent`, in order, on the main actor), with the
        // readiness at that moment: a poller can miss a state that lasts one
        // main-actor turn (the two steps may land in one turn on a loaded
        // machine), the client's own delivery cannot.
        var readiness: [String] = []
        session.ble.onEvent = { [weak ble = session.ble] event in
            guard let ble, case .connectionStateChanged(let state) = event else { return }
            readiness.append("\(state) atReady=\(ble.atReady)")
        }
        session.connect(result)
        #expect(await eventually { session.ble.atReady })
        session.ble.onEvent = nil
        // (Connecting ends the scan first: `.idle`.)
        #expect(readiness == ["idle atReady=false", "connecting atReady=false", "connected atReady=false"])
        #expect(session.ble.connectionState == .connected)

        // 3. A failed authentication cannot enter the business flow; a successful one shows the DID.
        peripheral.device.firmware.faults.wrongSignature = true
        session.authenticateConnectedDevice()
        #expect(await eventually { session.lastError as? XTalkDeviceAuthError == .signatureVerificationFailed })
        #expect(session.authenticatedIdentity == nil)
        peripheral.device.firmware.faults.wrongSignature = false
        session.authenticateConnectedDevice()
        #expect(await eventually { session.authenticatedIdentity != nil })
        #expect(session.authenticatedIdentity?.did == "did:xtalk:B5803039")

        // 4. AT and RF under radio traffic: answers do not interleave, frames arrive in order.
        peripheral.startRadioTraffic(every: .milliseconds(20), payloadSize: 16)
        let ble = session.ble
        let pings = (0..<10).map { index in Task { @MainActor in try await ble.runAtCommand("AT+PING=q\(index)") } }
        session.sendBusinessPayload(Data("business".utf8))
        for (index, ping) in pings.enumerated() {
            #expect(try await ping.value == ["+PING:q\(index)", "OK"])
        }
        #expect(await eventually { peripheral.transmittedFrames == [Data("business".utf8)] })
        #expect(session.lastError == nil)
        peripheral.stopRadioTraffic()
        #expect(await eventually { session.receivedPayloads.count > 3 })

        // 5. Link loss clears the identity; reconnecting requires authentication again.
        rig.fake.loseLink(address: "C0:FF:EE:00:00:01", reason: "timeout")
        #expect(await eventually { session.ble.connectionState == .disconnected })
        // (The session clears it from its event task, a turn after the state changed.)
        #expect(await eventually { session.authenticatedIdentity == nil })
        session.startScan()
        #expect(await eventually { !session.ble.scanResults.isEmpty })
        session.connect(try #require(session.ble.scanResults.first))
        #expect(await eventually { session.ble.atReady })
        session.sendBusinessPayload(Data("after reconnect".utf8))
        #expect(session.lastError as? XTalkDeviceAuthError == .transportUnavailable)
        session.authenticateConnectedDevice()
        #expect(await eventually { session.authenticatedIdentity != nil })

        // 6. close() ends everything; the link is let go.
        session.close()
        #expect(session.ble.connectionState == .idle)
        #expect(await eventually { !peripheral.isConnected })
    }
}
