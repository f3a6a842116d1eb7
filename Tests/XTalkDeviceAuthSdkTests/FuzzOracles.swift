import Foundation
#if canImport(XTalkDeviceAuthSdk)
    @testable import XTalkDeviceAuthSdk
#endif

// The oracles of the `auth-replies` and `device-id` fuzz targets (Fuzz/README.md).
//
// This one file is compiled twice: into XTalkDeviceAuthSdkTests, which replays
// every seed of Fuzz/Corpus and every pinned crash through it, and by
// `Fuzz/run` into the fuzzers, together with the parsers' sources as one module
// (hence the conditional import). A broken rule throws `FuzzOracleFailure`:
// the fuzzer traps on it, the tests report it.
//
// The parsers promise to be strict: a reply that does not match its format
// exactly is rejected. So the references below work on the UTF-8 bytes of the
// lines (PROTOCOL.md sections 8 and 9 define bytes), and the SDK must agree with
// them for any text a transport may return, not only for the printable ASCII
// lines of the BLE client.

/// A rule the SDK broke for one fuzz input.
struct FuzzOracleFailure: Error, CustomStringConvertible {
    let description: String
}

/// Throws `FuzzOracleFailure(message)` unless `condition` holds.
@inline(__always)
func fuzzRequire(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzOracleFailure) {
    if !condition { throw FuzzOracleFailure(description: message()) }
}

/// `text` with every scalar outside printable ASCII spelled `\u{…}`, for failure messages.
func fuzzEscaped(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        if (0x20...0x7E).contains(scalar.value) && scalar != "\"" && scalar != "\\" {
            out.unicodeScalars.append(scalar)
        } else {
            out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        }
    }
    return out + "\""
}

func fuzzEscaped(_ lines: [String]) -> String { "[" + lines.map { fuzzEscaped($0) }.joined(separator: ", ") + "]" }

