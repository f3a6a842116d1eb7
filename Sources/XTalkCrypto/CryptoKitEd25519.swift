#if canImport(CryptoKit)
    import CryptoKit
    import Foundation

    /// The Apple backend: CryptoKit's `Curve25519.Signing`, which is Ed25519.
    /// Callers have already checked every length, so CryptoKit's own errors mean a real failure.
    enum Ed25519Backend {
        /// Derives the 32-byte public key of a 32-byte seed.
        static func publicKey(fromSeed seed: [UInt8]) throws(XTalkCryptoError) -> [UInt8] {
            try [UInt8](privateKey(seed).publicKey.rawRepresentation)
        }

        /// Signs `message` with the key of a 32-byte seed; CryptoKit randomizes, so the result varies per call.
        static func signature(for message: [UInt8], seed: [UInt8]) throws(XTalkCryptoError) -> [UInt8] {
            let key = try privateKey(seed)
            do {
                return try [UInt8](key.signature(for: message))
            } catch {
                throw .operationFailed("Curve25519.Signing.PrivateKey.signature(for:): \(error)")
            }
        }

        /// Verifies a 64-byte signature of `message` under a 32-byte public key.
        static func isValidSignature(
            _ signature: [UInt8], for message: [UInt8], publicKey: [UInt8]
        ) throws(XTalkCryptoError) -> Bool {
            let key: Curve25519.Signing.PublicKey
            do {
                key = try Curve25519.Signing.PublicKey(rawRepresentation: publicKey)
            } catch {
                throw .operationFailed("Curve25519.Signing.PublicKey(rawRepresentation:): \(error)")
            }
            return key.isValidSignature(signature, for: message)
        }

        /// Wraps a seed in a CryptoKit key, naming the call if CryptoKit rejects it.
        private static func privateKey(_ seed: [UInt8]) throws(XTalkCryptoError) -> Curve25519.Signing.PrivateKey {
            do {
                return try Curve25519.Signing.PrivateKey(rawRepresentation: seed)
            } catch {
                throw .operationFailed("Curve25519.Signing.PrivateKey(rawRepresentation:): \(error)")
            }
        }
    }
#endif
