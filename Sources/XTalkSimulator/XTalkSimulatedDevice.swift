import Foundation
import XTalkBleSdk

/// One simulated xTalk device, described in one place: how it advertises,
/// its radio firmware, its BLE link and its GATT database.
///
/// The defaults describe a healthy, current device (xor firmware, challenge
/// required, canonical identifier, eFuse serial, MTU 247). Change a field to
/// get any firmware variant or fault; see `XTalkSimulatedFirmware`,
/// `XTalkSimulatedLink` and `XTalkSimulatedGatt`.
public struct XTalkSimulatedDevice: Sendable {
    /// The advertised local name.
    public var name: String
    /// The public address carried in manufacturer data (`AA:BB:CC:DD:EE:FF`),
    /// or nil for a device that advertises no manufacturer data.
    public var address: String?
    /// Mean received signal strength at the central, in dBm.
    public var rssi: Int
    /// Each advertisement's RSSI varies uniformly by up to this many dB.
    public var rssiJitter: Int
    /// Time between advertisements while not connected.
    public var advertisingInterval: Duration
    /// Whether advertisements carry the passthrough service UUID (the scan filter).
    public var advertisesPassthroughService: Bool
    /// The radio's firmware: what it answers, and its faults.
    public var firmware: XTalkSimulatedFirmware
    /// The BLE link to the phone: MTU, timing, flow control, link loss.
    public var link: XTalkSimulatedLink
    /// The GATT database the phone discovers.
    public var gatt: XTalkSimulatedGatt

    /// A healthy xTalk radio with these values; every argument has a default.
    public init(
        name: String = "xTalk-0001",
        address: String? = "C0:FF:EE:00:00:01",
        rssi: Int = -58,
        rssiJitter: Int = 3,
        advertisingInterval: Duration = .milliseconds(100),
        advertisesPassthroughService: Bool = true,
        firmware: XTalkSimulatedFirmware = XTalkSimulatedFirmware(),
        link: XTalkSimulatedLink = XTalkSimulatedLink(),
        gatt: XTalkSimulatedGatt = XTalkSimulatedGatt()
    ) {
        self.name = name
        self.address = address
        self.rssi = rssi
        self.rssiJitter = rssiJitter
        self.advertisingInterval = advertisingInterval
        self.advertisesPassthroughService = advertisesPassthroughService
        self.firmware = firmware
        self.link = link
        self.gatt = gatt
    }

    /// A device with OneKey's BLE profile and an echo firmware (for the
    /// low-level bridge): it advertises OneKey's service and no manufacturer
    /// data, has no battery or device-information service, and notifies
    /// every written packet back unchanged. Every link, flow-control and
    /// GATT knob applies (missing characteristics, a refused subscription,
    /// pairing).
    public static func oneKeyEcho(name: String = "OneKey Pro") -> XTalkSimulatedDevice {
        var device = XTalkSimulatedDevice(name: name, address: nil)
        device.gatt.profile = .oneKeyEcho
        device.gatt.hasBatteryService = false
        device.gatt.hasDeviceInformationService = false
        return device
    }
}

/// Where the device's serial number comes from (`AT+ID?` reports it).
public enum XTalkSimulatedSerialSource: String, Sendable, Hashable {
    /// Burnt into eFuse at manufacturing: reported as `EFUSE`.
    case efuse = "EFUSE"
    /// Configured later: reported as `SN`.
    case configured = "SN"
}

