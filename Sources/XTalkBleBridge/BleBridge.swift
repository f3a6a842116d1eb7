import Foundation
import XTalkBleSdk

/// The low-level transport bridge (*iOS: Connect via Bluetooth*) over the backend seam: the
/// plugin contract of OneKey's JavaScript SDK (`enumerate`, `connect`,
/// `disconnect`, `send`, `receive`, `getProtocolV2PacketCapacity`, `init`),
/// one `BridgeDeviceMachine` per device. Every request is answered exactly
/// once, on the main actor. Hosts (the WebKit handler, `xtalk bridge
/// --stdio`) reach it through `BridgeRouter`.
@MainActor
package final class BleBridge {
    package typealias Completion = @MainActor (Result<BridgeValue, BridgeError>) -> Void

    /// The plugin's `version`.
    package static let version = XTalkSdkVersion.string
    /// The largest capacity the JavaScript SDK uses (it clamps to 244).
    package static let maximumCapacity = 244

    package let backend: any BleBackend
    package let profile: BridgeProfile
    package let settings: BridgeDeviceMachine.Settings
    /// How long `enumerate` scans before it answers.
    package var enumerateWindow: Duration = .seconds(1)
    /// How long a call waits for Bluetooth's first state (or the end of a
    /// reset): on iOS the state stays unknown while the permission prompt is
    /// open, and a user may take a while to answer it (as long as the
    /// pairing dialog's 30 s).
    package var stateWait: Duration = .seconds(30)

    private var machines: [UUID: BridgeDeviceMachine] = [:]
    private var timers: [UUID: [BridgeTimer: TimerToken]] = [:]
    /// The highest generation of a machine forgotten (see `forgetIfIdle`).
    private var retired: UInt64 = 0
    private var completions: [BridgeRequestID: Completion] = [:]
    private var nextRequest: BridgeRequestID = 0
    /// Devices heard (or connected) and their names, in the order first heard.
    private var names: [UUID: String] = [:]
    private var order: [UUID] = []
    private var heardThisScan: Set<UUID> = []
    private var enumerateWaiters: [Completion] = []
    private var enumerateTimer: TimerToken?
    private var activated = false
    private var stateWaiters: [(run: @MainActor () -> Void, fail: @MainActor (BridgeError) -> Void)] = []
    private var stateTimer: TimerToken?

    package init(
        backend: any BleBackend, profile: BridgeProfile = .oneKey,
        settings: BridgeDeviceMachine.Settings = BridgeDeviceMachine.Settings()
    ) {
        self.backend = backend
        self.profile = profile
        self.settings = settings
        backend.eventHandler = { [weak self] event in self?.handle(event) }
    }

    // MARK: The plugin's methods

    /// `init()`: asks for Bluetooth (the permission prompt appears now). Never
    /// fails: the SDK does not await it; problems surface from the other calls.
    package func initialize() {
        activateIfNeeded()
    }

    /// `enumerate()`: the devices with the profile's service heard during a
    /// scan of `enumerateWindow`, and those connected through the bridge.
    package func enumerate(_ completion: @escaping Completion) {
        whenUsable(completion) { [self] in
            enumerateWaiters.append(completion)
            guard enumerateTimer == nil else { return }  // a scan is under way: its answer is everyone's
            heardThisScan = []
            backend.scanForPeripherals(withServices: [profile.service])
            enumerateTimer = backend.scheduler.schedule(after: enumerateWindow) { [weak self] in
                self?.finishEnumerate(.success(()))
            }
        }
    }

    package func connect(uuid: String, _ completion: @escaping Completion) {
        guard let id = deviceID(uuid) else {
            return completion(.failure(BridgeError(.connected, "\"\(uuid)\" is not a device id")))
        }
        // Not only devices enumerated by this process: an app relaunched with
        // the id it stored connects without searching first (the system knows
        // the device by its identifier; an id it does not know fails the connect, 704).
        whenUsable(completion) { [self] in
            if names[id] == nil {
                // Connected by a stored id: listed by `enumerate` as a device connected through the bridge.
                names[id] = ""
                order.append(id)
            }
            let request = register(completion)
            update(id) { $0.connect(request) }
        }
    }

    package func disconnect(uuid: String, _ completion: @escaping Completion) {
        guard let id = deviceID(uuid), machines[id] != nil else { return completion(.success(.null)) }
        let request = register(completion)
        update(id) { $0.disconnect(request) }
    }

    /// `send(uuid, hex, options)`: `withoutResponse` nil is the contract's default (without response).
    package func send(uuid: String, hex: String, withoutResponse: Bool?, _ completion: @escaping Completion) {
        guard let id = deviceID(uuid) else {
            return completion(.failure(BridgeError(.writeCharacteristic, "\"\(uuid)\" is not a device id")))
        }
        // (The usual case first, without making a closure: this is the per-chunk path.)
        guard usable else {
            return whenUsable(completion) { [self] in
                send(uuid: uuid, hex: hex, withoutResponse: withoutResponse, completion)
            }
        }
        let request = register(completion)
        let capacity = capacity(of: id) ?? 20
        let canSend = backend.canSendWriteWithoutResponse(id)
        // Queued and, flow control allowing, its first write made: one step of the machine.
        var more = false
        update(id) { machine in
            let refused = machine.send(request, hex: hex, withoutResponse: withoutResponse, capacity: capacity)
            guard refused.isEmpty else { return refused }
            let actions = machine.pump(canSendWithoutResponse: canSend)
            more = Self.mayWriteAgain(machine, after: actions)
            return actions
        }
        if more { pump(id) }
    }

    /// `receive(uuid)`. Older transports of the JavaScript SDK call
    /// `receive()` with no id (its type has `uuid?`): then the one connected
    /// device is meant, and with none or several the call is 720.
    package func receive(uuid: String, _ completion: @escaping Completion) {
        guard let id = uuid.isEmpty ? onlyReadyDevice() : deviceID(uuid) else {
            guard uuid.isEmpty else {
                return completion(.failure(BridgeError(.deviceDisconnected, "\"\(uuid)\" is not a device id")))
            }
            // Not known yet while Bluetooth's state is not: then ask again once it is.
            guard usable else { return whenUsable(completion) { [self] in receive(uuid: uuid, completion) } }
            let ready = machines.values.filter(\.isReady).count
            return completion(
                .failure(
                    BridgeError(
                        .deviceDisconnected,
                        ready == 0
                            ? "receive() named no device, and none is connected"
                            : "receive() named no device, and \(ready) are connected: name one")))
        }
        guard usable else {
            return whenUsable(completion) { [self] in receive(uuid: uuid, completion) }
        }
        let request = register(completion)
        update(id) { $0.receive(request) }
    }

    /// The device a `receive()` without an id means: the only one connected.
    private func onlyReadyDevice() -> UUID? {
        let ready = machines.filter { $0.value.isReady }
        return ready.count == 1 ? ready.first?.key : nil
    }

    /// Bluetooth is on and the bridge asked for it.
    private var usable: Bool { activated && backend.state == .poweredOn }

    /// `getProtocolV2PacketCapacity(uuid)`: the write capacity without
    /// response, at most 244; nil while the device is not ready.
    package func protocolV2PacketCapacity(uuid: String) -> Int? {
        guard let id = deviceID(uuid), machines[id]?.isReady == true else { return nil }
        return capacity(of: id)
    }

    /// Ends every device's session and link: the requests waiting on them are rejected with 720.
    private func disconnectAll() {
        for id in machines.keys.sorted(by: { $0.uuidString < $1.uuidString }) where machines[id]?.phase != .idle {
            disconnect(uuid: id.uuidString) { _ in }
        }
    }

    /// The host is going away (its web view, its input): every link ends and
    /// every request still waiting is answered now, with 720 (a parked
    /// `receive`, a `send`, a `connect`, an `enumerate`, a call waiting for
    /// Bluetooth's state). The bridge stays usable.
    package func close(_ reason: String) {
        disconnectAll()
        let error = BridgeError(.deviceDisconnected, reason)
        finishEnumerate(.failure(error))
        failStateWaiters(error)
    }

    /// Devices with a machine: connected, connecting, or holding something (for tests).
    package var machineCount: Int { machines.count }

    /// Devices `enumerate` can name (for tests).
    package var knownDeviceCount: Int { names.count }

    /// Requests that will be answered without the device sending anything
    /// (an `enumerate`'s scan, a `connect`, a `send`, a call waiting for
    /// Bluetooth's state): every pending request but the parked receives.
    package var requestsInProgress: Int {
        pendingRequestCount - machines.values.filter(\.hasParkedReceive).count
    }

    /// Requests not answered yet (for tests: every request is answered once).
    package var pendingRequestCount: Int { completions.count + enumerateWaiters.count + stateWaiters.count }

    /// The device's machine (for tests and the host's diagnostics).
    package func machine(uuid: String) -> BridgeDeviceMachine? {
        deviceID(uuid).flatMap { machines[$0] }
    }

    /// The device id a request names (parsed once per id: Foundation's parser is slow on Linux).
    private func deviceID(_ text: String) -> UUID? {
        if let last = lastID, last.text == text { return last.id }
        if let known = parsedIDs[text] {
            lastID = (text, known)
            return known
        }
        guard let id = UUID(uuidString: text) else { return nil }
        if parsedIDs.count >= 256 { parsedIDs.removeAll() }
        parsedIDs[text] = id
        return id
    }

    private var parsedIDs: [String: UUID] = [:]
    private var lastID: (text: String, id: UUID)?

    // MARK: Driving the machines

    private func capacity(of id: UUID) -> Int? {
        let length = backend.maximumWriteValueLength(for: .withoutResponse, of: id)
        return length > 0 ? min(length, Self.maximumCapacity) : nil
    }

    private func register(_ completion: @escaping Completion) -> BridgeRequestID {
        nextRequest += 1
        completions[nextRequest] = completion
        return nextRequest
    }

    /// Runs `step` on the device's machine, stores it, then performs its actions
    /// (a completion may call back into the bridge: the machine is stored first).
    private func update(_ id: UUID, _ step: (inout BridgeDeviceMachine) -> [BridgeDeviceMachine.Action]) {
        // Changed in place in the dictionary (one lookup, its arrays never copied).
        let actions = step(
            &machines[id, default: BridgeDeviceMachine(profile: profile, settings: settings, generation: retired)])
        perform(actions, for: id)
        forgetIfIdle(id)
    }

    /// Forgets a device that holds nothing (never connected, or its link
    /// ended), so that a page naming ever new ids (a `receive` or `send` of a
    /// device never connected, a stored id the system does not know) costs
    /// nothing once answered. A later request makes a new machine, whose
    /// generation starts past every one used before (`retired`).
    private func forgetIfIdle(_ id: UUID) {
        guard let machine = machines[id], machine.holdsNothing else { return }
        retired = max(retired, machine.generation)
        machines[id] = nil
        for token in (timers.removeValue(forKey: id) ?? [:]).values { backend.scheduler.cancel(token) }
        if names[id] == "", !heardThisScan.contains(id) {
            // known only by the id a connect named: listed while connected, not after
            names[id] = nil
            order.removeAll { $0 == id }
        }
    }

    /// Writes while the machine has one to make: writes without response go
    /// as long as flow control allows (asked before each one).
    private func pump(_ id: UUID) {
        var more = true
        while more {
            update(id) { machine in
                let actions = machine.pump(canSendWithoutResponse: backend.canSendWriteWithoutResponse(id))
                more = Self.mayWriteAgain(machine, after: actions)
                return actions
            }
        }
    }

    /// After a write without response the machine may make the next one at
    /// once (flow control is asked again); after anything else it waits for an event.
    private static func mayWriteAgain(_ machine: BridgeDeviceMachine, after actions: [BridgeDeviceMachine.Action])
        -> Bool
    {
        machine.hasWriteToMake && actions.contains { if case .write(_, .withoutResponse) = $0 { true } else { false } }
    }

    private func perform(_ actions: [BridgeDeviceMachine.Action], for id: UUID) {
        for action in actions {
            switch action {
            case .connect: backend.connect(id)
            case .cancelLink: backend.cancelPeripheralConnection(id)
            case .discoverServices(let services): backend.discoverServices(services, for: id)
            case .discoverCharacteristics(let characteristics, let service):
                backend.discoverCharacteristics(characteristics, for: service, of: id)
            case .subscribe(let characteristic): backend.setNotifyValue(true, for: characteristic, of: id)
            case .write(let data, let type):
                backend.writeValue(data, for: profile.writeRef, of: id, type: type)
            case .resolve(let request, let value): complete(request, .success(value))
            case .reject(let request, let error): complete(request, .failure(error))
            case .startTimer(let kind, let delay, let generation):
                if let old = timers[id]?[kind] { backend.scheduler.cancel(old) }
                timers[id, default: [:]][kind] = backend.scheduler.schedule(after: delay) { [weak self] in
                    self?.timerFired(kind, generation: generation, for: id)
                }
            case .cancelTimer(let kind):
                if let token = timers[id]?.removeValue(forKey: kind) { backend.scheduler.cancel(token) }
            }
        }
    }

    private func complete(_ request: BridgeRequestID, _ result: Result<BridgeValue, BridgeError>) {
        guard let completion = completions.removeValue(forKey: request) else { return }
        completion(result)
    }

    private func timerFired(_ kind: BridgeTimer, generation: UInt64, for id: UUID) {
        timers[id]?[kind] = nil
        switch kind {
        case .connect:
            update(id) { $0.connectTimedOut(generation: generation) }
        case .settle:
            let capacity = backend.maximumWriteValueLength(for: .withoutResponse, of: id)
            update(id) { $0.settled(capacity: capacity, generation: generation) }
        case .writeRetry:
            update(id) { $0.writeRetryFired(generation: generation) }
            pump(id)
        }
    }

    // MARK: Backend events

    private func handle(_ event: BleBackendEvent) {
        switch event {
        case .stateChanged(let state): stateChanged(state)
        case .discovered(let id, let advertisement, _):
            guard enumerateTimer != nil else { return }
            if names[id] == nil { order.append(id) }
            names[id] = advertisement.localName ?? names[id] ?? ""
            heardThisScan.insert(id)
        case .scanFailed(let error):
            finishEnumerate(.failure(BridgeError(.scan, "scanning failed: \(error.message)")))
        case .connected(let id): update(id) { $0.linkUp() }
        case .failedToConnect(let id, let error): update(id) { $0.connectFailed(error) }
        case .disconnected(let id, let error):
            update(id) { $0.linkEnded(BridgeDeviceMachine.linkLoss(error)) }
        case .servicesDiscovered(let id, let services, let error):
            update(id) { $0.servicesDiscovered(services, error: error) }
        case .characteristicsDiscovered(let id, let service, let characteristics, let error):
            update(id) { $0.characteristicsDiscovered(characteristics, service: service, error: error) }
        case .notificationStateUpdated(let id, let characteristic, let isNotifying, let error):
            update(id) { $0.notificationStateUpdated(characteristic, isNotifying: isNotifying, error: error) }
        case .valueUpdated(let id, let characteristic, let value, _):
            guard let value else { return }
            update(id) { $0.notified(characteristic, value: value) }
        case .writeCompleted(let id, let characteristic, let error):
            guard characteristic == profile.writeRef else { return }
            update(id) { $0.writeCompleted(error: error) }
            pump(id)
        case .readyToSendWriteWithoutResponse(let id):
            update(id) { $0.readyToSend() }
            pump(id)
        case .restored:
            break
        }
    }

    private func stateChanged(_ state: BleManagerState) {
        switch state {
        case .poweredOn:
            let waiters = stateWaiters
            stateWaiters = []
            cancelStateTimer()
            for waiter in waiters { waiter.run() }
        case .unknown, .resetting:
            endEverything(BridgeError(.deviceDisconnected, "Bluetooth is resetting"))
        case .poweredOff, .unauthorized, .unsupported:
            let error = unusable(state)
            endEverything(error)
            failStateWaiters(error)
        }
    }

    /// Answers every call waiting for Bluetooth's state with `error`; the wait's timer goes.
    private func failStateWaiters(_ error: BridgeError) {
        let waiters = stateWaiters
        stateWaiters = []
        cancelStateTimer()
        for waiter in waiters { waiter.fail(error) }
    }

    private func endEverything(_ error: BridgeError) {
        for id in machines.keys.sorted(by: { $0.uuidString < $1.uuidString }) { update(id) { $0.linkEnded(error) } }
        finishEnumerate(.failure(error))
    }

    private func finishEnumerate(_ outcome: Result<Void, BridgeError>) {
        guard let timer = enumerateTimer else { return }
        backend.scheduler.cancel(timer)
        enumerateTimer = nil
        if backend.state == .poweredOn { backend.stopScan() }
        let waiters = enumerateWaiters
        enumerateWaiters = []
        let result: Result<BridgeValue, BridgeError> = outcome.map {
            let connected = Set(machines.filter { $0.value.phase != .idle }.keys)
            let listed = order.filter { heardThisScan.contains($0) || connected.contains($0) }
            return .devices(listed.map { BridgeDeviceInfo(id: $0.uuidString, name: names[$0] ?? "") })
        }
        for waiter in waiters { waiter(result) }
    }

    // MARK: Bluetooth's state

    private func activateIfNeeded() {
        guard !activated else { return }
        activated = true
        backend.activate(showPowerAlert: true, restoreIdentifier: nil)
    }

    /// Runs `work` once Bluetooth is on; answers 721/701/722 when it is off,
    /// not allowed or not there; waits while its state is not known yet, up
    /// to `stateWait`, then answers 713.
    private func whenUsable(_ completion: @escaping Completion, _ work: @escaping @MainActor () -> Void) {
        activateIfNeeded()
        switch backend.state {
        case .poweredOn:
            work()
        case .poweredOff, .unauthorized, .unsupported:
            completion(.failure(unusable(backend.state)))
        case .unknown, .resetting:
            stateWaiters.append((work, { completion(.failure($0)) }))
            guard stateTimer == nil else { return }
            stateTimer = backend.scheduler.schedule(after: stateWait) { [weak self] in
                guard let self else { return }
                self.stateTimer = nil
                // A timeout (713), not "powered off": nothing says Bluetooth is off.
                self.failStateWaiters(
                    BridgeError(
                        .timeout,
                        "Bluetooth's state was still not known after \(self.stateWait) "
                            + "(is the Bluetooth permission prompt still open?)"))
            }
        }
    }

    private func cancelStateTimer() {
        if let stateTimer { backend.scheduler.cancel(stateTimer) }
        stateTimer = nil
    }

    /// The error for an unusable state, in the platform's words when it has
    /// them (on Linux: no system bus, bluetoothd not running, no adapter).
    private func unusable(_ state: BleManagerState) -> BridgeError {
        let error: BridgeError =
            switch state {
            case .unauthorized: BridgeError(.permission, "the app is not allowed to use Bluetooth")
            case .unsupported: BridgeError(.unsupported, "this device has no Bluetooth LE")
            default: BridgeError(.poweredOff, "Bluetooth is off")
            }
        guard let reason = backend.unavailableReason else { return error }
        return BridgeError(error.code, reason)
    }
}
