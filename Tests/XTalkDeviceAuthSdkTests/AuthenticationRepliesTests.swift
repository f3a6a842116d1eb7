import Testing
@testable import XTalkDeviceAuthSdk

@Suite("Authentication reply parsers (PROTOCOL.md sections 8 and 9)", .timeLimit(.minutes(5)))
struct AuthenticationRepliesTests {
    static let signature = String(repeating: "AB", count: 64)

    static let probes: [([String], Bool?)] = [
        (["+AUTH:1", "OK"], true),
        (["+AUTH:0", "OK"], false),
        (["garbage", "+AUTH:1", "OK"], true),
        (["+AUTH:1"], nil),
        (["+AUTH:1", "ERROR"], nil),
        (["+AUTH:2", "OK"], nil),
        (["+AUTH: 1", "OK"], nil),
        (["OK", "+AUTH:1"], nil),
        (["ERROR"], nil),
        ([], nil),
    ]

    @Test("probe: +AUTH:0/1 followed by OK, nothing else", arguments: probes)
    func probe(_ lines: [String], _ expected: Bool?) {
        #expect(AuthenticationReplies.probe(lines) == expected)
    }

    static let challenges: [([String], XTalkDeviceAuthError?)] = [
        (["+CHAL:B5803039," + signature, "OK"], nil),
        (["+CHAL:b5803039," + signature.lowercased(), "OK"], nil),
        (["OK"], .challengeMissing),
        (["ERROR"], .challengeMissing),
        (["+CHAL:ERR", "OK"], .invalidChallenge),
        (["+CHAL:", "OK"], .malformedChallengeReply),
        (["+CHAL:B5803039", "OK"], .malformedChallengeReply),
        (["+CHAL:B580303," + signature, "OK"], .malformedChallengeReply),
        (["+CHAL:B58030390," + signature, "OK"], .malformedChallengeReply),
        (["+CHAL:B580303G," + signature, "OK"], .malformedChallengeReply),
        (["+CHAL:B5803039,", "OK"], .malformedChallengeReply),
        (["+CHAL:B5803039," + signature + "A", "OK"], .malformedChallengeReply),
        (["+CHAL:B5803039,XY" + signature, "OK"], .malformedChallengeReply),
        (["+CHAL:B5803039," + String(repeating: "00", count: 63), "OK"], .invalidSignatureLength(63)),
        (["+CHAL:B5803039," + String(repeating: "00", count: 65), "OK"], .invalidSignatureLength(65)),
        (["+CHAL:B5803039," + String(repeating: "00", count: 1_000), "OK"], .invalidSignatureLength(1_000)),
    ]

    @Test("challenge replies", arguments: challenges)
    func challenge(_ lines: [String], _ expected: XTalkDeviceAuthError?) {
        switch AuthenticationReplies.challenge(lines) {
        case .success(let reply):
            #expect(expected == nil)
            #expect(reply.deviceID == 0xB580_3039)
            #expect(reply.signature == [UInt8](repeating: 0xAB, count: 64))
        case .failure(let error):
            #expect(error == expected)
        }
    }

    static let identities: [(String, UInt32, XTalkDeviceIdentitySource, Int, Int, UInt32)] = [
        (
            "+ID:B5803039,EFUSE,XT2648012345", UInt32(0xB580_3039), XTalkDeviceIdentitySource.efuseSn, 26, 48,
            UInt32(12345)
        ),
        ("+ID:35803039,SN,XT2648012345", 0x3580_3039, .sn, 26, 48, 12345),
        ("+ID:80080000,SN,XT0001000000", 0x8008_0000, .sn, 0, 1, 0),
        ("+ID:FFAFFFFF,EFUSE,XT6353524287", 0xFFAF_FFFF, .efuseSn, 63, 53, 524_287),
    ]

    @Test("identity replies: valid ones", arguments: identities)
    func identity(
        _ line: String, _ id: UInt32, _ source: XTalkDeviceIdentitySource, _ year: Int, _ week: Int, _ serial: UInt32
    ) {
        let reply = AuthenticationReplies.identity(["AT+ID?", line, "OK"])
        #expect(reply?.rawDeviceID == id)
        #expect(reply?.source == source)
        #expect(reply?.year == year && reply?.week == week && reply?.serialNumber == serial)
    }

    @Test(
        "identity replies: malformed ones",
        arguments: [
            "+ID:B5803039,EFUSE", "+ID:B5803039,EFUSE,XT2648012345,extra", "+ID:B580303,EFUSE,XT2648012345",
            "+ID:B5803039,efuse,XT2648012345", "+ID:B5803039,SERIAL,XT2648012345", "+ID:B5803039,SN,XX2648012345",
            "+ID:B5803039,SN,XT264801234", "+ID:B5803039,SN,XT26480123456", "+ID:B5803039,SN,XT26480123a5",
            "+ID:B5803039,SN,XT2600012345", "+ID:B5803039,SN,XT2654012345", "+ID:B5803039,SN,XT6448012345",
            "+ID:B5803039,SN,XT2648524288", "+ID:B5803039,SN,XT2648999999", "+ID:", "+IDB5803039,SN,XT2648012345",
        ])
    func malformedIdentity(_ line: String) {
        #expect(AuthenticationReplies.identity([line, "OK"]) == nil)
    }

    @Test("the signed message is the protocol's bytes")
    func signedMessage() {
        let message = AuthenticationReplies.signedMessage(nonce: Array(0..<16), deviceID: 0x8D30_303A)
        #expect(message == Array("XTALK-AUTH-V1".utf8) + [0] + Array(0..<16) + [0x8D, 0x30, 0x30, 0x3A])
    }
}
