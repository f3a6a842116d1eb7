import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkSimulator

/// The options every device command shares (`encoding`: those that run AT commands).
enum CommonOptions {
    static let json = OptionSpec.flag("json", help: "Print one JSON object per line (stable field names).")
    static let verbose = OptionSpec.flag("verbose", short: "v", help: "Show the AT traffic on standard error.")
    static let name = OptionSpec.string("name", value: "NAME", help: "Use the device with this advertised name.")
    static let address = OptionSpec.string(
        "address", value: "ADDRESS",
        help: "Use the device with this address (AA:BB:CC:DD:EE:FF).")
    static let scanTimeout = OptionSpec.double(
        "scan-timeout", value: "SECONDS", in: 0.05...600,
        help: "How long to look for the device (default 1; the strongest one found is used).")
    static let encoding = OptionSpec.choice(
        "encoding", from: ["auto", "plain", "xor"],
        help: "The AT encoding; auto authenticates to find it (default auto). plain or xor skip authentication.")
    static let backend = OptionSpec.choice(
        "backend", from: ["simulator", "platform"],
        help: "simulator (default): the built-in simulated devices; platform: this machine's Bluetooth.")
    static let firmwareEncoding = OptionSpec.choice(
        "firmware-encoding", from: ["plain", "xor"],
        help: "Simulator: the firmware's encoding (default xor).")
    static let noChallenge = OptionSpec.flag(
        "no-challenge",
        help: "Simulator: the firmware does not require the challenge.")
    static let untrustedKey = OptionSpec.flag(
        "untrusted-key",
        help: "Simulator: the firmware signs with a key that is not trusted.")
    static let mtu = OptionSpec.int(
        "mtu", value: "BYTES", in: 23...517,
        help: "Simulator: the ATT MTU, 23–517 (default 247).")
    static let latency = OptionSpec.int(
        "latency", value: "MS", in: 0...500,
        help: "Simulator: the connection interval in ms, 0–500 (default 15).")
    static let traffic = OptionSpec.double(
        "traffic", value: "HZ", in: 0...200,
        help: "Simulator: received radio frames per second, 0–200 (default 1).")
    static let disconnectAfter = OptionSpec.double(
        "disconnect-after", value: "SECONDS", in: 0.01...86_400,
        help: "Simulator: the link drops this long after connecting.")
    static let garbage = OptionSpec.int(
        "garbage", value: "BYTES", in: 0...4_096,
        help: "Simulator: a line of this many random bytes every 200 ms (line noise).")
    static let seed = OptionSpec.int(
        "seed", value: "N", in: 0...Int.max,
        help: "Simulator: the random seed (default 1).")

    /// Output, device selection and the simulator knobs.
    static let device: [any DeclaredOption] = [
        json, verbose, name, address, scanTimeout, backend, firmwareEncoding, noChallenge, untrustedKey, mtu, latency,
        traffic, disconnectAfter, garbage, seed,
    ]
}

/// The simulator knobs of the command line.
struct SimulatorSettings: Equatable {
    var firmwareEncoding: XTalkAtEncoding = .xor
    var challengeRequired = true
    var untrustedKey = false
    var mtu = 247
    var latency: Duration = .milliseconds(15)
    var trafficHz: Double = 1

    /// The time between two received frames; nil for no traffic. At least
    /// 5 ms; at most a day (a rate of 1e-300 would not fit in milliseconds).
    var trafficInterval: Duration? {
        guard trafficHz > 0 else { return nil }
        return .milliseconds(Int(min(max(5, 1_000 / trafficHz), 86_400_000)))
    }
    var disconnectAfter: Duration?
    var garbage = 0
    var seed: UInt64 = 1

    init() {}

    /// The command line's settings over `defaults`.
    init(_ arguments: ParsedArguments, defaults: SimulatorSettings = SimulatorSettings()) throws(UsageError) {
        self = defaults
        if let encoding = try arguments[CommonOptions.firmwareEncoding] {
            firmwareEncoding = encoding == "plain" ? .plain : .xor
        }
        challengeRequired = !arguments[CommonOptions.noChallenge]
        untrustedKey = arguments[CommonOptions.untrustedKey]
        mtu = try arguments[CommonOptions.mtu] ?? mtu
        if let ms = try arguments[CommonOptions.latency] { latency = .milliseconds(ms) }
        trafficHz = try arguments[CommonOptions.traffic] ?? trafficHz
        // (fake-bluez serves links it does not select, so it has no --disconnect-after.)
        if arguments.declares(CommonOptions.disconnectAfter), let after = try arguments[CommonOptions.disconnectAfter] {
            disconnectAfter = .milliseconds(Int(after * 1_000))
        }
        garbage = try arguments[CommonOptions.garbage] ?? garbage
        if let seed = try arguments[CommonOptions.seed] { self.seed = UInt64(seed) }
    }

