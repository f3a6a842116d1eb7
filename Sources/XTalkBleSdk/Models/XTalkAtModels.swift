import Foundation

/// The text encoding of AT lines on the passthrough (PROTOCOL.md section 4).
///
/// The device's firmware uses exactly one encoding in both directions; the
/// client's default is `.xor`.
public enum XTalkAtEncoding: String, Sendable, Hashable, CaseIterable {
    /// ASCII bytes as they are.
    case plain
    /// Every byte, terminator included, XOR-ed with 0x5A.
    case xor
}

/// How `runAtCommand` decides that a response is complete.
public enum XTalkAtResponseMode: Sendable, Hashable {
    /// Completes by command policy (PROTOCOL.md section 6): at the final result
    /// code (`OK`, `ERROR`, `+CME ERROR:…`, `+ERR:…`), except `AT+RST`, which
    /// completes at the device's `+READY` after its `OK`; throws `.timeout`
    /// when that does not arrive in time.
    case automatic
    /// Collects every non-URC line until the timeout and returns them
    /// (possibly none) without throwing `.timeout`.
    case collectUntilTimeout
}

/// Radio metadata of a received (`+DI:`) or failed (`+CRCERR:`) frame.
///
/// Every field is optional: a key the device did not report stays nil.
public struct XTalkDiMeta: Sendable, Hashable {
    /// The radio's frame counter (`cnt`).
    public var diCnt: Int?
    /// The payload's length in bytes (`len`).
    public var len: Int?
    /// The time slot the frame arrived in (`slot`).
    public var slot: Int?
    /// Signal-to-noise ratio of the frame, in dB (`snr`; may be negative).
    public var snr: Int?
    /// Received signal strength of the frame, in dBm (`rssi`).
    public var rssi: Int?
    /// Signal-to-noise ratio measured by this radio (`lsnr`).
    public var localSnr: Int?
    /// Signal strength measured by this radio, in dBm (`lrssi`).
    public var localRssi: Int?
    /// Signal-to-noise ratio the sending radio reported (`rsnr`).
    public var remoteSnr: Int?
    /// Signal strength the sending radio reported, in dBm (`rrssi`).
    public var remoteRssi: Int?
    /// The sender's transmit power, in dBm (`txp`).
    public var txp: Int?

    /// Metadata with these fields; every argument defaults to nil (not reported).
    public init(
        diCnt: Int? = nil,
        len: Int? = nil,
        slot: Int? = nil,
        snr: Int? = nil,
        rssi: Int? = nil,
        localSnr: Int? = nil,
        localRssi: Int? = nil,
        remoteSnr: Int? = nil,
        remoteRssi: Int? = nil,
        txp: Int? = nil
    ) {
        self.diCnt = diCnt
        self.len = len
        self.slot = slot
        self.snr = snr
        self.rssi = rssi
        self.localSnr = localSnr
        self.localRssi = localRssi
        self.remoteSnr = remoteSnr
        self.remoteRssi = remoteRssi
        self.txp = txp
    }
}

/// Everything the client reports, in the order it happened.
public enum XTalkBleEvent: Sendable, Hashable {
    /// The scan/connection state changed.
    case connectionStateChanged(XTalkConnectionState)
    /// A decoded, printable AT line (every line, URCs and responses alike).
    case atLine(String)
    /// The radio finished a transmission (`+SENDFIN:`).
    case sendFinished
    /// A radio frame was received (`+DI:`): its payload and metadata.
    case diPayload(Data, XTalkDiMeta)
    /// A radio frame failed its CRC (`+CRCERR:`): its metadata and the raw line.
    case crcError(XTalkDiMeta, String)
    /// Bytes that are not a printable AT line (still encoded, as received).
    case passthroughRaw(Data)
}
