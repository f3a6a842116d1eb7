import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkSimulator

enum DemoCommand {
    static let command = Command(
        spec: CommandSpec(
            name: "demo",
            summary: "Run the integration guide's six-step acceptance sequence on the built-in simulated devices.",
            // Every device option but --disconnect-after: the sequence loses the link itself (step 5).
            positionals: [],
            options: CommonOptions.device.filter {
                $0.declaration.name != CommonOptions.disconnectAfter.declaration.name
            },
            discussion: """
                Scans, connects to the strongest device, authenticates it (and shows that an unauthenticated
                session cannot send), runs AT commands and radio sends side by side while radio frames
                arrive, loses the link and authenticates again after reconnecting, and closes. Each step
                prints its outcome and duration; the exit code is 0 only when all six passed.
                """),
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        var defaults = SimulatorSettings()
        defaults.trafficHz = 5
        let session: DeviceSession
        do throws(UsageError) {
            session = try DeviceSession(arguments, context: context, printer: printer, defaults: defaults)
            // Step 4 receives radio frames: on the simulator, without traffic it could only fail.
            if session.environment != nil, session.settings.trafficHz == 0 {
                session.close()
                throw UsageError("the demo needs radio traffic: --traffic must be above 0")
            }
        } catch {
            throw CLIError.usage(error)
        }
        defer { session.close() }
        try await Demo(session: session).run()
    }
}

/// The acceptance sequence of the end-to-end integration guide, as an app
/// session would run it: the client, the authenticator over the guide's
/// adapter, an event consumer that clears the identity on link loss.
@MainActor
final class Demo {
    private let session: DeviceSession
    private let context: CommandContext
    private let printer: Printer
    private let client: XTalkBleClient
    private var identity: XTalkDeviceIdentity?
    private var frames: [(Data, XTalkDiMeta)] = []
    private var eventTask: Task<Void, Never>?
    private var device: XTalkScanResult?

    init(session: DeviceSession) {
        self.session = session
        context = session.context
        printer = session.printer
        client = session.client
    }

    func run() async throws(CLIError) {
        let start = context.elapsed
        let backend = session.environment == nil ? "this machine's Bluetooth" : "the built-in simulated devices"
        printer.text("xtalk demo: the integration guide's acceptance sequence, on \(backend), in real time")
        printer.text("")
        startEventConsumption()
        defer { eventTask?.cancel() }

        try await step(1, "Bluetooth access and scan results") { details throws(CLIError) in
            let results = try await session.scan(
                window: session.requestedScanWindow ?? .milliseconds(600)
            ).filter(session.selects)
            guard !results.isEmpty else { throw CLIError(.notFound, "no xTalk device \(session.wanted) was found") }
            for result in results { details.append(Render.device(result).1) }
            return "\(results.count) device\(results.count == 1 ? "" : "s") found"
        }
        try await step(2, "Connect to the strongest device until the passthrough is ready") { _ throws(CLIError) in
            let device = try await connectStrongest()
            return "\(device.displayName): connected, atReady"
        }
        try await step(3, "Authenticate; without it the business flow stays closed") { details throws(CLIError) in
            details.append("business payload before authentication: " + businessGate())
            let result = try await session.authenticate()
            identity = result.identity
            details.append(Render.identity(result).1)
            return identity?.did ?? ""
        }
        try await step(4, "AT queries and radio sends do not interleave") { details throws(CLIError) in
            try await exchange(details: &details)
            return "every answer matched its own command"
        }
        try await step(5, "Link loss clears the identity; reconnecting requires authentication again") {
            details throws(CLIError) in
            guard let device, let peripheral = session.environment?.peripheral(id: device.id) else {
                throw CLIError(.failure, "link loss can only be injected on the simulator")
            }
            peripheral.disconnect()
            try await session.waitUntil("Waiting for the link loss", limit: .seconds(3), linkLossEnds: false) {
                identity == nil
            }
            details.append("link lost: state \(client.connectionState), identity cleared")
            details.append("business payload after the loss: " + businessGate())
            _ = try await connectStrongest()
            details.append("reconnected to \(device.name)")
            let result = try await session.authenticate()
            identity = result.identity
            details.append("authenticated again: " + result.identity.did)
            return "re-authenticated as \(result.identity.did)"
        }
        try await step(6, "Close ends the event task and every transaction") { details throws(CLIError) in
            session.environment?.peripherals.forEach { $0.device.firmware.faults.replyDelay = .seconds(5) }
            let pending = Task { @MainActor [client] in try await client.runAtCommand("AT+VER?") }
            try? await context.sleep(for: .milliseconds(50))
            client.teardown()
            let outcome: String
            do {
                _ = try await pending.value
                throw CLIError(.failure, "a transaction survived close()")
            } catch let error as XTalkBleError where error == .cancelled {
                outcome = "pending AT+VER? ended with .cancelled"
            } catch {
                throw CLIError.from(error, doing: "Closing")
            }
            await eventTask?.value
            details.append(outcome)
            details.append("event stream finished, \(client.connectionState) and not ready")
            return "closed cleanly"
        }
        printer.text("")
        printer.record(
            "summary",
            [
                ("passed", .bool(true)), ("steps", .int(6)),
                ("seconds", .double(milliseconds(context.elapsed - start) / 1_000)),
            ],
            human: "All 6 steps passed in \(seconds(context.elapsed - start)).")
    }

