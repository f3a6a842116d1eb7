import Testing
import XTalkBleSdk
import XTalkCrypto
@testable import XTalkSimulator

// MARK: - A tiny independent bench

/// Collects what the firmware writes to its UART, one element per `output` call.
@MainActor
private final class OutputSink {
    /// The `output` calls, in order.
    var chunks: [[UInt8]] = []
}

/// One firmware on its own virtual clock, with a host-side encoder and decoder
/// written here (never the firmware's or the SDK's), so each side checks the other.
@MainActor
private final class Bench {
    /// The clock that drives every firmware timer.
    let clock = XTalkVirtualClock()
    /// The firmware under test.
    let firmware: SimulatedRadioFirmware
    /// What the firmware wrote.
    private let sink: OutputSink
    /// Output bytes already returned by `take()`.
    private var taken = 0

    /// Creates a firmware with `configuration`, seeding its randomness with `seed`.
    init(_ configuration: XTalkSimulatedFirmware = XTalkSimulatedFirmware(), seed: UInt64 = 7) {
        let sink = OutputSink()
        self.sink = sink
        firmware = SimulatedRadioFirmware(
            configuration: configuration, scheduler: clock, random: SimulatorRandom(seed: seed),
            output: { bytes, _ in sink.chunks.append(bytes) }
        )
    }

    /// Each `output` call's bytes, raw.
    var chunks: [[UInt8]] { sink.chunks }

    /// Writes `text + terminator` encoded with `encoding` (the firmware's by default), in chunks of `chunkSize`.
    func write(_ text: String, terminator: String = "\r\n", encoding: XTalkAtEncoding? = nil, chunkSize: Int = .max) {
        let key = xorKey(encoding ?? firmware.configuration.encoding)
        let bytes = (text + terminator).utf8.map { $0 ^ key }
        for start in stride(from: 0, to: bytes.count, by: chunkSize) {
            firmware.receive(Array(bytes[start..<start + min(chunkSize, bytes.count - start)]))
        }
    }

    /// The lines output since the last call, decoded with the firmware's current encoding.
    func take() -> [String] {
        let all = sink.chunks.flatMap { $0 }
        defer { taken = all.count }
        return decodeLines(Array(all[taken...]), firmware.configuration.encoding)
    }

    /// Writes one command, lets exactly one answer delay pass, and returns the lines output.
    func exchange(_ command: String) async -> [String] {
        write(command)
        await advance(firmware.configuration.processingDelay + firmware.configuration.faults.replyDelay)
        return take()
    }

    /// Moves virtual time forward.
    func advance(_ duration: Duration) async {
        await clock.advance(by: duration)
    }

    /// Moves virtual time to `offset` after the clock's origin.
    func advance(toOffset offset: Duration) async {
        await clock.advance(to: XTalkVirtualClock.Instant(offset: offset))
    }
}

/// The byte the test's own codec XORs with.
private func xorKey(_ encoding: XTalkAtEncoding) -> UInt8 {
    switch encoding {
    case .plain: 0x00
    case .xor: 0x5A
    }
}

/// Decodes bytes into CR LF terminated lines; an unterminated rest or a bare LF
/// comes back marked, so that any comparison with well-formed lines fails.
private func decodeLines(_ bytes: [UInt8], _ encoding: XTalkAtEncoding) -> [String] {
    let key = xorKey(encoding)
    var lines: [String] = []
    var current: [UInt8] = []
    for byte in bytes.map({ $0 ^ key }) {
        if byte == 0x0A {
            let text = String(decoding: current.dropLast(current.last == 0x0D ? 1 : 0), as: UTF8.self)
            lines.append(current.last == 0x0D ? text : "<bare LF>" + text)
            current = []
        } else {
            current.append(byte)
        }
    }
    if !current.isEmpty { lines.append("<unterminated>" + String(decoding: current, as: UTF8.self)) }
    return lines
}

/// Decodes even-length hex (either case); nil otherwise.
private func unhex(_ text: String) -> [UInt8]? {
    let digits = Array(text)
    guard digits.count.isMultiple(of: 2) else { return nil }
    var bytes: [UInt8] = []
    for index in stride(from: 0, to: digits.count, by: 2) {
        guard let byte = UInt8(String(digits[index...index + 1]), radix: 16) else { return nil }
        bytes.append(byte)
    }
    return bytes
}

/// Uppercase hex, two digits per byte.
private func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { byte in
        let text = String(byte, radix: 16, uppercase: true)
        return byte < 0x10 ? "0" + text : text
    }.joined()
}

/// The message PROTOCOL.md section 8 says the device signs, built here on its own.
private func challengeMessage(nonce: [UInt8], deviceID: UInt32) -> [UInt8] {
    Array("XTALK-AUTH-V1".utf8) + [0] + nonce
        + [UInt8(deviceID >> 24), UInt8(deviceID >> 16 & 0xFF), UInt8(deviceID >> 8 & 0xFF), UInt8(deviceID & 0xFF)]
}

