import Foundation
import XTalkBleSdk

/// The low-level BLE bridge (*iOS: Connect via Bluetooth*) for a host of your own (a JavaScript
/// runtime other than `WKWebView`, a desktop shell): one JSON request in,
/// one JSON reply out, exactly as `XTalkBleBridgeWebKit` and `xtalk bridge
/// --stdio` answer them.
///
///     {"id": <number>, "method": "<name>", "params": {"uuid": …, "data": "<hex>", "options": {"withoutResponse": …}}}
///     {"id": <same>, "result": <value or null>}
///     {"id": <same>, "error": {"code": <HardwareErrorCode>, "message": "…"}}
///
/// Methods: `init`, `version`, `enumerate`, `connect`, `disconnect`, `send`,
/// `receive`, `getProtocolV2PacketCapacity`. Requests run concurrently;
/// each is answered exactly once, on the main actor.
@MainActor
public final class XTalkBleBridgeRouter {
    private let router: BridgeRouter

    /// A bridge over this device's Bluetooth (CoreBluetooth on Apple platforms, BlueZ on Linux).
    public convenience init() {
        self.init(backend: PlatformBackend.make())
    }

    package init(backend: any BleBackend) {
        router = BridgeRouter(bridge: BleBridge(backend: backend))
    }

    /// Handles one request; `reply` runs once with the reply (one line of JSON, no newline).
    public func handle(_ request: String, reply: @escaping @MainActor (String) -> Void) {
        router.handle(Array(request.utf8), reply: reply)
    }
}
