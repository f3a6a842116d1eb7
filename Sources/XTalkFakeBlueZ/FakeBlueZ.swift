import Foundation
import XTalkBleSdk
import XTalkDBus
import XTalkSimulator

/// A BlueZ of our own: `org.bluez` on a bus (a private `dbus-daemon` in tests),
/// following BlueZ's documented D-Bus API (doc/org.bluez.Adapter.rst,
/// Device.rst, GattService.rst, GattCharacteristic.rst) and its signal order,
/// with the simulator's radio behind it: the same firmware model and link
/// that the simulator gives the SDK, reached over real D-Bus.
///
/// The xTalk devices are reached through one adapter (hci0 unless told
/// otherwise); other adapters, with nothing in range, can be added. Devices appear while discovering (`InterfacesAdded`
/// from "/"), RSSI changes with each advertisement and goes when discovery
/// stops; `Connect` brings the link up (`Connected` and the reply, the GATT
/// objects, `ServicesResolved`); `Disconnect` drops the link 2 s later
/// (BlueZ's DISCONNECT_TIMER: Connect meanwhile answers at once, StartNotify
/// is refused) and is answered then; `StartDiscovery` and `StopDiscovery` are
/// answered once the controller has done it, and refuse each other while
/// pending; a link ends with `ServicesResolved=false`,
/// `Disconnected(reason, message)`, `Connected=false`, and the GATT objects
/// stay (BlueZ's default `Cache = always`), answering "Not connected". Errors
/// are `org.bluez.Error.*`.
///
/// `AcquireWrite` hands over a SOCK_SEQPACKET socket (and its MTU): each
/// packet is a write without response, reading pauses while the radio is
/// behind (a full socket is the client's flow control), `WriteValue` answers
/// `NotPermitted` while the socket is held, `WriteAcquired` says whether it
/// is, and the socket closes when the link ends (the client sees a hang-up)
/// or is released when the client closes its end.
///
/// Fault knobs: link loss with each reason (`loseLink`), the adapter off
/// (`setPowered`), unplugged or added late (`setAdapterPresent`), another
/// adapter (`addIdleAdapter`), bluetoothd gone and back (`stop`/`restart`:
/// the devices once connected are known again, as from BlueZ's storage), any method
/// failing once with any error (`failNext`: `InProgress`, `NotPermitted`, …),
/// `ServicesResolved` never arriving (`holdsServicesResolved`) or before the
/// objects (`resolvesBeforeExporting`), an acquired
/// write socket hung up while the link stays (`hangUpWriteSockets`). The
/// radio's own knobs are the simulator's (`environment.peripherals`).
///
/// Not modelled: `AcquireNotify` (answers `NotSupported`, as BlueZ does for
/// a characteristic without the flag; clients use StartNotify, bleak's
/// default too), pairing agents, BR/EDR, advertisement monitors.
@MainActor
package final class FakeBlueZ {
    package let environment: XTalkSimulatedEnvironment
    /// The adapter the xTalk devices are reached through ("/org/bluez/hci0" unless told otherwise).
    package let adapterPath: String
    package static let adapterAddress = "0A:7A:1C:00:00:01"
    package static let controlPath = "/com/xtalk/FakeBlueZ"
    package static let controlInterface = "com.xtalk.FakeBlueZ1"

    /// A device's object path, as BlueZ names it: `<adapter>/dev_C0_FF_EE_00_00_01`.
    nonisolated package static func devicePath(_ address: String, adapterPath: String = "/org/bluez/hci0") -> String {
        adapterPath + "/dev_" + address.replacingOccurrences(of: ":", with: "_")
    }

    /// How long the controller takes to start or stop scanning: BlueZ answers
    /// StartDiscovery and StopDiscovery after it.
    package var controllerDelay: Duration = .milliseconds(10)
    /// How long BlueZ keeps a link after Disconnect before dropping it
    /// (src/device.c: DISCONNECT_TIMER, 2 s); the call is answered then.
    package var disconnectDelay: Duration = .seconds(2)
    /// How long the controller takes to end a link it was told to end (the
    /// device acknowledges within a few connection intervals).
    package var terminationDelay: Duration = .milliseconds(50)
    /// Whether BlueZ has the device at `address` connected (its Connected property; for tests).
    package func isConnected(address: String) -> Bool {
        devices.values.first { $0.address == address.uppercased() }?.connected == true
    }
    /// Whether this client's discovery is on, as BlueZ has it (for tests).
    package var isDiscovering: Bool { discovering }
    /// Whether this client's discovery is on on the adapter `name` ("hci0", …; for tests).
    package func isDiscovering(adapter name: String) -> Bool {
        let path = "/org/bluez/" + name
        return path == adapterPath ? discovering : idleAdapters[path]?.discovering == true
    }
    /// Whether a StartDiscovery or StopDiscovery is still unanswered (for tests).
    package var isDiscoveryCallPending: Bool { discoveryCall != nil }
    /// BlueZ's main.conf `[GATT] Cache`: `always` (true, the default) keeps
    /// a device's GATT objects across links; `no` (false) removes them as the
    /// link ends, before `Connected=false` (bluetoothd may handle the ATT
    /// channel's close before the controller's disconnection event).
    package var cachesGatt = true
    /// Without the cache, how long after the GATT objects went bluetoothd
    /// reports a lost link down (in reality within milliseconds; longer here,
    /// so that a client must show it waits for the link's own end).
    package var gattCleanupLead: Duration = .milliseconds(100)
    /// When true, connections never report `ServicesResolved` (nor answer `Connect`).
    package var holdsServicesResolved = false
    /// When true, a link that discovers the device's GATT objects (its first,
    /// with BlueZ's cache) reports `ServicesResolved` before exporting them,
    /// as bluetoothd's flush order can (bluez/bluez#1489).
    package var resolvesBeforeExporting = false
    /// Calls BlueZ answered, by member (for tests: e.g. how often Connect was retried).
    package private(set) var callCounts: [String: Int] = [:]
    /// Packets received on AcquireWrite sockets (for tests: which way writes came).
    package private(set) var socketPacketCount = 0
    /// The inode of both ends of every AcquireWrite socket made (for tests:
    /// no descriptor of this process may still refer to one after its link).
    package private(set) var writeSocketInodes: [UInt64] = []
    /// After this many socket packets, hang the sockets up (once), as
    /// `hangUpWriteSockets` does: the fault "an AcquireWrite fd hung up" mid-stream.
    package var hangUpWriteSocketsAfterPackets: Int?
    /// The send buffer of the sockets handed over (SO_SNDBUF, bytes; nil: the
    /// system's, some hundreds of packets): small, a client meets a full
    /// socket within one send (a BlueZ that reads slowly).
    package var writeSocketSendBuffer: Int?
    /// BlueZ 5.50: AcquireWrite hands out a pipe, not a socket pair, and
    /// bluetoothd notices the client closing it a moment later (its main
    /// loop's next turn; 50 ms here), refusing WriteValue until then.
    package var writeSocketsArePipes = false
    /// AcquireWrite sockets open now (for tests: every one is closed after its link).
    package var openWriteSocketCount: Int {
        devices.values.reduce(0) { count, device in
            count + device.services.flatMap(\.characteristics).filter { $0.writeSocket != nil }.count
        }
    }
    package private(set) var busName = ""
    /// The addresses of the devices bluetoothd knows, in path order.
    package var deviceAddresses: [String] { devices.values.map(\.address).sorted() }

    private let radio: any BleBackend
    private var address: String?
    private var bus: DBusConnection?
    private var powered = true
    /// Whether the adapter is plugged in (see `setAdapterPresent`).
    private var present = true
    /// Other adapters (see `addIdleAdapter`), by path.
    private var idleAdapters: [String: IdleAdapter] = [:]
    private struct IdleAdapter {
        let address: String
        var powered: Bool
        var discovering = false
    }
    private var discovering = false
    /// A StartDiscovery or StopDiscovery not answered yet.
    private var discoveryCall: DBusMessage?
    private var filterServices: [BleUUID] = []
    private var devices: [UUID: FakeDevice] = [:]
    private var failures: [String: [(name: String, message: String)]] = [:]

    /// Serves `environment`'s devices (on the real clock) through the adapter `adapter` ("hci0", "hci1", …).
    package init(environment: XTalkSimulatedEnvironment, adapter: String = "hci0") {
        self.environment = environment
        adapterPath = "/org/bluez/" + adapter
        radio = environment.backend
        radio.eventHandler = { [weak self] event in self?.radioEvent(event) }
        radio.activate(showPowerAlert: false, restoreIdentifier: nil)
    }

    // MARK: The daemon

    /// Connects to the bus at `address` and owns `org.bluez` (bluetoothd starting).
    package func start(busAddress: String) async throws {
        address = busAddress
        let connection = try await withCheckedThrowingContinuation { continuation in
            DBusConnection.open(DBusAddress.parse(busAddress)) { continuation.resume(with: $0) }
        }
        connection.onMethodCall = { [weak self] call in self?.handle(call) }
        bus = connection
        busName = connection.uniqueName
        let reply = await withCheckedContinuation { continuation in
            connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "RequestName", body: [.string("org.bluez"), .uint32(4)]
            ) { continuation.resume(returning: $0) }
        }
        guard case .success(let message) = reply, message.body == [.uint32(1)] else {
            connection.close()
            throw DBusError(name: "org.freedesktop.DBus.Error.Failed", message: "could not own org.bluez")
        }
    }

    /// bluetoothd exits: every link ends, every object goes, `org.bluez` loses its owner.
    package func stop() {
        for device in devices.values where device.connected || device.connectCall != nil {
            radio.cancelPeripheralConnection(device.id)
        }
        // The next bluetoothd loads the devices that were connected from its
        // storage (BlueZ stores a device once connected: no longer temporary),
        // disconnected and unheard; it forgets the others.
        devices = devices.filter { $0.value.remembered }
        for device in devices.values {
            if let timer = device.disconnectTimer { radio.scheduler.cancel(timer) }
            device.disconnectTimer = nil
            device.disconnectCalls = []
            device.reset()
            device.rssi = nil
            device.services = []
            device.exported = []
        }
        if discovering { radio.stopScan() }
        discovering = false
        discoveryCall = nil
        bus?.close()
        bus = nil
    }

    /// bluetoothd restarts: `stop()`, then after `downtime` a new process (a new unique name) owns `org.bluez`.
    package func restart(after downtime: Duration) async throws {
        stop()
        try await Task.sleep(for: downtime)
        guard let address else { return }
        try await start(busAddress: address)
    }

    // MARK: Knobs

    /// The next call of `member` (e.g. "Connect", "WriteValue") fails with `org.bluez.Error.<error>`.
    package func failNext(_ member: String, with error: String, message: String = "") {
        failures[member, default: []].append((error.contains(".") ? error : "org.bluez.Error.\(error)", message))
    }

    /// Powers the adapter on or off (as `bluetoothctl power off`): links end first.
    package func setPowered(_ on: Bool) {
        guard on != powered, present else { return }
        if !on { adapterStops(announcingDiscovery: true) }
        powered = on
        changed(
            adapterPath, "org.bluez.Adapter1", ["Powered": .boolean(on), "PowerState": .string(on ? "on" : "off")])
    }

    /// The adapter stops (powered off, or unplugged): its links and connects
    /// end first, an unanswered discovery call is refused, discovery stops.
    private func adapterStops(announcingDiscovery: Bool) {
        for device in devices.values where device.connected || device.connectCall != nil {
            radio.cancelPeripheralConnection(device.id)
            linkEnded(device, reason: "org.bluez.Reason.Local", message: "Connection terminated by local host")
        }
        if let call = discoveryCall {
            discoveryCall = nil
            reply(error: "org.bluez.Error.NotReady", "Resource Not Ready", to: call)
        }
        if discovering {
            radio.stopScan()
            discovering = false
            if announcingDiscovery { changed(adapterPath, "org.bluez.Adapter1", ["Discovering": .boolean(false)]) }
        }
    }

    /// Powers the adapter `name` ("hci0", …) on or off: the xTalk devices'
    /// one (as `setPowered(_:)`) or one added by `addIdleAdapter`.
    package func setPowered(_ on: Bool, adapter name: String) {
        let path = "/org/bluez/" + name
        if path == adapterPath { return setPowered(on) }
        guard var adapter = idleAdapters[path], adapter.powered != on else { return }
        adapter.powered = on
        if !on && adapter.discovering {
            adapter.discovering = false
            changed(path, "org.bluez.Adapter1", ["Discovering": .boolean(false)])
        }
        idleAdapters[path] = adapter
        changed(path, "org.bluez.Adapter1", ["Powered": .boolean(on), "PowerState": .string(on ? "on" : "off")])
    }

    /// Adds another adapter, `name` ("hci1", …), with no device in range: a
    /// second controller, such as a USB dongle next to a built-in one that is
    /// off. Its discovery starts and stops at once and finds nothing.
    package func addIdleAdapter(_ name: String, powered: Bool) {
        let path = "/org/bluez/" + name
        guard path != adapterPath, idleAdapters[path] == nil else { return }
        let address = String(format: "0A:7A:1C:00:01:%02X", idleAdapters.count + 2)
        idleAdapters[path] = IdleAdapter(address: address, powered: powered)
        interfacesAdded(
            path,
            ["org.bluez.Adapter1": Self.adapterProperties(address: address, powered: powered, discovering: false)])
    }

    /// The xTalk devices' adapter is unplugged (false) or plugged in again
    /// (true), as bluetoothd sees the kernel remove or add a controller.
    /// Unplugged: its links end, then every device object and the adapter
    /// object go (InterfacesRemoved). Plugged in: the adapter object comes,
    /// powered. Called before `start`, bluetoothd starts without it, as at
    /// boot, where bluetoothd owns its name before the kernel hands it the
    /// controller (and python-dbusmock's bluez5 template too).
    package func setAdapterPresent(_ isPresent: Bool) {
        guard isPresent != present else { return }
        if isPresent {
            present = true
            powered = true
            interfacesAdded(adapterPath, ["org.bluez.Adapter1": adapterProperties])
            return
        }
        adapterStops(announcingDiscovery: false)  // its object goes: no property changes
        for device in devices.values.sorted(by: { $0.path < $1.path }) {
            unexportGatt(device)
            interfacesRemoved(device.path, ["org.bluez.Device1"])
        }
        devices.removeAll()
        present = false
        interfacesRemoved(adapterPath, ["org.bluez.Adapter1"])
    }

    /// bluetoothd handles a Service Changed indication from the device at
    /// `address` (its GATT database changed while connected, as after a
    /// firmware update): the objects of the services it affects (`service`,
    /// or all) go (InterfacesRemoved; calls on them fail, their write sockets
    /// close, subscriptions are gone), and once rediscovered come again,
    /// unsubscribed (InterfacesAdded). The link and the other services stay.
    /// Returns whether the device was connected, with such a service resolved.
    @discardableResult
    package func changeServices(address: String, service uuid: BleUUID? = nil) -> Bool {
        guard let device = devices.values.first(where: { $0.address == address.uppercased() }), device.connected,
            device.resolved
        else { return false }
        let affected = device.services.filter { uuid == nil || $0.uuid == uuid }
        guard !affected.isEmpty else { return false }
        for call in detachGatt(device, affected) {
            reply(error: "org.bluez.Error.Failed", "Operation failed", to: call)
        }
        _ = radio.scheduler.schedule(after: controllerDelay) { [weak self] in
            guard let self, device.connected else { return }
            // Rediscovered: the services that stayed keep their objects (and state).
            let kept = device.services
            device.buildGatt(mtu: self.attMTU(of: device))
            device.services = device.services.map { fresh in kept.first { $0.path == fresh.path } ?? fresh }
            self.exportServices(device)
        }
        return true
    }

    /// The link to the device at `address` is lost: `timeout` (out of range:
    /// after the supervision timeout) or `remote` (the device ended it).
    package func loseLink(address: String, reason: String) {
        guard let device = devices.values.first(where: { $0.address == address.uppercased() }),
            let peripheral = environment.peripheral(id: device.id)
        else { return }
        peripheral.disconnect(reason == "remote" ? .terminatedByDevice : .supervisionTimeout)
    }

    /// BlueZ closes every AcquireWrite socket of the device at `address`
    /// while the link stays (as it does when it must renegotiate the MTU):
    /// what the client wrote before is read and delivered first; its next
    /// write fails and WriteValue works again. Returns how many were closed.
    @discardableResult
    package func hangUpWriteSockets(address: String) -> Int {
        guard let device = devices.values.first(where: { $0.address == address.uppercased() }) else { return 0 }
        var closed = 0
        for characteristic in device.services.flatMap(\.characteristics) where characteristic.writeSocket != nil {
            characteristic.writeSocket?.drainNow()
            releaseWriteSocket(characteristic)
            closed += 1
        }
        return closed
    }

    /// How many writes bluetoothd handed the radio at `address` that its link
    /// then dropped (longer than a packet carries, no credit left), over the
    /// device's lifetime. BlueZ refuses an over-long write itself, so one never
    /// reaches the radio: a client's oversize packet leaves the count as it was.
    package func droppedRadioWrites(address: String) -> Int? {
        guard let device = devices.values.first(where: { $0.address == address.uppercased() }) else { return nil }
        return environment.peripheral(id: device.id)?.droppedWrites
    }

    /// Sends `value` as `count` notifications of every subscribed
    /// characteristic of the device at `address`, straight from bluetoothd
    /// (not through the simulated link): for measuring a central's cost per
    /// notification. Returns how many were sent.
    @discardableResult
    package func notify(address: String, value: Data, count: Int) -> Int {
        guard let device = devices.values.first(where: { $0.address == address.uppercased() }) else { return 0 }
        var sent = 0
        for service in device.services {
            for characteristic in service.characteristics where characteristic.notifying {
                for _ in 0..<count {
                    changed(characteristic.path, "org.bluez.GattCharacteristic1", ["Value": .bytes(value)])
                    sent += 1
                }
            }
        }
        return sent
    }

    // MARK: Radio events (the simulated central)

    private func radioEvent(_ event: BleBackendEvent) {
        switch event {
        case .discovered(let id, let advertisement, let rssi):
            discovered(id, advertisement, rssi)
        case .connected(let id):
            guard let device = devices[id], let call = device.connectCall else { return }
            device.connected = true
            device.remembered = true
            changed(device.path, "org.bluez.Device1", ["Connected": .boolean(true)])
            // BlueZ answers an LE Connect once the ATT channel is up, before it
            // resolves the services (src/device.c, att_connect_cb).
            device.connectCall = nil
            reply(to: call)
            radio.discoverServices(nil, for: id)
        case .servicesDiscovered(let id, let services, _):
            guard let device = devices[id] else { return }
            device.servicesToDiscover = services
            if services.isEmpty { servicesResolved(device) }
            for service in services { radio.discoverCharacteristics(nil, for: service, of: id) }
        case .characteristicsDiscovered(let id, let service, let characteristics, _):
            guard let device = devices[id] else { return }
            device.discovered.append((service, characteristics))
            if device.discovered.count == device.servicesToDiscover.count { servicesResolved(device) }
        case .failedToConnect(let id, let error):
            guard let device = devices[id], let call = device.connectCall else { return }
            device.connectCall = nil
            reply(error: "org.bluez.Error.Failed", error?.message ?? "le-connection-abort-by-remote", to: call)
        case .disconnected(let id, let error):
            guard let device = devices[id] else { return }
            let (reason, message) =
                switch error?.code {
                case .connectionTimeout?: ("org.bluez.Reason.Timeout", "Connection timeout")
                case .peripheralDisconnected?: ("org.bluez.Reason.Remote", "Connection terminated by remote user")
                default: ("org.bluez.Reason.Unknown", "Unspecified")
                }
            if !cachesGatt, device.connected, !device.exported.isEmpty {
                // Without the cache the objects go as the ATT channel closes;
                // bluetoothd reports the link down once the controller's
                // disconnection event comes, a moment later.
                for call in detachGatt(device, device.services) {
                    reply(error: "org.bluez.Error.Failed", "Not connected", to: call)
                }
                _ = radio.scheduler.schedule(after: gattCleanupLead) { [weak self] in
                    self?.linkEnded(device, reason: reason, message: message)
                }
                return
            }
            linkEnded(device, reason: reason, message: message)
        case .notificationStateUpdated(let id, let reference, let isNotifying, let error):
            guard let device = devices[id], let characteristic = device.characteristic(reference),
                !characteristic.notifyCalls.isEmpty
            else { return }
            let call = characteristic.notifyCalls.removeFirst()
            if let error {
                reply(error: "org.bluez.Error.NotPermitted", error.message, to: call)
                return
            }
            characteristic.notifying = isNotifying
            changed(characteristic.path, "org.bluez.GattCharacteristic1", ["Notifying": .boolean(isNotifying)])
            reply(to: call)
        case .valueUpdated(let id, let reference, let value, let error):
            guard let device = devices[id], let characteristic = device.characteristic(reference) else { return }
            if !characteristic.readCalls.isEmpty {
                let call = characteristic.readCalls.removeFirst()
                if let error {
                    reply(error: "org.bluez.Error.Failed", error.message, to: call)
                    return
                }
                reply(to: call, [.bytes(value ?? Data())])
            } else if !characteristic.notifying {
                return
            }
            // BlueZ changes Value for a read's result and for a notification alike.
            changed(characteristic.path, "org.bluez.GattCharacteristic1", ["Value": .bytes(value ?? Data())])
        case .writeCompleted(let id, let reference, let error):
            guard let device = devices[id], let characteristic = device.characteristic(reference),
                !characteristic.writeCalls.isEmpty
            else { return }
            let call = characteristic.writeCalls.removeFirst()
            if let error {
                reply(error: "org.bluez.Error.Failed", error.message, to: call)
            } else {
                reply(to: call)
            }
        case .readyToSendWriteWithoutResponse(let id):
            if let device = devices[id] { flushCommands(device) }
        case .stateChanged, .scanFailed, .restored:
            break
        }
    }

    private func discovered(_ id: UUID, _ advertisement: BleAdvertisement, _ rssi: Int) {
        guard discovering, powered else { return }
        if let device = devices[id] {
            device.rssi = rssi
            changed(device.path, "org.bluez.Device1", ["RSSI": .int16(Int16(clamping: rssi))])
            return
        }
        let address = Self.address(of: advertisement, id: id)
        let device = FakeDevice(
            id: id, address: address, advertisement: advertisement, rssi: rssi, adapterPath: adapterPath)
        devices[id] = device
        interfacesAdded(device.path, ["org.bluez.Device1": device.properties])
    }

    /// The address the device advertises in its manufacturer data (xTalk's
    /// format), else one made from its identifier.
    static func address(of advertisement: BleAdvertisement, id: UUID) -> String {
        if let data = advertisement.manufacturerData, data.count >= 9 {
            return data.dropFirst(3).prefix(6).map { String(format: "%02X", $0) }.joined(separator: ":")
        }
        return withUnsafeBytes(of: id.uuid) { raw in raw.suffix(6).map { String(format: "%02X", $0) } }
            .joined(separator: ":")
    }

    /// The GATT objects (those not exported yet: BlueZ keeps a device's
    /// objects across links, its default `Cache = always`), then ServicesResolved.
    private func servicesResolved(_ device: FakeDevice) {
        guard device.connected, !device.resolved else { return }
        if !resolvesBeforeExporting || holdsServicesResolved { exportGatt(device) }
        guard !holdsServicesResolved else { return }
        device.resolved = true
        changed(device.path, "org.bluez.Device1", ["ServicesResolved": .boolean(true)])
        if resolvesBeforeExporting { exportGatt(device) }
    }

    /// The link's ATT MTU, as bluetoothd reports it (up to 517, its default request).
    private func attMTU(of device: FakeDevice) -> Int {
        environment.peripheral(id: device.id)?.attMTU ?? 23
    }

    /// The device's GATT objects, as discovered on this link (those not exported yet).
    private func exportGatt(_ device: FakeDevice) {
        device.buildGatt(mtu: attMTU(of: device))
        exportServices(device)
    }

    /// The objects of the device's services not exported yet.
    private func exportServices(_ device: FakeDevice) {
        for service in device.services {
            exportOnce(device, service.path, ["org.bluez.GattService1": service.properties])
            for characteristic in service.characteristics {
                exportOnce(device, characteristic.path, ["org.bluez.GattCharacteristic1": characteristic.properties])
                if let descriptor = characteristic.descriptorPath {
                    exportOnce(device, descriptor, ["org.bluez.GattDescriptor1": characteristic.descriptorProperties])
                }
            }
        }
    }

    private func exportOnce(_ device: FakeDevice, _ path: String, _ interfaces: [String: [String: DBusValue]]) {
        guard device.exported.insert(path).inserted else { return }
        interfacesAdded(path, interfaces)
    }

    /// The device's GATT objects go (RemoveDevice, or the fake stopping).
    private func unexportGatt(_ device: FakeDevice) {
        for path in device.exported.sorted(by: >) { interfacesRemoved(path, [Self.interface(of: path)]) }
        device.exported.removeAll()
        device.services = []
    }

    /// The interface of a GATT object, by its path (serviceXXXX, charXXXX, descXXXX).
    private static func interface(of path: String) -> String {
        path.contains("/desc")
            ? "org.bluez.GattDescriptor1"
            : path.contains("/char") ? "org.bluez.GattCharacteristic1" : "org.bluez.GattService1"
    }

    /// BlueZ's order when a link ends: ServicesResolved=false, Disconnected,
    /// Connected=false. The GATT objects stay (`Cache = always`, BlueZ's
    /// default) and answer "Not connected" until the next link resolves them.
    private func linkEnded(_ device: FakeDevice, reason: String, message: String) {
        let wasConnected = device.connected
        // Without the cache the objects go as the ATT channel closes, which
        // bluetoothd may handle before it reports the link down.
        let pendingCalls = cachesGatt ? pendingCalls(of: device.services) : detachGatt(device, device.services)
        if device.resolved { changed(device.path, "org.bluez.Device1", ["ServicesResolved": .boolean(false)]) }
        if wasConnected {
            emit(
                .signal(
                    path: device.path, interface: "org.bluez.Device1", member: "Disconnected",
                    body: [.string(reason), .string(message)]))
            changed(device.path, "org.bluez.Device1", ["Connected": .boolean(false)])
        }
        for service in device.services {
            for characteristic in service.characteristics where characteristic.notifying {
                characteristic.notifying = false
                changed(characteristic.path, "org.bluez.GattCharacteristic1", ["Notifying": .boolean(false)])
            }
            // The sockets close with the link: the client sees a hang-up.
            for characteristic in service.characteristics where characteristic.writeSocket != nil {
                releaseWriteSocket(characteristic)
            }
        }
        for call in pendingCalls { reply(error: "org.bluez.Error.Failed", "Not connected", to: call) }
        if let call = device.connectCall {
            device.connectCall = nil
            reply(error: "org.bluez.Error.Failed", "le-connection-abort-by-local", to: call)
        }
        // Disconnect is answered once the link is gone, after Connected=false.
        if let timer = device.disconnectTimer { radio.scheduler.cancel(timer) }
        device.disconnectTimer = nil
        for call in device.disconnectCalls { reply(to: call) }
        device.disconnectCalls = []
        device.reset()
    }

    /// The calls on the services' characteristics that are not answered yet.
    private func pendingCalls(of services: [FakeService]) -> [DBusMessage] {
        services.flatMap { service in
            service.characteristics.flatMap {
                $0.readCalls + $0.writeCalls + $0.notifyCalls + $0.commands.compactMap(\.call)
            }
        }
    }

    /// Some of the device's services go (a Service Changed, or the objects
    /// cleared without the cache): their write sockets close and their
    /// objects are removed. Returns the calls on them still unanswered, for
    /// the caller to fail.
    private func detachGatt(_ device: FakeDevice, _ services: [FakeService]) -> [DBusMessage] {
        let calls = pendingCalls(of: services)
        for characteristic in services.flatMap(\.characteristics) { releaseWriteSocket(characteristic) }
        for service in services {
            for path in device.exported.filter({ $0 == service.path || $0.hasPrefix(service.path + "/") })
                .sorted(by: >)
            {
                device.exported.remove(path)
                interfacesRemoved(path, [Self.interface(of: path)])
            }
        }
        let gone = Set(services.map(\.path))
        device.services.removeAll { gone.contains($0.path) }
        return calls
    }

    // MARK: Method calls

    private func handle(_ call: DBusMessage) {
        guard let member = call.member, let path = call.path else { return }
        callCounts[member, default: 0] += 1
        if var queued = failures[member], !queued.isEmpty, call.interface != "org.freedesktop.DBus.Properties" {
            let failure = queued.removeFirst()
            failures[member] = queued
            reply(error: failure.name, failure.message, to: call)
            return
        }
        switch (call.interface, member) {
        case ("org.freedesktop.DBus.ObjectManager", "GetManagedObjects") where path == "/":
            reply(to: call, [managedObjects()])
        case ("org.freedesktop.DBus.Properties", "GetAll"):
            guard let interface = call.body.first?.stringValue, let properties = objects()[path]?[interface] else {
                return reply(error: "org.freedesktop.DBus.Error.UnknownInterface", "no such interface", to: call)
            }
            reply(to: call, [.propertyMap(properties)])
        case ("org.freedesktop.DBus.Properties", "Get"):
            guard call.body.count == 2, let interface = call.body[0].stringValue, let name = call.body[1].stringValue,
                let value = objects()[path]?[interface]?[name]
            else { return reply(error: "org.freedesktop.DBus.Error.InvalidArgs", "no such property", to: call) }
            reply(to: call, [.variant(value)])
        case ("org.freedesktop.DBus.Properties", "Set"):
            guard path == adapterPath && present || idleAdapters[path] != nil, call.body.count == 3,
                call.body[1].stringValue == "Powered", let on = call.body[2].boolValue
            else { return reply(error: "org.bluez.Error.NotPermitted", "read-only property", to: call) }
            setPowered(on, adapter: String(path.dropFirst("/org/bluez/".count)))
            reply(to: call)
        case ("org.freedesktop.DBus.Introspectable", "Introspect"):
            reply(to: call, [.string(introspection(of: path))])
        case ("org.bluez.Adapter1", _) where path == adapterPath && present:
            adapterCall(call, member)
        case ("org.bluez.Adapter1", _) where idleAdapters[path] != nil:
            idleAdapterCall(call, member, path)
        case ("org.bluez.Device1", _):
            guard let device = devices.values.first(where: { $0.path == path }) else {
                return reply(error: "org.freedesktop.DBus.Error.UnknownObject", "no such device", to: call)
            }
            deviceCall(call, member, device)
        case ("org.bluez.GattCharacteristic1", _):
            guard let (device, characteristic) = characteristic(at: path) else {
                return reply(error: "org.freedesktop.DBus.Error.UnknownObject", "no such characteristic", to: call)
            }
            characteristicCall(call, member, device, characteristic)
        case ("org.bluez.GattDescriptor1", _):
            descriptorCall(call, member, path)
        case (FakeBlueZ.controlInterface, _) where path == Self.controlPath:
            controlCall(call, member)
        default:
            reply(error: "org.freedesktop.DBus.Error.UnknownMethod", "\(member) is not a method of \(path)", to: call)
        }
    }

    private func adapterCall(_ call: DBusMessage, _ member: String) {
        switch member {
        case "SetDiscoveryFilter":
            let filter = call.body.first?.propertyMapValue ?? [:]
            filterServices = (filter["UUIDs"]?.stringArrayValue ?? []).map(BleUUID.init)
            reply(to: call)
        case "StartDiscovery":
            // BlueZ (src/adapter.c, start_discovery): a client discovers once
            // at a time, and the call is answered when the controller has
            // started scanning; until then the client's start or stop is busy.
            guard powered else { return reply(error: "org.bluez.Error.NotReady", "Resource Not Ready", to: call) }
            guard !discovering, discoveryCall == nil else {
                return reply(error: "org.bluez.Error.InProgress", "Operation already in progress", to: call)
            }
            discovering = true
            answerWhenTheControllerHasDone(call) { [weak self] in
                guard let self else { return }
                self.radio.scanForPeripherals(withServices: self.filterServices)
                self.reply(to: call)
                self.changed(self.adapterPath, "org.bluez.Adapter1", ["Discovering": .boolean(true)])
            }
        case "StopDiscovery":
            guard powered else { return reply(error: "org.bluez.Error.NotReady", "Resource Not Ready", to: call) }
            guard discovering else { return reply(error: "org.bluez.Error.Failed", "No discovery started", to: call) }
            guard discoveryCall == nil else {
                return reply(error: "org.bluez.Error.InProgress", "Operation already in progress", to: call)
            }
            answerWhenTheControllerHasDone(call) { [weak self] in
                guard let self else { return }
                self.discovering = false
                self.radio.stopScan()
                self.reply(to: call)
                self.changed(self.adapterPath, "org.bluez.Adapter1", ["Discovering": .boolean(false)])
                self.forgetRSSI()
            }
        case "RemoveDevice":
            guard let path = call.body.first?.stringValue,
                let device = devices.values.first(where: { $0.path == path })
            else { return reply(error: "org.bluez.Error.DoesNotExist", "Does Not Exist", to: call) }
            if device.connected || device.connectCall != nil {
                radio.cancelPeripheralConnection(device.id)
                linkEnded(device, reason: "org.bluez.Reason.Local", message: "Connection terminated by local host")
            }
            unexportGatt(device)
            devices[device.id] = nil
            interfacesRemoved(device.path, ["org.bluez.Device1"])
            reply(to: call)
        case "GetDiscoveryFilters":
            reply(
                to: call, [.stringArray(["UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable"])])
        default:
            reply(error: "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member)", to: call)
        }
    }

    /// An adapter with nothing in range: discovery starts and stops at once and finds nothing.
    private func idleAdapterCall(_ call: DBusMessage, _ member: String, _ path: String) {
        guard var adapter = idleAdapters[path] else { return }
        switch member {
        case "SetDiscoveryFilter":
            reply(to: call)
        case "StartDiscovery", "StopDiscovery":
            let start = member == "StartDiscovery"
            guard adapter.powered else {
                return reply(error: "org.bluez.Error.NotReady", "Resource Not Ready", to: call)
            }
            guard adapter.discovering != start else {
                return start
                    ? reply(error: "org.bluez.Error.InProgress", "Operation already in progress", to: call)
                    : reply(error: "org.bluez.Error.Failed", "No discovery started", to: call)
            }
            adapter.discovering = start
            idleAdapters[path] = adapter
            reply(to: call)
            changed(path, "org.bluez.Adapter1", ["Discovering": .boolean(start)])
        case "RemoveDevice":
            reply(error: "org.bluez.Error.DoesNotExist", "Does Not Exist", to: call)
        default:
            reply(error: "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member)", to: call)
        }
    }

    /// Answers a discovery call after `controllerDelay`, as BlueZ does once
    /// the controller's (MGMT) start or stop completes; the call is pending
    /// until then. Powering off or stopping forgets it.
    private func answerWhenTheControllerHasDone(_ call: DBusMessage, _ done: @escaping @MainActor () -> Void) {
        discoveryCall = call
        _ = radio.scheduler.schedule(after: controllerDelay) { [weak self] in
            guard let self, self.discoveryCall == call else { return }
            self.discoveryCall = nil
            done()
        }
    }

    /// BlueZ forgets the last RSSI when discovery stops (it is no longer current).
    private func forgetRSSI() {
        for device in devices.values where device.rssi != nil && !device.connected {
            device.rssi = nil
            changed(device.path, "org.bluez.Device1", [:], invalidated: ["RSSI"])
        }
    }

    private func deviceCall(_ call: DBusMessage, _ member: String, _ device: FakeDevice) {
        switch member {
        case "Connect":
            guard powered else { return reply(error: "org.bluez.Error.NotReady", "Resource Not Ready", to: call) }
            if device.connectCall != nil {
                return reply(error: "org.bluez.Error.InProgress", "In Progress", to: call)
            }
            if device.connected { return reply(to: call) }
            device.connectCall = call
            radio.connect(device.id)
        case "Disconnect":
            if device.connected {
                // BlueZ (src/device.c, device_request_disconnect): a pending
                // Connect fails; the link is dropped DISCONNECT_TIMER later, for
                // profiles to let go, and Disconnect is answered once it is
                // gone. Meanwhile the device stays Connected: Connect answers at
                // once, StartNotify is refused.
                if let connect = device.connectCall {
                    device.connectCall = nil
                    reply(error: "org.bluez.Error.Failed", "br-connection-canceled", to: connect)
                }
                device.disconnectCalls.append(call)
                if device.disconnectTimer == nil {
                    device.disconnectTimer = radio.scheduler.schedule(after: disconnectDelay) {
                        [weak self, weak device] in
                        guard let self, let device, device.connected else { return }
                        // The timer stays set until Connected=false: from here
                        // bluetoothd has dropped its GATT client, so StartNotify is
                        // refused until the controller reports the link gone.
                        self.radio.cancelPeripheralConnection(device.id)
                        // bluetoothd learns the link is gone at the controller's
                        // Disconnection Complete, once the device acknowledged.
                        _ = self.radio.scheduler.schedule(after: self.terminationDelay) {
                            [weak self, weak device] in
                            guard let self, let device, device.connected else { return }
                            self.linkEnded(
                                device, reason: "org.bluez.Reason.Local",
                                message: "Connection terminated by local host")
                        }
                    }
                }
                return
            }
            if device.connectCall != nil {
                radio.cancelPeripheralConnection(device.id)
                linkEnded(device, reason: "org.bluez.Reason.Local", message: "Connection terminated by local host")
            }
            reply(to: call)
        case "Pair", "CancelPairing", "ConnectProfile", "DisconnectProfile":
            reply(error: "org.bluez.Error.NotSupported", "Operation is not supported", to: call)
        default:
            reply(error: "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member)", to: call)
        }
    }

    private func characteristicCall(
        _ call: DBusMessage, _ member: String, _ device: FakeDevice, _ characteristic: FakeCharacteristic
    ) {
        guard device.connected, device.resolved else {
            return reply(error: "org.bluez.Error.Failed", "Not connected", to: call)
        }
        let flags = characteristic.info.properties
        switch member {
        case "ReadValue":
            guard flags.contains(.read) else {
                return reply(error: "org.bluez.Error.NotPermitted", "Read not permitted", to: call)
            }
            characteristic.readCalls.append(call)
            if characteristic.readCalls.count == 1 { radio.readValue(for: characteristic.reference, of: device.id) }
        case "WriteValue":
            guard call.body.count == 2, let value = call.body[0].bytesValue else {
                return reply(error: "org.bluez.Error.InvalidArguments", "Invalid arguments", to: call)
            }
            // BlueZ: WriteValue is locked while the AcquireWrite socket is held.
            // A client that closed it before this call sees it released (what
            // it wrote and its close came first).
            characteristic.writeSocket?.drainNow()
            guard characteristic.writeSocket == nil else {
                return reply(error: "org.bluez.Error.NotPermitted", "Write acquired", to: call)
            }
            let options = call.body[1].propertyMapValue ?? [:]
            let type = options["type"]?.stringValue ?? (flags.contains(.write) ? "request" : "command")
            if type == "command" {
                guard flags.contains(.writeWithoutResponse) else {
                    return reply(error: "org.bluez.Error.NotSupported", "Operation is not supported", to: call)
                }
                guard value.count <= BleAttribute.packetPayload(mtu: characteristic.mtu) else {
                    return reply(error: "org.bluez.Error.InvalidValueLength", "Invalid Length", to: call)
                }
                characteristic.commands.append((value, call))
                flushCommands(device)
            } else {
                guard flags.contains(.write) else {
                    return reply(error: "org.bluez.Error.NotPermitted", "Write not permitted", to: call)
                }
                guard value.count <= BleAttribute.maximumValueLength else {
                    return reply(error: "org.bluez.Error.InvalidValueLength", "Invalid Length", to: call)
                }
                characteristic.writeCalls.append(call)
                radio.writeValue(value, for: characteristic.reference, of: device.id, type: .withResponse)
            }
        case "StartNotify":
            guard flags.contains(.notify) || flags.contains(.indicate) else {
                return reply(error: "org.bluez.Error.NotSupported", "Operation is not supported", to: call)
            }
            guard device.disconnectTimer == nil else {
                return reply(error: "org.bluez.Error.NotConnected", "Not Connected", to: call)
            }
            if characteristic.notifying { return reply(to: call) }
            characteristic.notifyCalls.append(call)
            if characteristic.notifyCalls.count == 1 {
                radio.setNotifyValue(true, for: characteristic.reference, of: device.id)
            }
        case "StopNotify":
            guard characteristic.notifying else {
                return reply(error: "org.bluez.Error.Failed", "No notify session started", to: call)
            }
            characteristic.notifying = false
            radio.setNotifyValue(false, for: characteristic.reference, of: device.id)
            reply(to: call)
            changed(characteristic.path, "org.bluez.GattCharacteristic1", ["Notifying": .boolean(false)])
        case "AcquireWrite":
            acquireWrite(call, device, characteristic)
        case "AcquireNotify":
            reply(error: "org.bluez.Error.NotSupported", "Operation is not supported", to: call)
        default:
            reply(error: "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member)", to: call)
        }
    }

    /// The CCCD descriptors: readable (its value follows the notify session);
    /// BlueZ refuses writes to it (StartNotify is the way).
    private func descriptorCall(_ call: DBusMessage, _ member: String, _ path: String) {
        let owner = devices.values.lazy.flatMap { device in
            device.services.flatMap { $0.characteristics }.map { (device, $0) }
        }.first { $0.1.descriptorPath == path }
        guard let (device, characteristic) = owner else {
            return reply(error: "org.freedesktop.DBus.Error.UnknownObject", "no such descriptor", to: call)
        }
        guard device.connected, device.resolved else {
            return reply(error: "org.bluez.Error.Failed", "Not connected", to: call)
        }
        switch member {
        case "ReadValue": reply(to: call, [.bytes(Data([characteristic.notifying ? 1 : 0, 0]))])
        case "WriteValue": reply(error: "org.bluez.Error.NotPermitted", "Write not permitted", to: call)
        default: reply(error: "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member)", to: call)
        }
    }

    /// Writes without response go to the radio as its flow control allows;
    /// a WriteValue is answered once handed over, a socket read on while the
    /// radio keeps up.
    private func flushCommands(_ device: FakeDevice) {
        for service in device.services {
            for characteristic in service.characteristics {
                while let next = characteristic.commands.first, radio.canSendWriteWithoutResponse(device.id) {
                    characteristic.commands.removeFirst()
                    radio.writeValue(next.value, for: characteristic.reference, of: device.id, type: .withoutResponse)
                    if let call = next.call { reply(to: call) }
                }
                if characteristic.commands.count >= Self.socketBacklog {
                    characteristic.writeSocket?.pause()
                } else {
                    characteristic.writeSocket?.resume()
                }
            }
        }
    }

    /// Packets read from a socket and not yet taken by the radio, at most.
    static let socketBacklog = 8

    /// AcquireWrite (doc/org.bluez.GattCharacteristic.rst): the client's end
    /// of a SOCK_SEQPACKET pair and the ATT MTU.
    private func acquireWrite(_ call: DBusMessage, _ device: FakeDevice, _ characteristic: FakeCharacteristic) {
        guard characteristic.info.properties.contains(.writeWithoutResponse) else {
            return reply(error: "org.bluez.Error.NotSupported", "Operation is not supported", to: call)
        }
        guard characteristic.writeSocket == nil else {
            return reply(error: "org.bluez.Error.NotPermitted", "Write acquired", to: call)
        }
        guard bus?.passesFileDescriptors == true else {
            return reply(error: "org.bluez.Error.NotSupported", "the bus passes no file descriptors", to: call)
        }
        let socket: FakeWriteSocket
        do {
            socket = try FakeWriteSocket(
                sendBuffer: writeSocketSendBuffer, pipe: writeSocketsArePipes,
                onPacket: { [weak self, weak device, weak characteristic] whole in
                    guard let self, let device, let characteristic else { return }
                    self.socketPacketCount += 1
                    // bluetoothd reads each packet into a 512-byte buffer
                    // (sock_read in src/gatt-client.c): the rest of a longer one is lost.
                    let packet = whole.prefix(BleAttribute.maximumValueLength)
                    // A packet longer than the ATT MTU allows is dropped, as BlueZ's ATT layer refuses it.
                    guard packet.count <= characteristic.mtu - 3 else { return }
                    characteristic.commands.append((packet, nil))
                    self.flushCommands(device)
                    if let limit = self.hangUpWriteSocketsAfterPackets, self.socketPacketCount >= limit {
                        self.hangUpWriteSocketsAfterPackets = nil
                        self.hangUpWriteSockets(address: device.address)
                    }
                },
                onRelease: { [weak self, weak characteristic] in
                    guard let self, let characteristic else { return }
                    guard self.writeSocketsArePipes else { return self.releaseWriteSocket(characteristic) }
                    _ = self.radio.scheduler.schedule(after: .milliseconds(50)) { [weak self, weak characteristic] in
                        guard let self, let characteristic else { return }
                        self.releaseWriteSocket(characteristic)
                    }
                })
        } catch {
            return reply(error: "org.bluez.Error.Failed", "\(error)", to: call)
        }
        characteristic.writeSocket = socket
        writeSocketInodes += socket.inodes
        var message = DBusMessage.methodReturn(to: call, body: [.unixFD(0), .uint16(UInt16(characteristic.mtu))])
        message.fileDescriptors = socket.handOver().map { [$0] } ?? []
        emit(message)
        changed(characteristic.path, "org.bluez.GattCharacteristic1", ["WriteAcquired": .boolean(true)])
    }

    /// The socket closes (or the client closed it): WriteValue is unlocked.
    private func releaseWriteSocket(_ characteristic: FakeCharacteristic) {
        guard let socket = characteristic.writeSocket else { return }
        characteristic.writeSocket = nil
        socket.hangUp()
        changed(characteristic.path, "org.bluez.GattCharacteristic1", ["WriteAcquired": .boolean(false)])
    }

    /// The control interface, for programs that run the fake in another process (bleak's check, the bench).
    private func controlCall(_ call: DBusMessage, _ member: String) {
        switch member {
        case "LoseLink":
            guard call.body.count == 2, let address = call.body[0].stringValue, let reason = call.body[1].stringValue
            else {
                return reply(error: "org.freedesktop.DBus.Error.InvalidArgs", "LoseLink(address, reason)", to: call)
            }
            loseLink(address: address, reason: reason)
            reply(to: call)
        case "SetPowered":
            guard let on = call.body.first?.boolValue else {
                return reply(error: "org.freedesktop.DBus.Error.InvalidArgs", "SetPowered(on)", to: call)
            }
            setPowered(on)
            reply(to: call)
        case "Notify":
            guard call.body.count == 3, let address = call.body[0].stringValue, let value = call.body[1].bytesValue,
                let count = call.body[2].integerValue, count >= 0
            else {
                return reply(error: "org.freedesktop.DBus.Error.InvalidArgs", "Notify(address, value, count)", to: call)
            }
            reply(to: call, [.uint32(UInt32(clamping: notify(address: address, value: value, count: Int(count))))])
        case "HangUpWriteSockets":
            guard let address = call.body.first?.stringValue else {
                return reply(error: "org.freedesktop.DBus.Error.InvalidArgs", "HangUpWriteSockets(address)", to: call)
            }
            reply(to: call, [.uint32(UInt32(hangUpWriteSockets(address: address)))])
        case "DroppedRadioWrites":
            guard let address = call.body.first?.stringValue, let dropped = droppedRadioWrites(address: address) else {
                return reply(
                    error: "org.freedesktop.DBus.Error.InvalidArgs", "DroppedRadioWrites(address of a device)", to: call
                )
            }
            reply(to: call, [.uint32(UInt32(clamping: dropped))])
        case "FailNext":
            guard call.body.count == 2, let method = call.body[0].stringValue, let error = call.body[1].stringValue
            else { return reply(error: "org.freedesktop.DBus.Error.InvalidArgs", "FailNext(method, error)", to: call) }
            failNext(method, with: error)
            reply(to: call)
        default:
            reply(error: "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member)", to: call)
        }
    }

    // MARK: Objects

    private var adapterProperties: [String: DBusValue] {
        Self.adapterProperties(address: Self.adapterAddress, powered: powered, discovering: discovering)
    }

    private static func adapterProperties(address: String, powered: Bool, discovering: Bool) -> [String: DBusValue] {
        [
            "Address": .string(address), "AddressType": .string("public"), "Name": .string("xtalk-fake"),
            "Alias": .string("xtalk-fake"), "Class": .uint32(0), "Powered": .boolean(powered),
            "PowerState": .string(powered ? "on" : "off"), "Discoverable": .boolean(false),
            "DiscoverableTimeout": .uint32(180), "Pairable": .boolean(true), "PairableTimeout": .uint32(0),
            "Discovering": .boolean(discovering), "UUIDs": .stringArray([]),
            "Modalias": .string("usb:v1D6Bp0246d0542"), "Roles": .stringArray(["central", "peripheral"]),
        ]
    }

    /// Every object: path → interface → properties.
    private func objects() -> [String: [String: [String: DBusValue]]] {
        var objects: [String: [String: [String: DBusValue]]] = [:]
        if present { objects[adapterPath] = ["org.bluez.Adapter1": adapterProperties] }
        for (path, adapter) in idleAdapters {
            objects[path] = [
                "org.bluez.Adapter1": Self.adapterProperties(
                    address: adapter.address, powered: adapter.powered, discovering: adapter.discovering)
            ]
        }
        for device in devices.values {
            objects[device.path] = ["org.bluez.Device1": device.properties]
            for service in device.services {
                objects[service.path] = ["org.bluez.GattService1": service.properties]
                for characteristic in service.characteristics {
                    var properties = characteristic.properties
                    // BlueZ: MTU exists only while connected (gatt-client.c, characteristic_mtu_exists).
                    if !device.connected { properties["MTU"] = nil }
                    objects[characteristic.path] = ["org.bluez.GattCharacteristic1": properties]
                    // Descriptors are objects like the rest (GetManagedObjects, Get, GetAll, Introspect).
                    if let descriptor = characteristic.descriptorPath {
                        objects[descriptor] = ["org.bluez.GattDescriptor1": characteristic.descriptorProperties]
                    }
                }
            }
        }
        return objects
    }

    private func managedObjects() -> DBusValue {
        .array(
            elementSignature: "{oa{sa{sv}}}",
            objects().sorted { $0.key < $1.key }.map { path, interfaces in
                .dictEntry(.objectPath(path), Self.interfaceMap(interfaces))
            })
    }

    static func interfaceMap(_ interfaces: [String: [String: DBusValue]]) -> DBusValue {
        .array(
            elementSignature: "{sa{sv}}",
            interfaces.sorted { $0.key < $1.key }.map { .dictEntry(.string($0.key), .propertyMap($0.value)) })
    }

    private func characteristic(at path: String) -> (FakeDevice, FakeCharacteristic)? {
        for device in devices.values where path.hasPrefix(device.path + "/") {
            for service in device.services {
                if let characteristic = service.characteristics.first(where: { $0.path == path }) {
                    return (device, characteristic)
                }
            }
        }
        return nil
    }

    private func introspection(of path: String) -> String {
        let all = objects()
        let interfaces =
            (all[path]?.keys.sorted() ?? [])
            + ["org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Properties"]
        let prefix = path == "/" ? "/" : path + "/"
        var children = Set<String>()
        for other in all.keys where other.hasPrefix(prefix) && other != path {
            if let name = other.dropFirst(prefix.count).split(separator: "/").first { children.insert(String(name)) }
        }
        if path == "/" { children.insert("org") }
        return "<node>" + interfaces.map { "<interface name=\"\($0)\"/>" }.joined()
            + children.sorted().map { "<node name=\"\($0)\"/>" }.joined() + "</node>"
    }

    // MARK: Sending

    private func emit(_ message: DBusMessage) {
        bus?.send(message)
    }

    private func changed(
        _ path: String, _ interface: String, _ properties: [String: DBusValue], invalidated: [String] = []
    ) {
        emit(
            .signal(
                path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                body: [.string(interface), .propertyMap(properties), .stringArray(invalidated)]))
    }

    private func interfacesAdded(_ path: String, _ interfaces: [String: [String: DBusValue]]) {
        emit(
            .signal(
                path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
                body: [.objectPath(path), Self.interfaceMap(interfaces)]))
    }

    private func interfacesRemoved(_ path: String, _ interfaces: [String]) {
        emit(
            .signal(
                path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved",
                body: [.objectPath(path), .stringArray(interfaces)]))
    }

    private func reply(to call: DBusMessage, _ body: [DBusValue] = []) {
        guard !call.noReplyExpected else { return }
        emit(.methodReturn(to: call, body: body))
    }

    private func reply(error name: String, _ text: String, to call: DBusMessage) {
        guard !call.noReplyExpected else { return }
        emit(.error(to: call, name: name, text: text))
    }
}

