import Foundation

/// Every error the BLE client reports, exactly the cases of the API reference.
///
/// Errors are thrown by the async AT/RF methods and published through
/// `connectionState == .failed(error)` for scan and connection problems.
/// Cases that carry a `String` name the problem in one sentence. Each case
/// says below when this SDK produces it; three cases of the API reference are
/// never produced by this version (`.deviceMismatch`, `.malformedResponse`,
/// `.deviceControlFailed`), and `.scanFailed` never on Apple platforms (BlueZ, on Linux, can report it).
public enum XTalkBleError: Error, Equatable, Hashable, Sendable {
    /// Bluetooth is powered off, resetting or not supported on this device.
    /// On Linux also: no D-Bus system bus, bluetoothd not running, or no
    /// adapter; `XTalkBleClient.bluetoothUnavailableReason` says which.
    case bluetoothUnavailable
    /// The user (or a policy) denied Bluetooth access to the app.
    case permissionDenied
    /// Scanning could not start or stopped with an error. Never on iOS or
    /// macOS (CoreBluetooth reports no scan failure; an unusable radio is
    /// `.bluetoothUnavailable` or `.permissionDenied`). On Linux, when BlueZ
    /// refuses to start discovery (the reason is BlueZ's, in words); the
    /// simulator produces it on request (`XTalkSimulatedEnvironment.scanFailure`).
    case scanFailed(String)
    /// `connect(id:)` named an identifier that is not in the current scan results.
    case deviceNotFound(UUID)
    /// The device that answered is not the device that was expected. Never
    /// produced by this version (authentication reports identity problems as
    /// `XTalkDeviceAuthError`).
    case deviceMismatch(String)
    /// The link could not be established, was refused, or the notification
    /// subscription failed. Pairing failures have reasons with a stable
    /// prefix an app may match: `pairing failed: ` (the device requires
    /// pairing and it did not complete: the user cancelled or ignored iOS's
    /// dialog) and `pairing removed by the device: ` (the device forgot this
    /// phone's pairing; the user must forget the device in Settings and pair
    /// again).
    case connectionFailed(String)
    /// The device does not expose the xTalk passthrough service.
    case serviceMissing
    /// The passthrough service lacks its TX or RX characteristic.
    case characteristicMissing
    /// No link: connect first (also thrown to pending work when the link drops).
    case notConnected
    /// The link is up but the passthrough is not ready yet (`atReady == false`).
    case notReady
    /// The channel is not free: a transaction, a no-wait isolation window,
    /// another caller's exclusive session, the drain after a timeout or
    /// cancellation, or the quarantine of a reconnect to a device that still
    /// owed answers. Thrown by the no-wait methods only: `runAtCommand`,
    /// `sendRfPayload` and `withExclusiveAtSession` never throw it (they wait
    /// their turn, also behind a no-wait isolation window).
    case busy
    /// The device did not answer within the timeout.
    case timeout
    /// Bytes could not be written, the device rejected the operation, or the
    /// input was invalid and nothing was written; the text says which. Its
    /// reason starts with a stable prefix an app may match: `invalid AT
    /// command: `, `invalid RF payload: `, `invalid timeout: ` (bad input,
    /// nothing written), `the device rejected the frame: ` (`ERROR` to
    /// `AT+SEND=`), `the radio could not send the frame: ` (`+SENDFIN:FAIL`);
    /// any other reason is the Bluetooth stack's own text for a failed write.
    case writeFailed(String)
    /// The operation was cancelled: its task was cancelled, or what ended its
    /// link did (`disconnect()`, `teardown()`, `startScan()` or `connect(id:)`
    /// to another device while connected).
    case cancelled
    /// The device answered with something that cannot be parsed. Never
    /// produced by this version: lines that do not parse are delivered as
    /// events (`.atLine`, `.passthroughRaw`) and returned as response lines.
    case malformedResponse(String)
    /// A device-information query failed. Never produced by this version: the
    /// `fetch…` queries return nil on failure, as the API reference says.
    case deviceControlFailed(String)
}

extension XTalkBleError: CustomStringConvertible, LocalizedError {
    public var description: String {
        switch self {
        case .bluetoothUnavailable: "Bluetooth is unavailable (powered off, resetting or unsupported)"
        case .permissionDenied: "Bluetooth permission was denied"
        case .scanFailed(let reason): "scan failed: \(reason)"
        case .deviceNotFound(let id): "no device with id \(id) in the current scan results"
        case .deviceMismatch(let reason): "device mismatch: \(reason)"
        case .connectionFailed(let reason): "connection failed: \(reason)"
        case .serviceMissing: "the device has no xTalk passthrough service"
        case .characteristicMissing: "the passthrough service lacks its TX or RX characteristic"
        case .notConnected: "not connected"
        case .notReady: "the passthrough is not ready (atReady is false)"
        case .busy: "the AT channel is busy"
        case .timeout: "the operation timed out"
        case .writeFailed(let reason): "write failed: \(reason)"
        case .cancelled: "the operation was cancelled"
        case .malformedResponse(let reason): "malformed response: \(reason)"
        case .deviceControlFailed(let reason): "device control failed: \(reason)"
        }
    }

    public var errorDescription: String? { description }
}
