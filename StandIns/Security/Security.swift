// Stand-in for Apple's Security framework, the one corner of it the SDK uses:
// random bytes. It exists only so that the Apple code path of
// Sources/XTalkCrypto/SecureRandom.swift compiles and runs on Linux in the
// Apple stand-in build (XTALK_APPLE_STANDINS=1); it is never shipped.
//
// Each declaration has the Swift-visible shape of Apple's, from
// https://developer.apple.com/documentation/security/<symbol>:
//   OSStatus            https://developer.apple.com/documentation/security/osstatus
//   errSecSuccess       https://developer.apple.com/documentation/security/errsecsuccess
//   SecRandomRef        https://developer.apple.com/documentation/security/secrandomref
//   kSecRandomDefault   https://developer.apple.com/documentation/security/ksecrandomdefault
//   SecRandomCopyBytes  https://developer.apple.com/documentation/security/secrandomcopybytes(_:_:_:)

import Glibc

/// A status code: `errSecSuccess` (0) or an error (Apple's `OSStatus`, a 32-bit signed integer).
public typealias OSStatus = Int32

/// No error.
public let errSecSuccess: OSStatus = 0

/// One or more parameters were not valid (Apple's value, -50).
public let errSecParam: OSStatus = -50

/// An opaque reference to a random-number generator; only `kSecRandomDefault` exists.
public typealias SecRandomRef = OpaquePointer

/// The default random-number generator: nil, as on Apple platforms.
/// `nonisolated(unsafe)` because `OpaquePointer` is not `Sendable`; the constant is nil and never changes.
nonisolated(unsafe) public let kSecRandomDefault: SecRandomRef? = nil

/// Fills `count` bytes at `bytes` from the system CSPRNG (here `getentropy(3)`, at most 256 bytes a call).
/// Returns `errSecSuccess`, `errSecParam` for a negative count, or the `errno` value of a failed call
/// (Apple documents only "an error code" for failures, so callers compare with `errSecSuccess`).
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard count >= 0 else { return errSecParam }
    let maxChunk = 256
    for start in stride(from: 0, to: count, by: maxChunk) {
        // errno is read right after the failed call, before anything else can overwrite it.
        guard getentropy(bytes + start, min(maxChunk, count - start)) == 0 else { return errno }
    }
    return errSecSuccess
}
