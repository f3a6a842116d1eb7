import Foundation
import XTalkBleSdk
import XTalkSimulator

/// Row 5: memory stays bounded.
@MainActor
enum MemoryRow {
    static func rows(quick: Bool) async throws(CLIError) -> [BenchRow] {
        var rows: [BenchRow] = []
        // 5a. Radio frames nobody reads from an `events` stream the app holds.
        var device = XTalkSimulatedDevice(link: .ideal)
        device.firmware.processingDelay = .zero
        let setup = try await BenchSetup.connect(device, settleYields: 1, together: true)
        let unread = setup.client.events
        let base = setup.events.count
        let frames = quick ? 20_000 : 1_000_000
        let payload = Data(repeating: 0x42, count: 16)
        func burst(_ count: Int) async {
            var sent = 0
            while sent < count {
                // Small bursts: the simulated BLE module's buffer would drop a big one.
                for _ in 0..<min(50, count - sent) { setup.peripheral.receiveRadioFrame(payload) }
                sent += min(50, count - sent)
                await setup.clock.advance()
            }
        }
        await burst(10_000)  // warm-up: the stream's buffer fills
        let before = Measure.residentBytes()
        var peak = before
        var sent = 0
        while sent < frames {
            let step = min(10_000, frames - sent)
            await burst(step)
            sent += step
            peak = max(peak, Measure.residentBytes())
        }
        let growth = Double(peak - before) / 1_048_576
        let dropped = setup.client.droppedEventCount
        let bufferLimit = XTalkBleClientOptions().eventBufferLimit
        let yielded = setup.events.count - base
        let countsAgree = dropped == yielded - bufferLimit
        withExtendedLifetime(unread) {}
        await setup.close()
        rows.append(
            BenchRow(
                figure: "5. \(frames) +DI: frames, events never read", target: "<= 16 MB, drops counted",
                measured: String(format: "+%.1f MB; %d events, %d dropped", growth, yielded, dropped),
                passed: growth <= 16 && countsAgree,
                values: [
                    ("frames", .int(frames)), ("rss_growth_mb", .double(growth)), ("dropped", .int(dropped)),
                    ("events", .int(yielded)),
                ]))

        // 5b. Transactions leave nothing behind.
        var quickDevice = XTalkSimulatedDevice(link: .ideal)
        quickDevice.firmware.processingDelay = .zero
        let pinging = try await BenchSetup.connect(quickDevice, settleYields: 2, together: true)
        let client = pinging.client
        let transactions = quick ? 20_000 : 1_000_000
        let warmUp = min(20_000, transactions / 5)
        func ping(_ count: Int) async throws(CLIError) {
            do {
                try await pinging.clock.run(limit: .seconds(86_400)) {
                    for index in 0..<count { _ = try await client.runAtCommand("AT+PING=m\(index % 1_000)") }
                }
            } catch {
                throw CLIError.from(error, doing: "The memory benchmark")
            }
        }
        try await ping(warmUp)
        let afterWarmUp = Measure.residentBytes()
        try await ping(transactions - warmUp)
        let after = Measure.residentBytes()
        await pinging.close()
        let drift = Double(after - afterWarmUp) / 1_048_576
        rows.append(
            BenchRow(
                figure: "5. \(transactions) AT transactions: RSS drift", target: "<= 2 MB after warm-up",
                measured: String(format: "%+.2f MB", drift), passed: drift <= 2,
                values: [("transactions", .int(transactions)), ("rss_drift_mb", .double(drift))]))
        return rows
    }
}

/// Row 6: eight clients with eight devices in one process, on the real clock.
@MainActor
enum ScaleRow {
    struct Outcome {
        let p99: Duration
        let crossTalk: Bool
    }

    /// Every client's device: the default one, on a 15 ms connection interval.
    static var device: XTalkSimulatedDevice {
        var device = XTalkSimulatedDevice()
        device.link.connectionInterval = .milliseconds(15)
        device.link.connectDelay = .milliseconds(20)
        device.link.mtuExchangeDelay = .milliseconds(20)
        return device
    }

