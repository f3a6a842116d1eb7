import Foundation

/// Byte-level text encodings of PROTOCOL.md section 4.
///
/// Both encodings are stateless per byte, so a line can be decoded in any
/// chunking without carrying state between chunks.
extension XTalkAtEncoding {
    /// The byte every byte is XOR-ed with (0 for `.plain`).
    var key: UInt8 {
        switch self {
        case .plain: 0x00
        case .xor: 0x5A
        }
    }

    /// Encodes one command line, appending the CR LF terminator.
    func encodeLine(_ text: String) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(text.utf8.count + 2)
        let key = self.key
        for byte in text.utf8 { bytes.append(byte ^ key) }
        bytes.append(0x0D ^ key)
        bytes.append(0x0A ^ key)
        return bytes
    }
}

/// What PROTOCOL.md allows as input, checked before any byte is written: a
/// CR or LF inside command text would inject a second command, and a payload
/// outside 1–240 bytes would be rejected by the device anyway.
package enum AtInputValidation {
    /// The largest radio payload (PROTOCOL.md section 7).
    static let maximumPayloadLength = 240

    /// Accepts non-empty printable ASCII without CR or LF; otherwise throws
    /// `.writeFailed` naming the problem and where it is.
    package static func validateCommand(_ text: String) throws(XTalkBleError) {
        if text.isEmpty { throw .writeFailed("invalid AT command: the text is empty") }
        for (offset, byte) in text.utf8.enumerated() {
            switch byte {
            case 0x0D: throw .writeFailed("invalid AT command: CR at byte \(offset) would end the line early")
            case 0x0A: throw .writeFailed("invalid AT command: LF at byte \(offset) would end the line early")
            case 0x20...0x7E: continue
            default:
                throw .writeFailed(
                    "invalid AT command: byte \(offset) (0x\(Hex.encode([byte]))) is not printable ASCII")
            }
        }
    }

    /// Returns the payload as the uppercase hex of `AT+SEND=`, or throws
    /// `.writeFailed` for an empty or oversized payload.
    static func hexPayload(_ payload: Data) throws(XTalkBleError) -> String {
        if payload.isEmpty { throw .writeFailed("invalid RF payload: it is empty (1–240 bytes allowed)") }
        if payload.count > maximumPayloadLength {
            throw .writeFailed("invalid RF payload: \(payload.count) bytes (1–240 bytes allowed)")
        }
        return Hex.encode(payload)
    }

    /// Accepts a positive timeout in milliseconds; otherwise throws `.writeFailed`.
    static func timeout(milliseconds: Int) throws(XTalkBleError) -> Duration {
        guard milliseconds > 0 else {
            throw .writeFailed("invalid timeout: \(milliseconds) ms (it must be greater than zero)")
        }
        return .milliseconds(milliseconds)
    }
}
