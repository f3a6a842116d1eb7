import Foundation
import XTalkBleSdk

/// The phone's Bluetooth as the simulated central sees it.
public enum XTalkSimulatedBluetoothState: Sendable, Hashable {
    /// Bluetooth is on and the app may use it.
    case poweredOn
    /// Bluetooth is off.
    case poweredOff
    /// The app is not allowed to use Bluetooth.
    case unauthorized
    /// The platform has no Bluetooth LE.
    case unsupported
    /// The Bluetooth stack is restarting.
    case resetting

    var managerState: BleManagerState {
        switch self {
        case .poweredOn: .poweredOn
        case .poweredOff: .poweredOff
        case .unauthorized: .unauthorized
        case .unsupported: .unsupported
        case .resetting: .resetting
        }
    }
}

/// The app's Bluetooth permission (`CBManager.authorization`).
public enum XTalkSimulatedAuthorization: Sendable, Hashable {
    /// The user has not answered yet: creating the manager shows the system
    /// prompt, and the state stays `.unknown` until the user answers
    /// (`answerPermissionPrompt(allow:)`).
    case notDetermined
    /// A policy (parental controls, MDM) denies Bluetooth: `.unauthorized`.
    case restricted
    /// The user denied Bluetooth: `.unauthorized`.
    case denied
    /// The user allowed Bluetooth (the default).
    case allowedAlways
}

/// A simulated radio environment: the phone's Bluetooth (a CoreBluetooth-like
/// central) and the xTalk devices around it.
///
/// One environment serves one client. Use it with a `XTalkVirtualClock` in
/// tests and previews (nothing sleeps; you move time) or on the real clock in
/// tools and demos. Every instance is independent: no global state.
@MainActor
public final class XTalkSimulatedEnvironment {
    /// The virtual clock, when the environment runs in virtual time.
    public let virtualClock: XTalkVirtualClock?
    package let scheduler: any TimerScheduling
    let random: SimulatorRandom
    /// The central the client talks to (the backend seam).
    package private(set) lazy var central = SimulatedCentral(environment: self)
    /// The devices, in the order they were added.
    public private(set) var peripherals: [XTalkSimulatedPeripheral] = []
    /// The phone's Bluetooth state (`setBluetoothState(_:)` changes it).
    public private(set) var bluetoothState: XTalkSimulatedBluetoothState
    /// Commands the app issued that CoreBluetooth would refuse with an "API
    /// MISUSE" log (e.g. while not powered on, or on a disconnected peripheral).
    public private(set) var apiMisuses: [String] = []
    private(set) var isShutDown = false
    /// When set, the platform reports scans as failed with this reason.
    public var scanFailure: String?
    /// The app's Bluetooth permission; changing it reports the new state to
    /// the app (as iOS does when the user changes it in Settings).
    public var authorization: XTalkSimulatedAuthorization = .allowedAlways {
        didSet {
            guard authorization != oldValue else { return }
            if managerState != .poweredOn { dropEverything() }
            central.reportState()
            #if os(Linux)
                coreBluetoothRadio?.authorizationChanged(authorization)
            #endif
        }
    }
    /// How many times the system asked the user for Bluetooth permission (the
    /// app's first use while `.notDetermined`).
    public private(set) var permissionPromptsShown = 0
    /// How many times the system showed its "turn on Bluetooth" alert: the
    /// manager was created while Bluetooth was off and the app did not opt out
    /// (`XTalkBleClientOptions.showsPowerAlert`).
    public private(set) var powerAlertsShown = 0
    /// Whether the app has created its manager yet (its first scan or connect).
    public var isBluetoothInUse: Bool { central.isActive }
    #if os(Linux)
        /// The CoreBluetooth stand-in's radio, while a client uses it.
        package var coreBluetoothRadio: SimulatedCoreBluetoothRadio?
    #endif

    private var scanning = false
    private var scanFilter: [BleUUID] = []
    private var advertisingTimers: [UUID: TimerToken] = [:]

    /// An environment in virtual time: `clock` moves only when a test moves it.
    public convenience init(
        devices: [XTalkSimulatedDevice] = [XTalkSimulatedDevice()],
        clock: XTalkVirtualClock,
        bluetoothState: XTalkSimulatedBluetoothState = .poweredOn,
        seed: UInt64 = 0x5EED
    ) {
        self.init(devices: devices, scheduler: clock, virtualClock: clock, bluetoothState: bluetoothState, seed: seed)
    }

    /// An environment on the real clock (tools, demos, previews).
    public convenience init(
        devices: [XTalkSimulatedDevice] = [XTalkSimulatedDevice()],
        bluetoothState: XTalkSimulatedBluetoothState = .poweredOn,
        seed: UInt64 = 0x5EED
    ) {
        self.init(
            devices: devices, scheduler: ClockTimerScheduler(clock: ContinuousClock()), virtualClock: nil,
            bluetoothState: bluetoothState, seed: seed)
    }