/// The radio MCU's firmware: the AT command set of PROTOCOL.md section 6 and
/// its variants and faults.
public struct XTalkSimulatedFirmware: Sendable {
    /// The encoding the firmware uses in both directions.
    public var encoding: XTalkAtEncoding
    /// Echo each received command line before its response.
    public var echo: Bool
    /// `AT+AUTH?` answers `+AUTH:1` (challenge required) or `+AUTH:0`.
    public var challengeRequired: Bool
    /// The 32-bit device identifier exactly as the firmware reports it (legacy
    /// firmware reports bit 31 clear).
    public var deviceID: UInt32
    /// The serial text reported by `AT+ID?`, e.g. `XT2648012345`.
    public var serial: String
    /// Where the serial comes from (`AT+ID?` reports it).
    public var serialSource: XTalkSimulatedSerialSource
    /// `AT+VER?` answers `+VER:<version>`.
    public var version: String
    /// Radio frequency in Hz (`AT+FREQ?`), settable within 150–960 MHz.
    public var frequency: Int
    /// Transmit power in dBm (`AT+TXP?`), settable within -9…22.
    public var txPower: Int
    /// The 32-byte Ed25519 seed the firmware signs challenges with; nil means
    /// the built-in development key.
    public var signingKeySeed: [UInt8]?
    /// Time the MCU takes to answer a complete command line.
    public var processingDelay: Duration
    /// Radio airtime of a frame: `airtimeBase + airtimePerByte × payload bytes`.
    public var airtimeBase: Duration
    /// Radio airtime per payload byte (see `airtimeBase`).
    public var airtimePerByte: Duration
    /// How transmissions end: nil for `+SENDFIN:OK`, or the failure reason of
    /// `+SENDFIN:FAIL,<reason>`.
    public var sendFailureReason: String?
    /// Time from `AT+RST`'s `OK` to `+READY`.
    public var resetDuration: Duration
    /// A partial command line is discarded after this much silence (a UART
    /// inter-character timeout); nil keeps it forever.
    public var partialLineTimeout: Duration?
    /// The longest command line the firmware accepts (longer ones answer `ERROR`).
    public var maxCommandLength: Int
    /// Misbehaviour to reproduce field problems.
    public var faults: XTalkFirmwareFaults

    /// Current firmware with these values; every argument has a default.
    public init(
        encoding: XTalkAtEncoding = .xor,
        echo: Bool = false,
        challengeRequired: Bool = true,
        deviceID: UInt32 = XTalkSimulatedFirmware.identifier(year: 2026, week: 48, serialNumber: 12345),
        serial: String = "XT2648012345",
        serialSource: XTalkSimulatedSerialSource = .efuse,
        version: String = "2.1.0",
        frequency: Int = 868_100_000,
        txPower: Int = 14,
        signingKeySeed: [UInt8]? = nil,
        processingDelay: Duration = .milliseconds(2),
        airtimeBase: Duration = .milliseconds(20),
        airtimePerByte: Duration = .microseconds(500),
        sendFailureReason: String? = nil,
        resetDuration: Duration = .milliseconds(300),
        partialLineTimeout: Duration? = .milliseconds(500),
        maxCommandLength: Int = 1024,
        faults: XTalkFirmwareFaults = XTalkFirmwareFaults()
    ) {
        self.encoding = encoding
        self.echo = echo
        self.challengeRequired = challengeRequired
        self.deviceID = deviceID
        self.serial = serial
        self.serialSource = serialSource
        self.version = version
        self.frequency = frequency
        self.txPower = txPower
        self.signingKeySeed = signingKeySeed
        self.processingDelay = processingDelay
        self.airtimeBase = airtimeBase
        self.airtimePerByte = airtimePerByte
        self.sendFailureReason = sendFailureReason
        self.resetDuration = resetDuration
        self.partialLineTimeout = partialLineTimeout
        self.maxCommandLength = maxCommandLength
        self.faults = faults
    }

    /// The identifier layout of PROTOCOL.md section 9, computed independently
    /// of the SDK's codec: bit 31 set unless `legacy`, year − 2000 in bits
    /// 30–25, ISO week in 24–19, serial number in 18–0.
    public static func identifier(year: Int, week: Int, serialNumber: UInt32, legacy: Bool = false) -> UInt32 {
        let yy = UInt32(truncatingIfNeeded: year >= 2000 ? year - 2000 : year) & 0x3F
        let ww = UInt32(truncatingIfNeeded: week) & 0x3F
        let flag: UInt32 = legacy ? 0 : 0x8000_0000
        return flag | yy << 25 | ww << 19 | (serialNumber & 0x7FFFF)
    }

