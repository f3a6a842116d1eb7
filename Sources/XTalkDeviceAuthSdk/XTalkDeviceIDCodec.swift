/// Device identifiers (PROTOCOL.md section 9): 32 bits, most significant
/// first: bit 31 the canonical flag (legacy firmware reports 0), bits 30–25
/// the year − 2000, bits 24–19 the ISO week, bits 18–0 the serial number.
public enum XTalkDeviceIDCodec {
    static let canonicalFlag: UInt32 = 0x8000_0000

    /// Sets the canonical flag; idempotent.
    public static func canonicalize(_ raw: UInt32) -> UInt32 {
        raw | canonicalFlag
    }

    /// Builds a canonical identifier from serial-number fields. `year` may be
    /// a full year (2000–2063) or its last two digits; each field is masked to
    /// its width (6, 6 and 19 bits).
    public static func fromSn(year: Int, week: Int, serial: UInt32) -> UInt32 {
        let yy = UInt32(truncatingIfNeeded: year >= 2000 ? year - 2000 : year) & 0x3F
        let ww = UInt32(truncatingIfNeeded: week) & 0x3F
        return canonicalFlag | yy << 25 | ww << 19 | (serial & 0x7FFFF)
    }

    /// Parses decimal or `0x`/`0X` hexadecimal text, with optional surrounding
    /// whitespace, and canonicalizes it. Nil for empty text, signs, invalid
    /// digits, or values above 0xFFFFFFFF.
    public static func parse(_ raw: String) -> UInt32? {
        let text = raw.trimmingWhitespace()
        var digits = Substring(text)
        var radix: UInt64 = 10
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") {
            digits = digits.dropFirst(2)
            radix = 16
        }
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for character in digits.utf8 {
            let digit: UInt64
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt64(character - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f") where radix == 16:
                digit = UInt64(character - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F") where radix == 16:
                digit = UInt64(character - UInt8(ascii: "A") + 10)
            default: return nil
            }
            value = value * radix + digit
            guard value <= UInt64(UInt32.max) else { return nil }
        }
        return canonicalize(UInt32(value))
    }

    /// `0x` followed by 8 uppercase hex digits of the canonical identifier.
    public static func format(_ raw: UInt32) -> String {
        "0x" + hex8(canonicalize(raw))
    }

    /// 8 uppercase hex digits, most significant first.
    static func hex8(_ value: UInt32) -> String {
        withUnsafeBytes(of: value.bigEndian) { Hex.encode($0) }
    }
}

extension String {
    /// Drops leading and trailing whitespace and newlines (no Foundation needed).
    /// Trims whitespace scalars, not characters: a space followed by a
    /// combining mark is one Character that counts as whitespace, and would
    /// hide the mark (found by fuzzing: " \u{301}1" parsed as 1).
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}
