import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkSimulator

/// How the tool ends, as documented in `xtalk --help`.
enum ExitCode: Int32, Sendable, CaseIterable {
    case ok = 0
    /// A step or an operation failed for another reason.
    case failure = 1
    /// The command line is wrong (unknown option, missing value, bad argument).
    case usage = 2
    /// No matching device was found.
    case notFound = 3
    /// Bluetooth, the link or the passthrough is not available.
    case notReady = 4
    /// The device did not answer in time.
    case timeout = 5
    /// The device could not be authenticated.
    case authenticationFailed = 6
    /// Interrupted (Ctrl-C) in a command that does not treat it as its normal end.
    case interrupted = 130
}

/// A failure the tool reports: one sentence for stderr and its exit code.
struct CLIError: Error, Equatable, CustomStringConvertible {
    let code: ExitCode
    let message: String

    init(_ code: ExitCode, _ message: String) {
        self.code = code
        self.message = message
    }

    var description: String { message }

    static func usage(_ error: UsageError) -> CLIError { CLIError(.usage, error.message) }

    /// The exit code and sentence for an SDK error, naming the underlying error.
    static func from(_ error: any Error, doing what: String) -> CLIError {
        if let error = error as? CLIError { return error }
        if error is CancellationError { return CLIError(.interrupted, "\(what) was interrupted") }
        if let error = error as? XTalkBleError {
            let code: ExitCode =
                switch error {
                case .deviceNotFound: .notFound
                case .timeout: .timeout
                case .cancelled: .interrupted
                case .bluetoothUnavailable, .permissionDenied, .scanFailed, .connectionFailed, .serviceMissing,
                    .characteristicMissing, .notConnected, .notReady:
                    .notReady
                case .deviceMismatch, .busy, .writeFailed, .malformedResponse, .deviceControlFailed:
                    .failure
                }
            return CLIError(code, "\(what) failed: \(error) (XTalkBleError.\(caseName(error)))")
        }
        if let error = error as? XTalkDeviceAuthError {
            let code: ExitCode =
                switch error {
                case .cancelled: .interrupted
                case .transportUnavailable: .notReady
                case .commandTimedOut: .timeout
                case .busy, .invalidConfiguration, .secureRandomUnavailable, .invalidChallenge, .challengeMissing,
                    .malformedChallengeReply, .invalidSignatureLength, .signatureVerificationFailed,
                    .challengeRetryExhausted, .invalidDeviceIdentity:
                    .authenticationFailed
                }
            return CLIError(code, "\(what) failed: \(error) (XTalkDeviceAuthError.\(caseName(error)))")
        }
        return CLIError(.failure, "\(what) failed: \(error)")
    }

    /// The case name, so that the message names the underlying error exactly.
    static func caseName(_ error: XTalkBleError) -> String {
        switch error {
        case .bluetoothUnavailable: "bluetoothUnavailable"
        case .permissionDenied: "permissionDenied"
        case .scanFailed: "scanFailed"
        case .deviceNotFound: "deviceNotFound"
        case .deviceMismatch: "deviceMismatch"
        case .connectionFailed: "connectionFailed"
        case .serviceMissing: "serviceMissing"
        case .characteristicMissing: "characteristicMissing"
        case .notConnected: "notConnected"
        case .notReady: "notReady"
        case .busy: "busy"
        case .timeout: "timeout"
        case .writeFailed: "writeFailed"
        case .cancelled: "cancelled"
        case .malformedResponse: "malformedResponse"
        case .deviceControlFailed: "deviceControlFailed"
        }
    }

    /// The case name, so that the message names the underlying error exactly.
    static func caseName(_ error: XTalkDeviceAuthError) -> String {
        switch error {
        case .busy: "busy"
        case .invalidConfiguration: "invalidConfiguration"
        case .transportUnavailable: "transportUnavailable"
        case .commandTimedOut: "commandTimedOut"
        case .secureRandomUnavailable: "secureRandomUnavailable"
        case .invalidChallenge: "invalidChallenge"
        case .challengeMissing: "challengeMissing"
        case .malformedChallengeReply: "malformedChallengeReply"
        case .invalidSignatureLength: "invalidSignatureLength"
        case .signatureVerificationFailed: "signatureVerificationFailed"
        case .challengeRetryExhausted: "challengeRetryExhausted"
        case .invalidDeviceIdentity: "invalidDeviceIdentity"
        case .cancelled: "cancelled"
        }
    }
}

/// Everything a command needs from the outside world, so that the commands
/// run in-process in tests (virtual clock, captured output, scripted input)
/// exactly as in the executable (real clock, stdout, stdin, Ctrl-C).
@MainActor
package final class CommandContext {
    /// The virtual clock in tests; nil on the real clock.
    let virtualClock: XTalkVirtualClock?
    /// Writes one line to standard output.
    let writeOut: (String) -> Void
    /// Writes one line to standard error.
    let writeError: (String) -> Void
    /// Lines typed by the user (the interactive shell); finishes at end of input.
    let input: AsyncStream<String>
    private let realStart = ContinuousClock.now

    package init(
        virtualClock: XTalkVirtualClock?,
        input: AsyncStream<String>,
        writeOut: @escaping (String) -> Void,
        writeError: @escaping (String) -> Void
    ) {
        self.virtualClock = virtualClock
        self.input = input
        self.writeOut = writeOut
        self.writeError = writeError
    }

    /// Time since the context was made, on its clock.
    var elapsed: Duration {
        virtualClock?.elapsed ?? (ContinuousClock.now - realStart)
    }

    /// Sleeps on the context's clock; throws `CancellationError` when interrupted.
    func sleep(for duration: Duration) async throws {
        if let virtualClock {
            try await virtualClock.sleep(for: duration)
        } else {
            try await Task.sleep(for: duration)
        }
    }

    /// Makes a simulated environment on the context's clock.
    func makeEnvironment(devices: [XTalkSimulatedDevice], seed: UInt64) -> XTalkSimulatedEnvironment {
        if let virtualClock {
            return XTalkSimulatedEnvironment(devices: devices, clock: virtualClock, seed: seed)
        }
        return XTalkSimulatedEnvironment(devices: devices, seed: seed)
    }
}

/// Formats a duration in seconds with two decimals, e.g. "0.42 s".
func seconds(_ duration: Duration) -> String {
    let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    return String(format: "%.2f s", value)
}

/// Milliseconds as a double, for JSON and statistics.
func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15
}
