import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk

/// A subcommand: its grammar and what it does.
struct Command: Sendable {
    let spec: CommandSpec
    /// Ctrl-C is this command's normal way to end (exit 0), e.g. `listen`.
    let endsOnInterrupt: Bool
    let run: @MainActor @Sendable (ParsedArguments, CommandContext, Printer) async throws(CLIError) -> Void
}

/// Field and text renderings shared by the commands.
enum Render {
    static func device(_ result: XTalkScanResult) -> ([(String, JSONValue)], String) {
        let fields: [(String, JSONValue)] = [
            ("id", .string(result.id.uuidString)), ("name", .string(result.name)),
            ("address", result.address.map(JSONValue.string) ?? .null), ("rssi", .int(result.rssi)),
        ]
        let padded = result.name.padding(toLength: max(12, result.name.count), withPad: " ", startingAt: 0)
        return (fields, "\(padded)  \(result.address ?? "(no address)")  \(result.rssi) dBm")
    }

    static func meta(_ meta: XTalkDiMeta) -> ([(String, JSONValue)], String) {
        let all: [(String, Int?)] = [
            ("cnt", meta.diCnt), ("len", meta.len), ("slot", meta.slot), ("snr", meta.snr), ("rssi", meta.rssi),
            ("lsnr", meta.localSnr), ("lrssi", meta.localRssi), ("rsnr", meta.remoteSnr), ("rrssi", meta.remoteRssi),
            ("txp", meta.txp),
        ]
        let present = all.compactMap { key, value in value.map { (key, $0) } }
        return (present.map { ($0.0, JSONValue.int($0.1)) }, present.map { "\($0.0)=\($0.1)" }.joined(separator: " "))
    }

    static func frame(_ data: Data, _ meta: XTalkDiMeta) -> ([(String, JSONValue)], String) {
        let (metaFields, metaText) = Self.meta(meta)
        let hex = Hex.encode(data)
        return (
            [("bytes", .int(data.count)), ("data", .string(hex)), ("meta", .object(metaFields))],
            "frame  \(data.count) bytes  \(hex)  \(metaText)"
        )
    }

    static func identity(_ result: XTalkDeviceAuthResult) -> ([(String, JSONValue)], String) {
        let identity = result.identity
        // Which anchor verified the device: the development one is worth saying.
        let anchor = result.verifiedBy.map { $0 == .development ? "development" : "declared" }
        let fields: [(String, JSONValue)] = [
            ("did", .string(identity.did)), ("device_id", .string(XTalkDeviceIDCodec.format(identity.deviceID))),
            ("serial", .string(identity.serial)), ("source", .string(identity.source == .efuseSn ? "efuse" : "sn")),
            ("encoding", .string(result.encoding.rawValue)), ("challenge", .bool(result.didRequireChallenge)),
            ("anchor", anchor.map { .string($0) } ?? .null),
        ]
        let text =
            "\(identity.did)  serial \(identity.serial) (\(identity.source == .efuseSn ? "eFuse" : "configured"))  "
            + "\(result.encoding.rawValue) encoding  "
            + "\(result.didRequireChallenge ? "challenge verified (\(anchor ?? "?") anchor)" : "no challenge")"
        return (fields, text)
    }
}

/// Runs `body` with a connected session and always closes it.
@MainActor
func withSession(
    _ arguments: ParsedArguments, _ context: CommandContext, _ printer: Printer,
    _ body: (DeviceSession, XTalkScanResult) async throws(CLIError) -> Void
) async throws(CLIError) {
    let session: DeviceSession
    do throws(UsageError) {
        session = try DeviceSession(arguments, context: context, printer: printer)
    } catch {
        throw CLIError.usage(error)
    }
    defer { session.close() }
    let device = try await session.connect()
    try await body(session, device)
}

