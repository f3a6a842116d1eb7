import Foundation

/// The scan/connect/discover/subscribe lifecycle of PROTOCOL.md sections 1–2
/// and the readiness table of *iOS BLE Connection SDK*, as a value-type state machine.
///
/// User intents and backend events go in; backend commands, timers and the
/// opening/closing of the passthrough come out. It owns the published
/// lifecycle state (connection state, scan results, the connected device,
/// `atReady`, `deviceControlReady`), which the client copies to its
/// observable properties in one place after each step.
struct ConnectionStateMachine {
    /// A command for the backend.
    enum Command: Equatable {
        case scan(services: [BleUUID])
        case stopScan
        case connect(UUID)
        case cancelConnection(UUID)
        case discoverServices(UUID, [BleUUID])
        case discoverCharacteristics(UUID, service: BleUUID, characteristics: [BleUUID])
        /// Enable notifications of the passthrough's notifying characteristic.
        case subscribe(UUID, BleCharacteristicRef)
    }

    enum Action: Equatable {
        case backend(Command)
        case startTimer(ChannelTimerID, Duration)
        case cancelTimer(ChannelTimerID)
        /// The passthrough is ready: open the AT channel on `peripheral`.
        case openPassthrough(peripheral: UUID, writeType: BleWriteType)
        /// The connection ended: fail the AT channel's and the device
        /// queries' pending work with `error` and drop everything buffered.
        case closePassthrough(error: XTalkBleError)
    }

    /// What the client publishes.
    struct Published: Equatable {
        var connectionState: XTalkConnectionState = .idle
        var scanResults: [XTalkScanResult] = []
        var connectedName: String?
        var connectedAddress: String?
        var connectedPeripheralId: UUID?
        var atReady = false
        var deviceControlReady = false
    }

    /// A connection between `connect` and the end of the link.
    private struct Link {
        /// Where the link is; each phase holds what it knows.
        enum Phase: Equatable {
            /// `connect` was issued; the link is not up yet.
            case connecting
            /// Up; the passthrough's services and characteristics are being discovered.
            case discovering
            /// The passthrough's characteristics were found (TX's properties
            /// pick the write type); RX notifications are being enabled.
            case subscribing(tx: BleCharacteristicProperties)
            /// Notifications are on: `atReady`.
            case ready
        }
        let peripheral: UUID
        /// Until `atReady`: the connect timeout.
        var timer: ChannelTimerID?
        var phase = Phase.connecting
        /// Handed back by state restoration already connected: set up once the radio is on.
        var restored = false
        /// The readable characteristics of the optional services found (xTalk:
        /// battery level, firmware and hardware revision).
        var deviceControl: Set<BleUUID> = []

        var isUp: Bool { phase != .connecting }
    }

    private enum State {
        /// No scan, no link. → `.scanning`, `.link`, `.failed`, `.tornDown`.
        case idle
        /// A scan is requested; it runs once the radio is powered on.
        /// → `.idle` (stopped), `.link` (connect), `.failed`, `.tornDown`.
        case scanning(started: Bool)
        /// Connecting, discovering, subscribing or ready.
        /// → `.idle`/`.disconnected` (ended), `.failed`, `.tornDown`.
        case link(Link)
        /// Terminal: `teardown()`.
        case tornDown
    }

    private var state: State = .idle
    private(set) var published = Published() {
        didSet { publishedVersion &+= 1 }
    }
    /// Changes whenever `published` does: a driver that remembers it copies
    /// `published` only after a change (the receive path commits after every
    /// notification, and the lifecycle rarely changes then).
    private(set) var publishedVersion: UInt64 = 0
    /// Every connection state the lifecycle passed through since the driver
    /// last took them, in order (see `takeStateChanges()`).
    private var stateChanges: [XTalkConnectionState] = []
    private(set) var radio: BleManagerState = .unknown
    /// Connections to cancel once the radio is on: asked for while its state
    /// was still unknown (state restoration hands connections back before
    /// the first state), when a backend ignores every command.
    private var cancelsOwed: [UUID] = []
    private let connectTimeout: Duration
    /// The device's GATT layout: everything the machine asks of the stack comes from it.
    let profile: GattProfile
    /// What `deviceControlReady` needs: every optional characteristic, readable.
    private let deviceControlCharacteristics: Set<BleUUID>
    private var nextTimer: UInt64 = 0

    /// `radio` is the backend's state when the client is created (CoreBluetooth
    /// starts `.unknown` and reports the real state shortly after).
    init(connectTimeout: Duration, radio: BleManagerState = .unknown, profile: GattProfile = .xTalk) {
        self.connectTimeout = connectTimeout
        self.radio = radio
        self.profile = profile
        deviceControlCharacteristics = profile.optionalCharacteristics
    }

