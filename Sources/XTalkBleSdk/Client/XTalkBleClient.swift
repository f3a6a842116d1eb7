import Foundation

#if !canImport(Combine)
    import Observation
#endif

/// The xTalk BLE client: one BLE lifecycle and one serialized AT/RF channel.
///
/// Create it, keep it strongly owned (a page model or a session), and use it
/// on the main actor. Scan with `startScan()`, pick a result, `connect(id:)`,
/// wait for `atReady`, then run AT commands and radio payloads. Everything the
/// device says arrives, in order, through `events`, `onEvent` and the
/// fine-grained observers. `disconnect()` ends a connection (the client can
/// scan again); `teardown()` ends the client for good.
///
/// Guarantees: every AT command, RF send and exclusive session waits its turn
/// in one FIFO and is never interleaved; every awaiting call resumes exactly
/// once (result, typed error, `.timeout` or `.cancelled`); nothing of an old
/// connection (byte, line or event) is delivered after it ended; callbacks are
/// never invoked while the client is mid-change, so they may call back into it.
@MainActor
public final class XTalkBleClient: NSObject {
    // MARK: Published state (one declaration for every platform)

    /// The scan/connection state.
    @XTalkPublished public private(set) var connectionState: XTalkConnectionState = .idle
    /// Devices of the current scan session, in first-seen order.
    @XTalkPublished public private(set) var scanResults: [XTalkScanResult] = []
    /// The selected/connected device's name.
    @XTalkPublished public private(set) var connectedName: String?
    /// The connected device's address, when the platform or the advertisement supplies it.
    @XTalkPublished public private(set) var connectedAddress: String?
    /// The connected peripheral's identifier.
    @XTalkPublished public private(set) var connectedPeripheralId: UUID?
    /// The passthrough is discovered and its notifications are confirmed: AT and RF may run.
    @XTalkPublished public private(set) var atReady = false
    /// Battery Level and both revision strings are discovered and readable.
    @XTalkPublished public private(set) var deviceControlReady = false
    /// The active AT encoding (default `.xor`).
    @XTalkPublished public private(set) var atEncoding: XTalkAtEncoding = .xor

    #if !canImport(Combine)
        /// Reports the published properties to the Observation framework.
        public let observationRegistrar = ObservationRegistrar()
    #endif

    /// Why Bluetooth is unavailable, in words, when the platform says: on
    /// Linux, whether the D-Bus system bus is missing, bluetoothd is not
    /// running, there is no adapter, or the adapter is powered off (and how
    /// to fix it). Read it when `connectionState` is
    /// `.failed(.bluetoothUnavailable)` or `.failed(.permissionDenied)`; nil
    /// while Bluetooth is usable, and always nil on Apple platforms (iOS's
    /// own alert tells the user).
    public var bluetoothUnavailableReason: String? { backend.unavailableReason }

    // MARK: Events

    /// A new stream of every event from this moment on, in order. Every read
    /// of `events` returns its own stream: any number may be live at once
    /// (each gets every event), and cancelling the task that iterates one
    /// (e.g. SwiftUI's `.task` when a view disappears) ends that stream only;
    /// read `events` again to start a new one. Each stream keeps at most
    /// `eventBufferLimit` events its reader has not taken yet: when it is full,
    /// the oldest radio frames and lines go first, and `.connectionStateChanged`
    /// is never dropped. `teardown()` finishes every stream (buffered events are
    /// still delivered); read after `teardown()`, the stream is already finished.
    /// A client released without `teardown()` finishes its streams too.
    public var events: AsyncStream<XTalkBleEvent> {
        makeEventStream { subscribers.append(WeakSubscriber(value: $0)) }
    }
    /// Called with every event, in order, on the main actor.
    public var onEvent: (@MainActor (XTalkBleEvent) -> Void)?
    /// Events dropped by `events` streams whose readers fell behind, summed
    /// over every stream for the client's life (a warning is logged at each
    /// stream's first drop). `onEvent` and the observers never drop.
    public private(set) var droppedEventCount = 0

    // MARK: Internals

