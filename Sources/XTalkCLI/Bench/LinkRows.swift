import Foundation
import XTalkBleSdk
import XTalkSimulator

/// The best time the simulated device's design allows for operations through
/// the one serialized AT channel, computed from the device's model alone
/// (`XTalkSimulatedLink`, `XTalkSimulatedFirmware`), never from a measurement.
///
/// The model: data moves only at connection events, one every `interval` on
/// a fixed grid, at most `packetsPerConnectionEvent` packets of MTU − 3 bytes
/// per direction per event. Host → device, a packet also needs a
/// write-without-response credit, and a credit freed during an event can be
/// used at the next one at the earliest, so at most min(packets per event,
/// credits) packets go up per event. An operation starts when the previous
/// one's last line has arrived (at an event), so its command goes out from
/// the next event on. Once the device has the whole line it answers after
/// `processingDelay`; an RF send's `OK` starts the radio, whose
/// `+SENDFIN:` comes `airtimeBase + airtimePerByte × payload` later. Answers
/// leave at the first event at or after they are written (never the event
/// that brought the command: the device was still receiving then), packed
/// into notifications of MTU − 3 bytes. The operation ends at the event that
/// delivers the last byte of its final line.
///
/// So one operation takes, in connection intervals:
///   ceil(ceil(command bytes / (MTU − 3)) / min(packets per event, credits))   the command
/// + the events until each answer can leave (processing, airtime)              the device
/// + ceil(answer bytes / (MTU − 3) / packets per event) − 1 more per answer    the answer
/// which is what `operation(commandBytes:outputs:)` steps through.
struct LinkModel {
    let interval: Int64  // nanoseconds, as every time below
    let bytesPerPacket: Int
    let uplinkPacketsPerEvent: Int
    let downlinkPacketsPerEvent: Int
    let processing: Int64
    let airtimeBase: Int64
    let airtimePerByte: Int64

    init(_ device: XTalkSimulatedDevice) {
        let link = device.link
        interval = Self.nanoseconds(link.connectionInterval)
        bytesPerPacket = min(517, max(23, link.mtu)) - 3
        downlinkPacketsPerEvent = max(1, link.packetsPerConnectionEvent)
        uplinkPacketsPerEvent = min(downlinkPacketsPerEvent, max(1, link.writeWithoutResponseCredits))
        processing = Self.nanoseconds(device.firmware.processingDelay)
        airtimeBase = Self.nanoseconds(device.firmware.airtimeBase)
        airtimePerByte = Self.nanoseconds(device.firmware.airtimePerByte)
    }

    /// `runAtCommand(command)` answered by `reply` (final result code included).
    func atCommand(_ command: String, reply: [String]) -> Duration {
        operation(
            commandBytes: command.utf8.count + 2,
            outputs: [(processing, reply.reduce(0) { $0 + $1.utf8.count + 2 })])
    }

    /// `sendRfPayload` of `payload` bytes: `AT+SEND=<hex>`, `OK`, then `+SENDFIN:OK` after the airtime.
    func rfSend(payload: Int) -> Duration {
        let airtime = airtimeBase + airtimePerByte * Int64(payload)
        return operation(
            commandBytes: "AT+SEND=".utf8.count + 2 * payload + 2,
            outputs: [(processing, "OK".utf8.count + 2), (processing + airtime, "+SENDFIN:OK".utf8.count + 2)])
    }

    /// One operation starting at a connection event: the command's bytes go
    /// up, then each output (written `after` the command's last byte reached
    /// the device) comes down; returns the time to the last byte.
    func operation(commandBytes: Int, outputs: [(after: Int64, bytes: Int)]) -> Duration {
        let packets = (commandBytes + bytesPerPacket - 1) / bytesPerPacket
        let received = interval * Int64((packets + uplinkPacketsPerEvent - 1) / uplinkPacketsPerEvent)
        var lastEvent = received
        var waiting = 0
        var next = 0
        let pending = outputs.map { (at: received + $0.after, bytes: $0.bytes) }
        while next < pending.count || waiting > 0 {
            // Idle: the first event at or after the next output; never two events at one instant.
            var event = lastEvent + interval
            if waiting == 0 { event = max(event, (pending[next].at + interval - 1) / interval * interval) }
            while next < pending.count && pending[next].at <= event {
                waiting += pending[next].bytes
                next += 1
            }
            waiting -= min(waiting, downlinkPacketsPerEvent * bytesPerPacket)
            lastEvent = event
        }
        return .nanoseconds(lastEvent)
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }
}

