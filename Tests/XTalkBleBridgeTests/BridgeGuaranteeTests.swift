import Foundation
import Testing
import XTalkBleBridge
import XTalkBleSdk
import XTalkSimulator

/// Seed 004's guarantees, each through the router against the simulator's
/// OneKey-profile echo device, in virtual time.
@Suite("Low-level bridge: connect")
@MainActor
struct BridgeConnectTests {
    /// `connect` resolves only once the subscription is confirmed (here the
    /// user takes 2 s in the pairing dialog before it can be), then after the
    /// settle; the capacity is the MTU's, at most 244.
    @Test func resolvesOnlyAfterTheSubscriptionIsConfirmed() async throws {
        var device = XTalkSimulatedDevice.oneKeyEcho()
        device.gatt.pairing = .userPairs(after: .seconds(2))
        let rig = BridgeRig(devices: [device])
        _ = rig.request("init")
        _ = await rig.call("enumerate")
        let connect = rig.request("connect", rig.params())
        await rig.clock.advance(by: .milliseconds(1_900))
        #expect(rig.device.isConnected)
        #expect(rig.reply(to: connect) == nil, "not before the subscription")
        let capacity = await rig.call("getProtocolV2PacketCapacity", rig.params())
        #expect(capacity?.isNull == true, "no capacity while not ready")
        #expect(await rig.await(connect)?.isNull == true)
        #expect(await rig.call("getProtocolV2PacketCapacity", rig.params())?.result as? Int == 244)
    }

    /// The first connect of a device that pairs waits for the user in iOS's
    /// pairing dialog: 25 s there is not a timeout (the connect bound, 15 s,
    /// ends at the subscription; the subscription has 35 s, more than
    /// Bluetooth's own 30 s pairing limit). A dialog nobody answers ends
    /// with 713, the link cancelled.
    @Test(arguments: [(Duration.seconds(25), nil), (.seconds(60), 713)] as [(Duration, Int?)])
    func theUserTakesTimeToPair(takes: Duration, code: Int?) async throws {
        var device = XTalkSimulatedDevice.oneKeyEcho()
        device.gatt.pairing = .userPairs(after: takes)
        let rig = BridgeRig(devices: [device])
        _ = rig.request("init")
        _ = await rig.call("enumerate")
        let connect = rig.request("connect", rig.params())
        let reply = try #require(await rig.await(connect, within: .seconds(90)))
        #expect(reply.code == code, "\(reply.line)")
        if code == nil {
            #expect(await rig.call("send", rig.params("\"data\":\"0a\""))?.isNull == true)
            #expect(await rig.call("receive", rig.params())?.hex == "0a")
        } else {
            #expect(reply.line.contains("pairing dialog"), "\(reply.line)")
            #expect(!rig.device.isConnected, "the link was cancelled")
        }
    }

    /// Right after the subscription the MTU may still read 23 (capacity 20):
    /// re-read after the settle, up to twice.
    @Test(arguments: [(Duration.milliseconds(250), 244), (Duration.seconds(20), 20)])
    func rereadsACapacityOf20(exchange: Duration, expected: Int) async throws {
        var device = XTalkSimulatedDevice.oneKeyEcho()
        device.link.mtuExchangeDelay = exchange
        let rig = BridgeRig(devices: [device])
        try await rig.connect()
        #expect(await rig.call("getProtocolV2PacketCapacity", rig.params())?.result as? Int == expected)
    }

    /// `connect` of a ready device: a new session on the same link (the
    /// parked receive is rejected, queued chunks go).
    @Test func connectingAReadyDeviceStartsANewSession() async throws {
        let rig = BridgeRig()
        try await rig.connect()
        rig.device.notify(Data([0xAA]))  // queued: never received
        await rig.clock.advance(by: .milliseconds(100))
        #expect(await rig.call("connect", rig.params())?.isNull == true)
        let parked = rig.request("receive", rig.params())
        await rig.clock.advance(by: .milliseconds(100))
        #expect(rig.reply(to: parked) == nil, "the chunk of the old session is gone")
        #expect(await rig.call("connect", rig.params())?.isNull == true)
        #expect(rig.reply(to: parked)?.code == 720, "the receive parked in the old session is rejected")
        #expect(rig.device.connections == 1, "the link was kept")
        rig.device.notify(Data([0xDD]))
        #expect(await rig.call("receive", rig.params())?.hex == "dd")
    }