/// A device as the fake's bluetoothd knows it.
@MainActor
final class FakeDevice {
    let id: UUID
    let address: String
    let advertisement: BleAdvertisement
    /// The last advertisement's RSSI while discovering (nil: not current).
    var rssi: Int?
    var connected = false
    /// It was connected once: bluetoothd stores it, and a restarted one still knows it.
    var remembered = false
    var resolved = false
    var connectCall: DBusMessage?
    /// Disconnect calls answered once the link is gone, and the timer that drops it.
    var disconnectCalls: [DBusMessage] = []
    var disconnectTimer: TimerToken?
    var servicesToDiscover: [BleUUID] = []
    var discovered: [(service: BleUUID, characteristics: [BleCharacteristicInfo])] = []
    var services: [FakeService] = []
    /// GATT object paths exported (they outlive the link, as BlueZ's cache keeps them).
    var exported: Set<String> = []

    let adapterPath: String

    init(id: UUID, address: String, advertisement: BleAdvertisement, rssi: Int, adapterPath: String) {
        self.adapterPath = adapterPath
        self.id = id
        self.address = address
        self.advertisement = advertisement
        self.rssi = rssi
    }

    var path: String { FakeBlueZ.devicePath(address, adapterPath: adapterPath) }

    var properties: [String: DBusValue] {
        var properties: [String: DBusValue] = [
            "Address": .string(address), "AddressType": .string("public"),
            "Alias": .string(advertisement.localName ?? address.replacingOccurrences(of: ":", with: "-")),
            "Paired": .boolean(false), "Bonded": .boolean(false), "Trusted": .boolean(false),
            "Blocked": .boolean(false), "LegacyPairing": .boolean(false),
            "Connected": .boolean(connected), "ServicesResolved": .boolean(resolved),
            "UUIDs": .stringArray(advertisement.serviceUUIDs.map { $0.uuidString.lowercased() }),
            "Adapter": .objectPath(adapterPath),
        ]
        if let name = advertisement.localName { properties["Name"] = .string(name) }
        if let rssi { properties["RSSI"] = .int16(Int16(clamping: rssi)) }
        if let data = advertisement.manufacturerData, data.count >= 2 {
            let company = UInt16(data[data.startIndex]) | UInt16(data[data.startIndex + 1]) << 8
            properties["ManufacturerData"] = .array(
                elementSignature: "{qv}", [.dictEntry(.uint16(company), .variant(.bytes(data.dropFirst(2))))])
        }
        return properties
    }

