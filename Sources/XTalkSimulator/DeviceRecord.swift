import Foundation

/// What one write of the firmware to its UART is.
package struct XTalkDeviceOutput: Equatable, Sendable {
    package enum Kind: Equatable, Sendable {
        /// The answer (echo, when on, then the response lines) to command
        /// number `command` of the firmware's lifetime; nil for an over-long line.
        case answer(command: Int?)
        /// `+SENDFIN:` of the frame that command number `command` queued.
        case sendFinished(command: Int)
        /// `+READY` after the reset that command number `command` asked for.
        case ready(command: Int)
        case radioFrame
        case crcError
        /// A line a test wrote with `emitLine`.
        case line
        /// Bytes a test wrote with `emitRawBytes`.
        case raw
        /// A line of line noise.
        case noise
    }

    package let kind: Kind
    /// The text lines written, decoded (the echo first, when there is one); empty for raw bytes and noise.
    package let lines: [String]
}

/// The device's own account of a session: every command line it processed
/// and every write to its UART, when, on which connection, and when (and
/// whether) those bytes reached the host as notifications. What a checker
/// needs to tell the SDK's mistakes from the device's own delays and losses.
/// Keeps the newest 10 000 to 20 000 entries of each list.
package struct XTalkDeviceRecord: Sendable {
    package struct Command: Sendable {
        /// Counted from 0 over the firmware's lifetime.
        package let number: Int
        /// The line as the device decoded it (in its own encoding).
        package let text: String
        package let at: Duration
        /// The connection it arrived on (`XTalkSimulatedPeripheral.connections` then).
        package let connection: Int
        /// The inter-character timeout discarded a partial line since the
        /// previous line ended: this one may be the tail of a line whose head
        /// was lost (the host paused in the middle of it).
        package var followsDiscardedPartialLine = false
    }

    package struct Emission: Sendable {
        /// Counted from 0 over the device's lifetime.
        package let number: Int
        package let output: XTalkDeviceOutput
        /// The bytes as the UART wrote them (encoded).
        package let bytes: [UInt8]
        package let at: Duration
        /// The connection whose notification queue took them; nil when none was up.
        package let connection: Int?
        /// How many of the bytes entered the notification queue (fewer when
        /// the host was not subscribed or the queue overflowed).
        package let queued: Int
        /// When the first and the last queued byte reached the host; nil until
        /// then, and for good when the connection ended first.
        package internal(set) var firstDeliveredAt: Duration?
        package internal(set) var deliveredAt: Duration?
        /// The queued bytes' place in the connection's notification stream.
        let streamStart: Int

        /// Every byte was queued and reached the host.
        package var deliveredWhole: Bool { queued == bytes.count && deliveredAt != nil }
    }

    /// A write of the host to the passthrough's TX characteristic, as the
    /// central handed it to the link (accepted or not).
    package struct HostWrite: Sendable {
        package let bytes: [UInt8]
        package let at: Duration
        package let connection: Int
    }

    /// Each list keeps the newest `limit` to `2 * limit` entries (as the firmware's logs).
    static let limit = 10_000

    /// (Kept by the firmware, which reads the lines.)
    package internal(set) var commands: [Command] = []
    package private(set) var emissions: [Emission] = []
    package private(set) var hostWrites: [HostWrite] = []
    /// When each connection (numbered from 1) was established.
    package private(set) var connectedAt: [Int: Duration] = [:]
    /// Connections whose link was lost (out of range), from when the device
    /// was gone to when the central ended its side (nil while it still has
    /// not noticed): writes made meanwhile went nowhere.
    package private(set) var unreachable: [Int: (from: Duration, to: Duration?)] = [:]
    /// When a lost ready callback left `canSendWriteWithoutResponse` false
    /// (the `lostReadyCallbackKeepsFlagFalse` fault), until the host wrote anyway.
    package private(set) var readyFlagStuck: [(from: Duration, to: Duration?)] = []
    /// The number of `emissions[0]`.
    private var firstEmission = 0
    /// Emissions (by number) whose queued bytes have not all reached the host.
    private var undelivered: [Int] = []

    mutating func recordHostWrite(_ bytes: [UInt8], at time: Duration, connection: Int) {
        hostWrites.append(HostWrite(bytes: bytes, at: time, connection: connection))
        if hostWrites.count > 2 * Self.limit { hostWrites.removeFirst(hostWrites.count - Self.limit) }
    }

    mutating func recordConnection(_ number: Int, at time: Duration) {
        connectedAt[number] = time
    }

    mutating func recordLinkLost(_ connection: Int, at time: Duration) {
        unreachable[connection] = (time, nil)
    }

    mutating func recordCentralEnded(_ connection: Int, at time: Duration) {
        unreachable[connection]?.to = time
    }

    mutating func recordReadyFlagStuck(at time: Duration) {
        readyFlagStuck.append((time, nil))
        if readyFlagStuck.count > 2 * Self.limit { readyFlagStuck.removeFirst(readyFlagStuck.count - Self.limit) }
    }

    mutating func recordReadyFlagFreed(at time: Duration) {
        if let last = readyFlagStuck.indices.last, readyFlagStuck[last].to == nil { readyFlagStuck[last].to = time }
    }

    /// Whether the ready flag was stuck false at any moment between `start` and `end`.
    package func readyFlagWasStuck(from start: Duration, to end: Duration) -> Bool {
        readyFlagStuck.contains { Self.overlaps($0, start, end) }
    }

    /// Whether the device was unreachable while the central still had the
    /// link at any moment between `start` and `end`.
    package func wasUnreachable(from start: Duration, to end: Duration) -> Bool {
        unreachable.values.contains { Self.overlaps($0, start, end) }
    }

    /// Whether an interval (open while `to` is nil) and `start...end` share a moment.
    private static func overlaps(_ interval: (from: Duration, to: Duration?), _ start: Duration, _ end: Duration)
        -> Bool
    {
        interval.from <= end && (interval.to ?? end) >= start
    }

    mutating func recordEmission(
        _ output: XTalkDeviceOutput, bytes: [UInt8], at time: Duration,
        connection: Int?, queued: Int, streamStart: Int
    ) {
        let number = firstEmission + emissions.count
        emissions.append(
            Emission(
                number: number, output: output, bytes: bytes, at: time, connection: connection,
                queued: queued, streamStart: streamStart))
        if connection != nil && queued > 0 { undelivered.append(number) }
        if emissions.count > 2 * Self.limit {
            let drop = emissions.count - Self.limit
            emissions.removeFirst(drop)
            firstEmission += drop
            undelivered.removeAll { $0 < firstEmission }
        }
    }

    /// The host received the connection's notification stream up to `delivered` bytes.
    mutating func notified(connection: Int, upTo delivered: Int, at time: Duration) {
        // In emission order: an ended connection's outputs (which never
        // arrive) come first, then this connection's, in stream order, so the
        // walk stops at the first one not yet delivered whole.
        var done = 0
        for number in undelivered {
            let index = number - firstEmission
            if emissions[index].connection == connection {
                if emissions[index].firstDeliveredAt == nil, delivered > emissions[index].streamStart {
                    emissions[index].firstDeliveredAt = time
                }
                guard delivered >= emissions[index].streamStart + emissions[index].queued else { break }
                emissions[index].deliveredAt = time
            }
            done += 1
        }
        undelivered.removeFirst(done)
    }

    /// The device's notification queue overflowed inside the output written
    /// just before `emission` on the same connection: that output lost its
    /// end, and what the host reads joins the two.
    package func followsACutOutput(_ emission: Emission) -> Bool {
        guard
            let before = emissions.last(where: {
                $0.connection == emission.connection && $0.number < emission.number && $0.queued > 0
            })
        else { return false }
        return before.queued < before.bytes.count
    }

    /// The emission with this number, if still kept.
    package func emission(_ number: Int) -> Emission? {
        let index = number - firstEmission
        return emissions.indices.contains(index) ? emissions[index] : nil
    }
}
