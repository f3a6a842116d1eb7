import Foundation

/// Why authentication failed. Every failure publishes `.failed(error)` and
/// throws the same error. Each case says when the SDK produces it and what an
/// app should do.
///
/// Challenge failures are of two kinds. Retryable ones (a timeout, a reply
/// without `+CHAL:`, a malformed `+CHAL:` line, `+CHAL:ERR`) are retried up
/// to `maxChallengeAttempts` (the state shows each attempt) and end in
/// `.challengeRetryExhausted`; with one attempt, the failure itself is thrown.
/// Deterministic ones (a signature of the wrong length, one no trusted anchor
/// verifies, an identity other than the signed one) are thrown at once, as
/// themselves: a retry would give the same answer.
public enum XTalkDeviceAuthError: Error, Equatable, Hashable, Sendable {
    /// Another authentication of this authenticator is active (it goes on).
    /// Wait for it, or `cancel()` it first.
    case busy
    /// A configuration value is not greater than zero, the trust anchor list
    /// is empty, or a declared anchor (Info.plist `XTalkTrustAnchors`) is not
    /// a valid key. Thrown before any I/O. A programming error: fix the app.
    case invalidConfiguration
    /// The transport cannot run commands (not connected, not ready, a failed
    /// write). Reconnect, wait for `atReady`, then authenticate again.
    case transportUnavailable
    /// The named command was not answered in time: `AT+AUTH?` in neither
    /// encoding (not an xTalk radio, or its firmware does not respond),
    /// `AT+ID?`, or `AT+CHAL` when only one attempt is allowed. Retry once the
    /// link is good; if it persists, the device is not usable.
    case commandTimedOut(String)
    /// The platform's secure random generator failed to produce a nonce. The
    /// platform is broken: do not retry in a loop.
    case secureRandomUnavailable
    /// The device refused authentication: it answered the probe `AT+AUTH?`
    /// with an error instead of `+AUTH:` (its firmware has no authentication;
    /// not retried), or a challenge with `+CHAL:ERR` (thrown when only one
    /// attempt is allowed; retried otherwise). Treat the device as untrusted.
    case invalidChallenge
    /// A challenge's response held no `+CHAL:` line (thrown when only one
    /// attempt is allowed; retried otherwise).
    case challengeMissing
    /// A `+CHAL:` line is not `<8 hex id>,<hex signature>` (thrown when only
    /// one attempt is allowed; retried otherwise).
    case malformedChallengeReply
    /// The signature has this many bytes instead of 64. Not retried: the
    /// device or its firmware is not genuine. Reject it.
    case invalidSignatureLength(Int)
    /// The signature does not verify under any trusted anchor. Not retried:
    /// the device holds no key you trust (an impostor, or a device signed by
    /// a key your app does not declare). Reject it.
    case signatureVerificationFailed
    /// Every challenge attempt failed with a retryable failure (timeouts,
    /// missing, malformed or rejected replies). Usually the link: retry later.
    case challengeRetryExhausted
    /// The identity reply is malformed or disagrees with itself, the device
    /// signed another identifier than the one it reports, or (with
    /// `expectedDeviceID`) it is another device than the expected one
    /// (`XTalkDeviceAuthenticator.lastUnexpectedIdentity` then names it).
    /// Reject the device.
    case invalidDeviceIdentity
    /// `cancel()`, `reset()` or task cancellation ended the authentication;
    /// also a transport error that is a cancellation: with the BLE client,
    /// `disconnect()`, `teardown()`, `startScan()` or `connect(id:)` to another
    /// device during the authentication (a lost link is `.transportUnavailable`).
    case cancelled
}