    var isTornDown: Bool {
        if case .tornDown = state { return true }
        return false
    }

    /// The peripheral of the current link (connecting or connected).
    var linkPeripheral: UUID? {
        if case .link(let link) = state { return link.peripheral }
        return nil
    }

    /// True once the link is up (didConnect), before or after `atReady`.
    var isLinkUp: Bool {
        if case .link(let link) = state { return link.isUp }
        return false
    }

    /// The connection states to publish since the last call, in order: every
    /// change, and every failure even when it repeats the current state (a
    /// retried scan that fails again is published again).
    mutating func takeStateChanges() -> [XTalkConnectionState] {
        if stateChanges.isEmpty { return [] }
        defer { stateChanges.removeAll(keepingCapacity: true) }
        return stateChanges
    }

    private mutating func publish(_ newState: XTalkConnectionState) {
        let isFailure = if case .failed = newState { true } else { false }
        guard isFailure || newState != published.connectionState else { return }
        published.connectionState = newState
        stateChanges.append(newState)
    }

    // MARK: User intents

    mutating func startScan() -> [Action] {
        var actions: [Action] = []
        switch state {
        case .tornDown: return []
        case .link:
            // Ending a link always says so, before the next state.
            endLink(error: .cancelled, into: &actions)
            publish(.disconnected)
        case .scanning(started: true): actions.append(.backend(.stopScan))
        case .idle, .scanning(started: false): break
        }
        published.scanResults = []
        if let error = Self.unavailability(radio) {
            state = .idle
            publish(.failed(error))
            return actions
        }
        let start = radio == .poweredOn
        if start { actions.append(.backend(.scan(services: profile.scanServices))) }
        state = .scanning(started: start)
        publish(.scanning)
        return actions
    }

    mutating func stopScan() -> [Action] {
        guard case .scanning(let started) = state else { return [] }
        state = .idle
        publish(.idle)
        return started ? [.backend(.stopScan)] : []
    }

    /// Connects to a device of the current scan results. The id is checked
    /// before anything else: the device already connecting or connected makes
    /// it a no-op (a double tap keeps the link), and an unknown id publishes
    /// `.failed(.deviceNotFound(id))` and leaves a current link as it was (the
    /// state returns to the link's own at once). Otherwise a scan stops, a
    /// current link ends (`.disconnected` first) and the new attempt starts.
    mutating func connect(_ id: UUID) -> [Action] {
        var actions: [Action] = []
        switch state {
        case .tornDown:
            return []
        case .link(let link) where link.peripheral == id:
            return []
        case .link(let link) where !published.scanResults.contains(where: { $0.id == id }):
            publish(.failed(.deviceNotFound(id)))
            publish(link.phase == .connecting ? .connecting : .connected)
            return []
        case .scanning(started: true):
            actions.append(.backend(.stopScan))
        case .link:
            endLink(error: .cancelled, into: &actions)
            publish(.disconnected)
        case .idle, .scanning(started: false):
            break
        }
        state = .idle
        guard connectTimeout > .zero else {
            publish(
                .failed(
                    .connectionFailed(
                        "invalid configuration: connectTimeout is \(connectTimeout) (it must be greater than zero)")))
            return actions
        }
        guard let result = published.scanResults.first(where: { $0.id == id }) else {
            publish(.failed(.deviceNotFound(id)))
            return actions
        }
        if let error = Self.unavailability(radio) ?? (radio == .poweredOn ? nil : .bluetoothUnavailable) {
            publish(.failed(error))
            return actions
        }
        let timer = makeTimer()
        state = .link(Link(peripheral: id, timer: timer))
        publish(.connecting)
        published.connectedName = result.name
        published.connectedAddress = result.address
        published.connectedPeripheralId = id
        actions.append(.startTimer(timer, connectTimeout))
        actions.append(.backend(.connect(id)))
        return actions
    }