    /// `count` clients, each with its own device streaming 200 frames/s,
    /// each pinging `pings` times; returns the p99 ping round trip.
    static func run(clients count: Int, pings: Int) async throws(CLIError) -> Outcome {
        var sessions: [(XTalkSimulatedEnvironment, XTalkBleClient)] = []
        for index in 0..<count {
            var device = device
            device.name = "xTalk-S\(index)"
            device.address = String(format: "C0:FF:EE:00:01:%02X", index)
            let environment = XTalkSimulatedEnvironment(devices: [device], seed: UInt64(index + 1))
            sessions.append((environment, XTalkBleClient(simulator: environment)))
        }
        defer {
            for (environment, client) in sessions {
                client.teardown()
                environment.shutDown()
            }
        }
        // Connect all.
        for (_, client) in sessions { client.startScan() }
        try await waitFor("the devices to be found", seconds: 5) { sessions.allSatisfy { !$0.1.scanResults.isEmpty } }
        for (_, client) in sessions {
            guard let result = client.scanResults.first else { continue }
            client.connect(id: result.id)
        }
        try await waitFor("the devices to be ready", seconds: 10) { sessions.allSatisfy { $0.1.atReady } }
        // Streams on, each client watching its own frame counter.
        var counters = Array(repeating: [Int](), count: count)
        for (index, (environment, client)) in sessions.enumerated() {
            client.onEvent = { event in
                if case .diPayload(_, let meta) = event, let cnt = meta.diCnt { counters[index].append(cnt) }
            }
            environment.peripherals[0].startRadioTraffic(every: .milliseconds(5), payloadSize: 32)
        }
        // Everyone pings at once.
        var tasks: [Task<[Duration], any Error>] = []
        for (index, (_, client)) in sessions.enumerated() {
            tasks.append(
                Task { @MainActor in
                    // One untimed ping: the timed ones then start at a connection event, as the model's do.
                    _ = try await client.runAtCommand("AT")
                    var times: [Duration] = []
                    for sequence in 0..<pings {
                        let start = ContinuousClock.now
                        let token = "c\(index)s\(sequence)"
                        let lines = try await client.runAtCommand("AT+PING=" + token)
                        guard lines == ["+PING:" + token, "OK"] else {
                            throw CLIError(.failure, "cross-talk: \(lines)")
                        }
                        times.append(ContinuousClock.now - start)
                    }
                    return times
                })
        }
        var all: [Duration] = []
        for task in tasks {
            do { all += try await task.value } catch { throw CLIError.from(error, doing: "The scale benchmark") }
        }
        let sorted = all.sorted()
        let p99 = sorted[min(sorted.count - 1, Int((0.99 * Double(sorted.count)).rounded(.up)) - 1)]
        // Each client's frames are its own device's, in order, none lost.
        let consistent = counters.allSatisfy { list in
            !list.isEmpty && zip(list, list.dropFirst()).allSatisfy { $1 == $0 + 1 }
        }
        return Outcome(p99: p99, crossTalk: !consistent)
    }

    private static func waitFor(_ what: String, seconds: Int, _ condition: () -> Bool) async throws(CLIError) {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                throw CLIError(.timeout, "the scale benchmark timed out waiting for \(what)")
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    static func rows(quick: Bool) async throws(CLIError) -> [BenchRow] {
        let pings = quick ? 10 : 60
        let single = try await run(clients: 1, pings: pings)
        let eight = try await run(clients: 8, pings: pings)
        // From the design: a ping's round trip on this link (`LinkModel`;
        // back-to-back pings start at a connection event), plus one
        // connection interval: a ping that misses its event by any delay of
        // the process waits one whole interval for the next.
        let roundTrip = LinkModel(device).atCommand("AT+PING=c0s0", reply: ["+PING:c0s0", "OK"])
        let limit = roundTrip + device.link.connectionInterval
        return [
            BenchRow(
                figure: "6. 8 clients × 8 devices, 200 frames/s each: p99 ping",
                target: "<= RTT + 1 CI (\(Int(milliseconds(limit))) ms)",
                measured: String(
                    format: "%.1f ms (1 client %.1f ms)", milliseconds(eight.p99), milliseconds(single.p99)),
                passed: eight.p99 <= limit && !eight.crossTalk && !single.crossTalk,
                values: [
                    ("p99_ms", .double(milliseconds(eight.p99))), ("single_p99_ms", .double(milliseconds(single.p99))),
                    ("limit_ms", .double(milliseconds(limit))), ("cross_talk", .bool(eight.crossTalk)),
                ])
        ]
    }
}
