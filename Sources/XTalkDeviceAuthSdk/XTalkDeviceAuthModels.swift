import Foundation

/// Why authentication failed. Every failure publishes `.failed(error)` and
/// throws the same error.
public enum XTalkDeviceAuthError: Error, Equatable, Hashable, Sendable {
    /// Another authentication of this authenticator is active.
    case busy
    /// A configuration value is not greater than zero (or no trust anchor is given).
    case invalidConfiguration
    /// The transport cannot run commands (not connected, not ready, failed write).
    case transportUnavailable
    /// The named command was not answered in time (`AT+AUTH?`, `AT+CHAL`, `AT+ID?`).
    case commandTimedOut(String)
    /// The platform's secure random generator failed to produce a nonce.
    case secureRandomUnavailable
    /// The device rejected the challenge (`+CHAL:ERR`).
    case invalidChallenge
    /// The challenge's response held no `+CHAL:` line.
    case challengeMissing
    /// The `+CHAL:` line is not `<8 hex id>,<hex signature>`.
    case malformedChallengeReply
    /// The signature has this many bytes instead of 64.
    case invalidSignatureLength(Int)
    /// The signature does not verify under any trust anchor.
    case signatureVerificationFailed
    /// Every challenge attempt failed (timeouts, missing, malformed or rejected replies).
    case challengeRetryExhausted
    /// The identity reply is malformed or disagrees with itself or with the signed identifier.
    case invalidDeviceIdentity
    /// `cancel()` or task cancellation ended the authentication.
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
    /// The keys whose signatures are trusted (default: the development anchor).
    public var trustAnchors: [XTalkTrustAnchor]
    /// When to run the challenge (default: when the device requires it).
    public var challengePolicy: XTalkChallengePolicy

    public init(
        probeTimeoutMs: Int = 800,
        strictProbeTimeoutMs: Int = 1_200,
        challengeTimeoutMs: Int = 4_000,
        identityTimeoutMs: Int = 4_000,
        maxChallengeAttempts: Int = 3,
        trustAnchors: [XTalkTrustAnchor] = [.development],
        challengePolicy: XTalkChallengePolicy = .whenRequired
    ) {
        self.probeTimeoutMs = probeTimeoutMs
        self.strictProbeTimeoutMs = strictProbeTimeoutMs
        self.challengeTimeoutMs = challengeTimeoutMs
        self.identityTimeoutMs = identityTimeoutMs
        self.maxChallengeAttempts = maxChallengeAttempts
        self.trustAnchors = trustAnchors
        self.challengePolicy = challengePolicy
    }

    var isValid: Bool {
        [probeTimeoutMs, strictProbeTimeoutMs, challengeTimeoutMs, identityTimeoutMs, maxChallengeAttempts]
            .allSatisfy { $0 > 0 } && !trustAnchors.isEmpty
    }
}

/// The outcome of a successful authentication.
public struct XTalkDeviceAuthResult: Sendable, Hashable {
    public let identity: XTalkDeviceIdentity
    /// The encoding the firmware uses (the transport is left set to it).
    public let encoding: DeviceAuthAtEncoding
    /// Whether a challenge was performed and verified.
    public let didRequireChallenge: Bool

    public init(identity: XTalkDeviceIdentity, encoding: DeviceAuthAtEncoding, didRequireChallenge: Bool) {
        self.identity = identity
        self.encoding = encoding
        self.didRequireChallenge = didRequireChallenge
    }
}

/// Where an authentication is.
public enum XTalkDeviceAuthState: Sendable, Hashable {
    case idle
    case probing
    case challenging(attempt: Int, maxAttempts: Int)
    case readingIdentity
    case authenticated(XTalkDeviceIdentity)
    case failed(XTalkDeviceAuthError)
    case cancelled
}
