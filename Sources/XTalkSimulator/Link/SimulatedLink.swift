import Foundation
import XTalkBleSdk

/// One BLE connection between the simulated central and a simulated device:
/// MTU, write-without-response credits, the uplink (host → device) and
/// downlink (device → host) queues, and connection events.
///
/// Data moves only at connection events, every `connectionInterval`, up to
/// `packetsPerConnectionEvent` packets per direction, which is what bounds
/// the throughput of a real link. An event is scheduled only while something
/// waits to move, so an idle link leaves no timer behind. A new instance is
/// made per connection: a closure that fires for an older instance finds it
/// is no longer its peripheral's link and does nothing.
@MainActor
final class SimulatedLink {
    /// A host write in flight to the device.
    private struct UplinkPacket {
        var bytes: [UInt8]
        let withoutResponse: Bool
        /// With response: set on the last packet of the write, which is acknowledged.
        let acknowledges: BleCharacteristicRef?
    }

    private unowned let peripheral: XTalkSimulatedPeripheral
    private let scheduler: any TimerScheduling
    private let random: SimulatorRandom
    let connectedAt: Duration

    private(set) var mtu = 23
    private(set) var credits: Int
    private(set) var subscribed = false
    private var uplink: [UplinkPacket] = []
    private var downlink: [UInt8] = []
    /// Stream positions no notification crosses: the edges of packets an
    /// echo device sends back (its notifications are never merged).
    private var packetEdges: [Int] = []
    private var eventTimer: TimerToken?
    /// Timers other than the connection event, with their deadlines (pruned as they pass).
    private var otherTimers: [(token: TimerToken, deadline: Duration)] = []
    private var lastEvent: Duration?

    private(set) var hostBytesDelivered = 0
    /// When host bytes first and last reached the device (benchmarks: link utilisation).
    private(set) var hostDeliveryWindow: (first: Duration, last: Duration)?
    private(set) var deviceBytesDelivered = 0
    /// Device bytes not yet notified.
    var deviceBytesQueued: Int { downlink.count }
    /// Device bytes that entered the notification queue on this connection.
    private(set) var deviceBytesEnqueued = 0
    var disconnectAfterHostBytes: (count: Int, loss: XTalkSimulatedLinkLoss)?
    var disconnectAfterDeviceBytes: (count: Int, loss: XTalkSimulatedLinkLoss)?

    init(peripheral: XTalkSimulatedPeripheral, scheduler: any TimerScheduling, random: SimulatorRandom) {
        self.peripheral = peripheral
        self.scheduler = scheduler
        self.random = random
        connectedAt = scheduler.elapsed
        credits = max(1, peripheral.device.link.writeWithoutResponseCredits)
        roomSince = connectedAt
        let exchange = peripheral.device.link.mtuExchangeDelay
        after(exchange) { [unowned self] in
            self.mtu = min(517, max(23, self.peripheral.device.link.mtu))
        }
    }

    private var isCurrent: Bool { peripheral.link === self }
    private var configuration: XTalkSimulatedLink { peripheral.device.link }

    /// The ATT round trip of a GATT procedure: two connection events.
    var procedureDelay: Duration { configuration.connectionInterval * 2 }

    var canSendWriteWithoutResponse: Bool { credits > 0 && !readyFlagStuck }
    /// The `lostReadyCallbackKeepsFlagFalse` fault: the flag says no until the host writes.
    private var readyFlagStuck = false
    /// Since when `canSendWriteWithoutResponse` has said yes (nil while it says no).
    private(set) var roomSince: Duration?

    private func noteRoom() {
        if !canSendWriteWithoutResponse {
            roomSince = nil
        } else if roomSince == nil {
            roomSince = scheduler.elapsed
        }
    }

    /// The device is gone (out of range, no power) but the central has not
    /// noticed: nothing moves any more, writes are taken and go nowhere,
    /// nothing answers (until the central ends the link after the
    /// supervision timeout).
    private(set) var isLost = false

    func lose() {
        close()
        isLost = true
    }

