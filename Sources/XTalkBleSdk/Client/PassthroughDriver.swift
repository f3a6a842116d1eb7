import Foundation

/// The I/O driver of one connection's AT channel.
///
/// It feeds the channel machine (the sans-I/O core) everything that happens —
/// received bytes, write completions, timers, the app's requests — and
/// performs the actions the machine returns: lines go out through the write
/// pump and the backend, timers run on the backend's scheduler, callers are
/// resumed, events are queued on the client for delivery. A new driver per
/// connection, so that nothing carries over a reconnect; once closed, nothing
/// of it reaches the backend or the app again. Its state is its own: the
/// client talks to it through the methods below.
@MainActor
final class PassthroughDriver {
    let peripheral: UUID
    /// Counts connections, so that work of an older one is recognised.
    let generation: UInt64
    private weak var client: XTalkBleClient?
    private let backend: any BleBackend
    /// The characteristic lines are written to.
    private let tx: BleCharacteristicRef
    private var channel: AtChannelStateMachine
    private var pump: PassthroughWritePump
    private var isOpen = true
    private var timers: [ChannelTimerID: TimerToken] = [:]
    /// When each live timer fires, so that a reconnect can tell how long the
    /// device may still answer this connection's commands.
    private var timerDeadlines: [ChannelTimerID: Duration] = [:]
    private var waiters: [ChannelRequestID: CheckedContinuation<[String], any Error>] = [:]
    /// Bugs switched on for a checker's self-test; none by default.
    private var faults: XTalkInjectedFaults
    /// The last line and radio frame queued for the app (for injected faults only).
    private(set) var lastLine: String?
    private(set) var lastFrame: (payload: Data, meta: XTalkDiMeta)?
    private var framesQueued = 0
    /// Writes without response blocked on the platform's flag: since when, and
    /// the timer that re-polls it (the "ready" callback can go missing).
    private(set) var blockedSince: Duration?
    private var readyPoll: TimerToken?
    private let writeReadyTimeout: Duration
    /// How often a blocked pump re-reads `canSendWriteWithoutResponse`.
    static let readyPollInterval = Duration.milliseconds(10)
    /// Once the flag stayed false past `writeReadyTimeout` on this link, the
    /// wait for it before each chunk (field failure 1: it can stay false for
    /// the rest of the connection, and a 2 s wait per chunk would outlast
    /// every command's timeout).
    static let distrustedFlagPace = Duration.milliseconds(20)
    /// The flag said no past `writeReadyTimeout` on this link, and has not said yes since.
    private var flagDistrusted = false

    init(
        client: XTalkBleClient, peripheral: UUID, generation: UInt64, encoding: XTalkAtEncoding,
        writeType: BleWriteType, tx: BleCharacteristicRef, faults: XTalkInjectedFaults
    ) {
        self.client = client
        backend = client.backend
        self.peripheral = peripheral
        self.generation = generation
        self.tx = tx
        self.faults = faults
        channel = AtChannelStateMachine(encoding: encoding)
        channel.faults = faults
        pump = PassthroughWritePump(writeType: writeType)
        writeReadyTimeout = client.options.writeReadyTimeout
    }

    private var scheduler: any TimerScheduling { backend.scheduler }

    /// Whether lines go out with or without response.
    var writeType: BleWriteType { pump.writeType }

    /// The exclusive session that owns the channel, if any.
    var currentSession: ChannelRequestID? { channel.currentSession }

    func setFaults(_ faults: XTalkInjectedFaults) {
        self.faults = faults
        channel.faults = faults
    }

    // MARK: Opening and closing

    /// What a closed connection leaves for the next one to the same device.
    struct LeftBehind {
        /// Until when (scheduler time) the device may still answer its commands.
        var owedUntil: Duration?
        /// The encoding of a line of ours the lost link may have cut.
        var cutLineEncoding: XTalkAtEncoding?
    }

    /// Starts from what the previous connection to the device left behind.
    func resume(after handover: ReconnectHandover) {
        perform(channel.resume(after: handover))
    }

    /// The connection ended: every waiter fails with `error` exactly once,
    /// timers stop, buffered bytes and queued writes are discarded. Returns
    /// what a reconnect to the same device must know, if anything.
    func close(error: XTalkBleError) -> LeftBehind? {
        // Whether the device got our last line whole is unknowable when the link
        // dropped while a line was going out (handed to the platform is not delivered).
        let deadlines = timerDeadlines.values
        let owedUntil =
            channel.owesAnswers ? (faults.quarantinesUntilEarliestTimer ? deadlines.min() : deadlines.max()) : nil
        let cut = pump.isBusy || channel.isWriting ? channel.lastLineEncoding : nil
        isOpen = false
        perform(channel.disconnected(error))
        pump.reset()
        for token in timers.values { scheduler.cancel(token) }
        timers.removeAll()
        timerDeadlines.removeAll()
        if let readyPoll { scheduler.cancel(readyPoll) }
        readyPoll = nil
        // Defensive: the machine fails every request it knows; nothing may stay suspended.
        let stranded = waiters.values
        waiters.removeAll()
        for waiter in stranded { waiter.resume(throwing: error) }
        if owedUntil == nil && cut == nil { return nil }
        return LeftBehind(owedUntil: owedUntil, cutLineEncoding: cut)
    }

