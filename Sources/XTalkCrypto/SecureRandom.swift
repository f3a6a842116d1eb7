#if canImport(Security)
    import Security
#else
    import Glibc
#endif

/// Cryptographically secure random bytes from the operating system.
package enum SecureRandom {
    /// Returns `count` bytes from the system CSPRNG (`SecRandomCopyBytes` on Apple, `getentropy` on Linux).
    /// Throws `.randomUnavailable` with the system's reason rather than return weak bytes.
    /// `count` must not be negative (a programming error, which traps like `Array(repeating:count:)`).
    package static func bytes(count: Int) throws(XTalkCryptoError) -> [UInt8] {
        precondition(count >= 0, "SecureRandom.bytes(count:) needs a non-negative count, got \(count)")
        var bytes = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return bytes }
        #if canImport(Security)
            let status = SecRandomCopyBytes(kSecRandomDefault, count, &bytes)
            guard status == errSecSuccess else {
                throw .randomUnavailable("SecRandomCopyBytes returned OSStatus \(status)")
            }
        #else
            // Swift's Glibc module does not export getrandom(2); getentropy(3) is glibc's wrapper around it
            // that itself retries EINTR and short reads, but it serves at most 256 bytes a call.
            let maxChunk = 256
            for start in stride(from: 0, to: count, by: maxChunk) {
                // errno is read inside the closure, before anything else can overwrite it.
                let code: Int32 = bytes[start..<min(start + maxChunk, count)].withUnsafeMutableBytes {
                    getentropy($0.baseAddress, $0.count) == 0 ? 0 : errno
                }
                guard code == 0 else {
                    throw .randomUnavailable("getentropy failed: \(String(cString: strerror(code))) (errno \(code))")
                }
            }
        #endif
        return bytes
    }
}
