import Foundation
import XTalkBleSdk
import XTalkCrypto
import XTalkDeviceAuthSdk
import XTalkSimulator

/// A client connected to one simulated device, for the benchmark rows.
@MainActor
struct BenchSetup {
    let clock: XTalkVirtualClock
    let environment: XTalkSimulatedEnvironment
    let client: XTalkBleClient
    /// Every event the client delivered since it was made.
    let events: EventCounter
    var peripheral: XTalkSimulatedPeripheral { environment.peripherals[0] }

    @MainActor
    final class EventCounter {
        var count = 0
    }

    /// Connects in virtual time; `settleYields` trades speed for how deep a
    /// chain of awaits can react between timers.
    /// `makeClient` makes the client on the environment (by default as an app does).
    static func connect(
        _ device: XTalkSimulatedDevice, settleYields: Int, together: Bool = false,
        makeClient: (XTalkSimulatedEnvironment) -> XTalkBleClient = { XTalkBleClient(simulator: $0) }
    ) async throws(CLIError) -> BenchSetup {
        let clock = XTalkVirtualClock(settleYields: settleYields, firesInstantTogether: together)
        let environment = XTalkSimulatedEnvironment(devices: [device], clock: clock)
        let client = makeClient(environment)
        let events = EventCounter()
        client.onEvent = { _ in events.count += 1 }
        client.startScan()
        for _ in 0..<200 where client.scanResults.isEmpty { await clock.advance(by: .milliseconds(10)) }
        guard let result = client.scanResults.first else {
            throw CLIError(.notFound, "the benchmark device was not found")
        }
        client.connect(id: result.id)
        for _ in 0..<2_000 where !client.atReady { await clock.advance(by: .milliseconds(5)) }
        guard client.atReady else { throw CLIError(.notReady, "the benchmark device did not become ready") }
        await clock.advance(by: .milliseconds(200))  // the MTU exchange is done
        return BenchSetup(clock: clock, environment: environment, client: client, events: events)
    }

    /// Runs one command: what follows starts at the connection event that
    /// brought its answer, where `LinkModel`'s operations start.
    func startAtConnectionEvent() async throws(CLIError) {
        let client = self.client
        do { _ = try await clock.run { try await client.runAtCommand("AT") } } catch {
            throw CLIError.from(error, doing: "The first command")
        }
    }

    func close() async {
        client.teardown()
        environment.shutDown()
        await clock.settle()
    }
}

/// Row 3: the cost of one AT transaction through the client and the simulator.
@MainActor
enum TransactionRow {
    /// A client on an ideal (zero-latency) simulated link, on the real clock:
    /// what each transaction costs is then the SDK's and the simulator's CPU.
    static var idealDevice: XTalkSimulatedDevice {
        var device = XTalkSimulatedDevice(link: .ideal)
        device.firmware.processingDelay = .zero
        return device
    }

