import Foundation
import XTalkBleSdk
import XTalkSimulator

#if canImport(Glibc)
    import Glibc
#endif

/// Row 2: the receive pipeline against the naive way, in one run.
enum ReceivePipelineRow {
    /// A realistic mixed stream, xor-encoded: 80 % `+DI:` lines with full
    /// metadata and 64-byte payloads, 10 % other URCs, 10 % responses.
    static func stream(bytes target: Int) -> (stream: [UInt8], lines: Int, frames: Int) {
        var text: [UInt8] = []
        text.reserveCapacity(target + 512)
        var lines = 0
        var frames = 0
        var counter = 0
        while text.count < target {
            counter += 1
            let line: String
            switch counter % 10 {
            case 8: line = counter % 20 == 8 ? "+CRCERR:cnt=\(counter),len=64,rssi=-101,snr=-3" : "+SENDFIN:OK"
            case 9: line = counter % 20 == 9 ? "+VER:2.1.0" : "OK"
            default:
                let payload = (0..<64).map { UInt8(truncatingIfNeeded: counter &* 31 &+ $0 &* 7) }
                line =
                    "+DI:cnt=\(counter),len=64,slot=\(counter % 8),snr=\(counter % 13 - 4),rssi=-\(60 + counter % 50),"
                    + "lsnr=\(counter % 11),lrssi=-\(70 + counter % 30),"
                    + "rsnr=\(counter % 9),rrssi=-\(80 + counter % 20),txp=14,data="
                    + Hex.encode(payload)
                frames += 1
            }
            text += Array(line.utf8) + [0x0D, 0x0A]
            lines += 1
        }
        return (text.map { $0 ^ 0x5A }, lines, frames)
    }

    /// How typical app code does it, without the SDK, and without a quadratic
    /// rescan: the bytes go into a byte buffer, decoded once as they arrive;
    /// only the new bytes are searched for the line end; each line becomes a
    /// `String` once, is split into fields, and the fields are parsed with
    /// `Int(_:)` and, two hex digits at a time, radix 16. `searched` counts
    /// the bytes looked at for a line end: the stream's length at most (each
    /// byte once), which `BenchTests` holds it to (a rescan from the line start
    /// would be quadratic, and the row's ratio would flatter the SDK).
    static func naive(_ stream: [UInt8], chunkSize: Int) -> (lines: Int, frames: Int, searched: Int) {
        var buffer: [UInt8] = []
        var lineStart = 0
        var scanned = 0
        var lines = 0
        var frames = 0
        var offset = 0
        var searched = 0
        while offset < stream.count {
            let end = min(stream.count, offset + chunkSize)
            for byte in stream[offset..<end] { buffer.append(byte ^ 0x5A) }
            offset = end
            while true {
                let from = scanned
                guard let lineFeed = buffer[from...].firstIndex(of: 0x0A) else {
                    searched += buffer.count - from
                    break
                }
                searched += lineFeed + 1 - from
                var lineEnd = lineFeed
                if lineEnd > lineStart && buffer[lineEnd - 1] == 0x0D { lineEnd -= 1 }
                let line = String(decoding: buffer[lineStart..<lineEnd], as: UTF8.self)
                lineStart = lineFeed + 1
                scanned = lineStart
                guard !line.isEmpty else { continue }
                lines += 1
                if naiveRadioFrame(line) { frames += 1 }
            }
            scanned = buffer.count
            // Drop the consumed lines once they are the larger part (amortised, never quadratic).
            if lineStart > 4_096 && lineStart * 2 > buffer.count {
                buffer.removeFirst(lineStart)
                scanned -= lineStart
                lineStart = 0
            }
        }
        return (lines, frames, searched)
    }

