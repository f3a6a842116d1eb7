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
    static func connect(_ device: XTalkSimulatedDevice, settleYields: Int, together: Bool = false) async throws(CLIError) -> BenchSetup {
        let clock = XTalkVirtualClock(settleYields: settleYields, firesInstantTogether: together)
        let environment = XTalkSimulatedEnvironment(devices: [device], clock: clock)
        let client = XTalkBleClient(simulator: environment)
        let events = EventCounter()
        client.onEvent = { _ in events.count += 1 }
        client.startScan()
        for _ in 0..<200 where client.scanResults.isEmpty { await clock.advance(by: .milliseconds(10)) }
        guard let result = client.scanResults.first else { throw CLIError(.notFound, "the benchmark device was not found") }
        client.connect(id: result.id)
        for _ in 0..<2_000 where !client.atReady { await clock.advance(by: .milliseconds(5)) }
        guard client.atReady else { throw CLIError(.notReady, "the benchmark device did not become ready") }
        await clock.advance(by: .milliseconds(200))  // the MTU exchange is done
        return BenchSetup(clock: clock, environment: environment, client: client, events: events)
    }

    func close() async {
        client.teardown()
        environment.shutDown()
        await clock.settle()
    }
}

/// Row 1: the link's physical limit.
@MainActor
enum LinkRow {
    /// `AT+SEND=` with a 240-byte payload, xor-encoded: 490 bytes on the wire.
    static let line: [UInt8] = Array(("AT+SEND=" + String(repeating: "A5", count: 240) + "\r\n").utf8).map { $0 ^ 0x5A }

    /// Pushes `count` lines through the write pump and returns achieved time
    /// over the theoretical minimum (1 = the limit).
    static func measure(mtu: Int, packetsPerEvent: Int, lines count: Int) async throws(CLIError) -> (ratio: Double, bytes: Int) {
        let interval = Duration.milliseconds(15)
        var device = XTalkSimulatedDevice()
        device.link = XTalkSimulatedLink(mtu: mtu, mtuExchangeDelay: .milliseconds(20), connectionInterval: interval,
                                         packetsPerConnectionEvent: packetsPerEvent, connectDelay: .milliseconds(20))
        let setup = try await BenchSetup.connect(device, settleYields: 4)
        let total = line.count * count
        for _ in 0..<count {
            do { try setup.client.writeThroughPump(line) } catch { throw CLIError.from(error, doing: "Writing") }
        }
        while setup.peripheral.hostBytesDelivered < total {
            await setup.clock.advance(by: interval)
        }
        guard let window = setup.peripheral.hostDeliveryWindow else { throw CLIError(.failure, "nothing was delivered") }
        // Connection events spanned: the first one counts whole.
        let achieved = window.last - window.first + interval
        let events = (Double(total) / Double(mtu - 3) / Double(packetsPerEvent)).rounded(.up)
        let theoretical = interval * Int(events)
        await setup.close()
        return (Measure.seconds(theoretical) / Measure.seconds(achieved), total)
    }

    static func rows(quick: Bool) async throws(CLIError) -> [BenchRow] {
        var rows: [BenchRow] = []
        let lines = quick ? 16 : Int((65_536.0 / Double(line.count)).rounded(.up))
        for mtu in [23, 185, 247] {
            for packetsPerEvent in [4, 6] {
                for (label, count) in [("\(lines * line.count / 1_024) KiB", lines), ("1 max-size command", 1)] {
                    let (ratio, bytes) = try await measure(mtu: mtu, packetsPerEvent: packetsPerEvent, lines: count)
                    rows.append(BenchRow(
                        figure: "1. link, MTU \(mtu), \(packetsPerEvent)/event, \(label)", target: ">= 0.95 of the limit",
                        measured: String(format: "%.3f of the limit", ratio), passed: ratio >= 0.95,
                        values: [("mtu", .int(mtu)), ("packets_per_event", .int(packetsPerEvent)), ("bytes", .int(bytes)),
                                 ("ratio", .double(ratio))]))
                }
            }
        }
        return rows
    }
}