    private init(
        devices: [XTalkSimulatedDevice], scheduler: any TimerScheduling, virtualClock: XTalkVirtualClock?,
        bluetoothState: XTalkSimulatedBluetoothState, seed: UInt64
    ) {
        self.scheduler = scheduler
        self.virtualClock = virtualClock
        self.bluetoothState = bluetoothState
        random = SimulatorRandom(seed: seed)
        for device in devices { addDevice(device) }
    }

    /// The platform's state as an app's manager sees it.
    var managerState: BleManagerState {
        switch authorization {
        case .notDetermined: .unknown
        case .restricted, .denied: .unauthorized
        case .allowedAlways: bluetoothState.managerState
        }
    }

    /// The app created its manager (CoreBluetooth would now prompt, or alert).
    func managerCreated(showPowerAlert: Bool) {
        if authorization == .notDetermined { permissionPromptsShown += 1 }
        if showPowerAlert, authorization == .allowedAlways, bluetoothState == .poweredOff { powerAlertsShown += 1 }
    }

    /// Connections iOS keeps for a terminated app that opted into state
    /// restoration, with the restore identifier they are kept for.
    private var keptForRestoration: (identifier: String, peripherals: [UUID])?

    /// iOS terminates the app in the background (e.g. for memory): `client`
    /// stops without a word to Bluetooth. Without a restore identifier the
    /// app's connections end with it; with one (`XTalkBleClientOptions
    /// .restoreIdentifier`) iOS keeps them, and the next client created with
    /// the same identifier (the relaunched app) gets them back.
    public func terminateApp(_ client: XTalkBleClient) {
        client.terminateProcess()
        let identifier = central.appTerminated()
        #if os(Linux)
            coreBluetoothRadio?.shutDown()
        #endif
        let held = peripherals.filter {
            if case .disconnected = $0.connectionState { false } else { true }
        }
        if let identifier {
            keptForRestoration = (identifier, held.map(\.id))
        } else {
            keptForRestoration = nil
            for peripheral in held { peripheral.cancelConnection() }
        }
    }

    /// What iOS hands back to a manager created with `identifier` (once).
    func takeRestoration(_ identifier: String) -> [BleRestoredPeripheral]? {
        guard let kept = keptForRestoration, kept.identifier == identifier else { return nil }
        keptForRestoration = nil
        return kept.peripherals.compactMap { id in
            peripheral(id: id).map { BleRestoredPeripheral(id: id, name: $0.device.name, isConnected: $0.isConnected) }
        }
    }

    /// The user answers the system's permission prompt (while `.notDetermined`).
    public func answerPermissionPrompt(allow: Bool) {
        guard authorization == .notDetermined else { return }
        authorization = allow ? .allowedAlways : .denied
    }

    /// The backend a client uses to talk to this environment.
    package var backend: any BleBackend { central }

    /// Adds a device; it advertises at once (found by a running scan).
    @discardableResult
    public func addDevice(_ device: XTalkSimulatedDevice) -> XTalkSimulatedPeripheral {
        let id = UUID(uuid: randomUUIDBytes())
        let peripheral = XTalkSimulatedPeripheral(id: id, device: device, environment: self)
        peripherals.append(peripheral)
        resumeAdvertising(peripheral)
        return peripheral
    }

    /// The first device with this advertised name.
    public func peripheral(named name: String) -> XTalkSimulatedPeripheral? {
        peripherals.first { $0.device.name == name }
    }

    /// The device with this identifier (a scan result's `id`), if any.
    public func peripheral(id: UUID) -> XTalkSimulatedPeripheral? {
        peripherals.first { $0.id == id }
    }

    /// Changes the phone's Bluetooth state. Leaving `.poweredOn` stops the scan
    /// and drops every connection without a disconnect callback, as
    /// CoreBluetooth does; the app learns it from the state change.
    public func setBluetoothState(_ state: XTalkSimulatedBluetoothState) {
        guard state != bluetoothState else { return }
        bluetoothState = state
        if state != .poweredOn { dropEverything() }
        central.reportState()
    }

    /// Leaving `.poweredOn`: the scan stops and every connection is dropped
    /// without a callback, as CoreBluetooth does.
    private func dropEverything() {
        stopScanning()
        for peripheral in peripherals { peripheral.dropSilently() }
    }

    /// Stops everything: scans, connections, firmware timers, radio traffic.
    /// Afterwards no timer of the environment is pending and no event is delivered.
    public func shutDown() {
        stopScanning()
        for peripheral in peripherals { peripheral.shutDown() }
        central.cancelInFlight()
        #if os(Linux)
            coreBluetoothRadio?.shutDown()
        #endif
        isShutDown = true
    }

