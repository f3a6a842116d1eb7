// The Swift samples of the Device authentication article
// (XTalkDeviceAuthSdk.docc), verbatim: DocumentationSnippetTests checks that
// every sample is here. The adapter is the one of the customer's integration
// guide (seed 002), as written there: Seed002Session.swift, a link to the
// file the seed's own tests compile.
import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk

@MainActor
final class DeviceCheck {
    /// One per device session: it remembers the AT encoding it found.
    let authenticator: XTalkDeviceAuthenticator

    init(ble: XTalkBleClient) {
        authenticator = XTalkDeviceAuthenticator(transport: XTalkBleAuthTransport(ble: ble))
    }

    func authenticate(previous: XTalkDeviceIdentity?) async throws -> XTalkDeviceIdentity {
        let result = try await authenticator.authenticate(
            configuration: XTalkDeviceAuthConfiguration(
                challengePolicy: .always,
                expectedDeviceID: previous?.deviceID
            ))
        return result.identity
    }
}