    // MARK: Requests

    /// Submits one request and suspends until the channel completes it (the
    /// client has checked for cancellation and found the caller's session).
    /// Cancelling the task cancels the request promptly; a request is
    /// completed exactly once, by the channel or by the end of the connection.
    func submit(
        _ handle: RequestHandle, owner: ChannelRequestID?,
        _ make: (inout AtChannelStateMachine, ChannelRequestID?) -> (ChannelRequestID, [ChannelAction])
    ) async throws -> [String] {
        return try await resumingOnMainQueue {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String], any Error>) in
                    let (id, actions) = make(&channel, owner)
                    handle.id = id
                    handle.generation = generation
                    waiters[id] = continuation
                    perform(actions)
                    client?.commit()
                }
            } onCancel: {
                Task { @MainActor [weak self] in self?.cancel(handle) }
            }
        }
    }

    private func cancel(_ handle: RequestHandle) {
        guard isOpen, let id = handle.id, handle.generation == generation else { return }
        perform(channel.cancel(id))
        client?.commit()
    }

    /// The closure of a granted exclusive session returned.
    func endSession(_ session: ChannelRequestID) {
        guard isOpen else { return }
        perform(channel.sessionEnded(session))
        client?.commit()
    }

    /// Writes a no-wait command and opens its isolation window (throws as the machine does).
    func startNoWaitCommand(_ text: String, window: Duration, owner: ChannelRequestID?) throws(XTalkBleError) {
        perform(try channel.startNoWaitCommand(text, window: window, owner: owner))
    }

    /// Writes a no-wait RF send and opens its isolation window (throws as the machine does).
    func startNoWaitSend(hexPayload: String, window: Duration, owner: ChannelRequestID?) throws(XTalkBleError) {
        perform(try channel.startNoWaitSend(hexPayload: hexPayload, window: window, owner: owner))
    }

    /// Switches the encoding for later writes and reads (see the machine's `setEncoding`).
    func setEncoding(_ encoding: XTalkAtEncoding) {
        channel.setEncoding(encoding)
        noteDecodingEncoding()
    }

    /// Writes bytes through the write pump as one more queued line, bypassing
    /// the AT channel: the benchmark's way to measure how well the pump keeps
    /// the link full. Its completion concerns no request.
    func writeUnattributed(_ bytes: [UInt8]) {
        pump.enqueueUnattributed(bytes)
        pumpWrites()
    }

    // MARK: Events from the backend

    /// A notification of the passthrough's notifying characteristic.
    func bytesReceived(_ value: Data) {
        guard isOpen else { return }
        perform(channel.bytesReceived(value))
    }

    /// A with-response chunk was acknowledged (or refused).
    func writeAcknowledged(error: BleBackendError?) {
        guard isOpen else { return }
        for completion in pump.acknowledged(error: error?.message) {
            switch completion {
            case .completed(let id): lineWritten(id, failure: nil)
            case .failed(let id, let reason): lineWritten(id, failure: reason)
            }
        }
        pumpWrites()
    }

    /// Hands chunks to the backend while its flow control allows. Without
    /// response, a pump blocked on the platform's flag re-polls it every
    /// `readyPollInterval` (the "ready" callback can go missing) and, blocked
    /// for `writeReadyTimeout`, writes the next chunk anyway.
    func pumpWrites() {
        guard isOpen else { return }
        let type = pump.writeType
        while true {
            let maximum = backend.maximumWriteValueLength(for: type, of: peripheral)
            var canSend = type == .withoutResponse ? backend.canSendWriteWithoutResponse(peripheral) : true
            if canSend { flagDistrusted = false }
            if !canSend, let since = blockedSince, scheduler.elapsed - since >= readyBound,
                !faults.waitsForReadyCallback
            {
                if !flagDistrusted {
                    client?.log(
                        .warning,
                        "no room to write without response for \(writeReadyTimeout): writing anyway, and on this "
                            + "link one chunk every \(Self.distrustedFlagPace) while the flag says no")
                    flagDistrusted = true
                }
                canSend = true
            }
            guard let chunk = pump.nextChunk(maximumLength: maximum, canSend: canSend) else { break }
            blockedSince = nil
            backend.writeValue(chunk.bytes, for: tx, of: peripheral, type: type)
            for handedOver in chunk.handsOver { perform(channel.lineHandedOver(handedOver)) }
            for completed in chunk.completes { lineWritten(completed, failure: nil) }
        }
        // Without response, bytes still queued mean the flag said no.
        guard type == .withoutResponse, pump.isBusy, isOpen else {
            blockedSince = nil
            if let readyPoll { scheduler.cancel(readyPoll) }
            readyPoll = nil
            return
        }
        let since = blockedSince ?? scheduler.elapsed
        blockedSince = since
        guard readyPoll == nil, !faults.waitsForReadyCallback else { return }
        // Up to the bound, poll so as to be there when it passes; past it (the
        // flag said no, and the backend still takes nothing, e.g. a length of
        // 0 for a link it no longer has), every interval: never a zero-delay loop.
        let untilBound = since + readyBound - scheduler.elapsed
        let delay = untilBound > .zero ? min(Self.readyPollInterval, untilBound) : Self.readyPollInterval
        readyPoll = scheduler.schedule(after: delay) {
            [weak self] in
            guard let self, self.isOpen else { return }
            self.readyPoll = nil
            self.pumpWrites()
            self.client?.commit()
        }
    }

    /// How long a blocked pump waits for the flag before writing anyway.
    private var readyBound: Duration {
        flagDistrusted ? min(Self.distrustedFlagPace, writeReadyTimeout) : writeReadyTimeout
    }

    private func lineWritten(_ id: ChannelWriteID, failure: String?) {
        if let failure {
            perform(channel.writeFailed(id, reason: failure))
        } else {
            perform(channel.writeCompleted(id))
        }
    }

    // MARK: Performing the channel's actions

    /// Performs the channel's actions in order; events are queued on the client for delivery.
    private func perform(_ actions: [ChannelAction]) {
        var pumps = false
        for action in actions {
            switch action {
            case .write(let id, let bytes):
                pump.enqueue(id, bytes)
                pumps = true
            case .writeUnattributed(let bytes):
                pump.enqueueUnattributed(bytes)
                pumps = true
            case .withdrawWrite(let id):
                if pump.withdraw(id) { perform(channel.writeWithdrawn(id)) }
            case .startTimer(let id, let duration):
                timerDeadlines[id] = scheduler.elapsed + duration
                timers[id] = scheduler.schedule(after: duration) { [weak self] in
                    guard let self, self.isOpen, self.timers.removeValue(forKey: id) != nil else { return }
                    self.timerDeadlines[id] = nil
                    self.perform(self.channel.timerFired(id))
                    self.client?.commit()
                }
            case .cancelTimer(let id):
                timerDeadlines[id] = nil
                if let token = timers.removeValue(forKey: id) { scheduler.cancel(token) }
            case .succeed(let id, let lines):
                waiters.removeValue(forKey: id)?.resume(returning: lines)
            case .fail(let id, let error):
                if error != .cancelled { client?.log(.warning, "request failed: \(error)") }
                waiters.removeValue(forKey: id)?.resume(throwing: error)
            case .grantSession(let id):
                waiters.removeValue(forKey: id)?.resume(returning: [])
            case .emit(let event):
                queue(event)
            }
        }
        if pumps { pumpWrites() }
        noteDecodingEncoding()
    }

    private var reportedDecodingEncoding: XTalkAtEncoding?

    /// Tells the client's `onDecodingEncoding` observer when the encoding
    /// received bytes are decoded in changes (and, first, the one it starts in).
    func noteDecodingEncoding() {
        let encoding = channel.decodingEncoding
        guard encoding != reportedDecodingEncoding else { return }
        reportedDecodingEncoding = encoding
        client?.onDecodingEncoding?(encoding)
    }

    private func queue(_ event: ChannelEvent) {
        guard let client else { return }
        let delivery: XTalkBleClient.Delivery
        switch event {
        case .line(let line, let sensitive):
            if !sensitive { client.log(.debug, "← \(line)") }
            if faults.replaysLineAfterReconnect { lastLine = line }
            delivery = .event(.atLine(line))
        case .radioFrame(let payload, let meta):
            framesQueued += 1
            if faults.dropsRadioFrames && framesQueued % 3 == 0 { return }
            if faults.deliversOldEventAfterDisconnect { lastFrame = (payload, meta) }
            delivery = .event(.diPayload(payload, meta))
        case .crcError(let meta, let line):
            delivery = .event(.crcError(meta, line))
        case .sendFinished(let line):
            delivery = .sendFinished(line: line)
        case .raw(let data):
            delivery = .event(.passthroughRaw(data))
        }
        client.enqueue(delivery, generation: generation)
    }
}
