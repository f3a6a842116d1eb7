import Foundation
import Testing
import XTalkTestSupport
import XTalkBleSdk
import XTalkFakeBlueZ
import XTalkSimulator

/// Writes without response through the socket BlueZ's AcquireWrite hands
/// over: the fast path, its flow control, BlueZ hanging it up, and every copy
/// of the descriptor closed when it is no longer used.
@Suite(
    "BlueZ AcquireWrite: writes through BlueZ's socket, a full socket, a hang-up, every descriptor closed",
    .enabled(if: dbusDaemonAvailable, dbusMissing), .serialized, .timeLimit(.minutes(2)))
@MainActor
struct BlueZWriteSocketTests {
    /// Writes go through the socket (no WriteValue at all); when the link
    /// ends, by the app or by loss, no descriptor of this process refers to
    /// either end any more; the next link acquires a new one.
    @Test("writes go through AcquireWrite's socket, and every copy of it is closed when the link ends")
    func writesThroughTheSocket() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let client = rig.client()
        _ = try await client.connectFirstDevice(rig: rig)
        #expect(try await client.runAtCommand("AT+PING=fd") == ["+PING:fd", "OK"])
        let payload = Data((0..<240).map { UInt8($0) })
        try await client.sendRfPayload(payload)
        #expect(rig.peripheral.transmittedFrames == [payload])
        #expect(rig.fake.callCounts["AcquireWrite"] == 1)
        #expect(rig.fake.callCounts["WriteValue"] == nil, "no write went by WriteValue")
        #expect(rig.fake.socketPacketCount >= 2)
        #expect(openSocketInodes().isSuperset(of: rig.fake.writeSocketInodes))

        client.disconnect()
        #expect(await eventually { openSocketInodes().isDisjoint(with: rig.fake.writeSocketInodes) })
        #expect(rig.fake.openWriteSocketCount == 0)

