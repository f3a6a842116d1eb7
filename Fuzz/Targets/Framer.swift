// libFuzzer entry of the `framer` target: the line framer (PROTOCOL.md section 4)
// against a reference framer, in three chunkings. The oracle lives in
// Tests/XTalkBleSdkTests/FuzzOracles.swift; Fuzz/run compiles both with the
// SDK's protocol sources into one module.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    do {
        try StreamFuzzOracle.checkFramer(Array(UnsafeBufferPointer(start: data, count: size)))
    } catch {
        fatalError("oracle failed: \(error)")
    }
    return 0
}