    /// Three devices at different distances; the first is the strongest.
    func devices() -> [XTalkSimulatedDevice] {
        [(1, -58, 12345), (2, -71, 12346), (3, -80, 20001)].map { index, rssi, serial in
            var firmware = XTalkSimulatedFirmware.identity(year: 2026, week: 48, serialNumber: UInt32(serial))
            firmware.encoding = firmwareEncoding
            firmware.challengeRequired = challengeRequired
            firmware.faults.wrongSignature = untrustedKey
            var link = XTalkSimulatedLink(mtu: mtu, connectionInterval: latency)
            link.connectDelay = .milliseconds(40)
            return XTalkSimulatedDevice(
                name: "xTalk-000\(index)", address: "C0:FF:EE:00:00:0\(index)", rssi: rssi,
                firmware: firmware, link: link)
        }
    }
}

/// The adapter between the client and the authenticator (the integration guide's).
@MainActor
final class ClientAuthTransport: DeviceAuthTransport {
    let label = "xTalk BLE"
    private(set) var atEncoding: DeviceAuthAtEncoding
    private let ble: XTalkBleClient

    init(ble: XTalkBleClient) {
        self.ble = ble
        atEncoding = ble.atEncoding == .plain ? .plain : .xor
    }

    func setAtEncoding(_ encoding: DeviceAuthAtEncoding) {
        atEncoding = encoding
        ble.setAtEncoding(encoding == .plain ? .plain : .xor)
    }

    func runAtCommand(_ command: String, timeoutMs: Int, log: Bool, responseMode: DeviceAuthResponseMode) async throws
        -> [String]
    {
        let mode: XTalkAtResponseMode = responseMode == .automatic ? .automatic : .collectUntilTimeout
        return try await ble.runAtCommand(command, timeoutMs: timeoutMs, log: log, responseMode: mode)
    }
}

/// One device command's connection: the environment (simulator), the
/// client, device selection, readiness and authentication, and cleanup.
@MainActor
final class DeviceSession {
    let context: CommandContext
    let printer: Printer
    let environment: XTalkSimulatedEnvironment?
    let client: XTalkBleClient
    let settings: SimulatorSettings
    private let name: String?
    private let address: String?
    /// `--scan-timeout`, when given.
    let requestedScanWindow: Duration?
    /// How long a device command looks for its device: `--scan-timeout`, else 1 s.
    var scanWindow: Duration { requestedScanWindow ?? .seconds(1) }
    private let encoding: String

