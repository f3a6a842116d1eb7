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
    let faults: ChaosFaults
    private let random: SimulatorRandom
    /// Draws of the field faults (a stream of their own, so that earlier seeds replay unchanged otherwise).
    private let fieldRandom: SimulatorRandom
    /// What the app does from inside its own callbacks (a stream of its own again).
    private let appRandom: SimulatorRandom
    /// The app's follow-ups to an accepted no-wait call, drawn apart.
    private let followUpRandom: SimulatorRandom
    /// How often the app calls `disconnect()` from inside `onEvent`, on an
    /// event of the connection (0 in most scenarios).
    private let callbackDisconnectChance: Double
    /// The app's `disconnect()` returned, and no state change has been delivered since.
    var disconnectReturned = false
    /// When the user answers the permission prompt; nil: permission was given before.
    private let promptAnswerDelay: Duration?
    let clock: XTalkVirtualClock
    let environment: XTalkSimulatedEnvironment
    let client: XTalkBleClient
    let firmwareEncoding: XTalkAtEncoding
    let firmwareEchoes: Bool
    let challengeRequired: Bool
    /// The device signs with a key no anchor trusts, or signs another device's identifier.
    let impostor: Bool
    let expectedDeviceID: UInt32
    let expectedSerial: String
    /// The device delays replies (slow processing or a reply-delay fault):
    /// only then may a reply come after its command's drain.
    let delaysReplies: Bool
    var peripheral: XTalkSimulatedPeripheral { environment.peripherals[0] }

    var trace: [String] = []
    let trafficLog: TrafficLog
    let traceTraffic: Bool
    var violations: [String] = []
    var calls: [ChaosCall] = []
    private var nextToken = 0
    private var nextFrame: UInt32 = 0
    private var noiseStopsAt: Duration?
    /// What the checker counted.
    var tally = ChaosTally()

    // What the app saw.
    var eventCount = 0
    var eventsAtTeardown: Int?
    var eventsAtTeardownTime: Duration?
    /// Each radio frame the app received: its index, and when.
    var receivedFrames: [(index: UInt32, at: Duration)] = []
    /// Each `.atLine` the app received: the line, when, on which connection.
    var receivedLines: [(line: String, at: Duration, connection: Int)] = []
    /// Reads `events` from the start (slowly in some scenarios): how many events, and its state changes.
    var streamReader: Task<(count: Int, states: [XTalkConnectionState]), Never>?
    /// A second `events` stream, read from the start but only after teardown:
    /// it must not hold up the first, and must keep every state change.
    var stalledStream: AsyncStream<XTalkBleEvent>?
    /// How many of the two `events` streams' readers have seen their stream end.
    var streamsEnded = 0
    /// Every `.connectionStateChanged` the app's `onEvent` received, in order.
    var stateChanges: [XTalkConnectionState] = []
    /// The connection state the app last heard of through `.connectionStateChanged`.
    var appState: XTalkConnectionState = .idle
    /// When the encoding the client decodes in changed (to what), in order; the first entry is the start.
    var encodingChanges: [(at: Duration, encoding: XTalkAtEncoding)] = []
    /// When the app or an authentication set the encoding (which discards a partial line, even for the same encoding).
    var decoderResets: [Duration] = []
    /// When the app itself set the encoding.
    var appEncodingSets: [Duration] = []
    private var authenticator: XTalkDeviceAuthenticator?
    /// The authentication call whose authenticate() is running.
    private var authenticating: ChaosCall?
    /// When the client stopped being connected (link lost, disconnect, power off).
    var linkDowns: [Duration] = []
    /// The same, by the device's connection number then (the first time for each).
    var linkDownOf: [Int: Duration] = [:]
    /// Each radio frame's index → its emission number in the device's record.
    var frameEmissions: [UInt32: Int] = [:]
    /// Since when the device has been disconnected / connected, as the checker last looked.
    var deviceDownSince: Duration?
    var deviceUpSince: Duration?
    /// The write stall last reported (once per stall).
    var reportedStall: Duration?
    /// Since when the client has decoded in another encoding than the one last asked for.
    var decodingLagsSince: Duration?
    var reportedDecodingLag = false

    var tornDown = false
    /// When the app itself ended pending work (disconnect(), teardown()).
    var appEndedWorkAt: [Duration] = []

    /// `traceTraffic` adds the client's debug log (every line sent and
    /// received) to the trace: for replaying one seed.
    /// `faults` switches bugs on in the SDK (the checker's self-test: each must be flagged).
    /// Each `events` stream's bound in the scenarios.
    static let eventBufferLimit = 16

    package init(seed: UInt64, traceTraffic: Bool = false, faults: ChaosFaults = ChaosFaults()) {
        self.seed = seed
        self.faults = faults
        let random = SimulatorRandom(seed: seed)
        self.random = random
        clock = XTalkVirtualClock(settleYields: 4)
        var device = XTalkSimulatedDevice()
        var firmware = device.firmware
        firmware.encoding = random.chance(0.5) ? .xor : .plain
        firmware.echo = random.chance(0.3)
        firmware.challengeRequired = random.chance(0.7)
        firmware.processingDelay =
            random.chance(0.1) ? .milliseconds(random.int(in: 50...400)) : .milliseconds(random.int(in: 0...5))
        if random.chance(0.15) { firmware.faults.replyDelay = .milliseconds(random.int(in: 20...600)) }
        if random.chance(0.1) { firmware.faults.silentCommands = ["AT+PING=t\(random.int(in: 0...20))"] }
        firmware.airtimeBase = .milliseconds(random.int(in: 1...30))
        firmware.airtimePerByte = .microseconds(random.int(in: 10...500))
        if random.chance(0.1) { firmware.sendFailureReason = "CAD_BUSY" }
        // Drawn apart, so that the seeds of earlier failures still replay the same scenario.
        let more = SimulatorRandom(seed: seed ^ 0x1A9_0574)
        switch more.int(in: 0...19) {
        case 0: firmware.faults.wrongSignature = true
        case 1: firmware.faults.challengeDeviceIDOverride = firmware.deviceID ^ 0x0101_0101
        default: break
        }
        // Real phones' faults (corebluetooth-field-failures.md), drawn apart again.
        let field = SimulatorRandom(seed: seed ^ 0xF1E1_D5)
        fieldRandom = field
        device.link.supervisionTimeout = .milliseconds(field.pick([720, 720, 100, 2_000]))
        if field.chance(0.25) {
            device.link.lostReadyCallbacksOneIn = field.int(in: 1...8)
            device.link.lostReadyCallbackKeepsFlagFalse = field.chance(0.5)
        }
        // A device that requires pairing: the first connection waits on iOS's dialog.
        if field.chance(0.08) { device.gatt.pairing = .userPairs(after: .milliseconds(field.int(in: 100...2_500))) }
        // The permission prompt on the first scan, answered (yes) after a while: `.unknown` until then.
        promptAnswerDelay = field.chance(0.1) ? .milliseconds(field.int(in: 0...800)) : nil
        let app = SimulatorRandom(seed: seed ^ 0xCA11_BAC)
        appRandom = app
        followUpRandom = SimulatorRandom(seed: seed ^ 0xF0_110F)
        callbackDisconnectChance = app.chance(0.25) ? app.pick([0.02, 0.1, 0.3]) : 0
        device.firmware = firmware
        device.link.mtu = random.pick([23, 64, 185, 247])
        device.link.connectionInterval = random.pick([.milliseconds(7.5), .milliseconds(15), .milliseconds(30)])
        device.link.packetsPerConnectionEvent = random.int(in: 1...6)
        device.link.writeWithoutResponseCredits = random.int(in: 1...8)
        device.link.notificationSplit = random.pick([.packed, .random, .singleBytes])
        device.link.connectDelay = .milliseconds(random.int(in: 10...80))
        device.gatt.txSupportsWriteWithoutResponse = random.chance(0.8)
        firmwareEncoding = firmware.encoding
        firmwareEchoes = firmware.echo
        challengeRequired = firmware.challengeRequired
        impostor = firmware.faults.wrongSignature || firmware.faults.challengeDeviceIDOverride != nil
        delaysReplies = firmware.processingDelay >= .milliseconds(50) || firmware.faults.replyDelay > .zero
        expectedDeviceID = XTalkDeviceIDCodec.canonicalize(firmware.deviceID)
        expectedSerial = firmware.serial
        environment = XTalkSimulatedEnvironment(devices: [device], clock: clock, seed: seed ^ 0xC4A0_5EED)
        if promptAnswerDelay != nil { environment.authorization = .notDetermined }
        self.traceTraffic = traceTraffic
        var options = XTalkBleClientOptions()
        options.connectTimeout = Self.connectTimeout
        // Small enough that the stalled stream fills in every scenario.
        options.eventBufferLimit = Self.eventBufferLimit
        let traffic = TrafficLog()
        trafficLog = traffic
        if traceTraffic { options.logLevel = .debug }
        options.logHandler = { [clock, traceTraffic] level, message in
            // When each connection's channel opened (and took over what the previous one left).
            if message.hasPrefix("passthrough ready") { traffic.noteReady(at: clock.elapsed) }
            if traceTraffic { traffic.append("[\(clock.elapsed)] \(level): \(message)") }
        }
        client = XTalkBleClient(simulator: environment, options: options)
        client.injectedFaults = faults.client
        let startsRight = random.chance(0.8)
        client.setAtEncoding(startsRight ? firmware.encoding : (firmware.encoding == .xor ? .plain : .xor))
        encodingChanges = [(.zero, client.atEncoding)]
        // The encoding bytes are decoded in, as it changes: a switch asked for
        // while an operation owns the channel applies only when it ends.
        client.onDecodingEncoding = { [unowned self] encoding in
            // The client's word is checked: it only ever decodes in the encoding
            // last asked for (and checkState bounds how long it may lag).
            if encoding != client.atEncoding {
                violation("the client began decoding in \(encoding), but \(client.atEncoding) was asked for")
            }
            if encodingChanges.last?.encoding != encoding { encodingChanges.append((clock.elapsed, encoding)) }
        }
        note(
            "device: \(firmware.encoding) firmware, echo \(firmware.echo), challenge \(firmware.challengeRequired), "
                + "impostor \(impostor), processing \(firmware.processingDelay), reply delay "
                + "\(firmware.faults.replyDelay), "
                + "silent \(firmware.faults.silentCommands), MTU \(device.link.mtu), interval "
                + "\(device.link.connectionInterval), "
                + "\(device.link.packetsPerConnectionEvent)/event, credits \(device.link.writeWithoutResponseCredits), "
                + "split \(device.link.notificationSplit), supervision \(device.link.supervisionTimeout), lost ready "
                + "callbacks \(device.link.lostReadyCallbacksOneIn.map { "1 in \($0)" } ?? "none"), "
                + "write-without-response "
                + "\(device.gatt.txSupportsWriteWithoutResponse), "
                + "client starts in \(client.atEncoding)"
                + (promptAnswerDelay.map { ", permission prompt answered after \($0)" } ?? "")
                + (device.gatt.pairing == .notRequired ? "" : ", pairing \(device.gatt.pairing)"))
    }

    /// The longest drain after an operation that did not end cleanly.
    static let drainBound = Duration.seconds(1)
    /// How long a switch may wait for the operation on the wire: the longest
    /// operation drawn (an RF send's 5 s), its drain, and a write held behind
    /// a stuck ready flag.
    static let switchWaitBound = Duration.seconds(5) + drainBound + writeAnywayBound
    /// How long the write pump may hold bytes for a platform that says "no
    /// room": the client's `writeReadyTimeout` and one re-poll (10 ms).
    static let writeAnywayBound = XTalkBleClientOptions().writeReadyTimeout + .milliseconds(10)
    /// The quiet time that ends a drain (PROTOCOL.md section 6).
    static let drainQuiet = Duration.milliseconds(150)
    /// The client's connect timeout in scenarios: a device that stays connected
    /// this long must have the client ready.
    static let connectTimeout = Duration.seconds(3)

    /// An authentication with the default configuration: four probes, three
    /// challenge attempts and the identity read, each followed by a drain.
    static var authenticationBound: Duration {
        let configuration = XTalkDeviceAuthConfiguration()
        let windows =
            2 * configuration.probeTimeoutMs + 2 * configuration.strictProbeTimeoutMs
            + configuration.maxChallengeAttempts * configuration.challengeTimeoutMs + configuration.identityTimeoutMs
        return .milliseconds(windows) + drainBound * (5 + configuration.maxChallengeAttempts)
    }

    // MARK: Running

    /// Runs the scenario; the report lists every violated invariant.
    package func run(steps: Int? = nil) async -> ChaosReport {
        client.onEvent = { [weak self] event in self?.observe(event) }
        let stream = client.events
        stalledStream = client.events
        let slowReader = random.chance(0.3)
        streamReader = readToEnd(stream, yieldingEach: slowReader)
        if let promptAnswerDelay {
            _ = clock.schedule(after: promptAnswerDelay) { [weak environment] in
                environment?.answerPermissionPrompt(allow: true)
            }
        }
        await connect()
        let stepCount = steps ?? random.int(in: 15...45)
        let teardownStep = random.chance(0.05) ? random.int(in: 0..<stepCount) : nil
        for step in 0..<stepCount {
            if step == teardownStep {
                note("teardown")
                tornDown = true
                appEnded()
                client.teardown()
                eventsAtTeardown = eventCount
                eventsAtTeardownTime = clock.elapsed
            }
            await act()
            changeServices()
            await clock.advance(by: .milliseconds(random.int(in: 0...40)))
            if let stop = noiseStopsAt, clock.elapsed >= stop {
                peripheral.stopLineNoise()
                noiseStopsAt = nil
            }
            checkState()
        }
        await finish()
        let merged = (trace + trafficLog.lines).enumerated()
            .sorted {
                (ChaosScenario.time(of: $0.element), $0.offset) < (ChaosScenario.time(of: $1.element), $1.offset)
            }
            .map(\.element)
        return ChaosReport(seed: seed, violations: violations, trace: merged, calls: calls.count, tally: tally)
    }

    /// Now and then the device changes its GATT database mid-session: mostly
    /// a service added (or an unused one invalidated), rarely the passthrough.
    private func changeServices() {
        guard peripheral.isConnected, fieldRandom.chance(0.04) else { return }
        let invalidated: Set<XTalkSimulatedGattService> =
            switch fieldRandom.int(in: 0...9) {
            case 0: [.passthrough]
            case 1...4: [.dfu]
            default: []
            }
        note("device changed its services, invalidating \(invalidated.map { "\($0)" }.sorted())")
        peripheral.modifyServices(invalidating: invalidated)
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

    private func startCommand(collect: Bool, drawingFrom random: SimulatorRandom? = nil) {
        let random = random ?? self.random
        let token = token()
        let timeout = collect ? random.pick([60, 250, 800]) : random.pick([80, 400, 3_000])
        let mode: XTalkAtResponseMode = collect ? .collectUntilTimeout : .automatic
        let call = ChaosCall(
            id: calls.count, what: "AT+PING=\(token) (\(mode), \(timeout) ms)",
            expectation: collect ? .collectedPing(token) : .ping(token),
            bound: .milliseconds(timeout) + Self.drainBound)
        let client = self.client
        add(call)
        let wire = newCommand(in: call, "AT+PING=" + token, timeoutMs: timeout, collects: collect)
        call.start { [unowned self] in
            try .lines(
                await self.tracking(wire) {
                    try await client.runAtCommand("AT+PING=" + token, timeoutMs: timeout, responseMode: mode)
                })
        }
    }

    private func startSession() {
        let tokens = (0..<random.int(in: 1...3)).map { _ in token() }
        let call = ChaosCall(
            id: calls.count, what: "session \(tokens)", expectation: .session(tokens),
            bound: (.seconds(3) + Self.drainBound) * tokens.count)
        let client = self.client
        add(call)
        call.start { [unowned self] in
            .session(
                try await client.withExclusiveAtSession { session in
                    var responses: [[String]] = []
                    for token in tokens {
                        let wire = self.newCommand(in: call, "AT+PING=" + token, timeoutMs: 3_000)
                        responses.append(
                            try await self.tracking(wire) { try await session.runAtCommand("AT+PING=" + token) })
                    }
                    return responses
                })
        }
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
        let call = ChaosCall(
            id: calls.count, what: "send \(payload.count) bytes (\(timeout) ms)", expectation: .sent(payload),
            bound: .milliseconds(timeout) + Self.drainBound)
        let client = self.client
        add(call)
        let wire = newCommand(in: call, "AT+SEND=" + Hex.encode(payload), timeoutMs: timeout)
        call.start { [unowned self] in
            _ = try await self.tracking(wire, sent: true) {
                try await client.sendRfPayload(payload, timeoutMs: timeout)
                return []
            }
            return .sent
        }
    }

    private func noWaitCommand() {
        let token = token()
        let call = ChaosCall(id: calls.count, what: "no-wait AT+PING=\(token)", expectation: .noWaitPing(token))
        add(call)
        let wire = newCommand(in: call, "AT+PING=" + token, timeoutMs: 3_000, noWait: true)
        call.complete(catching: {
            try self.trackingNoWait(wire) { try self.client.sendAtCommandNoWait("AT+PING=" + token) }
        })
        // Half the time the app asks the device something right after (its
        // follow-up waits for the no-wait window to close); a window that
        // collects every line shows whose answer it got.
        if call.succeeded, followUpRandom.chance(0.5) {
            startCommand(collect: followUpRandom.chance(0.5), drawingFrom: followUpRandom)
        }
    }

    private func noWaitRf() {
        let payload = rfPayload()
        let call = ChaosCall(id: calls.count, what: "no-wait send \(payload.count) bytes", expectation: .noWait)
        add(call)
        let wire = newCommand(in: call, "AT+SEND=" + Hex.encode(payload), timeoutMs: 5_000, noWait: true)
        call.complete(catching: { try self.trackingNoWait(wire) { try self.client.sendRfPayloadNoWait(payload) } })
    }

    private func cancelSomething() {
        let pending = calls.filter { !$0.finished && $0.task != nil }
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
            var payload = withUnsafeBytes(of: index.bigEndian) { Array($0) }
            payload += random.bytes(random.int(in: 0...60))
            peripheral.receiveRadioFrame(Data(payload))
            if let emission = peripheral.record.emissions.last, emission.output.kind == .radioFrame {
                frameEmissions[index] = emission.number
            }
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
        setEncoding(encoding)
    }

    private func startAuthentication() {
        let call = ChaosCall(
            id: calls.count, what: "authenticate (from \(client.atEncoding))", expectation: .authenticated,
            bound: Self.authenticationBound)
        // One authenticator per client, as the integration guide's session holds: a
        // second authenticate() while one runs is refused (.busy) and runs no command.
        let authenticator = self.authenticator ?? makeAuthenticator()
        add(call)
        let owns = authenticating == nil
        if owns { authenticating = call }
        call.start { [unowned self] in
            defer { if owns { self.authenticating = nil } }
            return .authenticated(try await authenticator.authenticate())
        }
    }

    private func makeAuthenticator() -> XTalkDeviceAuthenticator {
        let transport = ChaosAuthTransport(ble: client, now: { [clock] in clock.elapsed }) {
            [unowned self] text, timeoutMs, collects in
            let call = self.authenticating ?? self.calls[self.calls.count - 1]
            return self.newCommand(in: call, text, timeoutMs: timeoutMs, collects: collects)
        }
        transport.encodingChanged = { [unowned self] encoding in self.setEncoding(encoding, byApp: false) }
        let authenticator = XTalkDeviceAuthenticator(transport: transport)
        authenticator.skipsSignatureCheck = faults.skipsSignatureCheck
        authenticator.forgetsChallengeAfterReprobe = faults.forgetsChallengeAfterReprobe
        authenticator.logHandler = { _ in }  // the simulator signs with the development key, as expected
        self.authenticator = authenticator
        return authenticator
    }

    private func dropLink() {
        // Mostly out of range (reported after the supervision timeout), sometimes ended by the device.
        let loss: XTalkSimulatedLinkLoss = fieldRandom.chance(0.25) ? .terminatedByDevice : .supervisionTimeout
        switch random.int(in: 0...3) {
        case 0:
            note("link lost (\(loss))")
            peripheral.disconnect(loss)
        case 1:
            let at = peripheral.hostBytesDelivered + random.int(in: 0...300)
            note("link lost (\(loss)) after host byte \(at)")
            peripheral.disconnect(afterHostBytes: at, loss)
        case 2:
            let at = peripheral.deviceBytesDelivered + random.int(in: 0...300)
            note("link lost (\(loss)) after device byte \(at)")
            peripheral.disconnect(afterDeviceBytes: at, loss)
        default:
            disconnectByApp("client.disconnect()")
        }
    }

    private func powerCycle() async {
        note("Bluetooth off")
        environment.setBluetoothState(.poweredOff)
        await clock.advance(by: .milliseconds(random.int(in: 0...300)))
        note("Bluetooth on")
        environment.setBluetoothState(.poweredOn)
    }

    private func add(_ call: ChaosCall) {
        call.epoch = peripheral.connections
        call.madeAt = clock.elapsed
        call.now = { [clock] in clock.elapsed }
        note("#\(call.id) \(call.what)")
        calls.append(call)
    }

    /// Reads `stream` to its end, counting events and keeping its state
    /// changes, then counts the stream in `streamsEnded`; `yieldingEach`: a
    /// slow reader, which yields after every event.
    func readToEnd(
        _ stream: AsyncStream<XTalkBleEvent>, yieldingEach: Bool = false
    ) -> Task<(count: Int, states: [XTalkConnectionState]), Never> {
        Task { @MainActor in
            var count = 0
            var states: [XTalkConnectionState] = []
            for await event in stream {
                count += 1
                if case .connectionStateChanged(let state) = event { states.append(state) }
                if yieldingEach { await Task.yield() }
            }
            self.streamsEnded += 1
            return (count, states)
        }
    }

    /// Switches the client's encoding (the app or an authentication's probe) and notes when.
    private func setEncoding(_ encoding: XTalkAtEncoding, byApp: Bool = true) {
        if byApp { appEncodingSets.append(clock.elapsed) }
        client.setAtEncoding(encoding)
        decoderResets.append(clock.elapsed)
    }

    /// The app disconnects from inside its `onEvent` callback, as the event
    /// that made it decide is delivered: nothing more of that connection (the
    /// rest of the same notification's lines and frames, already queued)
    /// may reach it.
    func disconnectInsideCallback(after event: XTalkBleEvent) {
        guard callbackDisconnectChance > 0, !tornDown, appRandom.chance(callbackDisconnectChance) else { return }
        disconnectByApp("client.disconnect() from inside onEvent, on \(String(describing: event).prefix(40))")
    }

    /// The app calls `disconnect()`: its pending work ends, and until a state
    /// change nothing more may reach it.
    private func disconnectByApp(_ what: String) {
        note(what)
        appEnded()
        client.disconnect()
        disconnectReturned = true
    }

    private func appEnded() {
        appEndedWorkAt.append(clock.elapsed)
    }

    /// A command line `call` runs now.
    private func newCommand(
        in call: ChaosCall, _ text: String, timeoutMs: Int, collects: Bool = false,
        noWait: Bool = false
    ) -> WireCommand {
        let wire = WireCommand(
            text: text, timeout: .milliseconds(timeoutMs), collects: collects, noWait: noWait,
            madeAt: clock.elapsed, epoch: peripheral.connections)
        wire.clientConnected = client.connectionState == .connected
        wire.clientReady = client.atReady
        call.commands.append(wire)
        return wire
    }

    /// Runs an awaited command and records how it ended.
    private func tracking(
        _ wire: WireCommand, sent: Bool = false,
        _ operation: () async throws -> [String]
    ) async throws -> [String] {
        do {
            let lines = try await operation()
            wire.end(sent ? .sent : .lines(lines), at: clock.elapsed)
            return lines
        } catch {
            wire.end(.failed(error), at: clock.elapsed)
            throw error
        }
    }

    private func trackingNoWait(_ wire: WireCommand, _ operation: () throws -> Void) throws {
        do {
            try operation()
            wire.end(.accepted, at: clock.elapsed)
        } catch {
            wire.end(.failed(error), at: clock.elapsed)
            throw error
        }
    }

    /// The virtual time a trace line starts with, for merging.
    private static func time(of line: String) -> Double {
        guard line.hasPrefix("["), let end = line.firstIndex(of: " ") else { return 0 }
        return Double(line[line.index(after: line.startIndex)..<end]) ?? 0
    }

    func note(_ text: String) {
        trace.append("[\(clock.elapsed)] \(text)")
    }

    func violation(_ text: String) {
        violations.append(text)
    }

}