enum DeviceCommands {
    /// Each command's own options; the shared ones are in `CommonOptions`.
    enum Options {
        static let scanTimeout = OptionSpec.double(
            "timeout", short: "t", value: "SECONDS", in: 0.05...3_600,
            help: "How long to scan (default 3).")
        static let alwaysChallenge = OptionSpec.flag(
            "always-challenge",
            help: "Run the challenge even if the device says none is needed.")
        static let atTimeout = OptionSpec.int(
            "timeout", value: "MS", in: 1...600_000,
            help: "Timeout of each command (default 3000).")
        static let text = OptionSpec.flag("text", help: "The argument is text, sent as UTF-8 bytes.")
        static let sendTimeout = OptionSpec.int(
            "timeout", value: "MS", in: 1...600_000,
            help: "Timeout (default 5000).")
        static let listenCount = OptionSpec.int(
            "count", short: "n", value: "N", in: 1...Int.max,
            help: "Stop after N frames (default: until Ctrl-C).")
        static let hold = OptionSpec.flag(
            "hold", help: "Keep the link until Ctrl-C (exit 0) or until it is lost (exit 4).")
        static let pingCount = OptionSpec.int(
            "count", short: "n", value: "N", in: 1...100_000,
            help: "How many round trips (default 10).")
    }

    static let scan = Command(
        spec: CommandSpec(
            name: "scan", summary: "Scan for xTalk devices and list them with their signal strength.",
            positionals: [], options: [Options.scanTimeout] + CommonOptions.device,
            discussion: nil),
        endsOnInterrupt: true
    ) { arguments, context, printer throws(CLIError) in
        let window: Duration
        let session: DeviceSession
        do throws(UsageError) {
            session = try DeviceSession(arguments, context: context, printer: printer)
            // -t/--timeout, else --scan-timeout, else 3 s.
            window =
                try arguments[Options.scanTimeout].map { .milliseconds(Int($0 * 1_000)) }
                ?? session.requestedScanWindow ?? .seconds(3)
        } catch {
            throw CLIError.usage(error)
        }
        defer { session.close() }
        var count = 0
        do throws(CLIError) {
            _ = try await session.scan(window: window) { result in
                guard session.selects(result) else { return }  // --name, --address
                count += 1
                let (fields, text) = Render.device(result)
                printer.record("device", fields, human: text)
            }
        } catch  where error.code == .interrupted {
            // Ctrl-C ends a scan normally: the list so far stands.
        }
        printer.record(
            "summary", [("devices", .int(count))],
            human: count == 1 ? "1 device" : "\(count) devices")
        // Asked for one by name or address and none came: exit 3, as `connect` does (scripts gate on it).
        if count == 0, session.isFiltered {
            throw CLIError(.notFound, "no xTalk device \(session.wanted) was found within \(seconds(window))")
        }
    }

    static let connect = Command(
        spec: CommandSpec(
            name: "connect",
            summary: "Connect to a device, show how long it took to be ready, and disconnect (or hold the link).",
            positionals: [], options: [Options.hold] + CommonOptions.device,
            discussion: nil),
        // Ctrl-C before the device is ready is 130 (no success to report); a held link ends normally.
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        try await withSession(arguments, context, printer) { session, device throws(CLIError) in
            // From the connect, not the scan window before it.
            let took = context.elapsed - (session.connectStarted ?? context.elapsed)
            let client = session.client
            let (fields, _) = Render.device(device)
            printer.record(
                "connected",
                fields + [
                    ("ready_ms", .double(milliseconds(took))), ("encoding", .string(client.atEncoding.rawValue)),
                ],
                human: "connected to \(device.name) (\(device.address ?? "no address"), \(device.rssi) dBm): "
                    + "AT ready after \(seconds(took))")
            guard arguments[Options.hold] else { return }
            printer.text("holding the link; Ctrl-C disconnects")
            while client.connectionState == .connected {
                do { try await context.sleep(for: .milliseconds(10)) } catch { return }  // Ctrl-C: done
            }
            throw CLIError(.notReady, "Holding the link failed: the link was lost")
        }
    }

    static let info = Command(
        spec: CommandSpec(
            name: "info", summary: "Read the battery level and the BLE firmware and hardware versions.",
            positionals: [], options: CommonOptions.device, discussion: nil),
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        try await withSession(arguments, context, printer) { session, device throws(CLIError) in
            try await session.waitUntil("Waiting for device information", limit: .seconds(5)) {
                session.client.deviceControlReady
            }
            let client = session.client
            async let battery = client.fetchBatteryLevel()
            async let firmware = client.fetchBleFirmwareVersion()
            async let hardware = client.fetchHardwareVersion()
            let (level, ble, hw) = await (battery, firmware, hardware)
            // A value missing because the link went is not "unavailable": the run failed.
            if client.connectionState != .connected {
                throw CLIError(.notReady, "Reading device information failed: the link was lost")
            }
            printer.record(
                "info",
                [
                    ("device", .string(device.name)), ("battery", level.map(JSONValue.int) ?? .null),
                    ("ble_firmware", ble.map(JSONValue.string) ?? .null),
                    ("hardware", hw.map(JSONValue.string) ?? .null),
                ],
                human: "\(device.name)\n  battery       \(level.map(String.init) ?? "unavailable")\n"
                    + "  BLE firmware  \(ble ?? "unavailable")\n  hardware      \(hw ?? "unavailable")")
        }
    }

