import Foundation
import Testing
@testable import XTalkDeviceAuthSdk
import XTalkTestSupport

/// The `auth-replies` and `device-id` fuzz targets' seeds, replayed through
/// the targets' own oracles (Tests/XTalkDeviceAuthSdkTests/FuzzOracles.swift),
/// so that every `swift test` checks them; and the inputs the fuzzers found,
/// minimized and pinned.
@Suite("Fuzz regression: authentication replies and device identifiers (Fuzz/README.md)", .timeLimit(.minutes(5)))
struct AuthFuzzRegressionTests {
    @Test("the committed corpus is there")
    func corpusIsThere() {
        #expect(FuzzSeed.all("auth-replies").count >= 20, "seeds under \(FuzzSeed.corpus.path)/auth-replies")
        #expect(FuzzSeed.all("device-id").count >= 20, "seeds under \(FuzzSeed.corpus.path)/device-id")
    }

    @Test("every auth-replies seed passes its oracle", arguments: FuzzSeed.all("auth-replies"))
    func authRepliesOracle(_ seed: FuzzSeed) {
        do {
            try AuthRepliesFuzzOracle.check(seed.bytes)
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("every device-id seed passes its oracle", arguments: FuzzSeed.all("device-id"))
    func deviceIDOracle(_ seed: FuzzSeed) {
        do {
            try DeviceIDFuzzOracle.check(seed.bytes)
        } catch {
            Issue.record("\(error)")
        }
    }

    // MARK: Found by the fuzzers
    //
    // The parsers compared text with Swift `String` semantics (grapheme
    // clusters, canonical equivalence) where PROTOCOL.md defines bytes: a
    // character that a combining mark or joiner extends is a different
    // `Character`, and U+212A KELVIN SIGN is canonically equivalent to "K". So
    // text that is not the format was read as if it were. They now compare
    // UTF-8 bytes. The BLE client's lines are printable ASCII (the framer makes
    // the others raw), so reaching this takes a custom `DeviceAuthTransport`,
    // or text given to the public `XTalkDeviceIDCodec.parse`.

    @Test("parse rejects a combining mark after the leading whitespace (device-id 20cc8131)")
    func parseCombiningMarkAfterSpace() throws {
        // " \u{301}1": `Character.isWhitespace` is the first scalar's property, so trimming by
        // characters took the cluster " \u{301}" for whitespace, accent and all.
        #expect(XTalkDeviceIDCodec.parse(" \u{301}1") == nil)
        #expect(XTalkDeviceIDCodec.parse("1 \u{301}") == nil)
        #expect(throws: Never.self) { try DeviceIDFuzzOracle.check([0x20, 0xCC, 0x81, 0x31]) }
    }

    @Test("a +CHAL: line whose colon a joiner extends is a malformed reply (auth-replies 2b4348414c3ae2808d)")
    func challengePrefixExtendedByJoiner() {
        // `hasPrefix("+CHAL:")` compared characters: ":\u{200D}" is not ":", so the line was skipped.
        #expect(AuthenticationReplies.challenge(["+CHAL:\u{200D}"]) == .failure(.malformedChallengeReply))
        // The consequence was that a later +CHAL: line was taken instead of the malformed first one.
        let valid = "+CHAL:B5803039," + String(repeating: "AB", count: 64)
        #expect(AuthenticationReplies.challenge(["+CHAL:\u{301}ERR", valid]) == .failure(.malformedChallengeReply))
        #expect(throws: Never.self) {
            try AuthRepliesFuzzOracle.check([0x2B, 0x43, 0x48, 0x41, 0x4C, 0x3A, 0xE2, 0x80, 0x8D])
        }
    }

    @Test("a +ID: line whose colon a combining mark extends is the identity reply, malformed")
    func identityPrefixExtendedByMark() {
        #expect(AuthenticationReplies.identity(["+ID:\u{301}", "+ID:B5803039,EFUSE,XT2648012345"]) == nil)
    }

    @Test("probe: O followed by KELVIN SIGN is not OK")
    func probeKelvinSign() {
        // "O\u{212A}" == "OK" for `String` (canonical equivalence), but not byte for byte.
        #expect(AuthenticationReplies.probe(["+AUTH:1", "O\u{212A}"]) == nil)
        #expect(throws: Never.self) { try AuthRepliesFuzzOracle.check(Array("+AUTH:1\nO\u{212A}".utf8)) }
    }
}