    /// AA:BB:CC:DD:EE:FF (hex digits, either case).
    static func isAddress(_ text: String) -> Bool {
        let pairs = text.split(separator: ":", omittingEmptySubsequences: false)
        return pairs.count == 6 && pairs.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }
    }

    init(
        _ arguments: ParsedArguments, context: CommandContext, printer: Printer,
        defaults: SimulatorSettings = SimulatorSettings()
    ) throws(UsageError) {
        self.context = context
        self.printer = printer
        settings = try SimulatorSettings(arguments, defaults: defaults)
        name = try arguments[CommonOptions.name]
        address = try arguments[CommonOptions.address]?.uppercased()
        if let address, !Self.isAddress(address) {
            throw UsageError("invalid value '\(address)' for --address: expected six hex pairs, AA:BB:CC:DD:EE:FF")
        }
        requestedScanWindow = try arguments[CommonOptions.scanTimeout].map { .milliseconds(Int($0 * 1_000)) }
        // Only the commands that run AT commands declare --encoding; the others find it by authenticating.
        encoding = try arguments.declares(CommonOptions.encoding) ? arguments[CommonOptions.encoding] ?? "auto" : "auto"
        var handler: XTalkLogHandler?
        if printer.verbose {
            handler = { _, message in Task { @MainActor in printer.trace(message) } }
        }
        let options = XTalkBleClientOptions(logLevel: .debug, logHandler: handler)
        switch try arguments[CommonOptions.backend] ?? "simulator" {
        case "platform":
            environment = nil
            client = XTalkBleClient(options: options)
        default:
            let environment = context.makeEnvironment(devices: settings.devices(), seed: settings.seed)
            self.environment = environment
            client = XTalkBleClient(simulator: environment, options: options)
            if let interval = settings.trafficInterval {
                for peripheral in environment.peripherals {
                    peripheral.startRadioTraffic(every: interval, payloadSize: 16)
                }
            }
            if settings.garbage > 0 {
                for peripheral in environment.peripherals {
                    peripheral.startLineNoise(every: .milliseconds(200), bytes: settings.garbage)
                }
            }
        }
    }

    /// Scans for the window (or until the named device appears) and returns
    /// the results, strongest first.
    func scan(window: Duration? = nil, onNewDevice: ((XTalkScanResult) -> Void)? = nil) async throws(CLIError)
        -> [XTalkScanResult]
    {
        client.startScan()
        let deadline = context.elapsed + (window ?? scanWindow)
        var seen: Set<UUID> = []
        while context.elapsed < deadline {
            if case .failed(let error) = client.connectionState { throw failure(error, doing: "Scanning") }
            for result in client.scanResults where !seen.contains(result.id) {
                seen.insert(result.id)
                onNewDevice?(result)
            }
            if window == nil, client.scanResults.contains(where: matches) { break }
            do { try await context.sleep(for: .milliseconds(10)) } catch {
                throw CLIError.from(error, doing: "Scanning")
            }
        }
        let results = client.scanResults
        client.stopScan()
        return results.sorted { $0.rssi > $1.rssi }
    }

    /// A failed state as the tool reports it, with the platform's reason in
    /// words when Bluetooth is unusable (on Linux: no system bus, no
    /// bluetoothd, no adapter, adapter off).
    private func failure(_ error: XTalkBleError, doing what: String) -> CLIError {
        let failure = CLIError.from(error, doing: what)
        guard let reason = client.bluetoothUnavailableReason else { return failure }
        return CLIError(failure.code, "\(failure.message): \(reason)")
    }

    /// Whether `--name` / `--address` ask for `result` (false when neither is given).
    private func matches(_ result: XTalkScanResult) -> Bool {
        selects(result) && (name != nil || address != nil)
    }

    /// Whether `result` may be used: it has the name and address asked for, if any.
    func selects(_ result: XTalkScanResult) -> Bool {
        (name == nil || result.name == name) && (address == nil || result.address == address)
    }

    /// A device was asked for by name or address.
    var isFiltered: Bool { name != nil || address != nil }

    /// The device asked for, in words ("named 'X' with address Y"; "at all" without either).
    var wanted: String {
        let parts = [name.map { "named '\($0)'" }, address.map { "with address \($0)" }].compactMap { $0 }
        return parts.isEmpty ? "at all" : parts.joined(separator: " ")
    }

    /// When `connect()` asked the client to connect (after the scan window).
    private(set) var connectStarted: Duration?

    /// Selects the device (by name, address, or the strongest) and connects
    /// until the passthrough is ready.
    func connect() async throws(CLIError) -> XTalkScanResult {
        let results = try await scan()
        let selected: XTalkScanResult?
        if name != nil || address != nil {
            selected = results.first(where: matches)
        } else {
            selected = results.first
        }
        guard let device = selected else {
            throw CLIError(.notFound, "no xTalk device \(wanted) was found within \(seconds(scanWindow))")
        }
        connectStarted = context.elapsed
        client.connect(id: device.id)
        try await waitUntil("Connecting to \(device.name)") { [client] in client.atReady }
        if let after = settings.disconnectAfter, let peripheral = environment?.peripheral(id: device.id) {
            peripheral.disconnect(after: after)
        }
        return device
    }

    /// Waits on the context's clock until `condition` holds or the connection
    /// fails. A wait for what a link loss causes passes `linkLossEnds: false`:
    /// the state says `.disconnected` before the app's event consumer has run.
    func waitUntil(
        _ what: String, limit: Duration = .seconds(15), linkLossEnds: Bool = true, _ condition: () -> Bool
    ) async throws(CLIError) {
        let deadline = context.elapsed + limit
        while !condition() {
            if case .failed(let error) = client.connectionState { throw failure(error, doing: what) }
            if linkLossEnds, client.connectionState == .disconnected {
                throw CLIError(.notReady, "\(what) failed: the link was lost")
            }
            guard context.elapsed < deadline else { throw CLIError(.timeout, "\(what) timed out") }
            do { try await context.sleep(for: .milliseconds(5)) } catch { throw CLIError.from(error, doing: what) }
        }
    }

    /// Authenticates the device; also how the AT encoding is found.
    func authenticate(policy: XTalkChallengePolicy = .whenRequired) async throws(CLIError) -> XTalkDeviceAuthResult {
        let authenticator = XTalkDeviceAuthenticator(transport: ClientAuthTransport(ble: client))
        // Simulated devices sign with the development key: expected there, a warning on real radios.
        authenticator.logHandler = { [printer, context, simulated = environment != nil] message in
            if simulated { printer.trace(message) } else { context.writeError("xtalk: warning: " + message) }
        }
        do {
            return try await authenticator.authenticate(
                configuration: XTalkDeviceAuthConfiguration(challengePolicy: policy))
        } catch {
            throw CLIError.from(error, doing: "Authentication")
        }
    }

    /// Sets the AT encoding: as given, or found by authenticating.
    /// When `--encoding` was given: a hint for silence, since a device that
    /// speaks the other encoding reads the commands as noise and never answers.
    var encodingHint: String? {
        guard encoding == "plain" || encoding == "xor" else { return nil }
        let other = encoding == "plain" ? "xor" : "plain"
        return "--encoding \(encoding) was given: does the device speak \(other)? "
            + "(without --encoding the tool finds out by authenticating)"
    }

    func prepareEncoding() async throws(CLIError) {
        switch encoding {
        case "plain": client.setAtEncoding(.plain)
        case "xor": client.setAtEncoding(.xor)
        default: _ = try await authenticate()
        }
    }

    /// Ends everything: the link, the client and the simulator's timers.
    func close() {
        client.teardown()
        environment?.shutDown()
    }
}