    static let auth = Command(
        spec: CommandSpec(
            name: "auth", summary: "Authenticate the device and show its verified identity.",
            positionals: [],
            options: [Options.alwaysChallenge] + CommonOptions.device,
            discussion: nil),
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        try await withSession(arguments, context, printer) { session, _ throws(CLIError) in
            let policy: XTalkChallengePolicy = arguments[Options.alwaysChallenge] ? .always : .whenRequired
            let result = try await session.authenticate(policy: policy)
            let (fields, text) = Render.identity(result)
            printer.record("identity", fields, human: text)
        }
    }

    static let at = Command(
        spec: CommandSpec(
            name: "at", summary: "Run AT commands and print their response lines.",
            positionals: [
                PositionalSpec(
                    name: "COMMAND", help: "An AT command, e.g. AT+VER? (several run in order).",
                    isVariadic: true, isOptional: false)
            ],
            options: [Options.atTimeout, CommonOptions.encoding] + CommonOptions.device,
            discussion: nil),
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        let timeout: Int
        do throws(UsageError) {
            timeout = try arguments[Options.atTimeout] ?? 3_000
        } catch {
            throw CLIError.usage(error)
        }
        // Text the SDK would refuse is a usage error, found before any scan.
        for (index, command) in arguments.positionals.enumerated() {
            do throws(XTalkBleError) { try AtInputValidation.validateCommand(command) } catch {
                guard case .writeFailed(let reason) = error else { throw CLIError.from(error, doing: "at") }
                throw CLIError.usage(UsageError("<COMMAND> \(index + 1): \(reason)"))
            }
        }
        try await withSession(arguments, context, printer) { session, _ throws(CLIError) in
            try await session.prepareEncoding()
            for command in arguments.positionals {
                let lines: [String]
                do {
                    lines = try await session.client.runAtCommand(command, timeoutMs: timeout)
                } catch {
                    let failure = CLIError.from(error, doing: command)
                    guard (error as? XTalkBleError) == .timeout, let hint = session.encodingHint else { throw failure }
                    throw CLIError(failure.code, "\(failure.message); \(hint)")
                }
                printer.record(
                    "response", [("command", .string(command)), ("lines", .array(lines.map(JSONValue.string)))],
                    human: (["> " + command] + lines).joined(separator: "\n"))
                // A refused command fails the run (exit 1); the commands after it are not sent.
                if let last = lines.last, LineClassifier.isErrorResult(last) {
                    throw CLIError(.failure, "\(command): the device answered \(last)")
                }
            }
        }
    }

    static let send = Command(
        spec: CommandSpec(
            name: "send", summary: "Send a radio payload and wait until the radio finished sending it.",
            positionals: [
                PositionalSpec(
                    name: "HEX", help: "The payload as hex (1–240 bytes); with --text, the text.",
                    isVariadic: false, isOptional: false)
            ],
            options: [Options.text, Options.sendTimeout, CommonOptions.encoding] + CommonOptions.device,
            discussion: nil),
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        let argument = arguments.positionals.first ?? ""
        let payload: Data
        let timeout: Int
        do throws(UsageError) {
            timeout = try arguments[Options.sendTimeout] ?? 5_000
        } catch {
            throw CLIError.usage(error)
        }
        if arguments[Options.text] {
            payload = Data(argument.utf8)
        } else {
            guard !argument.isEmpty, let bytes = Hex.decode(argument.utf8) else {
                throw CLIError(
                    .usage, "invalid value '\(argument)' for <HEX>: expected hex digits (0-9, a-f) in pairs")
            }
            payload = Data(bytes)
        }
        guard (1...240).contains(payload.count) else {
            throw CLIError(.usage, "invalid payload: \(payload.count) bytes (1–240 bytes allowed)")
        }
        try await withSession(arguments, context, printer) { session, _ throws(CLIError) in
            try await session.prepareEncoding()
            let start = context.elapsed
            do {
                try await session.client.sendRfPayload(payload, timeoutMs: timeout)
            } catch {
                throw CLIError.from(error, doing: "Sending")
            }
            let took = context.elapsed - start
            let hex = Hex.encode(payload)
            printer.record(
                "sent",
                [
                    ("bytes", .int(payload.count)), ("data", .string(hex)),
                    ("ms", .double(milliseconds(took))),
                ],
                human: "sent \(payload.count) bytes (\(hex)): +SENDFIN:OK after \(seconds(took))")
        }
    }

