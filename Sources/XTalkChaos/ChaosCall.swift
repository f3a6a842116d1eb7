import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk

/// One AT command line the scenario asked the client to run, directly or
/// inside a session or an authentication: what the checker matches against
/// the device's record.
@MainActor
final class WireCommand {
    enum Outcome {
        case lines([String])
        /// An RF send that succeeded.
        case sent
        /// A no-wait call that was accepted (its answer is an event).
        case accepted
        case failed(any Error)
    }

    let text: String
    /// Its window (`timeoutMs`), or a no-wait call's isolation window.
    let timeout: Duration
    let collects: Bool
    let noWait: Bool
    let madeAt: Duration
    /// The connection the call was made on.
    let epoch: Int
    private(set) var endedAt: Duration?
    private(set) var outcome: Outcome?
    /// The client was connected / ready when the call was made.
    var clientConnected = true
    var clientReady = true

    init(text: String, timeout: Duration, collects: Bool = false, noWait: Bool = false, madeAt: Duration, epoch: Int) {
        self.text = text
        self.timeout = timeout
        self.collects = collects
        self.noWait = noWait
        self.madeAt = madeAt
        self.epoch = epoch
    }

    func end(_ outcome: Outcome, at time: Duration) {
        guard self.outcome == nil else { return }
        self.outcome = outcome
        endedAt = time
    }

    /// The outcome, unless it is a failure.
    var successOutcome: Outcome? {
        if case .failed = outcome { return nil }
        return outcome
    }

    var failure: (any Error)? {
        if case .failed(let error) = outcome { return error }
        return nil
    }

    /// The caller stopped waiting for the answer: when the device may still
    /// owe it. nil while the call waits, and for an answer the caller got.
    var gaveUpAt: Duration? {
        switch outcome {
        case .failed: return endedAt
        case .accepted: return madeAt + timeout  // the isolation window ends at the latest then
        case .lines where collects: return endedAt
        case .lines, .sent, nil: return nil
        }
    }
}

/// One call a scenario made, what it should produce, and what it did.
@MainActor
final class ChaosCall {
    enum Expectation {
        /// `AT+PING=<token>` in `.automatic` mode: exactly `+PING:<token>`, `OK`.
        case ping(String)
        /// The same in `.collectUntilTimeout`: a prefix of those lines (the
        /// window may close before the device answered).
        case collectedPing(String)
        /// An exclusive session's pings, in order.
        case session([String])
        /// An RF send of this payload.
        case sent(Data)
        /// An authentication of the scenario's device.
        case authenticated
        /// A no-wait call: returns or throws at once.
        case noWait
        /// A no-wait `AT+PING=<token>`.
        case noWaitPing(String)
    }

    enum Success {
        case lines([String])
        case session([[String]])
        case sent
        case authenticated(XTalkDeviceAuthResult)
        case none
    }

    let id: Int
    let what: String
    let expectation: Expectation
    /// The longest this call may take once it reached the front of the queue:
    /// its timeouts plus a bounded drain (1 s) after each.
    let bound: Duration
    /// Which connection the call was made on (the scenario counts link losses).
    var epoch = 0
    var madeAt = Duration.zero
    private(set) var endedAt: Duration?
    var task: Task<Void, Never>?
    var cancelled = false
    /// The command lines it ran, in order (a session's and an authentication's several).
    var commands: [WireCommand] = []
    /// The call returned or threw. (It cannot do so twice: the SDK's waiters are
    /// checked continuations, and one resumed twice traps, ending the run loudly.)
    private(set) var finished = false
    private(set) var outcome: Result<Success, any Error>?
    /// Reads the clock when the call ends.
    var now: (@MainActor () -> Duration)?

    init(id: Int, what: String, expectation: Expectation, bound: Duration = .zero) {
        self.id = id
        self.what = what
        self.expectation = expectation
        self.bound = bound
    }

    func start(_ operation: @escaping @MainActor () async throws -> Success) {
        task = Task { @MainActor in
            do {
                record(.success(try await operation()))
            } catch {
                record(.failure(error))
            }
        }
    }

    func complete(catching operation: () throws -> Void) {
        do {
            try operation()
            record(.success(.none))
        } catch {
            record(.failure(error))
        }
    }

    private func record(_ result: Result<Success, any Error>) {
        finished = true
        outcome = result
        if endedAt == nil { endedAt = now?() }
    }

    var succeeded: Bool {
        if case .success = outcome { return true }
        return false
    }

}

/// The integration guide's adapter between the client and the authenticator,
/// recording each command the authenticator runs for the checker.
@MainActor
final class ChaosAuthTransport: DeviceAuthTransport {
    let label = "chaos"
    private let ble: XTalkBleClient
    private let newCommand: @MainActor (String, Int, Bool) -> WireCommand
    private let now: @MainActor () -> Duration

    init(
        ble: XTalkBleClient, now: @escaping @MainActor () -> Duration,
        newCommand: @escaping @MainActor (_ text: String, _ timeoutMs: Int, _ collects: Bool) -> WireCommand
    ) {
        self.ble = ble
        self.now = now
        self.newCommand = newCommand
    }

    var atEncoding: DeviceAuthAtEncoding { ble.atEncoding == .plain ? .plain : .xor }

    /// Switches the client's encoding; the scenario notes when.
    var encodingChanged: (@MainActor (XTalkAtEncoding) -> Void)?

    func setAtEncoding(_ encoding: DeviceAuthAtEncoding) {
        let value: XTalkAtEncoding = encoding == .plain ? .plain : .xor
        if let encodingChanged { encodingChanged(value) } else { ble.setAtEncoding(value) }
    }

    func runAtCommand(_ command: String, timeoutMs: Int, log: Bool, responseMode: DeviceAuthResponseMode) async throws
        -> [String]
    {
        let mode: XTalkAtResponseMode = responseMode == .automatic ? .automatic : .collectUntilTimeout
        let wire = newCommand(command, timeoutMs, mode == .collectUntilTimeout)
        do {
            let lines = try await ble.runAtCommand(command, timeoutMs: timeoutMs, log: log, responseMode: mode)
            wire.end(.lines(lines), at: now())
            return lines
        } catch {
            wire.end(.failed(error), at: now())
            throw error
        }
    }
}