/// Bugs switched on in the SDK under test, for the checker's self-test.
package struct ChaosFaults: Sendable {
    package var client = XTalkInjectedFaults()
    /// The authenticator accepts any signature.
    package var skipsSignatureCheck = false
    /// The authenticator reports no challenge when its probe needed a second attempt.
    package var forgetsChallengeAfterReprobe = false

    package init(
        client: XTalkInjectedFaults = XTalkInjectedFaults(), skipsSignatureCheck: Bool = false,
        forgetsChallengeAfterReprobe: Bool = false
    ) {
        self.client = client
        self.skipsSignatureCheck = skipsSignatureCheck
        self.forgetsChallengeAfterReprobe = forgetsChallengeAfterReprobe
    }

    /// Each known bug alone, by name: the self-test requires the checker to flag every one.
    package static let each: [(name: String, faults: ChaosFaults)] =
        XTalkInjectedFaults.each.map { ($0.name, ChaosFaults(client: $0.faults)) }
        + [
            ("signature not checked", ChaosFaults(skipsSignatureCheck: true)),
            ("no challenge reported after a second probe", ChaosFaults(forgetsChallengeAfterReprobe: true)),
        ]
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
    private var ready: [Duration] = []
    func append(_ line: String) { lock.withLock { entries.append(line) } }
    var lines: [String] { lock.withLock { entries } }
    /// The client logged that a connection's passthrough is ready.
    func noteReady(at time: Duration) { lock.withLock { ready.append(time) } }
    var readyTimes: [Duration] { lock.withLock { ready } }
}

/// What a scenario found.
package struct ChaosReport: Sendable {
    package let seed: UInt64
    package let violations: [String]
    package let trace: [String]
    package let calls: Int
    /// What the checker checked and excused.
    package let tally: ChaosTally

    package var passed: Bool { violations.isEmpty }

    /// The seed, the violations and the scenario's trace, for a failure message.
    package var description: String {
        var lines = [
            "chaos scenario seed \(seed) (replay: XTALK_CHAOS_SEED=\(seed) or xtalk chaos --seed \(seed)): "
                + (passed ? "passed" : "\(violations.count) violation(s)")
        ]
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
