// The Swift samples of the Device authentication article
// (XTalkDeviceAuthSdk.docc), verbatim: DocumentationSnippetTests checks that
// every sample is here. The adapter is the one of the customer's integration
// guide (seed 002), as written there: Seed002Session.swift, a link to the
// file the seed's own tests compile.
import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk

@MainActor
func authenticate(_ ble: XTalkBleClient, previous: XTalkDeviceIdentity?) async throws -> XTalkDeviceIdentity {
    let authenticator = XTalkDeviceAuthenticator(transport: XTalkBleAuthTransport(ble: ble))
    let result = try await authenticator.authenticate(
        configuration: XTalkDeviceAuthConfiguration(
            challengePolicy: .always,
            expectedDeviceID: previous?.deviceID
        ))
    return result.identity
}
