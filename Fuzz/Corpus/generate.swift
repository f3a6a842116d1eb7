// Writes the seed corpus of the fuzz targets: `swift Fuzz/Corpus/generate.swift`
// from the package root. Each seed is one small, meaningful input (lines from
// PROTOCOL.md, their edge cases and their malformed variants); libFuzzer mutates
// from there. Rewrites every file of Fuzz/Corpus/<target>/.
//
// The stream targets (`receive`, `framer`) share an input format: a 6-byte
// header, then the text the device sends (see `StreamFuzzOracle.Input` in
// Tests/XTalkBleSdkTests/FuzzOracles.swift).

import Foundation

let corpus = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
var written: [String: [String: [UInt8]]] = [:]

func add(_ target: String, _ name: String, _ bytes: [UInt8]) {
    precondition(written[target, default: [:]][name] == nil, "\(target)/\(name) twice")
    written[target, default: [:]][name] = bytes
}

func ascii(_ text: String) -> [UInt8] { Array(text.utf8) }
func xored(_ bytes: [UInt8]) -> [UInt8] { bytes.map { $0 ^ 0x5A } }

/// The header byte that puts a cut at `offset` of `total` bytes (cut = total × byte / 256).
func fraction(_ offset: Int, of total: Int) -> UInt8 {
    if offset == 0 || total == 0 { return 0 }
    let byte = (offset * 256 + total - 1) / total
    precondition(byte < 256 && total * byte / 256 == offset, "no header byte cuts \(total) bytes at \(offset)")
    return UInt8(byte)
}

enum Operation: UInt8 { case automatic = 0, collect = 1, send = 2 }

/// A stream seed. `parts` are the text's pieces: the submit cut falls after
/// `submitAfter` pieces, the event cut after `eventAfter` pieces; `pad` filler
/// units of 80 bytes `A` go after `padAfter` pieces.
struct Stream {
    var xor = false
    var operation = Operation.automatic
    var switches = false
    var cutAction = false
    var unlogged = false
    var pad = 0
    var padAfter = 0
    var chunk: UInt8 = 0
    var submitAfter = 0
    var eventAfter: Int? = nil
    var parts: [[UInt8]]

    var bytes: [UInt8] {
        let text = parts.flatMap { $0 }
        func offset(after count: Int) -> Int { parts.prefix(count).reduce(0) { $0 + $1.count } }
        var flags = (xor ? 1 : 0) | operation.rawValue << 1
        flags |= (switches ? 8 : 0) | (cutAction ? 16 : 0) | (unlogged ? 32 : 0)
        let padBytes = pad * 80
        let padAt = offset(after: padAfter)
        let total = text.count + padBytes
        // A cut's offset in the padded text: the filler counts when it comes before
        // the cut (filler and cut after the same piece: the cut comes first).
        func cut(after pieces: Int) -> Int { offset(after: pieces) + (pad > 0 && padAfter < pieces ? padBytes : 0) }
        let submit = cut(after: submitAfter)
        let event = cut(after: eventAfter ?? submitAfter)
        return [
            flags, pad > 0 ? UInt8(0xBF + pad) : 0, fraction(padAt, of: text.count), chunk,
            fraction(submit, of: total), eventAfter == nil ? 0 : fraction(event, of: total),
        ] + text
    }
}

func stream(_ target: [String], _ name: String, _ seed: Stream) {
    for t in target { add(t, name, seed.bytes) }
}

let both = ["receive", "framer"]
let receive = ["receive"]
let framer = ["framer"]