/// The `auth-replies` target: the input is a command's response, lines
/// separated by LF (invalid UTF-8 replaced), given to all three parsers.
enum AuthRepliesFuzzOracle {
    static func lines(_ bytes: [UInt8]) -> [String] {
        bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    static func check(_ bytes: [UInt8]) throws(FuzzOracleFailure) {
        let lines = lines(bytes)

        let probe = AuthenticationReplies.probe(lines)
        let expectedProbe = referenceProbe(lines)
        try fuzzRequire(
            probe == expectedProbe,
            "probe(\(fuzzEscaped(lines))) is \(String(describing: probe)), expected "
                + "\(String(describing: expectedProbe))"
        )

        let challenge = AuthenticationReplies.challenge(lines)
        let expectedChallenge = referenceChallenge(lines)
        try fuzzRequire(
            challenge == expectedChallenge,
            "challenge(\(fuzzEscaped(lines))) is \(challenge), expected \(expectedChallenge)")
        if case .success(let reply) = challenge {
            let line = "+CHAL:" + upperHex(bigEndian(reply.deviceID)) + "," + upperHex(reply.signature)
            try fuzzRequire(
                AuthenticationReplies.challenge([line]) == .success(reply),
                "re-serialised \(fuzzEscaped(line)) parses differently")
            try fuzzRequire(Hex.encode(reply.signature) == upperHex(reply.signature), "Hex.encode")
            let nonce = Array(reply.signature.prefix(16))
            let message = AuthenticationReplies.signedMessage(nonce: nonce, deviceID: reply.deviceID)
            try fuzzRequire(
                message == Array("XTALK-AUTH-V1".utf8) + [0] + nonce + bigEndian(reply.deviceID),
                "signedMessage(\(nonce), \(reply.deviceID)) is \(message)")
        }

        let identity = AuthenticationReplies.identity(lines)
        let expectedIdentity = referenceIdentity(lines)
        try fuzzRequire(
            identity == expectedIdentity,
            "identity(\(fuzzEscaped(lines))) is \(String(describing: identity)), expected "
                + "\(String(describing: expectedIdentity))"
        )
        if let identity {
            let source = identity.source == .efuseSn ? "EFUSE" : "SN"
            let line = "+ID:" + upperHex(bigEndian(identity.rawDeviceID)) + "," + source + "," + identity.serial
            try fuzzRequire(
                AuthenticationReplies.identity(["OK", line]) == identity,
                "re-serialised \(fuzzEscaped(line)) parses differently")
            // The identifier built from the serial's fields holds those fields.
            let built = XTalkDeviceIDCodec.fromSn(
                year: identity.year, week: identity.week, serial: identity.serialNumber)
            try fuzzRequire(
                Int(built >> 25 & 0x3F) == identity.year && Int(built >> 19 & 0x3F) == identity.week
                    && built & 0x7FFFF == identity.serialNumber && built >> 31 == 1,
                "fromSn(\(identity.year), \(identity.week), \(identity.serialNumber)) is \(built)")
        }

        // The hex codec round-trips any bytes.
        let hex = Hex.encode(bytes)
        try fuzzRequire(Hex.decode(hex.utf8) == bytes, "Hex.decode(Hex.encode(bytes))")
        try fuzzRequire(Hex.decode(hex.lowercased().utf8) == bytes, "Hex.decode(lowercase)")
    }

    // MARK: References (bytes)

    static func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// A `+AUTH:0`/`+AUTH:1` line directly followed by an `OK` line, the first such pair.
    static func referenceProbe(_ lines: [String]) -> Bool? {
        for index in lines.indices.dropLast() where utf8(lines[index + 1]) == utf8("OK") {
            if utf8(lines[index]) == utf8("+AUTH:0") { return false }
            if utf8(lines[index]) == utf8("+AUTH:1") { return true }
        }
        return nil
    }

    static func referenceChallenge(_ lines: [String]) -> Result<
        AuthenticationReplies.ChallengeReply, XTalkDeviceAuthError
    > {
        guard let line = lines.map(utf8).first(where: { $0.starts(with: utf8("+CHAL:")) }) else {
            return .failure(.challengeMissing)
        }
        let body = Array(line.dropFirst(6))
        if body == utf8("ERR") { return .failure(.invalidChallenge) }
        guard let comma = body.firstIndex(of: UInt8(ascii: ",")) else { return .failure(.malformedChallengeReply) }
        let idDigits = Array(body[..<comma])
        guard idDigits.count == 8, let id = referenceHex(idDigits),
            let signature = referenceHex(Array(body[(comma + 1)...])), !signature.isEmpty
        else { return .failure(.malformedChallengeReply) }
        guard signature.count == 64 else { return .failure(.invalidSignatureLength(signature.count)) }
        let deviceID = id.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return .success(AuthenticationReplies.ChallengeReply(deviceID: deviceID, signature: signature))
    }

    static func referenceIdentity(_ lines: [String]) -> AuthenticationReplies.IdentityReply? {
        guard let line = lines.map(utf8).first(where: { $0.starts(with: utf8("+ID:")) }) else { return nil }
        let fields = line.dropFirst(4).split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).map {
            Array($0)
        }
        guard fields.count == 3, fields[0].count == 8, let id = referenceHex(fields[0]) else { return nil }
        let source: XTalkDeviceIdentitySource
        if fields[1] == utf8("EFUSE") {
            source = .efuseSn
        } else if fields[1] == utf8("SN") {
            source = .sn
        } else {
            return nil
        }
        let serial = fields[2]
        let digits = serial.dropFirst(2)
        guard serial.count == 12, serial.starts(with: utf8("XT")), digits.allSatisfy({ (0x30...0x39).contains($0) }),
            let year = Int(String(decoding: digits.prefix(2), as: UTF8.self)),
            let week = Int(String(decoding: digits.dropFirst(2).prefix(2), as: UTF8.self)),
            let number = Int(String(decoding: digits.suffix(6), as: UTF8.self)),
            year <= 63, (1...53).contains(week), number <= 524_287
        else { return nil }
        return AuthenticationReplies.IdentityReply(
            rawDeviceID: id.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }, source: source,
            serial: String(decoding: serial, as: UTF8.self), year: year, week: week, serialNumber: UInt32(number))
    }

    static let hexDigits = (Array("0123456789abcdef".utf8), Array("0123456789ABCDEF".utf8))

    /// Even-length hex of either case.
    static func referenceHex(_ text: [UInt8]) -> [UInt8]? {
        func nibble(_ c: UInt8) -> UInt8? {
            (hexDigits.0.firstIndex(of: c) ?? hexDigits.1.firstIndex(of: c)).map { UInt8($0) }
        }
        guard text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: text.count, by: 2) {
            guard let high = nibble(text[index]), let low = nibble(text[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    static func upperHex(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.flatMap { [hexDigits.1[Int($0 >> 4)], hexDigits.1[Int($0 & 0xF)]] }, as: UTF8.self)
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}

/// The `device-id` target: `XTalkDeviceIDCodec` (PROTOCOL.md section 9). The
/// input is parsed as text (invalid UTF-8 replaced) against a reference, and
/// read as identifiers and serial fields whose conversions must round-trip.
enum DeviceIDFuzzOracle {
    static func check(_ bytes: [UInt8]) throws(FuzzOracleFailure) {
        let text = String(decoding: bytes, as: UTF8.self)
        let parsed = XTalkDeviceIDCodec.parse(text)
        let expected = referenceParse(text)
        try fuzzRequire(
            parsed == expected,
            "parse(\(fuzzEscaped(text))) is \(String(describing: parsed)), expected \(String(describing: expected))")
        if let parsed { try checkValue(parsed) }

        // Identifiers: the input's bytes read as big-endian words, and the edges.
        var values: [UInt32] = [0, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF]
        for start in stride(from: 0, to: bytes.count - 3, by: 4).prefix(4) {
            values.append(bytes[start..<start + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        }
        for value in values { try checkValue(value) }

        // Serial fields of any range: never a trap, each masked to its width.
        if bytes.count >= 20 {
            func int(_ start: Int) -> Int { bytes[start..<start + 8].reduce(0) { $0 << 8 | Int($1) } }
            let year = int(0)
            let week = int(8)
            let serial = bytes[16..<20].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let built = XTalkDeviceIDCodec.fromSn(year: year, week: week, serial: serial)
            let yy = UInt32(truncatingIfNeeded: year >= 2000 ? year - 2000 : year) & 0x3F
            let ww = UInt32(truncatingIfNeeded: week) & 0x3F
            let expected = 0x8000_0000 | yy << 25 | ww << 19 | serial & 0x7FFFF
            try fuzzRequire(
                built == expected,
                "fromSn(year: \(year), week: \(week), serial: \(serial)) is \(built), expected \(expected)")
        }
    }

    /// Round trips of one identifier through every conversion.
    static func checkValue(_ raw: UInt32) throws(FuzzOracleFailure) {
        let canonical = XTalkDeviceIDCodec.canonicalize(raw)
        try fuzzRequire(
            canonical == raw | 0x8000_0000 && XTalkDeviceIDCodec.canonicalize(canonical) == canonical,
            "canonicalize(\(raw)) is \(canonical)")
        let formatted = XTalkDeviceIDCodec.format(raw)
        let expectedText = "0x" + String(canonical, radix: 16, uppercase: true)
        try fuzzRequire(
            formatted == expectedText && XTalkDeviceIDCodec.format(canonical) == formatted,
            "format(\(raw)) is \(formatted), expected \(expectedText)")
        let spellings = [
            formatted, formatted.lowercased(), "0X" + String(raw, radix: 16), String(raw), String(canonical),
            " \t" + String(raw) + "\r\n", "\u{A0}0x" + String(raw, radix: 16, uppercase: true) + "\u{2028}",
            "0x000" + String(raw, radix: 16), "000" + String(raw),
        ]
        for spelling in spellings {
            let parsed = XTalkDeviceIDCodec.parse(spelling)
            try fuzzRequire(
                parsed == canonical,
                "parse(\(fuzzEscaped(spelling))) is \(String(describing: parsed)), expected \(canonical)")
        }
        for spelling in [
            "-" + String(raw), "+" + String(raw), "0x", "0x-" + String(raw, radix: 16), String(raw) + "x",
            "0 " + String(raw),
        ] {
            let parsed = XTalkDeviceIDCodec.parse(spelling)
            try fuzzRequire(
                parsed == nil, "parse(\(fuzzEscaped(spelling))) is \(String(describing: parsed)), expected nil")
        }
        let yy = Int(canonical >> 25 & 0x3F)
        let ww = Int(canonical >> 19 & 0x3F)
        let serial = canonical & 0x7FFFF
        for year in [yy, 2000 + yy] {
            let built = XTalkDeviceIDCodec.fromSn(year: year, week: ww, serial: serial | (raw & 0xFFF8_0000))
            try fuzzRequire(
                built == canonical,
                "fromSn(year: \(year), week: \(ww), serial: \(serial)) is \(built), expected \(canonical)")
        }
    }

    /// PROTOCOL.md section 9: surrounding whitespace (Unicode White_Space
    /// characters), then `0x`/`0X` and hex digits or decimal digits, at most 0xFFFFFFFF.
    static func referenceParse(_ text: String) -> UInt32? {
        var scalars = Array(text.unicodeScalars)[...]
        while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        var digits = String(String.UnicodeScalarView(scalars))
        var radix = 10
        if digits.utf8.starts(with: "0x".utf8) || digits.utf8.starts(with: "0X".utf8) {
            digits = String(String.UnicodeScalarView(digits.unicodeScalars.dropFirst(2)))
            radix = 16
        }
        let allowed = radix == 16 ? "0123456789abcdefABCDEF" : "0123456789"
        guard !digits.isEmpty, digits.unicodeScalars.allSatisfy({ allowed.unicodeScalars.contains($0) }),
            let value = UInt64(digits, radix: radix),  // nil: beyond UInt64, so beyond UInt32 too
            value <= UInt64(UInt32.max)
        else { return nil }
        return UInt32(value) | 0x8000_0000
    }
}
