import Foundation
import Testing
import XTalkTestSupport
import XTalkBleSdk
import XTalkFakeBlueZ
import XTalkSimulator

/// Whether this machine can run the BlueZ suites (they need a real dbus-daemon).
let dbusDaemonAvailable = PrivateBus.daemonPath() != nil
let dbusMissing: Comment = "skipped: dbus-daemon is not installed (Debian: apt-get install dbus-daemon)"

/// A private dbus-daemon, the fake BlueZ on it with simulated xTalk devices
/// behind it (on the real clock), and clients whose platform Bluetooth is the
/// BlueZ backend on that bus: the production backend, told where the system
/// bus is by `DBUS_SYSTEM_BUS_ADDRESS`, as on a gateway.
@MainActor
final class BlueZRig {
    let bus: PrivateBus
    let environment: XTalkSimulatedEnvironment
    let fake: FakeBlueZ

    /// `adapter` is the devices' adapter; `prepare` sets the fake up before bluetoothd starts.
    static func start(
        devices: [XTalkSimulatedDevice] = [BlueZRig.device()], adapter: String = "hci0",
        prepare: (FakeBlueZ) -> Void = { _ in }
    ) async throws -> BlueZRig {
        let bus = try await PrivateBus.start()
        let environment = XTalkSimulatedEnvironment(devices: devices)
        let fake = FakeBlueZ(environment: environment, adapter: adapter)
        prepare(fake)
        try await fake.start(busAddress: bus.address)
        return BlueZRig(bus: bus, environment: environment, fake: fake)
    }

    /// An xTalk device with a fast link (7.5 ms connection interval), so that real-time tests are quick.
    static func device(name: String = "xTalk-0001", address: String? = "C0:FF:EE:00:00:01") -> XTalkSimulatedDevice {
        var device = XTalkSimulatedDevice(name: name, address: address)
        device.link.connectionInterval = .milliseconds(7.5)
        device.advertisingInterval = .milliseconds(20)
        return device
    }

    private init(bus: PrivateBus, environment: XTalkSimulatedEnvironment, fake: FakeBlueZ) {
        self.bus = bus
        self.environment = environment
        self.fake = fake
    }

    var peripheral: XTalkSimulatedPeripheral { environment.peripherals[0] }

    /// The environment `XTalkBleClient()` reads on a gateway whose system bus is this one.
    var systemEnvironment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": bus.address] }

    /// Runs `body` with the BlueZ backend on this bus as the platform's Bluetooth:
    /// `XTalkBleClient()` inside it is a gateway's client.
    func asPlatform<T>(_ body: @MainActor () throws -> T) rethrows -> T {
        let environment = systemEnvironment
        return try PlatformBackend.$override.withValue({
            BlueZBackend(scheduler: ClockTimerScheduler(clock: ContinuousClock()), environment: environment)
        }) { try body() }
    }

    func client(_ options: XTalkBleClientOptions = XTalkBleClientOptions()) -> XTalkBleClient {
        asPlatform { XTalkBleClient(options: options) }
    }

    func stop() {
        fake.stop()
        environment.shutDown()
        bus.stop()
    }
}

extension BlueZRig {
    /// bluetoothd stops; a new client's scan then fails, saying why (checked). Returns the client.
    func clientWithoutBluetoothd() async -> XTalkBleClient {
        fake.stop()
        let client = client()
        client.startScan()
        #expect(await eventually { client.connectionState == .failed(.bluetoothUnavailable) })
        #expect(client.bluetoothUnavailableReason == "BlueZ (bluetoothd) is not running on the system bus")
        return client
    }
}

extension XTalkBleClient {
    /// Scans until a device shows, connects to it and waits for `atReady` (all bounded).
    func connectFirstDevice(rig: BlueZRig) async throws -> XTalkScanResult {
        startScan()
        guard await eventually({ !scanResults.isEmpty }) else {
            throw BlueZTestFailure("no scan result; state \(connectionState)")
        }
        let result = scanResults[0]
        connect(id: result.id)
        guard await eventually({ atReady || connectionState != .connecting && connectionState != .connected }),
            atReady
        else {
            throw BlueZTestFailure("not ready; state \(connectionState)")
        }
        return result
    }
}

struct BlueZTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
