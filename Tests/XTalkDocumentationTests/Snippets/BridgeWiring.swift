// The Swift samples of the bridge's wiring article (XTalkBleBridgeWebKit.docc),
// verbatim. They compile where a module named WebKit is: Apple platforms, and
// the Apple stand-in build (XTALK_APPLE_STANDINS=1, against StandIns/WebKit).
#if canImport(WebKit)
    import Foundation
    import WebKit
    import XTalkBleBridgeWebKit

    @MainActor
    func wireTheBridge() -> WKWebView {
        let configuration = WKWebViewConfiguration()
        let bridge = XTalkBleBridgeMessageHandler()
        bridge.install(in: configuration.userContentController)
        let webView = WKWebView(frame: .zero, configuration: configuration)
        let page = Bundle.main.url(forResource: "index", withExtension: "html", subdirectory: "web_dist")!
        webView.loadFileURL(page, allowingReadAccessTo: page.deletingLastPathComponent())
        // When the web view goes: bridge.uninstall(from: configuration.userContentController)
        return webView
    }
#endif
