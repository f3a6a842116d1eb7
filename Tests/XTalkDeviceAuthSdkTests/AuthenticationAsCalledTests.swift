import Foundation
import Testing
import XTalkBleSdk
import XTalkCrypto
import XTalkDeviceAuthSdk
import XTalkSimulator

/// Issue 15: authentication as customers call it, with the integration
/// guide's adapter (`XTalkBleAuthTransport`, seed 002, verbatim), which starts
/// in `.plain` whatever the client and the firmware use.
@Suite("Authentication as customers call it: probe order, declared trust, errors that name the cause")
@MainActor
struct AuthenticationAsCalledTests {
    static let probeWindow = Duration.milliseconds(XTalkDeviceAuthConfiguration().probeTimeoutMs)
    /// Generous for three round trips on the harness's 7.5 ms link, far below one probe window.
    static let threeRoundTrips = Duration.milliseconds(100)

    static func commands(_ harness: AuthHarness, since start: Int) -> [String] {
        harness.peripheral.processedCommands[start...].map { $0.hasPrefix("AT+CHAL=") ? "AT+CHAL=…" : $0 }
    }

    // MARK: 1. The fast path, whatever the adapter starts in

    @Test("default (xor) device, the guide's adapter starting in .plain: three commands, no probe window")
    func guideAdapterFastPath() async throws {
        let harness = AuthHarness()
        await harness.connect()
        #expect(harness.transport.atEncoding == .plain, "the guide's adapter, as written")
        let (commandsBefore, start) = (harness.peripheral.processedCommands.count, harness.clock.elapsed)
        let result = try await harness.authenticate().get()
        #expect(Self.commands(harness, since: commandsBefore) == ["AT+AUTH?", "AT+CHAL=…", "AT+ID?"])
        #expect(harness.clock.elapsed - start < Self.threeRoundTrips)
        #expect(result.encoding == .xor && harness.client.atEncoding == .xor)
        await harness.finish()
    }

    @Test("plain (older) device: one fast-probe window and a drain more, once; the next run probes plain first")
    func plainDeviceRemembered() async throws {
        var firmware = XTalkSimulatedFirmware()
        firmware.encoding = .plain
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        var start = harness.clock.elapsed
        #expect(try await harness.authenticate().get().encoding == .plain)
        let drainQuiet = Duration.milliseconds(150)
        #expect(harness.clock.elapsed - start <= Self.probeWindow + drainQuiet + Self.threeRoundTrips)
        // The same authenticator again, with the adapter (and the client) switched back to xor:
        // it probes what it found, not what the adapter says.
        harness.transport.setAtEncoding(.xor)
        let commandsBefore = harness.peripheral.processedCommands.count
        start = harness.clock.elapsed
        #expect(try await harness.authenticate().get().encoding == .plain)
        #expect(Self.commands(harness, since: commandsBefore) == ["AT+AUTH?", "AT+CHAL=…", "AT+ID?"])
        #expect(harness.clock.elapsed - start < Self.threeRoundTrips)
        await harness.finish()
    }