/// Row 1: the public API against the link's limit, in virtual time.
@MainActor
enum LinkRow {
    /// One link configuration of the rows.
    struct Configuration {
        let mtu: Int
        let packetsPerEvent: Int
        let credits: Int
        var interval = Duration.milliseconds(15)
        /// One in this many "ready to write" callbacks never arrives.
        var lostReadyCallbacksOneIn: Int?

        var device: XTalkSimulatedDevice {
            var device = XTalkSimulatedDevice()
            device.link = XTalkSimulatedLink(
                mtu: mtu, mtuExchangeDelay: .milliseconds(20), connectionInterval: interval,
                packetsPerConnectionEvent: packetsPerEvent,
                writeWithoutResponseCredits: credits, connectDelay: .milliseconds(20),
                lostReadyCallbacksOneIn: lostReadyCallbacksOneIn)
            return device
        }

        var label: String {
            String(
                format: "%g ms, MTU %d, %d/event, %d credit%@", milliseconds(interval), mtu, packetsPerEvent, credits,
                credits == 1 ? "" : "s")
                + (lostReadyCallbacksOneIn.map { ", 1 in \($0) ready callbacks lost" } ?? "")
        }
    }

    /// The public-API rows: the default link; the smallest MTU, where a
    /// 240-byte send takes 25 packets and packets per event bind; and two
    /// where write-without-response credits are fewer than packets per event
    /// and bind instead (a credit comes back during an event, for the next one).
    static let apiConfigurations = [
        Configuration(mtu: 247, packetsPerEvent: 6, credits: 8),
        Configuration(mtu: 23, packetsPerEvent: 4, credits: 8),
        Configuration(mtu: 23, packetsPerEvent: 6, credits: 2),
        Configuration(mtu: 185, packetsPerEvent: 6, credits: 1, interval: .milliseconds(7.5)),
    ]

    /// What each of the app's tasks does, back to back: two ping with
    /// `runAtCommand`, two send radio payloads (a full 240-byte one, a short one).
    enum Operation {
        case ping(token: String)
        case send(bytes: Int)
    }

    static let taskCount = 4

    /// The `index`th operation of task `task`.
    nonisolated static func operation(task: Int, index: Int) -> Operation {
        switch task {
        case 0, 1: .ping(token: "t\(task)n\(index)")
        case 2: .send(bytes: 240)
        default: .send(bytes: 17)
        }
    }

    /// Runs `perTask` operations in each of the tasks at once through a real
    /// client; returns the model's bound over the time taken (1 = the bound)
    /// and both times.
    static func measureAPI(_ configuration: Configuration, perTask: Int) async throws(CLIError)
        -> (utilisation: Double, measured: Duration, bound: Duration, operations: Int)
    {
        let device = configuration.device
        let model = LinkModel(device)
        var bound = Duration.zero
        for task in 0..<taskCount {
            for index in 0..<perTask {
                switch operation(task: task, index: index) {
                case .ping(let token):
                    bound += model.atCommand("AT+PING=" + token, reply: ["+PING:" + token, "OK"])
                case .send(let bytes):
                    bound += model.rfSend(payload: bytes)
                }
            }
        }
        let setup = try await BenchSetup.connect(device, settleYields: 8)
        let client = setup.client
        try await setup.startAtConnectionEvent()
        let start = setup.clock.elapsed
        do {
            try await setup.clock.run(limit: .seconds(86_400)) {
                let running = (0..<taskCount).map { task in
                    Task { @MainActor in try await run(task: task, operations: perTask, on: client) }
                }
                for task in running { try await task.value }
            }
        } catch {
            throw CLIError.from(error, doing: "The link benchmark")
        }
        let measured = setup.clock.elapsed - start
        let sent = setup.peripheral.transmittedFrames.count
        await setup.close()
        let operations = perTask * taskCount
        guard sent == perTask * 2 else {
            throw CLIError(.failure, "\(sent) radio frames went out, expected \(perTask * 2)")
        }
        return (Measure.seconds(bound) / Measure.seconds(measured), measured, bound, operations)
    }

    /// One of the app's tasks: its operations back to back, each answer checked.
    private static func run(task: Int, operations: Int, on client: XTalkBleClient) async throws {
        for index in 0..<operations {
            switch operation(task: task, index: index) {
            case .ping(let token):
                let lines = try await client.runAtCommand("AT+PING=" + token)
                guard lines == ["+PING:" + token, "OK"] else {
                    throw CLIError(.failure, "AT+PING=\(token) got someone else's answer: \(lines)")
                }
            case .send(let bytes):
                try await client.sendRfPayload(Data(repeating: UInt8(truncatingIfNeeded: index), count: bytes))
            }
        }
    }

    /// `AT+SEND=` with a 240-byte payload, xor-encoded: 490 bytes on the wire.
    static let line: [UInt8] = Array(("AT+SEND=" + String(repeating: "A5", count: 240) + "\r\n").utf8).map { $0 ^ 0x5A }

