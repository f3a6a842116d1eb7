import Foundation

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
    /// The encoding already in use is no switch: nothing is discarded.
    /// `atEncoding` publishes the requested encoding at once; on the wire the
    /// switch happens between operations: asked for while a command or RF send
    /// owns the wire, it waits until that operation ends, so that its reply is
    /// decoded as its command was encoded.
    public func setAtEncoding(_ encoding: XTalkAtEncoding) {
        guard !isTornDown else { return }
        log(.debug, "AT encoding: \(encoding)")
        publishEncoding(encoding)
        passthrough?.setEncoding(encoding)
        commit()
    }

    /// Runs one AT command and returns its response lines (echo removed, final
    /// result code included; `ERROR` is returned, not thrown).
    ///
    /// Waits its turn behind earlier AT commands, RF sends and exclusive
    /// sessions, and behind a no-wait isolation window: it never throws
    /// `.busy`. `timeoutMs` counts from its turn, when its line is handed to
    /// the write pump (queued time does not count, the time the line takes to
    /// go out does).
    /// `.automatic` completes by command policy (PROTOCOL.md section 6): at the
    /// final result code, except `AT+RST`, which holds the channel until the
    /// device's `+READY` (so the next command is not written into a rebooting
    /// radio; no `+READY` within `timeoutMs` throws `.timeout`).
    /// `.collectUntilTimeout` returns every line of the window after the
    /// command's echo (lines before it answered an earlier command). A command
    /// that ends without its answer (a timeout, a cancellation, a window that
    /// closed before its final result code) leaves it owed: the next command
    /// skips it (events only), so it never gets another command's lines. Throws
    /// `.writeFailed` for invalid text or timeout (before any byte is written;
    /// the reason's prefix is stable, see `XTalkBleError.writeFailed`),
    /// `.notConnected`, `.notReady`, `.timeout`, `.cancelled` (task cancelled,
    /// `disconnect()`, or a link ended by `startScan()`/`connect(id:)`), or
    /// `.notConnected` when the link drops. With `log: false` neither the
    /// command nor its lines are logged.
    public func runAtCommand(
        _ plain: String,
        timeoutMs: Int = 3_000,
        log: Bool = true,
        responseMode: XTalkAtResponseMode = .automatic
    ) async throws -> [String] {
        try AtInputValidation.validateCommand(plain)
        let timeout = try AtInputValidation.timeout(milliseconds: timeoutMs)
        let link = try readyPassthrough()
        let mode: AtChannelStateMachine.ResponseMode =
            switch responseMode {
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
    /// result code by the same command policy as `.automatic` (an `AT+RST`
    /// holds it from its `OK` until the device's `+READY`), or 3 s at most
    /// (then the channel is drained): meanwhile another no-wait operation throws
    /// `.busy` and async operations wait. Throws `.busy` while a transaction
    /// or window is active, and as `runAtCommand` for invalid text or no link.
    public func sendAtCommandNoWait(_ plain: String) throws {
        try AtInputValidation.validateCommand(plain)
        let link = try readyPassthrough()
        let owner = try sessionOwner(on: link)
        try link.startNoWaitCommand(plain, window: Self.noWaitCommandWindow, owner: owner)
        log(.debug, "write (no wait) \(plain)")
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
        if let session = try sessionOwner(on: link), link.currentSession == session {
            return try await operation(self)  // nested: the session already owns the channel
        }
        let handle = RequestHandle()
        _ = try await submit(on: link, handle) { channel, _ in channel.submitSession() }
        guard let session = handle.id else { throw XTalkBleError.cancelled }
        defer { if passthrough === link { link.endSession(session) } }
        let context = ExclusiveSessionContext(
            client: ObjectIdentifier(self), generation: link.generation, session: session)
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
        let owner = try sessionOwner(on: link)
        try link.startNoWaitSend(hexPayload: hex, window: Self.noWaitSendWindow, owner: owner)
        log(.debug, "write (no wait) RF send of \(rawPayload.count) bytes")
        commit()
    }

    // MARK: The passthrough of the connection

    /// The ready passthrough, or why there is none.
    func readyPassthrough() throws(XTalkBleError) -> PassthroughDriver {
        guard !isTornDown, machine.isLinkUp else { throw .notConnected }
        guard let link = passthrough else { throw .notReady }
        return link
    }

    /// The exclusive session the calling task holds on `link`, if any. A
    /// session of an earlier connection ended with it: its closure's commands
    /// throw `.notConnected` rather than run without exclusivity.
    func sessionOwner(on link: PassthroughDriver) throws(XTalkBleError) -> ChannelRequestID? {
        guard let context = Self.exclusiveSession, context.client == ObjectIdentifier(self) else { return nil }
        guard context.generation == link.generation else { throw .notConnected }
        return context.session
    }

    /// Submits one request on `link` as the calling task's session (if it holds one).
    private func submit(
        on link: PassthroughDriver, _ handle: RequestHandle,
        _ make: (inout AtChannelStateMachine, ChannelRequestID?) -> (ChannelRequestID, [ChannelAction])
    ) async throws -> [String] {
        if Task.isCancelled { throw XTalkBleError.cancelled }
        return try await link.submit(handle, owner: try sessionOwner(on: link), make)
    }

    /// Writes bytes through the connection's write pump as one more queued
    /// line, bypassing the AT channel: the benchmark's way to measure how well
    /// the pump keeps the link full. Its completion concerns no request.
    package func writeThroughPump(_ bytes: [UInt8]) throws(XTalkBleError) {
        try readyPassthrough().writeUnattributed(bytes)
    }
}