// Responses and final result codes.
stream(both, "ok", Stream(parts: [ascii("AT+FUZZ\r\nOK\r\n")]))
stream(both, "ok-xor", Stream(xor: true, chunk: 1, parts: [ascii("AT+FUZZ\r\nOK\r\n")]))
stream(receive, "error", Stream(chunk: 2, parts: [ascii("AT+FUZZ\r\nERROR\r\n")]))
stream(receive, "cme-error-xor", Stream(xor: true, chunk: 3, parts: [ascii("+CME ERROR: 10\r\n")]))
stream(receive, "err", Stream(parts: [ascii("+ERR:5\r\n")]))
stream(receive, "ver", Stream(chunk: 4, parts: [ascii("AT+FUZZ\r\n+VER:2.1.0\r\nOK\r\n")]))
stream(receive, "unlogged", Stream(unlogged: true, parts: [ascii("AT+FUZZ\r\n+SECRET:1\r\nOK\r\n+AFTER\r\n")]))
stream(receive, "timeout", Stream(parts: [ascii("AT+FUZZ\r\n+VER:1\r\n")]))
stream(both, "empty", Stream(parts: []))

// Radio frames (section 5).
let example = "+DI:cnt=12,len=5,slot=3,snr=7,rssi=-87,txp=14,data=48656C6C6F\r\n"
stream(both, "di-example", Stream(chunk: 5, parts: [ascii(example + "OK\r\n")]))
stream(both, "di-example-xor", Stream(xor: true, chunk: 6, parts: [ascii(example + "OK\r\n")]))
stream(
    receive, "di-all-keys",
    Stream(
        chunk: 7,
        parts: [
            ascii(
                "+DI:cnt=1,len=2,slot=0,snr=-5,rssi=-120,lsnr=3,lrssi=-90,rsnr=-2,rrssi=-101,txp=22,data=abCD\r\n")
        ]))
stream(
    receive, "di-malformed",
    Stream(
        chunk: 8,
        parts: [
            ascii(
                """
                +DI:data=ABC\r\n+DI:len=3,data=ABCD\r\n+DI:cnt=1,cnt=2,data=AB\r\n+DI:cnt=1\r\n+DI:cnt=x,data=AB\r\n\
                +DI:data=\r\n+DI:data=GG\r\n+DI:data=00,data=00\r\n+DI:\r\nOK\r\n
                """)
        ]))
stream(
    receive, "di-integers",
    Stream(
        chunk: 9,
        parts: [
            ascii(
                """
                +DI:cnt=9223372036854775807,rssi=-9223372036854775808,len=1,data=00\r\n\
                +DI:cnt=9223372036854775808,data=00\r\n\
                +DI:snr=-0,data=00\r\n+DI:snr=-,data=00\r\n+DI:snr=+1,data=00\r\n+DI:len=01,data=00\r\n
                """)
        ]))
stream(
    receive, "di-unknown-keys",
    Stream(
        chunk: 10,
        parts: [
            ascii(
                "+DI:x=1,DATA=00,data=FF,y=\r\n+DI:data=00,z\r\n+DI:=1,data=00\r\n+DI:data=00,\r\n+DI:a=b=c,data=00\r\n"
            )
        ]))
stream(
    receive, "crcerr",
    Stream(
        chunk: 11,
        parts: [
            ascii(
                "+CRCERR:cnt=3,snr=-12,rssi=-110\r\n+CRCERR:\r\n+CRCERR:data=zz,cnt=1\r\n"
                    + "+CRCERR:cnt=1,cnt=2\r\n+CRCERR:x\r\nOK\r\n"
            )
        ]))
stream(receive, "ready", Stream(parts: [ascii("+READY\r\n+READYX\r\nOK\r\n")]))

// RF sends (section 7).
stream(receive, "send-ok", Stream(operation: .send, parts: [ascii("AT+SEND=48656C6C6F\r\nOK\r\n+SENDFIN:OK\r\n")]))
stream(
    receive, "send-fail-xor",
    Stream(xor: true, operation: .send, chunk: 12, parts: [ascii("OK\r\n+SENDFIN:FAIL,busy\r\n")]))
stream(receive, "send-error", Stream(operation: .send, parts: [ascii("ERROR\r\n")]))
stream(
    receive, "send-early-sendfin",
    Stream(
        operation: .send, chunk: 13,
        parts: [
            ascii(
                "+SENDFIN:OK\r\nOK\r\n+SENDFIN:FAIL,no ack\r\n")
        ]))
