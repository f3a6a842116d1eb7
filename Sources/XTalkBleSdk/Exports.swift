// Observable state and the transport error classes come from XTalkSupport,
// which both SDKs share; importing XTalkBleSdk is enough to use them.
@_exported import XTalkSupport

#if !canImport(Combine)
extension XTalkBleClient: ObservableObject {}
#endif

extension XTalkBleError: XTalkTransportError {
    public var isTimeout: Bool { self == .timeout }
    public var isCancellation: Bool { self == .cancelled }
}
