import Foundation
import XTalkBleSdk
import XTalkSimulator

// The `xtalk` tool. Until the client-based demo lands, `xtalk demo` runs a
// session against the built-in simulated device on the real clock: it scans,
// connects, subscribes to the passthrough and prints the device's answers to
// a few AT commands, straight off the simulated BLE link.

@MainActor
final class SimulatorSession {
    let environment = XTalkSimulatedEnvironment(devices: [XTalkSimulatedDevice()])
    private var backend: any BleBackend { environment.backend }
    private var received: [UInt8] = []
    private var events: [BleBackendEvent] = []
    private let started = ContinuousClock.now

    init() {
        environment.backend.eventHandler = { [weak self] event in
            guard let self else { return }
            self.events.append(event)
            if case .valueUpdated(_, let characteristic, let value?, nil) = event,
               characteristic.characteristic == XTalkGatt.passthroughRX {
                self.received += value
            }
        }
    }

    private var timestamp: String {
        let ms = Int((ContinuousClock.now - started) / .milliseconds(1))
        return String(format: "%6d ms", ms)
    }

    /// Waits (on the real clock) until an event matches, or fails after `timeout`.
    private func await(_ what: String, timeout: Duration = .seconds(3), _ match: (BleBackendEvent) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !events.contains(where: match) {
            guard ContinuousClock.now < deadline else { throw SessionError(message: "timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
        events.removeAll()
    }

    func run() async throws {
        try await self.await("Bluetooth") { if case .stateChanged(.poweredOn) = $0 { true } else { false } }
        backend.scanForPeripherals(withServices: [XTalkGatt.passthroughService])
        var peripheral: UUID?
        try await self.await("a device") { event in
            guard case .discovered(let id, let advertisement, let rssi) = event else { return false }
            print("\(timestamp)  found \(advertisement.localName ?? "?")  RSSI \(rssi) dBm")
            peripheral = id
            return true
        }
        backend.stopScan()
        guard let id = peripheral else { throw SessionError(message: "no device") }
        backend.connect(id)
        try await self.await("the connection") { if case .connected = $0 { true } else { false } }
        print("\(timestamp)  connected")
        let rx = BleCharacteristicRef(service: XTalkGatt.passthroughService, characteristic: XTalkGatt.passthroughRX)
        let tx = BleCharacteristicRef(service: XTalkGatt.passthroughService, characteristic: XTalkGatt.passthroughTX)
        backend.setNotifyValue(true, for: rx, of: id)
        try await self.await("the subscription") { if case .notificationStateUpdated(_, _, true, nil) = $0 { true } else { false } }
        print("\(timestamp)  passthrough ready (xor firmware)")
        for command in ["AT", "AT+VER?", "AT+AUTH?", "AT+ID?", "AT+PING=hello", "AT+SEND=48656C6C6F"] {
            received.removeAll()
            print("\(timestamp)  > \(command)")
            let line = Array((command + "\r\n").utf8).map { $0 ^ 0x5A }
            var offset = 0
            while offset < line.count {
                let size = backend.maximumWriteValueLength(for: .withoutResponse, of: id)
                let end = min(line.count, offset + max(1, size))
                backend.writeValue(Data(line[offset..<end]), for: tx, of: id, type: .withoutResponse)
                offset = end
            }
            let expectsSendFinished = command.hasPrefix("AT+SEND=")
            let deadline = ContinuousClock.now + .seconds(2)
            while ContinuousClock.now < deadline {
                let text = String(decoding: received.map { $0 ^ 0x5A }, as: UTF8.self)
                if text.hasSuffix(expectsSendFinished ? "+SENDFIN:OK\r\n" : "OK\r\n") || text.hasSuffix("ERROR\r\n") { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            let text = String(decoding: received.map { $0 ^ 0x5A }, as: UTF8.self)
            let lines = text.split(separator: "\r\n")
            guard !lines.isEmpty else { throw SessionError(message: "no answer to \(command)") }
            for line in lines { print("\(timestamp)  < \(line)") }
        }
        backend.cancelPeripheralConnection(id)
        try await self.await("the disconnect") { if case .disconnected = $0 { true } else { false } }
        print("\(timestamp)  disconnected")
        environment.shutDown()
    }
}

struct SessionError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "demo":
    do {
        try await SimulatorSession().run()
        print("simulator session passed")
    } catch {
        FileHandle.standardError.write(Data("xtalk demo failed: \(error)\n".utf8))
        exit(1)
    }
default:
    print("""
        usage: xtalk demo    run a session against the built-in simulated xTalk device
        """)
    exit(arguments.isEmpty ? 0 : 64)
}