stream(receive, "send-odd-sendfin", Stream(operation: .send, parts: [ascii("OK\r\n+SENDFIN:\r\n+SENDFIN:WEIRD\r\n")]))

// Collecting until the timeout.
stream(receive, "collect", Stream(operation: .collect, parts: [ascii("AT+FUZZ\r\n+PING:abc\r\nOK\r\n")]))
stream(receive, "collect-raw", Stream(operation: .collect, parts: [[0xFF] + ascii("\r\nOK\r\n")]))
stream(receive, "collect-partial", Stream(operation: .collect, parts: [ascii("OK\r\n+PART")]))
stream(
    receive, "collect-early-timer",
    Stream(
        operation: .collect, cutAction: true, unlogged: true, eventAfter: 1,
        parts: [ascii("+VER:1\r\n"), ascii("OK\r\n+VER:late\r\n") + [0] + ascii("\r\n")]))

// Lines that began before the command (stale tails, late replies).
stream(
    receive, "stale-tail",
    Stream(submitAfter: 1, parts: [ascii("+VER:old"), ascii("\r\n+X\r\nOK\r\nAT+FUZZ\r\nOK\r\n")]))
stream(receive, "stale-final", Stream(submitAfter: 1, parts: [ascii("O"), ascii("K\r\nAT+FUZZ\r\nOK\r\n")]))
stream(
    receive, "before-submit", Stream(submitAfter: 1, parts: [ascii("OK\r\n+DI:cnt=1,data=00\r\n"), ascii("OK\r\n")]))

// Terminators and printable lines (section 4).
stream(both, "terminators", Stream(chunk: 14, parts: [ascii("\r\n\n\r\nA\r\r\nB\rC\r\n+VER:\t1\r\nOK\n")]))
stream(
    both, "raw-lines",
    Stream(chunk: 15, parts: [[0x01, 0x02, 0x0D, 0x0A, 0x7F, 0x0A, 0xC3, 0xA9, 0x0D, 0x0A] + ascii("OK\r\n")]))
stream(framer, "cr-lf-split", Stream(chunk: 16, parts: [ascii("OK\r"), ascii("\nERROR\r"), ascii("\r\n")]))
stream(framer, "several-lines", Stream(chunk: 26, parts: [ascii("+VER:1\r\n+FREQ:868000000\r\n+TXP:14\r\n\r\nOK\r\n")]))
stream(framer, "bare-lf-xor", Stream(xor: true, chunk: 27, parts: [ascii("+PING:a\n\n+PING:b\r\nOK\n")]))
stream(framer, "cr-only", Stream(chunk: 28, parts: [ascii("\r\r\n\r\nOK\r")]))
stream(framer, "nul-and-del", Stream(chunk: 29, parts: [[0x00, 0x0A, 0x41, 0x7F, 0x42, 0x0D, 0x0A, 0x09, 0x0A]]))
stream(
    framer, "xor-raw", Stream(xor: true, chunk: 30, parts: [[0x80, 0xFF, 0x0D, 0x0A, 0x5A, 0x0A] + ascii("OK\r\n")]))
stream(framer, "line-4095-crlf", Stream(pad: 51, chunk: 31, parts: [ascii(String(repeating: "B", count: 15) + "\r\n")]))
stream(framer, "line-4098-lf", Stream(pad: 51, chunk: 32, parts: [ascii(String(repeating: "C", count: 18) + "\n")]))
stream(
    framer, "switch-no-partial",
    Stream(xor: true, switches: true, eventAfter: 1, parts: [ascii("OK\r\n"), ascii("ERROR\r\n")]))

