/// Parsers of the authentication replies (PROTOCOL.md sections 8 and 9).
/// Pure functions of the response lines: no I/O, fuzzable, and strict — a
/// reply that does not match its format exactly is rejected, never guessed at.
enum AuthenticationReplies {
    /// `+AUTH:0` or `+AUTH:1` followed by `OK`: whether a challenge is
    /// required; nil when the lines hold no valid answer (garbage, `ERROR`,
    /// silence: the probe may have used the wrong encoding).
    ///
    /// Lines are compared byte for byte (UTF-8), never as Unicode text: under
    /// String's canonical equivalence "O" + KELVIN SIGN equals "OK", and a
    /// combining mark after ":" hides the prefix "+CHAL:" (both found by fuzzing).
    static func probe(_ lines: [String]) -> Bool? {
        for index in lines.indices.dropLast() where same(lines[index + 1], "OK") {
            if same(lines[index], "+AUTH:0") { return false }
            if same(lines[index], "+AUTH:1") { return true }
        }
        return nil
    }

    /// What a probe's lines say.
    enum ProbeOutcome: Equatable {
        /// `+AUTH:0` or `+AUTH:1` then `OK`: whether a challenge is required.
        case answered(required: Bool)
        /// A final result code (`OK`, `ERROR`, `+CME ERROR:`, `+ERR:`) but no
        /// such answer: the encoding is right and the device refuses (firmware
        /// without authentication).
        case refused
        /// Garbage, silence or half a reply: the probe may have used the wrong encoding.
        case ambiguous
    }

    static func probeOutcome(_ lines: [String]) -> ProbeOutcome {
        if let required = probe(lines) { return .answered(required: required) }
        let final = lines.contains { line in
            same(line, "OK") || same(line, "ERROR") || rest(line, after: "+CME ERROR:") != nil
                || rest(line, after: "+ERR:") != nil
        }
        return final ? .refused : .ambiguous
    }

    struct ChallengeReply: Equatable {
        /// The identifier the device signed, as it reported it.
        let deviceID: UInt32
        let signature: [UInt8]
    }

    /// The first `+CHAL:` line: `+CHAL:<8 hex id>,<128 hex signature>`.
    static func challenge(_ lines: [String]) -> Result<ChallengeReply, XTalkDeviceAuthError> {
        guard let body = lines.lazy.compactMap({ rest($0, after: "+CHAL:") }).first else {
            return .failure(.challengeMissing)
        }
        if body.elementsEqual("ERR".utf8) { return .failure(.invalidChallenge) }
        guard let comma = body.firstIndex(of: UInt8(ascii: ",")) else { return .failure(.malformedChallengeReply) }
        guard let deviceID = hex32(body[..<comma]),
            let signature = Hex.decode(body[(comma + 1)...]), !signature.isEmpty
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
        guard let body = lines.lazy.compactMap({ rest($0, after: "+ID:") }).first else { return nil }
        let fields = body.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        guard fields.count == 3, let rawDeviceID = hex32(fields[0]) else { return nil }
        let source: XTalkDeviceIdentitySource
        if fields[1].elementsEqual("EFUSE".utf8) {
            source = .efuseSn
        } else if fields[1].elementsEqual("SN".utf8) {
            source = .sn
        } else {
            return nil
        }
        let characters = Array(fields[2])
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
        return IdentityReply(
            rawDeviceID: rawDeviceID, source: source, serial: String(decoding: characters, as: UTF8.self),
            year: year, week: week, serialNumber: UInt32(serialNumber))
    }

    /// True when `line` is exactly `text`, byte for byte.
    private static func same(_ line: String, _ text: StaticString) -> Bool {
        line.utf8.elementsEqual(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// The bytes of `line` after `prefix`, when it starts with it byte for byte.
    private static func rest(_ line: String, after prefix: String) -> ArraySlice<UInt8>? {
        let bytes = Array(line.utf8)
        let head = Array(prefix.utf8)
        guard bytes.starts(with: head) else { return nil }
        return bytes[head.count...]
    }

    /// Exactly 8 hex digits (either case).
    static func hex32(_ text: some Collection<UInt8>) -> UInt32? {
        guard text.count == 8, let bytes = Hex.decode(text) else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The message the device signs: "XTALK-AUTH-V1" ‖ 0x00 ‖ nonce ‖ device id (big-endian).
    static func signedMessage(nonce: [UInt8], deviceID: UInt32) -> [UInt8] {
        Array("XTALK-AUTH-V1".utf8) + [0x00] + nonce
            + [
                UInt8(deviceID >> 24), UInt8(truncatingIfNeeded: deviceID >> 16),
                UInt8(truncatingIfNeeded: deviceID >> 8), UInt8(truncatingIfNeeded: deviceID),
            ]
    }
}
