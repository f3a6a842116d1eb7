import Foundation

/// Hex as the low-level plugin contract carries it: strict in, lowercase out.
package enum BridgeHex {
    /// Decodes `text`: non-empty, even length, only `[0-9a-fA-F]` (no `0x`,
    /// no spaces, nothing else). Anything else is refused whole, with the
    /// reason in words (never the text itself: it may be a signing request).
    package static func decode(_ text: String) -> Result<Data, BridgeError> {
        let utf8 = text.utf8
        guard !utf8.isEmpty else { return .failure(invalid("the hex is empty")) }
        guard utf8.count % 2 == 0 else { return .failure(invalid("the hex has an odd length (\(utf8.count))")) }
        var bytes = Data(capacity: utf8.count / 2)
        var high: UInt8?
        for (offset, character) in utf8.enumerated() {
            guard let nibble = value(of: character) else {
                return .failure(invalid("the hex has a character that is not a hex digit at offset \(offset)"))
            }
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return .success(bytes)
    }

    /// Lowercase hex, two digits per byte.
    package static func encode(_ bytes: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func value(of character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func invalid(_ reason: String) -> BridgeError {
        BridgeError(.writeCharacteristic, "send refused before any byte was written: \(reason)")
    }
}
