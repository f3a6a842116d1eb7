import Foundation
import XTalkCrypto

// `ObservableObject` is Combine's where Combine exists, XTalkSupport's marker elsewhere.
#if canImport(Combine)
    import Combine
#else
    import Observation
#endif

/// Authenticates an xTalk device over a `DeviceAuthTransport`
/// (PROTOCOL.md sections 8 and 9): finds the firmware's AT encoding, runs the
/// Ed25519 challenge when required, and reads a verified identity.
///
/// What the challenge proves: the device holds a private key whose public key
/// is one of your trust anchors, now (each attempt signs a fresh random nonce,
/// so an old reply cannot be replayed), for the identifier it reports. What it
/// does not prove: that later traffic comes from the same device (there is no
/// channel binding), or anything about confidentiality — XOR encoding is not
/// encryption; rely on BLE pairing and encryption for that.
@MainActor
public final class XTalkDeviceAuthenticator: ObservableObject {
    /// Where the current (or last) authentication is.
    @XTalkPublished public private(set) var state: XTalkDeviceAuthState = .idle

    #if !canImport(Combine)
        /// Reports `state` to the Observation framework.
        public let observationRegistrar = ObservationRegistrar()
    #endif

    private let transport: any DeviceAuthTransport
    /// A bug switched on for a checker's self-test (package API): any signature is accepted.
    package var skipsSignatureCheck = false
    /// A bug switched on for a checker's self-test (package API): when the
    /// probe needed more than one attempt, the result says no challenge ran.
    package var forgetsChallengeAfterReprobe = false
    private let randomBytes: @Sendable (Int) throws -> [UInt8]
    private var active: Session?
    /// The encoding this authenticator's last probe found: probed first next time.
    private var lastFoundEncoding: DeviceAuthAtEncoding?
    /// Where the development-anchor warning has been given (once per authenticator).
    private var warnedAboutDevelopmentAnchor = false
    /// The bundle whose Info.plist declares anchors (tests use their own).
    private let bundle: Bundle

    /// Receives the authenticator's warnings (e.g. that only the development
    /// anchor is trusted). Nil: the system log on Apple platforms, standard
    /// error elsewhere.
    public var logHandler: (@MainActor (String) -> Void)?

    /// With `expectedDeviceID` set: the verified identity of the last device
    /// that authenticated correctly but was another than the expected one
    /// (its authentication failed with `.invalidDeviceIdentity`). Nil after
    /// any other outcome. Tells "another device" from "the same device back".
    public private(set) var lastUnexpectedIdentity: XTalkDeviceIdentity?

    /// One authentication: its caller's continuation and the task doing the work.
    @MainActor
    private final class Session {
        var continuation: CheckedContinuation<XTalkDeviceAuthResult, any Error>?
        var task: Task<Void, Never>?
    }

    /// An authenticator that runs its commands over `transport`.
    public convenience init(transport: any DeviceAuthTransport) {
        self.init(transport: transport, randomBytes: nil)
    }

    /// An authenticator with another nonce source (tests of CSPRNG failure)
    /// or another bundle's Info.plist.
    package init(
        transport: any DeviceAuthTransport, randomBytes: (@Sendable (Int) throws -> [UInt8])? = nil,
        bundle: Bundle = .main
    ) {
        self.transport = transport
        self.randomBytes = randomBytes ?? { count in try SecureRandom.bytes(count: count) }
        self.bundle = bundle
    }

