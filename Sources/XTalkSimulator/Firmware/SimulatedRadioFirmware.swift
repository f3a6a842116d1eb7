import XTalkBleSdk
import XTalkCrypto

/// The radio MCU of a simulated xTalk device: reads AT command lines from its
/// UART, answers them as PROTOCOL.md sections 4–9 describe, and reproduces
/// the variants and faults of `XTalkSimulatedFirmware`.
///
/// All output goes through timers on the injected scheduler, never from
/// inside `receive`, so the link layer is never re-entered. Each command's
/// answer (garbage fault, echo, response lines, final code) is one `output` call.
@MainActor
package final class SimulatedRadioFirmware {
    /// Mutable at run time (tests flip faults mid-session); takes effect for
    /// later commands, while answers already scheduled keep what they captured.
    package var configuration: XTalkSimulatedFirmware
    /// Every complete command line the firmware processed, decoded, in order.
    /// Empty and over-long lines are not listed (an over-long line's content is discarded).
    package private(set) var processedCommands: [String] = []
    /// Payloads of frames transmitted on air by `AT+SEND`, in order (failed frames excluded).
    package private(set) var transmittedFrames: [[UInt8]] = []

    /// Where timers run: the virtual clock in tests.
    private let scheduler: any TimerScheduling
    /// The only randomness: garbage bytes and radio frame metadata.
    private let random: SimulatorRandom
    /// Receives the encoded bytes the MCU writes to its UART, and what they are.
    private let output: @MainActor ([UInt8], XTalkDeviceOutput) -> Void
    /// Command lines processed so far (the next one's number).
    package private(set) var commandCount = 0
    /// The connection the UART's host side is on now (set by the peripheral), for the command log.
    package var connection = 0
    /// Every command line processed: its number, text, when and on which connection (bounded like the logs).
    package private(set) var commandLog: [XTalkDeviceRecord.Command] = []

    /// Every live timer by a firmware-local id, so that `shutDown` can cancel them all.
    private var timers: [Int: TimerToken] = [:]
    /// The last firmware-local timer id handed out.
    private var lastTimerID = 0
    /// Decoded bytes of the line being received, terminator excluded; holds at
    /// most `maxCommandLength + 1` bytes (room for the CR of CR LF).
    private var lineBuffer: [UInt8] = []
    /// The line being received outgrew `maxCommandLength`: its content is gone and its terminator answers `ERROR`.
    private var lineOverflowed = false
    /// The inter-character timer that discards a partial line.
    private var partialLineTimer: Int?
    /// That timer discarded a partial line since the last line ended (for the record).
    private var discardedPartialLine = false
    /// Set while the MCU resets (from `AT+RST`'s `OK` to `+READY`): the UART
    /// is deaf meanwhile, and the radio neither receives frames nor sends
    /// what the old MCU still had to say.
    private var resetTimer: Int?
    /// Answers scheduled and maybe not sent yet (a reset cancels them).
    private var answerTimers: [Int] = []
    /// What the radio is doing; `AT+SEND` answers `ERROR` unless it is idle.
    private var radio = Radio.idle
    /// The last frame number handed to `AT+SEND`, so a stale follow-up cannot start another frame.
    private var lastFrameNumber = 0
    /// Frequency set by `AT+FREQ=`; nil follows the configuration (as after a reset).
    private var frequencySetting: Int?
    /// Transmit power set by `AT+TXP=`; nil follows the configuration (as after a reset).
    private var txPowerSetting: Int?
    /// The `cnt` of the last `+DI:` or `+CRCERR:` (they share one counter, as the radio counts frames).
    private var radioEventCount = 0
    /// Well-formed challenges seen over the firmware's lifetime (for `rejectedChallenges`).
    private var challengeCount = 0
    /// The `+CHAL:` line produced for the first nonce ever signed (for `replayFirstChallengeReply`).
    private var firstChallengeReply: String?
    /// The timer of the next periodic radio frame, while traffic runs.
    private var trafficTimer: Int?
    /// The timer of the next noise line, while line noise runs.
    private var noiseTimer: Int?
    /// Frames emitted by the running traffic (for `crcErrorEvery`).
    private var trafficFrameCount = 0

    /// A fixed seed other than the development key's, for the `wrongSignature` fault.
    private static let impostorSeed: [UInt8] = Array(repeating: 0x42, count: 32)

    /// What the radio is doing.
    private enum Radio: Equatable {
        /// Free: `AT+SEND` may queue a frame. Goes to `queued` on `AT+SEND`.
        case idle
        /// `AT+SEND` accepted this frame; airtime starts when its `OK` goes out.
        /// Goes to `transmitting`, or back to `idle` on a reset.
        case queued(frame: Int)
        /// On air until this timer fires with `+SENDFIN:`; a reset aborts it back to `idle`.
        case transmitting(timer: Int)
    }

    /// One command's answer: the lines after the echo, and what happens once they are out.
    private struct Answer {
        /// Response lines, final result code included.
        var lines: [String]
        /// Work that starts when the answer has been written.
        var followUp: FollowUp?

        /// A bare `OK`.
        static let ok = Answer(lines: ["OK"])
        /// A bare `ERROR`.
        static let error = Answer(lines: ["ERROR"])
        /// One response line, then `OK`.
        static func ok(_ line: String) -> Answer { Answer(lines: [line, "OK"]) }
    }

    /// Work a command starts once its answer has been written.
    private enum FollowUp {
        /// Put the queued frame on air for `airtime`, then report `+SENDFIN:`.
        case transmit(frame: Int, payload: [UInt8], airtime: Duration, failureReason: String?)
        /// Reset the MCU for `duration`, then report `+READY`.
        case reset(duration: Duration)
    }

    /// Creates the firmware in its power-on state; nothing is output until a
    /// command arrives or an `emit…` method is called.
    package init(
        configuration: XTalkSimulatedFirmware,
        scheduler: any TimerScheduling,
        random: SimulatorRandom,
        output: @escaping @MainActor ([UInt8], XTalkDeviceOutput) -> Void
    ) {
        self.configuration = configuration
        self.scheduler = scheduler
        self.random = random
        self.output = output
    }

    /// The most entries the command and frame logs keep (the oldest go), so
    /// that a long session on the real clock does not grow without bound.
    package static let logLimit = 10_000

    /// Keeps the newest `logLimit` entries, trimming in batches.
    private static func bound<Element>(_ log: inout [Element]) {
        if log.count > 2 * logLimit { log.removeFirst(log.count - logLimit) }
    }

    // MARK: UART input

    /// Takes bytes written by the host as the BLE module hands them over the
    /// UART: still encoded, in any chunking. Complete lines are processed now;
    /// their answers go out later through the scheduler.
    package func receive(_ bytes: [UInt8]) {
        // A resetting MCU is deaf: what arrives meanwhile is lost, as on hardware.
        guard resetTimer == nil, !bytes.isEmpty else { return }
        for byte in bytes {
            let decoded = FirmwareText.transcode(byte, configuration.encoding)
            if decoded == 0x0A {
                completeLine()
            } else if lineOverflowed {
                continue
            } else if lineBuffer.count > configuration.maxCommandLength {
                // Bounded buffer: drop the content, remember to answer ERROR at the terminator.
                lineOverflowed = true
                lineBuffer.removeAll()
            } else {
                lineBuffer.append(decoded)
            }
        }
        // Time does not move inside one call, so re-arming once equals re-arming per byte.
        rearmPartialLineTimer()
    }

    /// Ends the line being received at its LF: strips one CR, ignores an empty
    /// line, answers `ERROR` to an over-long one and processes the rest.
    private func completeLine() {
        var line = lineBuffer
        let overflowed = lineOverflowed
        lineBuffer.removeAll()
        lineOverflowed = false
        if line.last == 0x0D { line.removeLast() }
        if overflowed || line.count > configuration.maxCommandLength {
            deliver(.error, echo: nil, quiet: configuration.faults.silent, command: nil)
        } else if !line.isEmpty {
            process(line)
        }
        discardedPartialLine = false
    }

    /// Starts the inter-character timer afresh while a partial line is buffered, and stops it otherwise.
    private func rearmPartialLineTimer() {
        cancelTimer(partialLineTimer)
        partialLineTimer = nil
        guard let timeout = configuration.partialLineTimeout, !lineBuffer.isEmpty || lineOverflowed else { return }
        partialLineTimer = schedule(after: timeout) { firmware in
            firmware.partialLineTimer = nil
            firmware.clearLine()
            firmware.discardedPartialLine = true
        }
    }

    /// Discards the partial line and its timer.
    private func clearLine() {
        lineBuffer.removeAll()
        lineOverflowed = false
        cancelTimer(partialLineTimer)
        partialLineTimer = nil
    }

    // MARK: Commands

    /// Records a command line, runs it (or its scripted reply) and schedules its answer.
    private func process(_ line: [UInt8]) {
        let command = String(decoding: line, as: UTF8.self)
        processedCommands.append(command)
        Self.bound(&processedCommands)
        let number = commandCount
        commandCount += 1
        var entry = XTalkDeviceRecord.Command(
            number: number, text: command, at: scheduler.elapsed, connection: connection)
        entry.followsDiscardedPartialLine = discardedPartialLine
        commandLog.append(entry)
        Self.bound(&commandLog)
        let faults = configuration.faults
        // Silence hides what a command produces, not the command: it still runs, like an MCU whose UART TX is lost.
        let quiet = faults.silent || faults.silentCommands.contains { FirmwareText.hasPrefix(command, $0) }
        // The longest matching prefix wins, so overlapping scripts stay deterministic; a script has no side effects.
        let script = faults.scriptedReplies
            .filter { FirmwareText.hasPrefix(command, $0.key) }
            .max { $0.key.utf8.count < $1.key.utf8.count }
        let answer = script.map { Answer(lines: $0.value) } ?? execute(command)
        deliver(answer, echo: configuration.echo ? line : nil, quiet: quiet, command: number)
    }

    /// Runs one command of PROTOCOL.md section 6 and returns its answer; unknown commands answer `ERROR`.
    private func execute(_ command: String) -> Answer {
        switch command {
        case "AT": return .ok
        case "AT+VER?": return .ok("+VER:" + configuration.version)
        case "AT+FREQ?": return .ok("+FREQ:\(frequencySetting ?? configuration.frequency)")
        case "AT+TXP?": return .ok("+TXP:\(currentTxPower)")
        case "AT+AUTH?": return .ok(configuration.challengeRequired ? "+AUTH:1" : "+AUTH:0")
        case "AT+RST": return Answer(lines: ["OK"], followUp: .reset(duration: configuration.resetDuration))
        case "AT+ID?":
            let id = configuration
            return .ok("+ID:\(FirmwareText.hex(id.deviceID)),\(id.serialSource.rawValue),\(id.serial)")
        default: break
        }
        if let token = FirmwareText.argument(of: command, after: "AT+PING=") {
            return FirmwareText.isPingToken(token) ? .ok("+PING:" + token) : .error
        }
        if let text = FirmwareText.argument(of: command, after: "AT+FREQ=") {
            guard let hz = FirmwareText.decimal(text), (150_000_000...960_000_000).contains(hz) else { return .error }
            frequencySetting = hz
            return .ok
        }
        if let text = FirmwareText.argument(of: command, after: "AT+TXP=") {
            guard let dbm = FirmwareText.decimal(text), (-9...22).contains(dbm) else { return .error }
            txPowerSetting = dbm
            return .ok
        }
        if let hex = FirmwareText.argument(of: command, after: "AT+SEND=") { return send(hex) }
        if let hex = FirmwareText.argument(of: command, after: "AT+CHAL=") { return challenge(hex) }
        return .error
    }

    /// The transmit power in force: the last `AT+TXP=` since the last reset, or the configuration's.
    private var currentTxPower: Int { txPowerSetting ?? configuration.txPower }

    /// `AT+SEND=<hex>`: queues a 1–240 byte frame unless the radio is busy.
    private func send(_ hex: String) -> Answer {
        guard let payload = FirmwareText.bytes(fromHex: hex), (1...240).contains(payload.count),
            radio == .idle
        else { return .error }
        lastFrameNumber += 1
        radio = .queued(frame: lastFrameNumber)
        let airtime = configuration.airtimeBase + configuration.airtimePerByte * payload.count
        let followUp = FollowUp.transmit(
            frame: lastFrameNumber, payload: payload, airtime: airtime,
            failureReason: configuration.sendFailureReason
        )
        return Answer(lines: ["OK"], followUp: followUp)
    }

    /// `AT+CHAL=<32 hex>`: signs the challenge message of PROTOCOL.md section 8,
    /// or answers as the configured faults dictate.
    private func challenge(_ hex: String) -> Answer {
        guard hex.utf8.count == 32, let nonce = FirmwareText.bytes(fromHex: hex) else { return .ok("+CHAL:ERR") }
        challengeCount += 1
        let faults = configuration.faults
        if challengeCount <= faults.rejectedChallenges { return .ok("+CHAL:ERR") }
        if faults.malformedChallengeReply { return .ok("+CHAL:NOTHEX,12") }
        if faults.replayFirstChallengeReply, let first = firstChallengeReply { return .ok(first) }
        let deviceID = faults.challengeDeviceIDOverride ?? configuration.deviceID
        let message = Array("XTALK-AUTH-V1".utf8) + [0x00] + nonce + FirmwareText.bigEndianBytes(deviceID)
        let seed = faults.wrongSignature ? Self.impostorSeed : configuration.signingKeySeed ?? XTalkDevelopmentKey.seed
        // A bad seed or an unavailable crypto backend is the device's failure to sign: it rejects the challenge.
        guard let signature = try? Ed25519PrivateKey(seed: seed).signature(for: message) else {
            return .ok("+CHAL:ERR")
        }
        let reply = "+CHAL:" + FirmwareText.hex(deviceID) + "," + FirmwareText.hex(signature)
        if firstChallengeReply == nil { firstChallengeReply = reply }
        return .ok(reply)
    }

    // MARK: Answers and their follow-ups

    /// Schedules one answer after `processingDelay + replyDelay`: garbage (fault),
    /// echo and response lines in one `output` call, then the answer's follow-up.
    /// A `quiet` answer outputs nothing, and neither does its follow-up.
    private func deliver(_ answer: Answer, echo: [UInt8]?, quiet: Bool, command: Int?) {
        let garbageCount = configuration.faults.garbageBeforeReplies
        if answerTimers.count >= 64 { answerTimers.removeAll { timers[$0] == nil } }  // those sent
        let timer = schedule(
            after: configuration.processingDelay + configuration.faults.replyDelay
        ) { firmware in
            if !quiet {
                // Truly arbitrary bytes, written raw: they may decode to CR or LF and split or end lines.
                var bytes = firmware.random.bytes(garbageCount)
                let encoding = firmware.configuration.encoding
                if let echo { bytes += FirmwareText.encodeLine(echo, encoding) }
                for line in answer.lines { bytes += FirmwareText.encodeLine(Array(line.utf8), encoding) }
                let lines = (echo.map { [String(decoding: $0, as: UTF8.self)] } ?? []) + answer.lines
                if !bytes.isEmpty {
                    firmware.output(bytes, XTalkDeviceOutput(kind: .answer(command: command), lines: lines))
                }
            }
            if let followUp = answer.followUp, let command {
                firmware.perform(followUp, quiet: quiet, command: command)
            }
        }
        answerTimers.append(timer)
    }

    /// Starts what an answer leaves running: a transmission or a reset.
    private func perform(_ followUp: FollowUp, quiet: Bool, command: Int) {
        switch followUp {
        case .transmit(let frame, let payload, let airtime, let failureReason):
            // A reset since the command aborted the frame.
            guard radio == .queued(frame: frame) else { return }
            radio = .transmitting(
                timer: schedule(after: airtime) { firmware in
                    firmware.radio = .idle
                    var line = "+SENDFIN:OK"
                    if let failureReason {
                        line = "+SENDFIN:FAIL," + failureReason
                    } else {
                        firmware.transmittedFrames.append(payload)
                        Self.bound(&firmware.transmittedFrames)
                    }
                    if !quiet { firmware.emitLine(line, as: .sendFinished(command: command)) }
                })
        case .reset(let duration):
            switch radio {
            case .transmitting(let timer): cancelTimer(timer)
            case .idle, .queued: break
            }
            radio = .idle
            clearLine()
            frequencySetting = nil
            txPowerSetting = nil
            // The rebooted MCU owes nothing the old one was about to send.
            for timer in answerTimers { cancelTimer(timer) }
            answerTimers.removeAll()
            cancelTimer(resetTimer)
            resetTimer = schedule(after: duration) { firmware in
                firmware.resetTimer = nil
                if !quiet { firmware.emitLine("+READY", as: .ready(command: command)) }
            }
        }
    }

    // MARK: Unsolicited output

    /// Emits a received radio frame as a `+DI:` URC with fields cnt, len, slot,
    /// snr, rssi, txp and data (uppercase hex), or exactly `"+DI:" + fields`.
    /// Either way the frame counter shared with `+CRCERR:` advances.
    package func emitRadioFrame(_ payload: [UInt8], fields: String? = nil) {
        guard resetTimer == nil else { return }  // a rebooting radio receives nothing
        radioEventCount += 1
        let text =
            fields ?? "cnt=\(radioEventCount),len=\(payload.count),slot=\(random.int(in: 0...7))"
            + ",snr=\(random.int(in: -5...12)),rssi=\(random.int(in: -110 ... -60)),txp=\(currentTxPower)"
            + ",data=\(FirmwareText.hex(payload))"
        emitLine("+DI:" + text, as: .radioFrame)
    }

    /// Emits a `+CRCERR:` URC with fields cnt, len (random 1…240), rssi and snr, or exactly `"+CRCERR:" + fields`.
    package func emitCrcError(fields: String? = nil) {
        emitCrcError(length: random.int(in: 1...240), fields: fields)
    }

    /// Emits a `+CRCERR:` URC for a frame of `length` bytes, advancing the shared frame counter.
    private func emitCrcError(length: Int, fields: String?) {
        guard resetTimer == nil else { return }
        radioEventCount += 1
        let text =
            fields ?? "cnt=\(radioEventCount),len=\(length)"
            + ",rssi=\(random.int(in: -110 ... -60)),snr=\(random.int(in: -5...12))"
        emitLine("+CRCERR:" + text, as: .crcError)
    }

    /// Emits any text line at once, encoded with the current encoding, CR LF appended.
    package func emitLine(_ text: String, as kind: XTalkDeviceOutput.Kind = .line) {
        output(
            FirmwareText.encodeLine(Array(text.utf8), configuration.encoding),
            XTalkDeviceOutput(kind: kind, lines: [text]))
    }

    /// Emits raw bytes at once, as they are (no encoding, no terminator): garbage.
    package func emitRawBytes(_ bytes: [UInt8]) {
        output(bytes, XTalkDeviceOutput(kind: .raw, lines: []))
    }

    /// Starts periodic radio traffic, replacing any running: every `interval` a
    /// `+DI:` with a random `payloadSize`-byte payload, every `crcErrorEvery`-th
    /// frame a `+CRCERR:` instead. A non-positive interval only stops the traffic
    /// (it would otherwise fire forever at one instant).
    package func startRadioTraffic(every interval: Duration, payloadSize: Int, crcErrorEvery: Int? = nil) {
        stopRadioTraffic()
        guard interval > .zero else { return }
        scheduleTrafficFrame(every: interval, payloadSize: payloadSize, crcErrorEvery: crcErrorEvery)
    }

    /// Schedules the next frame of the running traffic; each frame schedules the one after it.
    private func scheduleTrafficFrame(every interval: Duration, payloadSize: Int, crcErrorEvery: Int?) {
        trafficTimer = schedule(after: interval) { firmware in
            firmware.trafficFrameCount += 1
            if let every = crcErrorEvery, every > 0, firmware.trafficFrameCount.isMultiple(of: every) {
                firmware.emitCrcError(length: max(0, payloadSize), fields: nil)
            } else {
                firmware.emitRadioFrame(firmware.random.bytes(payloadSize))
            }
            firmware.scheduleTrafficFrame(every: interval, payloadSize: payloadSize, crcErrorEvery: crcErrorEvery)
        }
    }

    /// Stops periodic radio traffic; does nothing when none runs.
    package func stopRadioTraffic() {
        cancelTimer(trafficTimer)
        trafficTimer = nil
        trafficFrameCount = 0
    }

    /// Starts periodic line noise, replacing any running: every `interval`, a
    /// line of `length` random bytes that always holds a non-printable byte
    /// (so it is never mistaken for an AT line), then CR LF, in the current
    /// encoding. A misbehaving UART or a noisy board, between replies.
    package func startLineNoise(every interval: Duration, length: Int) {
        stopLineNoise()
        guard interval > .zero else { return }
        noiseTimer = schedule(after: interval) { firmware in
            let encoding = firmware.configuration.encoding
            var noise = firmware.random.bytes(max(1, length)).map { byte -> UInt8 in
                // Never a terminator inside the noise: it stays one line.
                let decoded = FirmwareText.transcode(byte, encoding)
                return decoded == 0x0A || decoded == 0x0D ? FirmwareText.transcode(0x00, encoding) : byte
            }
            // A non-printable byte in every 4096-byte piece: a longer line
            // reaches the host in pieces of 4096 (PROTOCOL.md section 4), and
            // a printable piece would pose as an AT line.
            for index in stride(from: 0, to: noise.count, by: 4_096) {
                noise[index] = FirmwareText.transcode(0x01, encoding)
            }
            noise += [FirmwareText.transcode(0x0D, encoding), FirmwareText.transcode(0x0A, encoding)]
            firmware.output(noise, XTalkDeviceOutput(kind: .noise, lines: []))
            firmware.startLineNoise(every: interval, length: length)
        }
    }

    /// Stops periodic line noise; does nothing when none runs.
    package func stopLineNoise() {
        cancelTimer(noiseTimer)
        noiseTimer = nil
    }

    // MARK: Timers

    /// Cancels every timer the firmware holds (pending answers, airtime,
    /// traffic, reset, partial line) and clears the UART line buffer, so that
    /// nothing is left pending at teardown.
    package func shutDown() {
        for token in timers.values { scheduler.cancel(token) }
        timers.removeAll()
        partialLineTimer = nil
        resetTimer = nil
        trafficTimer = nil
        noiseTimer = nil
        trafficFrameCount = 0
        // With its timers gone, a queued or on-air frame can never finish.
        radio = .idle
        lineBuffer.removeAll()
        lineOverflowed = false
    }

    /// Schedules `action` and tracks its token until it fires or is cancelled.
    /// The action gets the firmware as an argument, so the scheduler never keeps it alive.
    @discardableResult
    private func schedule(after delay: Duration, _ action: @escaping @MainActor (SimulatedRadioFirmware) -> Void) -> Int
    {
        lastTimerID += 1
        let id = lastTimerID
        timers[id] = scheduler.schedule(after: delay) { [weak self] in
            guard let self else { return }
            self.timers[id] = nil
            action(self)
        }
        return id
    }

    /// Cancels a tracked timer; nil, fired or unknown ids do nothing.
    private func cancelTimer(_ id: Int?) {
        guard let id, let token = timers.removeValue(forKey: id) else { return }
        scheduler.cancel(token)
    }
}
