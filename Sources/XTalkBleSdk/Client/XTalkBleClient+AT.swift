import Foundation

/// The AT channel of one connection: its state machine, its write pump, its
/// timers and the callers waiting on it. A new one per connection, so that
/// nothing carries over a reconnect.
@MainActor
final class Passthrough {
    let peripheral: UUID
    let generation: UInt64
    var channel: AtChannelStateMachine
    var pump: PassthroughWritePump
    var timers: [ChannelTimerID: TimerToken] = [:]
    /// When each live timer fires, so that a reconnect can tell how long the
    /// device may still answer this connection's commands.
    var timerDeadlines: [ChannelTimerID: Duration] = [:]
    var waiters: [ChannelRequestID: CheckedContinuation<[String], any Error>] = [:]
    /// The last line and radio frame queued for the app (for injected faults only).
    var lastLine: String?
    var lastFrame: (payload: Data, meta: XTalkDiMeta)?
    var framesQueued = 0
    /// The characteristic lines are written to.
    let tx: BleCharacteristicRef

    init(peripheral: UUID, generation: UInt64, encoding: XTalkAtEncoding, writeType: BleWriteType,
         tx: BleCharacteristicRef) {
        self.peripheral = peripheral
        self.generation = generation
        self.tx = tx
        channel = AtChannelStateMachine(encoding: encoding)
        pump = PassthroughWritePump(writeType: writeType)
    }
}

/// The exclusive session the current task runs in, if any.
struct ExclusiveSessionContext: Sendable {
    let client: ObjectIdentifier
    let generation: UInt64
    let session: ChannelRequestID
}

/// Lets a cancellation handler find the request it cancels.
@MainActor
final class RequestHandle {
    var id: ChannelRequestID?
    var generation: UInt64?
}

extension XTalkBleClient {
    /// The session of the current task (inherited by its child tasks).
    @TaskLocal static var exclusiveSession: ExclusiveSessionContext?

    /// The no-wait isolation windows end after the operations' default timeouts.
    static let noWaitCommandWindow: Duration = .milliseconds(3_000)
    static let noWaitSendWindow: Duration = .milliseconds(5_000)

    // MARK: Public AT and RF API

    /// Sets the AT encoding for writes and reads and resets the text decode
    /// buffer (a partial line is discarded). Switch between transactions only.
    public func setAtEncoding(_ encoding: XTalkAtEncoding) {
        guard !isTornDown else { return }
        log(.debug, "AT encoding: \(encoding)")
        publishEncoding(encoding)
        passthrough?.channel.setEncoding(encoding)
        commit()
    }

    /// Runs one AT command and returns its response lines (echo removed, final
    /// result code included; `ERROR` is returned, not thrown).
    ///
    /// Waits its turn behind earlier AT commands, RF sends and exclusive
    /// sessions; `timeoutMs` counts from its turn, when its line is handed to
    /// the write pump (queued time does not count, the time the line takes to
    /// go out does).
    /// `.automatic` completes at the final result code, `.collectUntilTimeout`
    /// returns every line of the window. Throws `.writeFailed` for invalid
    /// text or timeout (before any byte is written), `.notConnected`,
    /// `.notReady`, `.timeout`, `.cancelled` (task cancelled or
    /// `disconnect()`), or `.notConnected` when the link drops. With
    /// `log: false` neither the command nor its lines are logged.
    public func runAtCommand(
        _ plain: String,
        timeoutMs: Int = 3_000,
        log: Bool = true,
        responseMode: XTalkAtResponseMode = .automatic
    ) async throws -> [String] {
        try AtInputValidation.validateCommand(plain)
        let timeout = try AtInputValidation.timeout(milliseconds: timeoutMs)
        let link = try readyPassthrough()
        let mode: AtChannelStateMachine.ResponseMode = switch responseMode {
        case .automatic: .automatic
        case .collectUntilTimeout: .collectUntilTimeout
        }
        if log { self.log(.debug, "queue \(plain)") }
        return try await submit(on: link, RequestHandle()) { channel, owner in
            channel.submitCommand(plain, timeout: timeout, mode: mode, log: log, owner: owner)
        }
    }