extension XTalkDeviceAuthError: CustomStringConvertible, LocalizedError {
    public var description: String {
        switch self {
        case .busy: "another authentication is active"
        case .invalidConfiguration:
            "the authentication configuration is invalid (every value must be greater than zero)"
        case .transportUnavailable: "the transport cannot run commands (not connected or not ready)"
        case .commandTimedOut(let command): "\(command) was not answered in time"
        case .secureRandomUnavailable: "the secure random generator is unavailable"
        case .invalidChallenge: "the device rejected the challenge"
        case .challengeMissing: "the device did not answer the challenge"
        case .malformedChallengeReply: "the challenge reply is malformed"
        case .invalidSignatureLength(let count): "the signature has \(count) bytes instead of 64"
        case .signatureVerificationFailed: "the signature does not verify under any trusted key"
        case .challengeRetryExhausted: "every challenge attempt failed"
        case .invalidDeviceIdentity: "the device identity is invalid or inconsistent"
        case .cancelled: "authentication was cancelled"
        }
    }

    public var errorDescription: String? { description }
}

/// Where the serial number of an identity comes from.
public enum XTalkDeviceIdentitySource: String, Sendable, Hashable {
    /// Burnt into eFuse at manufacturing (`EFUSE`).
    case efuseSn
    /// Configured later (`SN`).
    case sn
}

/// A verified device identity.
public struct XTalkDeviceIdentity: Sendable, Hashable {
    /// The canonical 32-bit device identifier.
    public let deviceID: UInt32
    /// `did:xtalk:` followed by the identifier as 8 uppercase hex digits.
    public let did: String
    /// The serial text, e.g. `XT2648012345`.
    public let serial: String
    /// Where the serial number comes from.
    public let source: XTalkDeviceIdentitySource

    /// Normal consumers use the identity `authenticate` returns instead.
    public init(deviceID: UInt32, did: String, serial: String, source: XTalkDeviceIdentitySource) {
        self.deviceID = deviceID
        self.did = did
        self.serial = serial
        self.source = source
    }
}

/// A public Ed25519 key whose signatures the authenticator trusts.
public struct XTalkTrustAnchor: Sendable, Hashable {
    /// The 32-byte public key.
    public let rawRepresentation: Data

    /// Nil unless `rawRepresentation` holds exactly 32 bytes.
    public init?(rawRepresentation: Data) {
        guard rawRepresentation.count == 32 else { return nil }
        self.rawRepresentation = rawRepresentation
    }

    /// The built-in development anchor. Its private key lives only in the
    /// simulator and the tests: never trust it in production builds.
    public static let development = XTalkTrustAnchor(
        unchecked: Data([
            0x0A, 0x53, 0xA4, 0x44, 0x6A, 0xAB, 0x1A, 0x15, 0x68, 0x71, 0x39, 0xE9, 0xEA, 0x98, 0xC1, 0x23,
            0x4F, 0xE3, 0xF0, 0x79, 0x4E, 0xE1, 0x98, 0x4C, 0x47, 0x0F, 0xBE, 0x13, 0x72, 0x9E, 0x4D, 0xBB,
        ]))

    private init(unchecked: Data) {
        rawRepresentation = unchecked
    }
}

/// When the authenticator runs the challenge.
public enum XTalkChallengePolicy: Sendable, Hashable {
    /// When the device answers `+AUTH:1`.
    case whenRequired
    /// Always, even when the device claims (`+AUTH:0`) that none is needed: a
    /// device that cannot prove its key is rejected, so an impostor cannot
    /// downgrade the check by claiming to need none.
    case always
}

/// How authentication runs. Every value must be greater than zero.
public struct XTalkDeviceAuthConfiguration: Sendable, Hashable {
    /// Timeout of the fast encoding probe.
    public var probeTimeoutMs: Int
    /// Window of the strict (full-window) probe used when the fast probe is ambiguous.
    public var strictProbeTimeoutMs: Int
    /// Timeout of each challenge attempt.
    public var challengeTimeoutMs: Int
    /// Timeout of the identity query.
    public var identityTimeoutMs: Int
    /// Challenge attempts before `.challengeRetryExhausted`.
    public var maxChallengeAttempts: Int
    /// The keys whose signatures are trusted. Nil (the default): the anchors
    /// the app declares (`XTalkTrustAnchors`: in code or in Info.plist), or,
    /// with none declared, the development anchor (see `XTalkTrustAnchors`
    /// for the rule). An empty list is `.invalidConfiguration`.
    public var trustAnchors: [XTalkTrustAnchor]?
    /// When to run the challenge (default: when the device requires it).
    public var challengePolicy: XTalkChallengePolicy
    /// The device this authentication expects (e.g. the identifier
    /// authenticated before a reconnect). A device that proves another
    /// identity fails with `.invalidDeviceIdentity`, and the authenticator's
    /// `lastUnexpectedIdentity` tells which device it was. Nil: any device.
    public var expectedDeviceID: UInt32?