    /// State restoration handed back the app's peripherals. A fresh client
    /// adopts the first that is still connected: `.connecting`, then (with
    /// the radio on) `.connected`, rediscovery and subscription to `atReady`,
    /// within the connect timeout, as a connection does. Every other one is
    /// let go. Nothing is left half-open.
    mutating func restored(_ peripherals: [BleRestoredPeripheral]) -> [Action] {
        var actions: [Action] = []
        var adopted: UUID?
        if case .idle = state, connectTimeout > .zero, Self.unavailability(radio) == nil,
            let first = peripherals.first(where: \.isConnected)
        {
            adopted = first.id
            let timer = makeTimer()
            var link = Link(peripheral: first.id, timer: timer)
            link.restored = true
            state = .link(link)
            publish(.connecting)
            published.connectedName = first.name
            published.connectedAddress = nil
            published.connectedPeripheralId = first.id
            actions.append(.startTimer(timer, connectTimeout))
            if radio == .poweredOn { actions += connected(first.id) }
        }
        for peripheral in peripherals where peripheral.id != adopted {
            cancelConnection(peripheral.id, into: &actions)
        }
        return actions
    }

    /// Cancels a connection now, or once the radio is on when its state is
    /// still unknown (a backend ignores commands until then).
    private mutating func cancelConnection(_ id: UUID, into actions: inout [Action]) {
        if radio == .unknown {
            if !cancelsOwed.contains(id) { cancelsOwed.append(id) }
        } else {
            actions.append(.backend(.cancelConnection(id)))
        }
    }

    /// Ends the link or the attempt; pending work fails with `.cancelled`.
    mutating func disconnect() -> [Action] {
        var actions: [Action] = []
        switch state {
        case .link:
            endLink(error: .cancelled, into: &actions)
            publish(.disconnected)
        case .scanning(started: true):
            actions.append(.backend(.stopScan))
            state = .idle
            publish(.idle)
        case .scanning(started: false):
            state = .idle
            publish(.idle)
        case .idle, .tornDown:
            break
        }
        return actions
    }

    /// Terminal: ends the scan and the link; pending work fails with `.cancelled`.
    mutating func teardown() -> [Action] {
        var actions: [Action] = []
        switch state {
        case .link: endLink(error: .cancelled, into: &actions)
        case .scanning(started: true): actions.append(.backend(.stopScan))
        case .idle, .scanning(started: false), .tornDown: break
        }
        if case .tornDown = state { return actions }
        state = .tornDown
        published.scanResults = []
        publish(.idle)
        return actions
    }

    mutating func timerFired(_ id: ChannelTimerID) -> [Action] {
        // (Not the link's timer: one that fired as it was cancelled.)
        guard case .link(let link) = state, link.timer == id else { return [] }
        var actions: [Action] = []
        endLink(error: .timeout, into: &actions, timerFired: true)
        publish(.failed(.timeout))
        return actions
    }

    // MARK: Inputs from the Bluetooth stack (one method per input)
    //
    // The guards below drop inputs for another peripheral, for a phase the
    // link has left, or after it ended: the stack reports them late or twice
    // (and the driver forwards what it reports), so they are no contract
    // violation and assert nothing.

    /// The central's radio state changed.
    mutating func radioStateChanged(_ newState: BleManagerState) -> [Action] {
        radioChanged(newState)
    }

    /// A scan reported a peripheral.
    mutating func peripheralDiscovered(_ id: UUID, _ advertisement: BleAdvertisement, rssi: Int) -> [Action] {
        discovered(id, advertisement, rssi)
        return []
    }

    /// The platform could not start or continue the scan.
    mutating func scanFailed(_ reason: String) -> [Action] {
        guard case .scanning = state else { return [] }
        state = .idle
        publish(.failed(.scanFailed(reason)))
        return []
    }

    mutating func connected(_ id: UUID) -> [Action] {
        guard var link = currentLink(id), link.phase == .connecting else { return [] }
        link.phase = .discovering
        state = .link(link)
        publish(.connected)
        return [.backend(.discoverServices(id, profile.services))]
    }

    mutating func failedToConnect(_ id: UUID, error: StackError?) -> [Action] {
        guard let link = currentLink(id), link.phase == .connecting else { return [] }
        var actions: [Action] = []
        let failure =
            error.flatMap(Self.pairingFailure)
            ?? XTalkBleError.connectionFailed(error?.message ?? "the connection attempt failed")
        endLink(error: .notConnected, into: &actions, linkGone: true)
        publish(.failed(failure))
        return actions
    }

    mutating func disconnected(_ id: UUID, error: StackError? = nil) -> [Action] {
        guard let link = currentLink(id) else { return [] }
        var actions: [Action] = []
        endLink(error: .notConnected, into: &actions, linkGone: true)
        publish(Self.lost(link, error: error))
        return actions
    }