    /// Writes an AT command without waiting for its response, which arrives
    /// through events and observers. Opens an isolation window until the final
    /// result code (or 3 s): meanwhile another no-wait operation throws
    /// `.busy` and async operations wait. Throws `.busy` while a transaction
    /// or window is active, and as `runAtCommand` for invalid text or no link.
    public func sendAtCommandNoWait(_ plain: String) throws {
        try AtInputValidation.validateCommand(plain)
        let link = try readyPassthrough()
        let actions = try link.channel.startNoWaitCommand(plain, window: Self.noWaitCommandWindow, owner: try sessionOwner(on: link))
        log(.debug, "write (no wait) \(plain)")
        perform(actions, on: link)
        commit()
    }

    /// Runs `operation` with the AT channel to itself: its commands run back
    /// to back and no other caller's command is inserted. Await commands
    /// sequentially inside. A nested session runs inline. Throws
    /// `.notConnected`, `.notReady`, `.cancelled` while waiting for its turn,
    /// or what `operation` throws; the channel is released however it ends.
    public func withExclusiveAtSession<T>(
        _ operation: @MainActor (XTalkBleClient) async throws -> T
    ) async throws -> T {
        let link = try readyPassthrough()
        if let session = try sessionOwner(on: link), link.channel.currentSession == session {
            return try await operation(self)  // nested: the session already owns the channel
        }
        let handle = RequestHandle()
        _ = try await submit(on: link, handle) { channel, _ in channel.submitSession() }
        guard let session = handle.id else { throw XTalkBleError.cancelled }
        defer { endSession(session, on: link) }
        let context = ExclusiveSessionContext(client: ObjectIdentifier(self), generation: link.generation, session: session)
        return try await Self.$exclusiveSession.withValue(context) {
            try await operation(self)
        }
    }

    /// Sends a radio payload (1–240 bytes) and returns once the radio reports
    /// `+SENDFIN:OK`. Throws `.writeFailed` for an invalid payload or timeout
    /// (before any byte is written) and when the device answers `ERROR` or
    /// `+SENDFIN:FAIL,<reason>`; `.timeout` when neither arrives within
    /// `timeoutMs`, counted as for `runAtCommand`;
    /// and the connection and cancellation errors of `runAtCommand`.
    public func sendRfPayload(_ rawPayload: Data, timeoutMs: Int = 5_000) async throws {
        let hex = try AtInputValidation.hexPayload(rawPayload)
        let timeout = try AtInputValidation.timeout(milliseconds: timeoutMs)
        let link = try readyPassthrough()
        log(.debug, "queue RF send of \(rawPayload.count) bytes")
        _ = try await submit(on: link, RequestHandle()) { channel, owner in
            channel.submitSend(hexPayload: hex, timeout: timeout, owner: owner)
        }
    }

    /// Starts a radio send without waiting for it to finish; completion
    /// arrives as `.sendFinished`. Opens an isolation window until
    /// `+SENDFIN:` (or 5 s). Throws as `sendAtCommandNoWait`.
    public func sendRfPayloadNoWait(_ rawPayload: Data) throws {
        let hex = try AtInputValidation.hexPayload(rawPayload)
        let link = try readyPassthrough()
        let actions = try link.channel.startNoWaitSend(hexPayload: hex, window: Self.noWaitSendWindow, owner: try sessionOwner(on: link))
        log(.debug, "write (no wait) RF send of \(rawPayload.count) bytes")
        perform(actions, on: link)
        commit()
    }

    // MARK: Passthrough lifecycle

    func openPassthrough(peripheral: UUID, writeType: BleWriteType) {
        passthroughGeneration += 1
        let link = Passthrough(peripheral: peripheral, generation: passthroughGeneration, encoding: atEncoding,
                               writeType: writeType, tx: machine.profile.passthrough.writeRef)
        passthrough = link
        link.channel.faults = injectedFaults
        if injectedFaults.replaysLineAfterReconnect, let line = replayedLine {
            enqueue(.event(.atLine(line)), generation: link.generation)
        }
        replayedLine = nil
        log(.info, "passthrough ready (\(writeType == .withoutResponse ? "write without response" : "write with response"))")
        // What the previous connection to this device left behind: answers the
        // device may still owe until their deadline, a line the lost link cut.
        // The channel ends the cut line and quarantines itself (its own actions).
        if let left = leftBehind, left.peripheral == peripheral {
            let handover = ReconnectHandover(owedFor: max(.zero, (left.owedUntil ?? .zero) - scheduler.elapsed),
                                             cutLineEncoding: left.cutLineEncoding)
            if handover.owedFor > .zero {
                log(.info, "quarantine for \(handover.owedFor): the device may still answer the previous connection")
            }
            if handover.cutLineEncoding != nil { log(.info, "ending the half line the previous connection cut off") }
            if !handover.isEmpty { perform(link.channel.resume(after: handover), on: link) }
        }
        leftBehind = nil
        pumpWrites(link)
    }

