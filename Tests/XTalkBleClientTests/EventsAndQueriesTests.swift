import Foundation
import Observation
import Testing
import XTalkBleSdk
import XTalkSimulator
import XTalkTestSupport

@Suite("Events, observers and device-information queries (seed 000, seed 001 section 4)", .timeLimit(.minutes(5)))
@MainActor
struct EventsAndQueriesTests {
    @Test("URCs become typed events; the stream, onEvent and the observers see the same events in the same order")
    func fanOut() async throws {
        let harness = ClientHarness()
        let consumer = harness.consumeEvents()
        var observedLines: [String] = []
        var observedFinishes: [String] = []
        var observedRaw: [Data] = []
        let lineToken = harness.client.observeAtLines { observedLines.append($0) }
        let finishToken = harness.client.observeSendFinishLines { observedFinishes.append($0) }
        let rawToken = harness.client.observePassthroughRaw { observedRaw.append($0) }
        await harness.connect()
        harness.peripheral.receiveRadioFrame(
            Data("Hello".utf8), fields: "cnt=12,len=5,slot=3,snr=7,rssi=-87,txp=14,data=48656C6C6F")
        harness.peripheral.reportCrcError(fields: "cnt=13,rssi=-101")
        harness.peripheral.emitRawBytes([0x5A, 0x5B, 0x50])  // NUL, SOH, LF once xor-decoded
        harness.peripheral.emitLine("+DI:len=9,data=00")  // malformed: an AT line only
        try await harness.run { try await harness.client.sendRfPayload(Data([7])) }
        await harness.advance(.milliseconds(50))
        harness.client.teardown()
        let streamed = await harness.consumed(by: consumer)
        #expect(
            harness.events.contains(
                .diPayload(Data("Hello".utf8), XTalkDiMeta(diCnt: 12, len: 5, slot: 3, snr: 7, rssi: -87, txp: 14))))
        #expect(harness.events.contains(.crcError(XTalkDiMeta(diCnt: 13, rssi: -101), "+CRCERR:cnt=13,rssi=-101")))
        #expect(harness.events.contains(.passthroughRaw(Data([0x5A, 0x5B, 0x50]))))
        #expect(harness.atLines.contains("+DI:len=9,data=00"))
        #expect(!harness.events.contains { if case .diPayload(_, let meta) = $0 { meta.len == 9 } else { false } })
        #expect(streamed == harness.events, "the stream and onEvent agree")
        #expect(observedLines == harness.atLines)
        #expect(observedFinishes == ["+SENDFIN:OK"])
        #expect(observedRaw == [Data([0x5A, 0x5B, 0x50])])
        // The DI line is an .atLine first, then the payload event.
        let line = harness.events.firstIndex(
            of: .atLine("+DI:cnt=12,len=5,slot=3,snr=7,rssi=-87,txp=14,data=48656C6C6F"))
        let payload = harness.events.firstIndex { if case .diPayload = $0 { true } else { false } }
        #expect(line != nil && payload != nil && line! + 1 == payload!)
        harness.client.removeAtLineObserver(lineToken)
        harness.client.removeSendFinishLineObserver(finishToken)
        harness.client.removePassthroughRawObserver(rawToken)
        await harness.finish()
    }

    @Test("observer tokens are accepted only by their own remove method")
    func tokens() async {
        let harness = ClientHarness()
        var lines = 0
        let token = harness.client.observeAtLines { _ in lines += 1 }
        harness.client.removeSendFinishLineObserver(token)
        harness.client.removePassthroughRawObserver(token)
        await harness.connect()
        harness.peripheral.emitLine("+HELLO")
        await harness.advance(.milliseconds(50))
        #expect(lines == 1)
        harness.client.removeAtLineObserver(token)
        harness.peripheral.emitLine("+AGAIN")
        await harness.advance(.milliseconds(50))
        #expect(lines == 1)
        await harness.finish()
    }

    @Test("the event stream keeps the newest 1024 events and counts what it dropped")
    func boundedStream() async {
        let harness = ClientHarness(readsEventsAtStart: true)
        await harness.connect()
        let before = harness.events.count
        for index in 0..<1_500 { harness.peripheral.emitLine("+N:\(index)") }
        await harness.advance(.seconds(2))
        let delivered = harness.events.count
        #expect(delivered - before == 1_500, "onEvent sees everything")
        #expect(harness.client.droppedEventCount == delivered - 1_024)
        harness.client.teardown()
        let buffered = await harness.remainingEvents()
        #expect(buffered.count == 1_024)
        #expect(
            buffered.prefix(3)
                == [
                    .connectionStateChanged(.scanning), .connectionStateChanged(.connecting),
                    .connectionStateChanged(.connected),
                ], "state changes are never the ones dropped")
        #expect(buffered.last == .atLine("+N:1499"), "the newest are kept")
        await harness.finish()
    }

    @Test("a full buffer drops its oldest events: a late reader gets the newest, in order, then live ones")
    func fullBufferDropsOldest() async {
        let harness = ClientHarness(options: XTalkBleClientOptions(eventBufferLimit: 5), readsEventsAtStart: true)
        await harness.connect()
        for index in 0..<10 { harness.peripheral.emitLine("+N:\(index)") }
        await harness.advance(.milliseconds(100))
        #expect(harness.events.count > 10, "the lifecycle's events and the ten lines")
        #expect(harness.client.droppedEventCount == harness.events.count - 5)
        // Nobody read the harness's stream so far; a reader now gets what its buffer
        // kept. No teardown here: the stream is live, and the next event follows the kept ones.
        // The state changes are never dropped: the buffer keeps them and the newest lines.
        let stream = harness.initialStream
        let reader = Task { @MainActor in
            var iterator = stream?.makeAsyncIterator()
            var received: [XTalkBleEvent] = []
            while received.count < 6, let event = await iterator?.next() {
                received.append(event)
                if received.count == 5 { harness.peripheral.emitLine("+N:live") }
            }
            return received
        }
        let received = await harness.clock.awaitEnd(of: reader, "reading the kept events and a live one")
        #expect(
            received == [
                .connectionStateChanged(.scanning), .connectionStateChanged(.connecting),
                .connectionStateChanged(.connected), .atLine("+N:8"), .atLine("+N:9"), .atLine("+N:live"),
            ])
        await harness.finish()
    }

    @Test("a callback may call back into the client; events keep their order")
    func reentrancy() async {
        let harness = ClientHarness()
        await harness.connect()
        var order: [String] = []
        harness.client.onEvent = { event in
            guard case .atLine(let line) = event else { return }
            order.append("onEvent " + line)
            if line == "+TRIGGER" {
                // Calls into the client from inside a callback: no mutation is in progress.
                try? harness.client.sendAtCommandNoWait("AT+PING=fromcallback")
                harness.client.setAtEncoding(.xor)
            }
        }
        _ = harness.client.observeAtLines { order.append("observer " + $0) }
        harness.peripheral.emitLine("+TRIGGER")
        await harness.advance(.milliseconds(100))
        #expect(
            order == [
                "onEvent +TRIGGER", "observer +TRIGGER",
                "onEvent +PING:fromcallback", "observer +PING:fromcallback",
                "onEvent OK", "observer OK",
            ])
        await harness.finish()
    }

    @Test("device information: battery as held, versions trimmed, the seed's three concurrent queries")
    func deviceInformation() async throws {
        var device = ClientHarness.fastDevice()
        device.gatt.batteryLevel = 250
        device.gatt.firmwareRevision = Data("  1.4.2\0\0".utf8)
        device.gatt.hardwareRevision = Data([0x58, 0x54, 0xFF, 0x0A])  // invalid UTF-8 is replaced
        let harness = ClientHarness(devices: [device])
        #expect(await harness.client.fetchBatteryLevel() == nil, "nil at once without device control")
        await harness.connect()
        #expect(harness.client.deviceControlReady)
        let client = harness.client
        let (battery, firmware, hardware) = try await harness.run {
            async let battery = client.fetchBatteryLevel()
            async let firmware = client.fetchBleFirmwareVersion()
            async let hardware = client.fetchHardwareVersion()
            return await (battery, firmware, hardware)
        }
        #expect(battery == 250)
        #expect(firmware == "1.4.2")
        #expect(hardware == "XT\u{FFFD}")
        await harness.finish()
    }

    @Test("device queries return nil on failure, timeout, cancellation and disconnect")
    func deviceInformationFailures() async throws {
        var device = ClientHarness.fastDevice()
        device.gatt.failingReads = ["2A19"]
        device.gatt.silentReads = ["2A26"]
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        let client = harness.client
        #expect(try await harness.run { await client.fetchBatteryLevel() } == nil)
        let start = harness.clock.elapsed
        #expect(try await harness.run { await client.fetchBleFirmwareVersion(timeoutMs: 300) } == nil)
        #expect(harness.clock.elapsed - start == .milliseconds(300))
        #expect(try await harness.run { await client.fetchHardwareVersion(timeoutMs: 0) } == nil)
        let cancelled = harness.start { await client.fetchBleFirmwareVersion() }
        await harness.advance(.milliseconds(10))
        cancelled.cancel()
        #expect(try await cancelled.value == nil)
        let pending = harness.start { await client.fetchBleFirmwareVersion() }
        await harness.advance(.milliseconds(10))
        client.disconnect()
        #expect(try await pending.value == nil)
        await harness.finish()
    }

    #if !canImport(Combine)
        @MainActor
        final class ChangeCounter {
            var changes = 0
        }

        static func track(_ client: XTalkBleClient, _ counter: ChangeCounter) {
            withObservationTracking {
                _ = client.connectionState
                _ = client.atReady
            } onChange: { [weak client] in
                // Weak: the registration lives in the client; a strong capture would keep it forever.
                Task { @MainActor in
                    guard let client else { return }
                    counter.changes += 1
                    track(client, counter)
                }
            }
        }

        @Test("published state is observable with the Observation framework")
        func observation() async {
            let harness = ClientHarness()
            let counter = ChangeCounter()
            Self.track(harness.client, counter)
            await harness.connect()
            await harness.clock.settle()
            #expect(counter.changes >= 4, "scanning, connecting, connected, atReady")
            await harness.finish()
        }
    #endif
}

