import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkSimulator

/// One seeded chaos scenario: a random device (firmware variant, link, faults),
/// then a random mix of concurrent AT commands, RF sends, exclusive sessions,
/// no-wait calls, authentications, radio-frame floods, line noise, encoding
/// switches, disconnects at random byte offsets, Bluetooth power cycles,
/// cancellations and teardown, all in virtual time. Invariants are checked
/// after every step and at the end; the same seed replays the same scenario.
@MainActor
package final class ChaosScenario {
    package let seed: UInt64
    private let random: SimulatorRandom
    private let clock: XTalkVirtualClock
    private let environment: XTalkSimulatedEnvironment
    private let client: XTalkBleClient
    private let firmwareEncoding: XTalkAtEncoding
    private let expectedDeviceID: UInt32
    private let expectedSerial: String
    private var peripheral: XTalkSimulatedPeripheral { environment.peripherals[0] }

    private var trace: [String] = []
    private let trafficLog: TrafficLog
    private let traceTraffic: Bool
    private var violations: [String] = []
    private var calls: [ChaosCall] = []
    private var nextToken = 0
    private var nextFrame: UInt32 = 0
    private var noiseStopsAt: Duration?
    /// Responses that were an earlier command's late reply (the protocol's limit).
    private var lateReplies = 0

    // What the app saw.
    private var eventCount = 0
    private var eventsAtTeardown: Int?
    private var receivedFrames: [UInt32] = []
    /// The `.passthroughRaw` events' bytes, in order.
    private var rawUnits: [Data] = []
    private var streamReader: Task<Int, Never>?

    // What may excuse a lost radio frame.
    private var framesEmittedWhileReady: [UInt32] = []
    private var linkTrouble = false
    private var encodingTrouble = false
    private var tornDown = false
    /// The app itself ended pending work (disconnect(), teardown()).
    private var appEndedWork = false
    private var droppedAtStart = 0

    /// `traceTraffic` adds the client's debug log (every line sent and
    /// received) to the trace: for replaying one seed.
    package init(seed: UInt64, traceTraffic: Bool = false) {
        self.seed = seed
        let random = SimulatorRandom(seed: seed)
        self.random = random
        clock = XTalkVirtualClock(settleYields: 4)
        var device = XTalkSimulatedDevice()
        var firmware = device.firmware
        firmware.encoding = random.chance(0.5) ? .xor : .plain
        firmware.echo = random.chance(0.3)
        firmware.challengeRequired = random.chance(0.7)
        firmware.processingDelay = random.chance(0.1) ? .milliseconds(random.int(in: 50...400)) : .milliseconds(random.int(in: 0...5))
        if random.chance(0.15) { firmware.faults.replyDelay = .milliseconds(random.int(in: 20...600)) }
        if random.chance(0.1) { firmware.faults.silentCommands = ["AT+PING=t\(random.int(in: 0...20))"] }
        firmware.airtimeBase = .milliseconds(random.int(in: 1...30))
        firmware.airtimePerByte = .microseconds(random.int(in: 10...500))
        if random.chance(0.1) { firmware.sendFailureReason = "CAD_BUSY" }
        device.firmware = firmware
        device.link.mtu = random.pick([23, 64, 185, 247])
        device.link.connectionInterval = random.pick([.milliseconds(7.5), .milliseconds(15), .milliseconds(30)])
        device.link.packetsPerConnectionEvent = random.int(in: 1...6)
        device.link.writeWithoutResponseCredits = random.int(in: 1...8)
        device.link.notificationSplit = random.pick([.packed, .random, .singleBytes])
        device.link.connectDelay = .milliseconds(random.int(in: 10...80))
        device.gatt.txSupportsWriteWithoutResponse = random.chance(0.8)
        firmwareEncoding = firmware.encoding
        expectedDeviceID = XTalkDeviceIDCodec.canonicalize(firmware.deviceID)
        expectedSerial = firmware.serial
        environment = XTalkSimulatedEnvironment(devices: [device], clock: clock, seed: seed ^ 0xC4A0_5EED)
        self.traceTraffic = traceTraffic
        var options = XTalkBleClientOptions()
        let traffic = TrafficLog()
        trafficLog = traffic
        if traceTraffic {
            options.logLevel = .debug
            options.logHandler = { [clock] level, message in traffic.append("[\(clock.elapsed)] \(level): \(message)") }
        }
        client = XTalkBleClient(simulator: environment, options: options)
        let startsRight = random.chance(0.8)
        client.setAtEncoding(startsRight ? firmware.encoding : (firmware.encoding == .xor ? .plain : .xor))
        note("device: \(firmware.encoding) firmware, echo \(firmware.echo), challenge \(firmware.challengeRequired), "
             + "processing \(firmware.processingDelay), reply delay \(firmware.faults.replyDelay), "
             + "silent \(firmware.faults.silentCommands), MTU \(device.link.mtu), interval \(device.link.connectionInterval), "
             + "\(device.link.packetsPerConnectionEvent)/event, credits \(device.link.writeWithoutResponseCredits), "
             + "split \(device.link.notificationSplit), write-without-response \(device.gatt.txSupportsWriteWithoutResponse), "
             + "client starts in \(client.atEncoding)")
    }

    /// The longest drain after an operation that did not end cleanly.
    static let drainBound = Duration.seconds(1)

    /// An authentication with the default configuration: four probes, three
    /// challenge attempts and the identity read, each followed by a drain.
    static var authenticationBound: Duration {
        let configuration = XTalkDeviceAuthConfiguration()
        let windows = 2 * configuration.probeTimeoutMs + 2 * configuration.strictProbeTimeoutMs
            + configuration.maxChallengeAttempts * configuration.challengeTimeoutMs + configuration.identityTimeoutMs
        return .milliseconds(windows) + drainBound * (5 + configuration.maxChallengeAttempts)
    }

    // MARK: Running

    /// Runs the scenario; the report lists every violated invariant.
    package func run(steps: Int? = nil) async -> ChaosReport {
        client.onEvent = { [weak self] event in self?.observe(event) }
        let stream = client.events
        let slowReader = random.chance(0.3)
        streamReader = Task { @MainActor in
            var count = 0
            for await _ in stream {
                count += 1
                if slowReader { await Task.yield() }
            }
            return count
        }
        await connect()
        let stepCount = steps ?? random.int(in: 15...45)
        let teardownStep = random.chance(0.05) ? random.int(in: 0..<stepCount) : nil
        for step in 0..<stepCount {
            if step == teardownStep {
                note("teardown")
                tornDown = true
                appEndedWork = true
                linkTrouble = true
                client.teardown()
                eventsAtTeardown = eventCount
            }
            await act()
            await clock.advance(by: .milliseconds(random.int(in: 0...40)))
            if let stop = noiseStopsAt, clock.elapsed >= stop {
                peripheral.stopLineNoise()
                noiseStopsAt = nil
            }
            checkState()
        }
        await finish()
        let merged = (trace + trafficLog.lines).enumerated()
            .sorted { (ChaosScenario.time(of: $0.element), $0.offset) < (ChaosScenario.time(of: $1.element), $1.offset) }
            .map(\.element)
        return ChaosReport(seed: seed, violations: violations, trace: merged, calls: calls.count, lateReplies: lateReplies)
    }

    private func connect() async {
        guard !tornDown else { return }
        note("connect")
        client.startScan()
        for _ in 0..<100 where client.scanResults.isEmpty { await clock.advance(by: .milliseconds(10)) }
        guard let first = client.scanResults.first else {
            note("no scan result (Bluetooth \(environment.bluetoothState))")
            return
        }
        client.connect(id: first.id)
        // Often wait for readiness, sometimes act while connecting.
        if random.chance(0.8) {
            for _ in 0..<200 where !client.atReady {
                if case .failed = client.connectionState { break }
                await clock.advance(by: .milliseconds(5))
            }
            if client.atReady && droppedAtStart == 0 { droppedAtStart = peripheral.droppedNotificationBytes }
        }
    }

    // MARK: Actions

    private func act() async {
        switch random.int(in: 0...99) {
        case 0..<22: startCommand(collect: false)
        case 22..<27: startCommand(collect: true)
        case 27..<35: startSession()
        case 35..<45: startRfSend()
        case 45..<49: noWaitCommand()
        case 49..<52: noWaitRf()
        case 52..<58: cancelSomething()
        case 58..<68: emitFrames()
        case 68..<71: lineNoise()
        case 71..<73: switchEncoding()
        case 73..<79: startAuthentication()
        case 79..<84: dropLink()
        case 84..<86: await powerCycle()
        case 86..<92:
            if !client.atReady, client.connectionState != .connecting { await connect() }
        default:
            let pause = Duration.milliseconds(random.int(in: 50...1_500))
            note("wait \(pause)")
            await clock.advance(by: pause)
        }
    }

    private func token() -> String {
        nextToken += 1
        return "t\(nextToken)"
    }

    private func startCommand(collect: Bool) {
        let token = token()
        let timeout = collect ? random.pick([60, 250, 800]) : random.pick([80, 400, 3_000])
        let mode: XTalkAtResponseMode = collect ? .collectUntilTimeout : .automatic
        let call = ChaosCall(id: calls.count, what: "AT+PING=\(token) (\(mode), \(timeout) ms)",
                             expectation: collect ? .collectedPing(token) : .ping(token),
                             bound: .milliseconds(timeout) + Self.drainBound)
        let client = self.client
        call.start { try .lines(await client.runAtCommand("AT+PING=" + token, timeoutMs: timeout, responseMode: mode)) }
        add(call)
    }

    private func startSession() {
        let tokens = (0..<random.int(in: 1...3)).map { _ in token() }
        let call = ChaosCall(id: calls.count, what: "session \(tokens)", expectation: .session(tokens),
                             bound: (.seconds(3) + Self.drainBound) * tokens.count)
        let client = self.client
        call.start {
            .session(try await client.withExclusiveAtSession { session in
                var responses: [[String]] = []
                for token in tokens { responses.append(try await session.runAtCommand("AT+PING=" + token)) }
                return responses
            })
        }
        add(call)
    }

    private func rfPayload() -> Data {
        let index = calls.count
        var bytes = [UInt8(truncatingIfNeeded: index >> 8), UInt8(truncatingIfNeeded: index), 0xC5]
        bytes += random.bytes(random.int(in: 0...(random.chance(0.1) ? 237 : 40)))
        return Data(bytes)
    }

    private func startRfSend() {
        let payload = rfPayload()
        let timeout = random.pick([200, 5_000])
        let call = ChaosCall(id: calls.count, what: "send \(payload.count) bytes (\(timeout) ms)", expectation: .sent(payload),
                             bound: .milliseconds(timeout) + Self.drainBound)
        let client = self.client
        call.start {
            try await client.sendRfPayload(payload, timeoutMs: timeout)
            return .sent
        }
        add(call)
    }

    private func noWaitCommand() {
        let token = token()
        let call = ChaosCall(id: calls.count, what: "no-wait AT+PING=\(token)", expectation: .noWaitPing(token))
        call.complete(catching: { try self.client.sendAtCommandNoWait("AT+PING=" + token) })
        add(call)
    }

    private func noWaitRf() {
        let payload = rfPayload()
        let call = ChaosCall(id: calls.count, what: "no-wait send \(payload.count) bytes", expectation: .noWait)
        call.complete(catching: { try self.client.sendRfPayloadNoWait(payload) })
        add(call)
    }

    private func cancelSomething() {
        let pending = calls.filter { $0.completions == 0 && $0.task != nil }
        guard !pending.isEmpty else { return }
        let victim = random.pick(pending)
        note("cancel #\(victim.id)")
        victim.cancelled = true
        victim.task?.cancel()
    }

    private func emitFrames() {
        let count = random.int(in: 1...(random.chance(0.2) ? 60 : 8))
        note("\(count) radio frames")
        for _ in 0..<count {
            let index = nextFrame
            nextFrame += 1
            if client.atReady && peripheral.isConnected { framesEmittedWhileReady.append(index) }
            var payload = withUnsafeBytes(of: index.bigEndian) { Array($0) }
            payload += random.bytes(random.int(in: 0...60))
            peripheral.receiveRadioFrame(Data(payload))
        }
    }

    private func lineNoise() {
        note("line noise")
        peripheral.startLineNoise(every: .milliseconds(random.int(in: 1...20)), bytes: random.int(in: 1...40))
        noiseStopsAt = clock.elapsed + .milliseconds(random.int(in: 10...300))
    }

    private func switchEncoding() {
        let encoding: XTalkAtEncoding = random.chance(0.5) ? .xor : .plain
        note("client encoding → \(encoding)")
        encodingTrouble = true  // the switch discards a partial line, maybe a frame's
        client.setAtEncoding(encoding)
    }

    private func startAuthentication() {
        encodingTrouble = true  // its probes switch encodings
        let transport = ChaosAuthTransport(ble: client)
        let authenticator = XTalkDeviceAuthenticator(transport: transport)
        let call = ChaosCall(id: calls.count, what: "authenticate (from \(client.atEncoding))", expectation: .authenticated,
                             bound: Self.authenticationBound)
        call.start { .authenticated(try await authenticator.authenticate()) }
        add(call)
    }

    private func dropLink() {
        linkTrouble = true
        switch random.int(in: 0...3) {
        case 0:
            note("link lost")
            peripheral.disconnect()
        case 1:
            let at = peripheral.hostBytesDelivered + random.int(in: 0...300)
            note("link lost after host byte \(at)")
            peripheral.disconnect(afterHostBytes: at)
        case 2:
            let at = peripheral.deviceBytesDelivered + random.int(in: 0...300)
            note("link lost after device byte \(at)")
            peripheral.disconnect(afterDeviceBytes: at)
        default:
            note("client.disconnect()")
            appEndedWork = true
            client.disconnect()
        }
    }

    private func powerCycle() async {
        linkTrouble = true
        note("Bluetooth off")
        environment.setBluetoothState(.poweredOff)
        await clock.advance(by: .milliseconds(random.int(in: 0...300)))
        note("Bluetooth on")
        environment.setBluetoothState(.poweredOn)
    }

    private func add(_ call: ChaosCall) {
        call.epoch = peripheral.connections
        // (Asynchronous calls complete later, on the main actor: after this.)
        call.madeInWrongEncoding = client.atEncoding != firmwareEncoding
        call.inWrongEncoding = { [unowned self] in self.client.atEncoding != self.firmwareEncoding }
        note("#\(call.id) \(call.what)")
        calls.append(call)
    }

    /// The virtual time a trace line starts with, for merging.
    private static func time(of line: String) -> Double {
        guard line.hasPrefix("["), let end = line.firstIndex(of: " ") else { return 0 }
        return Double(line[line.index(after: line.startIndex)..<end]) ?? 0
    }

    private func note(_ text: String) {
        trace.append("[\(clock.elapsed)] \(text)")
    }

    private func violation(_ text: String) {
        violations.append(text)
    }

    // MARK: Invariants

    private func observe(_ event: XTalkBleEvent) {
        eventCount += 1
        if case .passthroughRaw(let data) = event {
            if traceTraffic { note("raw " + data.map { String(format: "%02X", $0) }.joined()) }
            rawUnits.append(data)
        }
        if let frozen = eventsAtTeardown, eventCount > frozen {
            violation("an event after teardown(): \(event)")
        }
        if case .diPayload(let payload, _) = event, payload.count >= 4 {
            let index = payload.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if let last = receivedFrames.last, index <= last {
                violation("radio frame \(index) arrived after frame \(last): out of order, repeated or stale")
            }
            receivedFrames.append(index)
        }
    }

    /// State and readiness agree with each other after every step.
    private func checkState() {
        if client.atEncoding != firmwareEncoding { encodingTrouble = true }
        if client.atReady || client.deviceControlReady, client.connectionState != .connected {
            violation("atReady \(client.atReady) / deviceControlReady \(client.deviceControlReady) while \(client.connectionState)")
        }
        if tornDown, client.atReady { violation("atReady after teardown()") }
    }

    /// True when `lines` are the whole late reply (with its echo, when the
    /// device echoes) of an earlier command of the same connection: a ping
    /// whose caller did not get it (or an earlier ping of the same session),
    /// or an RF send's or authentication command's `OK`. An AT reply carries
    /// no correlation, and one later than the drain window cannot be told
    /// from the next command's: the protocol's limit, counted, not a violation.
    private func isLateReply(_ lines: [String], to call: ChaosCall, position: Int, prefixOnly: Bool) -> Bool {
        var body = lines
        if let first = body.first, first.hasPrefix("AT+") || first == "AT" { body.removeFirst() }
        guard !body.isEmpty || (prefixOnly && !lines.isEmpty) else { return false }
        var shapes: [[String]] = []
        for other in calls.prefix(call.id + 1) where other.epoch == call.epoch {
            let owned = other === call ? Array(other.tokens.prefix(position)) : other.tokens
            for token in owned where !other.gotOwnReply(token) {
                shapes.append(["+PING:" + token, "OK"])
            }
            if other !== call && !other.succeeded {
                // A failed command's reply may come late and half lost (a reset
                // decode buffer), or as ERROR (written in the wrong encoding).
                shapes.append(["OK"])
                shapes.append(["ERROR"])
            }
            switch other.expectation {
            case .sent, .noWait, .noWaitPing, .authenticated:
                if other !== call { shapes.append(["OK"]) }
            case .ping, .collectedPing, .session:
                break
            }
            if case .authenticated = other.expectation, other !== call, body.count == 2, body[1] == "OK",
               ["+AUTH:", "+CHAL:", "+ID:"].contains(where: { body[0].hasPrefix($0) }) {
                shapes.append(body)
            }
        }
        let late = shapes.contains { shape in
            prefixOnly ? body.count <= shape.count && Array(shape.prefix(body.count)) == body : body == shape
        }
        if late { lateReplies += 1 }
        return late
    }

    /// True when `lines` are the device's `ERROR` (after its echo, when it
    /// echoes) to the call's command as the device received it: behind the
    /// tail of text the client wrote in the wrong encoding (where the
    /// device's line end did not fall; the device cannot know better). The
    /// device's own answer to that line, not a mix-up. Any other bytes in
    /// front of a command (half a command the client left, say) still count
    /// as a violation.
    private func isAnswerToDamagedCommand(_ lines: [String], of call: ChaosCall, position: Int) -> Bool {
        guard position < call.tokens.count, lines.last == "ERROR", lines.count <= 2 else { return false }
        let command = Array(("AT+PING=" + call.tokens[position]).utf8)
        let damaged = peripheral.processedCommands.filter { processed in
            let bytes = Array(processed.utf8)
            guard bytes.count > command.count, bytes.suffix(command.count).elementsEqual(command) else { return false }
            // plain and xor differ by 0x5A: the front, read in the other encoding, is what the client wrote.
            let written = bytes.dropLast(command.count).map { $0 ^ 0x5A }
            return written.allSatisfy { (0x20...0x7E).contains($0) || $0 == 0x0D || $0 == 0x0A } && written.suffix(2) == [0x0D, 0x0A]
        }
        return lines.count == 1 ? !damaged.isEmpty : damaged.contains(lines[0])
    }

    /// True when `lines` are the call's reply without its `+PING:` line, and
    /// the app received that line inside a raw unit: the device's notification
    /// buffer overflowed (a line-noise flood) and lost the end of the line in
    /// front of it, so the two reached the app as one unprintable line. Data
    /// the device lost, delivered as raw, not lost by the SDK.
    private func lostReplyLine(_ lines: [String], of call: ChaosCall, position: Int) -> Bool {
        guard position < call.tokens.count, lines == ["OK"], peripheral.droppedNotificationBytes > droppedAtStart else { return false }
        let key: UInt8 = firmwareEncoding == .xor ? 0x5A : 0
        let encoded = Data(("+PING:" + call.tokens[position] + "\r\n").utf8.map { $0 ^ key })
        return rawUnits.contains { $0.count > encoded.count && $0.suffix(encoded.count) == encoded }
    }

    /// True when an earlier call of the same connection may still be owed a
    /// reply (it failed, or was no-wait, or authenticated with probes that may
    /// time out): a late reply could then answer this call.
    private func isExposed(_ call: ChaosCall) -> Bool {
        calls.prefix(call.id).contains { other in
            guard other.epoch == call.epoch else { return false }
            switch other.expectation {
            case .noWait, .noWaitPing, .authenticated: return true
            default: return !other.succeeded || other.tokens.contains { !other.gotOwnReply($0) }
            }
        }
    }

    private func finish() async {
        peripheral.stopLineNoise()
        // Every call must end within the sum of the bounds of what is queued
        // (they run one after another) and a no-wait window.
        let deadline = clock.elapsed + calls.reduce(.seconds(6)) { $0 + $1.bound }
        while calls.contains(where: { $0.completions == 0 }) && clock.elapsed < deadline {
            await clock.advance(by: .milliseconds(100))
        }
        for call in calls where call.completions == 0 {
            violation("#\(call.id) \(call.what) never finished (hang)")
        }
        // Let frames still in flight arrive: the device's notification queue
        // empties (a slow link takes as long as one byte per connection event
        // at worst), then a virtual second passes with no event.
        let link = peripheral.device.link
        let drained = clock.elapsed + link.connectionInterval * peripheral.deviceBytesQueued + .seconds(10)
        while peripheral.deviceBytesQueued > 0 && clock.elapsed < drained {
            await clock.advance(by: .milliseconds(100))
        }
        if peripheral.deviceBytesQueued > 0 {
            violation("the device's \(peripheral.deviceBytesQueued) queued notification bytes never left (link stalled)")
        }
        var quietSince = clock.elapsed
        var seen = eventCount
        while clock.elapsed - quietSince < .seconds(1) && clock.elapsed < drained + .seconds(60) {
            await clock.advance(by: .milliseconds(100))
            if eventCount != seen {
                seen = eventCount
                quietSince = clock.elapsed
            }
        }
        let transmitted = peripheral.transmittedFrames
        for call in calls where call.completions > 0 {
            if call.completions > 1 { violation("#\(call.id) \(call.what) finished \(call.completions) times") }
            // After a command went unanswered and an encoding was switched (by an
            // authentication's probes or the app), a late reply may be read in the
            // wrong encoding: such a call's lines can be anything but must still end.
            // Made and completed in the wrong encoding: noise and replies decode to
            // anything, lines included. (A call made then but run after the switch
            // to the right encoding is still checked.)
            let anything = (encodingTrouble && isExposed(call)) || call.ranInWrongEncoding
            let late = { (lines: [String], position: Int, prefixOnly: Bool) -> Bool in
                anything || self.isLateReply(lines, to: call, position: position, prefixOnly: prefixOnly)
                    || self.isAnswerToDamagedCommand(lines, of: call, position: position)
                    || self.lostReplyLine(lines, of: call, position: position)
            }
            if let problem = call.check(expectedDeviceID: expectedDeviceID, serial: expectedSerial, appEndedWork: appEndedWork,
                                        lateReply: late) {
                violation("#\(call.id) \(call.what): \(problem)\(isExposed(call) ? " (after an unanswered command)" : "")")
            }
        }
        // Successful sends went on air, in the order they completed in the queue;
        // unless a late reply may have answered them (after an unanswered command).
        let sent = calls.compactMap { call -> Data? in
            guard case .sent(let payload) = call.expectation, call.succeeded, !isExposed(call) else { return nil }
            return payload
        }
        var cursor = transmitted.startIndex
        for payload in sent {
            guard let found = transmitted[cursor...].firstIndex(of: payload) else {
                violation("a send that succeeded (\(payload.prefix(3).map { String(format: "%02X", $0) }.joined())…) "
                          + "is not on air, or not in order")
                break
            }
            cursor = found + 1
        }
        // Radio frames: none lost on a clean link in the right encoding.
        let dropped = peripheral.droppedNotificationBytes - droppedAtStart
        if !linkTrouble && !encodingTrouble && dropped == 0 {
            let received = Set(receivedFrames)
            let lost = framesEmittedWhileReady.filter { !received.contains($0) }
            if !lost.isEmpty { violation("radio frames lost on a clean link: \(lost.prefix(10))") }
        }
        // Teardown: nothing afterwards, nothing left scheduled; the stream ends
        // and what it delivered plus what it dropped is everything.
        if !tornDown { client.teardown() }
        let total = eventCount
        environment.shutDown()
        await clock.settle()
        if eventCount != total { violation("\(eventCount - total) events after teardown()") }
        if clock.pendingTimerCount != 0 { violation("\(clock.pendingTimerCount) timers still pending after teardown") }
        if let reader = streamReader {
            for _ in 0..<50 { await clock.settle() }
            let read = await reader.value
            if read + client.droppedEventCount != eventCount {
                violation("event stream: \(read) read + \(client.droppedEventCount) dropped ≠ \(eventCount) delivered")
            }
        }
    }
}

