import Foundation
import XTalkBleBridge
import XTalkBleSdk
import XTalkSimulator

/// `xtalk bridge --stdio`: the low-level BLE bridge for OneKey's JavaScript SDK (the router every host
/// shares) as a JSON-lines host, for tests and for Node.js programs: one
/// request per input line, one reply per output line, requests concurrent.
enum BridgeCommand {
    /// How long requests already made may take to be answered once input ends:
    /// an `enumerate`'s scan, a connect's link and discovery.
    static let endOfInputSettle: Duration = .seconds(20)

    static let stdio = OptionSpec.flag(
        "stdio", help: "Serve JSON lines on standard input and output (the only host on this platform).")
    static let devices = OptionSpec.int(
        "devices", value: "N", in: 1...16,
        help: "Simulator: how many OneKey-profile echo devices (default 1).")

    static let command = Command(
        spec: CommandSpec(
            name: "bridge",
            summary: "The low-level BLE bridge for OneKey's JavaScript SDK, as JSON lines on stdin/stdout.",
            positionals: [],
            options: [
                stdio, CommonOptions.backend, CommonOptions.mtu, CommonOptions.latency, devices, CommonOptions.seed,
            ],
            discussion: """
                Each input line is a request {"id": <number>, "method": "<name>", "params": {...}}; each output
                line is its reply {"id": <same>, "result": <value or null>} or
                {"id": <same>, "error": {"code": <HardwareErrorCode>, "message": "..."}}, in the order they
                complete. Methods: init, version, enumerate, connect, disconnect, send, receive,
                getProtocolV2PacketCapacity (params: uuid, data as hex, options.withoutResponse). On the
                simulator (the default) also simulator.linkLoss {uuid} and simulator.notify {uuid, data}: the
                devices are OneKey-profile echo devices (every written packet comes back as notifications).
                At the end of input the requests already made are answered first (up to 20 s), then every
                device is disconnected (a receive still waiting is answered with 720) and it exits; Ctrl-C
                ends it at once.
                """),
        endsOnInterrupt: true
    ) { arguments, context, printer throws(CLIError) in
        let count: Int
        let backendName: String
        let mtu: Int
        let latency: Duration
        let seed: UInt64
        do throws(UsageError) {
            guard arguments[Self.stdio] else { throw UsageError("bridge needs --stdio (its only host here)") }
            mtu = try arguments[CommonOptions.mtu] ?? 247
            latency = .milliseconds(try arguments[CommonOptions.latency] ?? 15)
            seed = UInt64(try arguments[CommonOptions.seed] ?? 1)
            count = try arguments[Self.devices] ?? 1
            backendName = try arguments[CommonOptions.backend] ?? "simulator"
        } catch {
            throw CLIError.usage(error)
        }
        var environment: XTalkSimulatedEnvironment?
        let backend: any BleBackend
        if backendName == "platform" {
            backend = PlatformBackend.make()
        } else {
            let devices = (1...count).map { index in
                var device = XTalkSimulatedDevice.oneKeyEcho(name: count == 1 ? "OneKey Pro" : "OneKey Pro \(index)")
                device.link = XTalkSimulatedLink(mtu: mtu, connectionInterval: latency)
                device.link.connectDelay = .milliseconds(40)
                device.advertisingInterval = .milliseconds(20)
                return device
            }
            let made = context.makeEnvironment(devices: devices, seed: seed)
            environment = made
            backend = made.backend
        }
        defer { environment?.shutDown() }
        let bridge = BleBridge(backend: backend)
        let router = BridgeRouter(bridge: bridge)
        if let environment { addSimulatorMethods(router, environment) }
        for await line in context.input {
            if Task.isCancelled { break }
            guard line.contains(where: { !$0.isWhitespace }) else { continue }
            router.handle(Array(line.utf8)) { reply in context.writeOut(reply) }
        }
        // The end of input (not Ctrl-C): the requests already made are answered
        // first, bounded (a piped "init, enumerate" gets its devices); then every
        // link ends, and what still waits (a parked receive) is answered before the host exits.
        let settle = context.elapsed + Self.endOfInputSettle
        while !Task.isCancelled, bridge.requestsInProgress > 0, context.elapsed < settle {
            do { try await context.sleep(for: .milliseconds(10)) } catch { break }
        }
        bridge.close("the host's input ended")
        let deadline = context.elapsed + .seconds(5)
        while bridge.pendingRequestCount > 0, context.elapsed < deadline {
            do { try await context.sleep(for: .milliseconds(10)) } catch { break }
        }
    }

    /// `simulator.linkLoss {uuid}` and `simulator.notify {uuid, data}`.
    @MainActor
    private static func addSimulatorMethods(_ router: BridgeRouter, _ environment: XTalkSimulatedEnvironment) {
        func peripheral(_ params: BridgeJSON) -> XTalkSimulatedPeripheral? {
            guard let uuid = params["uuid"]?.string, let id = UUID(uuidString: uuid) else { return nil }
            return environment.peripheral(id: id)
        }
        router.extraMethods["simulator.linkLoss"] = { params, done in
            guard let device = peripheral(params) else {
                return done(.failure(BridgeError(.deviceDisconnected, "no simulated device with this uuid")))
            }
            device.disconnect(.terminatedByDevice)
            done(.success(.null))
        }
        router.extraMethods["simulator.notify"] = { params, done in
            guard let device = peripheral(params) else {
                return done(.failure(BridgeError(.deviceDisconnected, "no simulated device with this uuid")))
            }
            switch BridgeHex.decode(params["data"]?.string ?? "") {
            case .failure(let error): done(.failure(error))
            case .success(let data):
                device.notify(data)
                done(.success(.null))
            }
        }
    }
}