    let backend: any BleBackend
    /// What the backend needs alive (the simulated environment behind a simulated central).
    private let keptAlive: AnyObject?
    let options: XTalkBleClientOptions
    private(set) var machine: ConnectionStateMachine
    /// The AT channel of the current connection, once `atReady`.
    private(set) var passthrough: PassthroughDriver?
    /// Counts connections, so that work of an older one is recognised.
    private var passthroughGeneration: UInt64 = 0
    /// The lifecycle's `publishedVersion` that `commit()` last copied (nil: copy at the next one).
    private var committedVersion: UInt64?
    private var connectionTimers: [ChannelTimerID: TimerToken] = [:]
    /// Bugs switched on for a checker's self-test (package API); none by default.
    package var injectedFaults = XTalkInjectedFaults() {
        didSet {
            passthrough?.setFaults(injectedFaults)
            committedVersion = nil  // `neverReady` may have changed what `atReady` shows
        }
    }
    /// Since when the write pump has held bytes because the platform said
    /// "no room" (a checker's liveness invariant; package API).
    package var writesBlockedSince: Duration? { passthrough?.blockedSince }
    /// Called with the encoding the connection's received bytes are decoded
    /// in, when a connection opens and whenever it changes (a switch asked for
    /// while an operation owned the channel applies when it ends): for the
    /// chaos checker, which judges lines by it.
    package var onDecodingEncoding: (@MainActor (XTalkAtEncoding) -> Void)?
    /// What the injected faults replay (nil without them).
    private var replayedLine: String?
    private var eventAfterDisconnect: XTalkBleEvent?
    /// The readers of `events`, weakly: a stream nobody holds any more is gone.
    /// Main actor only, except `deinit` (nothing else holds the client then),
    /// which must finish them: hence not isolated.
    nonisolated(unsafe) private var subscribers: [WeakSubscriber] = []
    /// Events waiting for delivery, with the connection they belong to (nil: the lifecycle).
    private var pendingDeliveries: [(delivery: Delivery, generation: UInt64?)] = []
    /// Streams whose reader waits and got events in this delivery round.
    private var subscribersToWake: [EventSubscriber] = []
    private var deliveryHead = 0
    private var isDelivering = false
    /// What the last connection left behind for a reconnect to the same
    /// device: until when the device may still answer its commands, and the
    /// encoding of a line of ours the lost link cut (the channel's handover).
    private var leftBehind: (peripheral: UUID, left: PassthroughDriver.LeftBehind)?
    /// Observers in registration order, each kind apart (a token fits only its own kind).
    var atLineObservers = ObserverList<String>()
    var sendFinishObservers = ObserverList<String>()
    var rawObservers = ObserverList<Data>()
    var deviceQueries = DeviceQueries()

    /// A client on the platform's Bluetooth: CoreBluetooth on Apple
    /// platforms, BlueZ over the D-Bus system bus on Linux (the bus named by
    /// `DBUS_SYSTEM_BUS_ADDRESS`, else the standard one). Where Bluetooth
    /// cannot be used, scanning publishes `.failed(.bluetoothUnavailable)`
    /// and `bluetoothUnavailableReason` says why.
    public override convenience init() {
        self.init(options: XTalkBleClientOptions())
    }

    /// A client on the platform's Bluetooth with the given options.
    public convenience init(options: XTalkBleClientOptions) {
        self.init(backend: PlatformBackend.make(), options: options)
    }

    /// A client on any backend (the simulator, CoreBluetooth). `profile` is the
    /// device's GATT layout (xTalk's unless a test says otherwise);
    /// `keepingAlive`, an object the backend needs but does not keep (the
    /// simulated environment behind the CoreBluetooth stand-in, whose radio
    /// holds it unowned).
    package init(
        backend: any BleBackend, options: XTalkBleClientOptions = XTalkBleClientOptions(),
        profile: GattProfile = .xTalk, keepingAlive: AnyObject? = nil
    ) {
        self.backend = backend
        keptAlive = keepingAlive ?? (backend as? any BleBackendKeepingAlive)?.keptAlive
        self.options = options
        machine = ConnectionStateMachine(connectTimeout: options.connectTimeout, radio: backend.state, profile: profile)
        super.init()
        backend.eventHandler = { [weak self] event in self?.handleBackendEvent(event) }
        // State restoration works only for a manager created at launch.
        if options.restoreIdentifier != nil { activateBluetooth() }
    }

