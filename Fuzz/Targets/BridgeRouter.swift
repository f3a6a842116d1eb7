// libFuzzer entry of the `bridge-router` target: the low-level bridge's
// request parser (JSON), strict hex and reply quoting. The oracle lives in
// Tests/XTalkBleBridgeTests/FuzzOracles.swift; Fuzz/run compiles it with
// the bridge's sources into one module.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    do {
        try BridgeFuzzOracle.check(input)
    } catch {
        fatalError("oracle failed: \(error)")
    }
    return 0
}