        _ = try await client.connectFirstDevice(rig: rig)
        #expect(try await client.runAtCommand("AT+PING=again") == ["+PING:again", "OK"])
        #expect(rig.fake.callCounts["AcquireWrite"] == 2)
        rig.fake.loseLink(address: "C0:FF:EE:00:00:01", reason: "remote")
        #expect(await eventually { client.connectionState == .disconnected })
        #expect(await eventually { openSocketInodes().isDisjoint(with: rig.fake.writeSocketInodes) })
        #expect(rig.fake.callCounts["WriteValue"] == nil)
        client.teardown()
    }

    /// A client that starts while the device is disconnected, after an
    /// earlier link: BlueZ's cached GATT objects carry no MTU then (it exists
    /// only while connected, and its change is signalled only on the link
    /// that made the objects). The writes must still use the link's MTU.
    @Test("a client started after an earlier link writes at the link's MTU, not 20 bytes at a time")
    func mtuOfALaterLink() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let first = rig.client()
        _ = try await first.connectFirstDevice(rig: rig)
        first.disconnect()
        #expect(await eventually { !rig.fake.isConnected(address: "C0:FF:EE:00:00:01") })
        first.teardown()

        let client = rig.client()
        _ = try await client.connectFirstDevice(rig: rig)
        #expect(try await client.runAtCommand("AT+PING=mtu") == ["+PING:mtu", "OK"])
        let before = rig.fake.socketPacketCount
        let payload = Data((0..<240).map { UInt8($0) })
        try await client.sendRfPayload(payload)
        #expect(rig.peripheral.transmittedFrames.last == payload)
        // "AT+SEND=" and 480 hex digits: 2 packets at MTU 247, 25 at MTU 23.
        let packets = rig.fake.socketPacketCount - before
        #expect((1...3).contains(packets), "\(packets) packets")
        client.teardown()
    }

    /// BlueZ asks for an ATT MTU of 517 by default, but no attribute value is
    /// longer than 512 bytes, and bluetoothd reads each AcquireWrite packet
    /// into 512 bytes: a packet of MTU − 3 = 514 would lose its last two. A
    /// long line goes in packets of at most 512, and every byte arrives.
    @Test("at MTU 517 a packet carries at most 512 bytes, and a long line arrives whole")
    func mtu517() async throws {
        var device = BlueZRig.device()
        device.link.mtu = 517
        let rig = try await BlueZRig.start(devices: [device])
        defer { rig.stop() }
        let client = rig.client()
        _ = try await client.connectFirstDevice(rig: rig)
        let before = rig.peripheral.hostBytesDelivered
        let command = "AT+" + String(repeating: "X", count: 700)  // no such command: the radio answers ERROR
        #expect(try await client.runAtCommand(command) == ["ERROR"])
        #expect(rig.peripheral.hostBytesDelivered - before == command.utf8.count + 2, "every byte and CR LF")
        #expect(try await client.runAtCommand("AT+PING=after") == ["+PING:after", "OK"])
        #expect(rig.fake.callCounts["WriteValue"] == nil)
        client.teardown()
    }

    /// At MTU 23 a 240-byte RF send is some 25 packets; a socket with the
    /// smallest send buffer holds a few (and the fake stops reading while the
    /// radio is behind): writes wait for room, then every byte arrives, in order.
    @Test("a full socket: the writes wait for room, and every send arrives whole and in order")
    func fullSocket() async throws {
        var device = BlueZRig.device()
        device.link.mtu = 23
        let rig = try await BlueZRig.start(devices: [device])
        defer { rig.stop() }
        rig.fake.writeSocketSendBuffer = 1
        let client = rig.client()
        _ = try await client.connectFirstDevice(rig: rig)
        let payloads = (0..<6).map { index in Data((0..<240).map { UInt8(truncatingIfNeeded: $0 * 7 + index) }) }
        for payload in payloads { try await client.sendRfPayload(payload) }
        #expect(rig.peripheral.transmittedFrames == payloads)
        #expect(rig.fake.socketPacketCount >= 6 * 24)
        #expect(rig.fake.callCounts["WriteValue"] == nil)
        #expect(try await client.runAtCommand("AT+PING=after") == ["+PING:after", "OK"])
        client.teardown()
    }

    /// BlueZ closes the socket in the middle of a send while the link stays:
    /// the packet the socket refused and the rest go by WriteValue, nothing is
    /// lost or reordered, the client's copy is closed, and later writes work.
    @Test("BlueZ hangs the socket up mid-send: the rest goes by WriteValue, nothing lost, the descriptor closed")
    func hungUp() async throws {
        var device = BlueZRig.device()
        device.link.mtu = 23
        let rig = try await BlueZRig.start(devices: [device])
        defer { rig.stop() }
        let client = rig.client()
        rig.fake.writeSocketSendBuffer = 1
        _ = try await client.connectFirstDevice(rig: rig)
        rig.fake.hangUpWriteSocketsAfterPackets = 10
        let payload = Data((0..<240).map { UInt8(255 - $0) })
        try await client.sendRfPayload(payload)
        #expect(rig.peripheral.transmittedFrames == [payload])
        #expect(rig.fake.socketPacketCount >= 10)
        #expect((rig.fake.callCounts["WriteValue"] ?? 0) > 0, "the rest went by WriteValue")
        #expect(await eventually { openSocketInodes().isDisjoint(with: rig.fake.writeSocketInodes) })
        #expect(try await client.runAtCommand("AT+PING=still") == ["+PING:still", "OK"])
        #expect(rig.fake.callCounts["AcquireWrite"] == 1, "not acquired again on this link")
        client.teardown()
    }

    /// BlueZ 5.50 answers AcquireWrite with a pipe (5.51 made it a socket
    /// pair), and send(2) fails on a pipe. The client lets it go and writes by
    /// WriteValue, which bluetoothd refuses ("Write acquired") until it
    /// notices the pipe closed: retried, never dropped.
    @Test("BlueZ 5.50's pipe: the writes go by WriteValue once bluetoothd lets go, nothing lost")
    func pipeOfBlueZ550() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        rig.fake.writeSocketsArePipes = true
        let client = rig.client()
        _ = try await client.connectFirstDevice(rig: rig)
        #expect(try await client.runAtCommand("AT+PING=pipe") == ["+PING:pipe", "OK"])
        let payload = Data((0..<240).map { UInt8($0 ^ 0x33) })
        try await client.sendRfPayload(payload)
        #expect(rig.peripheral.transmittedFrames == [payload])
        #expect(rig.fake.callCounts["AcquireWrite"] == 1, "not acquired again on this link")
        #expect((rig.fake.callCounts["WriteValue"] ?? 0) > 2)
        #expect(rig.fake.socketPacketCount == 0)
        client.teardown()
    }

    /// A BlueZ that refuses AcquireWrite (e.g. an older one, or a lock held
    /// by another program): writes go by WriteValue, and BlueZ's InProgress
    /// on them is retried, never reported.
    @Test("AcquireWrite refused: writes go by WriteValue, and InProgress on them is retried")
    func refused() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let client = rig.client()
        _ = try await client.connectFirstDevice(rig: rig)
        rig.fake.failNext("AcquireWrite", with: "NotPermitted", message: "Write acquired")
        rig.fake.failNext("WriteValue", with: "InProgress")
        #expect(try await client.runAtCommand("AT+PING=one") == ["+PING:one", "OK"])
        #expect(rig.fake.callCounts["AcquireWrite"] == 1)
        #expect((rig.fake.callCounts["WriteValue"] ?? 0) >= 2)
        #expect(rig.fake.socketPacketCount == 0)
        client.teardown()
    }
}

