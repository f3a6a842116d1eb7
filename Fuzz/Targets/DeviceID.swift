// libFuzzer entry of the `device-id` target: `XTalkDeviceIDCodec.parse` against
// a reference, and the round trips of canonicalize/format/parse/fromSn
// (PROTOCOL.md section 9). The oracle lives in
// Tests/XTalkDeviceAuthSdkTests/FuzzOracles.swift; Fuzz/run compiles it with the
// codec's sources into one module.

import Foundation

/// `FUZZ_ASCII_ONLY=1`: every input byte is masked to 7 bits, to keep fuzzing
/// the formats past an open bug of non-ASCII text (see Fuzz/README.md).
let asciiOnly = ProcessInfo.processInfo.environment["FUZZ_ASCII_ONLY"] == "1"

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = Array(UnsafeBufferPointer(start: data, count: size))
    if asciiOnly { input = input.map { $0 & 0x7F } }
    do {
        try DeviceIDFuzzOracle.check(input)
    } catch {
        fatalError("oracle failed: \(error)")
    }
    return 0
}