    @Test("a probe answered with ERROR twice is a refusal (.invalidChallenge), not .commandTimedOut")
    func probeAnsweredWithError() async {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.scriptedReplies = ["AT+AUTH?": ["ERROR"]]
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        let start = harness.clock.elapsed
        #expect(await harness.authenticate() == .failure(.invalidChallenge))
        #expect(
            harness.peripheral.processedCommands.filter { $0 == "AT+AUTH?" }.count == 2,
            "asked once more (a damaged line gets ERROR too), then taken as the firmware's answer")
        // The second asking is strict: its full window, then a clean channel.
        let strictWindow = Duration.milliseconds(XTalkDeviceAuthConfiguration().strictProbeTimeoutMs)
        #expect(harness.clock.elapsed - start < strictWindow + Self.threeRoundTrips)
        await harness.finish()
    }

    @Test("one ERROR to the probe (a damaged line), then the real answer: authenticated")
    func probeErrorOnce() async throws {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.scriptedReplies = ["AT+AUTH?": ["ERROR"]]
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        let authenticator = harness.authenticator
        let running = Task { @MainActor in try await authenticator.authenticate() }
        // The first probe's ERROR is on its way; the device answers properly from now on.
        await harness.clock.advance(by: .milliseconds(1))
        harness.peripheral.device.firmware.faults.scriptedReplies = [:]
        let result = try await harness.clock.run { try await running.value }
        #expect(result.encoding == .xor)
        #expect(harness.peripheral.processedCommands.filter { $0 == "AT+AUTH?" }.count == 2)
        await harness.finish()
    }

    @Test("after a refusal the encoding is known: a retry that goes unanswered asks again in it, not in the other")
    func probeErrorThenSilence() async throws {
        var firmware = XTalkSimulatedFirmware()
        firmware.faults.scriptedReplies = ["AT+AUTH?": ["ERROR"]]
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        let before = harness.peripheral.processedCommands.count
        let start = harness.clock.elapsed
        let authenticator = harness.authenticator
        let running = Task { @MainActor in try await authenticator.authenticate() }
        // The first probe's ERROR is on its way; the retry goes unanswered
        // (its notification lost), then the device answers properly.
        await harness.clock.advance(by: .milliseconds(1))
        harness.peripheral.device.firmware.faults.scriptedReplies = [:]
        harness.peripheral.device.firmware.faults.silentCommands = ["AT+AUTH?"]
        var steps = 0
        while harness.peripheral.processedCommands.count < before + 2 && steps < 1_000 {
            await harness.clock.advance(by: .milliseconds(5))
            steps += 1
        }
        harness.peripheral.device.firmware.faults.silentCommands = []
        let result = try await harness.clock.run { try await running.value }
        #expect(result.encoding == .xor)
        let commands = Array(harness.peripheral.processedCommands[before...])
        #expect(commands == ["AT+AUTH?", "AT+AUTH?", "AT+AUTH?"] + commands.suffix(2), "\(commands)")
        #expect(
            !harness.logs.all.contains("AT encoding: plain"),
            "never asked in the other encoding, which the device takes as noise: \(harness.logs.all)")
        let configuration = XTalkDeviceAuthConfiguration()
        let windows = Duration.milliseconds(configuration.probeTimeoutMs + 2 * configuration.strictProbeTimeoutMs)
        #expect(harness.clock.elapsed - start < windows + Self.threeRoundTrips)
        await harness.finish()
    }

    // MARK: 2. Trust that an app declares

    /// A key pair of the app's own (a "production" key) and its anchor.
    static func productionKey() throws -> (seed: [UInt8], anchor: XTalkTrustAnchor) {
        let seed = Array(repeating: UInt8(0x5A), count: 32)
        let publicKey = try Ed25519PrivateKey(seed: seed).publicKey.rawRepresentation
        return (seed, try #require(XTalkTrustAnchor(rawRepresentation: Data(publicKey))))
    }

    /// A bundle whose Info.plist holds `XTalkTrustAnchors: entries` (as an app declares them).
    static func bundle(declaring entries: [Any]?) throws -> Bundle {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("xtalk-anchors-\(UUID().uuidString).bundle")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var plist: [String: Any] = ["CFBundleIdentifier": "com.example.app"]
        if let entries { plist[XTalkTrustAnchors.infoPlistKey] = entries }
        let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
        try data.write(to: directory.appendingPathComponent("Info.plist"))
        return try #require(Bundle(path: directory.path))
    }

    @Test("Info.plist declares a production anchor: a development-signed device is rejected, its own accepted")
    func infoPlistAnchors() async throws {
        let production = try Self.productionKey()
        let base64 = production.anchor.rawRepresentation.base64EncodedString()
        let harness = AuthHarness(bundle: try Self.bundle(declaring: [base64]))
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.signatureVerificationFailed), "the development key")
        harness.peripheral.device.firmware.signingKeySeed = production.seed
        harness.authenticator.reset()
        let result = try await harness.authenticate().get()
        #expect(result.verifiedBy == production.anchor)
        #expect(harness.warnings.isEmpty, "anchors are declared: no warning")
        await harness.finish()
    }

    @Test("the development anchor is trusted when listed by name beside a production key (hex)")
    func infoPlistListsDevelopment() async throws {
        let production = try Self.productionKey()
        let hex = production.anchor.rawRepresentation.map { String(format: "%02x", $0) }.joined()
        let harness = AuthHarness(bundle: try Self.bundle(declaring: [hex, "development"]))
        await harness.connect()
        #expect(try await harness.authenticate().get().verifiedBy == .development)
        harness.peripheral.device.firmware.signingKeySeed = production.seed
        #expect(try await harness.authenticate().get().verifiedBy == production.anchor)
        #expect(harness.warnings.isEmpty)
        await harness.finish()
    }

    @Test("nothing declared: the development anchor verifies, the result says so, one warning for many runs")
    func noneDeclared() async throws {
        let harness = AuthHarness(bundle: try Self.bundle(declaring: nil))
        await harness.connect()
        #expect(try await harness.authenticate().get().verifiedBy == .development)
        #expect(try await harness.authenticate().get().verifiedBy == .development)
        #expect(harness.warnings.count == 1)
        #expect(harness.warnings.first?.contains("development anchor") == true)
        // An explicit list in the configuration is the app's declaration too.
        let production = try Self.productionKey()
        #expect(
            await harness.authenticate(XTalkDeviceAuthConfiguration(trustAnchors: [production.anchor]))
                == .failure(.signatureVerificationFailed))
        await harness.finish()
    }

    /// An Info.plist value: strings, or one number (not a string at all).
    enum Declaration: Sendable, CustomTestStringConvertible {
        case strings([String])
        case number
        var entries: [Any] {
            switch self {
            case .strings(let strings): strings
            case .number: [42]
            }
        }
        /// What the warning must say about the list.
        var problem: String {
            let list = "Info.plist \(XTalkTrustAnchors.infoPlistKey)"
            switch self {
            case .strings([]): return "\(list) is an empty list"
            case .strings(let strings):
                let bad = strings.firstIndex { XTalkTrustAnchor(declaration: $0) == nil } ?? -1
                let text = bad >= 0 ? strings[bad] : ""
                let shown = text.count > 24 ? String(text.prefix(24)) + "…" : text
                return "\(list) item \(bad) (\"\(shown)\") is not an Ed25519 public key"
            case .number: return "\(list) item 0 is not a string"
            }
        }
        var testDescription: String {
            switch self {
            case .strings(let strings): "\(strings)"
            case .number: "[42]"
            }
        }
    }

    @Test(
        "a declared list that is empty or holds an invalid key fails before any I/O, naming the entry",
        arguments: [
            Declaration.strings([]), .strings(["not a key"]),
            .strings(["development", String(repeating: "0", count: 62)]),
            .number,
        ])
    func invalidDeclarations(_ declaration: Declaration) async throws {
        let harness = AuthHarness(bundle: try Self.bundle(declaring: declaration.entries))
        await harness.connect()
        #expect(await harness.authenticate() == .failure(.invalidConfiguration))
        #expect(harness.peripheral.processedCommands.isEmpty)
        #expect(
            harness.warnings.count == 1 && harness.warnings[0].hasPrefix(declaration.problem), "\(harness.warnings)")
        await harness.finish()
    }

    @Test("the rule's precedence: configuration, then code, then Info.plist, then the development default")
    func precedence() throws {
        let production = try Self.productionKey()
        let plist = try Self.bundle(declaring: ["development"])
        let none = try Self.bundle(declaring: nil)
        let configured = XTalkDeviceAuthConfiguration(trustAnchors: [production.anchor])
        // Synchronous on the main actor: no other test sees `declared` while it is set.
        let saved = XTalkTrustAnchors.declared
        defer { XTalkTrustAnchors.declared = saved }
        XTalkTrustAnchors.declared = nil
        #expect(
            try XTalkTrustAnchors.resolve(XTalkDeviceAuthConfiguration(), bundle: none) == (
                [.development], .developmentDefault
            ))
        #expect(
            try XTalkTrustAnchors.resolve(XTalkDeviceAuthConfiguration(), bundle: plist) == ([.development], .infoPlist)
        )
        XTalkTrustAnchors.declared = [production.anchor]
        #expect(
            try XTalkTrustAnchors.resolve(XTalkDeviceAuthConfiguration(), bundle: plist) == ([production.anchor], .code)
        )
        XTalkTrustAnchors.declared = [.development]
        #expect(try XTalkTrustAnchors.resolve(configured, bundle: plist) == ([production.anchor], .configuration))
        XTalkTrustAnchors.declared = []
        #expect(throws: XTalkDeviceAuthError.invalidConfiguration) {
            try XTalkTrustAnchors.resolve(XTalkDeviceAuthConfiguration(), bundle: none)
        }
        // The log names the list that is wrong: here the one in code, which takes precedence.
        #expect(
            XTalkTrustAnchors.declarationProblem(XTalkDeviceAuthConfiguration(), bundle: plist)
                == "XTalkTrustAnchors.declared is an empty list")
        XTalkTrustAnchors.declared = [.development]
        #expect(XTalkTrustAnchors.declarationProblem(XTalkDeviceAuthConfiguration(), bundle: plist) == nil)
    }

    // MARK: 3. Errors that name the cause

    struct FailureCase: Sendable, CustomTestStringConvertible {
        let name: String
        let faults: @Sendable (inout XTalkFirmwareFaults) -> Void
        let error: XTalkDeviceAuthError
        let attempts: Int
        var testDescription: String { name }
    }

    nonisolated static let signatureOf62 = "+CHAL:B5803039," + String(repeating: "AB", count: 62)

    nonisolated static let failureCases: [FailureCase] = [
        FailureCase(
            name: "signature of 62 bytes", faults: { $0.scriptedReplies = ["AT+CHAL=": [signatureOf62, "OK"]] },
            error: .invalidSignatureLength(62), attempts: 1),
        FailureCase(
            name: "signed by no trusted anchor", faults: { $0.wrongSignature = true },
            error: .signatureVerificationFailed, attempts: 1),
        FailureCase(
            name: "signed another identifier than reported", faults: { $0.challengeDeviceIDOverride = 0x8000_0001 },
            error: .invalidDeviceIdentity, attempts: 1),
        FailureCase(
            name: "challenge never answered", faults: { $0.silentCommands = ["AT+CHAL="] },
            error: .challengeRetryExhausted, attempts: 3),
        FailureCase(
            name: "malformed +CHAL:", faults: { $0.malformedChallengeReply = true },
            error: .challengeRetryExhausted, attempts: 3),
        FailureCase(
            name: "+CHAL:ERR", faults: { $0.rejectedChallenges = 3 },
            error: .challengeRetryExhausted, attempts: 3),
        FailureCase(
            name: "no +CHAL: line", faults: { $0.scriptedReplies = ["AT+CHAL=": ["OK"]] },
            error: .challengeRetryExhausted, attempts: 3),
    ]

    @Test(
        "each failure class with the default configuration: the exact error, the attempts made", arguments: failureCases
    )
    func failureClasses(_ failure: FailureCase) async {
        var firmware = XTalkSimulatedFirmware()
        failure.faults(&firmware.faults)
        let harness = AuthHarness(firmware: firmware)
        await harness.connect()
        #expect(await harness.authenticate() == .failure(failure.error))
        #expect(harness.peripheral.processedCommands.filter { $0.hasPrefix("AT+CHAL=") }.count == failure.attempts)
        let shown = harness.states.compactMap { state -> Int? in
            if case .challenging(let attempt, 3) = state { attempt } else { nil }
        }
        #expect(shown == Array(1...failure.attempts), "the state shows each attempt")
        await harness.finish()
    }

    // MARK: 4. State that follows the link

    @Test("link loss after authentication, then reset(): .idle; reset() during a run cancels it")
    func resetAfterLinkLoss() async throws {
        let harness = AuthHarness()
        await harness.connect()
        _ = try await harness.authenticate().get()
        harness.peripheral.disconnect()
        await harness.clock.advance(by: harness.peripheral.device.link.supervisionTimeout)
        #expect(harness.client.connectionState == .disconnected)
        harness.authenticator.cancel()  // what seed 002 does on .disconnected: nothing to cancel
        guard case .authenticated = harness.authenticator.state else {
            Issue.record("cancel() without a session leaves the state, as the seed says")
            return
        }
        harness.authenticator.reset()
        #expect(harness.authenticator.state == .idle)
        // reset() while a run waits on the device: it ends with .cancelled, the state is .idle.
        await harness.connect()
        let authenticator = harness.authenticator
        let running = await harness.runWaitingOnDevice()
        authenticator.reset()
        #expect(authenticator.state == .idle)
        await #expect(throws: XTalkDeviceAuthError.cancelled) { try await running.value }
        #expect(authenticator.state == .idle)
        await harness.finish()
    }

    // MARK: 5. Continuity across reconnects

    @Test("an expected identity: the same device back succeeds; another device is .invalidDeviceIdentity, named")
    func expectedIdentity() async throws {
        let harness = AuthHarness()
        await harness.connect()
        let first = try await harness.authenticate().get().identity
        let expecting = XTalkDeviceAuthConfiguration(expectedDeviceID: first.deviceID)
        #expect(try await harness.authenticate(expecting).get().identity == first)
        #expect(harness.authenticator.lastUnexpectedIdentity == nil)
        // Another device behind the same link (its own consistent identity, properly signed).
        let other = XTalkSimulatedFirmware.identity(year: 2025, week: 3, serialNumber: 777)
        harness.peripheral.device.firmware.deviceID = other.deviceID
        harness.peripheral.device.firmware.serial = other.serial
        #expect(await harness.authenticate(expecting) == .failure(.invalidDeviceIdentity))
        #expect(harness.authenticator.lastUnexpectedIdentity?.serial == other.serial)
        #expect(harness.authenticator.lastUnexpectedIdentity?.deviceID != first.deviceID)
        await harness.finish()
    }
}