    /// Pairing failures, each with its own documented reason prefix:
    /// `pairing failed: ` (the device requires an encrypted link and pairing
    /// did not complete: the user cancelled or ignored the dialog, or the
    /// phone has no bond), `pairing removed by the device: ` (the device lost
    /// its bond with this phone; the user must forget the device in Settings
    /// and pair again). Nil for any other error.
    static func pairingFailure(_ error: StackError) -> XTalkBleError? {
        switch error.kind {
        case .pairingRequired:
            .connectionFailed("pairing failed: the device requires pairing and it did not complete (\(error.message))")
        case .pairingRemoved:
            .connectionFailed(
                "pairing removed by the device: forget the device in Settings > Bluetooth and pair again "
                    + "(\(error.message))")
        case .other:
            nil
        }
    }

    /// What the Bluetooth stack reported, as far as the lifecycle tells errors apart.
    struct StackError: Equatable {
        enum Kind: Equatable {
            /// The device requires an encrypted link and the phone has no bond (pairing did not complete).
            case pairingRequired
            /// The device forgot its bond with this phone.
            case pairingRemoved
            case other
        }
        let kind: Kind
        /// The stack's own words.
        let message: String
    }

    /// Service discovery finished; `failure` is the stack's reason when it failed.
    mutating func servicesDiscovered(_ id: UUID, _ services: [BleUUID], failure: String?) -> [Action] {
        guard let link = currentLink(id), link.phase == .discovering else { return [] }
        if let failure { return fail(.connectionFailed("service discovery failed: \(failure)")) }
        let passthrough = profile.passthrough
        guard services.contains(passthrough.service) else { return fail(.serviceMissing) }
        var actions: [Action] = [
            .backend(
                .discoverCharacteristics(
                    id, service: passthrough.service, characteristics: [passthrough.write, passthrough.notify]))
        ]
        for optional in profile.optionalServices where services.contains(optional.service) {
            actions.append(
                .backend(
                    .discoverCharacteristics(
                        id, service: optional.service, characteristics: optional.characteristics)))
        }
        return actions
    }

    /// Characteristic discovery of one service finished.
    mutating func characteristicsDiscovered(
        _ id: UUID, service: BleUUID, _ characteristics: [BleCharacteristicInfo],
        failure: String?
    ) -> [Action] {
        guard var link = currentLink(id), link.isUp else { return [] }
        if service == profile.passthrough.service {
            guard link.phase == .discovering else { return [] }
            if let failure { return fail(.connectionFailed("characteristic discovery failed: \(failure)")) }
            let tx = characteristics.first { $0.uuid == profile.passthrough.write }
            let rx = characteristics.first { $0.uuid == profile.passthrough.notify }
            guard let tx, let rx, !tx.properties.isDisjoint(with: [.write, .writeWithoutResponse]) else {
                return fail(.characteristicMissing)
            }
            guard !rx.properties.isDisjoint(with: [.notify, .indicate]) else {
                return fail(.connectionFailed("the passthrough RX characteristic does not notify"))
            }
            link.phase = .subscribing(tx: tx.properties)
            state = .link(link)
            return [.backend(.subscribe(id, profile.passthrough.notifyRef))]
        }
        guard let optional = profile.optionalService(service) else { return [] }
        // Device control is optional: its absence never blocks `atReady`.
        guard failure == nil else { return [] }
        let found = characteristics.filter { $0.properties.contains(.read) }.map(\.uuid)
        link.deviceControl.formUnion(Set(found).intersection(optional.characteristics))
        state = .link(link)
        published.deviceControlReady =
            !deviceControlCharacteristics.isEmpty
            && link.deviceControl == deviceControlCharacteristics
        return []
    }

    /// The subscription to a characteristic's notifications changed (or was refused).
    mutating func notificationStateUpdated(
        _ id: UUID, _ characteristic: BleCharacteristicRef, isNotifying: Bool,
        error: StackError?
    ) -> [Action] {
        guard var link = currentLink(id), characteristic == profile.passthrough.notifyRef,
            case .subscribing(let txProperties) = link.phase
        else { return [] }
        if let error {
            return fail(
                Self.pairingFailure(error)
                    ?? .connectionFailed("the notification subscription was refused: \(error.message)"))
        }
        guard isNotifying else { return fail(.connectionFailed("the device did not enable notifications")) }
        var actions: [Action] = []
        link.phase = .ready
        if let timer = link.timer { actions.append(.cancelTimer(timer)) }
        link.timer = nil
        state = .link(link)
        published.atReady = true
        let writeType: BleWriteType = txProperties.contains(.writeWithoutResponse) ? .withoutResponse : .withResponse
        actions.append(.openPassthrough(peripheral: id, writeType: writeType))
        return actions
    }

    // MARK: Internals