    /// A firmware whose identifier and serial agree, from the serial's fields.
    public static func identity(
        year: Int, week: Int, serialNumber: UInt32,
        legacy: Bool = false, source: XTalkSimulatedSerialSource = .efuse
    ) -> XTalkSimulatedFirmware {
        var firmware = XTalkSimulatedFirmware()
        firmware.deviceID = identifier(year: year, week: week, serialNumber: serialNumber, legacy: legacy)
        let yy = (year >= 2000 ? year - 2000 : year) % 100
        firmware.serial = "XT" + pad(yy, 2) + pad(week, 2) + pad(Int(serialNumber), 6)
        firmware.serialSource = source
        return firmware
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}

/// Firmware misbehaviour, all off by default.
public struct XTalkFirmwareFaults: Sendable {
    /// Never answer anything (no echo, no response, no URC from commands).
    public var silent: Bool
    /// Commands (matched by prefix, e.g. `"AT+VER?"`) that get no answer at all.
    public var silentCommands: [String]
    /// Extra delay before every answer: set it beyond the host's timeout to
    /// produce late replies.
    public var replyDelay: Duration
    /// Replace the answer to commands matching a prefix with these lines
    /// (final code included), e.g. `["AT+CHAL=": ["+CHAL:XYZ", "OK"]]`.
    public var scriptedReplies: [String: [String]]
    /// Sign challenges with a key other than the configured one.
    public var wrongSignature: Bool
    /// Answer `AT+CHAL=` with a malformed `+CHAL:` line.
    public var malformedChallengeReply: Bool
    /// Answer the first N challenges with `+CHAL:ERR`.
    public var rejectedChallenges: Int
    /// Answer every challenge with the reply to the first nonce ever signed (a replay).
    public var replayFirstChallengeReply: Bool
    /// Report (and sign) this identifier in `+CHAL:` instead of the real one.
    public var challengeDeviceIDOverride: UInt32?
    /// Emit this many random bytes (not a line) before every answer.
    public var garbageBeforeReplies: Int

    /// These faults; every argument defaults to none.
    public init(
        silent: Bool = false,
        silentCommands: [String] = [],
        replyDelay: Duration = .zero,
        scriptedReplies: [String: [String]] = [:],
        wrongSignature: Bool = false,
        malformedChallengeReply: Bool = false,
        rejectedChallenges: Int = 0,
        replayFirstChallengeReply: Bool = false,
        challengeDeviceIDOverride: UInt32? = nil,
        garbageBeforeReplies: Int = 0
    ) {
        self.silent = silent
        self.silentCommands = silentCommands
        self.replyDelay = replyDelay
        self.scriptedReplies = scriptedReplies
        self.wrongSignature = wrongSignature
        self.malformedChallengeReply = malformedChallengeReply
        self.rejectedChallenges = rejectedChallenges
        self.replayFirstChallengeReply = replayFirstChallengeReply
        self.challengeDeviceIDOverride = challengeDeviceIDOverride
        self.garbageBeforeReplies = garbageBeforeReplies
    }
}

/// How notifications cut the device's output into chunks.
public enum XTalkNotificationSplit: Sendable, Hashable {
    /// Pack bytes into notifications of up to MTU − 3 bytes.
    case packed
    /// Cut at random points (seeded): replies split anywhere, down to one byte.
    case random
    /// One byte per notification.
    case singleBytes
}

/// How a simulated link drops.
public enum XTalkSimulatedLinkLoss: Sendable, Hashable {
    /// Out of range or the device lost power: the central notices after the
    /// link's supervision timeout and reports `CBError.connectionTimeout`.
    /// Writes made meanwhile go nowhere.
    case supervisionTimeout
    /// The device ended the connection (e.g. it rebooted cleanly): reported at
    /// once as `CBError.peripheralDisconnected`.
    case terminatedByDevice
}

/// The BLE link between the central and the device.
public struct XTalkSimulatedLink: Sendable {
    /// The ATT MTU after the exchange (23–517); the link starts at 23.
    public var mtu: Int
    /// Time after connecting until the MTU exchange completes.
    public var mtuExchangeDelay: Duration
    /// The connection interval; `.zero` is an ideal link that moves data at once.
    public var connectionInterval: Duration
    /// Packets per direction per connection event.
    public var packetsPerConnectionEvent: Int
    /// Write-without-response buffer in packets (the flow-control credits).
    public var writeWithoutResponseCredits: Int
    /// Time from `connect` to the connection (never, when `connectionNeverCompletes`).
    public var connectDelay: Duration
    /// A connection attempt that never completes (CoreBluetooth never times out).
    public var connectionNeverCompletes: Bool
    /// Refuse the connection: `didFailToConnect` after `connectDelay`.
    public var refusesConnection: Bool
    /// The supervision timeout: how long after a link loss (range, power) the
    /// central reports it, as `CBError.connectionTimeout`. Meanwhile the link
    /// looks up to the app: writes are taken and go nowhere, nothing answers.
    /// iOS's default is about 720 ms.
    public var supervisionTimeout: Duration
    /// How notifications cut the device's output into chunks.
    public var notificationSplit: XTalkNotificationSplit
    /// The BLE module's buffer for device output not yet notified; output
    /// beyond it is dropped (and counted), as a UART bridge drops on overrun.
    public var notificationBufferLimit: Int
    /// One in this many "ready to send write without response" callbacks
    /// never arrives, while the credits do come back (seen on iOS 26.4/26.5
    /// and after backgrounding): 1 loses every one, nil (the default) none.
    public var lostReadyCallbacksOneIn: Int?
    /// With a lost ready callback, `canSendWriteWithoutResponse` also stays
    /// false (although the buffer has room) until the host writes anyway.
    public var lostReadyCallbackKeepsFlagFalse: Bool
    /// With `lostReadyCallbackKeepsFlagFalse`: the flag stays false for the
    /// rest of the connection, writes or not (as reported on iOS 26.4: "from
    /// the second write on, canSendWriteWithoutResponse remains false").
    public var stuckReadyFlagSurvivesWrites = false

