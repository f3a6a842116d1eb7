// libFuzzer entry of the `receive` target: the whole receive path (framer,
// classifier, `+DI:`/`+CRCERR:` field parser, AT channel state machine with one
// to three operations queued, timeouts, cancellations and drains) against a
// reference, in three chunkings. The oracle lives
// in Tests/XTalkBleSdkTests/FuzzOracles.swift; Fuzz/run compiles both with the
// SDK's protocol sources into one module.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    do {
        try StreamFuzzOracle.checkReceive(Array(UnsafeBufferPointer(start: data, count: size)))
    } catch {
        fatalError("oracle failed: \(error)")
    }
    return 0
}
