import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

@Suite(
    "AT commands and radio payloads through the client (seed 000, PROTOCOL.md sections 6–7)", .timeLimit(.minutes(5)))
@MainActor
struct AtChannelTests {
    @Test("runAtCommand returns the response lines, final code included", arguments: XTalkAtEncoding.allCases)
    func responseLines(_ encoding: XTalkAtEncoding) async throws {
        var device = ClientHarness.fastDevice()
        device.firmware.encoding = encoding
        let harness = ClientHarness(devices: [device])
        harness.client.setAtEncoding(encoding)
        #expect(harness.client.atEncoding == encoding)
        await harness.connect()
        #expect(try await harness.run { try await harness.client.runAtCommand("AT+VER?") } == ["+VER:2.1.0", "OK"])
        #expect(try await harness.run { try await harness.client.runAtCommand("AT+FREQ=1") } == ["ERROR"])
        #expect(try await harness.run { try await harness.client.runAtCommand("AT+NOPE") } == ["ERROR"])
        #expect(harness.peripheral.processedCommands == ["AT+VER?", "AT+FREQ=1", "AT+NOPE"])
        await harness.finish()
    }

    @Test("the echo is removed")
    func echo() async throws {
        var device = ClientHarness.fastDevice()
        device.firmware.echo = true
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        #expect(
            try await harness.run { try await harness.client.runAtCommand("AT+PING=echo1") } == ["+PING:echo1", "OK"])
        #expect(harness.atLines.contains("AT+PING=echo1"), "the echo is still an event")
        await harness.finish()
    }

    @Test("the default encoding is .xor; a wrong encoding times out and the next command is clean")
    func wrongEncoding() async throws {
        var device = ClientHarness.fastDevice()
        device.firmware.encoding = .plain
        let harness = ClientHarness(devices: [device])
        #expect(harness.client.atEncoding == .xor)
        await harness.connect()
        let error = await harness.error { try await harness.client.runAtCommand("AT+AUTH?", timeoutMs: 800) }
        #expect(XTalkBleError.from(error) == .timeout)
        harness.client.setAtEncoding(.plain)
        #expect(try await harness.run { try await harness.client.runAtCommand("AT+AUTH?") } == ["+AUTH:1", "OK"])
        await harness.finish()
    }

    @Test("timeoutMs counts from the command's turn: time queued behind another command does not count")
    func timeoutCountsFromTurn() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.device.firmware.faults.replyDelay = .milliseconds(300)
        let start = harness.clock.elapsed
        let first = harness.start { try await harness.client.runAtCommand("AT+PING=first", timeoutMs: 1_000) }
        // Queued behind a 300 ms answer, then 300 ms of its own: 600 ms in all, more than its 400 ms.
        let second = harness.start { try await harness.client.runAtCommand("AT+PING=second", timeoutMs: 400) }
        #expect(try await harness.run { try await second.value } == ["+PING:second", "OK"])
        #expect(try await harness.run { try await first.value } == ["+PING:first", "OK"])
        #expect(harness.clock.elapsed - start > .milliseconds(600))
        await harness.finish()
    }

    @Test("setAtEncoding resets the text decode buffer: a partial line is discarded, its rest is raw")
    func setEncodingResetsBuffer() async {
        let harness = ClientHarness()
        await harness.connect()
        var raw: [Data] = []
        _ = harness.client.observePassthroughRaw { raw.append($0) }
        harness.peripheral.emitRawBytes(Array("+PAR".utf8).map { $0 ^ 0x5A })
        await harness.advance(.milliseconds(50))
        harness.client.setAtEncoding(.plain)  // a switch discards the partial line…
        harness.client.setAtEncoding(.xor)  // …and back, the device's own again
        harness.peripheral.emitLine("TIAL")
        harness.peripheral.emitLine("+READY")
        await harness.advance(.milliseconds(50))
        // "TIAL" is the end of the discarded line, not a line of its own.
        #expect(harness.atLines == ["+READY"])
        #expect(raw == [Data(Array("TIAL\r\n".utf8).map { $0 ^ 0x5A })])
        await harness.finish()
    }

    /// The encoding already in use is no switch: a `+DI:` line half received
    /// when the app sets it again (seed 002 does, after authenticating) is
    /// completed and delivered, not cut into raw bytes.
    @Test("setAtEncoding with the encoding in use keeps a partial line")
    func sameEncodingKeepsPartialLine() async {
        let harness = ClientHarness()
        await harness.connect()
        var raw: [Data] = []
        var payloads: [Data] = []
        _ = harness.client.observePassthroughRaw { raw.append($0) }
        harness.client.onEvent = { event in if case .diPayload(let data, _) = event { payloads.append(data) } }
        let line = Array("+DI:cnt=1,len=2,data=ABCD\r\n".utf8).map { $0 ^ 0x5A }
        harness.peripheral.emitRawBytes(Array(line[..<12]))
        await harness.advance(.milliseconds(50))
        harness.client.setAtEncoding(.xor)
        harness.peripheral.emitRawBytes(Array(line[12...]))
        await harness.advance(.milliseconds(50))
        #expect(payloads == [Data([0xAB, 0xCD])])
        #expect(raw.isEmpty)
        await harness.finish()
    }

    @Test("collectUntilTimeout returns every line of the window without throwing")
    func collectWindow() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let start = harness.clock.elapsed
        let lines = try await harness.run {
            try await harness.client.runAtCommand("AT+AUTH?", timeoutMs: 600, responseMode: .collectUntilTimeout)
        }
        #expect(lines == ["+AUTH:1", "OK"])
        #expect(harness.clock.elapsed - start >= .milliseconds(600), "the whole window")
        harness.peripheral.device.firmware.faults.silent = true
        #expect(
            try await harness.run {
                try await harness.client.runAtCommand("AT+AUTH?", timeoutMs: 600, responseMode: .collectUntilTimeout)
            } == [])
        await harness.finish()
    }

    @Test("a late reply after a timeout never reaches the next command")
    func lateReply() async throws {
        let harness = ClientHarness()
        await harness.connect()
        // The reply comes 100 ms after the timeout, inside the drain's quiet period.
        harness.peripheral.device.firmware.faults.replyDelay = .milliseconds(600)
        let error = await harness.error { try await harness.client.runAtCommand("AT+VER?", timeoutMs: 500) }
        #expect(XTalkBleError.from(error) == .timeout)
        harness.peripheral.device.firmware.faults.replyDelay = .zero
        let next = harness.start { try await harness.client.runAtCommand("AT+PING=next") }
        await harness.advance(.milliseconds(120))
        #expect(harness.atLines.contains("+VER:2.1.0"), "the late reply arrived, as an event only")
        #expect(harness.peripheral.processedCommands == ["AT+VER?"], "the next command waits for quiet")
        let lines = try await harness.run { try await next.value }
        #expect(lines == ["+PING:next", "OK"])
        await harness.finish()
    }

    @Test("bad input is rejected before any byte is written, and the client stays usable")
    func badInput() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let before = harness.peripheral.hostBytesDelivered
        await #expect(throws: XTalkBleError.writeFailed("invalid AT command: CR at byte 2 would end the line early")) {
            try await harness.client.runAtCommand("AT\r\nAT+RST")
        }
        await #expect(throws: XTalkBleError.writeFailed("invalid AT command: the text is empty")) {
            try await harness.client.runAtCommand("")
        }
        await #expect(throws: XTalkBleError.writeFailed("invalid timeout: 0 ms (it must be greater than zero)")) {
            try await harness.client.runAtCommand("AT", timeoutMs: 0)
        }
        #expect(throws: XTalkBleError.writeFailed("invalid AT command: LF at byte 2 would end the line early")) {
            try harness.client.sendAtCommandNoWait("AT\nX")
        }
        await #expect(throws: XTalkBleError.writeFailed("invalid RF payload: it is empty (1–240 bytes allowed)")) {
            try await harness.client.sendRfPayload(Data())
        }
        await #expect(throws: XTalkBleError.writeFailed("invalid RF payload: 241 bytes (1–240 bytes allowed)")) {
            try await harness.client.sendRfPayload(Data(count: 241))
        }
        await #expect(throws: XTalkBleError.writeFailed("invalid timeout: -5 ms (it must be greater than zero)")) {
            try await harness.client.sendRfPayload(Data([1]), timeoutMs: -5)
        }
        #expect(throws: XTalkBleError.writeFailed("invalid RF payload: 241 bytes (1–240 bytes allowed)")) {
            try harness.client.sendRfPayloadNoWait(Data(count: 241))
        }
        await harness.advance(.seconds(1))
        #expect(harness.peripheral.hostBytesDelivered == before, "nothing was written")
        #expect(try await harness.run { try await harness.client.runAtCommand("AT") } == ["OK"])
        // The largest timeout is positive, so valid: it waits for the answer as any other.
        #expect(try await harness.run { try await harness.client.runAtCommand("AT", timeoutMs: .max) } == ["OK"])
        try await harness.run { try await harness.client.sendRfPayload(Data([1]), timeoutMs: .max) }
        await harness.finish()
    }

    @Test("sendRfPayload returns after +SENDFIN:OK and the radio sent exactly the payload")
    func rfSend() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let payload = Data((0..<240).map { UInt8($0) })
        try await harness.run { try await harness.client.sendRfPayload(payload) }
        #expect(harness.peripheral.transmittedFrames == [payload])
        #expect(harness.events.contains(.sendFinished))
        await harness.finish()
    }

    @Test("sendRfPayload throws .writeFailed on ERROR and on +SENDFIN:FAIL, .timeout without an answer")
    func rfSendFailures() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.device.firmware.sendFailureReason = "channel busy"
        var error = await harness.error { try await harness.client.sendRfPayload(Data([1, 2])) }
        #expect(XTalkBleError.from(error) == .writeFailed("the radio could not send the frame: channel busy"))
        harness.peripheral.device.firmware.sendFailureReason = nil
        harness.peripheral.device.firmware.faults.scriptedReplies = ["AT+SEND=": ["ERROR"]]
        error = await harness.error { try await harness.client.sendRfPayload(Data([1, 2])) }
        #expect(XTalkBleError.from(error) == .writeFailed("the device rejected the frame: ERROR"))
        harness.peripheral.device.firmware.faults.scriptedReplies = [:]
        harness.peripheral.device.firmware.faults.silentCommands = ["AT+SEND="]
        error = await harness.error { try await harness.client.sendRfPayload(Data([1, 2]), timeoutMs: 1_000) }
        #expect(XTalkBleError.from(error) == .timeout)
        harness.peripheral.device.firmware.faults.silentCommands = []
        try await harness.run { try await harness.client.sendRfPayload(Data([9])) }
        await harness.finish()
    }

    @Test("no-wait operations throw .busy during a transaction or an isolation window")
    func noWaitBusy() async throws {
        let harness = ClientHarness()
        await harness.connect()
        try harness.client.sendRfPayloadNoWait(Data([1, 2, 3]))
        #expect(throws: XTalkBleError.busy) { try harness.client.sendAtCommandNoWait("AT") }
        #expect(throws: XTalkBleError.busy) { try harness.client.sendRfPayloadNoWait(Data([4])) }
        // An async command waits for the window to close, then runs.
        let lines = try await harness.run { try await harness.client.runAtCommand("AT+PING=after") }
        #expect(lines == ["+PING:after", "OK"])
        #expect(harness.events.contains(.sendFinished))
        #expect(harness.peripheral.transmittedFrames == [Data([1, 2, 3])])
        let running = harness.start { try await harness.client.runAtCommand("AT+VER?") }
        await harness.clock.settle()
        #expect(throws: XTalkBleError.busy) { try harness.client.sendAtCommandNoWait("AT") }
        _ = try await harness.run { try await running.value }
        try harness.client.sendAtCommandNoWait("AT+PING=nowait")
        await harness.advance(.milliseconds(100))
        #expect(harness.atLines.suffix(2) == ["+PING:nowait", "OK"])
        await harness.finish()
    }

    /// The windows the API reference documents: a no-wait command holds the
    /// channel until its final result code or 3 s, a no-wait send until its
    /// `+SENDFIN` or 5 s; then the channel drains (no answer came) and is free.
    @Test(
        "a no-wait command the device never answers holds its window 3 s, a no-wait send 5 s, then the channel is free")
    func noWaitWindowBounds() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let client = harness.client
        harness.peripheral.device.firmware.faults.silentCommands = ["AT+SLOW", "AT+SEND="]
        try client.sendAtCommandNoWait("AT+SLOW")
        let start = harness.clock.elapsed
        await harness.advance(.milliseconds(2_950))
        #expect(throws: XTalkBleError.busy, "still inside the 3 s window") { try client.sendAtCommandNoWait("AT") }
        // Past 3 s, plus the drain's quiet period (150 ms) with a wide margin.
        await harness.advance(.seconds(3) + .milliseconds(500) - (harness.clock.elapsed - start))
        try client.sendRfPayloadNoWait(Data([7]))
        let sendStart = harness.clock.elapsed
        await harness.advance(.milliseconds(4_950))
        #expect(throws: XTalkBleError.busy, "still inside the 5 s window") { try client.sendAtCommandNoWait("AT") }
        await harness.advance(.seconds(5) + .milliseconds(500) - (harness.clock.elapsed - sendStart))
        try client.sendAtCommandNoWait("AT+PING=free")
        await harness.advance(.milliseconds(100))
        #expect(harness.atLines.suffix(2) == ["+PING:free", "OK"])
        await harness.finish()
    }

    @Test("commands are strictly FIFO and each caller gets its own response")
    func fifo() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let tasks = (0..<20).map { index in harness.start { try await harness.client.runAtCommand("AT+PING=t\(index)") }
        }
        let results = try await harness.run {
            var all: [[String]] = []
            for task in tasks { all.append(try await task.value) }
            return all
        }
        for (index, lines) in results.enumerated() { #expect(lines == ["+PING:t\(index)", "OK"]) }
        #expect(harness.peripheral.processedCommands == (0..<20).map { "AT+PING=t\($0)" })
        await harness.finish()
    }

    @Test("an exclusive session runs back to back; other callers wait; a nested session runs inline")
    func exclusiveSession() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let client = harness.client
        let session = harness.start {
            try await client.withExclusiveAtSession { session -> [[String]] in
                let a = try await session.runAtCommand("AT+PING=s1")
                let nested = try await session.withExclusiveAtSession { inner in
                    try await inner.runAtCommand("AT+PING=s2")
                }
                let c = try await session.runAtCommand("AT+PING=s3")
                return [a, nested, c]
            }
        }
        await harness.clock.settle()
        let outsider = harness.start { try await client.runAtCommand("AT+PING=out") }
        let results = try await harness.run { try await session.value }
        #expect(results == [["+PING:s1", "OK"], ["+PING:s2", "OK"], ["+PING:s3", "OK"]])
        #expect(try await harness.run { try await outsider.value } == ["+PING:out", "OK"])
        #expect(harness.peripheral.processedCommands == ["AT+PING=s1", "AT+PING=s2", "AT+PING=s3", "AT+PING=out"])
        await harness.finish()
    }

    @Test("a session that throws releases the channel")
    func sessionThrows() async throws {
        struct Oops: Error {}
        let harness = ClientHarness()
        await harness.connect()
        let error = await harness.error {
            try await harness.client.withExclusiveAtSession { session in
                _ = try await session.runAtCommand("AT")
                throw Oops()
            }
        }
        #expect(error is Oops)
        #expect(try await harness.run { try await harness.client.runAtCommand("AT") } == ["OK"])
        await harness.finish()
    }

    @Test("cancelling a waiting caller throws .cancelled promptly; the channel is drained")
    func cancellation() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.device.firmware.faults.replyDelay = .milliseconds(200)
        let slow = harness.start { try await harness.client.runAtCommand("AT+VER?") }
        let queued = harness.start { try await harness.client.runAtCommand("AT+PING=queued") }
        let next = harness.start { try await harness.client.runAtCommand("AT+PING=next") }
        await harness.advance(.milliseconds(20))
        queued.cancel()
        slow.cancel()
        await harness.clock.settle()
        await #expect(throws: XTalkBleError.cancelled) { try await slow.value }
        await #expect(throws: XTalkBleError.cancelled) { try await queued.value }
        harness.peripheral.device.firmware.faults.replyDelay = .zero
        #expect(try await harness.run { try await next.value } == ["+PING:next", "OK"], "the late +VER: was drained")
        #expect(!harness.peripheral.processedCommands.contains("AT+PING=queued"))
        // A task cancelled before it calls never writes.
        let early = Task { @MainActor in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await harness.client.runAtCommand("AT+PING=never")
        }
        await #expect(throws: XTalkBleError.cancelled) { try await early.value }
        await harness.advance(.seconds(1))
        #expect(!harness.peripheral.processedCommands.contains("AT+PING=never"))
        await harness.finish()
    }

    @Test("disconnect() fails pending work with .cancelled; link loss with .notConnected")
    func pendingWorkOnDisconnect() async throws {
        let harness = ClientHarness()
        await harness.connect()
        harness.peripheral.device.firmware.faults.silent = true
        let a = harness.start { try await harness.client.runAtCommand("AT") }
        let b = harness.start { try await harness.client.sendRfPayload(Data([1])) }
        await harness.advance(.milliseconds(50))
        harness.client.disconnect()
        await harness.clock.settle()
        await #expect(throws: XTalkBleError.cancelled) { try await a.value }
        await #expect(throws: XTalkBleError.cancelled) { try await b.value }
        harness.peripheral.device.firmware.faults.silent = false
        await harness.connect()
        harness.peripheral.device.firmware.faults.silent = true
        let c = harness.start { try await harness.client.runAtCommand("AT") }
        await harness.advance(.milliseconds(50))
        harness.peripheral.disconnect()
        await harness.advance(harness.peripheral.device.link.supervisionTimeout)
        await #expect(throws: XTalkBleError.notConnected) { try await c.value }
        await harness.finish()
    }

    @Test("a write the device refuses fails the command with .writeFailed; the client recovers")
    func refusedWrite() async throws {
        var device = ClientHarness.fastDevice()
        device.gatt.txSupportsWriteWithoutResponse = false
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        harness.peripheral.device.gatt.writeRefusal = "write not permitted"
        let error = await harness.error { try await harness.client.runAtCommand("AT+PING=refused") }
        #expect(XTalkBleError.from(error) == .writeFailed("write not permitted"))
        harness.peripheral.device.gatt.writeRefusal = nil
        #expect(try await harness.run { try await harness.client.runAtCommand("AT+PING=ok") } == ["+PING:ok", "OK"])
        await harness.finish()
    }

    @Test("cancelling a waiting session or RF send throws .cancelled; the owner may use no-wait inside its session")
    func cancelSessionAndSend() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let client = harness.client
        harness.peripheral.device.firmware.faults.replyDelay = .milliseconds(300)
        let holder = harness.start { try await client.runAtCommand("AT+PING=holder") }
        let session = harness.start { try await client.withExclusiveAtSession { _ in ["never"] } }
        let send = harness.start {
            try await client.sendRfPayload(Data([1]))
            return [String]()
        }
        await harness.advance(.milliseconds(10))
        session.cancel()
        send.cancel()
        await harness.clock.settle()
        await #expect(throws: XTalkBleError.cancelled) { try await session.value }
        await #expect(throws: XTalkBleError.cancelled) { try await send.value }
        #expect(try await harness.run { try await holder.value } == ["+PING:holder", "OK"])
        harness.peripheral.device.firmware.faults.replyDelay = .zero
        let lines = try await harness.run {
            try await client.withExclusiveAtSession { session in
                try session.sendAtCommandNoWait("AT+PING=inside")
                return try await session.runAtCommand("AT+PING=after")
            }
        }
        #expect(lines == ["+PING:after", "OK"])
        #expect(harness.atLines.contains("+PING:inside"))
        await harness.finish()
    }

    @Test("log: false keeps the command and its response lines out of every log")
    func logFalse() async throws {
        let harness = ClientHarness()
        await harness.connect()
        _ = try await harness.run { try await harness.client.runAtCommand("AT+PING=secret42", log: false) }
        _ = try await harness.run { try await harness.client.runAtCommand("AT+PING=public7") }
        let logs = harness.logMessages.joined(separator: "\n")
        #expect(!logs.contains("secret42"))
        #expect(logs.contains("public7"), "ordinary commands are logged")
        #expect(harness.atLines.contains("+PING:secret42"), "events still carry the lines")
        await harness.finish()
    }
}