    /// The GATT objects, numbered as BlueZ numbers them (by handle).
    func buildGatt(mtu: Int) {
        var handle = 0x000A
        services = discovered.map { service, characteristics in
            let servicePath = path + String(format: "/service%04x", handle)
            handle += 1
            let children = characteristics.map { info in
                let characteristicPath = servicePath + String(format: "/char%04x", handle)
                handle += 2
                var descriptorPath: String?
                if info.properties.contains(.notify) || info.properties.contains(.indicate) {
                    descriptorPath = characteristicPath + String(format: "/desc%04x", handle)
                    handle += 1
                }
                return FakeCharacteristic(
                    path: characteristicPath, servicePath: servicePath, info: info,
                    reference: BleCharacteristicRef(service: service, characteristic: info.uuid), mtu: mtu,
                    descriptorPath: descriptorPath)
            }
            return FakeService(path: servicePath, devicePath: path, uuid: service, characteristics: children)
        }
    }

    /// The attribute handle a GATT object's path ends with (serviceXXXX, charXXXX, descXXXX).
    static func handle(of path: String) -> UInt16 {
        UInt16(path.suffix(4), radix: 16) ?? 0
    }

    func characteristic(_ reference: BleCharacteristicRef) -> FakeCharacteristic? {
        services.first { $0.uuid == reference.service }?.characteristics.first {
            $0.info.uuid == reference.characteristic
        }
    }

