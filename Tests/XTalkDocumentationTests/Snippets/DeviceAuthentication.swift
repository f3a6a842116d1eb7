// The Swift samples of the Device authentication article
// (XTalkDeviceAuthSdk.docc), verbatim: DocumentationSnippetTests checks that
// every sample is here. The adapter is the one of the customer's integration
// guide (seed 002), as written there.
import Foundation
import XTalkBleSdk
import XTalkDeviceAuthSdk

@MainActor
final class XTalkBleAuthTransport: DeviceAuthTransport {
    let label = "xTalk BLE"
    private(set) var atEncoding: DeviceAuthAtEncoding = .plain
    private let ble: XTalkBleClient

    init(ble: XTalkBleClient) {
        self.ble = ble
    }

    func setAtEncoding(_ encoding: DeviceAuthAtEncoding) {
        atEncoding = encoding
        ble.setAtEncoding(encoding == .plain ? .plain : .xor)
    }

    func runAtCommand(
        _ command: String,
        timeoutMs: Int,
        log: Bool,
        responseMode: DeviceAuthResponseMode
    ) async throws -> [String] {
        let mode: XTalkAtResponseMode
        switch responseMode {
        case .automatic:
            mode = .automatic
        case .collectFullWindow, .recoverableEncodingProbe:
            mode = .collectUntilTimeout
        }
        return try await ble.runAtCommand(
            command,
            timeoutMs: timeoutMs,
            log: log,
            responseMode: mode
        )
    }
}

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