    /// A client connected to `device` on the real clock, with the MTU exchange done.
    static func connectRealTime(_ device: XTalkSimulatedDevice = idealDevice) async throws(CLIError)
        -> (XTalkSimulatedEnvironment, XTalkBleClient)
    {
        let environment = XTalkSimulatedEnvironment(devices: [device])
        let client = XTalkBleClient(simulator: environment)
        client.startScan()
        let deadline = ContinuousClock.now + .seconds(5)
        while client.scanResults.isEmpty && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(2))
        }
        guard let result = client.scanResults.first else {
            throw CLIError(.notFound, "the benchmark device was not found")
        }
        client.connect(id: result.id)
        while !client.atReady && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
        let mtu = min(517, max(23, device.link.mtu))
        while environment.peripherals[0].currentMTU != mtu && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(2))
        }
        guard client.atReady else { throw CLIError(.notReady, "the benchmark device did not become ready") }
        return (environment, client)
    }

    /// Runs `count` AT+PING transactions back to back.
    static func ping(_ client: XTalkBleClient, _ count: Int, tag: String) async throws(CLIError) {
        for index in 0..<count {
            let token = tag + String(index % 100_000)
            let lines: [String]
            do { lines = try await client.runAtCommand("AT+PING=" + token) } catch {
                throw CLIError.from(error, doing: "Transaction \(index)")
            }
            guard lines.count == 2, lines[0] == "+PING:" + token else {
                throw CLIError(.failure, "transaction \(index) got someone else's answer: \(lines)")
            }
        }
    }

    static func rows(quick: Bool) async throws(CLIError) -> [BenchRow] {
        let (environment, client) = try await connectRealTime()
        defer {
            client.teardown()
            environment.shutDown()
        }
        let count = quick ? 2_000 : 100_000
        try await ping(client, 500, tag: "w")
        let wallStart = ContinuousClock.now
        let cpuStart = Measure.processCPU()
        try await ping(client, count, tag: "t")
        let wall = Measure.seconds(ContinuousClock.now - wallStart)
        let cpu = Measure.seconds(Measure.processCPU() - cpuStart)
        let perSecond = Double(count) / wall
        let cpuMicros = cpu / Double(count) * 1e6
        let share = cpuMicros / 7_500
        let plainMicros = await PlainAwait.cpuMicros(count)
        return [
            BenchRow(
                figure: "3. AT transactions (AT+PING, zero-latency link)", target: ">= 20000/s",
                measured: String(format: "%.0f/s", perSecond), passed: perSecond >= 20_000,
                values: [("per_second", .double(perSecond)), ("count", .int(count))]),
            BenchRow(
                figure: "3. AT transaction CPU, share of a 7.5 ms interval", target: "<= 0.5 %",
                measured: String(format: "%.1f µs = %.2f %% (plain await %.1f)", cpuMicros, share * 100, plainMicros),
                passed: share <= 0.005,
                values: [
                    ("cpu_us", .double(cpuMicros)), ("share", .double(share)),
                    ("plain_await_us", .double(plainMicros)),
                ]),
        ]
    }
}

/// The naive way for comparison: what the Swift runtime alone charges for one
/// plain awaited result. A main-actor task suspends on a continuation and a
/// main-queue job (as the simulator's reply is) resumes it; the task goes
/// through a global-executor thread before it is back on the main actor, two
/// thread wake-ups. The client's waits prefer the main queue and avoid both
/// (`MainQueueTaskExecutor`), so a whole transaction costs less than this.
@MainActor
private final class PlainAwait {
    private var waiter: CheckedContinuation<Void, Never>?

    private func roundTrip() async {
        await withCheckedContinuation { continuation in
            waiter = continuation
            DispatchQueue.main.async {
                MainActor.assumeIsolated {
                    self.waiter?.resume()
                    self.waiter = nil
                }
            }
        }
    }

    /// CPU µs per round trip, over `count` of them.
    static func cpuMicros(_ count: Int) async -> Double {
        let probe = PlainAwait()
        for _ in 0..<500 { await probe.roundTrip() }
        let start = Measure.processCPU()
        for _ in 0..<count { await probe.roundTrip() }
        return Measure.seconds(Measure.processCPU() - start) / Double(count) * 1e6
    }
}

/// An authenticator over the integration guide's adapter, exactly as the guide
/// writes it (`Seed002Session.swift`, shared with the tests). The simulated
/// devices sign with the development key, so its warning is expected here.
@MainActor
private func guideAuthenticator(_ client: XTalkBleClient) -> XTalkDeviceAuthenticator {
    let authenticator = XTalkDeviceAuthenticator(transport: XTalkBleAuthTransport(ble: client))
    authenticator.logHandler = { _ in }
    return authenticator
}

/// Row 4: authentication on a link with a 15 ms connection interval.
@MainActor
enum AuthRow {
    /// The device of the round-trip rows: the default one, answering at once.
    static var device: XTalkSimulatedDevice {
        var device = XTalkSimulatedDevice()
        device.link.connectionInterval = .milliseconds(15)
        device.firmware.processingDelay = .zero
        return device
    }

