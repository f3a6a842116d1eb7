import Foundation
import XTalkBleSdk

/// A simulated device at run time: its link to the central, its firmware, and
/// the controls a test uses to inject traffic and faults at any moment.
@MainActor
public final class XTalkSimulatedPeripheral {
    /// The identifier the central reports for this device (stable for the environment).
    public let id: UUID
    /// The device description; changes apply from the next use of each field
    /// (e.g. the firmware's next command, the link's next connection event).
    public var device: XTalkSimulatedDevice {
        didSet { firmware.configuration = device.firmware }
    }

    unowned let environment: XTalkSimulatedEnvironment
    let firmware: SimulatedRadioFirmware

    enum ConnectionState {
        case disconnected
        case connecting(TimerToken?)
        case connected
        /// The link is gone but the central has not noticed yet (supervision timeout).
        case lost
    }

    private(set) var connectionState: ConnectionState = .disconnected
    /// The current connection; nil while not connected.
    private(set) var link: SimulatedLink?
    private var connectionCount = 0
    /// Numbers each connection attempt; events carry it.
    private var attempt = 0
    /// Attempts the app cancelled or power-off ended: their events are never delivered.
    private var abandonedAttempts: Set<Int> = []

    /// Writes the central issued that were dropped (no credit, too long, not permitted).
    public internal(set) var droppedWrites = 0
    /// Device output bytes lost because no host was subscribed or the
    /// notification buffer overflowed.
    public internal(set) var droppedNotificationBytes = 0
    /// The device is connected to the phone already, by another app or the
    /// system: it does not advertise, so a scan never hears it, and only
    /// `retrieveConnectedPeripherals(withServices:)` finds it. The app can
    /// still connect to it (its connection shares the system's link).
    public var isConnectedToSystem = false {
        didSet {
            if isConnectedToSystem { environment.stopAdvertising(self) } else { environment.resumeAdvertising(self) }
        }
    }
    /// Whether this phone and the device are paired (bonded): set when the
    /// user completes a pairing dialog (`XTalkSimulatedGatt.pairing`); later
    /// connections are encrypted without asking again.
    public var isBonded = false
    /// Pairing dialogs iOS showed for this device.
    public internal(set) var pairingDialogsShown = 0
    /// Times the device changed its services during a connection (`modifyServices`).
    public internal(set) var serviceModifications = 0
    /// Ready-to-send callbacks the `lostReadyCallbacksOneIn` fault swallowed.
    public internal(set) var lostReadyCallbacks = 0

    init(id: UUID, device: XTalkSimulatedDevice, environment: XTalkSimulatedEnvironment) {
        self.id = id
        self.device = device
        self.environment = environment
        // The firmware's UART feeds whatever link is current; the relay breaks the init cycle.
        let relay = OutputRelay()
        firmware = SimulatedRadioFirmware(
            configuration: device.firmware, scheduler: environment.scheduler, random: environment.random,
            output: { bytes, what in relay.peripheral?.deviceOutput(bytes, what) })
        relay.peripheral = self
    }

    /// The device's account of what it processed and emitted, and when its
    /// output reached the host (checkers tell the SDK's faults from the device's by it).
    package var record: XTalkDeviceRecord {
        var record = deviceRecord
        record.commands = firmware.commandLog
        return record
    }

    private var deviceRecord = XTalkDeviceRecord()

    /// The firmware's UART output: to the current connection's notification queue, if any.
    private func deviceOutput(_ bytes: [UInt8], _ what: XTalkDeviceOutput) {
        let now = environment.scheduler.elapsed
        guard let link, !link.isLost else {
            deviceRecord.recordEmission(what, bytes: bytes, at: now, connection: nil, queued: 0, streamStart: 0)
            return
        }
        let (queued, start) = link.deviceOutput(bytes)
        deviceRecord.recordEmission(
            what, bytes: bytes, at: now, connection: connectionCount, queued: queued, streamStart: start)
    }

    /// The link's ready flag is stuck false (`true`), or free again.
    func readyFlagStuck(_ stuck: Bool) {
        let now = environment.scheduler.elapsed
        if stuck { deviceRecord.recordReadyFlagStuck(at: now) } else { deviceRecord.recordReadyFlagFreed(at: now) }
    }

    /// The host handed a write of the passthrough's TX to the link.
    func hostWrote(_ bytes: Data) {
        deviceRecord.recordHostWrite(Array(bytes), at: environment.scheduler.elapsed, connection: connectionCount)
    }

    /// The current connection's notifications reached the host up to `delivered` bytes.
    func notified(upTo delivered: Int) {
        deviceRecord.notified(connection: connectionCount, upTo: delivered, at: environment.scheduler.elapsed)
    }

    // MARK: State

    /// True while a connection is established.
    public var isConnected: Bool {
        if case .connected = connectionState { return true }
        return false
    }

    /// The current ATT MTU (23 until the exchange completes; nil when not connected).
    public var currentMTU: Int? { link?.mtu }

    /// When the current connection was established (nil without one).
    package var connectedSince: Duration? { link?.connectedAt }