    var scheduler: any TimerScheduling { backend.scheduler }
    var isTornDown: Bool { machine.isTornDown }

    // MARK: Lifecycle

    /// Starts a new scan session: clears the results and reports devices that
    /// advertise the xTalk passthrough service. An active connection is ended
    /// first, and says so: `.disconnected` is published before `.scanning`, and
    /// its pending work fails with `.cancelled`. Failures (Bluetooth off,
    /// unauthorized, unsupported) are published as `.failed(error)`, not thrown,
    /// on every call: a retry that fails again publishes `.failed` again (an
    /// event, and a new value for observers of `connectionState`), even though
    /// the state already says so. Does nothing after `teardown()`.
    public func startScan() {
        log(.info, "start scan")
        activateBluetooth()
        apply(machine.startScan())
    }

    /// The app needs Bluetooth now: the platform's manager is created on the
    /// first scan or connect, not in `init`, so that the system's permission
    /// prompt appears when the user acts (Apple's guidance).
    private func activateBluetooth() {
        guard !isTornDown else { return }
        backend.activate(showPowerAlert: options.showsPowerAlert, restoreIdentifier: options.restoreIdentifier)
    }

    /// Stops scanning; the state returns to `.idle`. A connection is unaffected.
    public func stopScan() {
        apply(machine.stopScan())
    }

    /// Stops scanning and connects to a device of the current scan results.
    /// The outcome is published: `.connecting`, `.connected`, then `atReady`;
    /// or `.failed(.deviceNotFound(id))`, `.failed(.timeout)` (no `atReady`
    /// within `connectTimeout`, the link is cancelled), `.failed(.serviceMissing)`,
    /// `.failed(.characteristicMissing)`, `.failed(.connectionFailed(reason))`.
    ///
    /// The id is checked before the current link is touched. The device
    /// already connecting or connected: nothing happens (a double tap keeps
    /// the link). An id not in `scanResults` while a link exists:
    /// `.failed(.deviceNotFound(id))` is published and the state returns at
    /// once to the link's own (`.connecting` or `.connected`); the link and its
    /// work are left as they were. Another device: the current link ends first
    /// (`.disconnected` is published before `.connecting`; its pending work
    /// fails with `.cancelled`).
    public func connect(id: UUID) {
        log(.info, "connect to \(id)")
        activateBluetooth()
        apply(machine.connect(id))
    }

    /// Ends the connection (or the attempt) and its transactions, which fail
    /// with `.cancelled`; the client can scan again.
    public func disconnect() {
        log(.info, "disconnect")
        apply(machine.disconnect())
    }

    /// Ends scanning, the connection, every transaction (`.cancelled`) and the
    /// event stream. Terminal and idempotent: create a new client afterwards.
    /// Later calls do nothing, throw `.notConnected`, or return nil.
    /// The app's process ends without a goodbye (the simulator's
    /// `terminateApp`): everything of this client stops and nothing reaches
    /// the backend; the platform keeps or drops its connections itself.
    package func terminateProcess() {
        isTerminated = true
        teardown()
    }

    /// Set by `terminateProcess()`: backend commands are dropped.
    private var isTerminated = false

    /// Ends the client for good: stops scanning, ends the link, ends every
    /// pending call with `.cancelled`, finishes every `events` stream and
    /// removes the observers and `onEvent`. Idempotent. `connectionState`
    /// becomes `.idle` (no `.disconnected` first), and no event is delivered
    /// from here on, not even that state, and not the events still queued
    /// when it is called from `onEvent` or an observer. Afterwards the
    /// lifecycle methods do nothing and the AT/RF methods throw
    /// `.notConnected`; create a new client to start again.
    public func teardown() {
        guard !isTornDown else { return }
        log(.info, "teardown")
        apply(machine.teardown())
        for token in connectionTimers.values { scheduler.cancel(token) }
        connectionTimers.removeAll()
        // Nothing is delivered after teardown: drop what is still queued.
        pendingDeliveries.removeAll()
        deliveryHead = 0
        atLineObservers.removeAll()
        sendFinishObservers.removeAll()
        rawObservers.removeAll()
        onEvent = nil
        backend.eventHandler = nil
        if !injectedFaults.teardownLeavesStreamsOpen {
            for subscriber in subscribers { subscriber.value?.finish() }
        }
        subscribers.removeAll()
    }