    /// A link with these values; every argument has a default (a good phone link).
    public init(
        mtu: Int = 247,
        mtuExchangeDelay: Duration = .milliseconds(30),
        connectionInterval: Duration = .milliseconds(15),
        packetsPerConnectionEvent: Int = 6,
        writeWithoutResponseCredits: Int = 8,
        connectDelay: Duration = .milliseconds(40),
        connectionNeverCompletes: Bool = false,
        refusesConnection: Bool = false,
        supervisionTimeout: Duration = .milliseconds(720),
        notificationSplit: XTalkNotificationSplit = .packed,
        notificationBufferLimit: Int = 16_384,
        lostReadyCallbacksOneIn: Int? = nil,
        lostReadyCallbackKeepsFlagFalse: Bool = false
    ) {
        self.mtu = mtu
        self.mtuExchangeDelay = mtuExchangeDelay
        self.connectionInterval = connectionInterval
        self.packetsPerConnectionEvent = packetsPerConnectionEvent
        self.writeWithoutResponseCredits = writeWithoutResponseCredits
        self.connectDelay = connectDelay
        self.connectionNeverCompletes = connectionNeverCompletes
        self.refusesConnection = refusesConnection
        self.supervisionTimeout = supervisionTimeout
        self.notificationSplit = notificationSplit
        self.notificationBufferLimit = notificationBufferLimit
        self.lostReadyCallbacksOneIn = lostReadyCallbacksOneIn
        self.lostReadyCallbackKeepsFlagFalse = lostReadyCallbackKeepsFlagFalse
    }