    /// The link ended: the GATT objects stay (cached), their calls and sessions go.
    func reset() {
        connected = false
        resolved = false
        connectCall = nil
        servicesToDiscover = []
        discovered = []
        for service in services {
            for characteristic in service.characteristics {
                characteristic.readCalls = []
                characteristic.writeCalls = []
                characteristic.notifyCalls = []
                characteristic.commands = []
            }
        }
    }
}

@MainActor
final class FakeService {
    let path: String
    let devicePath: String
    let uuid: BleUUID
    let characteristics: [FakeCharacteristic]

    init(path: String, devicePath: String, uuid: BleUUID, characteristics: [FakeCharacteristic]) {
        self.path = path
        self.devicePath = devicePath
        self.uuid = uuid
        self.characteristics = characteristics
    }

    var properties: [String: DBusValue] {
        [
            "UUID": .string(uuid.uuidString.lowercased()), "Device": .objectPath(devicePath),
            "Primary": .boolean(true), "Includes": .array(elementSignature: "o", []),
            "Handle": .uint16(FakeDevice.handle(of: path)),
        ]
    }
}

@MainActor
final class FakeCharacteristic {
    let path: String
    let servicePath: String
    let info: BleCharacteristicInfo
    let reference: BleCharacteristicRef
    let mtu: Int
    let descriptorPath: String?
    var notifying = false
    var readCalls: [DBusMessage] = []
    var writeCalls: [DBusMessage] = []
    var notifyCalls: [DBusMessage] = []
    /// Writes without response waiting for the radio: by WriteValue (answered when taken) or from the socket.
    var commands: [(value: Data, call: DBusMessage?)] = []
    var writeSocket: FakeWriteSocket?

