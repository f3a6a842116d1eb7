import Foundation

/// The client's scan/connection state.
///
/// Links end with `.disconnected` (or `.failed`) before the next state is
/// published, whatever ended them, except ``XTalkBleClient/teardown()``:
/// terminal, it sets `.idle` at once and delivers no further event.
public enum XTalkConnectionState: Sendable, Hashable {
    /// Neither scanning nor connected: a new client, or after `stopScan()`.
    case idle
    /// Scanning: `scanResults` fills as devices advertise.
    case scanning
    /// `connect(id:)` is establishing the link.
    case connecting
    /// The link is up. Commands need `atReady` as well: the passthrough may
    /// still be setting up.
    case connected
    /// The link ended: `disconnect()`, another scan or device, a lost link, Bluetooth off.
    case disconnected
    /// Scanning or connecting failed, for the reason given; published again
    /// on every failure, even when the state already says the same.
    case failed(XTalkBleError)
}

/// One device seen during the current scan session.
public struct XTalkScanResult: Identifiable, Sendable, Hashable {
    /// The identifier to pass to `connect(id:)`; valid for this scan session.
    public let id: UUID
    /// The advertised name.
    public var name: String
    /// `AA:BB:CC:DD:EE:FF` when the platform or the manufacturer data supplies it.
    public var address: String?
    /// The latest received signal strength, in dBm.
    public var rssi: Int

    /// A result with these values (the client creates them; tests and previews may too).
    public init(id: UUID, name: String, address: String?, rssi: Int) {
        self.id = id
        self.name = name
        self.address = address
        self.rssi = rssi
    }

    /// `name` when no address is known, otherwise `"name (address)"`.
    public var displayName: String {
        guard let address else { return name }
        return "\(name) (\(address))"
    }
}