// Encoding switches and resets.
// (`receive`: the command's timer fires at the cut, so the switch applies at once.)
for (targets, timer) in [(receive, true), (framer, false)] {
    stream(
        targets, "switch-mid-line",
        Stream(
            switches: true, cutAction: timer, eventAfter: 1,
            parts: [
                ascii("AT+FUZZ\r\n+VER:1\r\n+DI:cnt=1,da"), ascii("ta=AB\r\n+CRCERR:cnt=2\r\n"),
            ]))
    // A partial line discarded by a switch, whose rest overflows.
    stream(
        targets, "switch-then-overflow",
        Stream(
            switches: true, cutAction: timer, pad: 52, padAfter: 1, chunk: 25, eventAfter: 1,
            parts: [ascii("+DI:cnt=1,data=A"), ascii("\r\nOK\r\n")]))
}
stream(
    both, "switch-after-ok",
    Stream(
        xor: true, switches: true, eventAfter: 1,
        parts: [
            ascii("AT+FUZZ\r\nOK\r\n+PART"), ascii("IAL\r\n+DI:len=1,data=7F\r\n"),
        ]))
// The host switches while the command runs: the switch waits for its `OK`
// (sent here in the old encoding, hence xor-ed twice), then applies.
stream(
    receive, "switch-deferred",
    Stream(
        switches: true, eventAfter: 1,
        parts: [
            ascii("AT+FUZZ\r\n"), xored(ascii("OK\r\n")) + ascii("+READY\r\n"),
        ]))
stream(framer, "reset-mid-line", Stream(cutAction: true, eventAfter: 1, parts: [ascii("+VER:1"), ascii("\r\nOK\r\n")]))

// The 4096-byte bound (80-byte filler units: 51 × 80 = 4080).
stream(both, "line-4096", Stream(pad: 51, chunk: 17, parts: [ascii(String(repeating: "A", count: 16) + "\r\nOK\r\n")]))
stream(both, "line-4097", Stream(pad: 51, chunk: 18, parts: [ascii(String(repeating: "A", count: 17) + "\r\nOK\r\n")]))
stream(
    both, "line-4096-cr-x", Stream(pad: 51, chunk: 19, parts: [ascii(String(repeating: "A", count: 16) + "\rX\r\n")]))
stream(
    both, "line-4096-cr-cr-lf", Stream(pad: 51, chunk: 20, parts: [ascii(String(repeating: "A", count: 16) + "\r\r\n")])
)
stream(
    both, "line-4096-xor",
    Stream(xor: true, pad: 51, chunk: 21, parts: [ascii(String(repeating: "A", count: 16) + "\r\nOK\r\n")]))
stream(
    both, "line-4096-nonprintable",
    Stream(pad: 51, chunk: 22, parts: [[0x01] + ascii(String(repeating: "A", count: 15) + "\r\n")]))
stream(both, "unterminated-5120", Stream(pad: 64, chunk: 23, parts: []))
stream(
    receive, "di-2043-bytes",
    Stream(pad: 51, padAfter: 1, chunk: 24, parts: [ascii("+DI:data="), ascii("AAAAAA\r\nOK\r\n")]))

