// Stand-in for Apple's CryptoKit, the part the SDK uses: Ed25519 signing keys
// (`Curve25519.Signing`). It exists only so that the Apple code path of
// Sources/XTalkCrypto/CryptoKitEd25519.swift compiles and runs on Linux in the
// Apple stand-in build (XTALK_APPLE_STANDINS=1); it is never shipped. The
// cryptography is real: the system libcrypto, through XTalkLibCrypto.
//
// Each declaration has the Swift-visible shape of Apple's, from
// https://developer.apple.com/documentation/cryptokit/<symbol>:
//   Curve25519             https://developer.apple.com/documentation/cryptokit/curve25519
//   Curve25519.Signing     https://developer.apple.com/documentation/cryptokit/curve25519/signing
//   Curve25519.Signing.PrivateKey
//                          https://developer.apple.com/documentation/cryptokit/curve25519/signing/privatekey
//     init(rawRepresentation:), publicKey, rawRepresentation, signature(for:)
//   Curve25519.Signing.PublicKey
//                          https://developer.apple.com/documentation/cryptokit/curve25519/signing/publickey
//     init(rawRepresentation:), rawRepresentation, isValidSignature(_:for:)
//   CryptoKitError         https://developer.apple.com/documentation/cryptokit/cryptokiterror
//
// One documented difference: CryptoKit randomizes Ed25519 signatures, while
// libcrypto follows RFC 8032 and signs deterministically. Both verify the same.

import Foundation
import XTalkLibCrypto

/// Errors CryptoKit throws.
public enum CryptoKitError: Error, Sendable {
    /// The key had the wrong number of bytes.
    case incorrectKeySize
    /// A parameter had the wrong number of bytes.
    case incorrectParameterSize
    /// Authentication of sealed data failed.
    case authenticationFailure
    /// The underlying cryptographic library failed; here, libcrypto was unavailable or one of its calls failed.
    case underlyingCoreCryptoError(error: Int32)
    /// Wrapping a key failed.
    case wrapFailure
    /// Unwrapping a key failed.
    case unwrapFailure
    /// A parameter was not valid.
    case invalidParameter
}

/// Curve25519 elliptic-curve operations; only signing (Ed25519) stands in here.
public enum Curve25519 {
    /// Ed25519 signatures (RFC 8032).
    public enum Signing {
        /// An Ed25519 private key, held as its 32-byte seed.
        public struct PrivateKey: Sendable {
            /// The 32-byte seed.
            private let seed: [UInt8]
            /// The matching public key, derived once at creation.
            public let publicKey: Curve25519.Signing.PublicKey

            /// Creates a key from its 32-byte seed; throws `incorrectKeySize` for any other length.
            public init<D: ContiguousBytes>(rawRepresentation data: D) throws {
                let seed = data.withUnsafeBytes { [UInt8]($0) }
                guard seed.count == LibCryptoEd25519.keyLength else { throw CryptoKitError.incorrectKeySize }
                self.seed = seed
                publicKey = try Curve25519.Signing.PublicKey(
                    rawRepresentation: libCrypto { () throws(LibCryptoError) in
                        try LibCryptoEd25519.publicKey(fromSeed: seed)
                    })
            }

            /// The 32-byte seed.
            public var rawRepresentation: Data { Data(seed) }

            /// Returns the 64-byte Ed25519 signature of `data`.
            public func signature<D: DataProtocol>(for data: D) throws -> Data {
                let message = [UInt8](data)
                let seed = seed
                return Data(
                    try libCrypto { () throws(LibCryptoError) in
                        try LibCryptoEd25519.signature(for: message, seed: seed)
                    })
            }
        }

        /// An Ed25519 public key: a 32-byte encoded point.
        public struct PublicKey: Sendable {
            /// The 32 bytes.
            private let bytes: [UInt8]

            /// Wraps a 32-byte public key; throws `incorrectKeySize` for any other length.
            /// Like CryptoKit, the point itself is not checked here: a bad one fails every verification.
            public init<D: ContiguousBytes>(rawRepresentation data: D) throws {
                let bytes = data.withUnsafeBytes { [UInt8]($0) }
                guard bytes.count == LibCryptoEd25519.keyLength else { throw CryptoKitError.incorrectKeySize }
                self.bytes = bytes
            }

            /// The 32-byte encoded point.
            public var rawRepresentation: Data { Data(bytes) }

            /// Returns whether `signature` is a valid signature of `data` under this key.
            /// Never throws, as in CryptoKit: a wrong length, a forgery or a libcrypto failure is `false`.
            public func isValidSignature<S: DataProtocol, D: DataProtocol>(_ signature: S, for data: D) -> Bool {
                let signature = [UInt8](signature)
                guard signature.count == LibCryptoEd25519.signatureLength else { return false }
                return (try? LibCryptoEd25519.isValidSignature(signature, for: [UInt8](data), publicKey: bytes))
                    ?? false
            }
        }
    }
}

/// Runs a libcrypto call, turning its failure into the error CryptoKit throws when its own backend fails.
/// CryptoKit's error carries no text, so libcrypto's detail is lost here; XTalkCrypto names the call instead.
private func libCrypto<T>(_ call: () throws(LibCryptoError) -> T) throws(CryptoKitError) -> T {
    do {
        return try call()
    } catch {
        throw .underlyingCoreCryptoError(error: -1)
    }
}
