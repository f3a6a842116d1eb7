import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

/// Cases a review found; each failed before its fix.
@Suite("Regressions", .timeLimit(.minutes(5)))
@MainActor
struct RegressionTests {
    /// The clients made over a simulated environment: the simulated central's
    /// and, on Linux, the CoreBluetooth backend's over the stand-in (whose
    /// radio holds the environment unowned, as the central does).
    enum SimulatedBackend: String, CaseIterable {
        case central
        case coreBluetoothStandIn

        static var available: [SimulatedBackend] {
            #if os(Linux)
                allCases
            #else
                [.central]
            #endif
        }

        @MainActor
        func client(_ environment: XTalkSimulatedEnvironment) -> XTalkBleClient {
            #if os(Linux)
                if self == .coreBluetoothStandIn { return XTalkBleClient(coreBluetoothSimulator: environment) }
            #endif
            return XTalkBleClient(simulator: environment)
        }
    }

    @Test(
        "a client made with an environment the app does not keep works: the client keeps it alive (it crashed)",
        arguments: SimulatedBackend.available)
    func environmentNotKept(backend: SimulatedBackend) async throws {
        let clock = XTalkVirtualClock()
        weak var dropped: XTalkSimulatedEnvironment?
        let ble = {
            let environment = XTalkSimulatedEnvironment(clock: clock)
            dropped = environment
            return backend.client(environment)
        }()
        #expect(dropped != nil, "the client keeps the environment")
        ble.startScan()
        await clock.advance(by: .seconds(1))
        let radio = try #require(ble.scanResults.first)
        ble.connect(id: radio.id)
        await clock.advance(by: .seconds(1))
        #expect(try await clock.run { try await ble.runAtCommand("AT+VER?") } == ["+VER:2.1.0", "OK"])
        ble.teardown()
    }

