import Foundation
import XTalkBleSdk

/// The device family the bridge talks to: the seam's passthrough (a
/// service, a characteristic the host writes and one that notifies).
/// OneKey's profile by default.
package typealias BridgeProfile = GattProfile.Passthrough

extension GattProfile.Passthrough {
    /// OneKey's BLE profile (hardware-js-sdk, docs/protocol/transports/ble.md).
    package static let oneKey = GattProfile.Passthrough(
        service: BleUUID("00000001-0000-1000-8000-00805F9B34FB"),
        write: BleUUID("00000002-0000-1000-8000-00805F9B34FB"),
        notify: BleUUID("00000003-0000-1000-8000-00805F9B34FB"))
}

/// A request's number, unique among the requests in flight (the host's).
package typealias BridgeRequestID = Int

/// The value a request resolves with.
package enum BridgeValue: Sendable, Hashable {
    case null
    case string(String)
    case number(Int)
    /// `enumerate()`'s answer: `{id, name, commType: "ble"}` each.
    case devices([BridgeDeviceInfo])
}

package struct BridgeDeviceInfo: Sendable, Hashable {
    package let id: String
    package let name: String
    package init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// The timers a device's machine asks for.
package enum BridgeTimer: Sendable, Hashable {
    /// The whole connect: the link and discovery (`connectTimeout`), then the
    /// subscription and settle (`subscriptionTimeout`).
    case connect
    /// After the subscription is confirmed, before the capacity is read (again).
    case settle
    /// No ready callback came while writes without response wait: look again.
    case writeRetry
}

/// One device's low-level transport, sans I/O: the connect sequence
/// (connecting → discovering → subscribing → settling → ready), the queue of
/// raw notification chunks and the parked receive, the send FIFO, and the
/// connection generation that keeps every reply and chunk to its session.
/// Events in (requests, backend events, timers), actions out; no clock, no
/// Bluetooth. The driver (`BleBridge`) performs the actions and supplies the
/// facts only the backend knows (write capacity, flow control) as arguments.
package struct BridgeDeviceMachine: Sendable {
    package enum Phase: Sendable, Hashable {
        case idle, connecting, discovering, subscribing, settling, ready
    }

    package enum Action: Sendable, Hashable {
        case connect
        case cancelLink
        case discoverServices([BleUUID])
        case discoverCharacteristics([BleUUID], service: BleUUID)
        case subscribe(BleCharacteristicRef)
        case write(Data, BleWriteType)
        case resolve(BridgeRequestID, BridgeValue)
        case reject(BridgeRequestID, BridgeError)
        case startTimer(BridgeTimer, after: Duration, generation: UInt64)
        case cancelTimer(BridgeTimer)
    }

    package struct Settings: Sendable, Hashable {
        /// From `connect` to the subscription (the link and discovery).
        package var connectTimeout: Duration = .seconds(15)
        /// From the subscription to ready. The first subscription of a
        /// device that pairs waits for the user in iOS's pairing dialog, and
        /// Bluetooth's pairing procedure gives up after 30 s by itself
        /// (Core Specification, SMP timeout): this bound never cuts a
        /// pairing short, and still ends a subscription that never answers.
        package var subscriptionTimeout: Duration = .seconds(35)
        /// The wait after the subscription before the capacity is read, and
        /// between re-reads while it is still 20 (MTU 23: OneKey's transport
        /// sees that briefly after a bootloader reconnect).
        package var settleDelay: Duration = .milliseconds(150)
        package var capacityRereads = 2
        /// Unread notification bytes at most; beyond, the link is ended (never a silent drop).
        package var receiveQueueByteLimit = 256 * 1_024
        /// How long writes without response wait for a ready callback before looking again.
        package var writeRetryInterval: Duration = .milliseconds(50)
        /// Bugs switched on, for the chaos checker's self-test (never in production).
        package var injectedFaults = InjectedFaults()
        package init() {}
    }

    /// Known bugs the chaos checker must flag, each switched on alone in its self-test.
    package struct InjectedFaults: Sendable, Hashable {
        /// A session's end keeps the queued chunks (a reconnect would receive stale data).
        package var keepsChunksAcrossSessions = false
        /// A new receive replaces a parked one without answering it (the old promise hangs).
        package var dropsReplacedReceive = false
        /// A receive takes the newest queued chunk instead of the oldest.
        package var takesNewestChunk = false
        package init() {}

        /// Each one alone, by name.
        package static let each: [(name: String, faults: InjectedFaults)] = [
            (
                "chunks kept across sessions",
                {
                    var f = InjectedFaults()
                    f.keepsChunksAcrossSessions = true
                    return f
                }()
            ),
            (
                "replaced receive never answered",
                {
                    var f = InjectedFaults()
                    f.dropsReplacedReceive = true
                    return f
                }()
            ),
            (
                "newest chunk first",
                {
                    var f = InjectedFaults()
                    f.takesNewestChunk = true
                    return f
                }()
            ),
        ]
    }

    private struct PendingSend: Sendable {
        let id: BridgeRequestID
        var chunks: [Data]
        var next = 0
        let type: BleWriteType
    }

    package let profile: BridgeProfile
    package let settings: Settings
    package private(set) var phase = Phase.idle
    package private(set) var generation: UInt64 = 0
    private var connectWaiters: [BridgeRequestID] = []
    private var rereads = 0
    private var writeProperties: BleCharacteristicProperties = []
    private var chunks: [Data] = []
    private var chunkHead = 0
    package private(set) var queuedBytes = 0
    private var parkedReceive: BridgeRequestID?
    private var sends: [PendingSend] = []
    private var awaitingWriteResponse = false
    private var retryArmed = false

    /// `generation`: where a machine that replaces a forgotten one starts,
    /// so that nothing stamped by an earlier machine of the device matches it.
    package init(profile: BridgeProfile = .oneKey, settings: Settings = Settings(), generation: UInt64 = 0) {
        self.profile = profile
        self.settings = settings
        self.generation = generation
    }

    /// A `receive` waits for the device's next chunk.
    package var hasParkedReceive: Bool { parkedReceive != nil }

    /// Idle, with nothing queued or waiting: the driver may forget the machine.
    package var holdsNothing: Bool {
        phase == .idle && chunks.count == chunkHead && parkedReceive == nil && sends.isEmpty
            && connectWaiters.isEmpty
    }

    package var isReady: Bool { phase == .ready }
    /// Whether `pump` may have a write to make (a send is queued and no
    /// write with response is outstanding): the driver asks before pumping.
    package var hasWriteToMake: Bool { phase == .ready && !sends.isEmpty && !awaitingWriteResponse }
    /// Chunks waiting for a receive.
    package var queuedChunkCount: Int { chunks.count - chunkHead }

    // MARK: Requests

    /// `connect(uuid)`. A ready device starts a new session: the parked
    /// receive is rejected and the queued chunks go; the link is kept.
    package mutating func connect(_ id: BridgeRequestID) -> [Action] {
        switch phase {
        case .ready:
            generation += 1
            var actions = rejectReceive(BridgeError(.deviceDisconnected, "a new connect started a new session"))
            dropChunks()
            if retryArmed {
                // The sends stay with the link, and so does their look-again
                // timer, now of this session (the old one's firing is ignored).
                actions.append(.startTimer(.writeRetry, after: settings.writeRetryInterval, generation: generation))
            }
            actions.append(.resolve(id, .null))
            return actions
        case .idle:
            generation += 1
            phase = .connecting
            rereads = 0
            connectWaiters = [id]
            return [.connect, .startTimer(.connect, after: settings.connectTimeout, generation: generation)]
        case .connecting, .discovering, .subscribing, .settling:
            connectWaiters.append(id)  // one connect under way: they resolve together
            return []
        }
    }

    /// `disconnect(uuid)`: everything pending is rejected, the link cancelled.
    package mutating func disconnect(_ id: BridgeRequestID) -> [Action] {
        guard phase != .idle else { return [.resolve(id, .null)] }
        var actions = end(BridgeError(.deviceDisconnected, "disconnected by the host"))
        actions.insert(.cancelLink, at: 0)
        actions.append(.resolve(id, .null))
        return actions
    }

    /// `receive(uuid)`: the oldest chunk, else parked until one arrives. A
    /// receive parked before is rejected: the transport abandoned it (its
    /// own timeout), and no chunk may go to an abandoned promise.
    package mutating func receive(_ id: BridgeRequestID) -> [Action] {
        guard phase == .ready else {
            return [.reject(id, BridgeError(.deviceDisconnected, "the device is not connected"))]
        }
        if chunkHead < chunks.count {
            return [.resolve(id, .string(BridgeHex.encode(takeChunk())))]
        }
        var actions: [Action] = []
        if let old = parkedReceive, !settings.injectedFaults.dropsReplacedReceive {
            actions.append(.reject(old, BridgeError(.timeout, "a newer receive replaced this one")))
        }
        parkedReceive = id
        return actions
    }

    /// `send(uuid, hex, options)`: checked whole before any byte is written,
    /// then cut into writes of at most `capacity` bytes (never padded) and
    /// queued behind the device's earlier sends. Call `pump` after.
    package mutating func send(
        _ id: BridgeRequestID, hex: String, withoutResponse: Bool?, capacity: Int
    ) -> [Action] {
        let data: Data
        switch BridgeHex.decode(hex) {
        case .failure(let error): return [.reject(id, error)]
        case .success(let bytes): data = bytes
        }
        guard phase == .ready else {
            return [.reject(id, BridgeError(.deviceDisconnected, "the device is not connected"))]
        }
        let type: BleWriteType = withoutResponse ?? true ? .withoutResponse : .withResponse
        let needed: BleCharacteristicProperties = type == .withoutResponse ? .writeWithoutResponse : .write
        guard writeProperties.contains(needed) else {
            let mode = type == .withoutResponse ? "without response" : "with response"
            return [
                .reject(id, BridgeError(.writeCharacteristic, "the write characteristic cannot be written \(mode)"))
            ]
        }
        let size = max(1, capacity)
        var pieces: [Data] = []
        var offset = data.startIndex
        while offset < data.endIndex {
            let end = data.index(offset, offsetBy: size, limitedBy: data.endIndex) ?? data.endIndex
            pieces.append(data[offset..<end])
            offset = end
        }
        sends.append(PendingSend(id: id, chunks: pieces, type: type))
        return []
    }

    /// The next write, if one may go now: one write per call (the driver asks
    /// again while writes without response go, re-reading flow control), and
    /// the sends that thereby completed. A send resolves once its last byte
    /// was handed to the system (not proof of the device's completion).
    package mutating func pump(canSendWithoutResponse: Bool) -> [Action] {
        guard phase == .ready, let head = sends.first, !awaitingWriteResponse else { return [] }
        if head.type == .withoutResponse, !canSendWithoutResponse {
            guard !retryArmed else { return [] }
            retryArmed = true  // the ready callback may never come: look again
            return [.startTimer(.writeRetry, after: settings.writeRetryInterval, generation: generation)]
        }
        var actions: [Action] = []
        actions.reserveCapacity(2)  // the write, and the send it may complete
        actions.append(.write(head.chunks[head.next], head.type))
        sends[0].next += 1
        if head.type == .withResponse {
            awaitingWriteResponse = true
        } else if sends[0].next == head.chunks.count {
            actions.append(.resolve(head.id, .null))
            sends.removeFirst()
        }
        return actions
    }

    // MARK: Backend events

    package mutating func linkUp() -> [Action] {
        guard phase == .connecting else { return [] }
        phase = .discovering
        return [.discoverServices([profile.service])]
    }

    package mutating func servicesDiscovered(_ services: [BleUUID], error: BleBackendError?) -> [Action] {
        guard phase == .discovering else { return [] }
        if let error { return fail(BridgeError(.serviceNotFound, "discovering services failed: \(error.message)")) }
        guard services.contains(profile.service) else {
            return fail(BridgeError(.serviceNotFound, "the device has no service \(profile.service)"))
        }
        return [.discoverCharacteristics([profile.write, profile.notify], service: profile.service)]
    }

    package mutating func characteristicsDiscovered(
        _ characteristics: [BleCharacteristicInfo], service: BleUUID, error: BleBackendError?
    ) -> [Action] {
        guard phase == .discovering, service == profile.service else { return [] }
        if let error {
            return fail(BridgeError(.characteristicNotFound, "discovering characteristics failed: \(error.message)"))
        }
        guard let write = characteristics.first(where: { $0.uuid == profile.write }) else {
            return fail(BridgeError(.characteristicNotFound, "the device has no write characteristic \(profile.write)"))
        }
        guard let notify = characteristics.first(where: { $0.uuid == profile.notify }) else {
            return fail(
                BridgeError(.characteristicNotFound, "the device has no notify characteristic \(profile.notify)"))
        }
        guard !write.properties.isDisjoint(with: [.write, .writeWithoutResponse]) else {
            return fail(BridgeError(.characteristicNotFound, "\(profile.write) cannot be written"))
        }
        guard !notify.properties.isDisjoint(with: [.notify, .indicate]) else {
            return fail(BridgeError(.characteristicNotify, "\(profile.notify) does not notify"))
        }
        writeProperties = write.properties
        phase = .subscribing
        return [
            .startTimer(.connect, after: settings.subscriptionTimeout, generation: generation),
            .subscribe(profile.notifyRef),
        ]
    }

    package mutating func notificationStateUpdated(
        _ characteristic: BleCharacteristicRef, isNotifying: Bool, error: BleBackendError?
    ) -> [Action] {
        guard phase == .subscribing, characteristic == profile.notifyRef else { return [] }
        if let error {
            switch error.code {
            case .insufficientEncryption, .insufficientAuthentication:
                // the pairing the protected characteristic needs failed or was refused
                return fail(BridgeError(.deviceNotBonded, "pairing failed: \(error.message)"))
            case .peerRemovedPairing:
                return fail(Self.peerRemovedPairing(error))
            default:
                return fail(BridgeError(.characteristicNotify, "subscribing failed: \(error.message)"))
            }
        }
        guard isNotifying else {
            return fail(BridgeError(.notifyChangeFailure, "the device did not turn notifications on"))
        }
        phase = .settling
        return [.startTimer(.settle, after: settings.settleDelay, generation: generation)]
    }

    /// The settle timer fired; `capacity` is the write capacity read now.
    package mutating func settled(capacity: Int, generation fired: UInt64) -> [Action] {
        guard phase == .settling, fired == generation else { return [] }
        if capacity <= 20, rereads < settings.capacityRereads {
            rereads += 1
            return [.startTimer(.settle, after: settings.settleDelay, generation: generation)]
        }
        phase = .ready
        let waiters = connectWaiters
        connectWaiters = []
        return [.cancelTimer(.connect)] + waiters.map { .resolve($0, .null) }
    }

    package mutating func connectTimedOut(generation fired: UInt64) -> [Action] {
        guard fired == generation, [.connecting, .discovering, .subscribing, .settling].contains(phase) else {
            return []
        }
        guard phase == .subscribing || phase == .settling else {
            return fail(BridgeError(.timeout, "the connection was not ready in time"))
        }
        return fail(
            BridgeError(
                .timeout,
                "the device did not confirm the subscription within \(settings.subscriptionTimeout)"
                    + " (was the pairing dialog left open?)"))
    }

    package mutating func writeRetryFired(generation fired: UInt64) -> [Action] {
        guard fired == generation else { return [] }
        retryArmed = false
        return []
    }

    package mutating func readyToSend() -> [Action] {
        guard retryArmed else { return [] }
        retryArmed = false
        return [.cancelTimer(.writeRetry)]
    }

    package mutating func writeCompleted(error: BleBackendError?) -> [Action] {
        guard phase == .ready, awaitingWriteResponse, let head = sends.first else { return [] }
        awaitingWriteResponse = false
        if let error {
            sends.removeFirst()
            return [.reject(head.id, BridgeError(.writeCharacteristic, "the write failed: \(error.message)"))]
        }
        guard head.next == head.chunks.count else { return [] }
        sends.removeFirst()
        return [.resolve(head.id, .null)]
    }

    /// A notification of the notify characteristic: to the parked receive,
    /// else queued (bounded: past the limit the link is ended, never a silent drop).
    package mutating func notified(_ characteristic: BleCharacteristicRef, value: Data) -> [Action] {
        guard phase == .settling || phase == .ready, characteristic == profile.notifyRef else { return [] }
        if phase == .ready, let parked = parkedReceive {
            parkedReceive = nil
            return [.resolve(parked, .string(BridgeHex.encode(value)))]
        }
        chunks.append(value)
        queuedBytes += value.count
        guard queuedBytes > settings.receiveQueueByteLimit else { return [] }
        var actions = end(
            BridgeError(
                .deviceDisconnected,
                "more than \(settings.receiveQueueByteLimit) notification bytes were not received: the link was ended"))
        actions.insert(.cancelLink, at: 0)
        return actions
    }

    /// The link failed to come up (`failedToConnect`).
    package mutating func connectFailed(_ error: BleBackendError?) -> [Action] {
        guard phase == .connecting else { return [] }
        if error?.code == .peerRemovedPairing { return fail(Self.peerRemovedPairing(error)) }
        return fail(BridgeError(.connected, "connecting failed: \(error?.message ?? "the device did not connect")"))
    }

    /// A lost link's error in the contract's code: 719 when the device forgot
    /// its bond with this phone (iOS ends the link with that error), else 720.
    package static func linkLoss(_ error: BleBackendError?) -> BridgeError {
        if error?.code == .peerRemovedPairing { return peerRemovedPairing(error) }
        return BridgeError(.deviceDisconnected, "the link was lost: \(error?.message ?? "disconnected")")
    }

    private static func peerRemovedPairing(_ error: BleBackendError?) -> BridgeError {
        BridgeError(
            .peerRemovedPairing,
            "the device removed its pairing with this phone (\(error?.message ?? "peer removed pairing")): "
                + "forget it in the system's Bluetooth settings, then pair again")
    }

    /// The link was lost, or Bluetooth went away (`error` says which, in the contract's code).
    package mutating func linkEnded(_ error: BridgeError) -> [Action] {
        guard phase != .idle else { return [] }
        return end(error)
    }

    // MARK: Helpers

    /// A connect step failed: the waiters are rejected, the link cancelled.
    private mutating func fail(_ error: BridgeError) -> [Action] {
        [.cancelLink] + end(error)
    }

    /// The session ends: a new generation, every pending request rejected once, nothing queued kept.
    private mutating func end(_ error: BridgeError) -> [Action] {
        generation += 1
        phase = .idle
        var actions: [Action] = [.cancelTimer(.connect), .cancelTimer(.settle), .cancelTimer(.writeRetry)]
        actions += connectWaiters.map { .reject($0, error) }
        connectWaiters = []
        actions += rejectReceive(error)
        actions += sends.map { .reject($0.id, error) }
        sends = []
        awaitingWriteResponse = false
        retryArmed = false
        writeProperties = []
        dropChunks()
        return actions
    }

    private mutating func rejectReceive(_ error: BridgeError) -> [Action] {
        guard let parked = parkedReceive else { return [] }
        parkedReceive = nil
        return [.reject(parked, error)]
    }

    private mutating func takeChunk() -> Data {
        if settings.injectedFaults.takesNewestChunk, chunks.count - chunkHead > 1 {
            let newest = chunks.removeLast()
            queuedBytes -= newest.count
            return newest
        }
        let chunk = chunks[chunkHead]
        chunkHead += 1
        queuedBytes -= chunk.count
        if chunkHead == chunks.count {
            chunks.removeAll(keepingCapacity: true)
            chunkHead = 0
        } else if chunkHead > 1_024 {
            chunks.removeFirst(chunkHead)
            chunkHead = 0
        }
        return chunk
    }

    private mutating func dropChunks() {
        guard !settings.injectedFaults.keepsChunksAcrossSessions else { return }
        chunks.removeAll()
        chunkHead = 0
        queuedBytes = 0
    }
}
