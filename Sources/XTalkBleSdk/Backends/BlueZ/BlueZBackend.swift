import Foundation
import XTalkDBus

// The BlueZ backend: the backend seam over org.bluez on the D-Bus system bus
// (Linux gateways). D-Bus is spoken in Swift (XTalkDBus): no -dev package, no
// C library. The system bus is `DBUS_SYSTEM_BUS_ADDRESS` when set, else
// /var/run/dbus/system_bus_socket.
//
// BlueZ facts it is built on (BlueZ's doc/org.bluez.*.rst and src/device.c):
// - Adapters are Adapter1 objects, added and removed as the kernel hands
//   bluetoothd controllers (after bluetoothd owns its name, at boot too);
//   one is usable while its Powered is true. The backend uses one: the
//   first powered, kept while it stays so. bluetoothd
//   restarting shows as org.bluez losing its owner (every object is gone):
//   the seam's `.resetting`, then `.poweredOn` once it is back.
// - Discovery: SetDiscoveryFilter (service UUIDs, LE) then StartDiscovery;
//   BlueZ answers StartDiscovery and StopDiscovery once the controller has
//   done it and refuses either (InProgress) while the other is pending, so
//   they go one at a time (src/adapter.c: start_discovery, stop_discovery);
//   devices appear as Device1 objects (InterfacesAdded from "/") and every
//   advertisement updates RSSI (PropertiesChanged). ManufacturerData is a{qv}.
// - Connect order: Connected=true and Connect's reply (once the ATT channel
//   is up), the GATT objects (already there from an earlier link under
//   BlueZ's default cache), then ServicesResolved=true. The seam's
//   `.connected` is reported once both Connected and ServicesResolved are
//   true: BlueZ discovers services itself, and `discoverServices` /
//   `discoverCharacteristics` answer from its objects.
// - Disconnect order: ServicesResolved=false, Device1.Disconnected(reason,
//   message), Connected=false. The link is lost at Connected=false (or when
//   the device object goes), with the reason the signal gave.
// - Notifications: StartNotify, then PropertiesChanged(Value) on the
//   characteristic. A read also changes Value: only subscribed
//   characteristics' changes are notifications (a read's value comes from
//   its reply).
// - Writes without response go through the socket AcquireWrite hands over
//   (one packet per write, one system call instead of a D-Bus round trip)
//   when the characteristic offers it (its WriteAcquired property exists) and
//   the bus passes file descriptors. A full socket is BlueZ's flow control:
//   the writes wait for room. When BlueZ hangs the socket up while the link
//   stays, or AcquireWrite fails, the rest go by WriteValue type "command"
//   for that connection, starting with the packet the socket refused: none
//   is lost or reordered. By WriteValue they go one at a time (BlueZ answers
//   a command write once it has queued it, and with one in flight a retried
//   write can never overtake a later one). `canSendWriteWithoutResponse` is
//   false while writes wait; `.readyToSendWriteWithoutResponse` follows.
// - Writes with response: WriteValue type "request". BlueZ refuses WriteValue
//   (NotPermitted) while the socket is held, so a write with response
//   releases it first (closing it; BlueZ may see the close a moment after the
//   call, so NotPermitted is then retried like InProgress).
// - org.bluez.Error.InProgress (concurrent operations on one characteristic,
//   or a connect already under way) is retried, never reported.
// - The MTU is GattCharacteristic1.MTU (BlueZ 5.62+), read at write time.
//
// Seam rules: nothing is reported from inside a call (every event comes from
// a D-Bus reply or signal, or a zero-delay timer); nothing of a connection
// after it was cancelled, lost, or the adapter went below powered on (every
// reply is checked against the connection's generation).