    /// The ATT MTU of the link (23 until the exchange; nil without a link).
    package var attMTU: Int? { link?.mtu }

    /// How many connections this device accepted so far.
    public var connections: Int { connectionCount }

    /// The command lines the firmware processed, decoded, in order (the newest
    /// 10 000 to 20 000 are kept).
    public var processedCommands: [String] { firmware.processedCommands }

    /// Payloads the radio transmitted on air, in order (the newest 10 000 to 20 000 are kept).
    public var transmittedFrames: [Data] { firmware.transmittedFrames.map { Data($0) } }

    /// Since when the central has said it can send a write without response
    /// (nil while it says no, or without a connection): a checker's liveness measure.
    package var writeRoomSince: Duration? { link?.roomSince }

    /// Bytes of host writes delivered to the device on the current connection.
    public var hostBytesDelivered: Int { link?.hostBytesDelivered ?? 0 }

    /// When host bytes first and last reached the device on the current connection.
    package var hostDeliveryWindow: (first: Duration, last: Duration)? { link?.hostDeliveryWindow }

    /// Notification bytes delivered to the host on the current connection.
    public var deviceBytesDelivered: Int { link?.deviceBytesDelivered ?? 0 }

    /// Bytes the device produced that still wait to leave as notifications
    /// on the current connection.
    public var deviceBytesQueued: Int { link?.deviceBytesQueued ?? 0 }

    // MARK: Radio traffic and raw output

    /// The radio receives a frame: the firmware emits a `+DI:` line for it
    /// (with generated metadata, or exactly `fields` after `+DI:`).
    public func receiveRadioFrame(_ payload: Data, fields: String? = nil) {
        firmware.emitRadioFrame(Array(payload), fields: fields)
    }

    /// The radio reports a frame that failed its CRC (`+CRCERR:`).
    public func reportCrcError(fields: String? = nil) {
        firmware.emitCrcError(fields: fields)
    }

    /// The firmware writes any line (encoded, CR LF appended).
    public func emitLine(_ text: String) {
        firmware.emitLine(text)
    }

    /// The UART emits these bytes as they are: garbage, half lines, anything.
    public func emitRawBytes(_ bytes: [UInt8]) {
        firmware.emitRawBytes(bytes)
    }

    /// Periodic received frames (every `crcErrorEvery`-th one a CRC error).
    public func startRadioTraffic(every interval: Duration, payloadSize: Int = 64, crcErrorEvery: Int? = nil) {
        firmware.startRadioTraffic(every: interval, payloadSize: payloadSize, crcErrorEvery: crcErrorEvery)
    }

    /// Stops the traffic `startRadioTraffic` started.
    public func stopRadioTraffic() {
        firmware.stopRadioTraffic()
    }

    /// Periodic line noise between replies: every `interval`, a line of
    /// `bytes` random bytes with a non-printable one in it (delivered to the
    /// app as `.passthroughRaw`).
    public func startLineNoise(every interval: Duration, bytes: Int = 8) {
        firmware.startLineNoise(every: interval, length: bytes)
    }

    /// Stops the noise `startLineNoise` started.
    public func stopLineNoise() {
        firmware.stopLineNoise()
    }

    // MARK: Faults

    /// The link drops now, as `loss` says (by default out of range, as iOS
    /// reports it: `CBError.connectionTimeout` after the supervision timeout).
    public func disconnect(_ loss: XTalkSimulatedLinkLoss = .supervisionTimeout) {
        loseLink(loss)
    }

    /// The link drops `delay` from now (if this connection still exists then).
    public func disconnect(after delay: Duration, _ loss: XTalkSimulatedLinkLoss = .supervisionTimeout) {
        link?.after(delay) { [weak self] in self?.loseLink(loss) }
    }

    /// The device changes its GATT database during the connection, and iOS
    /// calls `didModifyServices` with the services that became invalid: an
    /// empty set means a service was added (e.g. a DFU service appearing),
    /// and nothing the app uses changed.
    public func modifyServices(invalidating invalidated: Set<XTalkSimulatedGattService> = []) {
        guard case .connected = connectionState else { return }
        serviceModifications += 1
        let uuids = invalidated.map(\.uuid)
        #if os(Linux)
            if let radio = environment.coreBluetoothRadio {
                radio.servicesModified(id, invalidated: uuids)
                return
            }
        #endif
        environment.central.servicesModified(id, invalidated: uuids)
    }

    /// The link drops as soon as the device has received `count` bytes of
    /// host writes on this connection (mid-write, when inside a line).
    public func disconnect(afterHostBytes count: Int, _ loss: XTalkSimulatedLinkLoss = .supervisionTimeout) {
        guard let link else { return }
        link.disconnectAfterHostBytes = (max(link.hostBytesDelivered, count), loss)
    }

    /// The link drops as soon as `count` notification bytes reached the host
    /// on this connection (mid-line, when inside a line).
    public func disconnect(afterDeviceBytes count: Int, _ loss: XTalkSimulatedLinkLoss = .supervisionTimeout) {
        guard let link else { return }
        link.disconnectAfterDeviceBytes = (max(link.deviceBytesDelivered, count), loss)
    }