    /// An ideal link for benchmarks and fast tests: no latency, MTU 247.
    public static var ideal: XTalkSimulatedLink {
        XTalkSimulatedLink(mtuExchangeDelay: .zero, connectionInterval: .zero, connectDelay: .zero)
    }
}

/// Whether the device's RX characteristic requires an encrypted (paired)
/// link, and what happens when iOS pairs (its dialog waits on the user).
public enum XTalkSimulatedPairing: Sendable, Hashable {
    /// RX can be subscribed without pairing.
    case notRequired
    /// The user completes iOS's pairing dialog `after` it appears; the phone
    /// and the device are bonded from then on.
    case userPairs(after: Duration)
    /// The user cancels the dialog (or ignores it) `after` it appears: the
    /// subscription fails with "Encryption is insufficient".
    case userCancels(after: Duration)
    /// The device forgot its bond with this phone: iOS ends the link with
    /// `CBError.peerRemovedPairingInformation`.
    case peerRemovedPairing
}

/// The device's GATT database (PROTOCOL.md section 2) and its variants.
public struct XTalkSimulatedGatt: Sendable {
    /// The device family: xTalk's passthrough and AT firmware, or OneKey's
    /// profile with an echo firmware (the `has…`/`tx…`/`subscription…`/`write…`
    /// knobs apply to that profile's service, write and notify characteristics).
    public var profile: XTalkSimulatedProfile = .xTalk
    /// The device has the passthrough service (absent: `.serviceMissing`).
    public var hasPassthroughService: Bool
    /// The service has its TX (write) characteristic (absent: `.characteristicMissing`).
    public var hasPassthroughTX: Bool
    /// The service has its RX (notify) characteristic (absent: `.characteristicMissing`).
    public var hasPassthroughRX: Bool
    /// TX supports write-without-response (otherwise only write with response).
    public var txSupportsWriteWithoutResponse: Bool
    /// Refuse the RX notification subscription with this ATT error text; the
    /// error is the one the text names ("insufficient authentication",
    /// "Encryption is insufficient", "Write not permitted"; else unknown).
    public var subscriptionRefusal: String?
    /// Refuse writes to TX with this ATT error text: writes with response
    /// report it, writes without response are silently lost (and counted).
    public var writeRefusal: String?
    /// The device has the Battery service (for `fetchBatteryLevel`).
    public var hasBatteryService: Bool
    /// The device has the Device Information service (for the version queries).
    public var hasDeviceInformationService: Bool
    /// Battery Level characteristic value.
    public var batteryLevel: UInt8
    /// Firmware Revision String bytes (BLE firmware), as stored.
    public var firmwareRevision: Data
    /// Hardware Revision String bytes, as stored.
    public var hardwareRevision: Data
    /// Reads of these characteristics fail with an ATT error (read not permitted).
    public var failingReads: Set<String>
    /// Reads of these characteristics never answer.
    public var silentReads: Set<String>
    /// Pairing before RX can be subscribed (without a bond).
    public var pairing: XTalkSimulatedPairing

    /// The xTalk GATT database with these variants; every argument has a default (the real device's).
    public init(
        hasPassthroughService: Bool = true,
        hasPassthroughTX: Bool = true,
        hasPassthroughRX: Bool = true,
        txSupportsWriteWithoutResponse: Bool = true,
        subscriptionRefusal: String? = nil,
        writeRefusal: String? = nil,
        hasBatteryService: Bool = true,
        hasDeviceInformationService: Bool = true,
        batteryLevel: UInt8 = 87,
        firmwareRevision: Data = Data("1.4.2\0".utf8),
        hardwareRevision: Data = Data(" XT-R2 ".utf8),
        failingReads: Set<String> = [],
        silentReads: Set<String> = [],
        pairing: XTalkSimulatedPairing = .notRequired
    ) {
        self.pairing = pairing
        self.hasPassthroughService = hasPassthroughService
        self.hasPassthroughTX = hasPassthroughTX
        self.hasPassthroughRX = hasPassthroughRX
        self.txSupportsWriteWithoutResponse = txSupportsWriteWithoutResponse
        self.subscriptionRefusal = subscriptionRefusal
        self.writeRefusal = writeRefusal
        self.hasBatteryService = hasBatteryService
        self.hasDeviceInformationService = hasDeviceInformationService
        self.batteryLevel = batteryLevel
        self.firmwareRevision = firmwareRevision
        self.hardwareRevision = hardwareRevision
        self.failingReads = failingReads
        self.silentReads = silentReads
    }
}
