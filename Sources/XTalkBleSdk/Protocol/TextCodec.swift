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

/// What PROTOCOL.md allows as command text: non-empty printable ASCII without
/// CR or LF. Checked before any byte is written, since a CR or LF would inject
/// a second command.
enum AtCommandText {
    /// Returns nil when `text` is acceptable, otherwise a sentence naming the problem.
    static func problem(in text: String) -> String? {
        if text.isEmpty { return "the command text is empty" }
        for (offset, byte) in text.utf8.enumerated() {
            switch byte {
            case 0x0D: return "the command text contains CR at byte \(offset)"
            case 0x0A: return "the command text contains LF at byte \(offset)"
            case 0x20...0x7E: continue
            default:
                return "the command text contains a byte that is not printable ASCII (0x\(hex2(byte))) at byte \(offset)"
            }
        }
        return nil
    }

    private static func hex2(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
