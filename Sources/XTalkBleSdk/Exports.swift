// Observable state and the transport error classes come from XTalkSupport,
// which both SDKs share; importing XTalkBleSdk is enough to use them.
@_exported import XTalkSupport

#if canImport(Combine)
    import Combine
#endif

/// The client is an `ObservableObject` on every platform, as the API reference says: Combine's
/// where it exists (its `@Published` state feeds `objectWillChange`), XTalkSupport's marker elsewhere.
extension XTalkBleClient: ObservableObject {}

extension XTalkBleError: XTalkTransportError {
    /// The device did not answer in time.
    public var isTimeout: Bool { self == .timeout }
    /// The operation was cancelled (task cancellation, `disconnect()`, `teardown()`).
    public var isCancellation: Bool { self == .cancelled }
}
