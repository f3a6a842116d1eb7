// A stand-in for the part of Apple's WebKit that the low-level bridge's
// WebKit host uses, so that XTalkBleBridgeWebKit compiles and runs on Linux,
// unchanged. It declares Apple's Swift-visible names, labels and
// isolation, as Apple's documentation gives them
// (https://developer.apple.com/documentation/webkit/<symbol>):
// WKScriptMessageHandlerWithReply (a @MainActor protocol, iOS 14+) and its
// userContentController(_:didReceive:replyHandler:), WKUserContentController's
// addScriptMessageHandler(_:contentWorld:name:),
// removeScriptMessageHandler(forName:contentWorld:) and addUserScript(_:),
// WKUserScript(source:injectionTime:forMainFrameOnly:), WKContentWorld.page,
// WKScriptMessage (body, name, frameInfo, world), WKFrameInfo
// (isMainFrame, securityOrigin), and the part of WKWebViewConfiguration and
// WKWebView an app calls to load its bundled page (no view, no page). Nothing
// here runs JavaScript: a test posts
// messages as a page would, through the `XTalkStandIn` SPI, which Apple's
// framework does not have.

import Foundation

/// [A wkcontentworld]
@MainActor
public final class WKContentWorld: NSObject {
    public let name: String?
    private init(name: String?) { self.name = name }
    /// [A wkcontentworld/page]
    public static let page = WKContentWorld(name: nil)
    /// [A wkcontentworld/defaultclient]
    public static let defaultClient = WKContentWorld(name: "defaultClient")
    /// [A wkcontentworld/world(name:)]
    public static func world(name: String) -> WKContentWorld { WKContentWorld(name: name) }
}

/// [A wksecurityorigin]
@MainActor
public class WKSecurityOrigin: NSObject {
    public let `protocol`: String
    public let host: String
    public let port: Int
    @_spi(XTalkStandIn) public init(protocol: String, host: String, port: Int) {
        self.protocol = `protocol`
        self.host = host
        self.port = port
    }
}

/// [A wkframeinfo]
@MainActor
public class WKFrameInfo: NSObject {
    public let isMainFrame: Bool
    public let securityOrigin: WKSecurityOrigin
    @_spi(XTalkStandIn) public init(isMainFrame: Bool, securityOrigin: WKSecurityOrigin) {
        self.isMainFrame = isMainFrame
        self.securityOrigin = securityOrigin
    }
}

/// [A wkscriptmessage]
@MainActor
public class WKScriptMessage: NSObject {
    public let body: Any
    public let name: String
    public let frameInfo: WKFrameInfo
    public let world: WKContentWorld
    @_spi(XTalkStandIn) public init(body: Any, name: String, frameInfo: WKFrameInfo, world: WKContentWorld) {
        self.body = body
        self.name = name
        self.frameInfo = frameInfo
        self.world = world
    }
}

/// [A wkscriptmessagehandlerwithreply]
@MainActor
public protocol WKScriptMessageHandlerWithReply: NSObjectProtocol {
    /// [A wkscriptmessagehandlerwithreply/usercontentcontroller(_:didreceive:replyhandler:)]
    func userContentController(
        _ userContentController: WKUserContentController, didReceive message: WKScriptMessage,
        replyHandler: @escaping @MainActor @Sendable (Any?, String?) -> Void)
}

/// [A wkuserscriptinjectiontime]
public enum WKUserScriptInjectionTime: Int, Sendable {
    case atDocumentStart = 0
    case atDocumentEnd
}

/// [A wkuserscript]
@MainActor
public class WKUserScript: NSObject {
    public let source: String
    public let injectionTime: WKUserScriptInjectionTime
    public let isForMainFrameOnly: Bool
    /// [A wkuserscript/init(source:injectiontime:formainframeonly:)]
    public init(source: String, injectionTime: WKUserScriptInjectionTime, forMainFrameOnly: Bool) {
        self.source = source
        self.injectionTime = injectionTime
        isForMainFrameOnly = forMainFrameOnly
    }
}

/// [A wkusercontentcontroller]
@MainActor
public class WKUserContentController: NSObject {
    private var handlers: [String: any WKScriptMessageHandlerWithReply] = [:]
    public private(set) var userScripts: [WKUserScript] = []

    public override init() {}

    /// [A wkusercontentcontroller/addscriptmessagehandler(_:contentworld:name:)-1addr]
    /// (WebKit keeps a strong reference to the handler until it is removed.)
    public func addScriptMessageHandler(
        _ scriptMessageHandlerWithReply: any WKScriptMessageHandlerWithReply, contentWorld world: WKContentWorld,
        name: String
    ) {
        handlers[key(name, world)] = scriptMessageHandlerWithReply
    }

    /// [A wkusercontentcontroller/removescriptmessagehandler(forname:contentworld:)]
    public func removeScriptMessageHandler(forName name: String, contentWorld: WKContentWorld) {
        handlers[key(name, contentWorld)] = nil
    }

    /// [A wkusercontentcontroller/adduserscript(_:)]
    public func addUserScript(_ userScript: WKUserScript) {
        userScripts.append(userScript)
    }

    private func key(_ name: String, _ world: WKContentWorld) -> String { "\(world.name ?? "page")/\(name)" }

    /// What a page's `window.webkit.messageHandlers.<name>.postMessage(body)`
    /// does: the handler's reply, or the error WebKit gives JavaScript when no
    /// handler has that name.
    @_spi(XTalkStandIn)
    public func postMessage(
        _ body: Any, name: String, frameInfo: WKFrameInfo, world: WKContentWorld = .page,
        reply: @escaping @MainActor @Sendable (Any?, String?) -> Void
    ) {
        guard let handler = handlers[key(name, world)] else {
            return reply(
                nil, "TypeError: undefined is not an object (evaluating 'window.webkit.messageHandlers.\(name)')")
        }
        handler.userContentController(
            self, didReceive: WKScriptMessage(body: body, name: name, frameInfo: frameInfo, world: world),
            replyHandler: reply)
    }
}

/// [A wkwebviewconfiguration]
@MainActor
public class WKWebViewConfiguration: NSObject {
    /// [A wkwebviewconfiguration/usercontentcontroller]
    public var userContentController = WKUserContentController()

    public override init() {}
}

/// [A wknavigation]
@MainActor
public class WKNavigation: NSObject {}

/// [A wkwebview] (no view, no page: what an app calls to load its bundled files).
@MainActor
public class WKWebView: NSObject {
    /// [A wkwebview/configuration]
    public let configuration: WKWebViewConfiguration
    /// The file URL the last `loadFileURL` call asked for.
    @_spi(XTalkStandIn) public private(set) var loadedFileURL: URL?

    /// [A wkwebview/init(frame:configuration:)]
    public init(frame: CGRect, configuration: WKWebViewConfiguration) {
        self.configuration = configuration
    }

    /// [A wkwebview/loadfileurl(_:allowingreadaccessto:)]
    @discardableResult
    public func loadFileURL(_ URL: URL, allowingReadAccessTo readAccessURL: URL) -> WKNavigation? {
        loadedFileURL = URL
        return WKNavigation()
    }
}
