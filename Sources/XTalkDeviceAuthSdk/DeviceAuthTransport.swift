/// The AT encodings the authenticator can probe.
public enum DeviceAuthAtEncoding: String, Sendable, Hashable, CaseIterable {
    /// ASCII as it is (older firmware).
    case plain
    /// Every byte XOR-ed with 0x5A (current firmware).
    case xor
}

/// How the transport should collect a command's response.
public enum DeviceAuthResponseMode: Sendable, Hashable {
    /// Complete at the final result code.
    case automatic
    /// Collect every line of the full timeout window.
    case collectFullWindow
    /// Collect the full window, and leave the channel clean (no late bytes of
    /// this probe) before the next command: the probe may have been sent in
    /// the wrong encoding.
    case recoverableEncodingProbe
}

/// What the authenticator needs from a connection: run AT commands in a
/// chosen encoding. An adapter over `XTalkBleClient` is a few lines (see the
/// end-to-end integration guide). Errors the transport throws should adopt
/// `XTalkTransportError`, so that timeouts and cancellations are recognised;
/// any other error means the transport is unavailable.
@MainActor
public protocol DeviceAuthTransport: AnyObject {
    /// A name for logs and diagnostics.
    var label: String { get }
    /// The encoding the transport currently uses.
    var atEncoding: DeviceAuthAtEncoding { get }
    /// Switches the encoding for the following commands.
    func setAtEncoding(_ encoding: DeviceAuthAtEncoding)
    /// Runs one command and returns its response lines.
    func runAtCommand(
        _ command: String,
        timeoutMs: Int,
        log: Bool,
        responseMode: DeviceAuthResponseMode
    ) async throws -> [String]
}