// Authentication replies (section 8, 9): lines separated by LF.
func lines(_ text: [String]) -> [UInt8] { ascii(text.joined(separator: "\n")) }
let signature = String(repeating: "AB", count: 64)
let replies: [(String, [String])] = [
    ("probe-1", ["+AUTH:1", "OK"]),
    ("probe-0", ["+AUTH:0", "OK"]),
    ("probe-after-garbage", ["garbage", "+AUTH:1", "OK"]),
    ("probe-error", ["+AUTH:1", "ERROR"]),
    ("probe-2", ["+AUTH:2", "OK"]),
    ("probe-reversed", ["OK", "+AUTH:1"]),
    ("probe-twice", ["+AUTH:0", "+AUTH:1", "OK"]),
    ("chal", ["+CHAL:B5803039," + signature, "OK"]),
    ("chal-lowercase", ["+CHAL:b5803039," + signature.lowercased(), "OK"]),
    ("chal-err", ["+CHAL:ERR", "OK"]),
    ("chal-empty", ["+CHAL:", "OK"]),
    ("chal-no-signature", ["+CHAL:B5803039", "OK"]),
    ("chal-short-id", ["+CHAL:B580303," + signature]),
    ("chal-63", ["+CHAL:B5803039," + String(repeating: "00", count: 63)]),
    ("chal-65", ["+CHAL:B5803039," + String(repeating: "00", count: 65)]),
    ("chal-odd", ["+CHAL:B5803039," + signature + "A"]),
    ("chal-bad-hex", ["+CHAL:B580303G," + signature]),
    ("chal-two", ["+CHAL:ERR", "+CHAL:B5803039," + signature]),
    ("id-efuse", ["+ID:B5803039,EFUSE,XT2648012345", "OK"]),
    ("id-sn-legacy", ["+ID:35803039,SN,XT2648012345", "OK"]),
    ("id-minimum", ["+ID:80080000,SN,XT0001000000"]),
    ("id-maximum", ["+ID:FFA8FFFF,SN,XT6353524287"]),
    ("id-week-0", ["+ID:B5803039,SN,XT2600012345"]),
    ("id-week-54", ["+ID:B5803039,SN,XT2654012345"]),
    ("id-year-64", ["+ID:B5803039,SN,XT6448012345"]),
    ("id-serial-524288", ["+ID:B5803039,SN,XT2648524288"]),
    ("id-bad-source", ["+ID:B5803039,FOO,XT2648012345"]),
    ("id-four-fields", ["+ID:B5803039,SN,XT2648012345,X"]),
    ("id-two-fields", ["+ID:B5803039,SN"]),
    ("id-short-serial", ["+ID:B5803039,SN,XT264801234"]),
    ("session", ["+AUTH:1", "OK", "+CHAL:B5803039," + signature, "OK", "+ID:B5803039,EFUSE,XT2648012345", "OK"]),
]
for (name, reply) in replies { add("auth-replies", name, lines(reply)) }
add("auth-replies", "crlf-lines", ascii("+AUTH:1\r\nOK\r\n"))

// Device identifiers (section 9); inputs of 20+ bytes also feed fromSn.
let identifiers: [(String, [UInt8])] = [
    ("hex", ascii("0xB5803039")),
    ("hex-upper-x", ascii("0Xb5803039")),
    ("decimal", ascii("3045076025")),
    ("legacy", ascii("0x35803039")),
    ("whitespace", ascii("  0x1\n")),
    ("unicode-whitespace", [0xC2, 0xA0] + ascii("42") + [0xE2, 0x80, 0xA8]),
    ("zero", ascii("0")),
    ("max", ascii("4294967295")),
    ("max-plus-1", ascii("4294967296")),
    ("hex-max", ascii("0xFFFFFFFF")),
    ("hex-too-big", ascii("0x100000000")),
    ("empty", []),
    ("prefix-only", ascii("0x")),
    ("minus", ascii("-1")),
    ("plus", ascii("+1")),
    ("hex-minus", ascii("0x-1")),
    ("hex-in-decimal", ascii("12a")),
    ("bad-hex", ascii("0xG")),
    ("only-whitespace", ascii(" \t\r\n")),
    ("leading-zeros", ascii("000000000000000000000000000001")),
    ("inner-space", ascii("1 2")),
    ("fullwidth-digit", [0xEF, 0xBC, 0x91]),
    ("fields", [0, 0, 0, 0, 0, 0, 0x07, 0xEA, 0, 0, 0, 0, 0, 0, 0, 48, 0, 0, 0x30, 0x39]),
    (
        "fields-negative",
        [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]
    ),
]
for (name, bytes) in identifiers { add("device-id", name, bytes) }

// Write, replacing what was there.
let files = FileManager.default
for (target, seeds) in written {
    let directory = corpus.appendingPathComponent(target)
    try? files.removeItem(at: directory)
    try files.createDirectory(at: directory, withIntermediateDirectories: true)
    for (name, bytes) in seeds {
        try Data(bytes).write(to: directory.appendingPathComponent(name))
    }
    print("\(target): \(seeds.count) seeds, \(seeds.values.reduce(0) { $0 + $1.count }) bytes")
}
