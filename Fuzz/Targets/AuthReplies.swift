// libFuzzer entry of the `auth-replies` target: the authentication reply
// parsers (`AuthenticationReplies.probe/challenge/identity`, PROTOCOL.md
// sections 8 and 9) against byte-level references, and their re-serialisation.
// The oracle lives in Tests/XTalkDeviceAuthSdkTests/FuzzOracles.swift; Fuzz/run
// compiles it with the parsers' sources into one module.

import Foundation

/// `FUZZ_ASCII_ONLY=1`: every input byte is masked to 7 bits, to keep fuzzing
/// the formats past an open bug of non-ASCII text (see Fuzz/README.md).
let asciiOnly = ProcessInfo.processInfo.environment["FUZZ_ASCII_ONLY"] == "1"

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = Array(UnsafeBufferPointer(start: data, count: size))
    if asciiOnly { input = input.map { $0 & 0x7F } }
    do {
        try AuthRepliesFuzzOracle.check(input)
    } catch {
        fatalError("oracle failed: \(error)")
    }
    return 0
}