    /// Runs one step: prints its outcome, duration and details, then rethrows a failure.
    private func step(
        _ number: Int, _ title: String,
        _ body: (inout [String]) async throws(CLIError) -> String
    ) async throws(CLIError) {
        let start = context.elapsed
        var details: [String] = []
        let outcome: Result<String, CLIError>
        do throws(CLIError) {
            outcome = .success(try await body(&details))
        } catch {
            outcome = .failure(error)
        }
        let took = context.elapsed - start
        let header = "Step \(number)/6  \(title)"
        let indent = String(repeating: " ", count: 10)
        switch outcome {
        case .success(let summary):
            printer.record(
                "step",
                [
                    ("number", .int(number)), ("title", .string(title)), ("passed", .bool(true)),
                    ("seconds", .double(milliseconds(took) / 1_000)), ("summary", .string(summary)),
                    ("details", .array(details.map(JSONValue.string))),
                ],
                human: ([header, indent + "passed in \(seconds(took)): \(summary)"] + details.map { indent + $0 })
                    .joined(separator: "\n"))
        case .failure(let error):
            printer.record(
                "step",
                [
                    ("number", .int(number)), ("title", .string(title)), ("passed", .bool(false)),
                    ("seconds", .double(milliseconds(took) / 1_000)), ("error", .string(error.message)),
                    ("details", .array(details.map(JSONValue.string))),
                ],
                human: ([header, "          FAILED after \(seconds(took)): \(error.message)"]
                    + details.map { "          " + $0 })
                    .joined(separator: "\n"))
            throw error
        }
    }

    /// The session's rule: business payloads only with an authenticated identity.
    private func businessGate() -> String {
        identity == nil ? "refused (no authenticated identity)" : "allowed"
    }

    private func connectStrongest() async throws(CLIError) -> XTalkScanResult {
        if let device {
            client.startScan()
            try await session.waitUntil("Scanning") { client.scanResults.contains { $0.id == device.id } }
            client.connect(id: device.id)
            try await session.waitUntil("Connecting to \(device.name)") { client.atReady }
            return device
        }
        guard let strongest = client.scanResults.filter(session.selects).max(by: { $0.rssi < $1.rssi }) else {
            throw CLIError(.notFound, "no xTalk device \(session.wanted) was found")
        }
        device = strongest
        client.connect(id: strongest.id)
        try await session.waitUntil("Connecting to \(strongest.name)") { client.atReady }
        return strongest
    }

    /// AT commands and radio sends started together while radio frames arrive.
    private func exchange(details: inout [String]) async throws(CLIError) {
        let client = self.client
        let queries = ["AT+VER?", "AT+FREQ?", "AT+TXP?"]
        let expected = ["+VER:", "+FREQ:", "+TXP:"]
        let payloads = [Data("hello".utf8), Data([0x01, 0x02, 0x03, 0x04])]
        let queryTasks = queries.map { command in Task { @MainActor in try await client.runAtCommand(command) } }
        let sendTasks = payloads.map { payload in
            Task { @MainActor () throws -> Duration in
                let start = context.elapsed
                try await client.sendRfPayload(payload)
                return context.elapsed - start
            }
        }
        for (index, task) in queryTasks.enumerated() {
            let lines: [String]
            do { lines = try await task.value } catch { throw CLIError.from(error, doing: queries[index]) }
            guard lines.count == 2, lines[0].hasPrefix(expected[index]), lines[1] == "OK" else {
                throw CLIError(
                    .failure, "\(queries[index]) got someone else's answer: \(lines.joined(separator: " | "))")
            }
            details.append(
                "\(queries[index].padding(toLength: 9, withPad: " ", startingAt: 0)) → \(lines.joined(separator: " "))")
        }
        for (index, task) in sendTasks.enumerated() {
            let took: Duration
            do { took = try await task.value } catch { throw CLIError.from(error, doing: "RF send \(index + 1)") }
            details.append(
                "RF send \(payloads[index].count) bytes (\(Hex.encode(payloads[index]))) "
                    + "→ +SENDFIN:OK after \(seconds(took))")
        }
        try await session.waitUntil("Waiting for radio frames", limit: .seconds(3)) { frames.count >= 2 }
        for (data, meta) in frames.prefix(3) { details.append(Render.frame(data, meta).1) }
    }

    /// The event consumer of the guide: frames for the business layer; link
    /// loss clears the identity.
    private func startEventConsumption() {
        let stream = client.events
        eventTask = Task { @MainActor [weak self] in
            for await event in stream {
                guard let self else { return }
                switch event {
                case .diPayload(let data, let meta):
                    frames.append((data, meta))
                case .connectionStateChanged(.disconnected), .connectionStateChanged(.failed):
                    identity = nil
                case .connectionStateChanged, .atLine, .sendFinished, .crcError, .passthroughRaw:
                    break
                }
            }
        }
    }
}