    // MARK: Link, called by the central

    func firmwareReceive(_ bytes: [UInt8]) {
        switch device.gatt.profile {
        case .xTalk: firmware.receive(bytes)
        case .oneKeyEcho: notify(Data(bytes))  // the echo firmware: every packet back, unchanged
        }
    }

    /// Sends `data` to the host as a packet of its own: notifications of at
    /// most the notification size, never merged with other output (dropped
    /// when nothing is connected or subscribed, as every device output).
    public func notify(_ data: Data) {
        guard let link, !link.isLost, !data.isEmpty else { return }
        link.deviceOutput(Array(data), asPacket: true)
    }

    /// Sends an event of the current connection (or attempt) to the central.
    /// Events already posted are delivered even if the link drops right after,
    /// as on a real stack; but nothing of a connection the app cancelled (or
    /// that Bluetooth power-off ended) arrives after that, even if already posted.
    func post(_ event: BleBackendEvent) {
        let attempt = self.attempt
        environment.central.post(event) { [weak self] in
            guard let self else { return false }
            return !self.abandonedAttempts.contains(attempt)
        }
    }

    func beginConnecting() {
        guard case .disconnected = connectionState else { return }
        attempt += 1
        let configuration = device.link
        guard !configuration.connectionNeverCompletes else {
            connectionState = .connecting(nil)
            return
        }
        let token = environment.scheduler.schedule(after: configuration.connectDelay) { [weak self] in
            self?.completeConnecting()
        }
        connectionState = .connecting(token)
    }

    private func completeConnecting() {
        guard case .connecting = connectionState else { return }
        if device.link.refusesConnection {
            connectionState = .disconnected
            post(
                .failedToConnect(
                    peripheral: id, error: BleBackendError(.connectionFailed, "the device refused the connection")))
            return
        }
        connectionCount += 1
        deviceRecord.recordConnection(connectionCount, at: environment.scheduler.elapsed)
        firmware.connection = connectionCount
        connectionState = .connected
        link = SimulatedLink(peripheral: self, scheduler: environment.scheduler, random: environment.random)
        environment.stopAdvertising(self)
        post(.connected(peripheral: id))
    }

    /// The app cancels the connection or the attempt: it ends at once and,
    /// as the backend seam promises, nothing more of it is delivered.
    func cancelConnection() {
        // Also when the link is already lost but the central has not heard of
        // it yet: its pending disconnect report belongs to the cancelled connection.
        abandonedAttempts.insert(attempt)
        switch connectionState {
        case .disconnected:
            return
        case .connecting(let token):
            if let token { environment.scheduler.cancel(token) }
        case .connected, .lost:
            break
        }
        tearDown()
    }

    /// The link is lost without the central asking, as `loss` says.
    func loseLink(_ loss: XTalkSimulatedLinkLoss = .supervisionTimeout) {
        switch loss {
        case .supervisionTimeout:
            loseLink(
                after: device.link.supervisionTimeout,
                reporting: BleBackendError(.connectionTimeout, "The connection has timed out unexpectedly."))
        case .terminatedByDevice:
            loseLink(
                after: .zero,
                reporting: BleBackendError(.peripheralDisconnected, "The specified device has disconnected from us."))
        }
    }

    /// The link is lost: the device is gone at once; the central keeps the
    /// link until it reports the loss with `error`, `delay` from now.
    func loseLink(after delay: Duration, reporting error: BleBackendError) {
        guard case .connected = connectionState, let link else { return }
        link.lose()
        connectionState = .lost
        deviceRecord.recordLinkLost(connectionCount, at: environment.scheduler.elapsed)
        let attempt = self.attempt
        environment.central.post(after: delay, .disconnected(peripheral: id, error: error)) { [weak self] in
            // Also ends the central's side of the link, unless the app cancelled it meanwhile.
            guard let self, !self.abandonedAttempts.contains(attempt), self.attempt == attempt,
                case .lost = self.connectionState
            else { return false }
            self.tearDown()
            return true
        }
    }

    /// Drops the connection silently (Bluetooth powered off: no callback).
    func dropSilently() {
        if case .connecting(let token) = connectionState, let token { environment.scheduler.cancel(token) }
        if case .disconnected = connectionState {} else { abandonedAttempts.insert(attempt) }
        tearDown()
    }

    private func tearDown() {
        if case .lost = connectionState {
            deviceRecord.recordCentralEnded(connectionCount, at: environment.scheduler.elapsed)
        }
        link?.close()
        link = nil
        connectionState = .disconnected
        environment.resumeAdvertising(self)
    }

    /// Cancels every timer of this device (environment shutdown).
    func shutDown() {
        dropSilently()
        firmware.shutDown()
    }
}

/// Carries the firmware's output to its peripheral without a retain cycle.
@MainActor
private final class OutputRelay {
    weak var peripheral: XTalkSimulatedPeripheral?
}
