import Foundation
import Testing
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkTestSupport

#if !canImport(Combine)
    import Observation
#endif

/// The authentication SDK's public models and protocol as app code uses them.
@Suite("Public models of device authentication", .timeLimit(.minutes(5)))
@MainActor
struct AuthModelTests {
    /// One of every `XTalkDeviceAuthError` case.
    static func everyError() -> [XTalkDeviceAuthError] {
        [
            .busy, .invalidConfiguration, .transportUnavailable, .commandTimedOut("AT+ID?"), .secureRandomUnavailable,
            .invalidChallenge, .challengeMissing, .malformedChallengeReply, .invalidSignatureLength(63),
            .signatureVerificationFailed, .challengeRetryExhausted, .invalidDeviceIdentity, .cancelled,
        ]
    }

    @Test("every XTalkDeviceAuthError says what happened in words; LocalizedError says the same")
    func errorDescriptions() {
        var descriptions: Set<String> = []
        for error in Self.everyError() {
            #expect(!error.description.isEmpty)
            #expect(error.errorDescription == error.description)
            #expect(descriptions.insert(error.description).inserted, "\(error): no two cases read the same")
        }
        #expect(Self.everyError().count == 13, "the API reference's thirteen cases")
        #expect(XTalkDeviceAuthError.commandTimedOut("AT+ID?").description.contains("AT+ID?"))
        #expect(XTalkDeviceAuthError.invalidSignatureLength(63).description.contains("63"))
    }

    @Test("a default configuration has the API reference's values")
    func configurationDefaults() {
        let configuration = XTalkDeviceAuthConfiguration()
        #expect(configuration.probeTimeoutMs == 800)
        #expect(configuration.strictProbeTimeoutMs == 1_200)
        #expect(configuration.challengeTimeoutMs == 4_000)
        #expect(configuration.identityTimeoutMs == 4_000)
        #expect(configuration.maxChallengeAttempts == 3)
        #expect(configuration.trustAnchors == nil, "the app's declared anchors (or the development one)")
        #expect(configuration.challengePolicy == .whenRequired)
        #expect(configuration.expectedDeviceID == nil)
        let pinned = XTalkDeviceAuthConfiguration(
            trustAnchors: [.development], challengePolicy: .always, expectedDeviceID: 0xB580_3039)
        #expect(pinned.trustAnchors == [.development] && pinned.challengePolicy == .always)
        #expect(pinned.expectedDeviceID == 0xB580_3039 && pinned.probeTimeoutMs == 800)
    }

    @Test("a result made with the public initializers keeps its fields; the reference's has no verifying anchor")
    func resultInitializers() {
        let identity = XTalkDeviceIdentity(
            deviceID: 0xB580_3039, did: "did:xtalk:B5803039", serial: "XT2648012345", source: .efuseSn)
        let plain = XTalkDeviceAuthResult(identity: identity, encoding: .plain, didRequireChallenge: false)
        #expect(plain.identity == identity && plain.encoding == .plain && !plain.didRequireChallenge)
        #expect(plain.verifiedBy == nil)
        let verified = XTalkDeviceAuthResult(
            identity: identity, encoding: .xor, didRequireChallenge: true, verifiedBy: .development)
        #expect(verified.identity == identity && verified.encoding == .xor && verified.didRequireChallenge)
        #expect(verified.verifiedBy == .development)
    }

    @Test("encodings and identity sources round-trip through their raw values; anything else is nil")
    func rawValues() {
        for encoding in DeviceAuthAtEncoding.allCases {
            #expect(DeviceAuthAtEncoding(rawValue: encoding.rawValue) == encoding)
        }
        #expect(DeviceAuthAtEncoding(rawValue: "xor") == .xor && DeviceAuthAtEncoding(rawValue: "XOR") == nil)
        for source in [XTalkDeviceIdentitySource.efuseSn, .sn] {
            #expect(XTalkDeviceIdentitySource(rawValue: source.rawValue) == source)
        }
        #expect(XTalkDeviceIdentitySource(rawValue: "") == nil)
    }

    /// The guide's adapter, called through the protocol as the authenticator calls it.
    @Test("the guide's adapter through DeviceAuthTransport: label, encoding, and commands in each response mode")
    func adapterThroughTheProtocol() async throws {
        let harness = AuthHarness()
        await harness.connect()
        let transport: any DeviceAuthTransport = harness.transport
        #expect(transport.label == "xTalk BLE")
        transport.setAtEncoding(.xor)
        #expect(transport.atEncoding == .xor && harness.client.atEncoding == .xor, "the client follows")
        let version = try await harness.clock.run {
            try await transport.runAtCommand("AT+VER?", timeoutMs: 2_000, log: false, responseMode: .automatic)
        }
        #expect(version.first?.hasPrefix("+VER:") == true && version.last == "OK")
        // The full-window modes collect until the timeout, even after the final result code.
        let start = harness.clock.elapsed
        let windowed = try await harness.clock.run {
            try await transport.runAtCommand("AT+VER?", timeoutMs: 300, log: false, responseMode: .collectFullWindow)
        }
        #expect(windowed == version)
        #expect(harness.clock.elapsed - start >= .milliseconds(300))
        let probed = try await harness.clock.run {
            try await transport.runAtCommand(
                "AT+AUTH?", timeoutMs: 300, log: false, responseMode: .recoverableEncodingProbe)
        }
        #expect(probed.last == "OK")
        await harness.finish()
    }

    #if !canImport(Combine)
        /// Without Combine, the authenticator's `state` is observable through its public registrar.
        @Test("the authenticator's observationRegistrar reports its state's changes")
        func registrarReportsStateChanges() async {
            let harness = AuthHarness()
            await harness.connect()
            harness.transport.setAtEncoding(.xor)
            let authenticator = harness.authenticator
            let counter = ChangeCounter()
            withObservationTracking {
                authenticator.observationRegistrar.access(authenticator, keyPath: \.state)
            } onChange: {
                counter.increment()
            }
            let outcome = await harness.authenticate()
            #expect((try? outcome.get()) != nil)
            #expect(counter.value == 1, "onChange fires once, for the first change (.probing)")
            await harness.finish()
        }
    #endif
}
