import XTalkBleSdk

/// The simulated firmware's own byte and text handling: transcoding, hex and
/// number parsing of PROTOCOL.md sections 4 and 6.
///
/// Written independently of the SDK's codec on purpose, so that a bug on one
/// side of the wire cannot hide behind the same bug on the other.
enum FirmwareText {
    /// Encodes or decodes one byte; both encodings are their own inverse.
    static func transcode(_ byte: UInt8, _ encoding: XTalkAtEncoding) -> UInt8 {
        switch encoding {
        case .plain: byte
        case .xor: byte ^ 0x5A
        }
    }

    /// The bytes the UART carries for one line: the text, then CR LF, all encoded.
    static func encodeLine(_ line: [UInt8], _ encoding: XTalkAtEncoding) -> [UInt8] {
        (line + [0x0D, 0x0A]).map { transcode($0, encoding) }
    }

    /// The text after `prefix` when `text` starts with it, compared byte for byte.
    static func argument(of text: String, after prefix: String) -> String? {
        guard text.utf8.starts(with: prefix.utf8) else { return nil }
        return String(decoding: text.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }

    /// Whether `text` starts with `prefix`, byte for byte (no Unicode equivalence).
    static func hasPrefix(_ text: String, _ prefix: String) -> Bool {
        text.utf8.starts(with: prefix.utf8)
    }

    /// Uppercase hex of `bytes`, two digits per byte.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The 8 uppercase hex digits of a 32-bit value, most significant first.
    static func hex(_ value: UInt32) -> String {
        hex(bigEndianBytes(value))
    }

    /// The 4 bytes of `value`, most significant first.
    static func bigEndianBytes(_ value: UInt32) -> [UInt8] {
        [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) }
    }

    /// Decodes even-length hex in either case; nil for odd length or any other character.
    static func bytes(fromHex text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// The value of one hex digit, or nil.
    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// A decimal integer: an optional `-` and 1 to 10 digits, nothing else (no `+`,
    /// no spaces); the digit limit keeps any accepted text far from overflow.
    static func decimal(_ text: String) -> Int? {
        var digits = Substring(text)
        let negative = digits.first == "-"
        if negative { digits = digits.dropFirst() }
        guard (1...10).contains(digits.utf8.count),
            digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let magnitude = Int(digits)
        else { return nil }
        return negative ? -magnitude : magnitude
    }

    /// Whether `text` is a ping token: 1 to 32 characters of `[0-9A-Za-z]`.
    static func isPingToken(_ text: String) -> Bool {
        (1...32).contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "a")...UInt8(ascii: "z"):
                    true
                default: false
                }
            }
    }
}