    /// The connection ended: every waiter fails with `error` exactly once,
    /// timers stop, buffered bytes and queued writes are discarded.
    func closePassthrough(error: XTalkBleError) {
        deviceQueries.cancelAll(client: self)
        guard let link = passthrough else { return }
        passthrough = nil
        replayedLine = link.lastLine
        if injectedFaults.deliversOldEventAfterDisconnect, let frame = link.lastFrame { eventAfterDisconnect = .diPayload(frame.payload, frame.meta) }
        // Whether the device got our last line whole is unknowable when the link
        // dropped while a line was going out (handed to the platform is not delivered).
        let owedUntil = link.channel.owesAnswers ? link.timerDeadlines.values.max() : nil
        let cut = link.pump.isBusy || link.channel.isWriting ? link.channel.lastLineEncoding : nil
        leftBehind = owedUntil == nil && cut == nil ? nil
            : (peripheral: link.peripheral, owedUntil: owedUntil, cutLineEncoding: cut)
        perform(link.channel.disconnected(error), on: link)
        // Nothing of this connection is delivered after it ended, even what is already queued.
        discardDeliveries(of: link.generation)
        link.pump.reset()
        for token in link.timers.values { scheduler.cancel(token) }
        link.timers.removeAll()
        // Defensive: the machine fails every request it knows; nothing may stay suspended.
        for (_, waiter) in link.waiters { waiter.resume(throwing: error) }
        link.waiters.removeAll()
    }

    /// The ready passthrough, or why there is none.
    func readyPassthrough() throws(XTalkBleError) -> Passthrough {
        guard !isTornDown, machine.isLinkUp else { throw .notConnected }
        guard let link = passthrough else { throw .notReady }
        return link
    }

    /// The exclusive session the calling task holds on `link`, if any. A
    /// session of an earlier connection ended with it: its closure's commands
    /// throw `.notConnected` rather than run without exclusivity.
    func sessionOwner(on link: Passthrough) throws(XTalkBleError) -> ChannelRequestID? {
        guard let context = Self.exclusiveSession, context.client == ObjectIdentifier(self) else { return nil }
        guard context.generation == link.generation else { throw .notConnected }
        return context.session
    }

    // MARK: Requests

