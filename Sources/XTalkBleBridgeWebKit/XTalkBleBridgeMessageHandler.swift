// The low-level BLE bridge in a WKWebView: the script message handler OneKey's
// JavaScript SDK talks to, through the plugin object the bundled
// xtalk-lowlevel-plugin.js creates. Compiles against Apple's WebKit and, on
// Linux, against the stand-in of StandIns/WebKit (the same Swift-visible API).

#if canImport(WebKit)
    import WebKit
#else
    @_spi(XTalkStandIn) import XTalkWebKitStandIn
#endif
import Foundation
import XTalkBleBridge
import XTalkBleSdk

/// The low-level BLE bridge for OneKey's JavaScript SDK (`env: 'lowlevel'`)
/// in a `WKWebView`: a `WKScriptMessageHandlerWithReply` that answers the
/// plugin's calls (`enumerate`, `connect`, `disconnect`, `send`, `receive`,
/// `getProtocolV2PacketCapacity`, `init`) over CoreBluetooth, with the guarantees of
/// *iOS: Connect via Bluetooth*, and the JavaScript that creates the plugin object.
///
/// ```swift
/// let bridge = XTalkBleBridgeMessageHandler()
/// bridge.install(in: configuration.userContentController)
/// // in the page: HardwareSDK.init({ env: 'lowlevel', ... }, window.xtalkLowlevelPlugin)
/// ```
///
/// Only the main frame of a trusted origin may use it (by default `file`,
/// the bundled `web_dist`): never navigate a device-enabled web view to
/// untrusted content. WebKit keeps the handler until `uninstall(from:)`.
@MainActor
public final class XTalkBleBridgeMessageHandler: NSObject, WKScriptMessageHandlerWithReply {
    /// The name the plugin script posts to (`window.webkit.messageHandlers.xtalkBleBridge`).
    public static let handlerName = "xtalkBleBridge"

    /// The plugin script: defines `XTalkLowlevelPlugin` and sets
    /// `window.xtalkLowlevelPlugin`, the object to pass to the SDK.
    public static var pluginScript: String {
        let library =
            Bundle.module.url(forResource: "xtalk-lowlevel-plugin", withExtension: "js")
            .flatMap { try? String(contentsOf: $0, encoding: .utf8) }
            ?? "console.error('xtalk-lowlevel-plugin.js is missing from the app bundle');"
        return library + "\nwindow.xtalkLowlevelPlugin = XTalkLowlevelPlugin.createWebKitPlugin('\(handlerName)');\n"
    }

    /// Which pages may use Bluetooth through the bridge (the main frame
    /// only, always). Default: the bundled files (`file` scheme).
    public var isTrustedOrigin: @MainActor (WKSecurityOrigin) -> Bool = { $0.protocol == "file" }

    private let router: BridgeRouter

    /// A bridge over this device's Bluetooth (CoreBluetooth).
    public override convenience init() {
        self.init(backend: PlatformBackend.make())
    }

    /// A bridge over another backend (the simulator, in tests).
    package init(backend: any BleBackend) {
        router = BridgeRouter(bridge: BleBridge(backend: backend))
        super.init()
    }

    /// Registers the handler (page world) and the plugin script (at document start, main frame).
    public func install(in userContentController: WKUserContentController) {
        userContentController.addScriptMessageHandler(self, contentWorld: .page, name: Self.handlerName)
        userContentController.addUserScript(
            WKUserScript(source: Self.pluginScript, injectionTime: .atDocumentStart, forMainFrameOnly: true))
    }

    /// Removes the handler (WebKit holds it strongly until then), ends every
    /// link and answers every call still waiting (720): WebKit requires each
    /// reply handler to be called once, and the page is going away.
    public func uninstall(from userContentController: WKUserContentController) {
        userContentController.removeScriptMessageHandler(forName: Self.handlerName, contentWorld: .page)
        router.bridge.close("the web view's Bluetooth bridge was uninstalled")
    }

    /// One plugin call: `{method, params}` in, the router's JSON reply text out
    /// (the plugin script turns an error reply into an `Error` with `code` and `reason`).
    public func userContentController(
        _ userContentController: WKUserContentController, didReceive message: WKScriptMessage,
        replyHandler: @escaping @MainActor @Sendable (Any?, String?) -> Void
    ) {
        guard message.frameInfo.isMainFrame, isTrustedOrigin(message.frameInfo.securityOrigin) else {
            return replyHandler(
                BridgeRouter.encode(
                    id: "0",
                    .failure(
                        BridgeError(.lowlevelTransportConnect, "this page may not use the Bluetooth bridge"))),
                nil)
        }
        let object: [String: Any]? = (message.body as? [String: Any]).flatMap { body in
            guard let method = body["method"] as? String else { return nil }
            return ["id": 0, "method": method, "params": body["params"] as? [String: Any] ?? [:]]
        }
        // Checked first: on Apple platforms, serializing what JSON cannot hold
        // (a JavaScript Date arrives as a Date; NaN) raises an exception.
        guard let object, JSONSerialization.isValidJSONObject(object),
            let request = try? JSONSerialization.data(withJSONObject: object)
        else {
            return replyHandler(
                BridgeRouter.encode(
                    id: "0", .failure(BridgeError(.lowlevelTransportConnect, "bad request: not {method, params}"))),
                nil)
        }
        router.handle(request) { reply in replyHandler(reply, nil) }
    }
}