    /// The write pump alone (a package-level path no app reaches: an app never
    /// has more than one AT line in flight): pushes `count` lines through it
    /// and returns the link's limit over the time taken (1 = the limit).
    static func measurePump(_ configuration: Configuration, lines count: Int) async throws(CLIError) -> (
        ratio: Double, bytes: Int
    ) {
        let device = configuration.device
        let interval = device.link.connectionInterval
        let setup = try await BenchSetup.connect(device, settleYields: 4)
        let total = line.count * count
        for _ in 0..<count {
            do { try setup.client.writeThroughPump(line) } catch { throw CLIError.from(error, doing: "Writing") }
        }
        while setup.peripheral.hostBytesDelivered < total {
            await setup.clock.advance(by: interval)
        }
        guard let window = setup.peripheral.hostDeliveryWindow else {
            throw CLIError(.failure, "nothing was delivered")
        }
        // Connection events spanned: the first one counts whole.
        let achieved = window.last - window.first + interval
        let model = LinkModel(device)
        let events = (Double(total) / Double(model.bytesPerPacket) / Double(model.uplinkPacketsPerEvent)).rounded(.up)
        let limit = interval * Int(events)
        await setup.close()
        return (Measure.seconds(limit) / Measure.seconds(achieved), total)
    }

    /// A public-API row: utilisation of the model's bound, at least `minimum`.
    private static func apiRow(
        _ configuration: Configuration,
        _ outcome: (utilisation: Double, measured: Duration, bound: Duration, operations: Int), minimum: Double
    ) -> BenchRow {
        let label =
            configuration.lostReadyCallbacksOneIn == nil
            ? "\(configuration.label), \(outcome.operations) ops from \(taskCount) tasks" : configuration.label
        return BenchRow(
            figure: "1. public API, \(label)",
            target: String(format: ">= %g of the bound", minimum),
            measured: String(
                format: "%.3f (%.2f s, bound %.2f s)", outcome.utilisation,
                Measure.seconds(outcome.measured), Measure.seconds(outcome.bound)),
            passed: outcome.utilisation >= minimum, deterministic: true,
            values: [
                ("mtu", .int(configuration.mtu)), ("packets_per_event", .int(configuration.packetsPerEvent)),
                ("credits", .int(configuration.credits)), ("operations", .int(outcome.operations)),
                ("lost_ready_one_in", configuration.lostReadyCallbacksOneIn.map { .int($0) } ?? .null),
                ("ms", .double(milliseconds(outcome.measured))), ("bound_ms", .double(milliseconds(outcome.bound))),
                ("ratio", .double(outcome.utilisation)),
            ])
    }

    static func rows(quick: Bool) async throws(CLIError) -> [BenchRow] {
        var rows: [BenchRow] = []
        let perTask = quick ? 10 : 100
        for configuration in apiConfigurations {
            if Task.isCancelled { throw CLIError(.interrupted, "interrupted") }  // Ctrl-C between configurations
            rows.append(
                apiRow(configuration, try await measureAPI(configuration, perTask: perTask), minimum: 0.95))
        }
        // iOS losing "ready to write" callbacks at random: the pump
        // re-polls the flag every 10 ms; the same bound, a 0.9 target.
        let lossy = Configuration(mtu: 23, packetsPerEvent: 6, credits: 2, lostReadyCallbacksOneIn: 20)
        rows.append(apiRow(lossy, try await measureAPI(lossy, perTask: perTask), minimum: 0.9))
        let lines = quick ? 16 : Int((65_536.0 / Double(line.count)).rounded(.up))
        for configuration in [
            Configuration(mtu: 23, packetsPerEvent: 6, credits: 8),
            Configuration(mtu: 247, packetsPerEvent: 6, credits: 8),
            Configuration(mtu: 23, packetsPerEvent: 6, credits: 2),
        ] {
            if Task.isCancelled { throw CLIError(.interrupted, "interrupted") }
            let (ratio, bytes) = try await measurePump(configuration, lines: lines)
            rows.append(
                BenchRow(
                    figure: "1. write pump alone (package path), \(configuration.label), \(bytes / 1_024) KiB",
                    target: ">= 0.95 of the limit",
                    measured: String(format: "%.3f of the limit", ratio),
                    passed: ratio >= 0.95, deterministic: true,
                    values: [
                        ("mtu", .int(configuration.mtu)), ("packets_per_event", .int(configuration.packetsPerEvent)),
                        ("credits", .int(configuration.credits)), ("bytes", .int(bytes)), ("ratio", .double(ratio)),
                    ]))
        }
        return rows
    }
}
