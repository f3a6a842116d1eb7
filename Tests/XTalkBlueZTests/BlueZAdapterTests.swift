import Foundation
import Testing
import XTalkTestSupport
import XTalkBleSdk
import XTalkFakeBlueZ
import XTalkSimulator

/// Gateways with more than one adapter (a built-in controller and a USB
/// dongle), adapters that come late (bluetoothd at boot owns its name before
/// the kernel hands it a controller) and adapters unplugged.
@Suite(
    "BlueZ adapters: several, added late, unplugged",
    .enabled(if: dbusDaemonAvailable, dbusMissing), .serialized, .timeLimit(.minutes(2)))
@MainActor
struct BlueZAdapterTests {
    @Test("the first adapter is off and another is on (an rfkilled hci0, a USB dongle): the powered one is used")
    func poweredAdapterIsUsed() async throws {
        let rig = try await BlueZRig.start(adapter: "hci1") { $0.addIdleAdapter("hci0", powered: false) }
        defer { rig.stop() }
        let client = rig.client()
        _ = try await client.connectFirstDevice(rig: rig)
        #expect(try await client.runAtCommand("AT+PING=hci1") == ["+PING:hci1", "OK"])
        client.teardown()
    }

    @Test("the adapter in use is powered off while another is on: the running scan goes on with the other")
    func scanMovesToAnotherAdapter() async throws {
        let rig = try await BlueZRig.start(adapter: "hci1") { $0.addIdleAdapter("hci0", powered: true) }
        defer { rig.stop() }
        let client = rig.client()
        var states: [XTalkConnectionState] = []
        client.onEvent = { event in if case .connectionStateChanged(let state) = event { states.append(state) } }
        client.startScan()
        // Both are on: the first, which hears nothing, is used.
        #expect(await eventually { rig.fake.isDiscovering(adapter: "hci0") })
        #expect(!rig.fake.isDiscovering(adapter: "hci1"))
        rig.fake.setPowered(false, adapter: "hci0")
        #expect(await eventually { !client.scanResults.isEmpty })
        #expect(client.connectionState == .scanning)
        #expect(states == [.scanning], "the app saw the scan go on, not fail: \(states)")
        #expect(client.bluetoothUnavailableReason == nil)
        client.connect(id: try #require(client.scanResults.first).id)
        #expect(await eventually { client.atReady })
        #expect(try await client.runAtCommand("AT+PING=moved") == ["+PING:moved", "OK"])
        client.teardown()
    }

    @Test("bluetoothd has no adapter yet (at boot): a scan waits for it, then finds the device")
    func adapterAddedLate() async throws {
        let rig = try await BlueZRig.start { $0.setAdapterPresent(false) }
        defer { rig.stop() }
        let client = rig.client()
        client.startScan()
        #expect(await eventually { client.bluetoothUnavailableReason != nil }, "the backend has asked bluetoothd")
        #expect(client.bluetoothUnavailableReason == "BlueZ has no Bluetooth adapter yet; waiting for one")
        #expect(client.connectionState == .scanning)
        rig.fake.setAdapterPresent(true)
        #expect(await eventually { !client.scanResults.isEmpty })
        #expect(client.connectionState == .scanning)
        #expect(client.bluetoothUnavailableReason == nil)
        client.connect(id: try #require(client.scanResults.first).id)
        #expect(await eventually { client.atReady })
        client.teardown()
    }

    /// The gateway's service starts before bluetoothd, which then owns its
    /// name before it has its adapter: the wait for the adapter still happens.
    @Test("bluetoothd starts after the app, without its adapter yet: a scan waits for the adapter")
    func bluetoothdThenAdapterAfterTheApp() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let client = await rig.clientWithoutBluetoothd()
        rig.fake.setAdapterPresent(false)
        try await rig.fake.start(busAddress: rig.bus.address)
        #expect(
            await eventually {
                client.bluetoothUnavailableReason == "BlueZ has no Bluetooth adapter yet; waiting for one"
            }, "\(client.bluetoothUnavailableReason ?? "nil")")
        client.startScan()
        #expect(client.connectionState == .scanning)
        rig.fake.setAdapterPresent(true)
        #expect(await eventually { !client.scanResults.isEmpty })
        client.teardown()
    }

    @Test("no adapter comes: a waiting scan fails with .bluetoothUnavailable and a reason, and so does the next")
    func noAdapterAtAll() async throws {
        let rig = try await BlueZRig.start { $0.setAdapterPresent(false) }
        defer { rig.stop() }
        let client = rig.client()
        client.startScan()
        #expect(await eventually { client.bluetoothUnavailableReason != nil }, "the backend has asked bluetoothd")
        #expect(client.connectionState == .scanning)
        #expect(await eventually { client.connectionState == .failed(.bluetoothUnavailable) })
        #expect(client.bluetoothUnavailableReason == "BlueZ has no Bluetooth adapter")
        client.startScan()
        #expect(client.connectionState == .failed(.bluetoothUnavailable))
        client.teardown()
    }

    @Test("the adapter unplugged while connected: the link ends; a scan waits until it is plugged in again")
    func adapterUnplugged() async throws {
        let rig = try await BlueZRig.start()
        defer { rig.stop() }
        let client = rig.client()
        _ = try await client.connectFirstDevice(rig: rig)
        rig.fake.setAdapterPresent(false)
        #expect(await eventually { client.connectionState == .disconnected })
        #expect(!client.atReady)
        #expect(await eventually { client.bluetoothUnavailableReason != nil })
        client.startScan()
        #expect(client.connectionState == .scanning)
        rig.fake.setAdapterPresent(true)
        _ = try await client.connectFirstDevice(rig: rig)
        #expect(try await client.runAtCommand("AT+PING=back") == ["+PING:back", "OK"])
        client.teardown()
    }
}