    /// Parses one `+DI:` line the usual way; true for a frame whose payload has its `len`.
    private static func naiveRadioFrame(_ line: String) -> Bool {
        guard line.hasPrefix("+DI:") else { return false }
        var payload: [UInt8] = []
        var fields: [String: Int] = [:]
        for field in line.dropFirst(4).split(separator: ",") {
            let pair = field.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            if pair[0] == "data" {
                let hex = Array(pair[1])
                payload = stride(from: 0, to: hex.count - 1, by: 2).compactMap {
                    UInt8(String(hex[$0...$0 + 1]), radix: 16)
                }
            } else {
                fields[String(pair[0])] = Int(pair[1])
            }
        }
        return !payload.isEmpty && fields["len"] == payload.count
    }

    struct Outcome {
        let chunk: Int
        let megabytesPerSecond: Double
        let linesPerSecond: Double
        let naiveRatio: Double
        let correct: Bool
    }

    /// Measures the SDK's pipeline and the naive one on the same stream.
    static func measure(bytes: Int, chunk: Int, repetitions: Int) -> Outcome {
        let (stream, lines, frames) = stream(bytes: bytes)
        // Warm up both, and check they agree with the generator.
        let sdk = ReceivePipelineBenchmark.run(stream, chunkSize: chunk, encoding: .xor)
        let naiveResult = naive(stream, chunkSize: chunk)
        let correct =
            sdk.lines == lines && sdk.radioFrames == frames && naiveResult.lines == lines
            && naiveResult.frames == frames && naiveResult.searched <= stream.count
        // The best of several runs: a shared machine only ever adds time.
        var sdkTime = Duration.seconds(3600)
        var naiveTime = Duration.seconds(3600)
        for _ in 0..<max(1, repetitions) {
            sdkTime = min(
                sdkTime, Measure.cpu { _ = ReceivePipelineBenchmark.run(stream, chunkSize: chunk, encoding: .xor) }.1)
            naiveTime = min(naiveTime, Measure.cpu { _ = naive(stream, chunkSize: chunk) }.1)
        }
        let seconds = Measure.seconds(sdkTime)
        let naiveSeconds = Measure.seconds(naiveTime)
        let bytesPerSecond = Double(stream.count) / seconds
        return Outcome(
            chunk: chunk, megabytesPerSecond: bytesPerSecond / 1e6, linesPerSecond: Double(lines) / seconds,
            naiveRatio: naiveSeconds / seconds, correct: correct)
    }
}

/// Row 2, CPU: the whole receive path of a real `XTalkBleClient` (backend
/// callbacks, main actor, channel machine, events, observers) while the
/// simulated device streams `+DI:` lines at 1.4 Mbit/s, on the real clock.
/// Process CPU (all threads) over wall time: the simulator's own work
/// (formatting the lines, the link's connection events) and this
/// benchmark's pacing loop are included, so the SDK's share is at most this.
@MainActor
enum StreamCPURow {
    /// BLE 2M PHY: about 1.4 Mbit/s of application data at most.
    nonisolated static let bytesPerSecond = 1_400_000.0 / 8
    /// The link's connection interval.
    static let interval = Duration.microseconds(7_500)
    /// How often the simulated radio hands the device the frames the rate
    /// allows. Every wake-up of this loop is the benchmark's own CPU, counted
    /// in the process's: 50 ms keeps it small (20 a second) while the link
    /// still spreads the frames over its connection events.
    static let pacing = Duration.milliseconds(50)

    struct Outcome {
        let cpuShare: Double
        let achievedBytesPerSecond: Double
        let frames: Int
        /// What the stream lost (frames dropped by the link or the client,
        /// or taken out of order): the figure is then no measure, and the row fails.
        var lost: String?
    }

    /// A link that carries 1.4 Mbit/s (with 20 % to spare) in notifications
    /// of `chunk` bytes, with room in the BLE module for a pacing period's frames.
    static func device(notificationBytes chunk: Int) -> XTalkSimulatedDevice {
        let perEvent = bytesPerSecond * Measure.seconds(interval) * 1.2 / Double(chunk)
        return XTalkSimulatedDevice(
            link: XTalkSimulatedLink(
                mtu: chunk + 3, mtuExchangeDelay: .milliseconds(20), connectionInterval: interval,
                packetsPerConnectionEvent: Int(perEvent.rounded(.up)), connectDelay: .milliseconds(20),
                notificationBufferLimit: 65_536))
    }

