import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkSimulator

/// What a scenario's checker counted: the evidence that it checked something.
package struct ChaosTally: Sendable {
    /// Command lines whose outcome matched the device's record with no exemption:
    /// `ownAnswers` plus `explainedFailures`.
    package var strict: Int { ownAnswers + explainedFailures.values.reduce(0, +) }
    /// Of those, lines that got their own answer (or, an RF send, its own `OK`
    /// and `+SENDFIN:`; a no-wait call, its line on the link).
    package var ownAnswers = 0
    /// Of those, typed failures the record explains (a timeout with no answer
    /// in its window, a link that ended, a cancellation the app made).
    package var explainedFailures: [String: Int] = [:]

    /// The error's case, without its associated text: a key of `explainedFailures`.
    package static func kind(of error: any Error) -> String {
        let text = String(describing: error)
        return String(text.prefix { $0 != "(" && $0 != ":" }).trimmingCharacters(in: .whitespaces)
    }
    /// Command lines excused, by reason (each reason applies only inside the line's own window).
    package var excused: [String: Int] = [:]
    /// Responses that were an earlier command's reply, delivered after that command's drain (each consumed once).
    package var lateReplies = 0
    /// Answers the device finished sending after the call of their own line
    /// had ended (a timeout, a cancellation, a window that closed first): late
    /// answers on the air, which no later call may take as its own.
    package var answersAfterTheirCall = 0
    /// Radio frames checked for loss and for their connection.
    package var framesChecked = 0
    /// Radio frames not checked, by reason.
    package var framesExempt: [String: Int] = [:]
    /// State changes checked on the two `events` streams (the read one and the stalled one).
    package var streamStateChangesChecked = 0
    /// Sends the app was told succeeded, each checked for a frame on air.
    package var sendsCheckedOnAir = 0
    /// Of those, sends an earlier frame's late `OK` and `+SENDFIN:` completed (that frame was on air).
    package var sendsCompletedLate = 0

    package init() {}

    package var checkedCommands: Int { strict + excused.values.reduce(0, +) }

    package mutating func add(_ other: ChaosTally) {
        ownAnswers += other.ownAnswers
        explainedFailures.merge(other.explainedFailures, uniquingKeysWith: +)
        excused.merge(other.excused, uniquingKeysWith: +)
        lateReplies += other.lateReplies
        answersAfterTheirCall += other.answersAfterTheirCall
        framesChecked += other.framesChecked
        framesExempt.merge(other.framesExempt, uniquingKeysWith: +)
        streamStateChangesChecked += other.streamStateChangesChecked
        sendsCheckedOnAir += other.sendsCheckedOnAir
        sendsCompletedLate += other.sendsCompletedLate
    }

    /// One line for a run's summary.
    package var summary: String {
        let share = checkedCommands == 0 ? 0 : Double(strict) / Double(checkedCommands) * 100
        func counts(_ byKey: [String: Int]) -> String {
            byKey.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        let reasons = counts(excused)
        let exempt = counts(framesExempt)
        return "commands checked \(checkedCommands): strictly \(strict) (\(String(format: "%.1f", share)) %: "
            + "own answer \(ownAnswers), failure the record explains \(strict - ownAnswers) "
            + "[\(counts(explainedFailures))]), "
            + "excused [\(reasons)]; late replies \(lateReplies) (answers after their call \(answersAfterTheirCall)); "
            + "frames checked \(framesChecked), exempt [\(exempt)]; "
            + "stream state changes \(streamStateChangesChecked); "
            + "sends on air \(sendsCheckedOnAir) (completed by an earlier frame's late answer \(sendsCompletedLate))"
    }
}

/// How one command line's outcome compares with the device's record.
private enum Verdict {
    case strict
    case excused(String)
    case violation(String)
}

extension ChaosScenario {
    // MARK: While running

    /// Every event the app receives, as it receives it.
    func observe(_ event: XTalkBleEvent) {
        eventCount += 1
        if let frozen = eventsAtTeardown, eventCount > frozen {
            violation("an event after teardown(): \(event)")
        }
        if disconnectReturned {
            if case .connectionStateChanged = event {
                disconnectReturned = false
            } else {
                violation("\(String(describing: event).prefix(60)) reached the app after its disconnect() returned")
            }
        }
        switch event {
        case .connectionStateChanged(let state):
            stateChanges.append(state)
            if appState == .connected, state != .connected {
                linkDowns.append(clock.elapsed)
                if linkDownOf[peripheral.connections] == nil { linkDownOf[peripheral.connections] = clock.elapsed }
            }
            appState = state
            return
        case .passthroughRaw:
            break
        case .diPayload(let payload, _):
            guard payload.count >= 4 else { break }
            let index = payload.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if let last = receivedFrames.last, index <= last.index {
                violation("radio frame \(index) arrived after frame \(last.index): out of order, repeated or stale")
            }
            receivedFrames.append((index, clock.elapsed))
            // A frame belongs to the connection the app is on: the device sent it on that one.
            if let number = frameEmissions[index], let emission = peripheral.record.emission(number),
                emission.connection != peripheral.connections
            {
                violation(
                    "radio frame \(index), sent on connection \(emission.connection.map(String.init) ?? "none"), "
                        + "reached the app on connection \(peripheral.connections)")
            }
        case .atLine(let line):
            receivedLines.append((line, clock.elapsed, peripheral.connections))
        case .sendFinished, .crcError:
            break
        }
        if appState != .connected {
            violation("\(event) reached the app while it was told the connection is \(appState)")
        }
        disconnectInsideCallback(after: event)
    }

    /// State and readiness agree with each other and with the link, both ways, after every step.
    func checkState() {
        let now = clock.elapsed
        if client.atReady || client.deviceControlReady, client.connectionState != .connected {
            violation(
                "atReady \(client.atReady) / deviceControlReady \(client.deviceControlReady) while "
                    + "\(client.connectionState)"
            )
        }
        if tornDown, client.atReady { violation("atReady after teardown()") }
        // A switch asked for while an operation owns the channel waits for it to end, no longer.
        if client.atReady, !tornDown,
            let decoding = encodingChanges.last?.encoding, decoding != client.atEncoding
        {
            let since = decodingLagsSince ?? now
            decodingLagsSince = since
            if now - since > Self.switchWaitBound, !reportedDecodingLag {
                violation(
                    "the client has decoded in \(decoding) since \(since), though \(client.atEncoding) was asked for")
                reportedDecodingLag = true
            }
        } else {
            decodingLagsSince = nil
        }
        // A lost "ready" callback never stalls the pump: it re-polls the flag
        // (every 10 ms) and, blocked for writeReadyTimeout, writes anyway.
        if let since = client.writesBlockedSince, reportedStall != since {
            if now - since > Self.writeAnywayBound {
                violation("the write pump has held bytes since \(since), longer than \(Self.writeAnywayBound)")
                reportedStall = since
            } else if let room = peripheral.writeRoomSince, now - max(since, room) > .milliseconds(11) {
                violation("the write pump has held bytes since \(since) while the link had room since \(room)")
                reportedStall = since
            }
        }
        if peripheral.isConnected {
            deviceDownSince = nil
            // (From this connection's start: the app may have reconnected between two checks.)
            let since = max(deviceUpSince ?? now, peripheral.connectedSince ?? now)
            deviceUpSince = since
            // A healthy link is ready within the connect timeout (or the client gave it up).
            if !client.atReady, !tornDown, now - since > Self.connectTimeout {
                violation(
                    "the device has been connected since \(since) but the client is \(client.connectionState), not "
                        + "ready"
                )
                deviceUpSince = now  // once per episode
            }
        } else {
            deviceUpSince = nil
            let since = deviceDownSince ?? now
            deviceDownSince = since
            // A lost link is noticed within the supervision timeout.
            if client.connectionState == .connected, now - since > peripheral.device.link.supervisionTimeout {
                violation("the link is down since \(since) but the client still says connected")
                deviceDownSince = now
            }
        }
    }

    // MARK: At the end

    /// Advances the virtual clock by `step` while `condition` holds, until
    /// `deadline`, checking state after every step.
    private func advance(
        while condition: () -> Bool, until deadline: Duration, step: Duration = .milliseconds(100)
    ) async {
        while condition() && clock.elapsed < deadline {
            await clock.advance(by: step)
            checkState()
        }
    }

    func finish() async {
        peripheral.stopLineNoise()
        // Every call must end within the sum of the bounds of what is queued
        // (they run one after another) and a no-wait window.
        let deadline = clock.elapsed + calls.reduce(.seconds(6)) { $0 + $1.bound }
        await advance(while: { calls.contains(where: { !$0.finished }) }, until: deadline)
        for call in calls where !call.finished {
            violation("#\(call.id) \(call.what) never finished (hang)")
        }
        // Lines the write pump still holds (a no-wait call's, behind a ready flag
        // a lost callback left false) go out by the write-anyway bound: wait for
        // them, so that the record shows them (checkState flags a longer stall).
        if let since = client.writesBlockedSince {
            let writeAnyway = since + Self.writeAnywayBound + .milliseconds(100)
            await advance(while: { client.writesBlockedSince != nil }, until: writeAnyway, step: .milliseconds(10))
        }
        // Let frames still in flight arrive: the device's notification queue
        // empties (a slow link takes as long as one byte per connection event
        // at worst), then a virtual second passes with no event.
        let link = peripheral.device.link
        let drained = clock.elapsed + link.connectionInterval * peripheral.deviceBytesQueued + .seconds(10)
        await advance(while: { peripheral.deviceBytesQueued > 0 }, until: drained)
        if peripheral.deviceBytesQueued > 0 {
            violation(
                "the device's \(peripheral.deviceBytesQueued) queued notification bytes never left (link stalled)")
        }
        var quietSince = clock.elapsed
        var seen = eventCount
        while clock.elapsed - quietSince < .seconds(1) && clock.elapsed < drained + .seconds(60) {
            await clock.advance(by: .milliseconds(100))
            checkState()
            if eventCount != seen {
                seen = eventCount
                quietSince = clock.elapsed
            }
        }
        // A device still connected has had the connect timeout to get ready.
        for _ in 0..<Int(Self.connectTimeout / .milliseconds(100)) + 1
        where peripheral.isConnected && !client.atReady && !tornDown {
            await clock.advance(by: .milliseconds(100))
            checkState()
        }
        checkAgainstRecord()
        // Teardown: nothing afterwards, nothing left scheduled; the stream ends
        // and what it delivered plus what it dropped is everything.
        if !tornDown { client.teardown() }
        let total = eventCount
        environment.shutDown()
        await clock.settle()
        if eventCount != total { violation("\(eventCount - total) events after teardown()") }
        if clock.pendingTimerCount != 0 { violation("\(clock.pendingTimerCount) timers still pending after teardown") }
        if let reader = streamReader, let stalledStream {
            // The stalled stream was finished by teardown: it yields what its buffer kept.
            let stalledReader = readToEnd(stalledStream)
            // Both readers end once teardown() has finished their streams; the
            // checker never waits on a stream without a bound (a stream left
            // open would hang the run): cancelling a reader ends its loop.
            for _ in 0..<50 { await clock.settle() }
            for _ in 0..<1_000 where streamsEnded < 2 { await Task.yield() }
            if streamsEnded < 2 {
                violation("\(2 - streamsEnded) of 2 events streams did not end after teardown()")
                reader.cancel()
                stalledReader.cancel()
            }
            let (read, states) = await reader.value
            let (stalledRead, stalledStates) = await stalledReader.value
            let dropped = client.droppedEventCount
            if read + stalledRead + dropped != 2 * eventCount {
                violation(
                    "event streams: \(read) + \(stalledRead) read + \(dropped) dropped ≠ 2 × \(eventCount) delivered")
            }
            if states != stateChanges {
                violation("the read stream saw state changes \(states), onEvent \(stateChanges)")
            }
            if stalledStates != stateChanges {
                violation("the stalled stream kept state changes \(stalledStates), onEvent \(stateChanges)")
            }
            let limit = Self.eventBufferLimit
            if stalledRead > max(limit, stateChanges.count) {
                violation("the stalled stream held \(stalledRead) events (limit \(limit))")
            }
            tally.streamStateChangesChecked += states.count + stalledStates.count
        }
    }

    /// Checks every call, command line and radio frame against the device's record.
    func checkAgainstRecord() {
        let checker = RecordChecker(scenario: self)
        for call in calls where call.finished {
            var verdicts: [Verdict] = []
            for wire in call.commands {
                let verdict = checker.check(wire, cancelled: call.cancelled)
                verdicts.append(verdict)
                switch verdict {
                case .strict:
                    if case .failed(let error) = wire.outcome {
                        tally.explainedFailures[ChaosTally.kind(of: error), default: 0] += 1
                    } else {
                        tally.ownAnswers += 1
                    }
                case .excused(let reason): tally.excused[reason, default: 0] += 1
                case .violation(let problem): violation("#\(call.id) \(call.what): \(wire.text.prefix(40)): \(problem)")
                }
            }
            if let problem = checker.checkCall(call, verdicts: verdicts) {
                violation("#\(call.id) \(call.what): \(problem)")
            }
        }
        checkSendsOnAir(checker)
        for problem in checker.linesWrittenWhileQuiet() { violation(problem) }
        tally.lateReplies = checker.lateReplies
        tally.answersAfterTheirCall = checker.answersAfterTheirCall
        let resets = decoderResets.map(checker.resetWindow(at:))
        checkLines(resets: resets)
        if traceTraffic { traceRecord() }
        checkFrames(resets: resets)
    }

    /// Every send the app was told succeeded put a frame on air: its own, in the
    /// order the sends completed; or, for a send an earlier frame's late `OK`
    /// and `+SENDFIN:` completed (the protocol cannot tell them apart), that
    /// earlier frame, which the device must then have transmitted.
    private func checkSendsOnAir(_ checker: RecordChecker) {
        let transmitted = peripheral.transmittedFrames
        var cursor = transmitted.startIndex
        for call in calls {
            guard case .sent(let payload) = call.expectation, call.succeeded, let wire = call.commands.last else {
                continue
            }
            tally.sendsCheckedOnAir += 1
            switch checker.completion(of: wire) {
            case .own:
                break
            case .lateAnswer(let frame?) where transmitted.contains(Data(frame)):
                tally.sendsCompletedLate += 1
                continue
            case .lateAnswer:
                violation(
                    "#\(call.id) a send that succeeded on an earlier line's late OK and +SENDFIN: "
                        + "that line's frame is not on air")
                continue
            }
            guard let found = transmitted[cursor...].firstIndex(of: payload) else {
                violation(
                    "#\(call.id) a send that succeeded (\(Hex.encode(payload.prefix(3)))…) "
                        + "is not on air, or not in order")
                break
            }
            cursor = found + 1
        }
    }

    /// The device's record, in the trace of a replayed seed: what the checker compared with.
    private func traceRecord() {
        let record = peripheral.record
        func time(_ value: Duration?) -> String { value.map { "\($0)" } ?? "never" }
        for command in record.commands {
            trace.append(
                "[\(command.at)] device read #\(command.number) \(command.text.debugDescription) on connection "
                    + "\(command.connection)"
            )
        }
        for emission in record.emissions where emission.output.kind != .radioFrame && emission.output.kind != .noise {
            trace.append(
                "[\(emission.at)] device wrote \(emission.output.kind) \(emission.output.lines) on connection "
                    + "\(emission.connection.map(String.init) ?? "none"), \(emission.queued) of "
                    + "\(emission.bytes.count) bytes queued, "
                    + "delivered \(time(emission.firstDeliveredAt))–\(time(emission.deliveredAt))")
        }
        for write in record.hostWrites {
            let text = { (key: UInt8) in String(decoding: write.bytes.map { $0 ^ key }, as: UTF8.self).debugDescription
            }
            trace.append(
                "[\(write.at)] host wrote \(write.bytes.count) bytes on connection \(write.connection): plain "
                    + "\(text(0)), xor \(text(0x5A))"
            )
        }
    }

    /// Every line the app received is one the device emitted on that connection
    /// and delivered by then, each at most once, unless it was read in the
    /// wrong encoding or pieced together from what the device cut.
    private func checkLines(resets: [(from: Duration, to: Duration)]) {
        let record = peripheral.record
        var emitted: [Int: [(line: String, at: Duration, emission: XTalkDeviceRecord.Emission)]] = [:]
        for emission in record.emissions {
            guard let connection = emission.connection, emission.queued > 0, let first = emission.firstDeliveredAt
            else { continue }
            for line in emission.output.lines { emitted[connection, default: []].append((line, first, emission)) }
        }
        var used: [Int: Set<Int>] = [:]
        for (line, at, connection) in receivedLines {
            let candidates = emitted[connection] ?? []
            if let index = candidates.indices.first(where: {
                used[connection, default: []].contains($0) == false && candidates[$0].line == line
                    && candidates[$0].at <= at
            }) {
                used[connection, default: []].insert(index)
                continue
            }
            // Read in the wrong encoding, or completed after a decoder reset, or glued to a line the device cut.
            if !inRightEncoding(from: at, to: at, switchAtStartCounts: true) { continue }
            // (the rest of a line whose start a reset discarded, completed inside the reset's window)
            if candidates.contains(where: { candidate in
                candidate.line.hasSuffix(line)
                    && resets.contains { reset in
                        candidate.at <= reset.to && (candidate.emission.deliveredAt ?? at) >= reset.from
                            && at >= reset.from
                    }
            }) {
                continue
            }
            if candidates.contains(where: { $0.emission.queued < $0.emission.bytes.count && $0.at <= at }) { continue }
            violation(
                "the app received the line \(line.prefix(60).debugDescription) at \(at) on connection \(connection), "
                    + "which the device did not send there (or sent fewer times)")
            return
        }
    }

    /// Every radio frame the device delivered whole while the app could read it reached the app.
    private func checkFrames(resets: [(from: Duration, to: Duration)]) {
        let record = peripheral.record
        let received = Set(receivedFrames.map(\.index))
        for (index, number) in frameEmissions.sorted(by: { $0.key < $1.key }) {
            guard let emission = record.emission(number) else { continue }
            if let reason = frameExemption(emission, in: record, resets: resets) {
                tally.framesExempt[reason, default: 0] += 1
                continue
            }
            tally.framesChecked += 1
            if !received.contains(index) {
                violation(
                    "radio frame \(index), delivered whole at \(emission.deliveredAt ?? .zero) on connection "
                        + "\(emission.connection ?? 0) in the app's encoding, never reached the app")
            }
        }
    }

    private func frameExemption(
        _ emission: XTalkDeviceRecord.Emission, in record: XTalkDeviceRecord,
        resets: [(from: Duration, to: Duration)]
    ) -> String? {
        guard emission.connection != nil else { return "no connection" }
        guard emission.queued > 0 else { return "not subscribed" }
        guard emission.queued == emission.bytes.count else { return "device queue overflowed" }
        guard let delivered = emission.deliveredAt else { return "link ended before delivery" }
        if let frozen = eventsAtTeardownTime, delivered >= frozen { return "after teardown" }
        let arriving = emission.firstDeliveredAt ?? delivered
        if !inRightEncoding(from: arriving, to: delivered) { return "wrong encoding" }
        if resets.contains(where: { $0.from <= delivered && $0.to >= arriving }) {
            return "decoder reset as it arrived"
        }
        // The line before it on the same connection lost its end: the two are one unit.
        if record.followsACutOutput(emission) { return "glued to a line the device cut" }
        // The client ended the link in the very instant the bytes arrived.
        if linkDowns.contains(where: { $0 == delivered }) { return "link ended as it arrived" }
        return nil
    }

    /// The client decoded in the device's encoding from `start` to `end`
    /// (inclusive), with no switch in between. `switchAtStartCounts`: a switch
    /// at the very moment `start` counts as one in between (for a line
    /// received then: a switch that waited for an operation applies after the
    /// batch of bytes that ended it, and lines of that batch came before it).
    func inRightEncoding(from start: Duration, to end: Duration, switchAtStartCounts: Bool = false) -> Bool {
        var current = encodingChanges.first?.encoding ?? firmwareEncoding
        for change in encodingChanges.dropFirst() {
            if change.at < start || (change.at == start && !switchAtStartCounts) {
                current = change.encoding
            } else if change.at <= end {
                return false  // any switch inside the window discards a partial line
            }
        }
        return current == firmwareEncoding
    }
}

/// Matches the scenario's command lines with the device's record of what it
/// processed and emitted.
@MainActor
private final class RecordChecker {
    private unowned let scenario: ChaosScenario
    private let record: XTalkDeviceRecord
    private let wires: [WireCommand]
    /// Answer emissions by the device command they answer.
    private var answers: [Int: XTalkDeviceRecord.Emission] = [:]
    private var sendFinishes: [Int: XTalkDeviceRecord.Emission] = [:]
    /// Device commands by the command line they came from, and how.
    private var ownedCommands: [ObjectIdentifier: [(XTalkDeviceRecord.Command, Relation)]] = [:]
    private var owners: [Int: (WireCommand, Relation)] = [:]
    /// When the device read each command, by number.
    private var readAt: [Int: Duration] = [:]
    /// Emissions a late reply already excused.
    private var consumed: Set<Int> = []
    private(set) var lateReplies = 0
    /// Sends an earlier line's late answer completed: the device command it answered.
    private var lateCompletions: [ObjectIdentifier: Int] = [:]
    /// The host's bytes per connection, with the time each write was handed to the link.
    private var hostStreams: [Int: [(byte: UInt8, at: Duration)]] = [:]

    enum Relation {
        /// The device read the line as written.
        case exact
        /// Bytes in front of the line (a remnant in the device's UART) made it another command.
        case damaged
        /// Only the start of the line reached the device (the link was lost in the middle).
        case cut
        /// Written in the other encoding: the device read (part of) it as another line.
        case wrongEncoding
        /// Only the end of the line counted: the host paused in the middle of
        /// it (a stuck ready flag) for longer than the device's inter-character
        /// timeout, which discarded its head.
        case headDiscarded
    }

    init(scenario: ChaosScenario) {
        self.scenario = scenario
        record = scenario.peripheral.record
        wires = scenario.calls.flatMap(\.commands)
        for emission in record.emissions {
            switch emission.output.kind {
            case .answer(let command?): answers[command] = emission
            case .sendFinished(let command): sendFinishes[command] = emission
            default: break
            }
        }
        for write in record.hostWrites {
            hostStreams[write.connection, default: []] += write.bytes.map { ($0, write.at) }
        }
        assignWriteTimes()
        for command in record.commands {
            readAt[command.number] = command.at
            guard let owner = owner(of: command) else { continue }
            owners[command.number] = owner
            ownedCommands[ObjectIdentifier(owner.0), default: []].append((command, owner.1))
        }
    }

    /// When each command line's first bytes were handed to the link: the
    /// lines of one text are written in the order they were made, each
    /// between its call and its end.
    private var writeTimes: [ObjectIdentifier: Duration] = [:]

    private func assignWriteTimes() {
        var byText: [String: [WireCommand]] = [:]
        for wire in wires { byText[wire.text, default: []].append(wire) }
        for (text, group) in byText {
            let occurrences = self.occurrences(of: text)
            var next = 0
            let sorted = group.sorted(by: { $0.madeAt < $1.madeAt })
            func end(of wire: WireCommand) -> Duration {
                var end = wire.endedAt ?? .seconds(1_000_000)
                // A no-wait line accepted while a lost callback held the ready flag
                // false goes out when the pump writes anyway (writeReadyTimeout).
                if wire.noWait, record.readyFlagWasStuck(from: wire.madeAt, to: wire.madeAt) {
                    end += ChaosScenario.writeAnywayBound
                }
                return end
            }
            for (index, wire) in sorted.enumerated() {
                while next < occurrences.count && occurrences[next] < wire.madeAt { next += 1 }
                guard next < occurrences.count, occurrences[next] <= end(of: wire) else { continue }
                // A line handed over at the very instant its call ended (a timeout, with the
                // pump writing anyway at the same time) is its line or, withdrawn unsent, the
                // next one of the same text made by then: the next one's, when that one has
                // no later line of its own (chaos seed 53171831072798929).
                if !wire.noWait, occurrences[next] == wire.endedAt, index + 1 < sorted.count {
                    let following = sorted[index + 1]
                    let hasItsOwn = next + 1 < occurrences.count && occurrences[next + 1] <= end(of: following)
                    if following.madeAt <= occurrences[next], !hasItsOwn { continue }
                }
                writeTimes[ObjectIdentifier(wire)] = occurrences[next]
                next += 1
            }
        }
    }

    /// When the start of `text`'s line (in either encoding) was handed to the link, each time it was.
    private func occurrences(of text: String) -> [Duration] {
        let probe = Array(Array((text + "\r\n").utf8).prefix(12))
        return hostStreams.values.flatMap { stream in
            Self.starts(of: probe, in: stream) + Self.starts(of: probe.map { $0 ^ 0x5A }, in: stream)
        }.sorted()
    }

    /// When each (non-overlapping) occurrence of `pattern` in a host stream was handed to the link.
    private static func starts(of pattern: [UInt8], in stream: [(byte: UInt8, at: Duration)]) -> [Duration] {
        var times: [Duration] = []
        var index = 0
        while index + pattern.count <= stream.count {
            if (0..<pattern.count).allSatisfy({ stream[index + $0].byte == pattern[$0] }) {
                times.append(stream[index].at)
                index += pattern.count
            } else {
                index += 1
            }
        }
        return times
    }

    /// How many device commands of each text each connection has processed so far (while attributing them in order).
    private var processedCount: [String: Int] = [:]

    /// When the whole line was handed to the link in the device's encoding, each time, on one connection.
    private func fullOccurrences(of text: String, on connection: Int) -> [Duration] {
        let cacheKey = "\(connection)|" + text
        if let known = fullOccurrenceCache[cacheKey] { return known }
        guard let stream = hostStreams[connection] else { return [] }
        let key: UInt8 = scenario.firmwareEncoding == .xor ? 0x5A : 0
        let times = Self.starts(of: (text + "\r\n").utf8.map { $0 ^ key }, in: stream)
        fullOccurrenceCache[cacheKey] = times
        return times
    }

    /// Each text's whole-line occurrences per connection, searched once.
    private var fullOccurrenceCache: [String: [Duration]] = [:]

    /// The command line a device command came from. The device reads the host's
    /// lines in order, so the k-th command of a text on a connection is the k-th
    /// whole line of that text the host wrote on it; other lines are attributed
    /// to the newest line written before them that explains them.
    private func owner(of command: XTalkDeviceRecord.Command) -> (WireCommand, Relation)? {
        let key = "\(command.connection)|" + command.text
        let k = processedCount[key, default: 0]
        processedCount[key] = k + 1
        let lines = fullOccurrences(of: command.text, on: command.connection)
        if k < lines.count,
            let exact = wires.first(where: { $0.text == command.text && writeTimes[ObjectIdentifier($0)] == lines[k] })
        {
            return (exact, .exact)
        }
        let written = wires.compactMap { wire in writeTimes[ObjectIdentifier(wire)].map { (wire, $0) } }
            .filter { $0.1 <= command.at }
            .sorted { $0.1 > $1.1 }
        for (wire, _) in written {
            if command.text.utf8.count > wire.text.utf8.count, command.text.hasSuffix(wire.text) {
                // The device read this whole line behind a remnant: it is one of the
                // whole lines of its text, so the next command of that text is the next one.
                processedCount["\(command.connection)|" + wire.text, default: 0] += 1
                return (wire, .damaged)
            }
            if !command.text.isEmpty, command.text.utf8.count < wire.text.utf8.count, wire.text.hasPrefix(command.text)
            {
                return (wire, .cut)
            }
            if command.followsDiscardedPartialLine, !command.text.isEmpty,
                command.text.utf8.count < wire.text.utf8.count, wire.text.hasSuffix(command.text)
            {
                return (wire, .headDiscarded)
            }
        }
        // Read in the other encoding, the line is a piece of what the client wrote.
        let flipped = command.text.utf8.map { $0 ^ 0x5A }
        for (wire, _) in written where !flipped.isEmpty {
            let line = Array((wire.text + "\r\n").utf8)
            if line.count >= flipped.count,
                (0...(line.count - flipped.count)).contains(where: {
                    line[$0..<($0 + flipped.count)].elementsEqual(flipped)
                })
            {
                return (wire, .wrongEncoding)
            }
        }
        return nil
    }

    private func ownCommand(of wire: WireCommand) -> (XTalkDeviceRecord.Command, Relation)? {
        ownedCommands[ObjectIdentifier(wire)]?.first { [.exact, .damaged, .headDiscarded].contains($0.1) }
    }

    /// The response lines a command gets from an answer: the echo of its own line is not one.
    private func responseLines(_ emission: XTalkDeviceRecord.Emission, for text: String) -> [String] {
        var lines = emission.output.lines
        if scenario.firmwareEchoes, lines.first == text { lines.removeFirst() }
        return lines
    }

    // MARK: One command line

    func check(_ wire: WireCommand, cancelled: Bool) -> Verdict {
        guard let outcome = wire.outcome, let endedAt = wire.endedAt else { return .violation("never ended") }
        let own = ownCommand(of: wire)
        let ownAnswer = own.flatMap { answers[$0.0.number] }
        let expected = ownAnswer.map { responseLines($0, for: wire.text) }
        // Written: when its first bytes were handed to the link, and no later than its window allows.
        let written = writeTime(of: wire)
        if let written, !wire.noWait, endedAt > written + wire.timeout {
            return .violation(
                "ended at \(endedAt), later than its window (\(wire.timeout) from its write at \(written))")
        }
        switch outcome {
        case .lines(let lines) where !wire.collects:
            if let expected, own?.1 == .exact, lines == expected { return .strict }
            return excuse(wire, lines, own: own, ownAnswer: ownAnswer)
                ?? .violation("got \(lines), the device answered \(expected ?? [])")
        case .lines(let lines):
            return checkCollected(wire, lines, own: own, expected: expected ?? [])
        case .sent:
            if let own, own.1 == .exact, expected == ["OK"], let finish = sendFinishes[own.0.number],
                finish.output.lines == ["+SENDFIN:OK"], let at = finish.deliveredAt, at <= endedAt
            {
                return .strict
            }
            return excuse(wire, nil, own: own, ownAnswer: ownAnswer)
                ?? .violation("succeeded, but the device did not send it")
        case .accepted:
            if written != nil { return .strict }
            if let down = scenario.linkDowns.first(where: { $0 >= wire.madeAt }) {
                // The pump held the line for a ready flag a lost callback left false, and
                // the link ended (the app's disconnect, or a loss) before the pump writes
                // anyway: the flag was stuck at the call and still at the link's end.
                if down <= wire.madeAt + ChaosScenario.writeAnywayBound,
                    record.readyFlagWasStuck(from: wire.madeAt, to: wire.madeAt),
                    record.readyFlagWasStuck(from: down, to: down)
                {
                    return .excused("ready flag stuck")
                }
                // Out of range from the call until the phone gave the link up: no credit came back.
                if record.wasUnreachable(from: wire.madeAt, to: wire.madeAt),
                    record.wasUnreachable(from: down, to: down)
                {
                    return .excused("device out of range")
                }
            }
            return .violation("a no-wait call returned, but its line never reached the link")
        case .failed(let error):
            return checkFailure(wire, error, cancelled: cancelled, own: own, ownAnswer: ownAnswer, written: written)
        }
    }

    /// A window of `.collectUntilTimeout`: whole late replies, then a prefix of its own answer.
    private func checkCollected(
        _ wire: WireCommand, _ lines: [String], own: (XTalkDeviceRecord.Command, Relation)?,
        expected: [String]
    ) -> Verdict {
        guard let endedAt = wire.endedAt else { return .violation("never ended") }
        /// Only an answer still arriving when the window closed may be cut short:
        /// every line the host had whole before then is in the window.
        func mayBeCut(_ emission: XTalkDeviceRecord.Emission?) -> Bool {
            emission?.deliveredAt.map { $0 >= endedAt } ?? true
        }
        var rest = lines[...]
        var late = 0
        let ownCut = mayBeCut(own.flatMap { answers[$0.0.number] })
        while true {
            let echoed = [wire.text] + expected
            if own?.1 == .exact,
                ownCut
                    ? expected.starts(with: rest) || (late > 0 && echoed.starts(with: rest))
                    : rest.elementsEqual(expected) || (late > 0 && rest.elementsEqual(echoed))
            {
                return late > 0 ? .excused("late reply") : .strict
            }
            guard let (emission, length) = lateReply(for: wire, matchingPrefixOf: Array(rest)) else {
                // The window closed in the middle of a late reply: its first lines.
                if !rest.isEmpty,
                    let partial = candidates(for: wire).first(where: {
                        mayBeCut($0)
                            && ($0.output.lines.starts(with: rest)
                                || (scenario.firmwareEchoes && $0.output.lines.dropFirst().starts(with: rest)))
                    })
                {
                    consume(partial)
                    return .excused("late reply")
                }
                break
            }
            consume(emission)
            late += 1
            rest = rest.dropFirst(length)
        }
        return excuse(wire, Array(rest), own: own, ownAnswer: own.flatMap { answers[$0.0.number] })
            ?? .violation("collected \(lines), the device answered \(expected)")
    }

    /// Why lines other than the command's own answer are the device's doing or the protocol's limit, if they are.
    private func excuse(
        _ wire: WireCommand, _ lines: [String]?, own: (XTalkDeviceRecord.Command, Relation)?,
        ownAnswer: XTalkDeviceRecord.Emission?
    ) -> Verdict? {
        guard let endedAt = wire.endedAt else { return nil }
        if wrongEncoding(wire, endedAt: endedAt) { return .excused("wrong encoding") }
        // The device never read it: it was out of range, the phone not told yet;
        // or the pump held it for a ready flag a lost callback left false.
        if own == nil, lines?.isEmpty ?? true {
            if record.wasUnreachable(from: wire.madeAt, to: endedAt) { return .excused("device out of range") }
            if record.readyFlagWasStuck(from: wire.madeAt, to: endedAt) { return .excused("ready flag stuck") }
        }
        if let lines {
            if let emission = lateReply(for: wire, exactly: lines) {
                consume(emission)
                return .excused("late reply")
            }
            // The device's ERROR to the line behind the remnant the client wrote in the wrong encoding.
            // Either the call got it (its echo, if the firmware echoes, is the damaged line the device
            // received), only when it reached the host before the call ended: an earlier command's
            // ERROR can look the same. Or a window collected nothing: that ERROR answers the remnant
            // as much as the line (after an encoding switch the client takes it for a garbled line's,
            // as an automatic command then times out), or it came after the window closed.
            if let own, own.1 == .damaged, let ownAnswer,
                remnantWasWrittenInWrongEncoding(own.0.text, before: wire.text)
            {
                let gotIt =
                    ownAnswer.deliveredAt.map { $0 <= endedAt } == true
                    && (responseLines(ownAnswer, for: wire.text) == lines
                        || responseLines(ownAnswer, for: own.0.text) == lines)
                let collectedNothing = wire.collects && lines.isEmpty && ownAnswer.output.lines.last == "ERROR"
                if gotIt || collectedNothing { return .excused("damaged by a wrong-encoding remnant") }
            }
            // The device's answer to the tail of the line, whose head its inter-character timeout
            // discarded while the host paused in the middle of the line. (An echo, if the firmware
            // echoes, is of that tail: not the client's line, so a response line to it.)
            if let own, own.1 == .headDiscarded, let ownAnswer,
                let delivered = ownAnswer.deliveredAt, delivered <= endedAt,
                ownAnswer.output.lines == lines
            {
                return .excused("device discarded the line's head")
            }
        }
        // The device's notification queue overflowed and cut the line in front of the answer (or the answer).
        if let ownAnswer, deviceCut(before: ownAnswer, by: endedAt) { return .excused("device cut a line") }
        if lines == nil, let other = lateSendAnswer(in: wire) ?? anotherAnswer(in: wire),
            case .answer(let command?) = other.output.kind
        {
            // A send completed by an earlier frame's late OK and +SENDFIN
            // (anything else that completed it leaves no frame on air, which
            // the sends-on-air check then reports).
            lateCompletions[ObjectIdentifier(wire)] = command
            return .excused("late reply")
        }
        return nil
    }

    private func checkFailure(
        _ wire: WireCommand, _ error: any Error, cancelled: Bool,
        own: (XTalkDeviceRecord.Command, Relation)?, ownAnswer: XTalkDeviceRecord.Emission?,
        written: Duration?
    ) -> Verdict {
        guard let endedAt = wire.endedAt else { return .violation("never ended") }
        guard let error = error as? XTalkBleError else {
            return .violation("untyped error \(type(of: error)): \(error)")
        }
        let linkEnded = scenario.linkDowns.contains { $0 >= wire.madeAt && $0 <= endedAt }
        switch error {
        case .notConnected:
            return linkEnded || !wire.clientConnected
                ? .strict : .violation("notConnected on a connection that stayed up")
        case .notReady:
            return !wire.clientReady || linkEnded ? .strict : .violation("notReady while the client was ready")
        case .cancelled:
            if cancelled || scenario.appEndedWorkAt.contains(where: { $0 >= wire.madeAt && $0 <= endedAt }) {
                return .strict
            }
            return .violation("cancelled, but nobody cancelled it")
        case .busy:
            guard wire.noWait else { return .violation("busy for an awaited call") }
            return channelWasBusy(at: wire.madeAt, besides: wire)
                ? .strict : .violation("busy while the channel was free")
        case .timeout:
            guard let written else {
                if linkEnded { return .strict }
                // Lost out of range: no credit came back for the writes in front of it.
                if record.wasUnreachable(from: wire.madeAt, to: endedAt) { return .excused("device out of range") }
                // The pump waits for a ready flag a lost callback left false (writeReadyTimeout).
                if record.readyFlagWasStuck(from: wire.madeAt, to: endedAt) { return .excused("ready flag stuck") }
                return .violation("timed out, but its line never reached the link")
            }
            // (The timer starts when the line is handed to the write pump, which
            // writes its first chunk at once, unless the ready flag is stuck:
            // the window ends exactly then.)
            if endedAt < written + wire.timeout {
                if record.readyFlagWasStuck(from: wire.madeAt, to: written) { return .excused("ready flag stuck") }
                return .violation(
                    "timed out at \(endedAt), before its window (\(wire.timeout) from its write at \(written)) ended")
            }
            // Its whole answer arrived in time: only something else in its window explains the miss.
            // (A send completes at its +SENDFIN, not at the OK that accepts it.)
            let completing = wire.text.hasPrefix("AT+SEND=") ? own.flatMap { sendFinishes[$0.0.number] } : ownAnswer
            if let ownAnswer, let completing, own?.1 == .exact, completing.deliveredWhole,
                let delivered = completing.deliveredAt,
                delivered < endedAt
            {
                if wrongEncoding(wire, endedAt: endedAt) { return .excused("wrong encoding") }
                if anotherAnswer(in: wire) != nil { return .excused("late reply in its window") }
                if deviceCut(before: ownAnswer, by: endedAt) { return .excused("device cut a line") }
                return .violation(
                    "timed out although its answer \(ownAnswer.output.lines) arrived whole at \(delivered)")
            }
            return .strict
        case .writeFailed(let reason):
            if reason.hasPrefix("the radio could not send the frame"), let own,
                let finish = sendFinishes[own.0.number], finish.output.lines.first?.hasPrefix("+SENDFIN:FAIL") == true
            {
                return .strict
            }
            if reason.hasPrefix("the device rejected the frame"), let ownAnswer,
                responseLines(ownAnswer, for: wire.text) == ["ERROR"]
            {
                return .strict
            }
            if linkEnded { return .strict }
            return excuse(wire, nil, own: own, ownAnswer: ownAnswer)
                ?? .violation("writeFailed(\(reason)) the device's record does not explain")
        default:
            return .violation("unexpected error \(error)")
        }
    }

    // MARK: Whole calls

    func checkCall(_ call: ChaosCall, verdicts: [Verdict]) -> String? {
        guard case .authenticated = call.expectation else {
            if case .failure(let error) = call.outcome, !(error is XTalkBleError) {
                return "untyped error \(type(of: error)): \(error)"
            }
            return nil
        }
        let clean = verdicts.allSatisfy { if case .strict = $0 { true } else { false } }
        let commandsFailed = call.commands.contains { $0.failure != nil }
        switch call.outcome {
        case .success(.authenticated(let result)):
            if scenario.impostor && result.didRequireChallenge {
                return "authenticated an impostor (signature or identity not checked)"
            }
            if result.identity.deviceID != scenario.expectedDeviceID
                || result.identity.serial != scenario.expectedSerial
            {
                return "authenticated the wrong identity \(result.identity.did) \(result.identity.serial)"
            }
            let appSwitched = scenario.appEncodingSets.contains { $0 >= call.madeAt && $0 <= (call.endedAt ?? $0) }
            if result.encoding.rawValue != scenario.firmwareEncoding.rawValue, !appSwitched {
                return "reported encoding \(result.encoding), the device uses \(scenario.firmwareEncoding)"
            }
            if result.didRequireChallenge != scenario.challengeRequired {
                return
                    "didRequireChallenge \(result.didRequireChallenge), the device requires one: "
                    + "\(scenario.challengeRequired)"
            }
            return nil
        case .failure(let error):
            guard let error = error as? XTalkDeviceAuthError else {
                return "untyped error \(type(of: error)): \(error)"
            }
            switch error {
            case .signatureVerificationFailed, .invalidDeviceIdentity, .challengeRetryExhausted,
                .invalidSignatureLength,
                .malformedChallengeReply, .invalidChallenge, .challengeMissing:
                if scenario.impostor || !clean || commandsFailed { return nil }
                return "\(error) from a genuine device whose every answer was its own"
            case .commandTimedOut, .transportUnavailable, .cancelled, .busy:
                return commandsFailed || !clean || call.commands.isEmpty
                    ? nil : "\(error) although every command succeeded"
            default:
                return "unexpected \(error)"
            }
        default:
            return "unexpected outcome \(String(describing: call.outcome))"
        }
    }

    // MARK: Evidence

    /// An unconsumed answer to another command, delivered inside the window of `wire` after that command's drain ended.
    private func lateReply(for wire: WireCommand, exactly lines: [String]) -> XTalkDeviceRecord.Emission? {
        candidates(for: wire).first { emission in
            emission.output.lines == lines
                || (scenario.firmwareEchoes && Array(emission.output.lines.dropFirst()) == lines)
        }
    }

    private func lateReply(for wire: WireCommand, matchingPrefixOf lines: [String]) -> (
        XTalkDeviceRecord.Emission, Int
    )? {
        for emission in candidates(for: wire) {
            var shapes = [emission.output.lines]
            if scenario.firmwareEchoes { shapes.append(Array(emission.output.lines.dropFirst())) }
            for shape in shapes where !shape.isEmpty && lines.starts(with: shape) { return (emission, shape.count) }
        }
        return nil
    }

    /// What completed a send the app was told succeeded.
    enum SendCompletion {
        /// Its own answer (or an excuse that needs no other line's).
        case own
        /// An earlier line's late answer: the frame that line carried, when it
        /// was an RF send the device finished with `+SENDFIN:OK`.
        case lateAnswer(frame: [UInt8]?)
    }

    func completion(of wire: WireCommand) -> SendCompletion {
        guard let command = lateCompletions[ObjectIdentifier(wire)] else { return .own }
        guard sendFinishes[command]?.output.lines == ["+SENDFIN:OK"],
            let text = record.commands.first(where: { $0.number == command })?.text, text.hasPrefix("AT+SEND=")
        else { return .lateAnswer(frame: nil) }
        return .lateAnswer(frame: Hex.decode(text.utf8.dropFirst("AT+SEND=".count)))
    }

    /// The late `OK` of another RF send, delivered in `wire`'s window after its
    /// line went out (what can complete a send: an answer delivered while it
    /// still waited in the queue, or in a drain before it, cannot).
    private func lateSendAnswer(in wire: WireCommand) -> XTalkDeviceRecord.Emission? {
        guard let written = writeTime(of: wire) else { return nil }
        return candidates(for: wire).first { emission in
            guard case .answer(let command?) = emission.output.kind, emission.output.lines.last == "OK",
                let first = emission.firstDeliveredAt, first >= written
            else { return false }
            return record.commands.first { $0.number == command }?.text.hasPrefix("AT+SEND=") == true
        }
    }

    private func anotherAnswer(in wire: WireCommand) -> XTalkDeviceRecord.Emission? {
        candidates(for: wire).first
    }

    private func candidates(for wire: WireCommand) -> [XTalkDeviceRecord.Emission] {
        guard let endedAt = wire.endedAt else { return [] }
        let ownNumber = ownCommand(of: wire)?.0.number
        let owned = ownedSince(wire)
        return record.emissions.filter { emission in
            guard !consumed.contains(emission.number), let first = emission.firstDeliveredAt,
                first >= owned, first <= endedAt
            else { return false }
            switch emission.output.kind {
            case .answer(let command?):
                guard command != ownNumber else { return false }
                return isLate(emission, answering: command)
            case .answer(nil):
                return false
            case .sendFinished, .ready, .radioFrame, .crcError, .line, .raw, .noise:
                return false
            }
        }
    }

    /// The earliest time `wire` can have owned the channel: its call, or, once
    /// its line was written, the end of the last operation written before it
    /// that had ended by then (the channel runs one operation at a time, and a
    /// line queued behind others takes no answer delivered while they ran).
    private func ownedSince(_ wire: WireCommand) -> Duration {
        guard let written = writeTime(of: wire) else { return wire.madeAt }
        var since = wire.madeAt
        for other in wires where other !== wire && !other.noWait {
            guard let otherWritten = writeTime(of: other), otherWritten < written,
                let ended = other.endedAt, ended <= written
            else { continue }
            since = max(since, ended)
        }
        return since
    }

    /// The answer reached the host after the drain of the command it answers could have ended.
    private func isLate(_ emission: XTalkDeviceRecord.Emission, answering command: Int) -> Bool {
        guard let first = emission.firstDeliveredAt, let (owner, relation) = owners[command] else { return false }
        guard let connection = emission.connection else { return false }
        // It completed with an earlier command's late reply (itself checked): its own
        // answer is owed and displaced to the next command, and no drain follows a success.
        if !owner.noWait, owner.successOutcome != nil, let ended = owner.endedAt, didNotGetOwnAnswer(owner) {
            return owner.epoch == connection && first >= ended
        }
        // A no-wait window closes at its first final code, and no drain follows it:
        // when another line's final code came first, its own answer is late.
        if owner.noWait, owner.epoch == connection, let closed = noWaitClosedEarly(owner, before: emission),
            first >= closed
        {
            return true
        }
        // Otherwise only a delay explains a late reply: the device's (slow processing, a
        // reply-delay fault) or the link's (the answer queued behind other notifications).
        // (A device that took longer than the quiet period to process the line
        // answers after a drain that ended quiet: its record shows when it read it.)
        let processing = readAt[command].map { emission.at - $0 } ?? .zero
        guard
            scenario.delaysReplies || first - emission.at > ChaosScenario.drainQuiet || relation == .cut
                || owner.epoch < connection || processing > ChaosScenario.drainQuiet
        else { return false }
        if owner.epoch < connection || relation == .cut {
            // An answer owed by an earlier connection: the new one quarantines until that command's deadline.
            let reconnected = record.connectedAt[connection] ?? .zero
            let floor = relation == .cut ? reconnected + ChaosScenario.drainBound : owner.madeAt + owner.timeout
            return first >= max(floor, reconnected + ChaosScenario.drainQuiet)
        }
        guard let gaveUp = owner.gaveUpAt else { return false }
        return first >= gaveUp + ChaosScenario.drainQuiet
    }

    /// When another line's final result code, delivered after a no-wait line
    /// went out and in front of `answer` (its own answer) in the connection's
    /// stream, could have closed its window: an `OK` or `ERROR` closes a
    /// command's, an `ERROR` or a `+SENDFIN:` a send's (an `OK` only accepts it).
    private func noWaitClosedEarly(_ wire: WireCommand, before answer: XTalkDeviceRecord.Emission) -> Duration? {
        guard let written = writeTime(of: wire) else { return nil }
        let send = wire.text.hasPrefix("AT+SEND=")
        return record.emissions.lazy.compactMap { other -> Duration? in
            guard other.number < answer.number, other.connection == answer.connection,
                let delivered = other.deliveredAt, delivered >= written,
                delivered <= wire.madeAt + wire.timeout
            else { return nil }
            switch other.output.kind {
            case .answer(_?):
                let final = other.output.lines.last
                return final == "ERROR" || (!send && final == "OK") ? delivered : nil
            case .sendFinished: return send ? delivered : nil
            case .answer(nil), .ready, .radioFrame, .crcError, .line, .raw, .noise: return nil
            }
        }.first
    }

    /// A command that completed with other lines than its own answer (excused): its answer is still owed.
    private func didNotGetOwnAnswer(_ wire: WireCommand) -> Bool {
        guard case .lines(let lines)? = wire.successOutcome, let own = ownCommand(of: wire),
            let answer = answers[own.0.number]
        else {
            return wire.successOutcome != nil
        }
        // Its own answer reached the host only after it ended: what it got was another's.
        if let delivered = answer.firstDeliveredAt, let ended = wire.endedAt, delivered > ended { return true }
        let expected = responseLines(answer, for: wire.text)
        // A window collects its own answer's first line, if any of it (late replies may come first).
        if wire.collects { return expected.first.map { !lines.contains($0) } ?? false }
        return lines != expected
    }

    /// Answers to a line the device read whole, delivered (to the end) after that line's call ended.
    var answersAfterTheirCall: Int {
        owners.filter { number, owner in
            guard owner.1 == .exact, let ended = owner.0.endedAt, let answer = answers[number],
                let delivered = answer.deliveredAt
            else { return false }
            return delivered > ended
        }.count
    }

    private func consume(_ emission: XTalkDeviceRecord.Emission) {
        consumed.insert(emission.number)
        lateReplies += 1
    }

    /// The line went out in the other encoding than the device's (the record
    /// shows the device read it as another line), or the client decoded in
    /// another encoding, or switched, between the line's write (its call, if it
    /// was never written) and its end. A switch while the line still waited in
    /// the queue is not one: the line was written, and its answer read, after it.
    private func wrongEncoding(_ wire: WireCommand, endedAt: Duration) -> Bool {
        if ownedCommands[ObjectIdentifier(wire)]?.contains(where: { $0.1 == .wrongEncoding }) == true { return true }
        return !scenario.inRightEncoding(from: writeTime(of: wire) ?? wire.madeAt, to: endedAt)
    }

    /// The device's own queue cut the answer, or the line in front of it on the
    /// same connection, while the call could still see it (an answer written
    /// with no connection, or after the call ended, explains nothing in it).
    private func deviceCut(before answer: XTalkDeviceRecord.Emission, by endedAt: Duration) -> Bool {
        guard answer.connection != nil, answer.at <= endedAt else { return false }
        return answer.queued < answer.bytes.count || record.followsACutOutput(answer)
    }

    /// The bytes in front of `text` in the device's line, read in the other encoding, are text the client wrote.
    private func remnantWasWrittenInWrongEncoding(_ processed: String, before text: String) -> Bool {
        let bytes = Array(processed.utf8)
        let written = bytes.dropLast(text.utf8.count).map { $0 ^ 0x5A }
        return written.allSatisfy { (0x20...0x7E).contains($0) || $0 == 0x0D || $0 == 0x0A }
            && written.suffix(2) == [0x0D, 0x0A]
    }

    /// When the first bytes of the command's line were handed to the link (in either encoding), if they were.
    private func writeTime(of wire: WireCommand) -> Duration? {
        writeTimes[ObjectIdentifier(wire)]
    }

    /// When a `setAtEncoding` at `time` cleared the decode buffer: at once, or,
    /// asked for while a command's line was on the wire, when that command
    /// ended (a no-wait window's end is known only to be within its window).
    func resetWindow(at time: Duration) -> (from: Duration, to: Duration) {
        var to = time
        for wire in wires {
            guard let written = writeTimes[ObjectIdentifier(wire)], written <= time, let ended = wire.endedAt else {
                continue
            }
            let end = wire.noWait ? wire.madeAt + wire.timeout : ended
            if end >= time { to = max(to, end) }
        }
        return (time, to)
    }

    /// A no-wait call may find the channel busy only while something holds
    /// it, on the call's own connection: an operation (queued or on the wire),
    /// the drain after one that gave up, a no-wait window and its drain, an
    /// exclusive session, or the quarantine that opened the connection.
    private func channelWasBusy(at time: Duration, besides wire: WireCommand) -> Bool {
        for other in wires where other !== wire && other.epoch == wire.epoch && other.madeAt <= time {
            if time <= mayHoldUntil(other) { return true }
        }
        if let ready = readyAt[wire.epoch], let until = quarantineMayHoldUntil(wire.epoch), ready <= time,
            time <= until
        {
            return true
        }
        return scenario.calls.contains { call in
            if case .session = call.expectation, call.epoch == wire.epoch, call.madeAt <= time,
                (call.endedAt ?? time) >= time
            {
                return true
            }
            return false
        }
    }

    /// The latest the channel can have been held by `wire` and what followed
    /// it: until it ended, and a bounded drain (from when its line had gone
    /// out) when it gave up; a no-wait window until its own final code when
    /// nothing else was owed, otherwise its whole window and a drain.
    private func mayHoldUntil(_ wire: WireCommand) -> Duration {
        guard let ended = wire.endedAt else { return .seconds(1_000_000) }
        let drainBound = ChaosScenario.drainBound
        if wire.noWait {
            guard case .accepted? = wire.outcome else { return ended }
            if let closed = noWaitSurelyClosed(wire) { return closed }
            return wire.madeAt + wire.timeout + drainBound + (writeTime(of: wire) == nil ? writeAnywayMargin : .zero)
        }
        guard wire.gaveUpAt != nil || mayHaveDrained(wire) else { return ended }
        return max(ended, lineEnd(of: wire) ?? ended + writeAnywayMargin) + drainBound
    }

    /// How long the rest of a line may still have been going out after its
    /// call ended, when the record does not show its end: a ready flag a lost
    /// callback left false holds the pump up to `writeReadyTimeout`.
    private var writeAnywayMargin: Duration { ChaosScenario.writeAnywayBound + .milliseconds(500) }

    /// A failure that may have left the channel draining (the operation held
    /// the channel), as opposed to one it never reached it with.
    private func mayHaveDrained(_ wire: WireCommand) -> Bool {
        guard let error = wire.failure as? XTalkBleError else { return wire.failure != nil }
        switch error {
        case .notConnected, .notReady, .busy: return false
        default: return true
        }
    }

    /// When the last byte of `wire`'s line was handed to the link, if the record shows its whole line.
    private func lineEnd(of wire: WireCommand) -> Duration? {
        guard let written = writeTime(of: wire), let stream = hostStreams[wire.epoch] else { return nil }
        let plain = Array((wire.text + "\r\n").utf8)
        for line in [plain, plain.map { $0 ^ 0x5A }] {
            guard let start = stream.indices.first(where: { stream[$0].at == written && stream[$0].byte == line[0] }),
                start + line.count <= stream.count,
                (0..<line.count).allSatisfy({ stream[start + $0].byte == line[$0] })
            else { continue }
            return stream[start + line.count - 1].at
        }
        return nil
    }

    /// When a no-wait window surely closed at its own final result code: its
    /// own answer (a send's `+SENDFIN:` or `ERROR`) arrived whole within the
    /// window, and no earlier line on its connection could still have been
    /// owed an answer (then that answer could have been taken for it).
    private func noWaitSurelyClosed(_ wire: WireCommand) -> Duration? {
        guard let written = writeTime(of: wire), let own = ownCommand(of: wire), own.1 == .exact else { return nil }
        let closing: XTalkDeviceRecord.Emission?
        if wire.text.hasPrefix("AT+SEND=") {
            let answer = answers[own.0.number]
            closing = answer?.output.lines.last == "ERROR" ? answer : sendFinishes[own.0.number]
        } else {
            closing = answers[own.0.number]
        }
        guard let closing, closing.deliveredWhole, let closed = closing.deliveredAt,
            closed <= wire.madeAt + wire.timeout
        else { return nil }
        for other in wires where other !== wire && other.epoch == wire.epoch {
            guard let otherWritten = writeTime(of: other), otherWritten < written else { continue }
            let answered = ownCommand(of: other).flatMap { answers[$0.0.number] }?.deliveredAt.map { $0 < written }
            if answered != true && (other.gaveUpAt != nil || other.noWait || didNotGetOwnAnswer(other)) { return nil }
        }
        return closed
    }

    // MARK: Quiet periods

    /// When each connection's channel opened (the client logs its passthrough
    /// ready once a connection): what the quarantine counts from.
    private lazy var readyAt: [Int: Duration] = {
        var ready: [Int: Duration] = [:]
        for time in scenario.trafficLog.readyTimes {
            guard
                let connection = record.connectedAt.filter({ $0.value <= time }).max(by: { $0.value < $1.value })?.key,
                ready[connection] == nil
            else { continue }
            ready[connection] = time
        }
        return ready
    }()

    /// The connection before `connection` whose channel opened: what it left
    /// behind (answers still owed, a cut line) is handed to this one.
    private func previousOpened(before connection: Int) -> Int? {
        readyAt.keys.filter { $0 < connection }.max()
    }

    /// The latest a reconnect's quarantine can have held the channel: until
    /// the old connection's latest timer deadline (an operation's window, a
    /// no-wait window, a drain's bound, a quarantine of its own), at least the
    /// drain bound after the channel opened when a line may have been cut,
    /// and then its bound (the drain bound) at most. nil: no quarantine.
    private func quarantineMayHoldUntil(_ connection: Int) -> Duration? {
        if let known = quarantineEnds[connection] { return known }
        guard let ready = readyAt[connection], let previous = previousOpened(before: connection) else { return nil }
        let down = scenario.linkDownOf[previous] ?? ready
        var deadline = Duration.zero
        var cut = false
        for wire in wires where wire.epoch == previous && wire.madeAt <= down {
            let ended = wire.endedAt ?? down
            if wire.noWait {
                guard case .accepted? = wire.outcome else { continue }
                deadline = max(deadline, wire.madeAt + wire.timeout + ChaosScenario.drainBound)
            } else if ended >= down {
                deadline = max(deadline, (writeTime(of: wire) ?? down) + wire.timeout)
            } else {
                let held = mayHoldUntil(wire)
                if held >= down { deadline = max(deadline, held) }
            }
            // A line handed to the link is not known to have arrived until the link
            // takes more: one in flight at the end, or written just before it, may be cut.
            if let written = writeTime(of: wire), written <= down, ended >= down || written + writeAnywayMargin >= down
            {
                cut = true
            }
        }
        if let earlier = quarantineMayHoldUntil(previous), earlier >= down { deadline = max(deadline, earlier) }
        var until: Duration? = nil
        if cut || deadline > ready {
            until = max(deadline, cut ? ready + ChaosScenario.drainBound : .zero) + ChaosScenario.drainBound
        }
        quarantineEnds[connection] = until
        return until
    }

    private var quarantineEnds: [Int: Duration?] = [:]

    /// The earliest the drain after `wire` can have ended, when one surely
    /// followed it: it timed out or was cancelled after its line went out.
    /// The drain is quiet for 150 ms after that, and after every answer the
    /// host received meanwhile, up to its bound (1 s).
    private func surelyDrainedUntil(_ wire: WireCommand) -> Duration? {
        guard !wire.noWait, let error = wire.failure as? XTalkBleError, let ended = wire.endedAt,
            let written = writeTime(of: wire), written <= ended
        else { return nil }
        switch error {
        case .timeout, .cancelled: break
        default: return nil
        }
        let bound = ended + ChaosScenario.drainBound
        var until = ended + ChaosScenario.drainQuiet
        let deliveries = record.emissions.compactMap { emission -> Duration? in
            // (Read in the other encoding, an answer may end no line the client sees.)
            guard emission.connection == wire.epoch, case .answer = emission.output.kind,
                let delivered = emission.deliveredAt, delivered >= ended, delivered < bound,
                scenario.inRightEncoding(from: emission.at, to: delivered)
            else { return nil }
            return delivered
        }
        for delivered in deliveries.sorted() where delivered < until {
            until = min(max(until, delivered + ChaosScenario.drainQuiet), bound)
        }
        return until
    }

    /// The earliest a reconnect's quarantine can have ended: not before the
    /// window of the operation the old link failed in the middle (its timer
    /// runs from its turn, no earlier than its call), nor before the bound of
    /// a drain still going on when the link ended.
    private func surelyQuarantinedUntil(_ connection: Int) -> Duration? {
        guard let ready = readyAt[connection], let previous = previousOpened(before: connection),
            let down = scenario.linkDownOf[previous]
        else { return nil }
        var until = Duration.zero
        for wire in wires where wire.epoch == previous && !wire.noWait {
            guard let written = writeTime(of: wire), written <= down, let ended = wire.endedAt else { continue }
            if ended >= down, wire.failure != nil {
                until = max(until, wire.madeAt + wire.timeout)
            } else if let drained = surelyDrainedUntil(wire), drained > down {
                until = max(until, ended + ChaosScenario.drainBound)
            }
        }
        return until > ready ? until : nil
    }

    /// No command line went out while the channel was surely quiet: in the
    /// drain after an operation that timed out or was cancelled, or in the
    /// quarantine that opens a connection after one the link ended in the
    /// middle of an operation or a drain.
    func linesWrittenWhileQuiet() -> [String] {
        var problems: [String] = []
        let written = wires.compactMap { wire in writeTime(of: wire).map { (wire, $0) } }
        for wire in wires {
            guard let until = surelyDrainedUntil(wire), let ended = wire.endedAt else { continue }
            for (other, at) in written where other !== wire && other.epoch == wire.epoch && at >= ended && at < until {
                problems.append(
                    "\(other.text) went out at \(at), in the drain after \(wire.text) ended at \(ended) "
                        + "(quiet until \(until) at the earliest)")
            }
        }
        for (connection, ready) in readyAt {
            guard let until = surelyQuarantinedUntil(connection) else { continue }
            for (other, at) in written where other.epoch == connection && at >= ready && at < until {
                problems.append(
                    "\(other.text) went out at \(at), in the quarantine of connection \(connection) "
                        + "(the previous connection's answers were owed until \(until) at the earliest)")
            }
        }
        return problems
    }
}