/// A `+CHAL:` reply split into the reported device id and signature, or nil if it is malformed.
private func parseChallengeReply(_ line: String) -> (deviceID: UInt32, signature: [UInt8])? {
    guard line.hasPrefix("+CHAL:") else { return nil }
    let parts = line.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false)
    guard parts.count == 2, parts[0].count == 8, parts[1].count == 128,
        parts.allSatisfy({ $0 == $0.uppercased() }),
        let id = UInt32(parts[0], radix: 16), let signature = unhex(String(parts[1]))
    else { return nil }
    return (id, signature)
}

/// The `key=value` fields after `prefix`, in order.
private func fields(of line: String, after prefix: String) -> [(key: String, value: String)] {
    guard line.hasPrefix(prefix) else { return [] }
    return line.dropFirst(prefix.count).split(separator: ",").map { field in
        let pair = field.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        return (String(pair[0]), pair.count > 1 ? String(pair[1]) : "")
    }
}

/// The nonce 00 01 … 0F.
private let countingNonce: [UInt8] = Array(0...15)

/// The default firmware's identifier: canonical, 2026, week 48, serial 12345.
private let defaultDeviceID: UInt32 = 0x8000_0000 | 26 << 25 | 48 << 19 | 12345

/// The default firmware with `change` applied: a compact way to write one-field variants.
private func firmware(_ change: (inout XTalkSimulatedFirmware) -> Void) -> XTalkSimulatedFirmware {
    var configuration = XTalkSimulatedFirmware()
    change(&configuration)
    return configuration
}

// MARK: - Tests

