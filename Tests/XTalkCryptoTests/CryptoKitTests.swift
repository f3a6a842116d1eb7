// CryptoKit's Ed25519 as XTalkCrypto calls it. On Apple platforms this is
// CryptoKit itself; on Linux in the Apple stand-in build (XTALK_APPLE_STANDINS=1)
// it is StandIns/CryptoKit, so these tests hold the stand-in to CryptoKit's
// documented behaviour. Without either, there is nothing to test.
#if canImport(CryptoKit)
    import CryptoKit
    import Foundation
    import Testing

    @Suite(.timeLimit(.minutes(5))) struct CryptoKitTests {
        /// Keys from the RFC 8032 vectors derive the documented public key, and their signatures verify.
        @Test(arguments: Vector.all)
        func signsAndVerifiesKnownVector(_ vector: Vector) throws {
            let key = try Curve25519.Signing.PrivateKey(rawRepresentation: hex(vector.seed))
            #expect(key.publicKey.rawRepresentation == Data(try hex(vector.publicKey)))
            let message = try hex(vector.message)
            // CryptoKit randomizes its signatures: only their length and validity are portable.
            let signature = try key.signature(for: message)
            #expect(signature.count == 64)
            #expect(key.publicKey.isValidSignature(signature, for: message))
            let publicKey = try Curve25519.Signing.PublicKey(rawRepresentation: hex(vector.publicKey))
            #expect(publicKey.isValidSignature(try hex(vector.signature), for: message))
            #expect(!publicKey.isValidSignature(try hex(vector.signature), for: message + [0]))
        }

        /// A signature of the wrong length is invalid, not an error.
        @Test(arguments: [0, 63, 65])
        func rejectsWrongSignatureLength(_ length: Int) throws {
            let key = try Curve25519.Signing.PublicKey(rawRepresentation: hex(Vector.xtalk.publicKey))
            #expect(!key.isValidSignature([UInt8](repeating: 1, count: length), for: try hex(Vector.xtalk.message)))
        }

        /// Keys of any length but 32 bytes are refused when created.
        @Test(arguments: [0, 31, 33, 64])
        func refusesWrongKeyLength(_ length: Int) {
            let bytes = [UInt8](repeating: 7, count: length)
            #expect(throws: CryptoKitError.self) { try Curve25519.Signing.PrivateKey(rawRepresentation: bytes) }
            #expect(throws: CryptoKitError.self) { try Curve25519.Signing.PublicKey(rawRepresentation: bytes) }
        }
    }
#endif
