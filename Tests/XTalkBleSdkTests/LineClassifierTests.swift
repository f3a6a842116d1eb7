import Foundation
import Testing
@testable import XTalkBleSdk

@Suite("Line classes and DI/CRCERR field rules (PROTOCOL.md sections 5 and 6)", .timeLimit(.minutes(5)))
struct LineClassifierTests {
    struct Vector: CustomTestStringConvertible, Sendable {
        let line: String
        let expected: LineClass
        var testDescription: String { line.count > 60 ? String(line.prefix(60)) + "…" : line }
    }

    static let hello = Data("Hello".utf8)

    static let lineClasses: [Vector] = [
        // Final result codes and ordinary response lines.
        Vector(line: "OK", expected: .response(.ok)),
        Vector(line: "ERROR", expected: .response(.error)),
        Vector(line: "+CME ERROR: 10", expected: .response(.error)),
        Vector(line: "+CME ERROR:", expected: .response(.error)),
        Vector(line: "+ERR:3", expected: .response(.error)),
        Vector(line: "OK ", expected: .response(nil)),
        Vector(line: " OK", expected: .response(nil)),
        Vector(line: "ok", expected: .response(nil)),
        Vector(line: "OKAY", expected: .response(nil)),
        Vector(line: "ERRORS", expected: .response(nil)),
        Vector(line: "+CME ERROR 10", expected: .response(nil)),
        Vector(line: "+VER:2.1.0", expected: .response(nil)),
        Vector(line: "AT+VER?", expected: .response(nil)),
        Vector(line: "+", expected: .response(nil)),
        // URCs.
        Vector(line: "+READY", expected: .ready),
        Vector(line: "+READY v2", expected: .ready),
        Vector(line: "+SENDFIN:OK", expected: .sendFinished(failure: nil)),
        Vector(line: "+SENDFIN:FAIL,lbt", expected: .sendFinished(failure: "lbt")),
        Vector(line: "+SENDFIN:FAIL,", expected: .sendFinished(failure: "")),
        Vector(line: "+SENDFIN:", expected: .sendFinished(failure: "")),
        Vector(line: "+SENDFIN:MAYBE", expected: .sendFinished(failure: "MAYBE")),
        Vector(
            line: "+DI:cnt=12,len=5,slot=3,snr=7,rssi=-87,txp=14,data=48656C6C6F",
            expected: .radioFrame(hello, XTalkDiMeta(diCnt: 12, len: 5, slot: 3, snr: 7, rssi: -87, txp: 14))),
        Vector(line: "+CRCERR:cnt=2,rssi=-101", expected: .crcError(XTalkDiMeta(diCnt: 2, rssi: -101))),
        // Prefixes are case-sensitive and exact.
        Vector(line: "+di:data=00", expected: .response(nil)),
        Vector(line: "+DI", expected: .response(nil)),
        Vector(line: "DI:data=00", expected: .response(nil)),
    ]

    @Test("line classes", arguments: lineClasses)
    func lineClass(_ vector: Vector) {
        #expect(LineClassifier.classify(vector.line) == vector.expected)
    }

