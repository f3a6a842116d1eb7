/// An error from the Ed25519 or random-number seam; every case carries enough text to log as is.
package enum XTalkCryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The crypto backend could not be loaded; the text names the library or symbol.
    case libraryUnavailable(String)
    /// A key or seed had this many bytes instead of 32.
    case invalidKeyLength(Int)
    /// A backend call failed; the text names the call.
    case operationFailed(String)
    /// The system CSPRNG failed; the text carries the system's reason.
    case randomUnavailable(String)

    /// A one-line human-readable explanation of the error.
    package var description: String {
        switch self {
        case .libraryUnavailable(let detail): "Ed25519 backend unavailable: \(detail)"
        case .invalidKeyLength(let count): "Ed25519 keys and seeds are 32 bytes, got \(count)"
        case .operationFailed(let detail): "Ed25519 operation failed: \(detail)"
        case .randomUnavailable(let detail): "secure random bytes unavailable: \(detail)"
        }
    }
}

/// Sizes fixed by RFC 8032 for Ed25519.
enum Ed25519Size {
    /// Bytes in a private-key seed and in a public key.
    static let key = 32
    /// Bytes in a signature (R ‖ S).
    static let signature = 64
}

/// An Ed25519 public key (RFC 8032), used to verify signatures.
package struct Ed25519PublicKey: Sendable, Hashable {
    /// The 32-byte encoded point.
    package let rawRepresentation: [UInt8]

    /// Wraps a 32-byte encoded public key; throws `.invalidKeyLength` for any other length.
    /// Only the length is checked here: a malformed point simply fails every verification.
    package init(rawRepresentation: [UInt8]) throws(XTalkCryptoError) {
        guard rawRepresentation.count == Ed25519Size.key else {
            throw .invalidKeyLength(rawRepresentation.count)
        }
        self.rawRepresentation = rawRepresentation
    }

    /// Returns whether `signature` is a valid signature of `message` under this key.
    /// A wrong-length or forged signature yields `false`; throws only when the backend is unavailable or fails.
    package func isValidSignature(_ signature: [UInt8], for message: [UInt8]) throws(XTalkCryptoError) -> Bool {
        // No signature of another length can be valid, so the backend never sees one.
        guard signature.count == Ed25519Size.signature else { return false }
        return try Ed25519Backend.isValidSignature(signature, for: message, publicKey: rawRepresentation)
    }
}

/// An Ed25519 private key (RFC 8032) held as its 32-byte seed, used to sign messages.
package struct Ed25519PrivateKey: Sendable {
    /// The 32-byte RFC 8032 seed; never exposed, so the key cannot leak through this type's API.
    private let seed: [UInt8]
    /// The public key derived from the seed.
    package let publicKey: Ed25519PublicKey

    /// Creates the key from a 32-byte seed and derives its public key.
    /// Throws `.invalidKeyLength` for any other length, or a backend error if the backend is unavailable.
    package init(seed: [UInt8]) throws(XTalkCryptoError) {
        guard seed.count == Ed25519Size.key else { throw .invalidKeyLength(seed.count) }
        self.seed = seed
        publicKey = try Ed25519PublicKey(rawRepresentation: Ed25519Backend.publicKey(fromSeed: seed))
    }

    /// Returns the 64-byte signature of `message`; throws if the backend is unavailable or fails.
    /// Deterministic on Linux, as RFC 8032 specifies; CryptoKit adds randomness, so on Apple platforms
    /// each call returns a different signature, all of which verify.
    package func signature(for message: [UInt8]) throws(XTalkCryptoError) -> [UInt8] {
        try Ed25519Backend.signature(for: message, seed: seed)
    }
}
