#if !canImport(CryptoKit)
    import XTalkLibCrypto

    /// The Linux backend: the system libcrypto through XTalkLibCrypto, which owns the dlopen loader.
    /// Callers have already checked every length; this layer only renames libcrypto's errors.
    enum Ed25519Backend {
        /// Derives the 32-byte public key of a 32-byte seed.
        static func publicKey(fromSeed seed: [UInt8]) throws(XTalkCryptoError) -> [UInt8] {
            do {
                return try LibCryptoEd25519.publicKey(fromSeed: seed)
            } catch {
                throw XTalkCryptoError(error)
            }
        }

        /// Signs `message` with the key of a 32-byte seed; deterministic, as RFC 8032 specifies.
        static func signature(for message: [UInt8], seed: [UInt8]) throws(XTalkCryptoError) -> [UInt8] {
            do {
                return try LibCryptoEd25519.signature(for: message, seed: seed)
            } catch {
                throw XTalkCryptoError(error)
            }
        }

        /// Verifies a 64-byte signature of `message` under a 32-byte public key.
        static func isValidSignature(
            _ signature: [UInt8], for message: [UInt8], publicKey: [UInt8]
        ) throws(XTalkCryptoError) -> Bool {
            do {
                return try LibCryptoEd25519.isValidSignature(signature, for: message, publicKey: publicKey)
            } catch {
                throw XTalkCryptoError(error)
            }
        }
    }

    extension XTalkCryptoError {
        /// The same failure in this module's terms, keeping libcrypto's detail text unchanged.
        init(_ error: LibCryptoError) {
            switch error {
            case .libraryUnavailable(let detail): self = .libraryUnavailable(detail)
            case .operationFailed(let detail): self = .operationFailed(detail)
            }
        }
    }
#endif
