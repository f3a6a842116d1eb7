import Foundation
import Testing
import XTalkTestSupport
@testable import XTalkBleSdk
import XTalkSimulator

/// Feeds `bytes` split at `cuts` and returns every unit, in order.
func frame(_ bytes: [UInt8], encoding: XTalkAtEncoding = .plain, chunks: [Int]? = nil) -> [FramedUnit] {
    var framer = LineFramer(encoding: encoding)
    var units: [FramedUnit] = []
    var offset = 0
    for size in chunks ?? [bytes.count] where offset < bytes.count {
        let end = min(bytes.count, offset + size)
        framer.feed(bytes[offset..<end], into: &units)
        offset = end
    }
    if offset < bytes.count { framer.feed(bytes[offset...], into: &units) }
    return units
}

func ascii(_ text: String) -> [UInt8] { Array(text.utf8) }
func xored(_ bytes: [UInt8]) -> [UInt8] { bytes.map { $0 ^ 0x5A } }

/// Random chunk sizes from a seeded generator, so a failure prints a reproducible seed.
func randomChunks(total: Int, maxChunk: Int, using rng: SimulatorRandom) -> [Int] {
    var sizes: [Int] = []
    var left = total
    while left > 0 {
        let size = rng.int(in: 1...max(1, min(maxChunk, left)))
        sizes.append(size)
        left -= size
    }
    return sizes
}

@Suite("Line framer: bytes to lines (PROTOCOL.md section 4)", .timeLimit(.minutes(5)))
struct LineFramerTests {
    struct Vector: CustomTestStringConvertible, Sendable {
        let name: String
        let input: [UInt8]
        let expected: [FramedUnit]
        var testDescription: String { name }
    }

    static let vectors: [Vector] = [
        Vector(name: "CR LF terminates a line", input: ascii("OK\r\n"), expected: [.line("OK")]),
        Vector(name: "bare LF terminates a line", input: ascii("OK\n"), expected: [.line("OK")]),
        Vector(
            name: "several lines in one chunk", input: ascii("+VER:1.2\r\nOK\r\n"),
            expected: [.line("+VER:1.2"), .line("OK")]),
        Vector(name: "empty lines are ignored", input: ascii("\r\n\n\r\nOK\r\n\r\n"), expected: [.line("OK")]),
        Vector(
            name: "only one trailing CR is stripped", input: ascii("A\r\r\n"),
            expected: [.raw(Data(ascii("A\r\r\n")))]),
        Vector(
            name: "CR inside a line makes it raw", input: ascii("A\rB\r\n"),
            expected: [.raw(Data(ascii("A\rB\r\n")))]),
        Vector(name: "tab is printable", input: ascii("A\tB\r\n"), expected: [.line("A\tB")]),
        Vector(name: "spaces are kept", input: ascii(" OK \r\n"), expected: [.line(" OK ")]),
        Vector(
            name: "non-printable line is raw with its terminator",
            input: [0x41, 0x00, 0x42, 0x0D, 0x0A], expected: [.raw(Data([0x41, 0x00, 0x42, 0x0D, 0x0A]))]),
        Vector(name: "DEL is not printable", input: [0x7F, 0x0A], expected: [.raw(Data([0x7F, 0x0A]))]),
        Vector(
            name: "high bytes are not printable", input: [0xC3, 0xA9, 0x0A],
            expected: [.raw(Data([0xC3, 0xA9, 0x0A]))]),
        Vector(name: "unterminated tail is held", input: ascii("OK\r\nERR"), expected: [.line("OK")]),
        Vector(
            name: "raw line between printable lines", input: ascii("A\n") + [0x01, 0x0A] + ascii("B\n"),
            expected: [.line("A"), .raw(Data([0x01, 0x0A])), .line("B")]),
    ]

    @Test("golden vectors, whole and one byte at a time", arguments: vectors)
    func goldenVector(_ vector: Vector) {
        #expect(frame(vector.input) == vector.expected)
        #expect(frame(vector.input, chunks: Array(repeating: 1, count: vector.input.count)) == vector.expected)
    }

