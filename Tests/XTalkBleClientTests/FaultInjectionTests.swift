import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

@Suite("Disconnect, Bluetooth power-off and teardown in every phase", .timeLimit(.minutes(10)))
@MainActor
struct FaultInjectionTests {
    enum Fault: String, CaseIterable, Sendable {
        /// `radioUnknown`: the manager's state turns `.unknown` (the platform
        /// drops every link and scan with it, as for any state but `.poweredOn`).
        case userDisconnect, linkLoss, powerOff, radioUnknown, teardown

        /// What pending work fails with.
        var error: XTalkBleError {
            switch self {
            case .userDisconnect, .teardown: .cancelled
            case .linkLoss, .powerOff, .radioUnknown: .notConnected
            }
        }
    }

    enum Phase: String, CaseIterable, Sendable {
        case scanning, connecting, discovering, midWrite, midResponse, midSession, isolationWindow

        var hasLink: Bool {
            switch self {
            case .scanning, .connecting: false
            case .discovering, .midWrite, .midResponse, .midSession, .isolationWindow: true
            }
        }
    }

    nonisolated static let cases: [(Fault, Phase)] = Fault.allCases.flatMap { fault in
        Phase.allCases.compactMap { phase in
            // A link that does not exist yet cannot be lost.
            fault == .linkLoss && !phase.hasLink ? nil : (fault, phase)
        }
    }

    nonisolated static let longReply = (0..<12).map { "+LONG:" + String(repeating: "\($0 % 10)", count: 60) } + ["OK"]

    @Test(
        "every waiter resumes exactly once with the documented error; a reconnect sees nothing stale", arguments: cases)
    func fault(_ fault: Fault, _ phase: Phase) async throws {
        var device = ClientHarness.fastDevice()
        device.link.mtu = 23
        device.link.packetsPerConnectionEvent = 1
        device.firmware.faults.scriptedReplies = ["AT+LONG": Self.longReply]
        if phase == .discovering { device.link.connectionInterval = .milliseconds(50) }
        if phase == .connecting { device.link.connectDelay = .milliseconds(500) }
        let harness = ClientHarness(devices: [device])
        let client = harness.client
        var waiters: [Task<[String], any Error>] = []

        switch phase {
        case .scanning:
            await harness.scan()
        case .connecting, .discovering:
            await harness.scan()
            let result = try #require(client.scanResults.first)
            client.connect(id: result.id)
            if phase == .connecting {
                await harness.advance(.milliseconds(100))
                #expect(client.connectionState == .connecting)
            } else {
                while client.connectionState != .connected { await harness.advance(.milliseconds(1)) }
                await harness.advance(.milliseconds(60))
                #expect(!client.atReady)
            }
        case .midWrite:
            await harness.connect()
            waiters.append(
                harness.start {
                    try await client.sendRfPayload(Data(repeating: 0x5A, count: 240))
                    return []
                })
            waiters.append(harness.start { try await client.runAtCommand("AT+PING=queued") })
            if fault == .linkLoss {
                harness.peripheral.disconnect(afterHostBytes: harness.peripheral.hostBytesDelivered + 100)
            }
            await harness.advance(.milliseconds(60))
            if fault == .linkLoss {
                #expect(!harness.peripheral.isConnected, "the link dropped inside the line")
            } else {
                #expect(harness.peripheral.hostBytesDelivered > 0, "the line is partly written")
            }
        case .midResponse:
            await harness.connect()
            waiters.append(harness.start { try await client.runAtCommand("AT+LONG") })
            waiters.append(harness.start { try await client.runAtCommand("AT+PING=queued") })
            if fault == .linkLoss {
                harness.peripheral.disconnect(afterDeviceBytes: harness.peripheral.deviceBytesDelivered + 300)
            }
            await harness.advance(.milliseconds(150))
            #expect(harness.atLines.contains { $0.hasPrefix("+LONG:") }, "part of the response arrived")
        case .midSession:
            await harness.connect()
            harness.peripheral.device.firmware.faults.replyDelay = .seconds(2)
            waiters.append(
                harness.start {
                    try await client.withExclusiveAtSession { session in
                        _ = try await session.runAtCommand("AT+PING=insession")
                        return try await session.runAtCommand("AT+PING=second")
                    }
                })
            await harness.clock.settle()
            waiters.append(harness.start { try await client.runAtCommand("AT+PING=outsider") })
            await harness.advance(.milliseconds(100))
        case .isolationWindow:
            await harness.connect()
            harness.peripheral.device.firmware.faults.replyDelay = .seconds(2)
            try client.sendRfPayloadNoWait(Data([1, 2, 3]))
            waiters.append(harness.start { try await client.runAtCommand("AT+PING=waiting") })
            await harness.advance(.milliseconds(100))
        }
        let eventsBeforeFault = harness.events.count

        switch fault {
        case .userDisconnect: client.disconnect()
        case .linkLoss: if harness.peripheral.isConnected { harness.peripheral.disconnect() }
        case .powerOff: harness.environment.setBluetoothState(.poweredOff)
        case .radioUnknown: harness.environment.authorization = .notDetermined
        case .teardown: client.teardown()
        }
        // A lost link is noticed after the supervision timeout.
        await harness.advance(
            .milliseconds(20) + (fault == .linkLoss ? harness.peripheral.device.link.supervisionTimeout : .zero))

        for waiter in waiters {
            do {
                // Driven by the clock: a waiter that never resumed fails as stalled instead of hanging.
                let lines = try await harness.run { try await waiter.value }
                Issue.record("a waiter succeeded after the fault: \(lines)")
            } catch {
                #expect(error as? XTalkBleError == fault.error)
            }
        }
        #expect(!client.atReady)
        #expect(!client.deviceControlReady)
        switch fault {
        case .userDisconnect:
            #expect(client.connectionState == (phase == .scanning ? .idle : .disconnected))
        case .linkLoss:
            #expect(
                client.connectionState
                    == (phase == .discovering
                        ? .failed(.connectionFailed("the link was lost while connecting")) : .disconnected))
        case .powerOff:
            #expect(client.connectionState == .failed(.bluetoothUnavailable))
        case .radioUnknown:
            // A scan waits for the radio; a link ends as a lost one.
            switch phase {
            case .scanning: #expect(client.connectionState == .scanning)
            case .connecting, .discovering:
                #expect(client.connectionState == .failed(.connectionFailed("the link was lost while connecting")))
            default: #expect(client.connectionState == .disconnected)
            }
        case .teardown:
            #expect(client.connectionState == .idle)
            await harness.advance(.seconds(3))
            #expect(harness.events.count == eventsBeforeFault, "no event after teardown")
            await harness.finish()
            return
        }

        // Recover: nothing of the old connection reaches the new one.
        if fault == .powerOff {
            harness.environment.setBluetoothState(.poweredOn)
            await harness.advance(.milliseconds(10))
        }
        if fault == .radioUnknown {
            harness.environment.authorization = .allowedAlways
            await harness.advance(.milliseconds(10))
        }
        // Reconnect at once: answers the device still owes the old connection may arrive on the new
        // one (the radio's UART does not know about links), but never as the new command's answer.
        harness.peripheral.device.firmware.faults.replyDelay = .zero
        await harness.connect()
        let lines = try await harness.run { try await client.runAtCommand("AT+PING=fresh") }
        #expect(lines == ["+PING:fresh", "OK"])
        await harness.finish()
    }
}