    @Test("a slow device's answer to a command of the lost connection never reaches the new connection's command")
    func lateReplyCrossesReconnect() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.device.firmware.faults.replyDelay = .seconds(1)
        let old = harness.start { try await harness.client.runAtCommand("AT+PING=old") }
        await harness.advance(.milliseconds(40))
        #expect(harness.peripheral.processedCommands.last == "AT+PING=old")
        harness.peripheral.disconnect()
        await harness.advance(harness.peripheral.device.link.supervisionTimeout)  // until the phone notices
        await #expect(throws: XTalkBleError.notConnected) { try await old.value }
        await harness.connect()
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=new") }
        #expect(lines == ["+PING:new", "OK"], "got \(lines)")
        #expect(harness.atLines.contains("+PING:old"), "the old answer arrived, as an event only")
        await harness.finish()
    }

    /// Without a switch: chaos seed 7164322140532. With the app trying the other encoding while
    /// disconnected and coming back after reconnecting: chaos seed 39747521205007 (the half line
    /// was ended in the encoding in use at the reconnect, junk to the device).
    @Test(
        """
        a link lost in the middle of a command line: after reconnecting, the device's half line is ended in its own \
        encoding and does not corrupt the next command
        """,
        arguments: [false, true])
    func halfLineAcrossReconnect(switchWhileDisconnected: Bool) async throws {
        var device = ClientHarness.fastDevice()
        device.link.mtu = 23  // a long command takes several packets
        device.firmware.partialLineTimeout = nil  // the UART keeps a partial line for good
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        let command = "AT+SEND=" + String(repeating: "AB", count: 60)
        harness.peripheral.disconnect(afterHostBytes: harness.peripheral.hostBytesDelivered + 30)
        let cut = harness.start { try await harness.client.runAtCommand(command) }
        await harness.advance(.milliseconds(300) + harness.peripheral.device.link.supervisionTimeout)
        await #expect(throws: XTalkBleError.notConnected) { try await cut.value }
        let own = harness.client.atEncoding
        if switchWhileDisconnected { harness.client.setAtEncoding(own == .xor ? .plain : .xor) }
        await harness.connect()
        harness.client.setAtEncoding(own)
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=next") }
        #expect(lines == ["+PING:next", "OK"], "got \(lines)")
        #expect(harness.peripheral.processedCommands.last == "AT+PING=next")
        #expect(
            harness.peripheral.processedCommands.dropLast().last?.hasPrefix("AT+SEND=ABAB") == true,
            "the half line was ended on its own")
        await harness.finish()
    }

    @Test(
        """
        switching to the encoding already in use and then to the right one: the next reply keeps its first line (chaos \
        seed 52284421341994)
        """
    )
    func repeatedSwitchKeepsNextReply() async throws {
        var device = ClientHarness.fastDevice()
        device.firmware.encoding = .plain
        let harness = ClientHarness(devices: [device])
        harness.client.setAtEncoding(.xor)  // the wrong one
        await harness.connect()
        // A whole plain line, read as xor: no xor line end in it, so the framer holds it all.
        harness.peripheral.receiveRadioFrame(Data([1, 2, 3]))
        await harness.advance(.milliseconds(100))
        // An authentication sets the encoding it probes first (the same), then the app the right one.
        harness.client.setAtEncoding(.xor)
        harness.client.setAtEncoding(.plain)
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=next") }
        #expect(lines == ["+PING:next", "OK"], "got \(lines)")
        #expect(!harness.raw.contains(Data("+PING:next\r\n".utf8)), "the reply's first line went raw")
        await harness.finish()
    }

    @Test("a clean reconnect starts at once: only a connection that still owed answers is quarantined")
    func cleanReconnectIsFast() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.client.disconnect()
        await harness.connect()
        let start = harness.clock.elapsed
        _ = try await harness.run { try await harness.client.runAtCommand("AT") }
        #expect(harness.clock.elapsed - start < .milliseconds(50))
        await harness.finish()
    }

    @Test("a lost link whose report is still pending, then cancelled by the app, does not kill the next link")
    func staleDisconnectKillsNewLink() async throws {
        var device = ClientHarness.fastDevice()
        device.link.supervisionTimeout = .seconds(2)
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        harness.peripheral.disconnect()
        await harness.advance(.milliseconds(100))
        harness.client.disconnect()
        await harness.connect()
        #expect(harness.client.atReady)
        await harness.advance(.seconds(2))
        #expect(harness.client.atReady, "state: \(harness.client.connectionState)")
        #expect(harness.client.connectionState == .connected)
        #expect(harness.peripheral.isConnected == harness.client.atReady, "simulator and client agree")
        await harness.finish()
    }

    @Test("lines of a log:false command that arrive after its timeout stay out of the log")
    func logFalseAfterTimeout() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.device.firmware.faults.replyDelay = .milliseconds(300)
        let error = await harness.error {
            try await harness.client.runAtCommand("AT+PING=secret42", timeoutMs: 100, log: false)
        }
        #expect(XTalkBleError.from(error) == .timeout)
        await harness.advance(.seconds(1))
        #expect(harness.atLines.contains("+PING:secret42"), "the answer arrived")
        #expect(!harness.logMessages.joined(separator: "\n").contains("secret42"))
        await harness.finish()
    }

    @Test("a timed-out operation whose line is still being written: the next command still gets its own answer")
    func stalledWrite() async throws {
        var device = ClientHarness.fastDevice()
        device.link.mtu = 23
        device.link.writeWithoutResponseCredits = 1
        device.link.packetsPerConnectionEvent = 1
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        // 11 chunks at one per 50 ms event: the line takes over half a second to go out. (The drain's
        // 150 ms quiet period of PROTOCOL.md covers link round trips up to about that long; a link
        // slower than that can outlast it.)
        harness.peripheral.device.link.connectionInterval = .milliseconds(50)
        let error = await harness.error {
            try await harness.client.sendRfPayload(Data(repeating: 0x11, count: 100), timeoutMs: 100)
            return 0
        }
        #expect(XTalkBleError.from(error) == .timeout)
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=B", timeoutMs: 30_000) }
        #expect(lines == ["+PING:B", "OK"], "got \(lines)")
        // The send's line had started, so it was completed (never cut, never interleaved) and the radio may
        // still act on it: a timeout means "not known to have finished", as documented.
        #expect(harness.peripheral.processedCommands.first?.hasPrefix("AT+SEND=") == true)
        await harness.finish()
    }

    @Test("a cancelled operation whose line has not started is never written")
    func withdrawnLine() async throws {
        var device = ClientHarness.fastDevice()
        device.link.mtu = 23
        device.link.writeWithoutResponseCredits = 1
        device.link.packetsPerConnectionEvent = 1
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        harness.peripheral.device.link.connectionInterval = .milliseconds(50)
        harness.peripheral.device.firmware.faults.silentCommands = ["AT+PING=first"]
        // The first command times out while its line is written; the send is queued behind it.
        let first = harness.start { try await harness.client.runAtCommand("AT+PING=first", timeoutMs: 20) }
        let send = harness.start {
            try await harness.client.sendRfPayload(Data(repeating: 0x22, count: 240))
            return [String]()
        }
        await harness.advance(.milliseconds(30))
        await #expect(throws: XTalkBleError.timeout) { try await first.value }
        send.cancel()
        await harness.clock.settle()
        await #expect(throws: XTalkBleError.cancelled) { try await send.value }
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=B") }
        #expect(lines == ["+PING:B", "OK"])
        #expect(harness.peripheral.transmittedFrames.isEmpty, "the cancelled send never reached the device")
        #expect(!harness.peripheral.processedCommands.contains { $0.hasPrefix("AT+SEND=") })
        await harness.finish()
    }

    @Test("a send cancelled while its line is being written: the next command still gets its own answer")
    func cancelledSendMidWrite() async throws {
        var device = ClientHarness.fastDevice()
        device.link.mtu = 23
        device.link.writeWithoutResponseCredits = 1
        device.link.packetsPerConnectionEvent = 1
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        harness.peripheral.device.link.connectionInterval = .milliseconds(50)
        let send = harness.start {
            try await harness.client.sendRfPayload(Data(repeating: 0x22, count: 240))
            return 0
        }
        await harness.advance(.milliseconds(10))
        send.cancel()
        await harness.clock.settle()
        await #expect(throws: XTalkBleError.cancelled) { try await send.value }
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=B") }
        #expect(lines == ["+PING:B", "OK"], "got \(lines)")
        await harness.finish()
    }

    @Test("a callback that disconnects stops the old connection's remaining events at once")
    func disconnectFromCallback() async throws {
        let harness = ClientHarness()
        await harness.connect()
        var disconnected = false
        var afterDisconnect: [XTalkBleEvent] = []
        harness.client.onEvent = { event in
            if disconnected { afterDisconnect.append(event) }
            if case .atLine("X1") = event {
                harness.client.disconnect()
                disconnected = true
            }
        }
        harness.peripheral.emitRawBytes(Array("X1\r\nX2\r\n".utf8).map { $0 ^ 0x5A })
        await harness.advance(.milliseconds(50))
        #expect(!afterDisconnect.contains(.atLine("X2")), "\(afterDisconnect)")
        #expect(afterDisconnect.contains(.connectionStateChanged(.disconnected)))
        await harness.finish()
    }

    @Test("an observer that ends the connection: nothing else of that connection reaches the stream or the observers")
    func endFromObserver() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let consumer = harness.consumeEvents()
        var observed: [String] = []
        var rawAfterEnd = 0
        let client = harness.client
        _ = client.observeAtLines { line in
            observed.append(line)
            if line == "Y1" { client.startScan() }  // ends the connection, starts a new scan session
        }
        _ = client.observePassthroughRaw { _ in rawAfterEnd += 1 }
        // One notification: a line, then a radio frame, a raw unit and another line, all of the old connection.
        let text = "Y1\r\n+DI:cnt=1,len=1,data=AB\r\n\u{01}\r\nY2\r\n"
        harness.peripheral.emitRawBytes(Array(text.utf8).map { $0 ^ 0x5A })
        await harness.advance(.milliseconds(50))
        #expect(harness.client.connectionState == .scanning)
        #expect(observed == ["Y1"], "the observers saw nothing after the end: \(observed)")
        #expect(rawAfterEnd == 0)
        await harness.connect()
        #expect(try await harness.run { try await harness.client.runAtCommand("AT") } == ["OK"])
        harness.client.teardown()
        let streamed = await harness.consumed(by: consumer)
        let end = try #require(streamed.firstIndex(of: .atLine("Y1")), "Y1 reached the stream")
        let after = streamed[(end + 1)...]
        #expect(!after.contains(.atLine("Y2")), "\(after)")
        #expect(!after.contains { if case .diPayload = $0 { true } else { false } }, "\(after)")
        #expect(!after.contains { if case .passthroughRaw = $0 { true } else { false } }, "\(after)")
        #expect(after.contains(.connectionStateChanged(.scanning)))
        await harness.finish()
    }

    @Test("a connect issued in the same turn as a power-off does not connect the device")
    func connectInSameTurnAsPowerOff() async throws {
        let harness = ClientHarness()
        await harness.scan()
        let id = try #require(harness.client.scanResults.first).id
        harness.environment.setBluetoothState(.poweredOff)
        harness.client.connect(id: id)
        await harness.advance(.milliseconds(200))
        #expect(!harness.peripheral.isConnected, "the simulated device connected while Bluetooth was off")
        #expect(harness.client.connectionState == .failed(.bluetoothUnavailable))
        harness.environment.setBluetoothState(.poweredOn)
        await harness.advance(.milliseconds(10))
        harness.client.startScan()
        await harness.advance(.seconds(1))
        #expect(!harness.client.scanResults.isEmpty, "the device is visible after the power cycle")
        await harness.finish()
    }

    @Test("a session's closure that outlives its connection cannot run commands on the next one")
    func sessionOutlivesConnection() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let client = harness.client
        let gate = Gate()
        let session = harness.start {
            try await client.withExclusiveAtSession { session -> [String] in
                _ = try await session.runAtCommand("AT")
                await gate.wait()
                return try await session.runAtCommand("AT+PING=late")
            }
        }
        await harness.advance(.milliseconds(50))
        harness.client.disconnect()
        await harness.connect()
        gate.open()
        await harness.clock.settle()
        await #expect(throws: XTalkBleError.notConnected) { try await session.value }
        #expect(!harness.peripheral.processedCommands.contains("AT+PING=late"))
        await harness.finish()
    }
}

/// A one-shot gate a task can wait on.
@MainActor
final class Gate {
    private var waiter: CheckedContinuation<Void, Never>?
    private var isOpen = false
    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiter = $0 }
    }
    func open() {
        isOpen = true
        waiter?.resume()
        waiter = nil
    }
}