    static let listen = Command(
        spec: CommandSpec(
            name: "listen", summary: "Print received radio frames and CRC errors with their metadata.",
            positionals: [],
            options: [Options.listenCount, CommonOptions.encoding] + CommonOptions.device,
            discussion: nil),
        // Ctrl-C while listening is the normal end (0); before the device is ready, 130.
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        let limit: Int?
        do throws(UsageError) { limit = try arguments[Options.listenCount] } catch { throw CLIError.usage(error) }
        try await withSession(arguments, context, printer) { session, device throws(CLIError) in
            try await session.prepareEncoding()
            printer.text("listening to \(device.name)…")
            var frames = 0
            var warnedUndecoded = false
            session.client.onEvent = { event in
                switch event {
                case .passthroughRaw:
                    // Bytes that decode to no line: said once, with the likely cause when --encoding was given.
                    if !warnedUndecoded, frames == 0 {
                        warnedUndecoded = true
                        printer.notice(
                            "received data that is not text in this encoding"
                                + (session.encodingHint.map { ": \($0)" } ?? ""))
                    }
                case .diPayload(let data, let meta):
                    frames += 1
                    let (fields, text) = Render.frame(data, meta)
                    printer.record("frame", fields, human: text)
                case .crcError(let meta, let line):
                    let (fields, text) = Render.meta(meta)
                    printer.record(
                        "crc_error", [("meta", .object(fields)), ("line", .string(line))], human: "CRC error  \(text)")
                case .connectionStateChanged, .atLine, .sendFinished:
                    break
                }
            }
            while limit.map({ frames < $0 }) ?? true {
                if session.client.connectionState != .connected {
                    throw CLIError(.notReady, "Listening failed: the link was lost")
                }
                do { try await context.sleep(for: .milliseconds(10)) } catch {
                    let failure = CLIError.from(error, doing: "Listening")
                    if failure.code == .interrupted { return }
                    throw failure
                }
            }
        }
    }

    static let ping = Command(
        spec: CommandSpec(
            name: "ping", summary: "Measure AT round trips (AT+PING) and print min/median/p99.",
            positionals: [],
            options: [Options.pingCount, CommonOptions.encoding] + CommonOptions.device,
            discussion: nil),
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        let count: Int
        do throws(UsageError) { count = try arguments[Options.pingCount] ?? 10 } catch { throw CLIError.usage(error) }
        try await withSession(arguments, context, printer) { session, device throws(CLIError) in
            try await session.prepareEncoding()
            var times: [Duration] = []
            for sequence in 1...count {
                let token = "p\(sequence)"
                let start = context.elapsed
                let lines: [String]
                do { lines = try await session.client.runAtCommand("AT+PING=" + token) } catch {
                    throw CLIError.from(error, doing: "Ping \(sequence)")
                }
                guard lines == ["+PING:" + token, "OK"] else {
                    throw CLIError(
                        .failure, "Ping \(sequence) got an unexpected answer: \(lines.joined(separator: " | "))")
                }
                let took = context.elapsed - start
                times.append(took)
                printer.record(
                    "ping", [("seq", .int(sequence)), ("ms", .double(milliseconds(took)))],
                    human:
                        "reply from \(device.name): seq=\(sequence) "
                        + "time=\(String(format: "%.1f", milliseconds(took))) ms"
                )
            }
            let sorted = times.sorted()
            let rank = { (p: Double) in
                sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
            }
            let (minimum, median, p99) = (sorted[0], rank(0.5), rank(0.99))
            printer.record(
                "ping_summary",
                [
                    ("count", .int(count)), ("min_ms", .double(milliseconds(minimum))),
                    ("median_ms", .double(milliseconds(median))), ("p99_ms", .double(milliseconds(p99))),
                ],
                human: String(
                    format: "%d round trip\(times.count == 1 ? "" : "s"): min %.1f ms, median %.1f ms, p99 %.1f ms",
                    count, milliseconds(minimum), milliseconds(median), milliseconds(p99)))
        }
    }
}
