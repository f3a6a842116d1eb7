import Foundation
import Testing
@testable import XTalkBleSdk

@Suite("Input validation before any byte is written (PROTOCOL.md sections 4 and 7)", .timeLimit(.minutes(5)))
struct AtInputValidationTests {
    @Test("printable ASCII commands pass", arguments: ["AT", "AT+PING=abc", "AT+FREQ=868100000", " ~", "AT+X=\"a b\""])
    func validCommands(_ text: String) throws {
        try AtInputValidation.validateCommand(text)
    }

    @Test(
        "bad command text is rejected with a reason naming the problem",
        arguments: [
            ("", "invalid AT command: the text is empty"),
            ("AT\r\nAT+RST", "invalid AT command: CR at byte 2 would end the line early"),
            ("AT\nAT+RST", "invalid AT command: LF at byte 2 would end the line early"),
            ("AT\r", "invalid AT command: CR at byte 2 would end the line early"),
            ("AT\t", "invalid AT command: byte 2 (0x09) is not printable ASCII"),
            ("AT\u{7F}", "invalid AT command: byte 2 (0x7F) is not printable ASCII"),
            ("AT\u{00}", "invalid AT command: byte 2 (0x00) is not printable ASCII"),
            ("ATé", "invalid AT command: byte 2 (0xC3) is not printable ASCII"),
        ])
    func invalidCommands(_ text: String, _ reason: String) {
        #expect(throws: XTalkBleError.writeFailed(reason)) { try AtInputValidation.validateCommand(text) }
    }

    @Test("payloads of 1 to 240 bytes become uppercase hex")
    func validPayloads() throws {
        #expect(try AtInputValidation.hexPayload(Data([0xAB, 0x01])) == "AB01")
        #expect(try AtInputValidation.hexPayload(Data(repeating: 0xFF, count: 240)).count == 480)
    }

    @Test("empty and oversized payloads are rejected")
    func invalidPayloads() {
        #expect(throws: XTalkBleError.writeFailed("invalid RF payload: it is empty (1–240 bytes allowed)")) {
            try AtInputValidation.hexPayload(Data())
        }
        #expect(throws: XTalkBleError.writeFailed("invalid RF payload: 241 bytes (1–240 bytes allowed)")) {
            try AtInputValidation.hexPayload(Data(count: 241))
        }
    }

    @Test("timeouts must be positive", arguments: [0, -1, Int.min])
    func invalidTimeouts(_ milliseconds: Int) throws {
        #expect(throws: XTalkBleError.writeFailed("invalid timeout: \(milliseconds) ms (it must be greater than zero)"))
        {
            try AtInputValidation.timeout(milliseconds: milliseconds)
        }
        #expect(try AtInputValidation.timeout(milliseconds: 1) == .milliseconds(1))
    }
}