    /// Cancels every timer: the connection is gone.
    func close() {
        if let eventTimer { scheduler.cancel(eventTimer) }
        eventTimer = nil
        for timer in otherTimers { scheduler.cancel(timer.token) }
        otherTimers.removeAll()
        uplink.removeAll()
        downlink.removeAll()
        packetEdges.removeAll()
    }

    /// Runs `action` after `delay` if this is still the peripheral's connection.
    func after(_ delay: Duration, _ action: @escaping @MainActor () -> Void) {
        guard !isLost else { return }
        let now = scheduler.elapsed
        otherTimers.removeAll { $0.deadline < now }
        let token = scheduler.schedule(after: delay) { [weak self] in
            guard let self, self.isCurrent else { return }
            action()
        }
        otherTimers.append((token, now + delay))
    }

    func setSubscribed(_ value: Bool) {
        subscribed = value
    }

    // MARK: Host → device

    enum WriteOutcome: Equatable {
        case accepted
        case dropped(String)
    }

    /// A write without response: accepted while there is a credit, otherwise
    /// dropped, as CoreBluetooth's delivery is best-effort then.
    func writeWithoutResponse(_ data: Data) -> WriteOutcome {
        let limit = BleAttribute.packetPayload(mtu: mtu)
        guard data.count <= limit else { return .dropped("longer than one packet carries (\(limit) bytes)") }
        guard credits > 0 else { return .dropped("no write-without-response credit left") }
        credits -= 1
        if readyFlagStuck, !configuration.stuckReadyFlagSurvivesWrites {
            readyFlagStuck = false
            peripheral.readyFlagStuck(false)
        }
        noteRoom()
        guard !isLost else { return .accepted }  // into the void: no connection event returns the credit
        uplink.append(UplinkPacket(bytes: Array(data), withoutResponse: true, acknowledges: nil))
        scheduleEvent()
        return .accepted
    }

    /// A write with response: long writes take one packet per MTU − 3 bytes
    /// and are acknowledged after the last one reaches the device.
    func writeWithResponse(_ data: Data, characteristic: BleCharacteristicRef) {
        guard !isLost else { return }  // never acknowledged
        let size = BleAttribute.packetPayload(mtu: mtu)
        var offset = 0
        let bytes = Array(data)
        repeat {
            let end = min(bytes.count, offset + size)
            let last = end == bytes.count
            uplink.append(
                UplinkPacket(
                    bytes: Array(bytes[offset..<end]), withoutResponse: false,
                    acknowledges: last ? characteristic : nil))
            offset = end
        } while offset < bytes.count
        scheduleEvent()
    }

    // MARK: Device → host

    /// Bytes the device's UART produced; they leave as notifications when the
    /// host is subscribed (a BLE module cannot notify otherwise). Returns how
    /// many were queued, and where they start in this connection's stream.
    /// `asPacket`: the bytes leave in notifications of their own (cut at the
    /// notification size, never merged with bytes before or after).
    @discardableResult
    func deviceOutput(_ bytes: [UInt8], asPacket: Bool = false) -> (queued: Int, streamStart: Int) {
        let start = deviceBytesEnqueued
        defer {
            if asPacket, deviceBytesEnqueued > start {
                if start > deviceBytesDelivered, packetEdges.last != start { packetEdges.append(start) }
                packetEdges.append(deviceBytesEnqueued)
            }
        }
        guard subscribed else {
            peripheral.droppedNotificationBytes += bytes.count
            return (0, start)
        }
        let room = max(0, configuration.notificationBufferLimit - downlink.count)
        let queued = min(room, bytes.count)
        if bytes.count > room {
            peripheral.droppedNotificationBytes += bytes.count - room
            downlink += bytes.prefix(room)
        } else {
            downlink += bytes
        }
        deviceBytesEnqueued += queued
        scheduleEvent()
        return (queued, start)
    }

    // MARK: Connection events

