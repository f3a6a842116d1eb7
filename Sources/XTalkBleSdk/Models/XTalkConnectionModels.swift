import Foundation

/// The client's scan/connection state.
public enum XTalkConnectionState: Sendable, Hashable {
    case idle
    case scanning
    case connecting
    case connected
    case disconnected
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