    /// The state after `link` was lost: a link lost before it was ready is a
    /// failed connection (a pairing failure says so); a ready one simply ended.
    private static func lost(_ link: Link, error: StackError?) -> XTalkConnectionState {
        link.phase == .ready
            ? .disconnected
            : .failed(error.flatMap(pairingFailure) ?? .connectionFailed("the link was lost while connecting"))
    }

    /// What an unusable radio state means for the app, or nil.
    static func unavailability(_ state: BleManagerState) -> XTalkBleError? {
        switch state {
        case .unauthorized: .permissionDenied
        case .unsupported, .poweredOff, .resetting: .bluetoothUnavailable
        case .unknown, .poweredOn: nil
        }
    }

    private mutating func radioChanged(_ newState: BleManagerState) -> [Action] {
        let previous = radio
        radio = newState
        // Backends end every connection and scan when the radio leaves
        // `.poweredOn`, for `.unknown` too (the seam's rule): the machine must
        // not keep a link, or a started scan, that the platform dropped.
        let droppedWithoutError = newState == .unknown && previous == .poweredOn
        var actions: [Action] = []
        if newState == .poweredOn {
            actions += cancelsOwed.map { .backend(.cancelConnection($0)) }
            cancelsOwed = []
        } else if newState != .unknown {
            cancelsOwed = []  // the platform dropped every connection with the radio
        }
        switch state {
        case .scanning(started: false):
            if newState == .poweredOn {
                actions.append(.backend(.scan(services: profile.scanServices)))
                state = .scanning(started: true)
            } else if let error = Self.unavailability(newState) {
                state = .idle
                publish(.failed(error))
            }
        case .scanning(started: true):
            if let error = Self.unavailability(newState) {
                // The platform stopped the scan itself.
                state = .idle
                publish(.failed(error))
            } else if droppedWithoutError {
                // The platform stopped the scan; it starts again once the radio is back on.
                state = .scanning(started: false)
            }
        case .link(let link):
            if let error = Self.unavailability(newState) {
                // Every connection is gone with the radio, without a disconnect callback.
                endLink(error: .notConnected, into: &actions, linkGone: true)
                publish(.failed(error))
            } else if droppedWithoutError {
                // Gone with the radio too, without a disconnect callback: as a
                // lost link (no unavailability for the app to act on).
                endLink(error: .notConnected, into: &actions, linkGone: true)
                publish(Self.lost(link, error: nil))
            } else if newState == .poweredOn, link.restored, link.phase == .connecting {
                actions += connected(link.peripheral)  // a restored connection: set it up now
            }
        case .idle, .tornDown:
            break
        }
        return actions
    }

    private mutating func discovered(_ id: UUID, _ advertisement: BleAdvertisement, _ rssi: Int) {
        guard case .scanning(started: true) = state else { return }
        let address = profile.address(from: advertisement)
        if let index = published.scanResults.firstIndex(where: { $0.id == id }) {
            // Keep first-seen order; update in place. 127 means "RSSI not available".
            if rssi != 127 { published.scanResults[index].rssi = rssi }
            if let name = advertisement.localName { published.scanResults[index].name = name }
            if let address { published.scanResults[index].address = address }
        } else {
            published.scanResults.append(
                XTalkScanResult(id: id, name: advertisement.localName ?? "", address: address, rssi: rssi))
        }
    }

    /// The current link if `id` is its peripheral.
    private func currentLink(_ id: UUID) -> Link? {
        if case .link(let link) = state, link.peripheral == id { return link }
        return nil
    }

    /// A connection step failed: end the attempt and publish the error.
    private mutating func fail(_ error: XTalkBleError) -> [Action] {
        var actions: [Action] = []
        endLink(error: .notConnected, into: &actions)
        publish(.failed(error))
        return actions
    }

    /// Ends the current link: cancels the platform connection unless it is
    /// already gone, stops the connect timer, and closes the passthrough.
    private mutating func endLink(
        error: XTalkBleError, into actions: inout [Action], linkGone: Bool = false,
        timerFired: Bool = false
    ) {
        guard case .link(let link) = state else { return }
        if let timer = link.timer, !timerFired { actions.append(.cancelTimer(timer)) }
        if !linkGone { cancelConnection(link.peripheral, into: &actions) }
        actions.append(.closePassthrough(error: error))
        state = .idle
        published.connectedName = nil
        published.connectedAddress = nil
        published.connectedPeripheralId = nil
        published.atReady = false
        published.deviceControlReady = false
    }

    private mutating func makeTimer() -> ChannelTimerID {
        nextTimer += 1
        return ChannelTimerID(raw: nextTimer)
    }
}