    /// `streams` readers of `events` consume every event (the first checks the frames' order).
    static func measure(notificationBytes chunk: Int, seconds: Double, streams: Int = 1) async throws(CLIError)
        -> Outcome
    {
        let (environment, client) = try await TransactionRow.connectRealTime(device(notificationBytes: chunk))
        defer {
            client.teardown()
            environment.shutDown()
        }
        let peripheral = environment.peripherals[0]
        // An app's consumers: the event stream, a callback and an observer.
        let seen = Counters()
        client.onEvent = { event in
            if case .diPayload = event { seen.callbacks += 1 }
        }
        client.observeAtLines { _ in seen.lines += 1 }
        let consumer = Task { @MainActor in
            for await event in client.events {
                guard case .diPayload(_, let meta) = event else { continue }
                if let count = meta.diCnt {
                    if let last = seen.lastCount, count != last + 1 { seen.outOfOrder += 1 }
                    seen.lastCount = count
                }
                seen.streamed += 1
            }
        }
        // More readers of `events`, as an app with several views has.
        let others = (1..<max(1, streams)).map { _ in
            Task { @MainActor in
                for await _ in client.events {}
            }
        }
        defer {
            consumer.cancel()
            for other in others { other.cancel() }
        }
        // The radio hands the device frames as fast as the rate allows; the
        // link notifies them at its connection events.
        let payload = Data((0..<64).map { UInt8($0) })
        let streamStart = ContinuousClock.now
        let bytesAtStart = peripheral.deviceBytesDelivered + peripheral.deviceBytesQueued
        func pace(until end: ContinuousClock.Instant) async {
            while ContinuousClock.now < end {
                let due = bytesAtStart + Int(Measure.seconds(ContinuousClock.now - streamStart) * bytesPerSecond)
                // Bounded: once the link drops (its buffer full: a machine too
                // slow for the rate, such as a sanitizer build), nothing more is
                // queued, and this loop would hold the main actor for good.
                while peripheral.deviceBytesDelivered + peripheral.deviceBytesQueued < due,
                    peripheral.droppedNotificationBytes == 0, ContinuousClock.now < end
                {
                    peripheral.receiveRadioFrame(payload)
                }
                try? await Task.sleep(for: pacing)
            }
        }
        await pace(until: streamStart + .milliseconds(500))  // warm-up
        let start = ContinuousClock.now
        let cpuStart = Measure.processCPU()
        let deliveredStart = peripheral.deviceBytesDelivered
        let framesStart = seen.streamed
        await pace(until: start + .seconds(seconds))
        let cpu = Measure.seconds(Measure.processCPU() - cpuStart)
        let wall = Measure.seconds(ContinuousClock.now - start)
        let delivered = peripheral.deviceBytesDelivered - deliveredStart
        let frames = seen.streamed - framesStart
        var outcome = Outcome(cpuShare: cpu / wall, achievedBytesPerSecond: Double(delivered) / wall, frames: frames)
        // A machine too slow for the rate (a sanitizer build) falls behind and
        // drops: that row fails, saying so, and the other rows still run.
        if peripheral.droppedNotificationBytes != 0 || client.droppedEventCount != 0 || seen.outOfOrder != 0
            || seen.callbacks < seen.streamed || frames == 0
        {
            outcome.lost =
                "lost frames: \(peripheral.droppedNotificationBytes) bytes dropped by the link, "
                + "\(client.droppedEventCount) events dropped, \(seen.outOfOrder) out of order"
        }
        return outcome
    }

    @MainActor
    private final class Counters {
        var callbacks = 0
        var lines = 0
        var streamed = 0
        var lastCount: Int?
        var outOfOrder = 0
    }
}

