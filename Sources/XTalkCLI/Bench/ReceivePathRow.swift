import Foundation
import XTalkBleSdk
import XTalkSimulator
import XTalkSupport

/// Row 2, the SDK's own share: what a real `XTalkBleClient` spends on each
/// byte of `+DI:` notifications, from the backend's callback to readers
/// taking every event from their own `events` stream.
///
/// The client is connected to a simulated device as an app's is; then the
/// benchmark hands it notifications at the backend seam, as CoreBluetooth's
/// and BlueZ's drivers do (through an `InterceptingBackend`), in rounds of `round` frames, and waits
/// until every reader took every event. The process's CPU time over the
/// rounds (every thread: the main actor, the readers) divided by the bytes
/// is the cost per byte; times 1.4 Mbit/s, the share of a core.
///
/// Counted: the client's work for each notification, each reader's work for
/// each event, and the wake-up of a waiting reader (once per notification
/// that brings it events). Not counted: the simulated device and link (the
/// notifications are made before the rounds), and the per-element hop that
/// Swift's `AsyncStream` costs a reader on the main actor (the readers run
/// off it; the comparison row above measures that hop, the process rows
/// count it with the simulator's real-clock wake-ups).
@MainActor
enum ReceivePathRow {
    /// Frames per round: one round is one main-actor turn of notifications,
    /// at most `eventBufferLimit` (1,024) events per stream, two per frame.
    static let round = 300

    struct Outcome {
        let cpuShare: Double
        let microsecondsPerKilobyte: Double
        let frames: Int
        /// Events each reader took in the measured rounds.
        let eventsPerReader: Int
    }

    /// One reader's count, behind its own lock (readers never contend with each other).
    final class Reader: @unchecked Sendable {
        private let lock = NSLock()
        private var taken = 0
        private var frames = 0
        private var lastCount: Int?
        private var outOfOrder = 0
        private var target = Int.max
        private var waiter: CheckedContinuation<Void, Never>?

        func take(_ event: XTalkBleEvent) {
            let resume: CheckedContinuation<Void, Never>? = lock.withLock {
                taken += 1
                if case .diPayload(_, let meta) = event {
                    frames += 1
                    if let count = meta.diCnt {
                        if let last = lastCount, count != last + 1 { outOfOrder += 1 }
                        lastCount = count
                    }
                }
                guard taken >= target, let waiter else { return nil }
                self.waiter = nil
                return waiter
            }
            resume?.resume()
        }

