#if os(Linux)
    import Foundation
    import Testing
    import XTalkBleBridge
    import XTalkSimulator

    @testable import XTalkBleBridgeWebKit

    #if canImport(XTalkWebKitStandIn)
        @_spi(XTalkStandIn) import XTalkWebKitStandIn
    #else
        @_spi(XTalkStandIn) import WebKit  // the stand-in, under Apple's name (XTALK_APPLE_STANDINS=1)
    #endif

    /// The WKWebView host, against the WebKit stand-in: messages posted as the
    /// plugin script posts them, replies as the script reads them.
    @Suite("Low-level bridge: the WebKit host (WKScriptMessageHandlerWithReply)")
    @MainActor
    struct WebKitHostTests {
        let clock = XTalkVirtualClock()
        let environment: XTalkSimulatedEnvironment
        let controller = WKUserContentController()
        let handler: XTalkBleBridgeMessageHandler

        init() {
            environment = XTalkSimulatedEnvironment(devices: [.oneKeyEcho()], clock: clock)
            handler = XTalkBleBridgeMessageHandler(backend: environment.backend)
            handler.install(in: controller)
        }

        private func post(
            _ method: String, _ params: [String: Any] = [:], mainFrame: Bool = true, origin: String = "file"
        ) async -> [String: Any]? {
            var answer: (Any?, String?)?
            let frame = WKFrameInfo(
                isMainFrame: mainFrame, securityOrigin: WKSecurityOrigin(protocol: origin, host: "", port: 0))
            controller.postMessage(
                ["method": method, "params": params], name: XTalkBleBridgeMessageHandler.handlerName, frameInfo: frame
            ) { reply, error in answer = (reply, error) }
            await BridgeRig.advance(clock, until: { answer != nil }, within: .seconds(30))
            #expect(answer?.1 == nil, "replies are values, never WebKit errors")
            guard let text = answer?.0 as? String else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        }

        @Test func installsTheHandlerAndThePluginScript() {
            let script = try! #require(controller.userScripts.first)
            #expect(script.injectionTime == .atDocumentStart)
            #expect(script.isForMainFrameOnly)
            #expect(script.source.contains("createWebKitPlugin"))
            #expect(
                script.source.contains(
                    "window.xtalkLowlevelPlugin = XTalkLowlevelPlugin.createWebKitPlugin('xtalkBleBridge')"))
        }

        @Test func aPageRunsTheWholeContract() async throws {
            #expect(await post("init")?["result"] is NSNull)
            let devices = try #require(await post("enumerate")?["result"] as? [[String: Any]])
            let uuid = try #require(devices.first?["id"] as? String)
            #expect(await post("connect", ["uuid": uuid])?["result"] is NSNull)
            #expect(await post("getProtocolV2PacketCapacity", ["uuid": uuid])?["result"] as? Int == 244)
            #expect(
                await post("send", ["uuid": uuid, "data": "3f2323", "options": ["withoutResponse": true]])?["result"]
                    is NSNull)
            #expect(await post("receive", ["uuid": uuid])?["result"] as? String == "3f2323")
            let error = await post("send", ["uuid": uuid, "data": "0x00"])?["error"] as? [String: Any]
            #expect(error?["code"] as? Int == 710)
            #expect(await post("disconnect", ["uuid": uuid])?["result"] is NSNull)
        }

        @Test(arguments: [(false, "file"), (true, "https")])
        func onlyTheMainFrameOfATrustedOriginMayUseIt(mainFrame: Bool, origin: String) async {
            let error = await post("enumerate", mainFrame: mainFrame, origin: origin)?["error"] as? [String: Any]
            #expect(error?["code"] as? Int == 900)
            #expect(environment.central.state == .unknown, "Bluetooth was not even asked for")
        }

        @Test func uninstallRemovesTheHandler() {
            handler.uninstall(from: controller)
            var webKitError: String?
            controller.postMessage(
                ["method": "init"], name: XTalkBleBridgeMessageHandler.handlerName,
                frameInfo: WKFrameInfo(
                    isMainFrame: true, securityOrigin: WKSecurityOrigin(protocol: "file", host: "", port: 0))
            ) { _, error in webKitError = error }
            #expect(webKitError != nil)
        }

        /// WebKit hands over what the page posted: a JavaScript Date arrives
        /// as a Date, which JSON cannot hold (on Apple, serializing it raises
        /// an Objective-C exception that would end the app).
        @Test func aMessageJSONCannotHoldIsRefused() async {
            let error = await post("send", ["uuid": "x", "data": "00", "when": Date()])?["error"] as? [String: Any]
            #expect(error?["code"] as? Int == 900)
            let nan = await post("send", ["uuid": "x", "data": "00", "n": Double.nan])?["error"] as? [String: Any]
            #expect(nan?["code"] as? Int == 900)
        }

        /// WebKit's reply handlers must each be called once: a handler released
        /// uncalled is an error in WebKit. Uninstalling answers every request
        /// still waiting and ends the links.
        @Test func uninstallAnswersWhatIsStillWaiting() async throws {
            let devices = try #require(await post("enumerate")?["result"] as? [[String: Any]])
            let uuid = try #require(devices.first?["id"] as? String)
            #expect(await post("connect", ["uuid": uuid])?["result"] is NSNull)
            var parked: (Any?, String?)?
            controller.postMessage(
                ["method": "receive", "params": ["uuid": uuid]], name: XTalkBleBridgeMessageHandler.handlerName,
                frameInfo: WKFrameInfo(
                    isMainFrame: true, securityOrigin: WKSecurityOrigin(protocol: "file", host: "", port: 0))
            ) { reply, error in parked = (reply, error) }
            await clock.advance(by: .milliseconds(100))
            #expect(parked == nil, "nothing to receive: the request waits")
            handler.uninstall(from: controller)
            let reply = try #require(parked?.0 as? String, "answered by uninstall")
            let object = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]
            #expect((object?["error"] as? [String: Any])?["code"] as? Int == 720)
            await BridgeRig.advance(clock, until: { !environment.peripherals[0].isConnected }, within: .seconds(5))
            #expect(!environment.peripherals[0].isConnected, "the link ended")
        }
    }
#endif