    /// A client released without `teardown()` still ends its `events`
    /// streams: a task reading one would otherwise wait for good.
    deinit {
        for subscriber in subscribers { subscriber.value?.finish() }
    }

    // MARK: Driving the machines

    /// Feeds one backend event to the passthrough, the device queries and the
    /// lifecycle machine, then publishes and delivers.
    private func handleBackendEvent(_ event: BleBackendEvent) {
        guard !isTornDown else { return }
        switch event {
        case .restored(let peripherals):
            log(.info, "state restoration: \(peripherals.count) peripheral(s) kept by the system")
            return apply(machine.restored(peripherals))
        case .valueUpdated(let peripheral, let characteristic, let value, let error):
            if characteristic == machine.profile.passthrough.notifyRef {
                if let link = passthrough, link.peripheral == peripheral, error == nil, let value {
                    link.bytesReceived(value)
                }
            } else if machine.linkPeripheral == peripheral {
                deviceQueries.valueArrived(for: characteristic, value: error == nil ? value : nil, client: self)
            }
        case .writeCompleted(let peripheral, let characteristic, let error):
            if let link = passthrough, link.peripheral == peripheral,
                characteristic == machine.profile.passthrough.writeRef
            {
                link.writeAcknowledged(error: error)
            }
        case .readyToSendWriteWithoutResponse(let peripheral):
            if let link = passthrough, link.peripheral == peripheral { link.pumpWrites() }
        case .stateChanged(let state):
            log(.info, "Bluetooth state: \(state)")
            return apply(machine.radioStateChanged(state))
        case .discovered(let peripheral, let advertisement, let rssi):
            return apply(machine.peripheralDiscovered(peripheral, advertisement, rssi: rssi))
        case .scanFailed(let error):
            return apply(machine.scanFailed(error.message))
        case .connected(let peripheral):
            return apply(machine.connected(peripheral))
        case .failedToConnect(let peripheral, let error):
            return apply(machine.failedToConnect(peripheral, error: error.map(Self.stackError)))
        case .disconnected(let peripheral, let error):
            // The state says only `.disconnected`; the log says why (BlueZ's reason, CoreBluetooth's error).
            if let error, peripheral == connectedPeripheralId { log(.warning, "the link ended: \(error.message)") }
            return apply(machine.disconnected(peripheral, error: error.map(Self.stackError)))
        case .servicesDiscovered(let peripheral, let services, let error):
            return apply(machine.servicesDiscovered(peripheral, services, failure: error?.message))
        case .characteristicsDiscovered(let peripheral, let service, let characteristics, let error):
            return apply(
                machine.characteristicsDiscovered(
                    peripheral, service: service, characteristics, failure: error?.message))
        case .notificationStateUpdated(let peripheral, let characteristic, let isNotifying, let error):
            return apply(
                machine.notificationStateUpdated(
                    peripheral, characteristic, isNotifying: isNotifying, error: error.map(Self.stackError)))
        }
        apply([])  // publishes and delivers what the passthrough and the queries produced
    }

    /// A backend's error, as the lifecycle core tells errors apart.
    static func stackError(_ error: BleBackendError) -> ConnectionStateMachine.StackError {
        let kind: ConnectionStateMachine.StackError.Kind =
            switch error.code {
            case .insufficientEncryption, .insufficientAuthentication: .pairingRequired
            case .peerRemovedPairing: .pairingRemoved
            default: .other
            }
        return ConnectionStateMachine.StackError(kind: kind, message: error.message)
    }

