import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk

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
    var task: Task<Void, Never>?
    var cancelled = false
    /// Whether the client's encoding is not the device's now (set by the scenario).
    var inWrongEncoding: (@MainActor () -> Bool)?
    /// The client's encoding was not the device's when the call was made.
    var madeInWrongEncoding = false
    /// ... and still not when it completed: it ran in the wrong encoding, so
    /// its lines were decoded from the wrong bytes (noise may read as a line).
    private(set) var ranInWrongEncoding = false
    private(set) var completions = 0
    private(set) var outcome: Result<Success, any Error>?

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
        completions += 1
        outcome = result
        if madeInWrongEncoding, inWrongEncoding?() == true { ranInWrongEncoding = true }
    }

    /// The AT response lines this call was owed, if it is a ping.
    var tokens: [String] {
        switch expectation {
        case .ping(let token), .collectedPing(let token): [token]
        case .session(let tokens): tokens
        case .noWaitPing(let token): [token]
        case .sent, .authenticated, .noWait: []
        }
    }

    var succeeded: Bool {
        if case .success = outcome { return true }
        return false
    }

    /// Whether the call received exactly `token`'s own reply.
    func gotOwnReply(_ token: String) -> Bool {
        guard case .success(let success) = outcome else { return false }
        let own = ["+PING:" + token, "OK"]
        switch success {
        case .lines(let lines): return lines == own
        case .session(let responses):
            guard let index = tokens.firstIndex(of: token), index < responses.count else { return false }
            return responses[index] == own
        case .sent, .authenticated, .none: return false
        }
    }

    /// What is wrong with the outcome, if anything. `lateReply` says whether
    /// lines are the whole late reply of an earlier command of the same
    /// connection that did not get them itself (the protocol's limit: an AT
    /// reply carries no correlation, and one later than the drain window is
    /// indistinguishable from the next command's).
    func check(expectedDeviceID: UInt32, serial: String, appEndedWork: Bool,
               lateReply: ([String], _ position: Int, _ prefixOnly: Bool) -> Bool) -> String? {
        guard let outcome else { return "no outcome" }
        switch outcome {
        case .failure(let error):
            switch expectation {
            case .authenticated:
                return error is XTalkDeviceAuthError ? nil : "untyped error \(type(of: error)): \(error)"
            default:
                guard let error = error as? XTalkBleError else { return "untyped error \(type(of: error)): \(error)" }
                // `.cancelled` only for a cancelled task, or work the app ended (disconnect(), teardown()).
                if error == .cancelled && !cancelled && !appEndedWork { return "cancelled, but nobody cancelled it" }
                return nil
            }
        case .success(let success):
            switch (expectation, success) {
            case (.ping(let token), .lines(let lines)):
                return lines == ["+PING:" + token, "OK"] || lateReply(lines, 0, false) ? nil : "got \(lines)"
            case (.collectedPing(let token), .lines(let lines)):
                // A window may also collect late replies (each whole) before its own (maybe partial).
                let expected = ["+PING:" + token, "OK"]
                let echoed = ["AT+PING=" + token] + expected  // the echo stays when late replies came first
                var rest = lines[...]
                while !rest.isEmpty {
                    if rest.count <= 2 && Array(expected.prefix(rest.count)) == Array(rest) { return nil }
                    if rest.count < lines.count && rest.count <= 3 && Array(echoed.prefix(rest.count)) == Array(rest) { return nil }
                    guard let length = (1...min(3, rest.count)).first(where: { lateReply(Array(rest.prefix($0)), 0, false) }) else {
                        return lateReply(Array(rest), 0, true) ? nil : "collected \(lines)"
                    }
                    rest = rest.dropFirst(length)
                }
                return nil
            case (.session(let tokens), .session(let responses)):
                for (position, (token, lines)) in zip(tokens, responses).enumerated()
                where lines != ["+PING:" + token, "OK"] && !lateReply(lines, position, false) {
                    return "session got \(responses)"
                }
                return responses.count == tokens.count ? nil : "session got \(responses)"
            case (.sent, .sent), (.noWait, .none), (.noWaitPing, .none):
                return nil
            case (.authenticated, .authenticated(let result)):
                if result.identity.deviceID != expectedDeviceID || result.identity.serial != serial {
                    return "authenticated the wrong identity \(result.identity.did) \(result.identity.serial)"
                }
                return nil
            default:
                return "unexpected success \(success)"
            }
        }
    }
}

/// The integration guide's adapter between the client and the authenticator.
@MainActor
final class ChaosAuthTransport: DeviceAuthTransport {
    let label = "chaos"
    private let ble: XTalkBleClient

    init(ble: XTalkBleClient) {
        self.ble = ble
    }

    var atEncoding: DeviceAuthAtEncoding { ble.atEncoding == .plain ? .plain : .xor }

    func setAtEncoding(_ encoding: DeviceAuthAtEncoding) {
        ble.setAtEncoding(encoding == .plain ? .plain : .xor)
    }

    func runAtCommand(_ command: String, timeoutMs: Int, log: Bool, responseMode: DeviceAuthResponseMode) async throws -> [String] {
        let mode: XTalkAtResponseMode = responseMode == .automatic ? .automatic : .collectUntilTimeout
        return try await ble.runAtCommand(command, timeoutMs: timeoutMs, log: log, responseMode: mode)
    }
}
