import Foundation

/// How much a log record matters.
public enum XTalkLogLevel: Int, Sendable, Comparable, CaseIterable {
    /// Every step: commands, lines, GATT operations.
    case debug
    /// Lifecycle milestones: scanning, connected, ready.
    case info
    /// Something went wrong and was handled (a drain, a dropped event, a retry).
    case warning
    /// Something failed (a connection, a write).
    case error

    public static func < (lhs: XTalkLogLevel, rhs: XTalkLogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Receives the client's log records. Commands sent with `log: false` and
/// their response lines never reach it.
public typealias XTalkLogHandler = @Sendable (XTalkLogLevel, String) -> Void

/// Options of an `XTalkBleClient` beyond the API reference's defaults.
///
/// An option struct, so that new options never break existing callers.
public struct XTalkBleClientOptions: Sendable {
    /// A connection that has not reached `atReady` by then fails with
    /// `.timeout`, and the link is cancelled. Must be greater than zero:
    /// otherwise `connect(id:)` publishes `.failed(.connectionFailed(reason))`
    /// naming it, and touches no link.
    public var connectTimeout: Duration
    /// Each `events` stream keeps at most this many events its reader has not
    /// taken (the newest; `.connectionStateChanged` is never dropped);
    /// `droppedEventCount` counts the rest over all streams. Values below 1 mean 1.
    public var eventBufferLimit: Int
    /// Records below this level are not produced.
    public var logLevel: XTalkLogLevel
    /// Where log records go; nil: the system log on Apple platforms (`os.Logger`, subsystem
    /// "com.xtalk.sdk", category "ble"), nowhere elsewhere.
    public var logHandler: XTalkLogHandler?
    /// Writes without response wait while the platform says it has no room
    /// (`canSendWriteWithoutResponse` false) for its "ready" callback; since
    /// that callback can go missing on real phones, the client re-polls the
    /// flag every 10 ms and, after this long blocked, writes the next chunk
    /// anyway. A command is never lost to a missing callback; its own
    /// timeout keeps counting while it waits (it counts from its turn on the
    /// channel), so a command shorter than this bound can time out unwritten.
    /// Once the flag stayed false this long, it is not trusted on that link
    /// any more (on some phones it stays false for good): while it says no,
    /// the client writes one chunk every 20 ms, until it says yes again.
    public var writeReadyTimeout: Duration
    /// Whether iOS may show its "turn on Bluetooth" alert when the app first
    /// uses Bluetooth while it is off (`CBCentralManagerOptionShowPowerAlertKey`;
    /// iOS's default, true). Set it to false to explain it in your own UI
    /// (`connectionState == .failed(.bluetoothUnavailable)`).
    public var showsPowerAlert: Bool
    /// Opt-in state restoration (iOS): with an identifier (the same at every
    /// launch), iOS keeps the app's connection while the app is suspended or
    /// terminated and relaunches it in the background for its events (the
    /// app needs `bluetooth-central` in `UIBackgroundModes`). A client made
    /// with it asks for Bluetooth at once (make it at launch), takes the kept
    /// connection back and brings it to `atReady` as a connection does
    /// (`.connecting`, `.connected`, within `connectTimeout`), or lets it go;
    /// never half-open. Nil (the default): no restoration.
    public var restoreIdentifier: String?

    /// Options with the given values; every argument has the default described on its property.
    public init(
        connectTimeout: Duration = .seconds(10),
        eventBufferLimit: Int = 1_024,
        logLevel: XTalkLogLevel = .info,
        logHandler: XTalkLogHandler? = nil,
        writeReadyTimeout: Duration = .seconds(2),
        showsPowerAlert: Bool = true,
        restoreIdentifier: String? = nil
    ) {
        self.showsPowerAlert = showsPowerAlert
        self.restoreIdentifier = restoreIdentifier
        self.connectTimeout = connectTimeout
        self.eventBufferLimit = eventBufferLimit
        self.logLevel = logLevel
        self.logHandler = logHandler
        self.writeReadyTimeout = writeReadyTimeout
    }
}