    @Test("xor encoding decodes every byte, terminator included", arguments: vectors)
    func xorVector(_ vector: Vector) {
        // Raw units stay as received, i.e. still encoded.
        let expected = vector.expected.map { unit -> FramedUnit in
            if case .raw(let data) = unit { return .raw(Data(xored(Array(data)))) }
            return unit
        }
        #expect(frame(xored(vector.input), encoding: .xor) == expected)
        #expect(
            frame(xored(vector.input), encoding: .xor, chunks: Array(repeating: 1, count: vector.input.count))
                == expected)
    }

    @Test("plain bytes read as xor are garbage, never the plain line")
    func wrongEncoding() {
        let units = frame(ascii("+AUTH:1\r\nOK\r\n"), encoding: .xor)
        #expect(!units.contains(.line("OK")))
        #expect(!units.contains(.line("+AUTH:1")))
    }

    @Test("a line of exactly 4096 bytes is a line")
    func maximumLine() {
        let body = String(repeating: "A", count: 4096)
        #expect(frame(ascii(body + "\r\n")) == [.line(body)])
        #expect(frame(ascii(body + "\n")) == [.line(body)])
    }

    @Test("a 4097th byte flushes 4096 raw bytes and starts a new line")
    func overflow() {
        let body = String(repeating: "A", count: 4096)
        let units = frame(ascii(body + "BC\r\n"))
        #expect(units == [.raw(Data(ascii(body))), .line("BC")])
        let xorUnits = frame(xored(ascii(body + "BC\r\n")), encoding: .xor)
        #expect(xorUnits == [.raw(Data(xored(ascii(body)))), .line("BC")])
    }

    @Test("overflow repeats for very long lines")
    func longOverflow() {
        let body = String(repeating: "Z", count: 4096 * 2 + 5)
        let units = frame(ascii(body + "\n"))
        let block = Data(ascii(String(repeating: "Z", count: 4096)))
        #expect(units == [.raw(block), .raw(block), .line("ZZZZZ")])
    }

    @Test("a CR in position 4097 is held: CR LF ends the 4096-byte line")
    func heldCarriageReturn() {
        let body = String(repeating: "A", count: 4096)
        for chunk in [1, 7, 4096, 4097, 5000] {
            #expect(frame(ascii(body + "\r\n"), chunks: Array(repeating: chunk, count: 5000)) == [.line(body)])
        }
    }

    @Test("a CR in position 4097 followed by another byte starts the new line")
    func heldCarriageReturnThenByte() {
        let body = String(repeating: "A", count: 4096)
        let expected: [FramedUnit] = [.raw(Data(ascii(body))), .raw(Data(ascii("\rB\r\n")))]
        #expect(frame(ascii(body + "\rB\r\n")) == expected)
        #expect(frame(ascii(body + "\rB\r\n"), chunks: [4097, 1, 2]) == expected)
        // The held CR starts the new line "\r\r\n", whose content (one CR left after stripping) is not printable.
        #expect(frame(ascii(body + "\r\r\n")) == [.raw(Data(ascii(body))), .raw(Data(ascii("\r\r\n")))])
    }

    @Test("setting the encoding discards the partial line; its rest arrives as raw, never as a line")
    func resetDiscardsPartial() {
        var framer = LineFramer(encoding: .plain)
        var units: [FramedUnit] = []
        framer.feed(ascii("+DI:cnt=1,da"), into: &units)
        #expect(framer.hasPartialLine)
        framer.reset(encoding: .xor)
        #expect(framer.hasPartialLine, "the rest of the discarded line is still to come")
        // The device does not know the host reset: the line goes on to its terminator.
        framer.feed(xored(ascii("ta=AB\r\nOK\r\n")), into: &units)
        #expect(units == [.raw(Data(xored(ascii("ta=AB\r\n")))), .line("OK")])
        #expect(!framer.hasPartialLine)
        // After the device's own line end, a reset (to its encoding) leaves the next line whole.
        units = []
        framer.reset(encoding: .xor)
        #expect(!framer.hasPartialLine)
        framer.feed(xored(ascii("OK\r\n")), into: &units)
        #expect(units == [.line("OK")])
    }

    @Test("a line end only the old encoding saw: after the switch the device is mid-line, and its rest is raw")
    func resetAfterFalseLineEnd() {
        // A plain device read as xor: its "P" (0x50) is the xor line end. "+P" ends a unit there,
        // but the device is in the middle of "+PING:t1"; in plain, its rest is no line of its own.
        var framer = LineFramer(encoding: .xor)
        var units: [FramedUnit] = []
        framer.feed(ascii("+P"), into: &units)
        #expect(units.count == 1 && !framer.hasPartialLine, "a unit ended at the xor line end")
        units = []
        framer.reset(encoding: .plain)
        #expect(framer.hasPartialLine, "judged in plain, the last byte is no line end")
        framer.feed(ascii("ING:t1\r\nOK\r\n"), into: &units)
        #expect(units == [.raw(Data(ascii("ING:t1\r\n"))), .line("OK")])
    }

    @Test(
        "switching twice: the second switch judges the same last byte in its own encoding (chaos seed 52284421341994)")
    func resetTwice() {
        // A plain device read as xor: a whole plain line has no xor line end, so it stays buffered.
        var framer = LineFramer(encoding: .xor)
        var units: [FramedUnit] = []
        framer.feed(ascii("+DI:cnt=1,len=1,data=01\r\n"), into: &units)
        #expect(units.isEmpty)
        framer.reset(encoding: .xor)  // the same encoding: the buffer is discarded, the device seems mid-line
        #expect(framer.hasPartialLine)
        framer.reset(encoding: .plain)  // the device's: its last byte was its line end
        #expect(!framer.hasPartialLine)
        framer.feed(ascii("+PING:x\r\nOK\r\n"), into: &units)
        #expect(units == [.line("+PING:x"), .line("OK")])
    }

    @Test(
        """
        after a switch from the wrong encoding, the device's line end inside the buffer counts (chaos seed \
        6516639812896)
        """
    )
    func resetFromWrongEncoding() {
        // An xor device read as plain: its encoded LF (0x50) is no plain terminator, so
        // whole lines pile up in the buffer. After the switch to xor, the next line is whole.
        var framer = LineFramer(encoding: .plain)
        var units: [FramedUnit] = []
        framer.feed(xored(ascii("+READY\r\n")), into: &units)
        #expect(framer.hasPartialLine)
        framer.reset(encoding: .xor)
        #expect(!framer.hasPartialLine, "the device's line had ended")
        framer.feed(xored(ascii("+PING:t5\r\n")), into: &units)
        #expect(units == [.line("+PING:t5")])
        // When the buffer ends inside a device line, its rest is raw.
        units = []
        framer.reset(encoding: .plain)
        framer.feed(xored(ascii("+READY\r\n+ID:1")), into: &units)  // no 'P': its xor byte is a plain LF
        #expect(units.isEmpty)
        framer.reset(encoding: .xor)
        #expect(framer.hasPartialLine)
        framer.feed(xored(ascii(",EFUSE\r\nOK\r\n")), into: &units)
        #expect(units == [.raw(Data(xored(ascii(",EFUSE\r\n")))), .line("OK")])
    }

    @Test("the rest of a discarded line is raw in any chunking")
    func resetRestAnyChunking() {
        let rest = xored(ascii("ta=AB\r\n+SENDFIN:OK\r\n"))
        for size in [1, 2, 3, 7, rest.count] {
            var framer = LineFramer(encoding: .plain)
            var units: [FramedUnit] = []
            framer.feed(ascii("+DI:da"), into: &units)
            framer.reset(encoding: .xor)
            var offset = 0
            while offset < rest.count {
                framer.feed(rest[offset..<min(rest.count, offset + size)], into: &units)
                offset += size
            }
            #expect(units == [.raw(Data(xored(ascii("ta=AB\r\n")))), .line("+SENDFIN:OK")], "chunks of \(size)")
        }
    }

    /// A recorded device stream: responses, URCs, garbage, an overflow.
    static let recordedStream: [UInt8] = {
        var bytes = ascii("AT+VER?\r\n+VER:2.1.0\r\nOK\r\n")
        bytes += ascii("+DI:cnt=1,len=5,slot=3,snr=7,rssi=-87,txp=14,data=48656C6C6F\r\n")
        bytes += [0x00, 0xFF, 0x13, 0x0A]
        bytes += ascii("+CRCERR:cnt=2,rssi=-101\n\r\n")
        bytes += ascii(String(repeating: "x", count: 4100)) + ascii("\r\n")
        bytes += ascii("+SENDFIN:OK\r\n+READY\r\nERROR\r\n")
        return bytes
    }()

    @Test("every split of a recorded stream yields the same units (property)")
    func randomSplits() {
        for encoding in XTalkAtEncoding.allCases {
            let stream = encoding == .xor ? xored(Self.recordedStream) : Self.recordedStream
            let reference = frame(stream, encoding: encoding)
            #expect(reference.count == 11)
            #expect(frame(stream, encoding: encoding, chunks: Array(repeating: 1, count: stream.count)) == reference)
            for mtu in [23, 185, 247, 517] {
                #expect(
                    frame(stream, encoding: encoding, chunks: Array(repeating: mtu - 3, count: stream.count))
                        == reference)
            }
            let seed = PropertySeed()
            let rng = SimulatorRandom(seed: seed.value)
            for _ in 0..<200 {
                let chunks = randomChunks(total: stream.count, maxChunk: 64, using: rng)
                #expect(frame(stream, encoding: encoding, chunks: chunks) == reference, "\(seed)")
            }
        }
    }
}
