import Foundation

/// Every error the BLE client reports, exactly the cases of the API reference.
///
/// Errors are thrown by the async AT/RF methods and published through
/// `connectionState == .failed(error)` for scan and connection problems.
/// Cases that carry a `String` name the problem in one sentence.
public enum XTalkBleError: Error, Equatable, Hashable, Sendable {
    /// Bluetooth is powered off, resetting or not supported on this device.
    case bluetoothUnavailable
    /// The user (or a policy) denied Bluetooth access to the app.
    case permissionDenied
    /// Scanning could not start or stopped with an error.
    case scanFailed(String)
    /// `connect(id:)` named an identifier that is not in the current scan results.
    case deviceNotFound(UUID)
    /// The device that answered is not the device that was expected.
    case deviceMismatch(String)
    /// The link could not be established, was refused, or the notification
    /// subscription failed.
    case connectionFailed(String)
    /// The device does not expose the xTalk passthrough service.
    case serviceMissing
    /// The passthrough service lacks its TX or RX characteristic.
    case characteristicMissing
    /// No link: connect first (also thrown to pending work when the link drops).
    case notConnected
    /// The link is up but the passthrough is not ready yet (`atReady == false`).
    case notReady
    /// Another transaction or a no-wait isolation window is active.
    case busy
    /// The device did not answer within the timeout.
    case timeout
    /// Bytes could not be written, the device rejected the operation, or the
    /// input was invalid and nothing was written; the text says which.
    case writeFailed(String)
    /// The operation was cancelled (task cancellation, `disconnect()` or `teardown()`).
    case cancelled
    /// The device answered with something that cannot be parsed.
    case malformedResponse(String)
    /// A device-information query failed.
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