    private func scheduleEvent() {
        guard eventTimer == nil, !isLost else { return }
        let interval = configuration.connectionInterval
        let now = scheduler.elapsed
        var delay = Duration.zero
        if interval > .zero {
            // The next anchor point on the connection's event grid, never two events at once.
            let sinceConnect = now - connectedAt
            let periods = (sinceConnect / interval).rounded(.up)
            var next = connectedAt + interval * periods
            if let lastEvent, next <= lastEvent { next = lastEvent + interval }
            delay = next - now
        }
        eventTimer = scheduler.schedule(after: delay) { [weak self] in
            guard let self, self.isCurrent else { return }
            self.eventTimer = nil
            self.connectionEvent()
        }
    }

    private func connectionEvent() {
        lastEvent = scheduler.elapsed
        let budget = max(1, configuration.packetsPerConnectionEvent)
        var sent = 0
        while sent < budget, !uplink.isEmpty {
            var packet = uplink.removeFirst()
            sent += 1
            if let (limit, loss) = disconnectAfterHostBytes, hostBytesDelivered + packet.bytes.count >= limit {
                packet.bytes = Array(packet.bytes.prefix(limit - hostBytesDelivered))
                hostBytesDelivered = limit
                peripheral.firmwareReceive(packet.bytes)
                peripheral.loseLink(loss)
                return
            }
            hostBytesDelivered += packet.bytes.count
            let now = scheduler.elapsed
            hostDeliveryWindow = (hostDeliveryWindow?.first ?? now, now)
            peripheral.firmwareReceive(packet.bytes)
            if packet.withoutResponse {
                credits += 1
                if credits == 1, !losesReadyCallback() {
                    peripheral.post(.readyToSendWriteWithoutResponse(peripheral: peripheral.id))
                }
                noteRoom()
            }
            if let characteristic = packet.acknowledges {
                peripheral.post(.writeCompleted(peripheral: peripheral.id, characteristic: characteristic, error: nil))
            }
            guard isCurrent else { return }  // the firmware or a fault may have ended the link
        }
        var notified = 0
        while notified < budget, !downlink.isEmpty {
            var count = notificationSize(available: downlink.count)
            notified += 1
            var lose: XTalkSimulatedLinkLoss?
            if let (limit, loss) = disconnectAfterDeviceBytes, deviceBytesDelivered + count >= limit {
                count = limit - deviceBytesDelivered
                lose = loss
            }
            let chunk = Data(downlink.prefix(count))
            downlink.removeFirst(count)
            deviceBytesDelivered += count
            while let edge = packetEdges.first, edge <= deviceBytesDelivered { packetEdges.removeFirst() }
            peripheral.notified(upTo: deviceBytesDelivered)
            if !chunk.isEmpty {
                peripheral.post(
                    .valueUpdated(
                        peripheral: peripheral.id,
                        characteristic: BleCharacteristicRef(
                            service: peripheral.device.gatt.passthroughServiceUUID,
                            characteristic: peripheral.device.gatt.rxUUID),
                        value: chunk, error: nil))
            }
            if let lose {
                peripheral.loseLink(lose)
                return
            }
        }
        if !uplink.isEmpty || !downlink.isEmpty { scheduleEvent() }
    }

    /// The `lostReadyCallbacksOneIn` fault: this ready callback never arrives.
    private func losesReadyCallback() -> Bool {
        guard let oneIn = configuration.lostReadyCallbacksOneIn, oneIn > 0 else { return false }
        let lost = oneIn == 1 || random.int(in: 1...oneIn) == 1
        if lost {
            peripheral.lostReadyCallbacks += 1
            if configuration.lostReadyCallbackKeepsFlagFalse, !readyFlagStuck {
                readyFlagStuck = true
                peripheral.readyFlagStuck(true)
            }
        }
        return lost
    }

    private func notificationSize(available: Int) -> Int {
        let toEdge = packetEdges.first.map { $0 - deviceBytesDelivered } ?? available
        let maximum = max(1, min(available, BleAttribute.packetPayload(mtu: mtu), toEdge))
        switch configuration.notificationSplit {
        case .packed: return maximum
        case .singleBytes: return 1
        case .random: return random.int(in: 1...maximum)
        }
    }
}