    /// A configuration with the API reference's defaults; every value must be
    /// greater than zero, and a trust-anchor list must not be empty, or
    /// `authenticate` throws `.invalidConfiguration`.
    public init(
        probeTimeoutMs: Int = 800,
        strictProbeTimeoutMs: Int = 1_200,
        challengeTimeoutMs: Int = 4_000,
        identityTimeoutMs: Int = 4_000,
        maxChallengeAttempts: Int = 3,
        trustAnchors: [XTalkTrustAnchor]? = nil,
        challengePolicy: XTalkChallengePolicy = .whenRequired,
        expectedDeviceID: UInt32? = nil
    ) {
        self.probeTimeoutMs = probeTimeoutMs
        self.strictProbeTimeoutMs = strictProbeTimeoutMs
        self.challengeTimeoutMs = challengeTimeoutMs
        self.identityTimeoutMs = identityTimeoutMs
        self.maxChallengeAttempts = maxChallengeAttempts
        self.trustAnchors = trustAnchors
        self.challengePolicy = challengePolicy
        self.expectedDeviceID = expectedDeviceID
    }

    var isValid: Bool {
        [probeTimeoutMs, strictProbeTimeoutMs, challengeTimeoutMs, identityTimeoutMs, maxChallengeAttempts]
            .allSatisfy { $0 > 0 } && trustAnchors?.isEmpty != true
    }
}

/// The outcome of a successful authentication.
public struct XTalkDeviceAuthResult: Sendable, Hashable {
    /// The verified identity of the device.
    public let identity: XTalkDeviceIdentity
    /// The encoding the firmware uses (the transport is left set to it).
    public let encoding: DeviceAuthAtEncoding
    /// Whether a challenge was performed and verified.
    public let didRequireChallenge: Bool
    /// The anchor whose key verified the challenge's signature; nil when no
    /// challenge ran. `.development` means the device proved only the
    /// development key, which anyone can read in the simulator's source: trust
    /// it in development builds only (see `XTalkTrustAnchors`).
    public let verifiedBy: XTalkTrustAnchor?

    /// A result with these values and no verifying anchor (the API reference's initializer).
    public init(identity: XTalkDeviceIdentity, encoding: DeviceAuthAtEncoding, didRequireChallenge: Bool) {
        self.init(identity: identity, encoding: encoding, didRequireChallenge: didRequireChallenge, verifiedBy: nil)
    }

    /// A result with these values, naming the anchor that verified the signature.
    public init(
        identity: XTalkDeviceIdentity, encoding: DeviceAuthAtEncoding, didRequireChallenge: Bool,
        verifiedBy: XTalkTrustAnchor?
    ) {
        self.identity = identity
        self.encoding = encoding
        self.didRequireChallenge = didRequireChallenge
        self.verifiedBy = verifiedBy
    }
}

/// Where an authentication is.
public enum XTalkDeviceAuthState: Sendable, Hashable {
    /// No authentication has run since the authenticator was created or `reset()`.
    case idle
    /// Asking `AT+AUTH?` to find the firmware's AT encoding.
    case probing
    /// Running challenge `attempt` (from 1) of at most `maxAttempts`.
    case challenging(attempt: Int, maxAttempts: Int)
    /// Reading and checking the identity (`AT+ID?`).
    case readingIdentity
    /// The device proved this identity.
    case authenticated(XTalkDeviceIdentity)
    /// The last authentication failed with this error (the one `authenticate` threw).
    case failed(XTalkDeviceAuthError)
    /// The last authentication was cancelled.
    case cancelled
}
