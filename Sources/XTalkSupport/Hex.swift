import Foundation

/// The host's one hexadecimal codec, shared by both SDKs, the tool and the
/// chaos engine: hex text as PROTOCOL.md uses it. The host writes uppercase,
/// and accepts either case. Decoding never truncates: odd length or a non-hex
/// character rejects the whole text; the empty text is zero bytes.
///
/// The simulated device keeps its own hex on purpose (it must not share the
/// code it tests); the layering tests check that it does not name this one.
package enum Hex {
    private static let upperDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Uppercase hex of `bytes`, two digits a byte.
    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(upperDigits[Int(byte >> 4)])
            out.append(upperDigits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The value of one hex digit, or nil.
    @inline(__always)
    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c &- 0x30
        case 0x41...0x46: c &- 0x37
        case 0x61...0x66: c &- 0x57
        default: nil
        }
    }

    /// Each byte's value as a hex digit, or 0xFF: one table lookup per digit.
    private static let digitValues: [UInt8] = (0..<256).map { nibble(UInt8($0)) ?? 0xFF }

    /// Decodes hex digits (either case) straight into `Data`; nil for odd
    /// length or any non-hex character.
    package static func decodeData(_ digits: UnsafeBufferPointer<UInt8>) -> Data? {
        guard digits.count % 2 == 0 else { return nil }
        var data = Data(count: digits.count / 2)
        let valid = digitValues.withUnsafeBufferPointer { table in
            data.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Bool in
                var invalid: UInt8 = 0
                var position = 0
                var index = 0
                while index < digits.count {
                    let high = table[Int(digits[index])]
                    let low = table[Int(digits[index + 1])]
                    // 0xFF marks a non-digit; any of them poisons the result (checked once, at the end).
                    invalid |= (high | low) & 0xF0
                    out[position] = high << 4 | (low & 0x0F)
                    position += 1
                    index += 2
                }
                return invalid == 0
            }
        }
        return valid ? data : nil
    }

    /// Decodes hex digits (either case); nil for odd length or any non-hex character.
    package static func decode(_ digits: some Collection<UInt8>) -> [UInt8]? {
        guard digits.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(digits.count / 2)
        var high: UInt8? = nil
        for c in digits {
            guard let value = nibble(c) else { return nil }
            if let h = high {
                out.append(h << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return out
    }
}