/// The same events at the same rate through plain `AsyncStream`s with no SDK
/// and no simulator: what Swift's runtime alone costs to hand them to
/// main-actor readers. `AsyncStream`'s iterator runs its producer off the
/// actor, so each element read from the main actor takes a hop there and
/// back; an SDK stream cannot cost less than this.
enum AsyncStreamFloorRow {
    /// A `+DI:` line carrying a 64-byte payload, as the simulated radio
    /// writes it: about 55 bytes of fields, 128 hex digits, CR LF.
    static let lineBytes = 185.0
    /// Each frame is two events: its `.atLine` and its `.diPayload`.
    static let eventsPerFrame = 2.0

    /// Process CPU share while `streams` readers take every event.
    @MainActor
    static func measure(streams: Int, seconds: Double) async -> Double {
        let framesPerSecond = StreamCPURow.bytesPerSecond / lineBytes
        let perInterval = framesPerSecond * eventsPerFrame * Measure.seconds(StreamCPURow.interval)
        let pairs = (0..<streams).map { _ in AsyncStream<XTalkBleEvent>.makeStream() }
        let readers = pairs.map { pair in
            Task { @MainActor in
                var count = 0
                for await _ in pair.stream { count += 1 }
                return count
            }
        }
        let event = XTalkBleEvent.atLine("+DI:cnt=1,len=64,slot=0,snr=0,rssi=-80,txp=20,data=00")
        // One wake-up per connection interval, on the main queue (the cheapest
        // real-clock wake-up there is), carrying that interval's events.
        let timer = DispatchSource.makeTimerSource(queue: .main)
        var owed = 0.0
        timer.setEventHandler {
            owed += perInterval
            while owed >= 1 {
                for pair in pairs { pair.continuation.yield(event) }
                owed -= 1
            }
        }
        let interval = Int(StreamCPURow.interval.components.attoseconds / 1_000_000_000)
        timer.schedule(deadline: .now(), repeating: .nanoseconds(interval), leeway: .nanoseconds(0))
        timer.activate()
        try? await Task.sleep(for: .milliseconds(500))  // warm-up
        let start = ContinuousClock.now
        let cpuStart = Measure.processCPU()
        try? await Task.sleep(for: .seconds(seconds))
        let cpu = Measure.seconds(Measure.processCPU() - cpuStart)
        let wall = Measure.seconds(ContinuousClock.now - start)
        timer.cancel()
        for pair in pairs { pair.continuation.finish() }
        for reader in readers { _ = await reader.value }
        return cpu / wall
    }

    /// The least a reader can cost to take one element from an `AsyncStream`
    /// on this machine: every element already buffered (no waiting, no
    /// wake-up), read by a task off any actor (no hop), nothing else done;
    /// the cheaper of the two ways to make a stream (an unfolding closure,
    /// as the SDK's `events`, or a continuation's buffer). Thread CPU per element.
    static func elementCost(elements: Int) async -> Duration {
        final class Source: @unchecked Sendable {
            private let lock = NSLock()
            private var next = 0
            private let end: Int
            init(end: Int) { self.end = end }
            func take() -> Int? {
                lock.withLock {
                    guard next < end else { return nil }
                    next += 1
                    return next
                }
            }
        }
        let source = Source(end: elements)
        let unfolding = AsyncStream<Int>(unfolding: { source.take() })
        let (buffered, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingOldest(elements))
        for element in 0..<elements { continuation.yield(element) }
        continuation.finish()
        var costs: [Duration] = []
        for stream in [unfolding, buffered] {
            let (count, cpu) = await Task.detached {
                // This thread's clock, unless the task moved to another
                // thread (then the process's, which can only add).
                let thread = pthread_self()
                let start = (Measure.threadCPU(), Measure.processCPU())
                var count = 0
                for await _ in stream { count += 1 }
                let stayed = pthread_equal(thread, pthread_self()) != 0
                return (count, stayed ? Measure.threadCPU() - start.0 : Measure.processCPU() - start.1)
            }.value
            costs.append(count == elements ? cpu / elements : .seconds(1))
        }
        return costs.min() ?? .zero
    }
}