@Suite("Line noise", .timeLimit(.minutes(5)))
@MainActor
struct LineNoiseTests {
    @Test("line noise arrives as raw passthrough bytes and never enters a response")
    func noise() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.startLineNoise(every: .milliseconds(10), bytes: 16)
        for index in 0..<20 {
            let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=n\(index)") }
            #expect(lines == ["+PING:n\(index)", "OK"])
        }
        let raw = harness.events.filter { if case .passthroughRaw = $0 { true } else { false } }
        #expect(raw.count > 10)
        harness.peripheral.stopLineNoise()
        await harness.finish()
    }

    /// Noise longer than a line reaches the host in pieces of 4096 bytes
    /// (PROTOCOL.md section 4): each piece is raw, none poses as an AT line.
    @Test("line noise longer than a line arrives raw in every piece", arguments: [4_097, 9_000])
    func longNoise(bytes: Int) async {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.startLineNoise(every: .milliseconds(250), bytes: bytes)
        await harness.advance(.seconds(5))
        harness.peripheral.stopLineNoise()
        await harness.advance(.seconds(1))
        #expect(harness.atLines.isEmpty, "\(harness.atLines.prefix(3))")
        let raw = harness.events.filter { if case .passthroughRaw = $0 { true } else { false } }
        #expect(raw.count >= 2 * 19)
        await harness.finish()
    }
}