    static let diFields: [Vector] = [
        // Every field, in any order; unknown keys ignored; absent keys nil.
        Vector(line: "+DI:data=48656C6C6F", expected: .radioFrame(hello, XTalkDiMeta())),
        Vector(line: "+DI:data=48656c6c6f", expected: .radioFrame(hello, XTalkDiMeta())),
        Vector(line: "+DI:data=48656C6c6F,len=5", expected: .radioFrame(hello, XTalkDiMeta(len: 5))),
        Vector(
            line: "+DI:lsnr=-3,lrssi=-90,rsnr=4,rrssi=-95,data=00,cnt=0,slot=0,txp=-9",
            expected: .radioFrame(
                Data([0]),
                XTalkDiMeta(
                    diCnt: 0, slot: 0, localSnr: -3, localRssi: -90,
                    remoteSnr: 4, remoteRssi: -95, txp: -9))),
        Vector(
            line: "+DI:snr=-20,rssi=-140,data=FF",
            expected: .radioFrame(Data([0xFF]), XTalkDiMeta(snr: -20, rssi: -140))),
        Vector(line: "+DI:freq=868100000,data=01,vendor=x", expected: .radioFrame(Data([1]), XTalkDiMeta())),
        Vector(line: "+DI:x=,data=01", expected: .radioFrame(Data([1]), XTalkDiMeta())),
        Vector(line: "+DI:data=01,x=1,x=2", expected: .radioFrame(Data([1]), XTalkDiMeta())),
        Vector(
            line: "+DI:cnt=9223372036854775807,data=01",
            expected: .radioFrame(Data([1]), XTalkDiMeta(diCnt: Int.max))),
        Vector(
            line: "+DI:rssi=-9223372036854775808,data=01",
            expected: .radioFrame(Data([1]), XTalkDiMeta(rssi: Int.min))),
        Vector(line: "+DI:cnt=007,data=01", expected: .radioFrame(Data([1]), XTalkDiMeta(diCnt: 7))),
        // Malformed +DI: lines stay AT lines only.
        Vector(line: "+DI:", expected: .malformedRadioFrame(reason: "no fields")),
        Vector(line: "+DI:cnt=1", expected: .malformedRadioFrame(reason: "no 'data' field")),
        Vector(line: "+DI:data=", expected: .malformedRadioFrame(reason: "'data' is empty")),
        Vector(line: "+DI:data=ABC", expected: .malformedRadioFrame(reason: "'data' is not even-length hex")),
        Vector(line: "+DI:data=GG", expected: .malformedRadioFrame(reason: "'data' is not even-length hex")),
        Vector(line: "+DI:data=0x01", expected: .malformedRadioFrame(reason: "'data' is not even-length hex")),
        Vector(line: "+DI:data= 01", expected: .malformedRadioFrame(reason: "'data' is not even-length hex")),
        Vector(line: "+DI:data=01,data=02", expected: .malformedRadioFrame(reason: "'data' appears twice")),
        Vector(
            line: "+DI:len=4,data=48656C6C6F",
            expected: .malformedRadioFrame(reason: "'len' is 4 but 'data' holds 5 bytes")),
        Vector(
            line: "+DI:len=-5,data=48656C6C6F",
            expected: .malformedRadioFrame(reason: "'len' is -5 but 'data' holds 5 bytes")),
        Vector(line: "+DI:cnt=abc,data=01", expected: .malformedRadioFrame(reason: "'cnt' is not a decimal integer")),
        Vector(line: "+DI:cnt=,data=01", expected: .malformedRadioFrame(reason: "'cnt' is not a decimal integer")),
        Vector(line: "+DI:rssi=-,data=01", expected: .malformedRadioFrame(reason: "'rssi' is not a decimal integer")),
        Vector(line: "+DI:rssi=+5,data=01", expected: .malformedRadioFrame(reason: "'rssi' is not a decimal integer")),
        Vector(line: "+DI:snr=1.5,data=01", expected: .malformedRadioFrame(reason: "'snr' is not a decimal integer")),
        Vector(line: "+DI:slot= 3,data=01", expected: .malformedRadioFrame(reason: "'slot' is not a decimal integer")),
        Vector(line: "+DI:txp=0x10,data=01", expected: .malformedRadioFrame(reason: "'txp' is not a decimal integer")),
        Vector(
            line: "+DI:lsnr=9223372036854775808,data=01",
            expected: .malformedRadioFrame(reason: "'lsnr' is not a decimal integer")),
        Vector(line: "+DI:lrssi=x,data=01", expected: .malformedRadioFrame(reason: "'lrssi' is not a decimal integer")),
        Vector(line: "+DI:rsnr=x,data=01", expected: .malformedRadioFrame(reason: "'rsnr' is not a decimal integer")),
        Vector(line: "+DI:rrssi=x,data=01", expected: .malformedRadioFrame(reason: "'rrssi' is not a decimal integer")),
        Vector(line: "+DI:cnt=1,cnt=2,data=01", expected: .malformedRadioFrame(reason: "'cnt' appears twice")),
        Vector(line: "+DI:cnt=1,,data=01", expected: .malformedRadioFrame(reason: "field '' has no '='")),
        Vector(line: "+DI:data=01,", expected: .malformedRadioFrame(reason: "field '' has no '='")),
        Vector(line: "+DI:flag,data=01", expected: .malformedRadioFrame(reason: "field 'flag' has no '='")),
        Vector(line: "+DI:=1,data=01", expected: .malformedRadioFrame(reason: "a field has an empty key")),
        Vector(line: "+DI:CNT=1,data=01", expected: .radioFrame(Data([1]), XTalkDiMeta())),
        Vector(line: "+DI:DATA=01", expected: .malformedRadioFrame(reason: "no 'data' field")),
    ]

    @Test("+DI: field rules", arguments: diFields)
    func diField(_ vector: Vector) {
        #expect(LineClassifier.classify(vector.line) == vector.expected)
    }

    static let crcFields: [Vector] = [
        Vector(
            line: "+CRCERR:cnt=3,len=20,slot=1,snr=-2,rssi=-110,lsnr=1,lrssi=-2,rsnr=3,rrssi=-4,txp=22",
            expected: .crcError(
                XTalkDiMeta(
                    diCnt: 3, len: 20, slot: 1, snr: -2, rssi: -110, localSnr: 1,
                    localRssi: -2, remoteSnr: 3, remoteRssi: -4, txp: 22))),
        // `data` and `len` carry no payload rule in a CRC report.
        Vector(line: "+CRCERR:len=7,data=XYZ", expected: .crcError(XTalkDiMeta(len: 7))),
        Vector(line: "+CRCERR:vendor=1", expected: .crcError(XTalkDiMeta())),
        // A report without fields still reports a failed frame (absent keys leave meta fields nil).
        Vector(line: "+CRCERR:", expected: .crcError(XTalkDiMeta())),
        Vector(line: "+CRCERR:rssi=loud", expected: .malformedCrcError(reason: "'rssi' is not a decimal integer")),
        Vector(line: "+CRCERR:cnt=1,cnt=1", expected: .malformedCrcError(reason: "'cnt' appears twice")),
        Vector(line: "+CRCERR:cnt", expected: .malformedCrcError(reason: "field 'cnt' has no '='")),
    ]

    @Test("+CRCERR: field rules", arguments: crcFields)
    func crcField(_ vector: Vector) {
        #expect(LineClassifier.classify(vector.line) == vector.expected)
    }

    @Test("every URC class is unsolicited, every response class is not")
    func unsolicited() {
        for vector in Self.lineClasses + Self.diFields + Self.crcFields {
            let expectedURC = ["+DI:", "+CRCERR:", "+SENDFIN:", "+READY"].contains { vector.line.hasPrefix($0) }
            #expect(LineClassifier.classify(vector.line).isUnsolicited == expectedURC, "\(vector.line)")
        }
    }

    @Test("a maximum payload (240 bytes) parses")
    func maximumPayload() {
        let payload = (0..<240).map { UInt8($0) }
        let line = "+DI:len=240,data=" + Hex.encode(payload)
        #expect(LineClassifier.classify(line) == .radioFrame(Data(payload), XTalkDiMeta(len: 240)))
    }
}