    init(
        path: String, servicePath: String, info: BleCharacteristicInfo, reference: BleCharacteristicRef, mtu: Int,
        descriptorPath: String?
    ) {
        self.path = path
        self.servicePath = servicePath
        self.info = info
        self.reference = reference
        self.mtu = mtu
        self.descriptorPath = descriptorPath
    }

    var properties: [String: DBusValue] {
        var flags: [String] = []
        if info.properties.contains(.read) { flags.append("read") }
        if info.properties.contains(.writeWithoutResponse) { flags.append("write-without-response") }
        if info.properties.contains(.write) { flags.append("write") }
        if info.properties.contains(.notify) { flags.append("notify") }
        if info.properties.contains(.indicate) { flags.append("indicate") }
        var properties: [String: DBusValue] = [
            "UUID": .string(info.uuid.uuidString.lowercased()), "Service": .objectPath(servicePath),
            "Value": .bytes(Data()), "Flags": .stringArray(flags), "MTU": .uint16(UInt16(clamping: mtu)),
            "Handle": .uint16(FakeDevice.handle(of: path)),
        ]
        // Only a characteristic that can notify has Notifying, only one that can be
        // written without response has WriteAcquired (BlueZ's property exists-callbacks).
        if descriptorPath != nil { properties["Notifying"] = .boolean(notifying) }
        if info.properties.contains(.writeWithoutResponse) {
            properties["WriteAcquired"] = .boolean(writeSocket != nil)
        }
        return properties
    }

    /// The Client Characteristic Configuration descriptor of a notifying characteristic.
    var descriptorProperties: [String: DBusValue] {
        [
            "UUID": .string("00002902-0000-1000-8000-00805f9b34fb"), "Characteristic": .objectPath(path),
            "Value": .bytes(Data()), "Handle": .uint16(FakeDevice.handle(of: descriptorPath ?? path)),
        ]
    }
}