        /// Returns once this reader has taken `count` events.
        func wait(untilTaken count: Int) async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done: Bool = lock.withLock {
                    guard taken < count else { return true }
                    target = count
                    waiter = continuation
                    return false
                }
                if done { continuation.resume() }
            }
        }

        var counts: (taken: Int, frames: Int, outOfOrder: Int) { lock.withLock { (taken, frames, outOfOrder) } }
    }

    /// `count` `+DI:` lines for 64-byte payloads, numbered from `first`, as
    /// the simulated radio writes them (about 185 bytes each), encoded.
    static func frames(_ count: Int, from first: Int, encoding: XTalkAtEncoding) -> [UInt8] {
        var bytes: [UInt8] = []
        for counter in first..<(first + count) {
            let payload = (0..<64).map { UInt8(truncatingIfNeeded: counter &* 31 &+ $0 &* 7) }
            let line =
                "+DI:cnt=\(counter),len=64,slot=\(counter % 8),snr=\(counter % 18 - 5),rssi=-\(60 + counter % 51),"
                + "txp=20,data=" + Hex.encode(payload) + "\r\n"
            bytes += Array(line.utf8)
        }
        return encoding == .xor ? bytes.map { $0 ^ 0x5A } : bytes
    }

    /// `readers` readers of `events` take every event of `total` frames
    /// (after a warm-up), notified in `chunk`-byte notifications.
    static func measure(notificationBytes chunk: Int, frames total: Int, readers count: Int) async throws(CLIError)
        -> Outcome
    {
        let device = XTalkSimulatedDevice(
            link: XTalkSimulatedLink(
                mtu: chunk + 3, mtuExchangeDelay: .milliseconds(20), connectionInterval: StreamCPURow.interval,
                connectDelay: .milliseconds(20)))
        // The simulated central with a tap: everything passes both ways, and
        // the benchmark learns where the device's notifications come from
        // (its passthrough TX), to hand the client more as a platform driver does.
        var tapped: InterceptingBackend?
        var notifier: (peripheral: UUID, characteristic: BleCharacteristicRef)?
        let setup = try await BenchSetup.connect(device, settleYields: 1, together: true) { environment in
            let tap = InterceptingBackend(environment.central)
            tap.onEvent = { event in
                if case .valueUpdated(let peripheral, let characteristic, _, nil) = event {
                    notifier = (peripheral, characteristic)
                }
            }
            tapped = tap
            return XTalkBleClient(backend: tap, keepingAlive: environment)
        }
        let client = setup.client
        defer {
            client.teardown()
            setup.environment.shutDown()
        }
        let yielded = setup.events
        // One command, so that the device has notified once (the tap learns from where).
        try await setup.startAtConnectionEvent()
        guard let tap = tapped, let notifier, let handler = tap.eventHandler else {
            throw CLIError(.failure, "the benchmark device never notified")
        }
        let readers = (0..<count).map { _ in Reader() }
        let tasks = readers.map { reader in
            let stream = client.events
            return Task.detached {
                for await event in stream { reader.take(event) }
            }
        }
        let base = yielded.count
        let encoding = client.atEncoding
        // Prepared before, so that making them is not measured.
        func rounds(_ frameCount: Int, from first: Int) -> [[Data]] {
            stride(from: 0, to: frameCount, by: round).map { start in
                let bytes = frames(min(round, frameCount - start), from: first + start, encoding: encoding)
                return stride(from: 0, to: bytes.count, by: chunk).map {
                    Data(bytes[$0..<min(bytes.count, $0 + chunk)])
                }
            }
        }
        let warmUp = min(3_000, total)
        let warmUpRounds = rounds(warmUp, from: 1)
        let measuredRounds = rounds(total, from: 1 + warmUp)
        var cpu = Duration.zero
        var bytes = 0
        var eventsStart = base
        for (index, notifications) in (warmUpRounds + measuredRounds).enumerated() {
            if index == warmUpRounds.count {
                cpu = .zero
                bytes = 0
                eventsStart = yielded.count
            }
            let start = Measure.processCPU()
            for value in notifications {
                handler(
                    .valueUpdated(
                        peripheral: notifier.peripheral, characteristic: notifier.characteristic, value: value,
                        error: nil))
            }
            for reader in readers { await reader.wait(untilTaken: yielded.count - base) }
            cpu += Measure.processCPU() - start
            bytes += notifications.reduce(0) { $0 + $1.count }
        }
        let measuredEvents = yielded.count - eventsStart
        let expected = yielded.count - base
        let dropped = client.droppedEventCount
        client.teardown()  // ends the streams
        for task in tasks { await task.value }
        // Counted strictly: every reader took every event, and every frame in order.
        let frameTotal = warmUp + total
        for reader in readers {
            let counts = reader.counts
            guard counts.taken == expected, counts.frames == frameTotal, counts.outOfOrder == 0, dropped == 0 else {
                throw CLIError(
                    .failure,
                    "a reader did not take every event: \(counts.taken) of \(expected) events, \(counts.frames) of "
                        + "\(frameTotal) frames, \(counts.outOfOrder) out of order, \(dropped) dropped")
            }
        }
        guard measuredEvents == 2 * total else {
            throw CLIError(.failure, "the client delivered \(measuredEvents) events for \(total) frames, not two each")
        }
        let perByte = Measure.seconds(cpu) / Double(bytes)
        return Outcome(
            cpuShare: perByte * StreamCPURow.bytesPerSecond, microsecondsPerKilobyte: perByte * 1e9, frames: total,
            eventsPerReader: measuredEvents)
    }
}