@MainActor
package final class BlueZBackend: BleBackend {
    package var eventHandler: (@MainActor (BleBackendEvent) -> Void)?
    package let scheduler: any TimerScheduling
    package private(set) var state: BleManagerState = .unknown
    /// Why Bluetooth is not usable, in words (no system bus, no bluetoothd, no adapter, powered off).
    package private(set) var unavailableReason: String?

    /// How long BlueZ may take to answer a Connect (the client's connect timeout is shorter).
    static let connectCallTimeout: Duration = .seconds(60)
    /// How long to wait before retrying an operation BlueZ reported `InProgress`.
    static let retryDelay: Duration = .milliseconds(20)
    /// How many times an `InProgress` read or write is retried.
    static let maximumRetries = 50
    /// How long before the bus is opened again after it closed.
    static let reopenDelay: Duration = .seconds(1)
    /// How long after a characteristic in use went the link may still end by
    /// itself (bluetoothd reports the ATT channel's close and the
    /// controller's disconnection within milliseconds of each other).
    static let serviceChangeGrace: Duration = .milliseconds(250)
    /// ServicesResolved came before any of the device's GATT objects (see
    /// `Connection.objectsWait`): how long to wait for them at most, and how
    /// long after the last one arrived they are taken as complete.
    static let objectsWaitLimit: Duration = .seconds(1)
    static let objectsSettle: Duration = .milliseconds(50)
    /// How long bluetoothd may go without an adapter before Bluetooth is `.unsupported`.
    static let adapterWaitLimit: Duration = .seconds(3)
    /// How often a missing system bus is looked for again.
    static let busRetryInterval: Duration = .seconds(5)

    private struct Connection {
        let generation: UInt64
        let path: String
        /// The link came up for this connection (Connected=true or Connect answered).
        var linkUp = false
        /// `.connected` was reported.
        var reported = false
        /// Writes without response waiting for their turn; the first is in flight when `commandInFlight`.
        var commands: [(data: Data, path: String)] = []
        var commandInFlight = false
        /// `canSendWriteWithoutResponse` said no: `.readyToSendWriteWithoutResponse` is owed.
        var owesReady = false
        /// The characteristics' object paths and the ATT MTU, read from the
        /// objects once the services are resolved (writes must not search the tree).
        var paths: [BleCharacteristicRef: String] = [:]
        var mtu = 23
        /// A characteristic in use went (see `servicesChanged`).
        var servicesChanged = false
        /// The services whose characteristics the connection discovered: the ones it uses.
        var usedServices: Set<BleUUID> = []
        /// AcquireWrite's socket per characteristic path; dropping one closes it.
        var writeSockets: [String: WriteSocketState] = [:]
        /// The device was connected when this connection began: another
        /// client's link (see `relink`), on which Connect is answered at once.
        var inherited = false
        /// A subscription went through on this link: it is this connection's own.
        var subscribed = false
        /// The inherited link turned out to be going; nil: not relinking.
        var relink: Relink?
        /// ServicesResolved=true came while none of the device's GATT objects
        /// was on the bus. On a device's first connection bluetoothd sends the
        /// device's changed UUIDs and the objects in one flush, the device's
        /// change first, and ServicesResolved can join it (bluez/bluez#1489,
        /// hbldh/bleak#1806). `.connected` waits for the objects.
        var objectsWait: ObjectsWait?
    }

    /// A wait for a device's GATT objects: over once none has arrived for
    /// `objectsSettle`, or at `objectsWaitLimit` (then discovery says what is missing).
    private struct ObjectsWait {
        let deadline: Duration
        var timer: TimerToken?
        var over = false
    }

    /// Another client (another process) disconnected the device a moment ago:
    /// BlueZ keeps that link for 2 s, Connected, answers a Connect on it at
    /// once and refuses StartNotify ("Not connected"), then drops it. Nothing
    /// on the bus tells such a link from a healthy one another client holds,
    /// until StartNotify is refused or the link drops before the first
    /// subscription. Then, once per connection, the backend waits for the
    /// held link to go, connects again and makes the subscriptions the client
    /// asked for; the client sees only a slower connect.
    private struct Relink {
        /// Subscriptions to make once the new link's services are resolved.
        var subscriptions: [BleCharacteristicRef] = []
        /// The first refusal, reported if the relink does not complete in time.
        var failure: BleBackendError?
        var timer: TimerToken?
    }

    /// How long a relink may take: the rest of BlueZ's 2 s hold, and a connect.
    static let relinkLimit: Duration = .seconds(6)

    private enum WriteSocketState {
        case acquiring
        case acquired(BlueZWriteSocket)
        /// Not offered or refused: WriteValue for the rest of the connection.
        case unavailable
        /// Hung up, or let go by the backend (a with-response write; BlueZ
        /// 5.50's pipe, on which send(2) fails): WriteValue for the rest of the
        /// connection, and its "Write acquired" (NotPermitted) retried until
        /// bluetoothd notices the descriptor closed.
        case released
    }

    private let addresses: [DBusAddress]
    private var bus: DBusConnection?
    private var activated = false
    private var tree = BlueZObjectTree()
    private var adapter: String?
    /// Counts adapter choices: a wait for an adapter ends when another comes.
    private var adapterWait: UInt64 = 0
    /// This bluetoothd had no adapter for `adapterWaitLimit`: `.unsupported`
    /// until one comes (a new bluetoothd, or the bus again, waits anew).
    private var adapterWaitExpired = false
    /// org.bluez's unique name: signals from anyone else are ignored.
    private var bluezOwner: String?
    /// The services a scan asked for: nil while the client is not scanning.
    private var scanServices: [BleUUID]?
    private enum Discovery { case off, starting, on, stopping }
    /// BlueZ's discovery for this client, as its answers left it.
    private var discovery = Discovery.off
    /// The filter last given to BlueZ.
    private var discoveryFilter: [BleUUID]?
    /// Changes when BlueZ forgets this client's discovery (adapter off,
    /// bluetoothd or the bus gone): answers of before are ignored.
    private var discoveryEpoch: UInt64 = 0
    private var devicePaths: [UUID: String] = [:]
    private var connections: [UUID: Connection] = [:]
    private var nextGeneration: UInt64 = 0
    /// Subscribed characteristics: path → whose.
    private var subscriptions: [String: (peripheral: UUID, generation: UInt64, reference: BleCharacteristicRef)] = [:]
    /// The reason of each device's last Disconnected signal, until its Connected=false.
    private var disconnectReasons: [String: (reason: String, message: String)] = [:]
    /// Devices whose Disconnect (from a cancel) is not answered yet: BlueZ
    /// keeps such a link for DISCONNECT_TIMER (2 s, for profiles to let go)
    /// and answers once it is gone, Connected=false first (src/device.c).
    private var disconnecting: Set<String> = []
    /// Connects waiting for such a link to be gone: BlueZ would answer their
    /// Connect at once, on the link about to drop.
    private var deferredConnects: Set<UUID> = []
    /// Counts states reported, so that a late reply of an earlier bus session is ignored.
    private var session: UInt64 = 0

    /// `environment` supplies `DBUS_SYSTEM_BUS_ADDRESS` (the process's environment in production).
    package init(
        scheduler: any TimerScheduling, environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.scheduler = scheduler
        addresses = DBusAddress.systemBus(environment: environment)
    }

    /// A backend released with its links up (a client released without
    /// `teardown()`) disconnects them: BlueZ keeps a link until someone
    /// disconnects it, so the radio would stay connected, and out of every
    /// other central's reach, for the life of the process (CoreBluetooth
    /// cancels a released peripheral's pending connection). A link still
    /// being made is cancelled by the same call. Released on the main actor
    /// (as a main-actor client nearly always is), the calls are written at
    /// once, as `teardown()`'s are; elsewhere on the main actor's next turn.
    /// The bus stays open until BlueZ has answered them all (it answers once
    /// the link is gone), so that no call queued behind other writes is lost.
    deinit {
        guard let bus else { return }
        let deferred = deferredConnects
        let paths = connections.compactMap { peripheral, connection in
            connection.path.isEmpty || deferred.contains(peripheral) ? nil : connection.path
        }
        guard !paths.isEmpty else { return }
        if Thread.isMainThread {
            MainActor.assumeIsolated { Self.disconnect(paths, on: bus) }
        } else {
            Task { @MainActor in Self.disconnect(paths, on: bus) }
        }
    }

    /// Disconnects `paths` for a released backend, then closes its bus.
    private static func disconnect(_ paths: [String], on bus: DBusConnection) {
        let unanswered = Countdown(paths.count)
        for path in paths.sorted() {
            bus.call(destination: "org.bluez", path: path, interface: BlueZInterface.device, member: "Disconnect") {
                _ in
                unanswered.remaining -= 1
                if unanswered.remaining == 0 { bus.close(reason: "the client was released") }
            }
        }
    }

    @MainActor private final class Countdown {
        var remaining: Int
        init(_ count: Int) { remaining = count }
    }

    // MARK: The bus and the adapter

    package func activate(showPowerAlert: Bool, restoreIdentifier: String?) {
        guard !activated else { return }
        activated = true
        openBus()
    }

    private func openBus() {
        session += 1
        let opening = session
        DBusConnection.open(addresses) { [weak self] result in
            guard let self, self.session == opening else {
                if case .success(let connection) = result { connection.close() }
                return
            }
            switch result {
            case .failure(let error):
                self.setState(
                    .unsupported,
                    reason: "no D-Bus system bus (\(error.message)): BlueZ needs dbus and bluetoothd running")
                // The bus may come (back) later, as Bluetooth may be turned on: ask again now and then.
                _ = self.scheduler.schedule(after: Self.busRetryInterval) { [weak self] in
                    guard let self, self.bus == nil, self.session == opening else { return }
                    self.openBus()
                }
            case .success(let connection):
                self.bus = connection
                connection.onSignal = { [weak self] message in self?.receive(message) }
                connection.onClose = { [weak self] reason in self?.busClosed(reason) }
                connection.addMatch(
                    "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                        + "member='NameOwnerChanged',arg0='org.bluez'")
                connection.addMatch("type='signal',sender='org.bluez'")
                self.findBlueZ()
            }
        }
    }

    private func busClosed(_ reason: String) {
        forgetAdapterWait()
        bus = nil
        bluezOwner = nil
        tree = BlueZObjectTree()
        setState(.resetting, reason: "the D-Bus system bus connection closed (\(reason)); reconnecting")
        _ = scheduler.schedule(after: Self.reopenDelay) { [weak self] in
            guard let self, self.bus == nil else { return }
            self.openBus()
        }
    }

    /// Asks who owns org.bluez; then loads its objects.
    private func findBlueZ() {
        let current = session
        bus?.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetNameOwner", body: [.string("org.bluez")]
        ) { [weak self] reply in
            guard let self, self.session == current else { return }
            switch reply {
            case .success(let message):
                self.bluezOwner = message.body.first?.stringValue
                self.loadObjects()
            case .failure:
                self.setState(.unsupported, reason: "BlueZ (bluetoothd) is not running on the system bus")
            }
        }
    }

    private func loadObjects() {
        let current = session
        bus?.call(
            destination: "org.bluez", path: "/", interface: BlueZInterface.objectManager, member: "GetManagedObjects"
        ) { [weak self] reply in
            guard let self, self.session == current else { return }
            switch reply {
            case .success(let message):
                self.tree.load(managedObjects: message.body.first ?? .array(elementSignature: "{oa{sa{sv}}}", []))
                self.adapter = nil
                self.adapterChanged()
            case .failure(let error) where error.name == "org.freedesktop.DBus.Error.AccessDenied":
                self.setState(
                    .unauthorized,
                    reason: "this user may not use BlueZ on the system bus (\(error.message)): "
                        + "add it to the bluetooth group, or allow it in /etc/dbus-1/system.d")
            case .failure(let error):
                self.setState(.unsupported, reason: "BlueZ did not list its objects (\(error))")
            }
        }
    }

    /// Chooses the adapter again and reports its power: the one in use while
    /// it is powered, else the first powered one (a USB dongle next to an
    /// rfkilled built-in controller), else the one in use or the first.
    /// Moving to another adapter ends what the old one had (its links, this
    /// client's discovery) as the radio going `.unknown` and back on: links
    /// are lost, and a running scan starts again on the new adapter.
    private func adapterChanged() {
        let adapters = tree.adapters
        let tree = self.tree
        func isPowered(_ path: String) -> Bool {
            tree.properties(path, BlueZInterface.adapter)?["Powered"]?.boolValue == true
        }
        let old = adapter
        let previous = old.flatMap { adapters.contains($0) ? $0 : nil }
        let chosen =
            previous.flatMap { isPowered($0) ? $0 : nil } ?? adapters.first(where: isPowered) ?? previous
            ?? adapters.first
        adapter = chosen
        guard let chosen else {
            noAdapter()
            return
        }
        forgetAdapterWait()  // an adapter came
        if let old, old != chosen {
            devicePaths.removeAll()  // the old adapter's device objects
            if state == .poweredOn {
                setState(.unknown, reason: "moving to the Bluetooth adapter \(Self.name(of: chosen))")
            }
        }
        if isPowered(chosen) {
            setState(.poweredOn, reason: nil)
        } else if adapters.count == 1 {
            setState(
                .poweredOff,
                reason: "the Bluetooth adapter \(Self.name(of: chosen)) is powered off (bluetoothctl power on)")
        } else {
            let names = adapters.map(Self.name(of:)).joined(separator: ", ")
            setState(
                .poweredOff,
                reason: "no Bluetooth adapter is powered on (\(names); bluetoothctl select, then power on)")
        }
    }

    /// bluetoothd without an adapter: one may be on its way (bluetoothd owns
    /// its name before the kernel hands it the controllers, at boot and on a
    /// restart; a USB dongle plugged in again), so the state stays `.unknown`
    /// (a scan waits) for `adapterWaitLimit`, then is `.unsupported`.
    private func noAdapter() {
        devicePaths.removeAll()  // a dongle plugged in again may come back as another hciN
        // Waited already: only an adapter coming changes that.
        guard !adapterWaitExpired else { return }
        adapterWait += 1
        let waiting = adapterWait
        setState(.unknown, reason: "BlueZ has no Bluetooth adapter yet; waiting for one")
        _ = scheduler.schedule(after: Self.adapterWaitLimit) { [weak self] in
            guard let self, self.adapterWait == waiting, self.state == .unknown else { return }
            self.adapterWaitExpired = true
            self.setState(.unsupported, reason: "BlueZ has no Bluetooth adapter")
        }
    }

    /// An adapter came, or bluetoothd or the bus went: a wait for an adapter
    /// of before is over, and the next one gets its own.
    private func forgetAdapterWait() {
        adapterWait += 1
        adapterWaitExpired = false
    }

    private static func name(of adapter: String) -> String {
        adapter.split(separator: "/").last.map(String.init) ?? adapter
    }

    private func setState(_ newState: BleManagerState, reason: String?) {
        unavailableReason = reason
        guard newState != state else { return }
        state = newState
        if newState != .poweredOn {
            // Every connection is gone with the adapter, without an event.
            connections.removeAll()
            subscriptions.removeAll()
            disconnectReasons.removeAll()
            disconnecting.removeAll()
            deferredConnects.removeAll()
            scanServices = nil
            discovery = .off
            discoveryFilter = nil
            discoveryEpoch += 1
        }
        if newState == .resetting || newState == .unsupported { devicePaths.removeAll() }
        emit(.stateChanged(newState))
    }

    // MARK: Signals

    private func receive(_ message: DBusMessage) {
        if message.member == "NameOwnerChanged", message.interface == "org.freedesktop.DBus" {
            bluezOwnerChanged(message)
            return
        }
        guard let sender = message.sender, sender == bluezOwner, let path = message.path else { return }
        switch (message.interface, message.member) {
        case (BlueZInterface.properties, "PropertiesChanged"):
            propertiesChanged(path: path, body: message.body)
        case (BlueZInterface.objectManager, "InterfacesAdded"):
            guard message.body.count == 2, let object = message.body[0].stringValue else { return }
            tree.add(path: object, interfaces: message.body[1])
            objectArrived(object)
            if message.body[1].dictionaryEntries?.contains(where: { $0.key.stringValue == BlueZInterface.adapter })
                == true
            {
                adapterChanged()
            }
            report(device: object)
        case (BlueZInterface.objectManager, "InterfacesRemoved"):
            guard message.body.count == 2, let object = message.body[0].stringValue else { return }
            interfacesRemoved(path: object, interfaces: message.body[1].stringArrayValue ?? [])
        case (BlueZInterface.device, "Disconnected"):
            disconnectReasons[path] = (
                message.body.first?.stringValue ?? "", message.body.dropFirst().first?.stringValue ?? ""
            )
        default:
            break
        }
    }

    private func bluezOwnerChanged(_ message: DBusMessage) {
        guard message.body.count == 3, message.body[0].stringValue == "org.bluez",
            let newOwner = message.body[2].stringValue
        else { return }
        tree = BlueZObjectTree()
        adapter = nil
        forgetAdapterWait()
        if newOwner.isEmpty {
            bluezOwner = nil
            setState(.resetting, reason: "bluetoothd stopped; waiting for it to come back")
        } else {
            if bluezOwner != nil { setState(.resetting, reason: "bluetoothd restarted") }
            bluezOwner = newOwner
            loadObjects()
        }
    }

    private func propertiesChanged(path: String, body: [DBusValue]) {
        guard body.count == 3, let interface = body[0].stringValue else { return }
        // The hot path: a notification.
        if interface == BlueZInterface.characteristic {
            // Found in place: a map built for each notification costs more than the rest of this.
            let changed = body[1]
            if let mtu = changed.property("MTU")?.integerValue {
                for (id, connection) in connections where connection.paths.values.contains(path) {
                    connections[id]?.mtu = Int(mtu)
                }
            }
            guard let subscription = subscriptions[path], let value = changed.property("Value")?.bytesValue,
                connections[subscription.peripheral]?.generation == subscription.generation
            else { return }
            emit(
                .valueUpdated(
                    peripheral: subscription.peripheral, characteristic: subscription.reference, value: value,
                    error: nil))
            return
        }
        let changed = body[1].propertyMapValue ?? [:]
        tree.change(path: path, interface: interface, changed: changed, invalidated: body[2].stringArrayValue ?? [])
        switch interface {
        case BlueZInterface.adapter:
            if changed["Powered"] != nil { adapterChanged() }
        case BlueZInterface.device:
            if changed["Connected"]?.boolValue == false, disconnecting.contains(path) {
                disconnected(path)
                return
            }
            if let id = connectionID(path: path) {
                if changed["Connected"]?.boolValue == false, let connection = connections[id] {
                    if connection.relink != nil {
                        // The held link is gone: connect again.
                        callConnect(id, generation: connection.generation, path: path)
                        return
                    }
                    if connection.linkUp, mayRelink(id) {
                        beginRelink(id, subscription: nil, failure: nil)  // connects again: the link is gone
                        return
                    }
                }
                if changed["Connected"]?.boolValue == true, connections[id]?.relink == nil {
                    connections[id]?.linkUp = true
                }
                if changed["Connected"]?.boolValue == false, connections[id]?.linkUp == true {
                    linkLost(id, path: path)
                    return
                }
                checkConnected(id)
            }
            if changed["RSSI"] != nil || changed["ManufacturerData"] != nil || changed["UUIDs"] != nil {
                report(device: path)
            }
        default:
            break
        }
    }

    private func interfacesRemoved(path: String, interfaces: [String]) {
        if interfaces.contains(BlueZInterface.device), let id = connectionID(path: path) {
            linkLost(id, path: path)
        }
        if interfaces.contains(BlueZInterface.characteristic) {
            subscriptions[path] = nil
            // (Not a relinking connection: the held link's objects go with it; BlueZ without a GATT cache.)
            for (id, connection) in connections where connection.reported && connection.relink == nil {
                // Only a service the connection uses: one added or changed beside it (a DFU service) changes nothing.
                guard let reference = connection.paths.first(where: { $0.value == path })?.key,
                    connection.usedServices.contains(reference.service)
                else { continue }
                servicesChanged(id, generation: connection.generation)
            }
        }
        tree.remove(path: path, interfaces: interfaces)
        if interfaces.contains(BlueZInterface.adapter) { adapterChanged() }
    }

    /// A device bluetoothd knows (paired, or heard before: it keeps their
    /// objects) that this process has not heard: a gateway restarted with
    /// the identifier it stored connects without a scan, as on iOS.
    private func knownDevicePath(_ peripheral: UUID) -> String? {
        guard let adapter else { return nil }
        let path = tree.devices(of: adapter).first { path in
            tree.properties(path, BlueZInterface.device)?["Address"]?.stringValue
                .flatMap(BlueZ.identifier(address:)) == peripheral
        }
        if let path { devicePaths[peripheral] = path }
        return path
    }

    private func connectionID(path: String) -> UUID? {
        connections.first { $0.value.path == path }?.key
    }

    // MARK: Discovery

    package func scanForPeripherals(withServices services: [BleUUID]) {
        guard state == .poweredOn, bus != nil, let adapter else { return }
        scanServices = services
        updateDiscovery()
        // What BlueZ already knows: devices connected to this computer (they
        // do not advertise), and devices with a fresh RSSI.
        let devices = tree.devices(of: adapter)
        _ = scheduler.schedule(after: .zero) { [weak self] in
            for device in devices { self?.report(device: device) }
        }
    }

    package func stopScan() {
        guard state == .poweredOn, scanServices != nil else { return }
        scanServices = nil
        updateDiscovery()
    }

    /// Brings BlueZ's discovery for this client to what `scanServices` asks,
    /// one call at a time. BlueZ answers StartDiscovery and StopDiscovery once
    /// the controller has started or stopped scanning, and refuses either
    /// (`InProgress`) while the other is unanswered; so a scan restarted in
    /// one turn (stop, then scan: the client's Scan tapped again) starts once
    /// the stop is answered, and while a call is unanswered only the last
    /// wish counts.
    private func updateDiscovery() {
        guard let bus, let adapter else { return }
        let epoch = discoveryEpoch
        switch (discovery, scanServices) {
        case (.starting, _), (.stopping, _), (.off, nil):
            return  // an unanswered call calls this again with its answer
        case (.on, let services?):
            // Already discovering: a new filter applies at once (BlueZ restarts its scan).
            guard services != discoveryFilter else { return }
            discoveryFilter = services
            setDiscoveryFilter(services, bus: bus, adapter: adapter)
        case (.off, let services?):
            discovery = .starting
            discoveryFilter = services
            setDiscoveryFilter(services, bus: bus, adapter: adapter)
            bus.call(
                destination: "org.bluez", path: adapter, interface: BlueZInterface.adapter, member: "StartDiscovery"
            ) { [weak self] reply in
                guard let self, self.discoveryEpoch == epoch else { return }
                switch reply {
                case .success:
                    self.discovery = .on
                case .failure(let error) where error.name == "org.bluez.Error.InProgress":
                    // One call at a time from here: BlueZ already has this client discovering.
                    self.discovery = .on
                case .failure(let error):
                    self.discovery = .off
                    if self.scanServices != nil {
                        self.scanServices = nil
                        self.emit(.scanFailed(error: BlueZ.error(error, doing: "StartDiscovery")))
                    }
                }
                self.updateDiscovery()
            }
        case (.on, nil):
            discovery = .stopping
            bus.call(
                destination: "org.bluez", path: adapter, interface: BlueZInterface.adapter, member: "StopDiscovery"
            ) { [weak self] reply in
                guard let self, self.discoveryEpoch == epoch else { return }
                if case .failure(let error) = reply, error.name == "org.bluez.Error.InProgress" {
                    // Not this client's call in flight (there is none): ask again shortly.
                    self.discovery = .on
                    _ = self.scheduler.schedule(after: Self.retryDelay * 10) { [weak self] in
                        guard let self, self.discoveryEpoch == epoch else { return }
                        self.updateDiscovery()
                    }
                    return
                }
                // Stopped, or BlueZ had no discovery of ours ("No discovery started").
                self.discovery = .off
                self.updateDiscovery()
            }
        }
    }

    private func setDiscoveryFilter(_ services: [BleUUID], bus: DBusConnection, adapter: String) {
        var filter: [String: DBusValue] = ["Transport": .string("le"), "DuplicateData": .boolean(true)]
        if !services.isEmpty { filter["UUIDs"] = .stringArray(services.map { $0.uuidString.lowercased() }) }
        bus.call(
            destination: "org.bluez", path: adapter, interface: BlueZInterface.adapter, member: "SetDiscoveryFilter",
            body: [.propertyMap(filter)]
        ) { _ in }
    }

    /// Reports a device to a running scan when it offers a scanned service and
    /// was heard (RSSI present) or is connected to this computer (RSSI 127: unknown).
    private func report(device path: String) {
        guard let services = scanServices, let properties = tree.properties(path, BlueZInterface.device),
            properties["Adapter"]?.stringValue == adapter
        else { return }
        let advertisement = BlueZ.advertisement(properties)
        guard services.isEmpty || !Set(services).isDisjoint(with: advertisement.serviceUUIDs),
            let address = advertisement.platformAddress, let id = BlueZ.identifier(address: address)
        else { return }
        let rssi: Int
        if let heard = properties["RSSI"]?.integerValue {
            rssi = Int(heard)
        } else if properties["Connected"]?.boolValue == true, !disconnecting.contains(path) {
            rssi = 127
        } else {
            return
        }
        devicePaths[id] = path
        emit(.discovered(peripheral: id, advertisement: advertisement, rssi: rssi))
    }

    // MARK: Connections

    package func connect(_ peripheral: UUID) {
        guard state == .poweredOn, bus != nil else { return }
        nextGeneration += 1
        let generation = nextGeneration
        let cached = devicePaths[peripheral].flatMap { path in
            tree.properties(path, BlueZInterface.device)?["Adapter"]?.stringValue == adapter ? path : nil
        }
        guard let path = cached ?? knownDevicePath(peripheral) else {
            // Reported later, as every seam event (unless the app cancels first).
            connections[peripheral] = Connection(generation: generation, path: "")
            _ = scheduler.schedule(after: .zero) { [weak self] in
                guard let self, self.connections[peripheral]?.generation == generation else { return }
                self.connections[peripheral] = nil
                self.emit(
                    .failedToConnect(
                        peripheral: peripheral,
                        error: BleBackendError(.connectionFailed, "BlueZ no longer knows this device: scan again")))
            }
            return
        }
        connections[peripheral] = Connection(generation: generation, path: path)
        connections[peripheral]?.inherited =
            !disconnecting.contains(path)
            && tree.properties(path, BlueZInterface.device)?["Connected"]?.boolValue == true
        disconnectReasons[path] = nil
        if disconnecting.contains(path) {
            // The previous connection's link is still up (BlueZ drops it up to
            // 2 s after Disconnect): Connect would be answered on it at once,
            // and its Connected=false taken for this connection's. Connect
            // once it is gone; the client's connect timeout bounds the wait.
            deferredConnects.insert(peripheral)
            return
        }
        callConnect(peripheral, generation: generation, path: path)
    }

    private func callConnect(_ peripheral: UUID, generation: UInt64, path: String) {
        bus?.call(
            destination: "org.bluez", path: path, interface: BlueZInterface.device, member: "Connect",
            timeout: Self.connectCallTimeout
        ) { [weak self] reply in
            guard let self, self.connections[peripheral]?.generation == generation else { return }
            switch reply {
            case .success:
                self.connections[peripheral]?.linkUp = true
                self.checkConnected(peripheral)
            case .failure(let error) where error.name == "org.bluez.Error.AlreadyConnected":
                self.connections[peripheral]?.linkUp = true
                self.checkConnected(peripheral)
            case .failure(let error) where error.name == "org.bluez.Error.InProgress":
                // A connect is already under way (BlueZ's own, or another program's): ask again shortly.
                _ = self.scheduler.schedule(after: Self.retryDelay * 10) { [weak self] in
                    guard let self, let connection = self.connections[peripheral],
                        connection.generation == generation, !connection.reported || connection.relink != nil
                    else { return }
                    self.callConnect(peripheral, generation: generation, path: path)
                }
            case .failure(let error) where self.connections[peripheral]?.relink != nil:
                self.endRelink(peripheral, BlueZ.error(error, doing: "Connecting again"))
            case .failure(let error):
                self.connections[peripheral] = nil
                self.emit(.failedToConnect(peripheral: peripheral, error: BlueZ.error(error, doing: "Connecting")))
            }
        }
    }

    /// Reports `.connected` once the link is up and BlueZ has resolved the services.
    private func checkConnected(_ peripheral: UUID) {
        guard let connection = connections[peripheral], connection.linkUp,
            !connection.reported || connection.relink != nil,
            let properties = tree.properties(connection.path, BlueZInterface.device),
            properties["Connected"]?.boolValue == true, properties["ServicesResolved"]?.boolValue == true
        else { return }
        if connection.objectsWait?.over != true, tree.services(of: connection.path).isEmpty {
            if connection.objectsWait == nil { waitForObjects(peripheral, generation: connection.generation) }
            return
        }
        connections[peripheral]?.reported = true
        resolvePaths(peripheral, connection)
        guard let relink = connection.relink else { return emit(.connected(peripheral: peripheral)) }
        // The new link is up: the subscriptions the client asked for, on it.
        if let timer = relink.timer { scheduler.cancel(timer) }
        connections[peripheral]?.relink = nil
        connections[peripheral]?.servicesChanged = false  // the held link's objects went with it
        if !connection.reported { emit(.connected(peripheral: peripheral)) }
        for characteristic in relink.subscriptions { setNotifyValue(true, for: characteristic, of: peripheral) }
    }

    /// Starts the wait for the device's GATT objects (see `Connection.objectsWait`).
    private func waitForObjects(_ peripheral: UUID, generation: UInt64) {
        connections[peripheral]?.objectsWait = ObjectsWait(deadline: scheduler.elapsed + Self.objectsWaitLimit)
        armObjectsWait(peripheral, generation: generation, after: Self.objectsWaitLimit)
    }

    /// An object of `path`'s device arrived: the wait ends once they stop coming.
    private func objectArrived(_ path: String) {
        for (id, connection) in connections
        where connection.objectsWait.map({ !$0.over }) == true && path.hasPrefix(connection.path + "/") {
            guard let deadline = connection.objectsWait?.deadline else { continue }
            let delay = min(Self.objectsSettle, max(.zero, deadline - scheduler.elapsed))
            armObjectsWait(id, generation: connection.generation, after: delay)
        }
    }

    private func armObjectsWait(_ peripheral: UUID, generation: UInt64, after delay: Duration) {
        if let timer = connections[peripheral]?.objectsWait?.timer { scheduler.cancel(timer) }
        connections[peripheral]?.objectsWait?.timer = scheduler.schedule(after: delay) { [weak self] in
            guard let self, self.connections[peripheral]?.generation == generation else { return }
            self.connections[peripheral]?.objectsWait?.timer = nil
            self.connections[peripheral]?.objectsWait?.over = true
            self.checkConnected(peripheral)
        }
    }

    /// The characteristics' object paths and the ATT MTU of the connection's link.
    private func resolvePaths(_ peripheral: UUID, _ connection: Connection) {
        var paths: [BleCharacteristicRef: String] = [:]
        var mtu = 23
        for service in tree.services(of: connection.path) {
            for characteristic in tree.characteristics(of: service.path) {
                let reference = BleCharacteristicRef(service: service.uuid, characteristic: characteristic.info.uuid)
                if paths[reference] == nil { paths[reference] = characteristic.path }
                // BlueZ 5.62+ gives the ATT MTU per characteristic; without it, the default MTU of 23.
                if let value = tree.properties(characteristic.path, BlueZInterface.characteristic)?["MTU"]?
                    .integerValue
                {
                    mtu = max(mtu, Int(value))
                }
            }
        }
        connections[peripheral]?.paths = paths
        connections[peripheral]?.mtu = mtu
        readMTU(peripheral, connection.generation, path: paths.values.min())
    }

    /// Whether the connection's link is an inherited one that turned out to be
    /// going (see `Relink`) and may be made again: once (`beginRelink` clears
    /// `inherited`), before any subscription.
    private func mayRelink(_ peripheral: UUID) -> Bool {
        guard let connection = connections[peripheral] else { return false }
        return connection.inherited && !connection.subscribed
    }

    /// A relink that failed (its Connect refused, or not done in time): a
    /// subscription waiting for it gets the first refusal, a Connect still
    /// under way is cancelled (Disconnect), and the connection ends, reported
    /// as the client expects it at this point: `.disconnected` after
    /// `.connected`, `.failedToConnect` before.
    private func endRelink(_ peripheral: UUID, _ error: BleBackendError) {
        guard let connection = connections[peripheral], let relink = connection.relink else { return }
        if let timer = relink.timer { scheduler.cancel(timer) }
        connections[peripheral]?.relink = nil
        if let failure = relink.failure, let characteristic = relink.subscriptions.first {
            emit(
                .notificationStateUpdated(
                    peripheral: peripheral, characteristic: characteristic, isNotifying: false, error: failure))
            guard connections[peripheral]?.generation == connection.generation else { return }  // the client let go
        }
        cancelPeripheralConnection(peripheral)
        emit(
            connection.reported
                ? .disconnected(peripheral: peripheral, error: error)
                : .failedToConnect(peripheral: peripheral, error: error))
    }

    /// Starts a relink: waits for the held link to go (Connected=false), then
    /// connects again (the Connected=false branch of the device's property
    /// changes); bounded by `relinkLimit`.
    private func beginRelink(_ peripheral: UUID, subscription: BleCharacteristicRef?, failure: BleBackendError?) {
        guard let connection = connections[peripheral] else { return }
        let generation = connection.generation
        var relink = Relink(subscriptions: subscription.map { [$0] } ?? [], failure: failure)
        relink.timer = scheduler.schedule(after: Self.relinkLimit) { [weak self] in
            guard let self, let connection = self.connections[peripheral], connection.generation == generation,
                connection.relink != nil
            else { return }
            self.endRelink(
                peripheral,
                BleBackendError(
                    .connectionFailed, "the link another program let go did not come back within \(Self.relinkLimit)"))
        }
        connections[peripheral]?.inherited = false  // once per connection
        connections[peripheral]?.relink = relink
        connections[peripheral]?.linkUp = false
        if tree.properties(connection.path, BlueZInterface.device)?["Connected"]?.boolValue != true {
            callConnect(peripheral, generation: generation, path: connection.path)
        }
    }

    /// Asks BlueZ for this link's ATT MTU. The objects' MTU may be missing or
    /// another link's: BlueZ keeps GATT objects across links, gives MTU only
    /// while connected, and signals its change only on the link that made
    /// the objects (gatt-client.c), so objects loaded while disconnected
    /// carry none; the default of 23 would cut every write to 20 bytes.
    private func readMTU(_ peripheral: UUID, _ generation: UInt64, path: String?) {
        guard let path else { return }
        bus?.call(
            destination: "org.bluez", path: path, interface: BlueZInterface.properties, member: "Get",
            body: [.string(BlueZInterface.characteristic), .string("MTU")]
        ) { [weak self] reply in
            guard let self, self.connections[peripheral]?.generation == generation,
                case .success(let message) = reply, let mtu = message.body.first?.integerValue, mtu >= 23
            else { return }  // BlueZ before 5.62 has no MTU property: the default stays
            self.connections[peripheral]?.mtu = Int(mtu)
        }
    }

    private func linkLost(_ peripheral: UUID, path: String) {
        guard let connection = connections.removeValue(forKey: peripheral) else { return }
        let cause = disconnectReasons.removeValue(forKey: path)
        dropSubscriptions(of: peripheral)
        let error = BlueZ.linkLoss(reason: cause?.reason, message: cause?.message)
        emit(
            connection.reported
                ? .disconnected(peripheral: peripheral, error: error)
                : .failedToConnect(peripheral: peripheral, error: error))
    }

    /// A characteristic the connection uses went while the link is up:
    /// bluetoothd handled a Service Changed indication (the device's GATT
    /// database changed; subscriptions on it are gone), or, without its GATT
    /// cache, it clears the objects as the link ends, maybe just before it
    /// reports Connected=false. Unless the link ends within
    /// `serviceChangeGrace`, it is ended for good, as on the other backends:
    /// never a link left up whose notifications silently stopped.
    private func servicesChanged(_ peripheral: UUID, generation: UInt64) {
        guard connections[peripheral]?.servicesChanged == false else { return }
        connections[peripheral]?.servicesChanged = true
        _ = scheduler.schedule(after: Self.serviceChangeGrace) { [weak self] in
            guard let self, self.connections[peripheral]?.generation == generation else { return }
            self.cancelPeripheralConnection(peripheral)
            self.emit(
                .disconnected(
                    peripheral: peripheral,
                    error: BleBackendError(.connectionFailed, "the device changed its services")))
        }
    }

    private func dropSubscriptions(of peripheral: UUID) {
        subscriptions = subscriptions.filter { $0.value.peripheral != peripheral }
    }

    package func cancelPeripheralConnection(_ peripheral: UUID) {
        if deferredConnects.remove(peripheral) != nil {
            connections[peripheral] = nil
            return  // the connect never reached BlueZ
        }
        guard let connection = connections.removeValue(forKey: peripheral) else { return }
        dropSubscriptions(of: peripheral)
        guard !connection.path.isEmpty, let bus else { return }
        let path = connection.path
        disconnecting.insert(path)
        let current = session
        bus.call(destination: "org.bluez", path: path, interface: BlueZInterface.device, member: "Disconnect") {
            [weak self] _ in
            guard let self, self.session == current else { return }
            self.disconnected(path)
        }
    }

    /// The link of a cancelled connection is gone (Connected=false, or its
    /// Disconnect answered, whichever comes first): a connect deferred behind
    /// it goes ahead.
    private func disconnected(_ path: String) {
        guard disconnecting.remove(path) != nil else { return }
        disconnectReasons[path] = nil
        for peripheral in deferredConnects where connections[peripheral]?.path == path {
            deferredConnects.remove(peripheral)
            if let generation = connections[peripheral]?.generation {
                callConnect(peripheral, generation: generation, path: path)
            }
        }
    }

    // MARK: GATT

    /// The live connection's device path, once `.connected` was reported.
    private func connectedPath(_ peripheral: UUID) -> (path: String, generation: UInt64)? {
        guard state == .poweredOn, let connection = connections[peripheral], connection.reported else { return nil }
        return (connection.path, connection.generation)
    }

    /// Runs `event` on the next turn, if the connection is still the same.
    private func later(_ peripheral: UUID, _ generation: UInt64, _ event: @escaping @MainActor () -> BleBackendEvent?) {
        _ = scheduler.schedule(after: .zero) { [weak self] in
            guard let self, self.connections[peripheral]?.generation == generation, let event = event() else { return }
            self.emit(event)
        }
    }

    package func discoverServices(_ services: [BleUUID]?, for peripheral: UUID) {
        guard let (path, generation) = connectedPath(peripheral) else { return }
        var found: [BleUUID] = []
        for service in tree.services(of: path)
        where (services?.contains(service.uuid) ?? true) && !found.contains(service.uuid) {
            found.append(service.uuid)
        }
        later(peripheral, generation) { .servicesDiscovered(peripheral: peripheral, services: found, error: nil) }
    }

    package func discoverCharacteristics(_ characteristics: [BleUUID]?, for service: BleUUID, of peripheral: UUID) {
        guard let (path, generation) = connectedPath(peripheral) else { return }
        connections[peripheral]?.usedServices.insert(service)
        var found: [BleCharacteristicInfo] = []
        if let servicePath = tree.services(of: path).first(where: { $0.uuid == service })?.path {
            for characteristic in tree.characteristics(of: servicePath)
            where (characteristics?.contains(characteristic.info.uuid) ?? true)
                && !found.contains(where: { $0.uuid == characteristic.info.uuid })
            {
                found.append(characteristic.info)
            }
        }
        later(peripheral, generation) {
            .characteristicsDiscovered(peripheral: peripheral, service: service, characteristics: found, error: nil)
        }
    }

    package func setNotifyValue(_ enabled: Bool, for characteristic: BleCharacteristicRef, of peripheral: UUID) {
        guard let (device, generation) = connectedPath(peripheral),
            let path = characteristicPath(characteristic, of: peripheral, device: device)
        else { return }
        if enabled {
            subscriptions[path] = (peripheral, generation, characteristic)
        } else {
            subscriptions[path] = nil
        }
        if enabled, connections[peripheral]?.relink != nil {
            connections[peripheral]?.relink?.subscriptions.append(characteristic)
            return
        }
        callRetrying(
            peripheral, generation, path: path, member: enabled ? "StartNotify" : "StopNotify", body: []
        ) { [weak self] reply in
            guard let self else { return }
            var failure: BleBackendError?
            if case .failure(let error) = reply {
                let refusal = BlueZ.error(error, doing: enabled ? "Subscribing" : "Unsubscribing")
                if enabled, refusal.code == .notConnected, self.mayRelink(peripheral) {
                    // An inherited link that is going (see `Relink`): made again, then this subscription.
                    self.beginRelink(peripheral, subscription: characteristic, failure: refusal)
                    return
                }
                if enabled, self.connections[peripheral]?.relink != nil {
                    self.connections[peripheral]?.relink?.subscriptions.append(characteristic)
                    return
                }
                failure = refusal
                if enabled { self.subscriptions[path] = nil }
            } else if enabled {
                self.connections[peripheral]?.subscribed = true
            }
            self.emit(
                .notificationStateUpdated(
                    peripheral: peripheral, characteristic: characteristic,
                    isNotifying: failure == nil ? enabled : !enabled, error: failure))
        }
    }

    package func readValue(for characteristic: BleCharacteristicRef, of peripheral: UUID) {
        guard let (device, generation) = connectedPath(peripheral),
            let path = characteristicPath(characteristic, of: peripheral, device: device)
        else { return }
        callRetrying(
            peripheral, generation, path: path, member: "ReadValue", body: [.propertyMap([:])]
        ) { [weak self] reply in
            switch reply {
            case .success(let message):
                self?.emit(
                    .valueUpdated(
                        peripheral: peripheral, characteristic: characteristic,
                        value: message.body.first?.bytesValue ?? Data(), error: nil))
            case .failure(let error):
                self?.emit(
                    .valueUpdated(
                        peripheral: peripheral, characteristic: characteristic, value: nil,
                        error: BlueZ.error(error, doing: "Reading")))
            }
        }
    }

    package func writeValue(
        _ data: Data, for characteristic: BleCharacteristicRef, of peripheral: UUID, type: BleWriteType
    ) {
        guard let (device, generation) = connectedPath(peripheral),
            let path = characteristicPath(characteristic, of: peripheral, device: device)
        else { return }
        switch type {
        case .withResponse:
            var released = false
            if case .acquired? = connections[peripheral]?.writeSockets[path] {
                connections[peripheral]?.writeSockets[path] = .released  // closes it: BlueZ unlocks WriteValue
            }
            if case .released? = connections[peripheral]?.writeSockets[path] { released = true }
            callRetrying(
                peripheral, generation, path: path, member: "WriteValue",
                body: [.bytes(data), .propertyMap(["type": .string("request")])],
                alsoRetrying: released ? "org.bluez.Error.NotPermitted" : nil
            ) { [weak self] reply in
                var failure: BleBackendError?
                if case .failure(let error) = reply { failure = BlueZ.error(error, doing: "Writing") }
                self?.emit(.writeCompleted(peripheral: peripheral, characteristic: characteristic, error: failure))
            }
        case .withoutResponse:
            connections[peripheral]?.commands.append((data, path))
            sendNextCommand(peripheral, generation)
        }
    }

    /// Sends the queued writes without response: through AcquireWrite's
    /// socket while it takes them, else by WriteValue one at a time.
    private func sendNextCommand(_ peripheral: UUID, _ generation: UInt64) {
        while let connection = connections[peripheral], connection.generation == generation,
            !connection.commandInFlight, let next = connection.commands.first
        {
            switch connection.writeSockets[next.path] {
            case .acquired(let socket)?:
                switch socket.send(next.data) {
                case .sent:
                    connections[peripheral]?.commands.removeFirst()
                    continue
                case .full:
                    socket.waitForRoom()
                    return
                case .hungUp:
                    // The packet is still first in line: it goes by WriteValue.
                    connections[peripheral]?.writeSockets[next.path] = .released
                    continue
                }
            case .acquiring?:
                return
            case nil where offersWriteSocket(next.path):
                acquireWriteSocket(peripheral, generation, path: next.path)
                return
            case nil, .unavailable?, .released?:
                writeCommand(peripheral, generation, next)
                return
            }
        }
        guard connections[peripheral]?.generation == generation, connections[peripheral]?.commands.isEmpty == true,
            connections[peripheral]?.commandInFlight == false, connections[peripheral]?.owesReady == true
        else { return }
        connections[peripheral]?.owesReady = false
        later(peripheral, generation) { .readyToSendWriteWithoutResponse(peripheral: peripheral) }
    }

    /// BlueZ offers AcquireWrite where the WriteAcquired property exists (write-without-response characteristics).
    private func offersWriteSocket(_ path: String) -> Bool {
        bus?.passesFileDescriptors == true
            && tree.properties(path, BlueZInterface.characteristic)?["WriteAcquired"] != nil
    }

    private func acquireWriteSocket(_ peripheral: UUID, _ generation: UInt64, path: String) {
        connections[peripheral]?.writeSockets[path] = .acquiring
        connections[peripheral]?.commandInFlight = true
        callRetrying(peripheral, generation, path: path, member: "AcquireWrite", body: [.propertyMap([:])]) {
            [weak self] reply in
            guard let self else { return }
            var state = WriteSocketState.unavailable
            if case .success(let message) = reply, case .unixFD(let index)? = message.body.first,
                Int(index) < message.fileDescriptors.count
            {
                // AcquireWrite answers with the link's MTU too.
                if message.body.count > 1, let mtu = message.body[1].integerValue, mtu >= 23 {
                    self.connections[peripheral]?.mtu = Int(mtu)
                }
                state = .acquired(
                    BlueZWriteSocket(
                        descriptor: message.fileDescriptors[Int(index)],
                        onRoom: { [weak self] in self?.sendNextCommand(peripheral, generation) },
                        onHangUp: { [weak self] in self?.writeSocketHungUp(peripheral, generation, path: path) }))
            }
            self.connections[peripheral]?.writeSockets[path] = state
            self.connections[peripheral]?.commandInFlight = false
            self.sendNextCommand(peripheral, generation)
        }
    }

    /// BlueZ closed the socket while the link stays: closed here too, and
    /// writes go by WriteValue for the rest of the connection.
    private func writeSocketHungUp(_ peripheral: UUID, _ generation: UInt64, path: String) {
        guard connections[peripheral]?.generation == generation,
            case .acquired? = connections[peripheral]?.writeSockets[path]
        else { return }
        connections[peripheral]?.writeSockets[path] = .unavailable
        sendNextCommand(peripheral, generation)
    }

    /// One write without response by WriteValue; the next follows its reply.
    private func writeCommand(_ peripheral: UUID, _ generation: UInt64, _ next: (data: Data, path: String)) {
        connections[peripheral]?.commandInFlight = true
        var released = false
        if case .released? = connections[peripheral]?.writeSockets[next.path] { released = true }
        callRetrying(
            peripheral, generation, path: next.path, member: "WriteValue",
            body: [.bytes(next.data), .propertyMap(["type": .string("command")])],
            alsoRetrying: released ? "org.bluez.Error.NotPermitted" : nil
        ) { [weak self] _ in
            // A failed write without response is not reported (as on every
            // platform): the link is going down, and its end is reported.
            guard let self, self.connections[peripheral]?.generation == generation else { return }
            self.connections[peripheral]?.commands.removeFirst()
            self.connections[peripheral]?.commandInFlight = false
            self.sendNextCommand(peripheral, generation)
        }
    }

    package func canSendWriteWithoutResponse(_ peripheral: UUID) -> Bool {
        guard connectedPath(peripheral) != nil, let connection = connections[peripheral] else { return false }
        if connection.commandInFlight || !connection.commands.isEmpty {
            connections[peripheral]?.owesReady = true
            return false
        }
        return true
    }

    package func maximumWriteValueLength(for type: BleWriteType, of peripheral: UUID) -> Int {
        guard connectedPath(peripheral) != nil, let connection = connections[peripheral] else { return 0 }
        if type == .withResponse { return BleAttribute.maximumValueLength }  // a long write
        return BleAttribute.packetPayload(mtu: connection.mtu)
    }

    /// A characteristic's object path on a connected device (cached at connection).
    private func characteristicPath(_ reference: BleCharacteristicRef, of peripheral: UUID, device: String) -> String? {
        connections[peripheral]?.paths[reference] ?? tree.characteristicPath(reference, of: device)
    }

    /// Calls a GattCharacteristic1 method for a connection, retrying
    /// `InProgress`; `completion` runs only while the connection is current.
    private func callRetrying(
        _ peripheral: UUID, _ generation: UInt64, path: String, member: String, body: [DBusValue],
        alsoRetrying transient: String? = nil, attempt: Int = 0,
        completion: @escaping @MainActor (Result<DBusMessage, DBusError>) -> Void
    ) {
        bus?.call(
            destination: "org.bluez", path: path, interface: BlueZInterface.characteristic, member: member, body: body
        ) { [weak self] reply in
            guard let self, self.connections[peripheral]?.generation == generation else { return }
            if case .failure(let error) = reply, error.name == "org.bluez.Error.InProgress" || error.name == transient,
                attempt < Self.maximumRetries
            {
                _ = self.scheduler.schedule(after: Self.retryDelay) { [weak self] in
                    self?.callRetrying(
                        peripheral, generation, path: path, member: member, body: body, alsoRetrying: transient,
                        attempt: attempt + 1, completion: completion)
                }
                return
            }
            completion(reply)
        }
    }

    private func emit(_ event: BleBackendEvent) {
        eventHandler?(event)
    }
}
