/// Parsers of the authentication replies (PROTOCOL.md sections 8 and 9).
/// Pure functions of the response lines: no I/O, fuzzable, and strict — a
/// reply that does not match its format exactly is rejected, never guessed at.
enum AuthenticationReplies {
    /// `+AUTH:0` or `+AUTH:1` followed by `OK`: whether a challenge is
    /// required; nil when the lines hold no valid answer (garbage, `ERROR`,
    /// silence: the probe may have used the wrong encoding).
    static func probe(_ lines: [String]) -> Bool? {
        for index in lines.indices.dropLast() where lines[index + 1] == "OK" {
            switch lines[index] {
            case "+AUTH:0": return false
            case "+AUTH:1": return true
            default: continue
            }
        }
        return nil
    }

    struct ChallengeReply: Equatable {
        /// The identifier the device signed, as it reported it.
        let deviceID: UInt32
        let signature: [UInt8]
    }

    /// The first `+CHAL:` line: `+CHAL:<8 hex id>,<128 hex signature>`.
    static func challenge(_ lines: [String]) -> Result<ChallengeReply, XTalkDeviceAuthError> {
        guard let line = lines.first(where: { $0.hasPrefix("+CHAL:") }) else { return .failure(.challengeMissing) }
        let body = line.dropFirst("+CHAL:".count)
        if body == "ERR" { return .failure(.invalidChallenge) }
        guard let comma = body.firstIndex(of: ",") else { return .failure(.malformedChallengeReply) }
        guard let deviceID = hex32(body[..<comma]),
              let signature = hexBytes(body[body.index(after: comma)...]), !signature.isEmpty
        else { return .failure(.malformedChallengeReply) }
        guard signature.count == 64 else { return .failure(.invalidSignatureLength(signature.count)) }
        return .success(ChallengeReply(deviceID: deviceID, signature: signature))
    }

    struct IdentityReply: Equatable {
        let rawDeviceID: UInt32
        let source: XTalkDeviceIdentitySource
        let serial: String
        let year: Int
        let week: Int
        let serialNumber: UInt32
    }

    /// The first `+ID:` line: `+ID:<8 hex raw id>,<EFUSE|SN>,<XT yy ww nnnnnn>`,
    /// with a serial whose fields are in range (week 1–53, year 0–63,
    /// serial number 0–524287). Nil for anything else.
    static func identity(_ lines: [String]) -> IdentityReply? {
        guard let line = lines.first(where: { $0.hasPrefix("+ID:") }) else { return nil }
        let fields = line.dropFirst("+ID:".count).split(separator: ",", omittingEmptySubsequences: false)
        guard fields.count == 3, let rawDeviceID = hex32(fields[0]) else { return nil }
        let source: XTalkDeviceIdentitySource
        switch fields[1] {
        case "EFUSE": source = .efuseSn
        case "SN": source = .sn
        default: return nil
        }
        let serial = String(fields[2])
        let characters = Array(serial.utf8)
        guard characters.count == 12, characters[0] == UInt8(ascii: "X"), characters[1] == UInt8(ascii: "T"),
              characters[2...].allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        func number(_ range: Range<Int>) -> Int {
            characters[range].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        }
        let year = number(2..<4)
        let week = number(4..<6)
        let serialNumber = number(6..<12)
        guard year <= 63, (1...53).contains(week), serialNumber <= 0x7FFFF else { return nil }
        return IdentityReply(rawDeviceID: rawDeviceID, source: source, serial: serial, year: year, week: week,
                             serialNumber: UInt32(serialNumber))
    }

    /// Exactly 8 hex digits (either case).
    static func hex32(_ text: Substring) -> UInt32? {
        guard text.utf8.count == 8, let bytes = hexBytes(text) else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Even-length hex (either case); nil for anything else.
    static func hexBytes(_ text: Substring) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    /// Uppercase hex of `bytes`.
    static func hexString(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The message the device signs: "XTALK-AUTH-V1" ‖ 0x00 ‖ nonce ‖ device id (big-endian).
    static func signedMessage(nonce: [UInt8], deviceID: UInt32) -> [UInt8] {
        Array("XTALK-AUTH-V1".utf8) + [0x00] + nonce
            + [UInt8(deviceID >> 24), UInt8(truncatingIfNeeded: deviceID >> 16),
               UInt8(truncatingIfNeeded: deviceID >> 8), UInt8(truncatingIfNeeded: deviceID)]
    }
}