    /// The three round trips of a happy-path authentication on `device`, from
    /// its model: `AT+AUTH?`, `AT+CHAL=<nonce>` (the longest reply) and `AT+ID?`.
    static func threeRoundTrips(_ device: XTalkSimulatedDevice) -> Duration {
        let model = LinkModel(device)
        let firmware = device.firmware
        let id = String(format: "%08X", firmware.deviceID)
        return model.atCommand("AT+AUTH?", reply: [firmware.challengeRequired ? "+AUTH:1" : "+AUTH:0", "OK"])
            + model.atCommand(
                "AT+CHAL=" + String(repeating: "0", count: 32),
                reply: ["+CHAL:" + id + "," + String(repeating: "0", count: 128), "OK"])
            + model.atCommand(
                "AT+ID?", reply: ["+ID:" + id + "," + firmware.serialSource.rawValue + "," + firmware.serial, "OK"])
    }

    /// The quiet period that ends a drain after a timed-out command (PROTOCOL.md).
    static let drainQuiet = Duration.milliseconds(150)

    static func rows(quick: Bool, deterministicOnly: Bool) async throws(CLIError) -> [BenchRow] {
        var rows = try await virtualTimeRows()
        if !deterministicOnly { rows += try await cpuRows(quick: quick) }
        return rows
    }

    /// Round trips and time in virtual time: deterministic, so CI gates them.
    /// Each starts at a connection event (after one `AT`), as the model
    /// assumes. Every row authenticates through the integration guide's
    /// adapter (`XTalkBleAuthTransport` of *iOS End-to-End Integration*, verbatim), which starts in
    /// `.plain` whatever the firmware uses.
    static func virtualTimeRows() async throws(CLIError) -> [BenchRow] {
        let device = device
        let trips3 = threeRoundTrips(device)
        // Current (xor) firmware: three round trips, no probe window.
        var setup = try await BenchSetup.connect(device, settleYields: 24)
        let guide = try await measure(setup, guideAuthenticator(setup.client))
        await setup.close()
        // Older (plain) firmware: the first run probes xor first and waits out
        // its fast-probe window; the channel drains until quiet; then the plain
        // probe and the two other commands. (The drain ends between connection
        // events: the plain probe waits for the next one, which the model's
        // first interval of a round trip already covers.) The next run of the
        // same authenticator probes plain first.
        var plain = device
        plain.firmware.encoding = .plain
        setup = try await BenchSetup.connect(plain, settleYields: 24)
        setup.client.setAtEncoding(.plain)
        let authenticator = guideAuthenticator(setup.client)
        let first = try await measure(setup, authenticator)
        // The client (the app's default) back in xor: the authenticator probes what it found.
        let next = try await measure(setup, authenticator) { $0.setAtEncoding(.xor) }
        await setup.close()
        let probeWindow = Duration.milliseconds(XTalkDeviceAuthConfiguration().probeTimeoutMs)
        let firstLimit = probeWindow + drainQuiet + threeRoundTrips(plain)
        let plainTrips3 = threeRoundTrips(plain)
        return [
            BenchRow(
                figure: "4. authentication with the guide's adapter: round trips",
                target: "3 exactly, <= 3 RTT (model)",
                measured: "\(guide.trips) in \(ms(guide.time)) (3 RTT \(ms(trips3)))",
                passed: guide.trips == 3 && guide.time <= trips3, deterministic: true,
                values: [
                    ("round_trips", .int(guide.trips)), ("ms", .double(milliseconds(guide.time))),
                    ("limit_ms", .double(milliseconds(trips3))),
                ]),
            BenchRow(
                figure: "4. authentication, plain (older) firmware, first run", target: "<= probe + drain + 3 RTT",
                measured: "\(ms(first.time)) (limit \(ms(firstLimit)))", passed: first.time <= firstLimit,
                deterministic: true,
                values: [("ms", .double(milliseconds(first.time))), ("limit_ms", .double(milliseconds(firstLimit)))]),
            BenchRow(
                figure: "4. authentication, plain firmware, the same authenticator again",
                target: "3 exactly, <= 3 RTT (model)",
                measured: "\(next.trips) in \(ms(next.time)) (3 RTT \(ms(plainTrips3)))",
                passed: next.trips == 3 && next.time <= plainTrips3, deterministic: true,
                values: [
                    ("round_trips", .int(next.trips)), ("ms", .double(milliseconds(next.time))),
                    ("limit_ms", .double(milliseconds(plainTrips3))),
                ]),
        ]
    }

