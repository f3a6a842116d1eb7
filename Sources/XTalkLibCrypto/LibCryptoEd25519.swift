// Ed25519 through OpenSSL 3's EVP API in the system libcrypto, loaded at run
// time with dlopen so that no -dev package and no linker flag is needed. Its
// own module so that both XTalkCrypto (on Linux) and the CryptoKit stand-in
// (in the Apple stand-in build) sign and verify with the same real Ed25519.
// Linux only: Apple platforms use CryptoKit.

#if canImport(Glibc)
    import Glibc

    /// Ed25519 (RFC 8032) on raw bytes: 32-byte seeds and public keys, 64-byte signatures.
    /// Callers check every length first; every EVP object is freed on every path.
    package enum LibCryptoEd25519 {
        /// Bytes in a private-key seed and in a public key.
        package static let keyLength = 32
        /// Bytes in a signature (R ‖ S).
        package static let signatureLength = 64

        /// Derives the 32-byte public key of a 32-byte seed.
        package static func publicKey(fromSeed seed: [UInt8]) throws(LibCryptoError) -> [UInt8] {
            let lib = try LibCrypto.shared.get()
            let pkey = try lib.newKey(seed, with: lib.newRawPrivateKey, named: "EVP_PKEY_new_raw_private_key")
            defer { lib.pkeyFree(pkey) }
            var publicKey = [UInt8](repeating: 0, count: keyLength)
            var length = publicKey.count
            guard lib.getRawPublicKey(pkey, &publicKey, &length) == 1, length == keyLength else {
                throw .operationFailed("EVP_PKEY_get_raw_public_key")
            }
            return publicKey
        }

        /// Signs `message` with the key of a 32-byte seed; deterministic, as RFC 8032 specifies.
        package static func signature(for message: [UInt8], seed: [UInt8]) throws(LibCryptoError) -> [UInt8] {
            let lib = try LibCrypto.shared.get()
            let pkey = try lib.newKey(seed, with: lib.newRawPrivateKey, named: "EVP_PKEY_new_raw_private_key")
            defer { lib.pkeyFree(pkey) }
            let context = try lib.context()
            defer { lib.mdCtxFree(context) }
            // Ed25519 hashes internally, so OpenSSL requires a NULL digest.
            guard lib.digestSignInit(context, nil, nil, nil, pkey) == 1 else {
                throw .operationFailed("EVP_DigestSignInit")
            }
            var signature = [UInt8](repeating: 0, count: signatureLength)
            var length = signature.count
            guard lib.digestSign(context, &signature, &length, message, message.count) == 1,
                length == signatureLength
            else { throw .operationFailed("EVP_DigestSign") }
            return signature
        }

        /// Verifies a 64-byte signature of `message` under a 32-byte public key.
        /// Returns false for a bad signature; throws only when libcrypto is unavailable or reports an error.
        package static func isValidSignature(
            _ signature: [UInt8], for message: [UInt8], publicKey: [UInt8]
        ) throws(LibCryptoError) -> Bool {
            let lib = try LibCrypto.shared.get()
            let pkey = try lib.newKey(publicKey, with: lib.newRawPublicKey, named: "EVP_PKEY_new_raw_public_key")
            defer { lib.pkeyFree(pkey) }
            let context = try lib.context()
            defer { lib.mdCtxFree(context) }
            guard lib.digestVerifyInit(context, nil, nil, nil, pkey) == 1 else {
                throw .operationFailed("EVP_DigestVerifyInit")
            }
            // 1 is valid and 0 is a bad signature; anything else is an error, not a verdict.
            switch lib.digestVerify(context, signature, signature.count, message, message.count) {
            case 1: return true
            case 0: return false
            case let status: throw .operationFailed("EVP_DigestVerify returned \(status)")
            }
        }
    }

    /// The libcrypto entry points this module uses, resolved once with `dlopen`/`dlsym`.
    /// Immutable and made only of C function pointers, so it is safely shared across threads.
    package struct LibCrypto: Sendable {
        /// Library names tried in order; only OpenSSL 3 has the EVP raw-key API with this ABI.
        package static let libraryNames = ["libcrypto.so.3"]

        /// The process-wide libcrypto or why it is unavailable, loaded on first use.
        /// A `static let` is initialized exactly once, thread-safely, so no lock is needed.
        package static let shared: Result<LibCrypto, LibCryptoError> = Result { () throws(LibCryptoError) in
            try load(from: libraryNames)
        }

        /// `EVP_PKEY *EVP_PKEY_new_raw_{private,public}_key(int type, ENGINE *, const unsigned char *key, size_t len)`.
        typealias NewRawKey = @convention(c) (Int32, OpaquePointer?, UnsafePointer<UInt8>?, Int) -> OpaquePointer?
        /// `int EVP_Digest{Sign,Verify}Init(EVP_MD_CTX *, EVP_PKEY_CTX **, const EVP_MD *, ENGINE *, EVP_PKEY *)`.
        typealias DigestInit =
            @convention(c) (
                OpaquePointer?, UnsafeMutablePointer<OpaquePointer?>?, OpaquePointer?, OpaquePointer?, OpaquePointer?
            ) -> Int32
        /// `void EVP_MD_CTX_free(EVP_MD_CTX *)` and `void EVP_PKEY_free(EVP_PKEY *)`.
        typealias Free = @convention(c) (OpaquePointer?) -> Void

        /// OpenSSL's `EVP_PKEY_ED25519` (`NID_ED25519`).
        static let ed25519: Int32 = 1087

        /// `EVP_PKEY_new_raw_private_key`: an Ed25519 key from its 32-byte seed.
        let newRawPrivateKey: NewRawKey
        /// `EVP_PKEY_new_raw_public_key`: an Ed25519 key from its 32-byte encoded point.
        let newRawPublicKey: NewRawKey
        /// `int EVP_PKEY_get_raw_public_key(const EVP_PKEY *, unsigned char *pub, size_t *len)`.
        let getRawPublicKey:
            @convention(c) (
                OpaquePointer?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Int>?
            ) -> Int32
        /// `EVP_MD_CTX *EVP_MD_CTX_new(void)`.
        let mdCtxNew: @convention(c) () -> OpaquePointer?
        /// `EVP_DigestSignInit`.
        let digestSignInit: DigestInit
        /// `int EVP_DigestSign(EVP_MD_CTX *, unsigned char *sig, size_t *siglen, const unsigned char *tbs, size_t)`.
        let digestSign:
            @convention(c) (
                OpaquePointer?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Int>?, UnsafePointer<UInt8>?, Int
            ) -> Int32
        /// `EVP_DigestVerifyInit`.
        let digestVerifyInit: DigestInit
        /// `int EVP_DigestVerify(EVP_MD_CTX *, const unsigned char *sig, size_t, const unsigned char *tbs, size_t)`.
        let digestVerify:
            @convention(c) (OpaquePointer?, UnsafePointer<UInt8>?, Int, UnsafePointer<UInt8>?, Int) -> Int32
        /// `EVP_MD_CTX_free`.
        let mdCtxFree: Free
        /// `EVP_PKEY_free`.
        let pkeyFree: Free
        /// The library name (of the candidates given to `load(from:)`) that was opened.
        package let name: String

        /// Opens the first loadable library in `names` and resolves every symbol.
        /// Throws `.libraryUnavailable` naming the libraries tried, or the library and the first missing symbol.
        package static func load(from names: [String]) throws(LibCryptoError) -> LibCrypto {
            var reasons: [String] = []
            for name in names {
                // RTLD_LOCAL keeps OpenSSL's symbols out of the global namespace, away from any other copy.
                guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else {
                    reasons.append(dlerror().map { String(cString: $0) } ?? "cannot open \(name)")
                    continue
                }
                // On success the handle stays open for the life of the process: the function pointers point into it.
                do throws(LibCryptoError) {
                    return try LibCrypto(handle: handle, name: name)
                } catch {
                    dlclose(handle)
                    throw error
                }
            }
            throw .libraryUnavailable(
                "could not load \(names.joined(separator: ", ")): \(reasons.joined(separator: "; "))")
        }

        /// Resolves every entry point in an opened library, failing on the first missing symbol.
        private init(handle: UnsafeMutableRawPointer, name: String) throws(LibCryptoError) {
            func symbol<Function>(_ symbol: String) throws(LibCryptoError) -> Function {
                guard let address = dlsym(handle, symbol) else {
                    throw .libraryUnavailable("\(name) has no symbol \(symbol)")
                }
                return unsafeBitCast(address, to: Function.self)
            }
            self.name = name
            newRawPrivateKey = try symbol("EVP_PKEY_new_raw_private_key")
            newRawPublicKey = try symbol("EVP_PKEY_new_raw_public_key")
            getRawPublicKey = try symbol("EVP_PKEY_get_raw_public_key")
            mdCtxNew = try symbol("EVP_MD_CTX_new")
            digestSignInit = try symbol("EVP_DigestSignInit")
            digestSign = try symbol("EVP_DigestSign")
            digestVerifyInit = try symbol("EVP_DigestVerifyInit")
            digestVerify = try symbol("EVP_DigestVerify")
            mdCtxFree = try symbol("EVP_MD_CTX_free")
            pkeyFree = try symbol("EVP_PKEY_free")
        }

        /// Creates an Ed25519 `EVP_PKEY` from raw bytes with `make`, named `call` in errors; the caller must `pkeyFree`
        /// it.
        func newKey(_ bytes: [UInt8], with make: NewRawKey, named call: String) throws(LibCryptoError) -> OpaquePointer
        {
            guard let pkey = make(Self.ed25519, nil, bytes, bytes.count) else { throw .operationFailed(call) }
            return pkey
        }

        /// Creates a digest context; the caller must `mdCtxFree` it.
        func context() throws(LibCryptoError) -> OpaquePointer {
            guard let context = mdCtxNew() else { throw .operationFailed("EVP_MD_CTX_new") }
            return context
        }
    }
#endif