    func recordMisuse(_ message: String) {
        apiMisuses.append(message)
    }

    // MARK: Advertising

    func startScanning(filter: [BleUUID]) {
        stopScanning()
        if let reason = scanFailure {
            central.post(.scanFailed(error: BleBackendError(.unknown, reason)))
            return
        }
        scanning = true
        scanFilter = filter
        for peripheral in peripherals { resumeAdvertising(peripheral, firstWithin: true) }
    }

    func stopScanning() {
        scanning = false
        for token in advertisingTimers.values { scheduler.cancel(token) }
        advertisingTimers.removeAll()
    }

    func stopAdvertising(_ peripheral: XTalkSimulatedPeripheral) {
        if let token = advertisingTimers.removeValue(forKey: peripheral.id) { scheduler.cancel(token) }
    }

    /// Schedules the device's next advertisement while a scan runs and the
    /// device is free (a connected device does not advertise).
    func resumeAdvertising(_ peripheral: XTalkSimulatedPeripheral, firstWithin: Bool = true) {
        stopAdvertising(peripheral)
        guard scanning, !isShutDown, advertises(peripheral) else { return }
        let interval = max(peripheral.device.advertisingInterval, .milliseconds(20))
        let delay: Duration
        if firstWithin {
            let millis = Int(interval / .milliseconds(1))
            delay = .milliseconds(random.int(in: 0...max(0, millis)))
        } else {
            delay = interval
        }
        advertisingTimers[peripheral.id] = scheduler.schedule(after: delay) { [weak self, weak peripheral] in
            guard let self, let peripheral else { return }
            self.advertisingTimers[peripheral.id] = nil
            self.advertise(peripheral)
        }
    }

    private func advertise(_ peripheral: XTalkSimulatedPeripheral) {
        guard scanning, advertises(peripheral) else { return }
        let device = peripheral.device
        let jitter = max(0, device.rssiJitter)
        let rssi = device.rssi + random.int(in: -jitter...jitter)
        var services: [BleUUID] = []
        if device.advertisesPassthroughService { services.append(device.gatt.passthroughServiceUUID) }
        let advertisement = BleAdvertisement(
            localName: device.name, manufacturerData: Self.manufacturerData(address: device.address),
            serviceUUIDs: services)
        central.post(.discovered(peripheral: peripheral.id, advertisement: advertisement, rssi: rssi))
        resumeAdvertising(peripheral, firstWithin: false)
    }

    /// Devices connected to the phone (by the app or anyone else) that have
    /// all of `services` (`retrieveConnectedPeripherals(withServices:)`).
    func systemConnected(withServices services: [BleUUID]) -> [XTalkSimulatedPeripheral] {
        peripherals.filter { peripheral in
            guard peripheral.isConnectedToSystem || peripheral.isConnected else { return false }
            let offered = SimulatedGattDatabase(peripheral.device.gatt).services.map(\.uuid)
            return services.allSatisfy(offered.contains)
        }
    }

    /// A device advertises while nothing is connected to it (an app or the
    /// system), and the running scan hears it when it matches the filter.
    private func advertises(_ peripheral: XTalkSimulatedPeripheral) -> Bool {
        guard case .disconnected = peripheral.connectionState, !peripheral.isConnectedToSystem else { return false }
        return matchesFilter(peripheral)
    }

    private func matchesFilter(_ peripheral: XTalkSimulatedPeripheral) -> Bool {
        guard !scanFilter.isEmpty else { return true }
        return peripheral.device.advertisesPassthroughService
            && scanFilter.contains(peripheral.device.gatt.passthroughServiceUUID)
    }

    /// Company id 0xFFFF (little-endian), version 0x01, then the 6-byte address,
    /// most significant byte first (PROTOCOL.md section 1). Nil without a valid address.
    static func manufacturerData(address: String?) -> Data? {
        guard let address else { return nil }
        let parts = address.split(separator: ":")
        guard parts.count == 6 else { return nil }
        var bytes: [UInt8] = [0xFF, 0xFF, 0x01]
        for part in parts {
            guard part.count == 2, let byte = UInt8(part, radix: 16) else { return nil }
            bytes.append(byte)
        }
        return Data(bytes)
    }

    private func randomUUIDBytes() -> uuid_t {
        let b = random.bytes(16)
        // Version 4, RFC 4122 variant: a well-formed random UUID from the seeded generator.
        return (
            b[0], b[1], b[2], b[3], b[4], b[5], (b[6] & 0x0F) | 0x40, b[7],
            (b[8] & 0x3F) | 0x80, b[9], b[10], b[11], b[12], b[13], b[14], b[15]
        )
    }
}
