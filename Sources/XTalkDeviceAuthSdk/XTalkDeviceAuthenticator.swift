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
    private let randomBytes: @Sendable (Int) throws -> [UInt8]
    private var active: Session?

    /// One authentication: its caller's continuation and the task doing the work.
    @MainActor
    private final class Session {
        var continuation: CheckedContinuation<XTalkDeviceAuthResult, any Error>?
        var task: Task<Void, Never>?
    }

    public init(transport: any DeviceAuthTransport) {
        self.transport = transport
        randomBytes = { count in try SecureRandom.bytes(count: count) }
    }

    /// An authenticator with another nonce source (tests of CSPRNG failure).
    package init(transport: any DeviceAuthTransport, randomBytes: @escaping @Sendable (Int) throws -> [UInt8]) {
        self.transport = transport
        self.randomBytes = randomBytes
    }

    /// Probes the encoding, runs the challenge when required (or always, by
    /// policy), reads the identity and returns the result; `state` follows
    /// `.probing`, `.challenging(attempt:maxAttempts:)`, `.readingIdentity`,
    /// `.authenticated(identity)`.
    ///
    /// When the transport's encoding matches the firmware, this costs three
    /// command round trips and no fixed waiting windows. Throws
    /// `.invalidConfiguration` before any I/O, `.busy` while another
    /// authentication of this instance runs (that one goes on), `.cancelled`
    /// after `cancel()` or task cancellation, or the failure, which is also
    /// published as `.failed(error)`.
    public func authenticate(
        configuration: XTalkDeviceAuthConfiguration = XTalkDeviceAuthConfiguration()
    ) async throws -> XTalkDeviceAuthResult {
        guard configuration.isValid else {
            if active == nil { state = .failed(.invalidConfiguration) }
            throw XTalkDeviceAuthError.invalidConfiguration
        }
        guard active == nil else { throw XTalkDeviceAuthError.busy }
        let session = Session()
        active = session
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<XTalkDeviceAuthResult, any Error>) in
                session.continuation = continuation
                session.task = Task { @MainActor in
                    let outcome: Result<XTalkDeviceAuthResult, XTalkDeviceAuthError>
                    do throws(XTalkDeviceAuthError) {
                        outcome = .success(try await self.run(configuration, session))
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

    private func run(_ configuration: XTalkDeviceAuthConfiguration, _ session: Session)
        async throws(XTalkDeviceAuthError)
        -> XTalkDeviceAuthResult
    {
        try publish(.probing, session)
        let (encoding, required) = try await probe(configuration)
        var signedDeviceID: UInt32?
        if required || configuration.challengePolicy == .always {
            signedDeviceID = try await challenge(configuration, session)
        }
        try publish(.readingIdentity, session)
        let identity = try await readIdentity(configuration, signedDeviceID: signedDeviceID)
        return XTalkDeviceAuthResult(identity: identity, encoding: encoding, didRequireChallenge: signedDeviceID != nil)
    }

    /// Finds the firmware's encoding with `AT+AUTH?`: fast probes (complete at
    /// `OK`) in the current encoding, then the other; if both are ambiguous,
    /// strict full-window probes in the other encoding, then the current. The
    /// transport leaves the channel clean after an ambiguous probe.
    private func probe(_ configuration: XTalkDeviceAuthConfiguration) async throws(XTalkDeviceAuthError)
        -> (DeviceAuthAtEncoding, required: Bool)
    {
        let current = transport.atEncoding
        let other: DeviceAuthAtEncoding = current == .plain ? .xor : .plain
        let probes: [(DeviceAuthAtEncoding, DeviceAuthResponseMode, Int)] = [
            (current, .automatic, configuration.probeTimeoutMs),
            (other, .automatic, configuration.probeTimeoutMs),
            (other, .recoverableEncodingProbe, configuration.strictProbeTimeoutMs),
            (current, .recoverableEncodingProbe, configuration.strictProbeTimeoutMs),
        ]
        for (encoding, mode, timeout) in probes {
            // Set it even when it looks current: an adapter's reported encoding may lag its connection's.
            transport.setAtEncoding(encoding)
            if case .lines(let lines) = try await send("AT+AUTH?", timeoutMs: timeout, log: true, mode: mode),
                let required = AuthenticationReplies.probe(lines)
            {
                return (encoding, required)
            }
        }
        throw .commandTimedOut("AT+AUTH?")
    }

    /// Runs challenge attempts until one verifies. Timeouts, missing,
    /// malformed and rejected replies are retried; a signature that does not
    /// verify is not. Returns the identifier the device signed.
    private func challenge(_ configuration: XTalkDeviceAuthConfiguration, _ session: Session)
        async throws(XTalkDeviceAuthError)
        -> UInt32
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
            case .failure(let failure):
                lastFailure = failure
            case .success(let signed):
                let message = AuthenticationReplies.signedMessage(nonce: nonce, deviceID: signed.deviceID)
                guard skipsSignatureCheck || Self.verify(signed.signature, message, anchors: configuration.trustAnchors)
                else {
                    throw .signatureVerificationFailed
                }
                return signed.deviceID
            }
        }
        // A single attempt reports its own failure; exhausted retries say so.
        throw attempts == 1 ? lastFailure : .challengeRetryExhausted
    }

    /// True when the signature verifies under one of the anchors. A backend
    /// that cannot verify fails closed.
    static func verify(_ signature: [UInt8], _ message: [UInt8], anchors: [XTalkTrustAnchor]) -> Bool {
        anchors.contains { anchor in
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
        return XTalkDeviceIdentity(
            deviceID: canonical, did: "did:xtalk:" + XTalkDeviceIDCodec.hex8(canonical),
            serial: identity.serial, source: identity.source)
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