    @Test(arguments: BridgeConnectFailure.allCases)
    func aFailedStepRejectsWithItsCodeAndCancelsTheLink(failure: BridgeConnectFailure) async throws {
        var device = XTalkSimulatedDevice.oneKeyEcho()
        failure.apply(&device)
        let rig = BridgeRig(devices: [device])
        _ = rig.request("init")
        _ = await rig.call("enumerate")
        let reply = await rig.call("connect", rig.params())
        #expect(reply?.code == failure.code, "\(reply?.line ?? "no reply")")
        await rig.clock.advance(by: .seconds(1))
        #expect(!rig.device.isConnected, "the link was cancelled")
        #expect(rig.bridge.pendingRequestCount == 0)
    }

    /// OneKey's apps store the device's id and connect with it after a
    /// relaunch, without searching first: the system still knows the device.
    @Test func aKnownDeviceConnectsWithoutAnEnumerateInThisProcess() async throws {
        let rig = BridgeRig()
        rig.device.isBonded = true  // paired before: the system knows it by its identifier
        _ = rig.request("init")
        #expect(await rig.call("connect", rig.params())?.isNull == true)
        #expect(await rig.call("send", rig.params("\"data\":\"0a0b\""))?.isNull == true)
        #expect(await rig.call("receive", rig.params())?.hex == "0a0b")
        // A connected device does not advertise: enumerate lists it as connected through the bridge.
        let list = try #require(await rig.call("enumerate")?.result as? [[String: Any]])
        #expect(list.compactMap { $0["id"] as? String } == [rig.device.id.uuidString])
    }

    @Test func anUnknownDeviceIsRejected() async {
        let rig = BridgeRig()
        _ = rig.request("init")
        let reply = await rig.call("connect", "{\"uuid\":\"\(UUID().uuidString)\"}")
        #expect(reply?.code == 704)
        #expect(await rig.call("connect", "{\"uuid\":\"not-a-uuid\"}")?.code == 704)
    }
}

enum BridgeConnectFailure: CaseIterable, CustomTestStringConvertible {
    case noService, noWriteCharacteristic, noNotifyCharacteristic, refusedSubscription, pairingCancelled
    case connectionNeverCompletes, peerRemovedPairing, authenticationInsufficient

    var code: Int {
        switch self {
        case .noService: 706
        case .noWriteCharacteristic, .noNotifyCharacteristic: 707
        case .refusedSubscription: 709
        case .pairingCancelled, .authenticationInsufficient: 705
        case .connectionNeverCompletes: 713
        case .peerRemovedPairing: 719
        }
    }

    func apply(_ device: inout XTalkSimulatedDevice) {
        switch self {
        case .noService:
            device.gatt.hasPassthroughService = false
            device.advertisesPassthroughService = true
        case .noWriteCharacteristic: device.gatt.hasPassthroughTX = false
        case .noNotifyCharacteristic: device.gatt.hasPassthroughRX = false
        case .refusedSubscription: device.gatt.subscriptionRefusal = "Write not permitted"
        case .pairingCancelled: device.gatt.pairing = .userCancels(after: .seconds(1))
        case .connectionNeverCompletes: device.link.connectionNeverCompletes = true
        case .peerRemovedPairing: device.gatt.pairing = .peerRemovedPairing
        case .authenticationInsufficient: device.gatt.subscriptionRefusal = "Authentication is insufficient."
        }
    }

    var testDescription: String { "\(self)" }
}

@Suite("Low-level bridge: send and receive")
@MainActor
struct BridgeIOTests {
    /// Malformed hex is refused before any byte is written.
    @Test(arguments: ["", "0", "abc", "0x00", "00 11", "zz", "00\n", "０１", "-1"])
    func malformedHexIsRefusedBeforeAnyWrite(hex: String) async throws {
        let rig = BridgeRig()
        try await rig.connect()
        let reply = await rig.call("send", rig.params("\"data\":\(BridgeJSON.quoted(hex))"))
        #expect(reply?.code == 710, "\(reply?.line ?? "no reply")")
        #expect(!(reply?.line.contains(hex) ?? true) || hex.isEmpty || hex == "0", "the payload is not echoed")
        await rig.clock.advance(by: .milliseconds(200))
        #expect(rig.device.record.hostWrites.isEmpty, "nothing was written")
    }

