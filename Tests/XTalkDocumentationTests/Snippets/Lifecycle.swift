// The Swift samples of the BLE lifecycle article (XTalkBleSdk.docc),
// verbatim: DocumentationSnippetTests checks that every sample is here.
import Foundation
import XTalkBleSdk

@MainActor
func waitUntilAtReady(_ ble: XTalkBleClient, timeout: Duration = .seconds(10)) async throws {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while !ble.atReady {
        try Task.checkCancellation()
        if case .failed(let error) = ble.connectionState { throw error }
        guard ContinuousClock.now < deadline else { throw XTalkBleError.timeout }
        try await Task.sleep(for: .milliseconds(50))
    }
}
