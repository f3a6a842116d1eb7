// The Swift samples of the AT/RF channel article (XTalkBleSdk.docc),
// verbatim: DocumentationSnippetTests checks that every sample is here.
import Foundation
import XTalkBleSdk

@MainActor
func readFrequency(_ ble: XTalkBleClient) async throws -> String? {
    let lines = try await ble.runAtCommand(
        "AT+FREQ?",
        timeoutMs: 2_000,
        log: true,
        responseMode: .automatic
    )
    return lines.first { $0.hasPrefix("+FREQ:") }
}

@MainActor
func sendFrame(_ ble: XTalkBleClient, _ payload: Data) async throws {
    try await ble.sendRfPayload(payload, timeoutMs: 5_000)
}

@MainActor
func readSettings(_ ble: XTalkBleClient) async throws -> (frequency: [String], version: [String]) {
    try await ble.withExclusiveAtSession { session in
        let frequency = try await session.runAtCommand("AT+FREQ?")
        let version = try await session.runAtCommand("AT+VER?")
        return (frequency, version)
    }
}
