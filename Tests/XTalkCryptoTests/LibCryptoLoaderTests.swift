#if !canImport(CryptoKit)
import Testing
@testable import XTalkCrypto

@Suite struct LibCryptoLoaderTests {
    @Test func missingLibraryIsNamedInError() throws {
        let error = try #require(throws: XTalkCryptoError.self) { try LibCrypto.load(from: ["libdoesnotexist.so.9"]) }
        guard case .libraryUnavailable = error else {
            Issue.record("expected .libraryUnavailable, got \(error)")
            return
        }
        #expect(error.description.contains("libdoesnotexist.so.9"))
    }

    @Test func missingSymbolIsNamedInError() throws {
        // glibc itself is always loadable and has none of the EVP symbols.
        let error = try #require(throws: XTalkCryptoError.self) { try LibCrypto.load(from: ["libc.so.6"]) }
        #expect(error == .libraryUnavailable("libc.so.6 has no symbol EVP_PKEY_new_raw_private_key"))
        #expect(error.description.contains("libc.so.6"))
        #expect(error.description.contains("EVP_PKEY_new_raw_private_key"))
    }

    @Test func fallsBackToLaterCandidate() throws {
        _ = try LibCrypto.load(from: ["libdoesnotexist.so.9"] + LibCrypto.libraryNames)
    }

    @Test func sharedLibraryLoads() throws {
        _ = try LibCrypto.shared.get()
    }
}
#endif
