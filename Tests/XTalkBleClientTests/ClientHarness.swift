import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator
import XTalkTestSupport

/// A client on a simulated environment in virtual time, recording every event.
@MainActor
final class ClientHarness {
    let clock: XTalkVirtualClock
    let environment: XTalkSimulatedEnvironment
    let client: XTalkBleClient
    /// With `readsEventsAtStart`, a stream of `events` read at creation, before
    /// anything happened, and left unread until a test asks for what it kept
    /// (`remainingEvents()`); its drops count in `droppedEventCount`.
    let initialStream: AsyncStream<XTalkBleEvent>?
    private(set) var events: [XTalkBleEvent] = []
    private(set) var logs: [(XTalkLogLevel, String)] = []
    private let logBox = LogLines()

    init(
        devices: [XTalkSimulatedDevice] = [ClientHarness.fastDevice()],
        bluetoothState: XTalkSimulatedBluetoothState = .poweredOn,
        options: XTalkBleClientOptions = XTalkBleClientOptions(), seed: UInt64 = 11,
        readsEventsAtStart: Bool = false, clock: XTalkVirtualClock = XTalkVirtualClock()
    ) {
        self.clock = clock
        environment = XTalkSimulatedEnvironment(
            devices: devices, clock: clock, bluetoothState: bluetoothState, seed: seed)
        var options = options
        let box = logBox
        options.logLevel = .debug
        options.logHandler = { _, message in box.append(message) }
        client = Self.makeClient(environment, options)
        initialStream = readsEventsAtStart ? client.events : nil
        client.onEvent = { [weak self] event in self?.events.append(event) }
    }

    /// The backend the suite runs through: the simulated central by default;
    /// with `XTALK_BACKEND=corebluetooth`, the CoreBluetooth backend over the
    /// stand-in, driven by the same simulator (Linux).
    nonisolated static let backendName = ProcessInfo.processInfo.environment["XTALK_BACKEND"] ?? "simulator"

    static func makeClient(_ environment: XTalkSimulatedEnvironment, _ options: XTalkBleClientOptions) -> XTalkBleClient
    {
        #if os(Linux)
            if backendName == "corebluetooth" {
                return XTalkBleClient(coreBluetoothSimulator: environment, options: options)
            }
        #endif
        return XTalkBleClient(simulator: environment, options: options)
    }

    /// A command the (connected) device never answers, on the wire for 50 ms
    /// and pending for seconds more: for tests of what ends pending work.
    func pendingSilentCommand() async -> Task<[String], any Error> {
        peripheral.device.firmware.faults.silentCommands = ["AT+SLOW"]
        let pending = start { [client] in try await client.runAtCommand("AT+SLOW", timeoutMs: 5_000) }
        await advance(.milliseconds(50))
        return pending
    }

    /// A healthy device on a realistic but quick link.
    static func fastDevice(name: String = "xTalk-0001", address: String? = "C0:FF:EE:00:00:01") -> XTalkSimulatedDevice
    {
        var device = XTalkSimulatedDevice(name: name, address: address)
        device.link.connectionInterval = .milliseconds(7.5)
        return device
    }

    var peripheral: XTalkSimulatedPeripheral { environment.peripherals[0] }
    var logMessages: [String] { logBox.all }

    func advance(_ duration: Duration = .zero) async { await clock.advance(by: duration) }

    /// Scans until the first device is listed.
    func scan() async {
        client.startScan()
        for _ in 0..<100 where client.scanResults.isEmpty { await advance(.milliseconds(10)) }
        #expect(!client.scanResults.isEmpty, "the scan found the device")
    }

    /// Scans, connects to the first result and waits for `atReady`.
    func connect() async {
        await scan()
        guard let first = client.scanResults.first else {
            Issue.record("connect(): no scan result to connect to")
            return
        }
        client.connect(id: first.id)
        for _ in 0..<1_000 where !client.atReady {
            if case .failed = client.connectionState { break }
            await advance(.milliseconds(5))
        }
        #expect(client.atReady, "the passthrough is ready")
    }

    /// Runs an operation, driving virtual time until it finishes.
    func run<T: Sendable>(_ operation: @escaping @MainActor () async throws -> T) async throws -> T {
        try await clock.run(operation)
    }

    /// Runs an operation and returns its error (a test failure if it succeeds).
    func error<T: Sendable>(_ operation: @escaping @MainActor () async throws -> T) async -> (any Error)? {
        do {
            _ = try await clock.run(operation)
            Issue.record("expected an error")
            return nil
        } catch {
            return error
        }
    }

    /// Starts an operation in a task now (it runs as time is advanced).
    func start<T: Sendable>(_ operation: @escaping @MainActor () async throws -> T) -> Task<T, any Error> {
        Task { @MainActor in try await operation() }
    }

    var stateEvents: [XTalkConnectionState] {
        events.compactMap { if case .connectionStateChanged(let state) = $0 { state } else { nil } }
    }

    var atLines: [String] {
        events.compactMap { if case .atLine(let line) = $0 { line } else { nil } }
    }

    /// The `.passthroughRaw` events' bytes.
    var raw: [Data] {
        events.compactMap { if case .passthroughRaw(let data) = $0 { data } else { nil } }
    }

    /// Starts a task that reads `events` until the stream ends; end it with
    /// `consumed(by:)`, which bounds the wait.
    func consumeEvents(_ stream: AsyncStream<XTalkBleEvent>? = nil) -> Task<[XTalkBleEvent], Never> {
        let stream = stream ?? client.events
        return Task { @MainActor in
            var received: [XTalkBleEvent] = []
            for await event in stream { received.append(event) }
            return received
        }
    }

    /// What a consumer of `events` received once the stream ended (after
    /// `teardown()`); a stream that does not end is a named failure in virtual
    /// seconds, not a hang.
    func consumed(
        by consumer: Task<[XTalkBleEvent], Never>, _ what: String = "the events stream",
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> [XTalkBleEvent] {
        await clock.awaitEnd(of: consumer, what, sourceLocation: sourceLocation) ?? []
    }

    /// Everything the stream read at creation still holds, read after `teardown()` finished it.
    func remainingEvents(sourceLocation: SourceLocation = #_sourceLocation) async -> [XTalkBleEvent] {
        guard let initialStream else {
            Issue.record(
                "remainingEvents() needs ClientHarness(readsEventsAtStart: true)", sourceLocation: sourceLocation)
            return []
        }
        return await consumed(
            by: consumeEvents(initialStream), "the events stream after teardown()", sourceLocation: sourceLocation)
    }

    /// Tears everything down and checks that no timer is left pending.
    func finish() async {
        client.teardown()
        environment.shutDown()
        await clock.settle()
        #expect(clock.pendingTimerCount == 0, "no timer is left pending")
    }
}

extension XTalkBleError {
    static func from(_ error: (any Error)?) -> XTalkBleError? { error as? XTalkBleError }
}
