import Foundation
import Testing
import XTalkBleSdk
import XTalkCrypto
@testable import XTalkDeviceAuthSdk
@testable import XTalkSimulator

@Suite("XTalkDeviceAuthenticator against the simulated device", .timeLimit(.minutes(5)))
@MainActor
struct AuthenticatorTests {
    @Test("the happy path: three round trips, no fixed windows, every state, the right identity")
    func happyPath() async {
        let harness = AuthHarness()
        await harness.connect()
        harness.transport.setAtEncoding(.xor)  // the transport already matches the firmware
        let start = harness.clock.elapsed
        let outcome = await harness.authenticate()
        guard case .success(let result) = outcome else {
            Issue.record("failed: \(outcome)")
            return
        }
        #expect(
            result.identity
                == XTalkDeviceIdentity(
                    deviceID: 0xB580_3039, did: "did:xtalk:B5803039",
                    serial: "XT2648012345", source: .efuseSn))
        #expect(result.encoding == .xor)
        #expect(result.didRequireChallenge)
        let commands = harness.peripheral.processedCommands
        #expect(commands.count == 3)
        #expect(commands.first == "AT+AUTH?" && commands.last == "AT+ID?")
        #expect(commands[1].hasPrefix("AT+CHAL=") && commands[1].count == 8 + 32)
        #expect(harness.clock.elapsed - start < .milliseconds(100), "three round trips on a 7.5 ms link")
        #expect(
            harness.states == [
                .idle, .probing, .challenging(attempt: 1, maxAttempts: 3), .readingIdentity,
                .authenticated(result.identity),
            ])
        #expect(harness.authenticator.state == .authenticated(result.identity))
        await harness.finish()
    }

    @Test("the challenge and its signature never reach a log")
    func nothingSecretLogged() async {
        let harness = AuthHarness()
        await harness.connect()
        _ = await harness.authenticate()
        let logs = harness.logs.all.joined(separator: "\n")
        #expect(logs.contains("AT+ID?"), "ordinary commands are logged")
        #expect(!logs.contains("AT+CHAL"))
        #expect(!logs.contains("+CHAL:"))
        await harness.finish()
    }

    @Test("each challenge attempt uses a fresh nonce")
    func freshNonces() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.rejectedChallenges = 2
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        guard case .success = await harness.authenticate() else {
            Issue.record("the third attempt should succeed")
            return
        }
        let nonces = harness.peripheral.processedCommands.filter { $0.hasPrefix("AT+CHAL=") }
        #expect(nonces.count == 3)
        #expect(Set(nonces).count == 3)
        await harness.finish()
    }

    @Test("each attempt draws its own nonce and sends it; the verified attempt is checked against its own")
    func oneDrawPerAttempt() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.rejectedChallenges = 2
        let source = CountingNonceSource()  // draw k is sixteen bytes of value k
        let harness = AuthHarness(firmware: firmware, randomBytes: { count in source.next(count) })
        await harness.connect()
        let outcome = await harness.authenticate()
        #expect(outcome.map(\.identity.did) == .success("did:xtalk:B5803039"))
        #expect(source.draws == 3, "one draw per attempt")
        #expect(
            harness.peripheral.processedCommands.filter { $0.hasPrefix("AT+CHAL=") } == [
                "AT+CHAL=01010101010101010101010101010101",
                "AT+CHAL=02020202020202020202020202020202",
                "AT+CHAL=03030303030303030303030303030303",
            ])
        #expect(harness.states.contains(.challenging(attempt: 3, maxAttempts: 3)))
        await harness.finish()
    }

    nonisolated static let matrix: [(XTalkAtEncoding, DeviceAuthAtEncoding, Bool, XTalkSimulatedSerialSource, Bool)] = {
        var all: [(XTalkAtEncoding, DeviceAuthAtEncoding, Bool, XTalkSimulatedSerialSource, Bool)] = []
        for firmware in XTalkAtEncoding.allCases {
            for start in DeviceAuthAtEncoding.allCases {
                for challenge in [true, false] {
                    for source in [XTalkSimulatedSerialSource.efuse, .configured] {
                        for legacy in [false, true] { all.append((firmware, start, challenge, source, legacy)) }
                    }
                }
            }
        }
        return all
    }()

    @Test("firmware matrix: encodings × starting encoding × challenge × serial source × legacy id", arguments: matrix)
    func firmwareMatrix(
        _ encoding: XTalkAtEncoding, _ start: DeviceAuthAtEncoding, _ challengeRequired: Bool,
        _ source: XTalkSimulatedSerialSource, _ legacy: Bool
    ) async {
        var firmware = XTalkSimulatedFirmware.identity(
            year: 2031, week: 7, serialNumber: 424_242, legacy: legacy, source: source)
        firmware.encoding = encoding
        firmware.challengeRequired = challengeRequired
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        harness.transport.setAtEncoding(start)
        let outcome = await harness.authenticate()
        guard case .success(let result) = outcome else {
            Issue.record("failed: \(outcome)")
            return
        }
        // PROTOCOL.md section 9 by hand: 1 (canonical) | 31 << 25 | 7 << 19 | 424242.
        #expect(result.identity.deviceID == 0xBE3E_7932)
        #expect(result.identity.did == "did:xtalk:BE3E7932")
        #expect(result.identity.serial == "XT3107424242")
        #expect(result.identity.source == (source == .efuse ? .efuseSn : .sn))
        #expect(result.encoding.rawValue == encoding.rawValue)
        #expect(
            harness.transport.atEncoding.rawValue == encoding.rawValue, "the transport is left on the found encoding")
        #expect(harness.client.atEncoding == encoding)
        #expect(result.didRequireChallenge == challengeRequired)
        let commands = harness.peripheral.processedCommands
        if start.rawValue == encoding.rawValue {
            #expect(commands.count == (challengeRequired ? 3 : 2), "\(commands)")
        }
        // The channel is usable in the found encoding right after.
        #expect(
            (try? await harness.clock.run { try await harness.client.runAtCommand("AT+PING=after") }) == [
                "+PING:after", "OK",
            ])
        await harness.finish()
    }

    @Test("a wrong starting encoding costs at most one probe timeout, one drain and three round trips")
    func wrongEncodingCost() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.encoding = .plain
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        harness.transport.setAtEncoding(.xor)
        let start = harness.clock.elapsed
        guard case .success(let result) = await harness.authenticate() else {
            Issue.record("failed")
            return
        }
        #expect(result.encoding == .plain)
        #expect(harness.clock.elapsed - start < .milliseconds(800 + 150 + 100))
        await harness.finish()
    }

    // MARK: Every error

    @Test(
        "invalid configuration values fail before any I/O",
        arguments: [
            XTalkDeviceAuthConfiguration(probeTimeoutMs: 0), XTalkDeviceAuthConfiguration(strictProbeTimeoutMs: -1),
            XTalkDeviceAuthConfiguration(challengeTimeoutMs: 0), XTalkDeviceAuthConfiguration(identityTimeoutMs: 0),
            XTalkDeviceAuthConfiguration(maxChallengeAttempts: 0), XTalkDeviceAuthConfiguration(trustAnchors: []),
        ])
    func invalidConfiguration(_ configuration: XTalkDeviceAuthConfiguration) async {
        let harness = AuthHarness()
        await harness.connect()
        #expect(await harness.authenticate(configuration) == .failure(.invalidConfiguration))
        #expect(harness.authenticator.state == .failed(.invalidConfiguration))
        #expect(harness.peripheral.processedCommands.isEmpty)
        await harness.finish()
    }

    @Test("a second concurrent authentication is .busy; the first goes on and succeeds")
    func busy() async throws {
        let harness = AuthHarness()
        await harness.connect()
        let authenticator = harness.authenticator
        let first = Task { @MainActor in try await authenticator.authenticate() }
        await harness.clock.settle()
        await #expect(throws: XTalkDeviceAuthError.busy) { try await authenticator.authenticate() }
        await #expect(throws: XTalkDeviceAuthError.invalidConfiguration) {
            try await authenticator.authenticate(configuration: XTalkDeviceAuthConfiguration(maxChallengeAttempts: 0))
        }
        #expect(authenticator.state != .failed(.busy) && authenticator.state != .failed(.invalidConfiguration))
        let result = try await harness.clock.run { try await first.value }
        #expect(result.identity.did == "did:xtalk:B5803039")
        await harness.finish()
    }

    @Test("a transport that is not ready gives .transportUnavailable")
    func transportUnavailable() async {
        let harness = AuthHarness()
        #expect(await harness.authenticate() == .failure(.transportUnavailable))
        #expect(harness.authenticator.state == .failed(.transportUnavailable))
        await harness.finish()
    }

    @Test(
        "a silent device: .commandTimedOut names the command",
        arguments: [
            (["AT+AUTH?"], "AT+AUTH?"), (["AT+ID?"], "AT+ID?"),
        ])
    func commandTimedOut(_ silent: [String], _ command: String) async {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.silentCommands = silent
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.commandTimedOut(command)))
        await harness.finish()
    }

    @Test("a silent challenge with one attempt is .commandTimedOut(\"AT+CHAL\") — the nonce is never named")
    func challengeTimedOut() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.silentCommands = ["AT+CHAL="]
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(
            await harness.authenticate(XTalkDeviceAuthConfiguration(maxChallengeAttempts: 1))
                == .failure(.commandTimedOut("AT+CHAL")))
        await harness.finish()
    }

    @Test("a failing CSPRNG gives .secureRandomUnavailable")
    func secureRandomUnavailable() async {
        struct NoEntropy: Error {}
        let harness = AuthHarness(randomBytes: { _ in throw NoEntropy() })
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.secureRandomUnavailable))
        await harness.finish()
    }

    @Test(
        "challenge reply failures with a single attempt report their own error",
        arguments: [
            (XTalkFirmwareFaults(rejectedChallenges: 1), XTalkDeviceAuthError.invalidChallenge),
            (XTalkFirmwareFaults(scriptedReplies: ["AT+CHAL=": ["OK"]]), .challengeMissing),
            (XTalkFirmwareFaults(malformedChallengeReply: true), .malformedChallengeReply),
            (
                XTalkFirmwareFaults(scriptedReplies: [
                    "AT+CHAL=": ["+CHAL:B5803039," + String(repeating: "0", count: 126), "OK"]
                ]),
                .invalidSignatureLength(63)
            ),
            (
                XTalkFirmwareFaults(scriptedReplies: [
                    "AT+CHAL=": ["+CHAL:B5803039," + String(repeating: "0", count: 400), "OK"]
                ]),
                .invalidSignatureLength(200)
            ),
            (
                XTalkFirmwareFaults(scriptedReplies: [
                    "AT+CHAL=": ["+CHAL:B5803039," + String(repeating: "Z", count: 128), "OK"]
                ]),
                .malformedChallengeReply
            ),
        ])
    func singleAttemptFailures(_ faults: XTalkFirmwareFaults, _ error: XTalkDeviceAuthError) async {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults = faults
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(await harness.authenticate(XTalkDeviceAuthConfiguration(maxChallengeAttempts: 1)) == .failure(error))
        #expect(harness.authenticator.state == .failed(error))
        await harness.finish()
    }

    @Test("retried failures end in .challengeRetryExhausted after maxChallengeAttempts")
    func retryExhausted() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.rejectedChallenges = 3
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.challengeRetryExhausted))
        #expect(harness.states.contains(.challenging(attempt: 3, maxAttempts: 3)))
        #expect(harness.peripheral.processedCommands.filter { $0.hasPrefix("AT+CHAL=") }.count == 3)
        await harness.finish()
    }

    @Test("a signature that does not verify is never retried")
    func signatureVerificationFailed() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.wrongSignature = true
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.signatureVerificationFailed))
        #expect(harness.peripheral.processedCommands.filter { $0.hasPrefix("AT+CHAL=") }.count == 1)
        await harness.finish()
    }

    @Test("an identity that disagrees with itself is .invalidDeviceIdentity")
    func invalidIdentity() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.serial = "XT2648012346"  // one off the identifier's serial number
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.invalidDeviceIdentity))
        await harness.finish()
    }

    @Test("cancel() ends the active authentication at once with .cancelled; without one it does nothing")
    func cancel() async {
        let harness = AuthHarness()
        harness.authenticator.cancel()
        #expect(harness.authenticator.state == .idle)
        await harness.connect()
        let authenticator = harness.authenticator
        let running = await harness.runWaitingOnDevice()
        authenticator.cancel()
        #expect(authenticator.state == .cancelled)
        await #expect(throws: XTalkDeviceAuthError.cancelled) { try await running.value }
        // Task cancellation of the caller does the same.
        let second = Task { @MainActor in try await authenticator.authenticate() }
        await harness.clock.advance(by: .milliseconds(100))
        second.cancel()
        await harness.clock.settle()
        await #expect(throws: XTalkDeviceAuthError.cancelled) { try await second.value }
        #expect(authenticator.state == .cancelled)
        // The authenticator and the channel are usable afterwards.
        harness.peripheral.device.firmware.faults.replyDelay = .zero
        await harness.clock.advance(by: .seconds(2))
        guard case .success = await harness.authenticate() else {
            Issue.record("a later authentication should succeed")
            return
        }
        await harness.finish()
    }

    // MARK: Attacks

    @Test("a device signing with a key that is not trusted is rejected")
    func wrongKey() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.signingKeySeed = Array(repeating: 7, count: 32)
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.signatureVerificationFailed))
        await harness.finish()
    }

    @Test("a production anchor trusts its own key and not the development one")
    func productionAnchor() async throws {
        let seed = Array(repeating: UInt8(9), count: 32)
        let publicKey = try Ed25519PrivateKey(seed: seed).publicKey.rawRepresentation
        let anchor = try #require(XTalkTrustAnchor(rawRepresentation: Data(publicKey)))
        var firmware = XTalkSimulatedFirmware()
        firmware.signingKeySeed = seed
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        guard case .success = await harness.authenticate(XTalkDeviceAuthConfiguration(trustAnchors: [anchor])) else {
            Issue.record("the production key should verify")
            return
        }
        harness.peripheral.device.firmware.signingKeySeed = nil  // now signs with the development key
        #expect(
            await harness.authenticate(XTalkDeviceAuthConfiguration(trustAnchors: [anchor]))
                == .failure(.signatureVerificationFailed))
        #expect(XTalkTrustAnchor(rawRepresentation: Data(count: 31)) == nil)
        await harness.finish()
    }

    @Test("a valid signature replayed for an old nonce is rejected")
    func replay() async {
        let harness = AuthHarness()
        await harness.connect()
        guard case .success = await harness.authenticate() else {
            Issue.record("the first authentication should succeed")
            return
        }
        harness.peripheral.device.firmware.faults.replayFirstChallengeReply = true
        #expect(await harness.authenticate() == .failure(.signatureVerificationFailed))
        await harness.finish()
    }

    @Test("a tampered device id (signed one id, reports another) is rejected")
    func tamperedID() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.challengeDeviceIDOverride = XTalkSimulatedFirmware.identifier(
            year: 2026, week: 48, serialNumber: 99)
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.invalidDeviceIdentity))
        await harness.finish()
    }

    @Test("a serial that disagrees with the id is rejected, also when the signature is valid")
    func serialMismatch() async {
        var firmware = XTalkSimulatedFirmware.identity(year: 2026, week: 48, serialNumber: 12345)
        firmware.serial = "XT2548012345"  // another year
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.invalidDeviceIdentity))
        await harness.finish()
    }

    @Test("under .always, a device claiming +AUTH:0 must still prove its key")
    func downgrade() async {
        var impostor = XTalkSimulatedFirmware()
        impostor.challengeRequired = false
        impostor.faults.wrongSignature = true
        let harness = AuthHarness(firmware: impostor)
        await harness.connect()
        // The default policy trusts the claim (and says so)...
        guard case .success(let trusting) = await harness.authenticate() else {
            Issue.record("the default policy skips the challenge")
            return
        }
        #expect(!trusting.didRequireChallenge)
        // ...the strict policy does not.
        #expect(
            await harness.authenticate(XTalkDeviceAuthConfiguration(challengePolicy: .always))
                == .failure(.signatureVerificationFailed))
        // A genuine device passes under .always and reports the challenge.
        harness.peripheral.device.firmware.faults.wrongSignature = false
        guard
            case .success(let strict) = await harness.authenticate(
                XTalkDeviceAuthConfiguration(challengePolicy: .always))
        else {
            Issue.record("a genuine device passes")
            return
        }
        #expect(strict.didRequireChallenge)
        await harness.finish()
    }

    @Test("the built-in development anchor is the simulator's development key")
    func developmentAnchor() throws {
        let derived = try Ed25519PrivateKey(seed: XTalkDevelopmentKey.seed).publicKey.rawRepresentation
        #expect(Data(derived) == XTalkTrustAnchor.development.rawRepresentation)
    }
}

/// A nonce source for tests: the k-th draw is `count` bytes of value k.
final class CountingNonceSource: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var draws: Int { lock.withLock { count } }
    func next(_ length: Int) -> [UInt8] {
        lock.withLock {
            count += 1
            return Array(repeating: UInt8(truncatingIfNeeded: count), count: length)
        }
    }
}