    /// One authentication from a connection event: the commands the device
    /// processed and the virtual time it took.
    private static func measure(
        _ setup: BenchSetup, _ authenticator: XTalkDeviceAuthenticator,
        prepare: (XTalkBleClient) -> Void = { _ in }
    )
        async throws(CLIError) -> (trips: Int, time: Duration)
    {
        try await setup.startAtConnectionEvent()
        prepare(setup.client)
        let commandsBefore = setup.peripheral.processedCommands.count
        let start = setup.clock.elapsed
        do {
            _ = try await setup.clock.run { try await authenticator.authenticate() }
        } catch {
            throw CLIError.from(error, doing: "Authentication")
        }
        return (setup.peripheral.processedCommands.count - commandsBefore, setup.clock.elapsed - start)
    }

    /// CPU on the real clock: machine-dependent, so not gated by CI.
    static func cpuRows(quick: Bool) async throws(CLIError) -> [BenchRow] {
        let cpu = try await happyPathCPU(quick: quick)
        // Ed25519 verification, on the platform's implementation.
        let verifications = quick ? 200 : 2_000
        let key = try? Ed25519PrivateKey(seed: Array(repeating: 7, count: 32))
        let message = Array("XTALK-AUTH-V1".utf8) + Array(repeating: 1, count: 21)
        let signature = (try? key?.signature(for: message)) ?? []
        let (verified, verifyTime) = Measure.cpu { () -> Int in
            (0..<verifications).filter { _ in (try? key?.publicKey.isValidSignature(signature, for: message)) == true }
                .count
        }
        guard verified == verifications else {
            throw CLIError(
                .failure, "Ed25519: \(verifications - verified) of \(verifications) valid signatures did not verify")
        }
        let verifyMicros = Measure.seconds(verifyTime) / Double(verifications) * 1e6
        return [
            BenchRow(
                figure: "4. authentication, happy path: CPU", target: "<= 1 ms",
                measured: String(format: "%.3f ms (device's too)", cpu), passed: cpu <= 1,
                values: [("cpu_ms", .double(cpu))]),
            BenchRow.info(
                figure: "4. Ed25519 verification", measured: String(format: "%.1f µs", verifyMicros),
                values: [("verify_us", .double(verifyMicros))]),
        ]
    }

    /// Process CPU per happy-path authentication, in ms: on the real clock and
    /// an ideal link, so that only work is measured, not the virtual clock's
    /// bookkeeping. It includes the simulated device's signing, so it bounds
    /// the phone's share from above.
    private static func happyPathCPU(quick: Bool) async throws(CLIError) -> Double {
        let (environment, client) = try await TransactionRow.connectRealTime()
        defer {
            client.teardown()
            environment.shutDown()
        }
        let auth = guideAuthenticator(client)
        let count = quick ? 50 : 1_000
        do {
            for _ in 0..<5 { _ = try await auth.authenticate() }  // loads the crypto library
            let start = Measure.processCPU()
            for _ in 0..<count { _ = try await auth.authenticate() }
            return Measure.seconds(Measure.processCPU() - start) / Double(count) * 1_000
        } catch {
            throw CLIError.from(error, doing: "Authentication")
        }
    }

    private static func ms(_ duration: Duration) -> String { String(format: "%.0f ms", milliseconds(duration)) }
}
