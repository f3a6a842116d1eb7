import Foundation
import Testing
import XTalkSimulator
import XTalkTestSupport
@testable import XTalkCrypto

/// A known-answer Ed25519 vector, as hex.
struct Vector: Sendable, CustomTestStringConvertible {
    let name: String
    let seed: String
    let publicKey: String
    let message: String
    let signature: String

    var testDescription: String { name }

    /// The xTalk auth challenge, generated with Python's `cryptography`.
    static let xtalk = Vector(
        name: "xTalk challenge",
        seed: "881250902eb42bdc3c0f36bb0e676f3dca510757f3b13ecb8b6e836dc494b389",
        publicKey: "0a53a4446aab1a15687139e9ea98c1234fe3f0794ee1984c470fbe13729e4dbb",
        message: "5854414c4b2d415554482d563100000102030405060708090a0b0c0d0e0f8d30303a",
        signature: "b60130727e3009fc9f5c45f6e364ece4953823776d60c4654460be07d88b598c"
            + "bfb389a0efe80e537746ec5f525c300c3838ed348c3139cc3a4b8da17801ad0d"
    )
    /// RFC 8032 section 7.1, TEST 1 (empty message).
    static let rfcTest1 = Vector(
        name: "RFC 8032 TEST 1",
        seed: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        publicKey: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        message: "",
        signature: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
            + "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    /// RFC 8032 section 7.1, TEST 3 (two-byte message).
    static let rfcTest3 = Vector(
        name: "RFC 8032 TEST 3",
        seed: "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        publicKey: "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        message: "af82",
        signature: "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
            + "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"
    )
    static let all = [xtalk, rfcTest1, rfcTest3]
}

/// Decodes a hex string; records an issue and throws on a malformed one.
func hex(_ string: String) throws -> [UInt8] {
    let digits = Array(string.utf8)
    try #require(digits.count.isMultiple(of: 2))
    return try stride(from: 0, to: digits.count, by: 2).map { index in
        try #require(UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16))
    }
}

/// Returns `bytes` with bit `bit` (counted from the first byte's least significant bit) inverted.
func flipping(_ bytes: [UInt8], bit: Int) -> [UInt8] {
    var copy = bytes
    copy[bit / 8] ^= 1 << (bit % 8)
    return copy
}

@Suite(.timeLimit(.minutes(5))) struct Ed25519Tests {
    @Test(arguments: Vector.all)
    func derivesPublicKeyFromSeed(_ vector: Vector) throws {
        let key = try Ed25519PrivateKey(seed: hex(vector.seed))
        #expect(key.publicKey.rawRepresentation == (try hex(vector.publicKey)))
    }

    @Test(arguments: Vector.all)
    func signsKnownVector(_ vector: Vector) throws {
        let key = try Ed25519PrivateKey(seed: hex(vector.seed))
        let message = try hex(vector.message)
        let signature = try key.signature(for: message)
        #if canImport(CryptoKit)
            // CryptoKit randomizes Ed25519 signatures (documented), so only validity is portable.
            #expect(signature.count == 64)
            #expect(try key.publicKey.isValidSignature(signature, for: message))
        #else
            #expect(signature == (try hex(vector.signature)))
            #expect(try key.signature(for: message) == signature)
        #endif
    }

    @Test(arguments: Vector.all)
    func verifiesKnownVector(_ vector: Vector) throws {
        let key = try Ed25519PublicKey(rawRepresentation: hex(vector.publicKey))
        #expect(try key.isValidSignature(hex(vector.signature), for: hex(vector.message)))
    }

    /// Bits in the first, a middle and the last byte of the 34-byte xTalk message.
    @Test(arguments: [0, 7, 100, 271])
    func rejectsMessageWithFlippedBit(_ bit: Int) throws {
        let vector = Vector.xtalk
        let key = try Ed25519PublicKey(rawRepresentation: hex(vector.publicKey))
        #expect(try !key.isValidSignature(hex(vector.signature), for: flipping(hex(vector.message), bit: bit)))
    }

    @Test func rejectsMessageWithExtraByte() throws {
        let vector = Vector.rfcTest1
        let key = try Ed25519PublicKey(rawRepresentation: hex(vector.publicKey))
        #expect(try !key.isValidSignature(hex(vector.signature), for: [0]))
    }

    /// Bits at both ends of R (bytes 0–31) and of S (bytes 32–63), including S's top bit.
    @Test(arguments: [0, 130, 255, 256, 400, 511])
    func rejectsSignatureWithFlippedBit(_ bit: Int) throws {
        let vector = Vector.xtalk
        let key = try Ed25519PublicKey(rawRepresentation: hex(vector.publicKey))
        #expect(try !key.isValidSignature(flipping(hex(vector.signature), bit: bit), for: hex(vector.message)))
    }

    @Test func rejectsSignatureUnderAnotherKey() throws {
        let other = try Ed25519PublicKey(rawRepresentation: hex(Vector.rfcTest1.publicKey))
        let vector = Vector.xtalk
        #expect(try !other.isValidSignature(hex(vector.signature), for: hex(vector.message)))
    }

    @Test func rejectsRatherThanThrowsForKeyOffTheCurve() throws {
        // y = 2 has no x on edwards25519, so this 32-byte key cannot be decoded.
        let key = try Ed25519PublicKey(rawRepresentation: [2] + [UInt8](repeating: 0, count: 31))
        let vector = Vector.xtalk
        #expect(try !key.isValidSignature(hex(vector.signature), for: hex(vector.message)))
    }

    @Test(arguments: [0, 63, 65])
    func rejectsRatherThanThrowsForWrongSignatureLength(_ length: Int) throws {
        let vector = Vector.xtalk
        let key = try Ed25519PublicKey(rawRepresentation: hex(vector.publicKey))
        let signature = try Array((hex(vector.signature) + [0]).prefix(length))
        #expect(signature.count == length)
        #expect(try !key.isValidSignature(signature, for: hex(vector.message)))
    }

    @Test(arguments: [0, 31, 33, 64])
    func rejectsWrongKeyAndSeedLengths(_ length: Int) {
        let bytes = [UInt8](repeating: 7, count: length)
        #expect(throws: XTalkCryptoError.invalidKeyLength(length)) { try Ed25519PublicKey(rawRepresentation: bytes) }
        #expect(throws: XTalkCryptoError.invalidKeyLength(length)) { try Ed25519PrivateKey(seed: bytes) }
    }

    /// Keys and messages drawn from a seed: `XTALK_PROPERTY_SEED` replays a
    /// failing run (the seed is in every failure message).
    @Test func roundTripsRandomMessages() throws {
        let replay = PropertySeed()
        let random = SimulatorRandom(seed: replay.value)
        for _ in 0..<32 {
            let key = try Ed25519PrivateKey(seed: random.bytes(32))
            let message = random.bytes(random.int(in: 0...300))
            let signature = try key.signature(for: message)
            #expect(signature.count == 64, "\(replay)")
            #expect(try key.publicKey.isValidSignature(signature, for: message), "\(replay)")
            #expect(try !key.publicKey.isValidSignature(signature, for: message + [0]), "\(replay)")
        }
    }

    @Test func signsAndVerifiesConcurrently() async throws {
        let key = try Ed25519PrivateKey(seed: hex(Vector.xtalk.seed))
        let message = try hex(Vector.xtalk.message)
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 {
                group.addTask { try key.publicKey.isValidSignature(key.signature(for: message), for: message) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 16))
    }

    @Test(arguments: [
        (XTalkCryptoError.libraryUnavailable("libx.so"), "libx.so"),
        (.invalidKeyLength(31), "31"),
        (.operationFailed("EVP_DigestSign"), "EVP_DigestSign"),
        (.randomUnavailable("No such device"), "No such device"),
    ])
    func describesErrorsWithTheirDetail(_ error: XTalkCryptoError, _ detail: String) {
        #expect(error.description.contains(detail))
    }
}