/// The inodes of the sockets this process holds a descriptor of.
func openSocketInodes() -> Set<UInt64> {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    var inodes = Set<UInt64>()
    for name in names {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name),
            target.hasPrefix("socket:["), let inode = UInt64(target.dropFirst(8).dropLast())
        else { continue }
        inodes.insert(inode)
    }
    return inodes
}

/// The backend seam itself (the client never mixes write types on one
/// characteristic; the bridge does): a write with response on the
/// characteristic whose socket is held releases the socket first, as BlueZ
/// refuses WriteValue while it is held, and both writes arrive in order.
@Suite("BlueZ backend: a write with response after AcquireWrite", .enabled(if: dbusDaemonAvailable, dbusMissing))
@MainActor
struct BlueZWriteTypeTests {
    @Test func writeWithResponseReleasesTheSocket() async throws {
        var device = BlueZRig.device()
        device.firmware.encoding = .plain
        let rig = try await BlueZRig.start(devices: [device])
        defer { rig.stop() }
        let backend = BlueZBackend(
            scheduler: ClockTimerScheduler(clock: ContinuousClock()), environment: rig.systemEnvironment)
        var events: [BleBackendEvent] = []
        backend.eventHandler = { events.append($0) }
        backend.activate(showPowerAlert: false, restoreIdentifier: nil)
        #expect(await eventually { backend.state == .poweredOn })
        backend.scanForPeripherals(withServices: [XTalkGatt.passthroughService])
        var found: UUID?
        #expect(
            await eventually {
                for case .discovered(let id, _, _) in events { found = id }
                return found != nil
            })
        let peripheral = try #require(found)
        backend.stopScan()
        backend.connect(peripheral)
        #expect(await eventually { events.contains { if case .connected = $0 { true } else { false } } })
        let tx = BleCharacteristicRef(service: XTalkGatt.passthroughService, characteristic: XTalkGatt.passthroughTX)

        backend.writeValue(Data("AT+PING=a\r\n".utf8), for: tx, of: peripheral, type: .withoutResponse)
        #expect(await eventually { rig.fake.socketPacketCount == 1 })
        backend.writeValue(Data("AT+PING=b\r\n".utf8), for: tx, of: peripheral, type: .withResponse)
        #expect(
            await eventually {
                events.contains { if case .writeCompleted(_, tx, nil) = $0 { true } else { false } }
            })
        #expect(!events.contains { if case .writeCompleted(_, _, .some) = $0 { true } else { false } })
        #expect(await eventually { rig.peripheral.processedCommands == ["AT+PING=a", "AT+PING=b"] })
        #expect(await eventually { openSocketInodes().isDisjoint(with: rig.fake.writeSocketInodes) })
        #expect(rig.fake.openWriteSocketCount == 0)
        backend.cancelPeripheralConnection(peripheral)
    }
}
