import Foundation
import Testing
import XTalkBleSdk

/// The public models as app code reads them: errors in words, scan results
/// shown in a list, an encoding an app may store.
@Suite("Public models of the BLE client")
struct BleModelTests {
    /// One of every `XTalkBleError` case, each with a reason of its own.
    static func everyError() -> [XTalkBleError] {
        [
            .bluetoothUnavailable, .permissionDenied, .scanFailed("the radio is busy"),
            .deviceNotFound(UUID(uuidString: "0E0E0E0E-0000-4000-8000-000000000009")!),
            .deviceMismatch("expected xTalk-01"), .connectionFailed("the peer ended the link"), .serviceMissing,
            .characteristicMissing, .notConnected, .notReady, .busy, .timeout, .writeFailed("the write was refused"),
            .cancelled, .malformedResponse("+VER without a value"), .deviceControlFailed("no battery service"),
        ]
    }

    @Test("every XTalkBleError says what happened in words, with its reason; LocalizedError says the same")
    func errorDescriptions() {
        var descriptions: Set<String> = []
        for error in Self.everyError() {
            #expect(!error.description.isEmpty)
            #expect(error.errorDescription == error.description, "what an alert shows")
            #expect(descriptions.insert(error.description).inserted, "\(error): no two cases read the same")
        }
        #expect(Self.everyError().count == 16, "the API reference's sixteen cases")
        for (error, reason) in [
            (XTalkBleError.scanFailed("the radio is busy"), "the radio is busy"),
            (.deviceMismatch("expected xTalk-01"), "expected xTalk-01"),
            (.connectionFailed("the peer ended the link"), "the peer ended the link"),
            (.writeFailed("the write was refused"), "the write was refused"),
            (.malformedResponse("+VER without a value"), "+VER without a value"),
            (.deviceControlFailed("no battery service"), "no battery service"),
            (
                .deviceNotFound(UUID(uuidString: "0E0E0E0E-0000-4000-8000-000000000009")!),
                "0E0E0E0E-0000-4000-8000-000000000009"
            ),
        ] {
            #expect(error.description.contains(reason), "\(error) carries its reason")
        }
    }

    @Test("isTimeout and isCancellation pick out exactly .timeout and .cancelled")
    func errorClassification() {
        for error in Self.everyError() {
            #expect(error.isTimeout == (error == .timeout), "\(error)")
            #expect(error.isCancellation == (error == .cancelled), "\(error)")
        }
    }

    @Test("a scan result keeps its fields; displayName is the name, with the address when there is one")
    func scanResult() {
        let id = UUID(uuidString: "0E0E0E0E-0000-4000-8000-000000000001")!
        let gateway = XTalkScanResult(id: id, name: "xTalk-01", address: "C0:FF:EE:00:00:01", rssi: -61)
        #expect(gateway.id == id && gateway.name == "xTalk-01" && gateway.rssi == -61)
        #expect(gateway.address == "C0:FF:EE:00:00:01")
        #expect(gateway.displayName == "xTalk-01 (C0:FF:EE:00:00:01)")
        let phone = XTalkScanResult(id: id, name: "xTalk-01", address: nil, rssi: -61)
        #expect(phone.displayName == "xTalk-01", "iOS supplies no address")
    }

    @Test("an AT encoding round-trips through its raw value; anything else is nil")
    func encodingRawValues() {
        for encoding in XTalkAtEncoding.allCases {
            #expect(XTalkAtEncoding(rawValue: encoding.rawValue) == encoding)
        }
        #expect(XTalkAtEncoding(rawValue: "plain") == .plain)
        #expect(XTalkAtEncoding(rawValue: "xor") == .xor)
        #expect(XTalkAtEncoding(rawValue: "XOR") == nil)
        #expect(XTalkAtEncoding(rawValue: "") == nil)
    }
}
