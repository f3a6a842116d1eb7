import Foundation
import XTalkFakeBlueZ
import XTalkSimulator

/// `xtalk fake-bluez`: the project's fake BlueZ with simulated xTalk devices
/// behind it, on a private dbus-daemon (or a given bus), until Ctrl-C. For
/// trying the SDK's Linux backend and `--backend platform` without a radio,
/// and for checking the fake against real BlueZ clients (bleak).
enum FakeBlueZCommand {
    static let bus = OptionSpec.string(
        "bus", value: "ADDRESS",
        help: "Serve on this bus (e.g. unix:path=/tmp/bus) instead of starting a private dbus-daemon.")

    static let processing = OptionSpec.int(
        "processing", value: "MS", in: 0...1_000,
        help: "Simulator: how long the firmware takes to answer a command, in ms (default 2).")

    static let command = Command(
        spec: CommandSpec(
            name: "fake-bluez",
            summary: "Serve simulated devices as a fake BlueZ (org.bluez) on a private D-Bus, until Ctrl-C.",
            positionals: [],
            options: [
                bus, processing, CommonOptions.firmwareEncoding, CommonOptions.noChallenge, CommonOptions.untrustedKey,
                CommonOptions.mtu, CommonOptions.latency, CommonOptions.traffic, CommonOptions.garbage,
                CommonOptions.seed,
            ],
            discussion: """
                Prints DBUS_SYSTEM_BUS_ADDRESS=<address> on its first line: give that variable to another program
                (xtalk --backend platform, bleak, bluetoothctl) and it talks to the fake as to BlueZ. The fake
                follows BlueZ's D-Bus API (Adapter1 hci0, Device1, GattService1, GattCharacteristic1) and its
                signal order; its control interface com.xtalk.FakeBlueZ1 at /com/xtalk/FakeBlueZ has
                LoseLink(address, "timeout"|"remote"), SetPowered(on), HangUpWriteSockets(address) and
                FailNext(method, error).
                Needs dbus-daemon (Debian: dbus-daemon) unless --bus is given. Runs on the real clock only.
                """),
        endsOnInterrupt: true
    ) { arguments, context, printer throws(CLIError) in
        let settings: SimulatorSettings
        let given: String?
        let processingMs: Int?
        do throws(UsageError) {
            settings = try SimulatorSettings(arguments)
            given = try arguments[Self.bus]
            processingMs = try arguments[Self.processing]
        } catch {
            throw CLIError.usage(error)
        }
        guard context.virtualClock == nil else {
            throw CLIError(.failure, "fake-bluez runs on the real clock only (it serves other processes)")
        }
        var privateBus: PrivateBus?
        let address: String
        if let given {
            address = given
        } else {
            do {
                let started = try PrivateBus()
                privateBus = started
                address = started.address
            } catch {
                throw CLIError(.notReady, "could not start a private dbus-daemon: \(error)")
            }
        }
        defer { privateBus?.stop() }
        var devices = settings.devices()
        if let processingMs {
            for index in devices.indices { devices[index].firmware.processingDelay = .milliseconds(processingMs) }
        }
        let environment = context.makeEnvironment(devices: devices, seed: settings.seed)
        defer { environment.shutDown() }
        if let interval = settings.trafficInterval {
            for peripheral in environment.peripherals { peripheral.startRadioTraffic(every: interval, payloadSize: 16) }
        }
        if settings.garbage > 0 {
            for peripheral in environment.peripherals {
                peripheral.startLineNoise(every: .milliseconds(200), bytes: settings.garbage)
            }
        }
        let fake = FakeBlueZ(environment: environment)
        do {
            try await fake.start(busAddress: address)
        } catch {
            throw CLIError(.notReady, "could not serve org.bluez on \(address): \(error)")
        }
        defer { fake.stop() }
        context.writeOut("DBUS_SYSTEM_BUS_ADDRESS=\(address)")
        while true {
            do { try await context.sleep(for: .seconds(1)) } catch { throw CLIError(.interrupted, "interrupted") }
        }
    }
}
