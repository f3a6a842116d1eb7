/// An error a transport can classify, so that code above it (the device
/// authenticator) can tell a timeout and a cancellation from other failures
/// without knowing the transport's error type. `XTalkBleError` adopts it; a
/// custom `DeviceAuthTransport` should make its errors adopt it too.
public protocol XTalkTransportError: Error {
    /// The device did not answer in time.
    var isTimeout: Bool { get }
    /// The operation was cancelled (task cancellation, disconnect, teardown).
    var isCancellation: Bool { get }
}