    /// A payload longer than the capacity is cut into capacity-sized writes
    /// (never padded); the echo device returns each write as one chunk, and
    /// each receive gets one chunk unchanged, in order.
    @Test func longPayloadsAreCutAtTheCapacityAndChunksComeBackUnchanged() async throws {
        let rig = BridgeRig()
        try await rig.connect()
        let payload = Data((0..<600).map { UInt8(truncatingIfNeeded: $0 * 31 + 7) })
        #expect(await rig.call("send", rig.params("\"data\":\"\(hex(payload))\""))?.isNull == true)
        var chunks: [Data] = []
        for _ in 0..<3 {
            let reply = try #require(await rig.call("receive", rig.params()))
            chunks.append(try #require(Data(hexString: reply.hex ?? "")))
        }
        #expect(chunks.map(\.count) == [244, 244, 112])
        #expect(chunks.reduce(Data(), +) == payload)
    }

    /// Sends to one device keep their order; a receive that waits does not hold up a send.
    @Test func sendsKeepTheirOrderAndAParkedReceiveDoesNotBlockThem() async throws {
        let rig = BridgeRig()
        try await rig.connect()
        let parked = rig.request("receive", rig.params())
        let sends = (0..<5).map { index in
            rig.request("send", rig.params("\"data\":\"\(String(format: "%02x", index))0102\""))
        }
        for send in sends { #expect(await rig.await(send)?.isNull == true) }
        #expect(await rig.await(parked)?.hex == "000102")
        for index in 1..<5 {
            #expect(await rig.call("receive", rig.params())?.hex == String(format: "%02x0102", index))
        }
    }

    /// The requested write mode is honoured; a mode the characteristic lacks is refused.
    @Test func theWriteModeIsHonoured() async throws {
        var device = XTalkSimulatedDevice.oneKeyEcho()
        device.gatt.txSupportsWriteWithoutResponse = false
        let rig = BridgeRig(devices: [device])
        try await rig.connect()
        let refused = await rig.call("send", rig.params("\"data\":\"3f23\""))
        #expect(refused?.code == 710, "the default (without response) is not offered: \(refused?.line ?? "")")
        let written = await rig.call("send", rig.params("\"data\":\"3f23\",\"options\":{\"withoutResponse\":false}"))
        #expect(written?.isNull == true)
        #expect(await rig.call("receive", rig.params())?.hex == "3f23")
        let bad = await rig.call("send", rig.params("\"data\":\"00\",\"options\":{\"withoutResponse\":1}"))
        #expect(bad?.code == 710)
    }

    /// Without response respects flow control, and a ready callback that
    /// never comes does not stall the send.
    @Test func writesWithoutResponseSurviveLostReadyCallbacks() async throws {
        var device = XTalkSimulatedDevice.oneKeyEcho()
        device.link.writeWithoutResponseCredits = 2
        device.link.lostReadyCallbacksOneIn = 1
        let rig = BridgeRig(devices: [device])
        try await rig.connect()
        let payload = Data((0..<2_048).map { UInt8(truncatingIfNeeded: $0) })
        #expect(await rig.call("send", rig.params("\"data\":\"\(hex(payload))\""))?.isNull == true)
        var received = Data()
        while received.count < payload.count {
            let reply = try #require(await rig.call("receive", rig.params()))
            received += try #require(Data(hexString: reply.hex ?? ""))
        }
        #expect(received == payload)
        #expect(rig.device.droppedWrites == 0, "no write was made without a credit")
    }

    @Test func receiveOnADeviceThatIsNotReadyIsRejectedAtOnce() async {
        let rig = BridgeRig()
        _ = rig.request("init")
        _ = await rig.call("enumerate")
        let id = rig.request("receive", rig.params())
        await rig.clock.advance(by: .zero)
        #expect(rig.reply(to: id)?.code == 720)
    }

    /// The JavaScript transport abandons a timed-out receive without
    /// cancelling it: the next receive rejects it, and the chunk goes to the new one.
    @Test func anAbandonedReceiveNeverGetsAChunk() async throws {
        let rig = BridgeRig()
        try await rig.connect()
        let abandoned = rig.request("receive", rig.params())
        await rig.clock.advance(by: .seconds(1))
        let fresh = rig.request("receive", rig.params())
        #expect(rig.reply(to: abandoned)?.code == 713)
        rig.device.notify(Data([1, 2, 3]))
        #expect(await rig.await(fresh)?.hex == "010203")
        #expect(rig.replies[abandoned]?.count == 1)
    }

    /// Unread notifications are bounded in bytes: past the limit the link
    /// ends with an error, never a silent drop.
    @Test func overflowEndsTheLink() async throws {
        var settings = BridgeDeviceMachine.Settings()
        settings.receiveQueueByteLimit = 1_000
        let rig = BridgeRig(settings: settings)
        try await rig.connect()
        for _ in 0..<5 { rig.device.notify(Data(repeating: 0x55, count: 244)) }
        await rig.clock.advance(by: .milliseconds(200))
        #expect(!rig.device.isConnected)
        let reply = await rig.call("receive", rig.params())
        #expect(reply?.code == 720)
    }
}

@Suite("Low-level bridge: disconnects, Bluetooth's state, two devices, the router")
@MainActor
struct BridgeLifecycleTests {
    /// Link loss: pending receive and send are rejected with 720, the queue is
    /// emptied, and a reconnect never sees a chunk of the old connection.
    @Test(arguments: [false, true])
    func linkLossAndDisconnectRejectEverythingAndLeaveNothingStale(byHost: Bool) async throws {
        var device = XTalkSimulatedDevice.oneKeyEcho()
        device.link.connectionInterval = .milliseconds(30)
        let rig = BridgeRig(devices: [device])
        try await rig.connect()
        rig.device.notify(Data([0xEE]))  // will be queued, then stale
        await rig.clock.advance(by: .milliseconds(100))
        let send = rig.request("send", rig.params("\"data\":\"\(String(repeating: "ab", count: 2_000))\""))
        if byHost {
            #expect(await rig.call("disconnect", rig.params())?.isNull == true)
        } else {
            rig.device.disconnect(.terminatedByDevice)
        }
        let sendReply = await rig.await(send)
        #expect(sendReply?.code == 720 || sendReply?.isNull == true)
        #expect(await rig.call("receive", rig.params())?.code == 720)
        #expect(await rig.call("connect", rig.params())?.isNull == true)
        let fresh = rig.request("receive", rig.params())
        await rig.clock.advance(by: .milliseconds(500))
        #expect(rig.reply(to: fresh) == nil, "no chunk of the old connection")
        rig.device.notify(Data([0x01]))
        #expect(await rig.await(fresh)?.hex == "01")
        #expect(rig.bridge.pendingRequestCount == 0)
    }

    @Test(arguments: [
        (XTalkSimulatedBluetoothState.poweredOff, 721), (.unsupported, 722),
    ])
    func bluetoothUnusableAnswersFromEveryCall(state: XTalkSimulatedBluetoothState, code: Int) async {
        let rig = BridgeRig()
        rig.environment.setBluetoothState(state)
        #expect(await rig.call("init")?.isNull == true, "init never fails")
        for method in ["enumerate", "connect", "send", "receive"] {
            let reply = await rig.call(method, rig.params("\"data\":\"00\""))
            #expect(reply?.code == code, "\(method): \(reply?.line ?? "no reply")")
        }
    }

    /// While the state is not known (a permission prompt still open, a stack
    /// restarting), a call waits for it, bounded, and then says why it failed:
    /// a timeout (713), not "powered off" (721), which would send the user to
    /// turn on a Bluetooth that may well be on.
    @Test func aStateThatStaysUnknownAnswersAfterItsWait() async {
        let rig = BridgeRig()
        rig.environment.setBluetoothState(.resetting)
        let parked = rig.request("enumerate")
        await rig.clock.advance(by: .seconds(29))
        #expect(rig.reply(to: parked) == nil, "still waiting for Bluetooth's state")
        let reply = await rig.await(parked)
        #expect(reply?.code == 713)
        #expect(reply?.line.contains("permission prompt") == true, "\(reply?.line ?? "no reply")")
        #expect(rig.bridge.pendingRequestCount == 0)
    }

    /// A user who reads the permission prompt before answering it (12 s
    /// here): the call made meanwhile goes on once Bluetooth is allowed.
    @Test func aSlowAnswerToThePermissionPromptStillCounts() async throws {
        let rig = BridgeRig()
        rig.environment.authorization = .notDetermined
        _ = rig.request("init")
        let parked = rig.request("enumerate")
        await rig.clock.advance(by: .seconds(12))
        #expect(rig.reply(to: parked) == nil, "waiting for the user")
        rig.environment.answerPermissionPrompt(allow: true)
        let reply = try #require(await rig.await(parked))
        let devices = try #require(reply.result as? [[String: Any]], "\(reply.line)")
        #expect(devices.count == 1)
    }

    /// Seed 004: "Handle denied, restricted and powered-off states before
    /// scanning." A restriction (Screen Time, a device profile) asks nobody.
    @Test(arguments: [XTalkSimulatedAuthorization.denied, .restricted])
    func permissionRefusedIs701(_ authorization: XTalkSimulatedAuthorization) async {
        let rig = BridgeRig()
        rig.environment.authorization = authorization
        _ = rig.request("init")
        for method in ["enumerate", "connect", "send", "receive"] {
            let reply = await rig.call(method, rig.params("\"data\":\"00\""))
            #expect(reply?.code == 701, "\(method): \(reply?.line ?? "no reply")")
        }
        #expect(rig.environment.permissionPromptsShown == 0)
    }

    /// The first call shows the permission prompt and waits for the user's
    /// answer: allowed, the call goes on; refused, it is 701.
    @Test(arguments: [true, false])
    func aCallWaitsForThePermissionPrompt(allow: Bool) async throws {
        let rig = BridgeRig()
        rig.environment.authorization = .notDetermined
        _ = rig.request("init")
        let parked = rig.request("enumerate")
        await rig.clock.advance(by: .seconds(2))
        #expect(rig.environment.permissionPromptsShown == 1)
        #expect(rig.reply(to: parked) == nil, "waiting for the user")
        rig.environment.answerPermissionPrompt(allow: allow)
        let reply = try #require(await rig.await(parked))
        if allow {
            let devices = try #require(reply.result as? [[String: Any]], "\(reply.line)")
            #expect(devices.count == 1)
        } else {
            #expect(reply.code == 701, "\(reply.line)")
        }
    }

    /// The platform refuses the scan (BlueZ answers StartDiscovery with an
    /// error): `enumerate` is 700 (BleScanError) with the platform's words, and
    /// the next one, the fault gone, lists the device.
    @Test(.enabled(if: BridgeRig.backendName != "corebluetooth", "CoreBluetooth never reports a failed scan"))
    func aRefusedScanIs700() async throws {
        let rig = BridgeRig()
        rig.environment.scanFailure = "org.bluez.Error.NotReady: Resource Not Ready"
        _ = rig.request("init")
        let refused = try #require(await rig.call("enumerate"))
        #expect(refused.code == 700, "\(refused.line)")
        #expect(refused.line.contains("Resource Not Ready"), "\(refused.line)")
        rig.environment.scanFailure = nil
        let list = try #require(await rig.call("enumerate"))
        #expect((list.result as? [[String: Any]])?.count == 1, "\(list.line)")
    }

    /// The user turns Bluetooth off for the app in Settings while it is connected.
    @Test func permissionRevokedMidSessionRejectsPendingWork() async throws {
        let rig = BridgeRig()
        try await rig.connect()
        let parked = rig.request("receive", rig.params())
        rig.environment.authorization = .denied
        #expect(await rig.await(parked)?.code == 701)
        #expect(await rig.call("send", rig.params("\"data\":\"00\""))?.code == 701)
    }

    @Test func bluetoothTurnedOffMidSessionRejectsPendingWork() async throws {
        let rig = BridgeRig()
        try await rig.connect()
        let parked = rig.request("receive", rig.params())
        rig.environment.setBluetoothState(.poweredOff)
        #expect(await rig.await(parked)?.code == 721)
    }

    /// Two devices at once: separate queues.
    @Test func twoDevicesKeepSeparateQueues() async throws {
        let rig = BridgeRig(devices: [.oneKeyEcho(name: "A"), .oneKeyEcho(name: "B")])
        _ = rig.request("init")
        let list = try #require(await rig.call("enumerate"))
        let devices = try #require(list.result as? [[String: Any]])
        #expect(Set(devices.compactMap { $0["name"] as? String }) == ["A", "B"])
        #expect(devices.allSatisfy { $0["commType"] as? String == "ble" })
        let ids = rig.environment.peripherals.map(\.id.uuidString)
        for id in ids { #expect(await rig.call("connect", "{\"uuid\":\"\(id)\"}")?.isNull == true) }
        #expect(await rig.call("send", "{\"uuid\":\"\(ids[0])\",\"data\":\"0a\"}")?.isNull == true)
        #expect(await rig.call("send", "{\"uuid\":\"\(ids[1])\",\"data\":\"0b\"}")?.isNull == true)
        #expect(await rig.call("receive", "{\"uuid\":\"\(ids[1])\"}")?.hex == "0b")
        #expect(await rig.call("receive", "{\"uuid\":\"\(ids[0])\"}")?.hex == "0a")
    }

    /// Older transports of the JavaScript SDK call `receive()` with no id
    /// (its type says `receive: (uuid?: string)`): the one connected device is
    /// meant. With none or two connected, the call says so (720) and takes
    /// no device's chunk.
    @Test func aReceiveWithoutAnIdReadsTheOneConnectedDevice() async throws {
        let rig = BridgeRig(devices: [.oneKeyEcho(name: "A"), .oneKeyEcho(name: "B")])
        _ = rig.request("init")
        _ = try #require(await rig.call("enumerate"))
        let ids = rig.environment.peripherals.map(\.id.uuidString)
        let none = await rig.call("receive")
        #expect(none?.code == 720, "\(none?.line ?? "no reply")")
        #expect(none?.error?.message.contains("none is connected") == true, "\(none?.line ?? "no reply")")
        #expect(await rig.call("connect", "{\"uuid\":\"\(ids[0])\"}")?.isNull == true)
        #expect(await rig.call("send", "{\"uuid\":\"\(ids[0])\",\"data\":\"0a\"}")?.isNull == true)
        #expect(await rig.call("receive")?.hex == "0a")
        // `uuid: null` is no id too; this receive waits for the device's next chunk.
        let parked = rig.request("receive", "{\"uuid\":null}")
        #expect(await rig.call("send", "{\"uuid\":\"\(ids[0])\",\"data\":\"0b\"}")?.isNull == true)
        #expect(await rig.await(parked)?.hex == "0b")
        // Two connected: which one is not for the bridge to guess.
        #expect(await rig.call("connect", "{\"uuid\":\"\(ids[1])\"}")?.isNull == true)
        #expect(await rig.call("send", "{\"uuid\":\"\(ids[0])\",\"data\":\"0c\"}")?.isNull == true)
        let two = await rig.call("receive")
        #expect(two?.code == 720, "\(two?.line ?? "no reply")")
        #expect(two?.error?.message.contains("2 are connected") == true, "\(two?.line ?? "no reply")")
        #expect(await rig.call("receive", "{\"uuid\":\"\(ids[0])\"}")?.hex == "0c", "the chunk is still there")
        #expect(rig.bridge.pendingRequestCount == 0)
    }

    /// A page that names ever new ids (`receive`, `send` or `disconnect` of
    /// a device never connected; `connect` with a stored id the system does
    /// not know) gets each one answered and leaves nothing behind; a device
    /// whose link ended is forgotten too, and connects again as before.
    @Test func idsNamedInVainLeaveNothingBehind() async throws {
        let rig = BridgeRig()
        _ = rig.request("init")
        for _ in 0..<200 {
            let id = "{\"uuid\":\"\(UUID().uuidString)\",\"data\":\"00\"}"
            #expect(await rig.call("receive", id)?.code == 720)
            #expect(await rig.call("send", id)?.code != nil)
            #expect(await rig.call("disconnect", id)?.isNull == true)
            #expect(await rig.call("connect", id)?.code == 704)
        }
        #expect(rig.bridge.machineCount == 0)
        #expect(rig.bridge.knownDeviceCount == 0)
        #expect(rig.bridge.pendingRequestCount == 0)
        // A device connected, then disconnected: forgotten, and its next session is a new one.
        #expect((await rig.call("enumerate")?.result as? [[String: Any]])?.count == 1)
        for round in 0..<3 {
            #expect(await rig.call("connect", rig.params())?.isNull == true, "round \(round)")
            #expect(rig.bridge.machineCount == 1)
            rig.device.notify(Data([UInt8(round)]))
            await rig.clock.advance(by: .milliseconds(100))
            #expect(await rig.call("receive", rig.params())?.hex == String(format: "%02x", round))
            rig.device.notify(Data([0xEE]))  // never read: must not reach the next session
            await rig.clock.advance(by: .milliseconds(100))
            #expect(await rig.call("disconnect", rig.params())?.isNull == true)
            #expect(rig.bridge.machineCount == 0)
        }
        #expect(rig.bridge.knownDeviceCount == 1, "a device the scan heard stays listed by name")
    }

    /// The id of a request too long to keep, from its head: the top-level
    /// "id" only, and only when its number ends within the head.
    @Test(
        arguments: [
            (#"{"id":41,"method":"send","params":{"data":"ab"#, 41.0),
            (#" { "method" : "send" , "id" : -2.5e1 ,"params":{"#, -25),
            (#"{"method":"send","params":{"id":3,"data":"ab"},"id":9}"#, 9),
            (#"{"method":"a\"},\"id\":7","id":3,"x":"#, 3),
            (#"{"idx":5,"xid":6,"i":7,"id":8}"#, 8),
            (#"{"i\"d":5,"i\\d":6,"x":"#, nil),
            (#"{"id":41"#, nil),
            (#"{"id":"41","method":"#, nil),
            (#"{"params":{"data":"abab"#, nil),
            (#"[{"id":1}]"#, nil),
            (#"x{"id":1}"#, nil),
            (#"{"id":,"#, nil),
        ] as [(String, Double?)])
    func theIDOfAnOverlongRequestComesFromItsHead(head: String, id: Double?) {
        #expect(BridgeJSON.leadingID(Array(head.utf8)) == id)
    }

    @Test func badRequestsAreAnsweredWithTheirID() async {
        let rig = BridgeRig()
        var lines: [String] = []
        for text in ["not json", "{}", "{\"id\":true,\"method\":\"version\"}", "[1]"] {
            rig.router.handle(Array(text.utf8)) { lines.append($0) }
        }
        #expect(lines.count == 4)
        #expect(lines.allSatisfy { $0.hasPrefix("{\"id\":null,\"error\":{\"code\":900,") })
        // Longer than any request OneKey's SDK makes (a V2 frame's piece is some
        // kilobytes): refused, with its own id (hosts match replies by id).
        let huge =
            "{\"id\":41,\"method\":\"send\",\"params\":{\"uuid\":\"x\",\"data\":\""
            + String(repeating: "ab", count: 600_000) + "\"}}"
        var hugeReply: String?
        rig.router.handle(Array(huge.utf8)) { hugeReply = $0 }
        #expect(hugeReply?.hasPrefix("{\"id\":41,\"error\":{\"code\":900,") == true, "\(hugeReply ?? "none")")
        #expect(hugeReply?.contains("more than 1 MiB") == true)
        #expect(await rig.call("nothing")?.code == 900)
        let version = await rig.call("version")
        #expect(version?.result as? String == "1.0.0")
        #expect(version?.line.hasPrefix("{\"id\":") == true)
    }
}

private func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

extension Data {
    init?(hexString: String) {
        guard hexString.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = hexString.startIndex
        while index < hexString.endIndex {
            let next = hexString.index(index, offsetBy: 2)
            guard let byte = UInt8(hexString[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}

/// CI runs this suite twice: as is, and with `XTALK_BACKEND=corebluetooth`
/// (the CoreBluetooth backend over the stand-in, driven by the simulator).
@Test("the bridge suite runs through the backend XTALK_BACKEND names")
@MainActor
func bridgeRunsThroughTheNamedBackend() async throws {
    let rig = BridgeRig()
    switch BridgeRig.backendName {
    case "simulator": #expect(!(rig.bridge.backend is CoreBluetoothBackend))
    case "corebluetooth": #expect(rig.bridge.backend is CoreBluetoothBackend)
    default: Issue.record("XTALK_BACKEND=\(BridgeRig.backendName) is not a backend this suite knows")
    }
    try await rig.connect()
}

/// The public router (`XTalkBleBridgeRouter`) answers as the package's: JSON text in, JSON text out.
@Test("XTalkBleBridgeRouter, the public entry for a host of one's own, answers the contract")
@MainActor
func publicRouterAnswers() async throws {
    let clock = XTalkVirtualClock()
    let environment = XTalkSimulatedEnvironment(devices: [.oneKeyEcho()], clock: clock)
    let router = XTalkBleBridgeRouter(backend: environment.backend)
    var replies: [String] = []
    router.handle("{\"id\":1,\"method\":\"version\"}") { replies.append($0) }
    router.handle("{\"id\":2,\"method\":\"enumerate\"}") { replies.append($0) }
    for _ in 0..<300 where replies.count < 2 { await clock.advance(by: .milliseconds(10)) }
    #expect(replies.first == "{\"id\":1,\"result\":\"1.0.0\"}")
    #expect(replies.last?.contains("\"commType\":\"ble\"") == true)
    #expect(replies.last?.contains(environment.peripherals[0].id.uuidString) == true)
}
