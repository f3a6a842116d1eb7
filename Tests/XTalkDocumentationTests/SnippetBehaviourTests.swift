import Foundation
import Testing
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkSimulator

/// The articles' samples do what the articles say they do.
@Suite("Documentation: the samples behave as the articles say", .timeLimit(.minutes(5)))
@MainActor
struct SnippetBehaviourTests {
    @Test("Getting started: the first command on the simulator answers +VER:2.1.0, OK")
    func gettingStarted() async throws {
        #expect(try await firstCommandOnTheSimulator() == ["+VER:2.1.0", "OK"])
    }

    @Test("Testing your app: a client connects in two virtual seconds; app code finds a radio")
    func connected() async {
        let (ble, _, _) = await connectedClient()
        #expect(ble.atReady)
        ble.teardown()
        #expect(await appCodeOnTheSimulator())
    }

    @Test("Device authentication: the sample authenticates the simulated radio, and the same one again")
    func authentication() async throws {
        let (ble, _, clock) = await connectedClient()
        let check = DeviceCheck(ble: ble)
        let identity = try await clock.run { try await check.authenticate(previous: nil) }
        #expect(identity.did.hasPrefix("did:xtalk:"))
        let again = try await clock.run { try await check.authenticate(previous: identity) }
        #expect(again == identity)
        ble.teardown()
    }

    @Test("Testing your app: the link-loss sample's expectations hold")
    func linkLoss() async throws {
        try await linkLossDuringCommand()
    }
}