/// The seeds of the numbered scenarios, shared by the tests and `xtalk chaos`.
package enum ChaosSeeds {
    package static func seed(ofScenario index: Int) -> UInt64 {
        UInt64(index) &* 0x9E37_79B9 &+ 1
    }
}

/// The client's log lines, from whichever thread logs.
final class TrafficLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [String] = []
    func append(_ line: String) { lock.withLock { entries.append(line) } }
    var lines: [String] { lock.withLock { entries } }
}

/// What a scenario found.
package struct ChaosReport: Sendable {
    package let seed: UInt64
    package let violations: [String]
    package let trace: [String]
    package let calls: Int
    /// Responses that were an earlier command's late reply (beyond the drain window).
    package let lateReplies: Int

    package var passed: Bool { violations.isEmpty }

    /// The seed, the violations and the scenario's trace, for a failure message.
    package var description: String {
        var lines = ["chaos scenario seed \(seed) (replay: XTALK_CHAOS_SEED=\(seed) or xtalk chaos --seed \(seed)): "
            + (passed ? "passed" : "\(violations.count) violation(s)")]
        lines += violations.map { "  ✗ " + $0 }
        if !passed { lines += ["  trace:"] + trace.map { "    " + $0 } }
        return lines.joined(separator: "\n")
    }
}

extension SimulatorRandom {
    func chance(_ probability: Double) -> Bool {
        Double(next() >> 11) / Double(1 << 53) < probability
    }

    func pick<T>(_ values: [T]) -> T {
        values[int(in: 0...(values.count - 1))]
    }

    func int(in range: Range<Int>) -> Int {
        int(in: range.lowerBound...(range.upperBound - 1))
    }
}