@Suite(.timeLimit(.minutes(5))) @MainActor struct FirmwareTests {
    // MARK: Commands

    @Test("Answers in its own encoding, encoding every byte including CR LF", arguments: XTalkAtEncoding.allCases)
    func answersInItsOwnEncoding(encoding: XTalkAtEncoding) async {
        let bench = Bench(firmware { $0.encoding = encoding })
        #expect(await bench.exchange("AT") == ["OK"])
        let key = xorKey(encoding)
        #expect(bench.chunks == [[0x4F ^ key, 0x4B ^ key, 0x0D ^ key, 0x0A ^ key]])
        #expect(await bench.exchange("AT+VER?") == ["+VER:2.1.0", "OK"])
        #expect(await bench.exchange("AT+AUTH?") == ["+AUTH:1", "OK"])
        // A host in the other encoding gets no answer in the right encoding.
        let other: XTalkAtEncoding = encoding == .xor ? .plain : .xor
        bench.write("AT", encoding: other)
        await bench.advance(.seconds(1))
        #expect(!bench.take().contains("OK"))
    }

    /// Command, expected answer lines for the default firmware.
    nonisolated static let commandTable: [(String, [String])] = [
        ("AT", ["OK"]),
        ("AT+PING=Ab9", ["+PING:Ab9", "OK"]),
        ("AT+PING=" + String(repeating: "z", count: 32), ["+PING:" + String(repeating: "z", count: 32), "OK"]),
        ("AT+PING=" + String(repeating: "z", count: 33), ["ERROR"]),
        ("AT+PING=", ["ERROR"]),
        ("AT+PING=a-b", ["ERROR"]),
        ("AT+VER?", ["+VER:2.1.0", "OK"]),
        ("AT+FREQ?", ["+FREQ:868100000", "OK"]),
        ("AT+FREQ=150000000", ["OK"]),
        ("AT+FREQ=960000000", ["OK"]),
        ("AT+FREQ=149999999", ["ERROR"]),
        ("AT+FREQ=960000001", ["ERROR"]),
        ("AT+FREQ=abc", ["ERROR"]),
        ("AT+FREQ=", ["ERROR"]),
        ("AT+FREQ=+868100000", ["ERROR"]),
        ("AT+FREQ=99999999999999999999999", ["ERROR"]),
        ("AT+TXP?", ["+TXP:14", "OK"]),
        ("AT+TXP=-9", ["OK"]),
        ("AT+TXP=22", ["OK"]),
        ("AT+TXP=-10", ["ERROR"]),
        ("AT+TXP=23", ["ERROR"]),
        ("AT+TXP=1.5", ["ERROR"]),
        ("AT+TXP=-", ["ERROR"]),
        ("AT+AUTH?", ["+AUTH:1", "OK"]),
        ("AT+ID?", ["+ID:B5803039,EFUSE,XT2648012345", "OK"]),
        ("AT+SEND=00", ["OK"]),
        ("AT+SEND=" + String(repeating: "ab", count: 240), ["OK"]),
        ("AT+SEND=" + String(repeating: "AB", count: 241), ["ERROR"]),
        ("AT+SEND=", ["ERROR"]),
        ("AT+SEND=ABC", ["ERROR"]),
        ("AT+SEND=GG", ["ERROR"]),
        ("AT+CHAL=0011", ["+CHAL:ERR", "OK"]),
        ("AT+CHAL=" + String(repeating: "G", count: 32), ["+CHAL:ERR", "OK"]),
        ("AT+CHAL=" + String(repeating: "0", count: 34), ["+CHAL:ERR", "OK"]),
        ("at", ["ERROR"]),
        ("AT+ver?", ["ERROR"]),
        ("AT+VER", ["ERROR"]),
        ("AT ", ["ERROR"]),
        (" AT", ["ERROR"]),
        ("ATI", ["ERROR"]),
        ("AT+FOO=1", ["ERROR"]),
    ]

    @Test("Answers every command of the protocol table and its errors", arguments: commandTable)
    func answersTheCommandTable(command: String, expected: [String]) async {
        let bench = Bench()
        #expect(await bench.exchange(command) == expected)
        #expect(bench.firmware.processedCommands == [command])
        #expect(bench.chunks.count == 1)
    }

    @Test("AUTH? reports whether a challenge is required")
    func authReportsChallengeRequirement() async {
        let bench = Bench(firmware { $0.challengeRequired = false })
        #expect(await bench.exchange("AT+AUTH?") == ["+AUTH:0", "OK"])
    }

    @Test("FREQ and TXP settings hold until a reset restores the configured values")
    func settingsHoldUntilReset() async {
        let bench = Bench()
        #expect(await bench.exchange("AT+FREQ=433000000") == ["OK"])
        #expect(await bench.exchange("AT+FREQ=1") == ["ERROR"])
        #expect(await bench.exchange("AT+FREQ?") == ["+FREQ:433000000", "OK"])
        #expect(await bench.exchange("AT+TXP=-9") == ["OK"])
        #expect(await bench.exchange("AT+TXP=99") == ["ERROR"])
        #expect(await bench.exchange("AT+TXP?") == ["+TXP:-9", "OK"])
        #expect(await bench.exchange("AT+RST") == ["OK"])
        await bench.advance(.seconds(1))
        #expect(bench.take() == ["+READY"])
        #expect(await bench.exchange("AT+FREQ?") == ["+FREQ:868100000", "OK"])
        #expect(await bench.exchange("AT+TXP?") == ["+TXP:14", "OK"])
    }

    @Test("Echo precedes the answer in the same output call when on", arguments: [true, false])
    func echoesCommandsWhenOn(echo: Bool) async {
        let bench = Bench(firmware { $0.echo = echo })
        let expected = echo ? ["AT+VER?", "+VER:2.1.0", "OK"] : ["+VER:2.1.0", "OK"]
        #expect(await bench.exchange("AT+VER?") == expected)
        #expect(bench.chunks.count == 1)
    }

    @Test("Never answers from inside receive, even with zero processing delay")
    func neverAnswersInsideReceive() async {
        let bench = Bench(firmware { $0.processingDelay = .zero })
        bench.write("AT")
        #expect(bench.chunks.isEmpty)
        await bench.advance(.zero)
        #expect(bench.take() == ["OK"])
    }

    // MARK: Line handling

    @Test("Splits lines in any chunking, with CR LF or a bare LF, ignoring empty lines", arguments: [1, 20])
    func splitsLinesInAnyChunking(chunkSize: Int) async {
        let bench = Bench()
        bench.write("AT\r\nAT+VER?\nAT+PING=abc\r\n\r\n\nAT+TXP?", terminator: "\r\n", chunkSize: chunkSize)
        await bench.advance(.milliseconds(2))
        #expect(bench.take() == ["OK", "+VER:2.1.0", "OK", "+PING:abc", "OK", "+TXP:14", "OK"])
        #expect(bench.firmware.processedCommands == ["AT", "AT+VER?", "AT+PING=abc", "AT+TXP?"])
        #expect(bench.chunks.count == 4)
    }

    @Test("A line longer than maxCommandLength answers ERROR and is not processed")
    func overLongLineAnswersError() async {
        let bench = Bench(firmware { $0.maxCommandLength = 12 })
        #expect(await bench.exchange("AT+PING=ABCD") == ["+PING:ABCD", "OK"])
        #expect(await bench.exchange("AT+PING=ABCDE") == ["ERROR"])
        bench.write("AT+PING=" + String(repeating: "A", count: 5000), chunkSize: 20)
        await bench.advance(.milliseconds(2))
        #expect(bench.take() == ["ERROR"])
        bench.write("AT+PING=ABCD", terminator: "\n")
        await bench.advance(.milliseconds(2))
        #expect(bench.take() == ["+PING:ABCD", "OK"])
        #expect(bench.firmware.processedCommands == ["AT+PING=ABCD", "AT+PING=ABCD"])
    }

    @Test("After the partial-line timeout, wrong-encoding garbage is gone and the next command is answered")
    func partialLineTimeoutClearsGarbage() async {
        let bench = Bench()
        // "AT+AUTH?" CR LF in plain decodes under xor to bytes with no LF: a partial line.
        bench.write("AT+AUTH?", encoding: .plain)
        await bench.advance(.milliseconds(499))
        #expect(bench.chunks.isEmpty)
        #expect(bench.clock.pendingTimerCount == 1)
        await bench.advance(.milliseconds(1))
        #expect(bench.clock.pendingTimerCount == 0)
        #expect(await bench.exchange("AT") == ["OK"])
        #expect(bench.firmware.processedCommands == ["AT"])
    }

    @Test("A line whose head the partial-line timeout discarded is recorded as following a discard; the next is not")
    func discardedHeadIsRecorded() async {
        let bench = Bench()
        bench.write("AT+PING=ab", terminator: "")
        await bench.advance(.milliseconds(500))  // the host paused mid-line: the head is gone
        #expect(await bench.exchange("cdef") == ["ERROR"])
        #expect(await bench.exchange("AT") == ["OK"])
        let log = bench.firmware.commandLog
        #expect(log.map(\.text) == ["cdef", "AT"])
        #expect(log.map(\.followsDiscardedPartialLine) == [true, false])
        // A line that was never cut is not marked, nor is one after an empty line that followed a discard.
        bench.write("AT+PING=x", terminator: "")
        await bench.advance(.milliseconds(500))
        bench.write("")
        #expect(await bench.exchange("AT") == ["OK"])
        #expect(bench.firmware.commandLog.last?.followsDiscardedPartialLine == false)
    }

    @Test("Before the partial-line timeout, garbage joins the next command into an ERROR line")
    func garbageBeforeTimeoutYieldsError() async {
        let bench = Bench()
        bench.write("AT+AUTH?", encoding: .plain)
        await bench.advance(.milliseconds(499))
        #expect(await bench.exchange("AT") == ["ERROR"])
        #expect(bench.firmware.processedCommands.count == 1)
        #expect(bench.firmware.processedCommands != ["AT"])
    }

    @Test("Every received byte restarts the partial-line timer")
    func partialLineTimerRestartsOnEveryByte() async {
        let bench = Bench()
        bench.write("AT", terminator: "", encoding: .plain)
        await bench.advance(.milliseconds(400))
        bench.write("A", terminator: "", encoding: .plain)
        await bench.advance(.milliseconds(400))
        #expect(await bench.exchange("AT") == ["ERROR"])
    }

    @Test("Without a partial-line timeout, garbage stays until a terminator")
    func withoutTimeoutGarbageStays() async {
        let bench = Bench(firmware { $0.partialLineTimeout = nil })
        bench.write("AT+AUTH?", encoding: .plain)
        #expect(bench.clock.pendingTimerCount == 0)
        await bench.advance(.seconds(10))
        #expect(await bench.exchange("AT") == ["ERROR"])
        #expect(bench.clock.pendingTimerCount == 0)
    }

    @Test("A wrong-encoding byte that decodes to LF ends a garbage line answered ERROR")
    func wrongEncodingLineFeedMakesGarbageLine() async {
        let bench = Bench()
        // Plain "P" is 0x50, and 0x50 ^ 0x5A is LF.
        bench.write("AT+SEND=P1", encoding: .plain)
        await bench.advance(.milliseconds(2))
        #expect(bench.take() == ["ERROR"])
        #expect(bench.firmware.processedCommands.count == 1)
        await bench.advance(.milliseconds(500))
        #expect(await bench.exchange("AT") == ["OK"])
    }

    @Test("The partial-line timer runs only while a line is incomplete")
    func partialLineTimerStopsWhenLineCompletes() async {
        let bench = Bench()
        bench.write("AT", terminator: "")
        #expect(bench.clock.pendingTimerCount == 1)
        bench.write("", terminator: "\r\n")
        #expect(bench.clock.pendingTimerCount == 1)  // the answer only
        await bench.advance(.milliseconds(2))
        #expect(bench.take() == ["OK"])
        #expect(bench.clock.pendingTimerCount == 0)
    }

    // MARK: Radio

    @Test("SEND answers OK after processing and +SENDFIN:OK after the airtime")
    func sendFinishesAfterAirtime() async {
        let bench = Bench()
        bench.write("AT+SEND=48656c6c6f")
        await bench.advance(.milliseconds(1))
        #expect(bench.take().isEmpty)
        await bench.advance(.milliseconds(1))
        #expect(bench.take() == ["OK"])
        // OK at 2 ms, then 20 ms + 5 × 0.5 ms of airtime.
        await bench.advance(toOffset: .microseconds(24_499))
        #expect(bench.take().isEmpty)
        #expect(bench.firmware.transmittedFrames.isEmpty)
        await bench.advance(toOffset: .microseconds(24_500))
        #expect(bench.take() == ["+SENDFIN:OK"])
        #expect(bench.firmware.transmittedFrames == [Array("Hello".utf8)])
        #expect(bench.clock.pendingTimerCount == 0)
    }

    @Test("SEND while the radio is busy answers ERROR; other commands still work")
    func sendWhileBusyAnswersError() async {
        let bench = Bench()
        // The second frame arrives before the first one's OK: the radio is already taken.
        bench.write("AT+SEND=01\r\nAT+SEND=02")
        await bench.advance(.milliseconds(2))
        #expect(bench.take() == ["OK", "ERROR"])
        #expect(await bench.exchange("AT+SEND=03") == ["ERROR"])
        #expect(await bench.exchange("AT") == ["OK"])
        await bench.advance(.milliseconds(30))
        #expect(bench.take() == ["+SENDFIN:OK"])
        #expect(await bench.exchange("AT+SEND=04") == ["OK"])
        await bench.advance(.milliseconds(30))
        #expect(bench.take() == ["+SENDFIN:OK"])
        #expect(bench.firmware.transmittedFrames == [[0x01], [0x04]])
    }

    @Test("A failing transmission reports +SENDFIN:FAIL with its reason and keeps no frame")
    func sendFailureReportsReason() async {
        let bench = Bench(firmware { $0.sendFailureReason = "LBT" })
        #expect(await bench.exchange("AT+SEND=AA") == ["OK"])
        await bench.advance(.milliseconds(21))
        #expect(bench.take() == ["+SENDFIN:FAIL,LBT"])
        #expect(bench.firmware.transmittedFrames.isEmpty)
        #expect(await bench.exchange("AT+SEND=AA") == ["OK"])
    }

    @Test("RST answers OK, ignores input and aborts transmission until +READY after resetDuration")
    func resetIgnoresInputUntilReady() async {
        let bench = Bench(firmware { $0.airtimeBase = .seconds(1) })
        bench.write("AT+SEND=00\r\nAT+RST")
        await bench.advance(.milliseconds(1))
        bench.write("AT", terminator: "")  // partial when the reset starts: cleared
        await bench.advance(.milliseconds(1))
        #expect(bench.take() == ["OK", "OK"])
        await bench.advance(toOffset: .milliseconds(100))
        bench.write("AT")
        await bench.advance(toOffset: .milliseconds(301))
        #expect(bench.take().isEmpty)
        await bench.advance(toOffset: .milliseconds(302))
        #expect(bench.take() == ["+READY"])
        bench.write("", terminator: "\r\n")
        await bench.advance(.seconds(2))
        #expect(bench.take().isEmpty)
        #expect(bench.firmware.transmittedFrames.isEmpty)
        #expect(bench.firmware.processedCommands == ["AT+SEND=00", "AT+RST"])
        #expect(await bench.exchange("AT+SEND=00") == ["OK"])
        bench.firmware.shutDown()
    }

    /// The rebooted MCU owes nothing the old one was about to send: the
    /// slow `OK` of the earlier `AT+SEND` never comes, and no frame goes out.
    @Test("A reset answered before a queued frame's OK drops the frame and that OK, without +SENDFIN")
    func resetBeforeQueuedFrameDropsIt() async {
        let bench = Bench(firmware { $0.faults.replyDelay = .seconds(1) })
        bench.write("AT+SEND=00")
        bench.firmware.configuration.faults.replyDelay = .zero
        bench.write("AT+RST")
        await bench.advance(.seconds(3))
        #expect(bench.take() == ["OK", "+READY"])
        #expect(bench.firmware.transmittedFrames.isEmpty)
        #expect(bench.clock.pendingTimerCount == 0)
    }

    /// A rebooting radio receives no frame: traffic on the air between the
    /// reset's `OK` and `+READY` never reaches the host.
    @Test("No +DI: or +CRCERR: while the radio reboots")
    func noFramesWhileRebooting() async {
        let bench = Bench(firmware { $0.resetDuration = .milliseconds(300) })
        bench.firmware.startRadioTraffic(every: .milliseconds(20), payloadSize: 4, crcErrorEvery: 3)
        await bench.advance(.milliseconds(100))
        #expect(bench.take().count >= 4, "traffic runs")
        bench.write("AT+RST")
        await bench.advance(.milliseconds(400))
        let during = bench.take()
        #expect(during.first == "OK")
        #expect(during.firstIndex(of: "+READY").map { Array(during[1..<$0]) } == [], "\(during)")
        await bench.advance(.milliseconds(100))
        #expect(bench.take().count >= 4, "and again once it is up")
        bench.firmware.stopRadioTraffic()
    }

    // MARK: Authentication

    @Test("CHAL is signed with the development key over the exact message", arguments: [true, false])
    func challengeVerifiesWithDevelopmentKey(uppercase: Bool) async throws {
        let bench = Bench()
        let nonceHex = hexString(countingNonce)
        let lines = await bench.exchange("AT+CHAL=" + (uppercase ? nonceHex : nonceHex.lowercased()))
        try #require(lines.count == 2)
        #expect(lines[1] == "OK")
        let reply = try #require(parseChallengeReply(lines[0]))
        #expect(reply.deviceID == defaultDeviceID)
        let key = try Ed25519PublicKey(rawRepresentation: XTalkDevelopmentKey.publicKey)
        #expect(
            try key.isValidSignature(
                reply.signature, for: challengeMessage(nonce: countingNonce, deviceID: defaultDeviceID)))
        #expect(
            try !key.isValidSignature(
                reply.signature, for: challengeMessage(nonce: Array(1...16), deviceID: defaultDeviceID)))
    }

    @Test("CHAL is signed with the configured seed when one is set")
    func challengeUsesConfiguredSeed() async throws {
        let seed = [UInt8](repeating: 0x11, count: 32)
        let bench = Bench(firmware { $0.signingKeySeed = seed })
        let lines = await bench.exchange("AT+CHAL=" + hexString(countingNonce))
        let reply = try #require(parseChallengeReply(lines.first ?? ""))
        let message = challengeMessage(nonce: countingNonce, deviceID: defaultDeviceID)
        #expect(try Ed25519PrivateKey(seed: seed).publicKey.isValidSignature(reply.signature, for: message))
        let development = try Ed25519PublicKey(rawRepresentation: XTalkDevelopmentKey.publicKey)
        #expect(try !development.isValidSignature(reply.signature, for: message))
    }

    @Test("wrongSignature signs with another key: well-formed but invalid")
    func wrongSignatureFault() async throws {
        let bench = Bench(firmware { $0.faults.wrongSignature = true })
        let lines = await bench.exchange("AT+CHAL=" + hexString(countingNonce))
        #expect(lines.last == "OK")
        let reply = try #require(parseChallengeReply(lines.first ?? ""))
        let key = try Ed25519PublicKey(rawRepresentation: XTalkDevelopmentKey.publicKey)
        #expect(
            try !key.isValidSignature(
                reply.signature, for: challengeMessage(nonce: countingNonce, deviceID: defaultDeviceID)))
    }

    @Test("rejectedChallenges answers the first N well-formed challenges with +CHAL:ERR")
    func rejectedChallengesFault() async {
        let bench = Bench(firmware { $0.faults.rejectedChallenges = 2 })
        let command = "AT+CHAL=" + hexString(countingNonce)
        #expect(await bench.exchange("AT+CHAL=00") == ["+CHAL:ERR", "OK"])
        #expect(await bench.exchange(command) == ["+CHAL:ERR", "OK"])
        #expect(await bench.exchange(command) == ["+CHAL:ERR", "OK"])
        let third = await bench.exchange(command)
        #expect(parseChallengeReply(third.first ?? "") != nil)
        #expect(third.last == "OK")
    }

    @Test("malformedChallengeReply answers a +CHAL: line that does not match the format")
    func malformedChallengeReplyFault() async {
        let bench = Bench(firmware { $0.faults.malformedChallengeReply = true })
        let lines = await bench.exchange("AT+CHAL=" + hexString(countingNonce))
        #expect(lines.count == 2)
        #expect(lines.last == "OK")
        let reply = lines.first ?? ""
        #expect(reply.hasPrefix("+CHAL:"))
        #expect(reply != "+CHAL:ERR")
        #expect(parseChallengeReply(reply) == nil)
    }

    @Test("replayFirstChallengeReply answers later challenges with the first signed reply, also when switched on later")
    func replayFirstChallengeReplyFault() async throws {
        let bench = Bench()
        let first = await bench.exchange("AT+CHAL=" + hexString(countingNonce))
        let between = await bench.exchange("AT+CHAL=" + hexString(Array(16..<32)))
        #expect(between != first)
        bench.firmware.configuration.faults.replayFirstChallengeReply = true
        let otherNonce = [UInt8](repeating: 0xA5, count: 16)
        let second = await bench.exchange("AT+CHAL=" + hexString(otherNonce))
        #expect(second == first)
        let reply = try #require(parseChallengeReply(second.first ?? ""))
        let key = try Ed25519PublicKey(rawRepresentation: XTalkDevelopmentKey.publicKey)
        #expect(
            try !key.isValidSignature(
                reply.signature, for: challengeMessage(nonce: otherNonce, deviceID: defaultDeviceID)))
        #expect(
            try key.isValidSignature(
                reply.signature, for: challengeMessage(nonce: countingNonce, deviceID: defaultDeviceID)))
    }

    @Test(
        "CHAL reports and signs the override id, or a legacy id as reported",
        arguments: [
            (UInt32?.some(0x1234_5678), UInt32(0x1234_5678)),
            (UInt32?.none, XTalkSimulatedFirmware.identifier(year: 2026, week: 48, serialNumber: 12345, legacy: true)),
        ])
    func challengeSignsReportedDeviceID(override: UInt32?, expectedID: UInt32) async throws {
        let bench = Bench(
            firmware {
                $0.faults.challengeDeviceIDOverride = override
                $0.deviceID = XTalkSimulatedFirmware.identifier(year: 2026, week: 48, serialNumber: 12345, legacy: true)
            })
        let lines = await bench.exchange("AT+CHAL=" + hexString(countingNonce))
        let reply = try #require(parseChallengeReply(lines.first ?? ""))
        #expect(reply.deviceID == expectedID)
        #expect(expectedID & 0x8000_0000 == 0)
        let key = try Ed25519PublicKey(rawRepresentation: XTalkDevelopmentKey.publicKey)
        #expect(
            try key.isValidSignature(reply.signature, for: challengeMessage(nonce: countingNonce, deviceID: expectedID))
        )
    }

    @Test("A signing failure answers +CHAL:ERR")
    func signingFailureAnswersError() async {
        let bench = Bench(firmware { $0.signingKeySeed = [UInt8](repeating: 1, count: 31) })
        #expect(await bench.exchange("AT+CHAL=" + hexString(countingNonce)) == ["+CHAL:ERR", "OK"])
    }

    @Test(
        "ID? reports the raw id, the serial source and the serial",
        arguments: [
            (false, XTalkSimulatedSerialSource.efuse, "B5803039", "EFUSE"),
            (false, .configured, "B5803039", "SN"),
            (true, .efuse, "35803039", "EFUSE"),
            (true, .configured, "35803039", "SN"),
        ])
    func identityReportsIdAndSource(legacy: Bool, source: XTalkSimulatedSerialSource, id: String, sourceText: String)
        async
    {
        let configuration = XTalkSimulatedFirmware.identity(
            year: 2026, week: 48, serialNumber: 12345, legacy: legacy, source: source
        )
        let bench = Bench(configuration)
        #expect(await bench.exchange("AT+ID?") == ["+ID:\(id),\(sourceText),XT2648012345", "OK"])
    }

    // MARK: Faults

    @Test("silent outputs nothing for commands, their URCs included, yet runs them; emitted URCs still go out")
    func silentOutputsNothing() async {
        let bench = Bench(
            firmware {
                $0.faults.silent = true
                $0.echo = true
            })
        bench.write("AT\r\nAT+SEND=00\r\nAT+NOPE")
        await bench.advance(.seconds(1))
        bench.write("AT+RST")
        await bench.advance(.seconds(1))
        #expect(bench.chunks.isEmpty)
        #expect(bench.firmware.processedCommands == ["AT", "AT+SEND=00", "AT+NOPE", "AT+RST"])
        #expect(bench.firmware.transmittedFrames == [[0x00]])
        bench.firmware.emitLine("+HELLO")
        #expect(bench.take() == ["+HELLO"])
    }

    @Test("silentCommands get no answer, not even an echo, but are recorded")
    func silentCommandsGetNoAnswer() async {
        let bench = Bench(
            firmware {
                $0.faults.silentCommands = ["AT+VER"]
                $0.echo = true
            })
        #expect(await bench.exchange("AT+VER?") == [])
        #expect(await bench.exchange("AT") == ["AT", "OK"])
        #expect(bench.firmware.processedCommands == ["AT+VER?", "AT"])
    }

    @Test("replyDelay postpones every answer beyond the processing delay")
    func replyDelayPostponesAnswers() async {
        let bench = Bench(firmware { $0.faults.replyDelay = .seconds(1) })
        bench.write("AT")
        await bench.advance(toOffset: .microseconds(1_001_999))
        #expect(bench.take().isEmpty)
        await bench.advance(toOffset: .milliseconds(1002))
        #expect(bench.take() == ["OK"])
    }

    @Test("scriptedReplies replace the answer, keep the echo, pick the longest prefix and have no side effects")
    func scriptedRepliesReplaceAnswers() async {
        let bench = Bench(
            firmware {
                $0.echo = true
                $0.faults.scriptedReplies = [
                    "AT+FREQ=": ["+CME ERROR: 3"],
                    "AT+SEND=": ["OK"],
                    "AT+V": ["SHORT"],
                    "AT+VER?": ["+VER:9.9", "OK"],
                ]
            })
        #expect(await bench.exchange("AT+FREQ=433000000") == ["AT+FREQ=433000000", "+CME ERROR: 3"])
        #expect(await bench.exchange("AT+VER?") == ["AT+VER?", "+VER:9.9", "OK"])
        #expect(await bench.exchange("AT+VERX") == ["AT+VERX", "SHORT"])
        #expect(await bench.exchange("AT+SEND=00") == ["AT+SEND=00", "OK"])
        await bench.advance(.seconds(1))
        #expect(bench.take().isEmpty)
        #expect(bench.firmware.transmittedFrames.isEmpty)
        #expect(await bench.exchange("AT+FREQ?") == ["AT+FREQ?", "+FREQ:868100000", "OK"])
    }

    @Test("A scripted reply with no lines and no echo makes no output call at all")
    func emptyScriptedReplyOutputsNothing() async {
        let bench = Bench(firmware { $0.faults.scriptedReplies = ["AT+VER?": []] })
        #expect(await bench.exchange("AT+VER?") == [])
        #expect(bench.chunks.isEmpty)
        #expect(bench.firmware.processedCommands == ["AT+VER?"])
    }

    @Test("garbageBeforeReplies writes that many random bytes before each answer, in the same output call")
    func garbagePrecedesEachAnswer() async {
        let bench = Bench(firmware { $0.faults.garbageBeforeReplies = 5 }, seed: 99)
        let reference = SimulatorRandom(seed: 99)
        let encodedOK: [UInt8] = [0x4F, 0x4B, 0x0D, 0x0A].map { $0 ^ 0x5A }
        for _ in 0..<2 {
            bench.write("AT")
            await bench.advance(.milliseconds(2))
        }
        #expect(bench.chunks == [reference.bytes(5) + encodedOK, reference.bytes(5) + encodedOK])
    }

    @Test("An answer already scheduled goes out after the configuration changes; later commands follow the change")
    func configurationChangesApplyToLaterCommands() async {
        let bench = Bench()
        bench.write("AT")
        bench.firmware.configuration.faults.silent = true
        await bench.advance(.milliseconds(2))
        #expect(bench.take() == ["OK"])
        #expect(await bench.exchange("AT") == [])
        bench.firmware.configuration.faults.silent = false
        bench.firmware.configuration.encoding = .plain
        #expect(await bench.exchange("AT+VER?") == ["+VER:2.1.0", "OK"])
        #expect(bench.chunks.last == Array("+VER:2.1.0\r\nOK\r\n".utf8))
    }

    // MARK: Unsolicited output

    @Test("emitRadioFrame and emitCrcError share one counter and report their default fields")
    func radioFrameAndCrcErrorFields() async throws {
        let bench = Bench()
        #expect(await bench.exchange("AT+TXP=5") == ["OK"])
        bench.firmware.emitRadioFrame([0xAB, 0x01])
        bench.firmware.emitRadioFrame([0x7F])
        bench.firmware.emitCrcError()
        let lines = bench.take()
        try #require(lines.count == 3)
        let first = fields(of: lines[0], after: "+DI:")
        #expect(first.map(\.key) == ["cnt", "len", "slot", "snr", "rssi", "txp", "data"])
        let values = Dictionary(uniqueKeysWithValues: first.map { ($0.key, $0.value) })
        #expect(values["cnt"] == "1")
        #expect(values["len"] == "2")
        #expect(values["txp"] == "5")
        #expect(values["data"] == "AB01")
        #expect((0...7).contains(Int(values["slot"] ?? "") ?? -1))
        #expect((-5...12).contains(Int(values["snr"] ?? "") ?? 99))
        #expect((-110 ... -60).contains(Int(values["rssi"] ?? "") ?? 0))
        #expect(fields(of: lines[1], after: "+DI:").first?.value == "2")
        let crc = fields(of: lines[2], after: "+CRCERR:")
        #expect(crc.map(\.key) == ["cnt", "len", "rssi", "snr"])
        #expect(crc.first?.value == "3")
        bench.firmware.emitRadioFrame([1], fields: "x=1")
        bench.firmware.emitCrcError(fields: "cnt=9")
        bench.firmware.emitCrcError()
        let more = bench.take()
        #expect(more.prefix(2) == ["+DI:x=1", "+CRCERR:cnt=9"])
        #expect(fields(of: more.last ?? "", after: "+CRCERR:").first?.value == "6")
    }

    @Test("emitLine encodes and terminates; emitRawBytes writes bytes as they are", arguments: XTalkAtEncoding.allCases)
    func emitLineAndRawBytes(encoding: XTalkAtEncoding) {
        let bench = Bench(firmware { $0.encoding = encoding })
        bench.firmware.emitLine("+HELLO")
        bench.firmware.emitRawBytes([0x0A, 0xFF, 0x00])
        let key = xorKey(encoding)
        #expect(bench.chunks == [Array("+HELLO\r\n".utf8).map { $0 ^ key }, [0x0A, 0xFF, 0x00]])
    }

    @Test("Radio traffic emits a frame every interval, every crcErrorEvery-th one a CRC error, until stopped")
    func periodicTraffic() async {
        let bench = Bench()
        bench.firmware.startRadioTraffic(every: .milliseconds(100), payloadSize: 8, crcErrorEvery: 3)
        await bench.advance(.milliseconds(950))
        #expect(bench.chunks.count == 9)
        await bench.advance(.milliseconds(50))
        let lines = bench.take()
        #expect(lines.count == 10)
        for (index, line) in lines.enumerated() {
            let isCrc = (index + 1).isMultiple(of: 3)
            #expect(line.hasPrefix(isCrc ? "+CRCERR:" : "+DI:"), "frame \(index + 1): \(line)")
            let values = fields(of: line, after: isCrc ? "+CRCERR:" : "+DI:")
            #expect(values.first?.value == String(index + 1))
            #expect(values.first { $0.key == "len" }?.value == "8")
            if !isCrc { #expect(values.last?.value.count == 16) }
        }
        bench.firmware.stopRadioTraffic()
        #expect(bench.clock.pendingTimerCount == 0)
        await bench.advance(.seconds(1))
        #expect(bench.take().isEmpty)
    }

    @Test("Starting radio traffic replaces the running traffic")
    func startingTrafficReplacesRunningTraffic() async {
        let bench = Bench()
        bench.firmware.startRadioTraffic(every: .milliseconds(100), payloadSize: 4)
        bench.firmware.startRadioTraffic(every: .milliseconds(250), payloadSize: 2)
        await bench.advance(.seconds(1))
        let lines = bench.take()
        #expect(lines.count == 4)
        #expect(lines.allSatisfy { fields(of: $0, after: "+DI:").first { $0.key == "len" }?.value == "2" })
        bench.firmware.startRadioTraffic(every: .zero, payloadSize: 2)
        #expect(bench.clock.pendingTimerCount == 0)
    }

    // MARK: Teardown

    @Test("shutDown cancels every pending timer and clears the line buffer")
    func shutDownCancelsEverything() async {
        let bench = Bench()
        bench.write("AT+SEND=00")
        await bench.advance(.milliseconds(2))
        bench.firmware.configuration.faults.replyDelay = .seconds(1)
        bench.write("AT+RST\r\nAT\r\nAT+V", terminator: "")
        bench.firmware.startRadioTraffic(every: .milliseconds(10), payloadSize: 1)
        // Airtime, two answers, the partial line and the traffic.
        #expect(bench.clock.pendingTimerCount == 5)
        bench.firmware.shutDown()
        #expect(bench.clock.pendingTimerCount == 0)
        let written = bench.chunks.count
        await bench.advance(.seconds(5))
        #expect(bench.chunks.count == written)
        // The partial "AT+V" is gone: a terminator alone now makes an empty, ignored line.
        bench.firmware.configuration.faults.replyDelay = .zero
        bench.write("", terminator: "\r\n")
        await bench.advance(.seconds(1))
        #expect(bench.chunks.count == written)
        // A reset in progress is cancelled too, and the UART listens again.
        #expect(await bench.exchange("AT+RST").last == "OK")
        #expect(bench.clock.pendingTimerCount == 1)
        bench.firmware.shutDown()
        #expect(bench.clock.pendingTimerCount == 0)
        #expect(await bench.exchange("AT") == ["OK"])
    }
}