    /// Performs lifecycle actions, then publishes the state and delivers events.
    func apply(_ actions: [ConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .backend(let command):
                if !isTerminated { issue(command) }
            case .startTimer(let id, let duration):
                connectionTimers[id] = scheduler.schedule(after: duration) { [weak self] in
                    guard let self, self.connectionTimers.removeValue(forKey: id) != nil else { return }
                    self.log(.warning, "connection timed out before the passthrough was ready")
                    self.apply(self.machine.timerFired(id))
                }
            case .cancelTimer(let id):
                if let token = connectionTimers.removeValue(forKey: id) { scheduler.cancel(token) }
            case .openPassthrough(let peripheral, let writeType):
                if !injectedFaults.neverReady { openPassthrough(peripheral: peripheral, writeType: writeType) }
            case .closePassthrough(let error):
                closePassthrough(error: error)
            }
        }
        commit()
    }

    private func issue(_ command: ConnectionStateMachine.Command) {
        switch command {
        case .scan(let services):
            backend.scanForPeripherals(withServices: services)
        case .stopScan:
            backend.stopScan()
        case .connect(let id):
            backend.connect(id)
        case .cancelConnection(let id):
            backend.cancelPeripheralConnection(id)
        case .discoverServices(let id, let services):
            backend.discoverServices(services, for: id)
        case .discoverCharacteristics(let id, let service, let characteristics):
            backend.discoverCharacteristics(characteristics, for: service, of: id)
        case .subscribe(let id, let characteristic):
            backend.setNotifyValue(true, for: characteristic, of: id)
        }
    }

    /// Copies the lifecycle machine's state to the published properties (the
    /// one place they change, besides `atEncoding`), then delivers events.
    func commit() {
        // Every state the lifecycle passed through, in order: a link that ended
        // says so before the next state, and a failure that repeats is published again.
        for change in machine.takeStateChanges() {
            connectionState = change
            log(.info, "connection state: \(change)")
            enqueue(.event(.connectionStateChanged(change)), generation: nil)
            if let event = eventAfterDisconnect {
                eventAfterDisconnect = nil
                enqueue(.event(event), generation: nil)
            }
        }
        // After a notification the lifecycle has usually not changed: nothing to copy.
        guard committedVersion != machine.publishedVersion else { return deliver() }
        committedVersion = machine.publishedVersion
        let state = machine.published
        if scanResults != state.scanResults { scanResults = state.scanResults }
        if connectedName != state.connectedName { connectedName = state.connectedName }
        if connectedAddress != state.connectedAddress { connectedAddress = state.connectedAddress }
        if connectedPeripheralId != state.connectedPeripheralId { connectedPeripheralId = state.connectedPeripheralId }
        let ready = state.atReady && !injectedFaults.neverReady
        if atReady != ready { atReady = ready }
        if deviceControlReady != state.deviceControlReady { deviceControlReady = state.deviceControlReady }
        deliver()
    }

    /// Sets the published encoding (and nothing else).
    func publishEncoding(_ encoding: XTalkAtEncoding) {
        if atEncoding != encoding { atEncoding = encoding }
    }

    // MARK: Passthrough lifecycle

    private func openPassthrough(peripheral: UUID, writeType: BleWriteType) {
        passthroughGeneration += 1
        let link = PassthroughDriver(
            client: self, peripheral: peripheral, generation: passthroughGeneration, encoding: atEncoding,
            writeType: writeType, tx: machine.profile.passthrough.writeRef, faults: injectedFaults)
        passthrough = link
        link.noteDecodingEncoding()
        if injectedFaults.replaysLineAfterReconnect, let line = replayedLine {
            enqueue(.event(.atLine(line)), generation: link.generation)
        }
        replayedLine = nil
        log(
            .info,
            "passthrough ready (\(writeType == .withoutResponse ? "write without response" : "write with response"))")
        // What the previous connection to this device left behind: answers the
        // device may still owe until their deadline, a line the lost link cut.
        // The channel ends the cut line and quarantines itself (its own actions).
        if let (previous, left) = leftBehind, previous == peripheral {
            let handover = ReconnectHandover(
                owedFor: max(.zero, (left.owedUntil ?? .zero) - scheduler.elapsed),
                cutLineEncoding: left.cutLineEncoding)
            if handover.owedFor > .zero {
                log(.info, "quarantine for \(handover.owedFor): the device may still answer the previous connection")
            }
            if handover.cutLineEncoding != nil { log(.info, "ending the half line the previous connection cut off") }
            if !handover.isEmpty { link.resume(after: handover) }
        }
        leftBehind = nil
        link.pumpWrites()
    }

    /// The connection ended: every waiter fails with `error` exactly once,
    /// timers stop, buffered bytes and queued writes are discarded.
    private func closePassthrough(error: XTalkBleError) {
        deviceQueries.cancelAll(client: self)
        guard let link = passthrough else { return }
        passthrough = nil
        replayedLine = link.lastLine
        if injectedFaults.deliversOldEventAfterDisconnect, let frame = link.lastFrame {
            eventAfterDisconnect = .diPayload(frame.payload, frame.meta)
        }
        leftBehind = link.close(error: error).map { (peripheral: link.peripheral, left: $0) }
        // Nothing of this connection is delivered after it ended, even what is already queued.
        if !injectedFaults.keepsQueuedEventsAfterDisconnect { discardDeliveries(of: link.generation) }
    }

    // MARK: Delivery

    /// One event for the stream, `onEvent` and the observers.
    enum Delivery {
        case event(XTalkBleEvent)
        /// `.sendFinished`, whose line goes to the send-finish observers.
        case sendFinished(line: String)
    }

    func enqueue(_ delivery: Delivery, generation: UInt64?) {
        pendingDeliveries.append((delivery, generation))
    }

    /// Drops the queued events of a connection that ended.
    func discardDeliveries(of generation: UInt64) {
        let kept = pendingDeliveries[deliveryHead...].filter { $0.generation != generation }
        pendingDeliveries.removeSubrange(deliveryHead...)
        pendingDeliveries += kept
    }

    /// Hands `event` to every live `events` stream; forgets the ones that are
    /// gone. The streams whose reader waits are woken after the round (`deliver()`).
    private func publish(_ event: XTalkBleEvent) {
        var pruned = false
        for entry in subscribers {
            guard let subscriber = entry.value, let (dropped, wake) = subscriber.push(event) else {
                pruned = true
                continue
            }
            if wake { subscribersToWake.append(subscriber) }
            if dropped > 0 {
                droppedEventCount += dropped
                if subscriber.dropped == 1 { log(.warning, "an events stream fell behind: dropping its oldest events") }
            }
        }
        if pruned { subscribers.removeAll { $0.value.map(\.isFinished) ?? true } }
    }

    /// Delivers queued events in order. Re-entrant calls (a callback that
    /// calls into the client) only queue; the outer loop delivers them next.
    private func deliver() {
        guard !isDelivering, deliveryHead < pendingDeliveries.count else { return }
        isDelivering = true
        defer {
            isDelivering = false
            pendingDeliveries.removeFirst(deliveryHead)
            deliveryHead = 0
            // Each waiting reader once, with everything this round gave it.
            for subscriber in subscribersToWake { subscriber.wake() }
            subscribersToWake.removeAll(keepingCapacity: true)
        }
        while deliveryHead < pendingDeliveries.count && !isTornDown {
            let delivery = pendingDeliveries[deliveryHead].delivery
            deliveryHead += 1
            let event: XTalkBleEvent
            switch delivery {
            case .event(let value): event = value
            case .sendFinished: event = .sendFinished
            }
            publish(event)
            onEvent?(event)
            switch delivery {
            case .event(.atLine(let line)):
                atLineObservers.notify(line)
            case .event(.passthroughRaw(let data)):
                rawObservers.notify(data)
            case .sendFinished(let line):
                sendFinishObservers.notify(line)
            case .event:
                break
            }
        }
    }

    // MARK: Logging

    /// Sends a record at or above `options.logLevel` to the `logHandler`, or without one to the system log.
    func log(_ level: XTalkLogLevel, _ message: @autoclosure () -> String) {
        guard level >= options.logLevel else { return }
        if let handler = options.logHandler {
            handler(level, message())
        } else {
            SystemLog.write(level, message())
        }
    }
}

#if !canImport(Combine)
    extension XTalkBleClient: XTalkObservationHost {}
#endif

/// A reader of `events`, held weakly.
struct WeakSubscriber {
    weak var value: EventSubscriber?
}
