import Testing
import XTalkDeviceAuthSdk

@Suite("XTalkDeviceIDCodec (PROTOCOL.md section 9)", .timeLimit(.minutes(5)))
struct XTalkDeviceIDCodecTests {
    @Test("canonicalize sets bit 31 and is idempotent")
    func canonicalize() {
        #expect(XTalkDeviceIDCodec.canonicalize(0) == 0x8000_0000)
        #expect(XTalkDeviceIDCodec.canonicalize(0x3580_3039) == 0xB580_3039)
        #expect(XTalkDeviceIDCodec.canonicalize(0xB580_3039) == 0xB580_3039)
        #expect(XTalkDeviceIDCodec.canonicalize(0xFFFF_FFFF) == 0xFFFF_FFFF)
        for raw: UInt32 in [0, 1, 0x7FFF_FFFF, 0x8000_0000, 0x1234_5678] {
            let once = XTalkDeviceIDCodec.canonicalize(raw)
            #expect(XTalkDeviceIDCodec.canonicalize(once) == once)
        }
    }

    @Test(
        "fromSn packs year, week and serial at their widths",
        arguments: [
            (2026, 48, UInt32(12345), UInt32(0xB580_3039)),
            (26, 48, 12345, 0xB580_3039),  // two-digit year
            (2000, 0, 0, 0x8000_0000),  // every field at its minimum
            (2063, 63, 524_287, 0xFFFF_FFFF),  // every field at its maximum
            (0, 1, 0, 0x8008_0000),
            (63, 53, 1, 0xFFA8_0001),
            (2064, 0, 0, 0x8000_0000),  // one past: masked to 0
            (64, 0, 0, 0x8000_0000),
            (2000, 64, 0, 0x8000_0000),
            (2000, 0, 524_288, 0x8000_0000),
            (2000, -1, 0, 0x81F8_0000),  // masked, never a crash
            (-1, 0, 0, 0xFE00_0000),
        ])
    func fromSn(_ year: Int, _ week: Int, _ serial: UInt32, _ expected: UInt32) {
        #expect(XTalkDeviceIDCodec.fromSn(year: year, week: week, serial: serial) == expected)
    }

    @Test(
        "parse accepts decimal and 0x hex with surrounding whitespace, canonicalized",
        arguments: [
            ("0xB5803039", UInt32(0xB580_3039)),
            ("0Xb5803039", 0xB580_3039),
            ("0x35803039", 0xB580_3039),  // legacy form
            ("  0x1\n", 0x8000_0001),
            ("\t42 ", 0x8000_002A),
            ("0", 0x8000_0000),
            ("0x0", 0x8000_0000),
            ("4294967295", 0xFFFF_FFFF),
            ("0xFFFFFFFF", 0xFFFF_FFFF),
            ("0x000000000001", 0x8000_0001),
            ("00012", 0x8000_000C),
        ])
    func parse(_ text: String, _ expected: UInt32) {
        #expect(XTalkDeviceIDCodec.parse(text) == expected)
    }

    @Test(
        "parse rejects empty text, signs, bad digits and overflow",
        arguments: [
            "", "   ", "0x", "0X", "-1", "+1", "0x-1", "4294967296", "0x100000000", "99999999999999999999999",
            "12a", "0xG1", "1 2", "0x 1", "x10", "0b101", "1.0", "١٢", "0x٣",
        ])
    func parseRejects(_ text: String) {
        #expect(XTalkDeviceIDCodec.parse(text) == nil)
    }

    @Test("format is 0x and 8 uppercase hex digits of the canonical identifier")
    func format() {
        #expect(XTalkDeviceIDCodec.format(0x3580_3039) == "0xB5803039")
        #expect(XTalkDeviceIDCodec.format(0) == "0x80000000")
        #expect(XTalkDeviceIDCodec.format(0x8000_000A) == "0x8000000A")
        #expect(XTalkDeviceIDCodec.parse(XTalkDeviceIDCodec.format(0x1234_ABCD)) == 0x9234_ABCD)
    }
}
