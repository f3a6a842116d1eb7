import Foundation
import Testing
import XTalkBleBridge
import XTalkBleSdk
import XTalkSimulator

/// A bridge on the simulator in virtual time, driven through its router as
/// a host drives it: JSON requests in, JSON replies out, each reply checked
/// to come exactly once.
@MainActor
final class BridgeRig {
    let clock = XTalkVirtualClock()
    let environment: XTalkSimulatedEnvironment
    let bridge: BleBridge
    let router: BridgeRouter
    /// Every reply line, by request id (more than one per id is a defect).
    private(set) var replies: [Int: [String]] = [:]
    private var nextID = 0

    init(devices: [XTalkSimulatedDevice] = [.oneKeyEcho()], settings: BridgeDeviceMachine.Settings = .init()) {
        environment = XTalkSimulatedEnvironment(devices: devices, clock: clock)
        bridge = BleBridge(backend: Self.backend(environment), settings: settings)
        router = BridgeRouter(bridge: bridge)
    }

    /// The backend the suite runs through: the simulated central by default;
    /// with `XTALK_BACKEND=corebluetooth` (a CI step), the CoreBluetooth
    /// backend over the stand-in, driven by the same simulator.
    nonisolated static let backendName = ProcessInfo.processInfo.environment["XTALK_BACKEND"] ?? "simulator"

    static func backend(_ environment: XTalkSimulatedEnvironment) -> any BleBackend {
        #if os(Linux)
            if backendName == "corebluetooth" { return environment.coreBluetoothBackend() }
        #endif
        return environment.backend
    }

    var device: XTalkSimulatedPeripheral { environment.peripherals[0] }
    var uuid: String { device.id.uuidString }

    /// Sends a request; returns its id (the reply comes later, see `reply(to:)`).
    @discardableResult
    func request(_ method: String, _ params: String = "{}") -> Int {
        nextID += 1
        let id = nextID
        router.handle(Array("{\"id\":\(id),\"method\":\"\(method)\",\"params\":\(params)}".utf8)) { [weak self] line in
            self?.replies[id, default: []].append(line)
        }
        return id
    }

    /// The one reply to `id`, decoded: nil while none came.
    func reply(to id: Int) -> Reply? {
        guard let lines = replies[id] else { return nil }
        #expect(lines.count == 1, "request \(id) was answered \(lines.count) times: \(lines)")
        return Reply(line: lines[0])
    }

    /// Moves time until `id` is answered (bounded), and returns the reply.
    /// Steps start at 5 ms and double up to 250 ms: a reply due in seconds
    /// (a timeout) costs a few dozen steps, not thousands (each step settles
    /// the main actor, which matters under the sanitizers).
    func await(_ id: Int, within limit: Duration = .seconds(30)) async -> Reply? {
        await advance(until: { replies[id] != nil }, within: limit)
        return reply(to: id)
    }

    func advance(until done: () -> Bool, within limit: Duration = .seconds(30)) async {
        await Self.advance(clock, until: done, within: limit)
    }

    static func advance(_ clock: XTalkVirtualClock, until done: () -> Bool, within limit: Duration) async {
        var waited = Duration.zero
        var step = Duration.milliseconds(5)
        while !done(), waited < limit {
            await clock.advance(by: step)
            waited += step
            step = min(step * 2, .milliseconds(250))
        }
    }

    /// Calls `method` and waits for its reply.
    func call(_ method: String, _ params: String = "{}") async -> Reply? {
        await self.await(request(method, params))
    }

    func params(_ extra: String = "") -> String {
        "{\"uuid\":\"\(uuid)\"\(extra.isEmpty ? "" : "," + extra)}"
    }

    /// init, enumerate, connect: the device is ready.
    func connect() async throws {
        _ = request("init")
        let devices = try #require(await call("enumerate"))
        #expect(devices.error == nil)
        let connected = try #require(await call("connect", params()))
        #expect(connected.isNull, "connect: \(connected.line)")
    }
}

struct Reply {
    let line: String
    var object: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? [:]
    }
    var result: Any? { object["result"] }
    var isNull: Bool { object.keys.contains("result") && object["result"] is NSNull }
    var hex: String? { result as? String }
    var error: (code: Int, message: String)? {
        guard let error = object["error"] as? [String: Any], let code = error["code"] as? Int,
            let message = error["message"] as? String
        else { return nil }
        return (code, message)
    }
    var code: Int? { error?.code }
}