    /// Probes the encoding, runs the challenge when required (or always, by
    /// policy), reads the identity and returns the result; `state` follows
    /// `.probing`, `.challenging(attempt:maxAttempts:)`, `.readingIdentity`,
    /// `.authenticated(identity)`.
    ///
    /// The probe order comes from what the authenticator knows, never from
    /// the transport's initial encoding: first the encoding its last probe
    /// found, or, on its first run, `.xor` (current firmware's, PROTOCOL.md
    /// section 8); then the other. Against current firmware this costs three
    /// command round trips and no fixed waiting windows, whatever encoding the
    /// transport starts in; against older (plain) firmware, one fast-probe
    /// window and the channel's drain more, once: the next run probes plain first.
    ///
    /// The anchors trusted are the configuration's, or those the app
    /// declares (`XTalkTrustAnchors`). Throws `.invalidConfiguration` before
    /// any I/O, `.busy` while another authentication of this instance runs
    /// (that one goes on), `.cancelled` after `cancel()`, `reset()` or task
    /// cancellation, or the failure, which is also published as
    /// `.failed(error)`. `XTalkDeviceAuthError` says what each failure means.
    public func authenticate(
        configuration: XTalkDeviceAuthConfiguration = XTalkDeviceAuthConfiguration()
    ) async throws -> XTalkDeviceAuthResult {
        let anchors: [XTalkTrustAnchor]
        do throws(XTalkDeviceAuthError) {
            guard configuration.isValid else { throw .invalidConfiguration }
            let resolved = try XTalkTrustAnchors.resolve(configuration, bundle: bundle)
            anchors = resolved.anchors
            if resolved.source == .developmentDefault { warnAboutDevelopmentAnchor() }
        } catch {
            if active == nil {
                if error == .invalidConfiguration, configuration.isValid {
                    // The configuration is valid: the declared anchors are not (in code or in Info.plist).
                    let problem =
                        XTalkTrustAnchors.declarationProblem(configuration, bundle: bundle)
                        ?? "the declared trust anchors are not valid"
                    warn(
                        "\(problem): trust anchors are a non-empty list of Ed25519 public keys "
                            + "(32 bytes, base64 or 64 hex digits, or \"development\")")
                }
                state = .failed(error)
            }
            throw error
        }
        guard active == nil else { throw XTalkDeviceAuthError.busy }
        lastUnexpectedIdentity = nil
        let session = Session()
        active = session
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<XTalkDeviceAuthResult, any Error>) in
                session.continuation = continuation
                session.task = Task { @MainActor in
                    let outcome: Result<XTalkDeviceAuthResult, XTalkDeviceAuthError>
                    do throws(XTalkDeviceAuthError) {
                        outcome = .success(try await self.run(configuration, anchors: anchors, session))
                    } catch {
                        outcome = .failure(error)
                    }
                    self.finish(session, outcome)
                }
            }
        } onCancel: {
            Task { @MainActor [weak self] in self?.finish(session, .failure(.cancelled)) }
        }
    }

    /// Ends the active authentication at once with `.cancelled` (state
    /// `.cancelled`); does nothing when none is active.
    public func cancel() {
        guard let active else { return }
        finish(active, .failure(.cancelled))
    }

    /// Returns the authenticator to `.idle`: an active authentication ends
    /// with `.cancelled`, and a finished one's `.authenticated`, `.failed` or
    /// `.cancelled` state is cleared. Call it when the link is lost (the
    /// identity proved belongs to a connection that is gone) and before
    /// authenticating another device. The encoding it found last is kept.
    public func reset() {
        if let active { finish(active, .failure(.cancelled)) }
        lastUnexpectedIdentity = nil
        state = .idle
    }

    private func warnAboutDevelopmentAnchor() {
        guard !warnedAboutDevelopmentAnchor else { return }
        warnedAboutDevelopmentAnchor = true
        warn(
            "no trust anchors declared (Info.plist \(XTalkTrustAnchors.infoPlistKey) or XTalkTrustAnchors.declared): "
                + "trusting the development anchor, whose private key is public; declare your production anchors")
    }

    private func warn(_ message: String) {
        if let logHandler {
            logHandler(message)
        } else {
            AuthLog.warning(message)
        }
    }

    /// Completes a session exactly once: publishes its outcome and resumes its caller.
    private func finish(_ session: Session, _ outcome: Result<XTalkDeviceAuthResult, XTalkDeviceAuthError>) {
        guard active === session, let continuation = session.continuation else { return }
        session.continuation = nil
        active = nil
        session.task?.cancel()  // a cancelled session's work stops at its next step
        switch outcome {
        case .success(let result): state = .authenticated(result.identity)
        case .failure(.cancelled): state = .cancelled
        case .failure(let error): state = .failed(error)
        }
        continuation.resume(with: outcome.mapError { $0 as any Error })
    }

    /// Publishes a step while `session` is still the active one.
    private func publish(_ step: XTalkDeviceAuthState, _ session: Session) throws(XTalkDeviceAuthError) {
        guard active === session, !Task.isCancelled else { throw .cancelled }
        state = step
    }

    // MARK: The flow

    private func run(
        _ configuration: XTalkDeviceAuthConfiguration, anchors: [XTalkTrustAnchor], _ session: Session
    )
        async throws(XTalkDeviceAuthError)
        -> XTalkDeviceAuthResult
    {
        try publish(.probing, session)
        let (encoding, required, reprobed) = try await probe(configuration, session)
        var signed: (deviceID: UInt32, anchor: XTalkTrustAnchor)?
        if required || configuration.challengePolicy == .always {
            signed = try await challenge(configuration, anchors: anchors, session)
        }
        try publish(.readingIdentity, session)
        let identity = try await readIdentity(configuration, signedDeviceID: signed?.deviceID)
        return XTalkDeviceAuthResult(
            identity: identity, encoding: encoding,
            didRequireChallenge: signed != nil && !(forgetsChallengeAfterReprobe && reprobed),
            verifiedBy: signed?.anchor)
    }

    /// The encoding to probe first: the one found last, else current firmware's.
    private var firstProbeEncoding: DeviceAuthAtEncoding { lastFoundEncoding ?? .xor }

    /// Finds the firmware's encoding with `AT+AUTH?`: fast probes (complete at
    /// `OK`) in the first encoding (`firstProbeEncoding`), then the other; if
    /// both are ambiguous, strict full-window probes in the other encoding,
    /// then the first. The transport leaves the channel clean after an
    /// ambiguous probe. A probe answered with a final result code but no
    /// `+AUTH:` answer is not ambiguous: asked once more in that encoding,
    /// strictly (a damaged line is answered `ERROR` too), a second such answer
    /// means the device refuses authentication; should the retry go
    /// unanswered, the probes left in that encoding follow, never one in the other.
    private func probe(_ configuration: XTalkDeviceAuthConfiguration, _ session: Session)
        async throws(XTalkDeviceAuthError)
        -> (DeviceAuthAtEncoding, required: Bool, reprobed: Bool)
    {
        let first = firstProbeEncoding
        let other: DeviceAuthAtEncoding = first == .plain ? .xor : .plain
        let probes: [(DeviceAuthAtEncoding, DeviceAuthResponseMode, Int)] = [
            (first, .automatic, configuration.probeTimeoutMs),
            (other, .automatic, configuration.probeTimeoutMs),
            (other, .recoverableEncodingProbe, configuration.strictProbeTimeoutMs),
            (first, .recoverableEncodingProbe, configuration.strictProbeTimeoutMs),
        ]
        var refused = false
        var index = 0
        while index < probes.count {
            var (encoding, mode, timeout) = probes[index]
            if refused {
                // The retry after a refusal: the full window, and a clean channel after it, since a
                // damaged line may have split into two, each answered (a late proper answer may follow).
                (mode, timeout) = (.recoverableEncodingProbe, configuration.strictProbeTimeoutMs)
            }
            // A cancelled authentication leaves the transport's encoding alone.
            guard active === session, !Task.isCancelled else { throw .cancelled }
            // Set it even when it looks current: an adapter's reported encoding may lag its connection's.
            transport.setAtEncoding(encoding)
            guard case .lines(let lines) = try await send("AT+AUTH?", timeoutMs: timeout, log: true, mode: mode)
            else {
                index = Self.nextProbe(after: index, in: probes, refused: refused ? encoding : nil)
                continue
            }
            switch AuthenticationReplies.probeOutcome(lines) {
            case .answered(let required):
                lastFoundEncoding = encoding
                return (encoding, required, index > 0 || refused)
            case .refused:
                // The encoding is right. A line damaged on its way (e.g. behind a
                // remnant of a command written in the wrong encoding) is answered
                // ERROR too: asked once more, a second refusal is the firmware's answer.
                lastFoundEncoding = encoding
                if refused { throw .invalidChallenge }
                refused = true
            case .ambiguous:
                index = Self.nextProbe(after: index, in: probes, refused: refused ? encoding : nil)
            }
        }
        throw .commandTimedOut("AT+AUTH?")
    }

    /// The probe after `index`. Once a probe was refused (`ERROR`: the
    /// encoding is right), only probes in that encoding are left: one in the
    /// other would reach the device as noise, and spoil its next line.
    static func nextProbe(
        after index: Int, in probes: [(DeviceAuthAtEncoding, DeviceAuthResponseMode, Int)],
        refused encoding: DeviceAuthAtEncoding?
    ) -> Int {
        guard let encoding else { return index + 1 }
        return probes.indices.first { $0 > index && probes[$0].0 == encoding } ?? probes.count
    }

    /// Runs challenge attempts until one verifies. Timeouts, missing,
    /// malformed and rejected replies are retried; a signature of the wrong
    /// length or one that does not verify is not. Returns the identifier the
    /// device signed and the anchor that verified it.
    private func challenge(
        _ configuration: XTalkDeviceAuthConfiguration, anchors: [XTalkTrustAnchor], _ session: Session
    )
        async throws(XTalkDeviceAuthError)
        -> (deviceID: UInt32, anchor: XTalkTrustAnchor)
    {
        let attempts = configuration.maxChallengeAttempts
        var lastFailure = XTalkDeviceAuthError.challengeMissing
        for attempt in 1...attempts {
            try publish(.challenging(attempt: attempt, maxAttempts: attempts), session)
            let nonce: [UInt8]
            do {
                nonce = try randomBytes(16)
            } catch {
                throw .secureRandomUnavailable
            }
            guard nonce.count == 16 else { throw .secureRandomUnavailable }
            // log: false: neither the challenge nor the signature reaches any log.
            let reply = try await send(
                "AT+CHAL=" + Hex.encode(nonce),
                timeoutMs: configuration.challengeTimeoutMs, log: false, mode: .automatic)
            guard case .lines(let lines) = reply else {
                lastFailure = .commandTimedOut("AT+CHAL")
                continue
            }
            switch AuthenticationReplies.challenge(lines) {
            case .failure(.invalidSignatureLength(let count)):
                throw .invalidSignatureLength(count)  // deterministic: a retry gets the same
            case .failure(let failure):
                lastFailure = failure
            case .success(let signed):
                let message = AuthenticationReplies.signedMessage(nonce: nonce, deviceID: signed.deviceID)
                if skipsSignatureCheck { return (signed.deviceID, anchors[0]) }
                guard let anchor = Self.verifyingAnchor(signed.signature, message, anchors: anchors) else {
                    throw .signatureVerificationFailed
                }
                return (signed.deviceID, anchor)
            }
        }
        // A single attempt reports its own failure; exhausted retries say so.
        throw attempts == 1 ? lastFailure : .challengeRetryExhausted
    }

    /// The first anchor under which the signature verifies, if any. A
    /// backend that cannot verify fails closed.
    static func verifyingAnchor(_ signature: [UInt8], _ message: [UInt8], anchors: [XTalkTrustAnchor])
        -> XTalkTrustAnchor?
    {
        anchors.first { anchor in
            guard let key = try? Ed25519PublicKey(rawRepresentation: Array(anchor.rawRepresentation)) else {
                return false
            }
            return (try? key.isValidSignature(signature, for: message)) == true
        }
    }

    /// Reads `AT+ID?` and checks it: the serial parses, its fields build the
    /// canonical identifier, and that identifier is the one the device signed.
    private func readIdentity(_ configuration: XTalkDeviceAuthConfiguration, signedDeviceID: UInt32?)
        async throws(XTalkDeviceAuthError)
        -> XTalkDeviceIdentity
    {
        let reply = try await send("AT+ID?", timeoutMs: configuration.identityTimeoutMs, log: true, mode: .automatic)
        guard case .lines(let lines) = reply else { throw .commandTimedOut("AT+ID?") }
        guard let identity = AuthenticationReplies.identity(lines) else { throw .invalidDeviceIdentity }
        let canonical = XTalkDeviceIDCodec.canonicalize(identity.rawDeviceID)
        guard
            XTalkDeviceIDCodec.fromSn(year: identity.year, week: identity.week, serial: identity.serialNumber)
                == canonical
        else { throw .invalidDeviceIdentity }
        if let signedDeviceID, XTalkDeviceIDCodec.canonicalize(signedDeviceID) != canonical {
            throw .invalidDeviceIdentity
        }
        let verified = XTalkDeviceIdentity(
            deviceID: canonical, did: "did:xtalk:" + XTalkDeviceIDCodec.hex8(canonical),
            serial: identity.serial, source: identity.source)
        if let expected = configuration.expectedDeviceID, XTalkDeviceIDCodec.canonicalize(expected) != canonical {
            lastUnexpectedIdentity = verified
            throw .invalidDeviceIdentity
        }
        return verified
    }

    private enum Reply {
        case lines([String])
        case timedOut
    }

    /// Runs one command; a timeout is a reply, cancellation and any other
    /// transport failure are errors.
    private func send(_ command: String, timeoutMs: Int, log: Bool, mode: DeviceAuthResponseMode)
        async throws(XTalkDeviceAuthError)
        -> Reply
    {
        if Task.isCancelled { throw .cancelled }
        do {
            return .lines(try await transport.runAtCommand(command, timeoutMs: timeoutMs, log: log, responseMode: mode))
        } catch {
            if Task.isCancelled || error is CancellationError { throw .cancelled }
            if let classified = error as? any XTalkTransportError {
                if classified.isCancellation { throw .cancelled }
                if classified.isTimeout { return .timedOut }
            }
            throw .transportUnavailable
        }
    }
}

#if !canImport(Combine)
    extension XTalkDeviceAuthenticator: XTalkObservationHost {}
#endif