/// Row 3: the cost of one AT transaction through the client and the simulator.
@MainActor
enum TransactionRow {
    /// A client on an ideal (zero-latency) simulated link, on the real clock:
    /// what each transaction costs is then the SDK's and the simulator's CPU.
    static func connectRealTime() async throws(CLIError) -> (XTalkSimulatedEnvironment, XTalkBleClient) {
        var device = XTalkSimulatedDevice(link: .ideal)
        device.firmware.processingDelay = .zero
        let environment = XTalkSimulatedEnvironment(devices: [device])
        let client = XTalkBleClient(simulator: environment)
        client.startScan()
        let deadline = ContinuousClock.now + .seconds(5)
        while client.scanResults.isEmpty && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
        guard let result = client.scanResults.first else { throw CLIError(.notFound, "the benchmark device was not found") }
        client.connect(id: result.id)
        while !client.atReady && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
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
            BenchRow(figure: "3. AT transactions (AT+PING, zero-latency link)", target: ">= 20000/s",
                     measured: String(format: "%.0f/s", perSecond), passed: perSecond >= 20_000,
                     values: [("per_second", .double(perSecond)), ("count", .int(count))]),
            BenchRow(figure: "3. AT transaction CPU, share of a 7.5 ms interval", target: "<= 0.5 %",
                     measured: String(format: "%.1f µs = %.2f %% (plain await %.1f)", cpuMicros, share * 100, plainMicros),
                     passed: share <= 0.005,
                     values: [("cpu_us", .double(cpuMicros)), ("share", .double(share)),
                              ("plain_await_us", .double(plainMicros))]),
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

/// The authentication transport of the integration guide, for the benchmark.
@MainActor
private func authenticator(_ client: XTalkBleClient, starting encoding: DeviceAuthAtEncoding) -> XTalkDeviceAuthenticator {
    let transport = ClientAuthTransport(ble: client)
    transport.setAtEncoding(encoding)
    return XTalkDeviceAuthenticator(transport: transport)
}

/// Row 4: authentication on a link with a 30 ms round trip.
@MainActor
enum AuthRow {
    static func rows(quick: Bool) async throws(CLIError) -> [BenchRow] {
        var device = XTalkSimulatedDevice()
        device.link.connectionInterval = .milliseconds(15)
        device.firmware.processingDelay = .zero
        // Happy path: the transport already matches the firmware.
        var setup = try await BenchSetup.connect(device, settleYields: 24)
        let rtt = try await roundTrip(setup)
        let happyAuth = authenticator(setup.client, starting: .xor)
        let commandsBefore = setup.peripheral.processedCommands.count
        var start = setup.clock.elapsed
        do {
            _ = try await setup.clock.run { try await happyAuth.authenticate() }
        } catch {
            throw CLIError.from(error, doing: "Authentication")
        }
        let happy = setup.clock.elapsed - start
        let trips = setup.peripheral.processedCommands.count - commandsBefore
        await setup.close()
        // Wrong encoding: the transport starts in plain, the firmware is xor.
        setup = try await BenchSetup.connect(device, settleYields: 24)
        let wrongAuth = authenticator(setup.client, starting: .plain)
        start = setup.clock.elapsed
        do {
            _ = try await setup.clock.run { try await wrongAuth.authenticate() }
        } catch {
            throw CLIError.from(error, doing: "Authentication")
        }
        let wrong = setup.clock.elapsed - start
        await setup.close()
        let cpu = try await happyPathCPU(quick: quick)
        let strictWindow = Duration.milliseconds(XTalkDeviceAuthConfiguration().strictProbeTimeoutMs)
        let wrongLimit = strictWindow + rtt * 3
        // Ed25519 verification, on the platform's implementation.
        let verifications = quick ? 200 : 2_000
        let key = try? Ed25519PrivateKey(seed: Array(repeating: 7, count: 32))
        let message = Array("XTALK-AUTH-V1".utf8) + Array(repeating: 1, count: 21)
        let signature = (try? key?.signature(for: message)) ?? []
        let (verified, verifyTime) = Measure.cpu { () -> Int in
            (0..<verifications).filter { _ in (try? key?.publicKey.isValidSignature(signature, for: message)) == true }.count
        }
        let verifyMicros = Measure.seconds(verifyTime) / Double(verifications) * 1e6
        return [
            BenchRow(figure: "4. authentication, happy path: round trips", target: "exactly 3",
                     measured: "\(trips) in \(ms(happy)) (RTT \(ms(rtt)))", passed: trips == 3 && happy <= rtt * 3 + .milliseconds(15),
                     values: [("round_trips", .int(trips)), ("ms", .double(milliseconds(happy)))]),
            BenchRow(figure: "4. authentication, happy path: CPU", target: "<= 1 ms",
                     measured: String(format: "%.3f ms (device's too)", cpu), passed: cpu <= 1,
                     values: [("cpu_ms", .double(cpu))]),
            BenchRow(figure: "4. authentication, wrong starting encoding", target: "<= strict window + 3 RTT",
                     measured: "\(ms(wrong)) (limit \(ms(wrongLimit)))", passed: wrong <= wrongLimit,
                     values: [("ms", .double(milliseconds(wrong))), ("limit_ms", .double(milliseconds(wrongLimit)))]),
            BenchRow(figure: "4. Ed25519 verification", target: "reported",
                     measured: String(format: "%.1f µs", verifyMicros), passed: verified == verifications,
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
        let auth = authenticator(client, starting: .xor)
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

    /// One AT round trip on this link (averaged over a few).
    private static func roundTrip(_ setup: BenchSetup) async throws(CLIError) -> Duration {
        let client = setup.client
        let start = setup.clock.elapsed
        do {
            _ = try await setup.clock.run { for _ in 0..<4 { _ = try await client.runAtCommand("AT") } }
        } catch {
            throw CLIError.from(error, doing: "Measuring the round trip")
        }
        return (setup.clock.elapsed - start) / 4
    }

    private static func ms(_ duration: Duration) -> String { String(format: "%.0f ms", milliseconds(duration)) }
}
