// The dlopen loader lives in XTalkLibCrypto, which exists on Linux only; it is
// tested in every Linux build, the Apple stand-in build included (there the
// CryptoKit stand-in signs with it).
#if canImport(Glibc)
    import Testing
    @testable import XTalkLibCrypto

    @Suite(.timeLimit(.minutes(5))) struct LibCryptoLoaderTests {
        @Test func missingLibraryIsNamedInError() throws {
            let error = try #require(throws: LibCryptoError.self) { try LibCrypto.load(from: ["libdoesnotexist.so.9"]) }
            guard case .libraryUnavailable = error else {
                Issue.record("expected .libraryUnavailable, got \(error)")
                return
            }
            #expect(error.description.contains("libdoesnotexist.so.9"))
        }

        @Test func missingSymbolIsNamedInError() throws {
            // glibc itself is always loadable and has none of the EVP symbols.
            let error = try #require(throws: LibCryptoError.self) { try LibCrypto.load(from: ["libc.so.6"]) }
            #expect(error == .libraryUnavailable("libc.so.6 has no symbol EVP_PKEY_new_raw_private_key"))
            #expect(error.description.contains("libc.so.6"))
            #expect(error.description.contains("EVP_PKEY_new_raw_private_key"))
        }

        /// A candidate that cannot be opened is skipped: the next one is the
        /// library loaded, and it works (it makes an Ed25519 key).
        @Test func fallsBackToLaterCandidate() throws {
            let loaded = try LibCrypto.load(from: ["libdoesnotexist.so.9"] + LibCrypto.libraryNames)
            #expect(loaded.name == LibCrypto.libraryNames[0])
            let seed = try hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
            let key = try loaded.newKey(seed, with: loaded.newRawPrivateKey, named: "EVP_PKEY_new_raw_private_key")
            loaded.pkeyFree(key)
        }

        @Test func sharedLibraryLoads() throws {
            _ = try LibCrypto.shared.get()
        }

        /// The package API the CryptoKit stand-in uses reproduces RFC 8032 section 7.1, TEST 1, byte for byte.
        @Test func signsAndVerifiesRfc8032Test1() throws {
            let seed = try hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
            let publicKey = try LibCryptoEd25519.publicKey(fromSeed: seed)
            #expect(publicKey == (try hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")))
            let signature = try LibCryptoEd25519.signature(for: [], seed: seed)
            #expect(signature == (try hex(Vector.rfcTest1.signature)))
            #expect(try LibCryptoEd25519.isValidSignature(signature, for: [], publicKey: publicKey))
            #expect(try !LibCryptoEd25519.isValidSignature(signature, for: [0], publicKey: publicKey))
        }

        @Test(arguments: [
            (LibCryptoError.libraryUnavailable("libx.so"), "libx.so"),
            (.operationFailed("EVP_DigestSign"), "EVP_DigestSign"),
        ])
        func describesErrorsWithTheirDetail(_ error: LibCryptoError, _ detail: String) {
            #expect(error.description.contains(detail))
        }
    }
#endif
