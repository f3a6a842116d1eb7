import Foundation

#if canImport(XTalkSupport)
    import XTalkSupport
#endif

/// Hex as the low-level plugin contract carries it: strict in (the host's
/// codec, `Hex`, plus the contract's rule that a payload is never empty),
/// lowercase out.
package enum BridgeHex {
    /// Decodes `text`: non-empty, even length, only `[0-9a-fA-F]` (no `0x`,
    /// no spaces, nothing else). Anything else is refused whole, with the
    /// reason in words (never the text itself: it may be a signing request).
    package static func decode(_ text: String) -> Result<Data, BridgeError> {
        var text = text
        return text.withUTF8 { utf8 in decode(utf8) }
    }

    private static func decode(_ utf8: UnsafeBufferPointer<UInt8>) -> Result<Data, BridgeError> {
        guard !utf8.isEmpty else { return .failure(invalid("the hex is empty")) }
        guard utf8.count % 2 == 0 else { return .failure(invalid("the hex has an odd length (\(utf8.count))")) }
        if let data = Hex.decodeData(utf8) { return .success(data) }
        // Where the first non-digit is: the words say where, never what.
        let offset = utf8.firstIndex { value(of: $0) == nil } ?? 0
        return .failure(notHex(at: offset))
    }

    private static func notHex(at offset: Int) -> BridgeError {
        invalid("the hex has a character that is not a hex digit at offset \(offset)")
    }

    /// Lowercase hex, two digits per byte.
    package static func encode(_ bytes: Data) -> String {
        bytes.withUnsafeBytes { raw in
            pairs.withUnsafeBufferPointer { table in
                String(unsafeUninitializedCapacity: raw.count * 2) { out in
                    var index = 0
                    while index < raw.count {
                        let pair = table[Int(raw[index])]
                        out[2 * index] = UInt8(truncatingIfNeeded: pair >> 8)
                        out[2 * index + 1] = UInt8(truncatingIfNeeded: pair)
                        index += 1
                    }
                    return raw.count * 2
                }
            }
        }
    }

    /// Each byte's two lowercase digits (high digit in the high byte).
    private static let pairs: [UInt16] = (0...255).map { byte in
        let digits = Array("0123456789abcdef".utf8)
        return UInt16(digits[byte >> 4]) << 8 | UInt16(digits[byte & 0x0F])
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