    /// Submits one request and suspends until the channel completes it.
    /// Cancelling the task cancels the request promptly; a request is
    /// completed exactly once, by the channel or by the end of the connection.
    private func submit(
        on link: Passthrough, _ handle: RequestHandle,
        _ make: (inout AtChannelStateMachine, ChannelRequestID?) -> (ChannelRequestID, [ChannelAction])
    ) async throws -> [String] {
        if Task.isCancelled { throw XTalkBleError.cancelled }
        let owner = try sessionOwner(on: link)
        return try await resumingOnMainQueue {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String], any Error>) in
                    let (id, actions) = make(&link.channel, owner)
                    handle.id = id
                    handle.generation = link.generation
                    link.waiters[id] = continuation
                    perform(actions, on: link)
                    commit()
                }
            } onCancel: {
                Task { @MainActor [weak self] in self?.cancel(handle) }
            }
        }
    }

    private func cancel(_ handle: RequestHandle) {
        guard let id = handle.id, let link = passthrough, link.generation == handle.generation else { return }
        perform(link.channel.cancel(id), on: link)
        commit()
    }

    private func endSession(_ session: ChannelRequestID, on link: Passthrough) {
        guard passthrough === link else { return }
        perform(link.channel.sessionEnded(session), on: link)
        commit()
    }

    // MARK: Channel actions

    /// Performs the channel's actions for `link`; events are queued for delivery.
    func perform(_ actions: [ChannelAction], on link: Passthrough) {
        var pump = false
        for action in actions {
            switch action {
            case .write(let id, let bytes):
                link.pump.enqueue(id, bytes)
                pump = true
            case .writeUnattributed(let bytes):
                link.pump.enqueueUnattributed(bytes)
                pump = true
            case .withdrawWrite(let id):
                if link.pump.withdraw(id) { perform(link.channel.writeWithdrawn(id), on: link) }
            case .startTimer(let id, let duration):
                link.timerDeadlines[id] = scheduler.elapsed + duration
                link.timers[id] = scheduler.schedule(after: duration) { [weak self, weak link] in
                    guard let self, let link, self.passthrough === link, link.timers.removeValue(forKey: id) != nil else { return }
                    link.timerDeadlines[id] = nil
                    self.perform(link.channel.timerFired(id), on: link)
                    self.commit()
                }
            case .cancelTimer(let id):
                link.timerDeadlines[id] = nil
                if let token = link.timers.removeValue(forKey: id) { scheduler.cancel(token) }
            case .succeed(let id, let lines):
                link.waiters.removeValue(forKey: id)?.resume(returning: lines)
            case .fail(let id, let error):
                if error != .cancelled { log(.warning, "request failed: \(error)") }
                link.waiters.removeValue(forKey: id)?.resume(throwing: error)
            case .grantSession(let id):
                link.waiters.removeValue(forKey: id)?.resume(returning: [])
            case .emit(let event):
                queue(event, from: link)
            }
        }
        if pump { pumpWrites(link) }
    }

    private func queue(_ event: ChannelEvent, from link: Passthrough) {
        let delivery: Delivery
        switch event {
        case .line(let line, let sensitive):
            if !sensitive { log(.debug, "← \(line)") }
            if injectedFaults.replaysLineAfterReconnect { link.lastLine = line }
            delivery = .event(.atLine(line))
        case .radioFrame(let payload, let meta):
            link.framesQueued += 1
            if injectedFaults.dropsRadioFrames && link.framesQueued % 3 == 0 { return }
            if injectedFaults.deliversOldEventAfterDisconnect { link.lastFrame = (payload, meta) }
            delivery = .event(.diPayload(payload, meta))
        case .crcError(let meta, let line):
            delivery = .event(.crcError(meta, line))
        case .sendFinished(let line):
            delivery = .sendFinished(line: line)
        case .raw(let data):
            delivery = .event(.passthroughRaw(data))
        }
        enqueue(delivery, generation: link.generation)
    }

    /// Hands chunks to the backend while its flow control allows.
    func pumpWrites(_ link: Passthrough) {
        guard passthrough === link else { return }
        let type = link.pump.writeType
        while true {
            let maximum = backend.maximumWriteValueLength(for: type, of: link.peripheral)
            let canSend = type == .withoutResponse ? backend.canSendWriteWithoutResponse(link.peripheral) : true
            guard let chunk = link.pump.nextChunk(maximumLength: maximum, canSend: canSend) else { return }
            backend.writeValue(chunk.bytes, for: link.tx, of: link.peripheral, type: type)
            for completed in chunk.completes { lineWritten(completed, on: link, failure: nil) }
        }
    }

    /// A with-response chunk was acknowledged (or refused).
    func writeAcknowledged(on link: Passthrough, error: BleBackendError?) {
        for completion in link.pump.acknowledged(error: error?.message) {
            switch completion {
            case .completed(let id): lineWritten(id, on: link, failure: nil)
            case .failed(let id, let reason): lineWritten(id, on: link, failure: reason)
            }
        }
        pumpWrites(link)
    }

    /// Writes bytes through the connection's write pump as one more queued
    /// line, bypassing the AT channel: the benchmark's way to measure how well
    /// the pump keeps the link full. Its completion concerns no request.
    package func writeThroughPump(_ bytes: [UInt8]) throws(XTalkBleError) {
        let link = try readyPassthrough()
        link.pump.enqueueUnattributed(bytes)
        pumpWrites(link)
    }

    private func lineWritten(_ id: ChannelWriteID, on link: Passthrough, failure: String?) {
        if let failure {
            perform(link.channel.writeFailed(id, reason: failure), on: link)
        } else {
            perform(link.channel.writeCompleted(id), on: link)
        }
    }
}
