import Foundation
import Testing
@testable import XTalkBleSdk
import XTalkTestSupport

/// The `receive` and `framer` fuzz targets' seeds, replayed through the
/// targets' own oracles (Tests/XTalkBleSdkTests/FuzzOracles.swift), so that
/// every `swift test` checks them. Both targets read the same input format,
/// so every seed goes through both oracles. Inputs a fuzzer found are pinned
/// below, minimized, with what they broke.
@Suite("Fuzz regression: framer and receive path (Fuzz/README.md)", .timeLimit(.minutes(5)))
struct StreamFuzzRegressionTests {
    static let seeds = FuzzSeed.all("receive") + FuzzSeed.all("framer")

    @Test("the committed corpus is there")
    func corpusIsThere() {
        #expect(FuzzSeed.all("receive").count >= 30, "seeds under \(FuzzSeed.corpus.path)/receive")
        #expect(FuzzSeed.all("framer").count >= 20, "seeds under \(FuzzSeed.corpus.path)/framer")
    }

    @Test("every seed passes the framer oracle: the reference framer's units, in every chunking", arguments: seeds)
    func framerOracle(_ seed: FuzzSeed) {
        do {
            try StreamFuzzOracle.checkFramer(seed.bytes)
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test(
        "every seed passes the receive oracle: the reference channel's events and completion, in every chunking",
        arguments: seeds)
    func receiveOracle(_ seed: FuzzSeed) {
        do {
            try StreamFuzzOracle.checkReceive(seed.bytes)
        } catch {
            Issue.record("\(error)")
        }
    }

    /// Every seed again as a sequence (header byte 0, bits 6–7): two
    /// operations, three, three with the last cancelled; the first one times
    /// out or is cancelled at the event cut (bit 4), a drain's quiet timer
    /// fires halfway to the end.
    static let sequences: [FuzzSeed] = FuzzSeed.all("receive").flatMap { seed in
        [0x40, 0x80, 0xC0].flatMap { sequence in
            [0x00, 0x10].map { cut in
                var bytes = seed.bytes.isEmpty ? [0] : seed.bytes
                bytes[0] = bytes[0] & 0x2F | UInt8(sequence | cut)
                return FuzzSeed(
                    target: "receive", name: "\(seed.name) as 0x\(String(bytes[0], radix: 16))", bytes: bytes)
            }
        }
    }

    @Test(
        "every receive seed, as two or three operations with a timeout or a cancellation, passes the receive oracle",
        arguments: sequences)
    func sequenceOracle(_ seed: FuzzSeed) {
        do {
            try StreamFuzzOracle.checkReceive(seed.bytes)
        } catch {
            Issue.record("\(error)")
        }
    }

    /// Hand-made inputs at corners of the oracles, in the fuzz input format
    /// (6-byte header, then the device's text; see `StreamFuzzOracle.Input`).
    /// Inputs a fuzzer found that failed join here, with what they showed.
    static let pinned: [(String, [UInt8])] = [
        // xor; 51 × 80 filler bytes, then 16 × "A" and a CR: the CR in position 4097 is held at the end.
        (
            "a CR in position 4097 ends the stream",
            [0x01, 0xF2, 0, 0, 0, 0] + Array((String(repeating: "A", count: 16) + "\r").utf8)
        ),
        // The host switches to xor after "+DI:da" while the command runs: the switch waits for the operation.
        ("a switch during a command, mid-line", [0x08, 0, 0, 0, 0, 0x5B] + Array("+DI:data=AB\r\nOK\r\n".utf8)),
        // The same switch once the command timed out: it applies at once; the line's rest is raw.
        ("a switch after a timeout, mid-line", [0x18, 0, 0, 0, 0, 0x5B] + Array("+DI:data=AB\r\nOK\r\n".utf8)),
        // Found by the fuzzer: the echo of a line never written opens a reply, whose final code is the
        // send's OK; the +SENDFIN: that follows, none being owed, shows that OK was the send's (the
        // reference once timed the send out).
        (
            "a send's OK taken as owed, then its +SENDFIN:OK",
            [0x04, 0, 0, 0, 0, 0] + Array("AT+SERD=48656C6C6F\r\nOK\r\n+SENDFIN:OK\r\n".utf8)
        ),
        (
            "a send's OK taken as owed, then its +SENDFIN:FAIL",
            [0x04, 0, 0, 0x0D, 0, 0] + Array("+ERNDFIN:OK\r\nOK\r\n+SENDFIN:FAIL,no ack\r\n".utf8)
        ),
        // Found by the fuzzer (minimized): a switch to xor waits for the command while a line of 4096
        // bytes and more (the filler) overflows and ends in one notification; the bytes after its LF come
        // back to be read in xor, the device being mid-line there. Byte 4096 of that line was once taken
        // as the byte before them, and being the xor LF, made the rest of the device's line a line.
        (
            "a switch that waited, over a line that overflowed and ended in one notification",
            [0x08, 0xF2, 0x55, 0x4B, 0x0D, 0x0A] + Array("VEP:".utf8) + [0, 0] + Array("\r\n+X\r\n".utf8) + [0xFF]
                + Array("K\r\nEP\n".utf8)
        ),
        // Found by the fuzzer: a command cancelled unanswered, then a switch to xor: the ERRORs after the
        // next command's line may answer lines the device read garbled, and pay no reply owed (the
        // reference once had no such rule, and expected the window to collect them).
        (
            "after a switch that dropped a debt, ERRORs are a garbled line's",
            hexBytes(
                "4e4446494e3a4f4b0043542b16006c656e3d4446494e3a4f4b0043542b4655255a0d0a4552524f570d0a4552524f520d0a"
                    + "4655255a0d736e723d0a4552524f520d0a4552524f520d0a")
        ),
    ]

    /// Bytes from hex digits (a fuzzer's input as `xxd -p` prints it).
    static func hexBytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count - 1, by: 2).compactMap {
            UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16)
        }
    }

    @Test("pinned inputs pass both oracles", arguments: pinned)
    func pinnedInput(_ name: String, _ bytes: [UInt8]) {
        do {
            try StreamFuzzOracle.checkFramer(bytes)
            try StreamFuzzOracle.checkReceive(bytes)
        } catch {
            Issue.record("\(name): \(error)")
        }
    }
}

/// The receive oracle's sequences (two or three operations, a timeout or a
/// cancellation, the drain's timers) on hand-made inputs: the reference gives
/// the results worked out here by hand from PROTOCOL.md section 6, the SDK's
/// channel agrees with it, and a channel that skips the drain is caught.
@Suite("Fuzz oracle: sequences of operations, drains and cancellations", .timeLimit(.minutes(5)))
struct ReceiveSequenceOracleTests {
    typealias Completion = StreamFuzzOracle.ReferenceChannel.Completion

    /// Header (6 bytes), then the device's text.
    static func input(_ flags: UInt8, event: UInt8 = 0, _ text: String) -> [UInt8] {
        [flags, 0, 0, 0, 0, event] + Array(text.utf8)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        /// (operation, result, line events before it), in completion order.
        let completions: [(Int, Completion, Int)]
        /// The operation of each line written, in order.
        let writes: [Int]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "the first of two times out; its late answer is drained; quiet, the next gets its own",
            bytes: input(0x50, "+V:1\r\nOK\r\n+V:2\r\nOK\r\n"),
            completions: [(0, .fail(.timeout), 0), (1, .succeed(["+V:2", "OK"]), 4)], writes: [0, 1]),
        Case(
            name: "the first of two is cancelled; its late answer is drained; quiet, the next gets its own",
            bytes: input(0x40, "+V:1\r\nOK\r\n+V:2\r\nOK\r\n"),
            completions: [(0, .fail(.cancelled), 0), (1, .succeed(["+V:2", "OK"]), 4)], writes: [0, 1]),
        Case(
            name: "three: the first cancelled on the wire, the last while waiting (never written)",
            bytes: input(0xC0, "+V:1\r\nOK\r\n+V:2\r\nOK\r\n"),
            completions: [(0, .fail(.cancelled), 0), (2, .fail(.cancelled), 0), (1, .succeed(["+V:2", "OK"]), 4)],
            writes: [0, 1]),
        Case(
            name: "a line still arriving when the quiet timer fires keeps the drain going; what follows is drained too",
            bytes: input(0x50, "+A\r\n+BBBBBBBBB\r\nOK\r\n"),
            completions: [(0, .fail(.timeout), 0), (1, .succeed([]), 3)], writes: [0, 1]),
        Case(
            name: "xor, three: a send, then a command written as the send finishes, then a window cut by its timer",
            bytes: input(0x95, event: 0xFF, "OK\r\n+SENDFIN:OK\r\n+P:2\r\nOK\r\n+P:3\r\nOK\r\n"),
            completions: [(0, .succeed([]), 2), (1, .succeed(["+P:2", "OK"]), 4), (2, .succeed(["+P:3"]), 5)],
            writes: [0, 1, 2]),
    ]

    @Test("the reference gives the hand-worked results, and the SDK's channel agrees", arguments: cases)
    func handWorked(_ example: Case) throws {
        let model = StreamFuzzOracle.reference(StreamFuzzOracle.Input(example.bytes))
        #expect(model.completions.map(\.operation) == example.completions.map(\.0))
        #expect(model.completions.map(\.completion) == example.completions.map(\.1))
        #expect(model.completions.map(\.lineEvents) == example.completions.map(\.2))
        #expect(model.writes.map(\.operation) == example.writes)
        #expect(model.phase == .idle)
        do {
            try StreamFuzzOracle.checkReceive(example.bytes)
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test(
        "a channel that writes the next command right after a timeout or cancellation, without draining, is flagged",
        arguments: [0x40, 0x50] as [UInt8])
    func noDrainIsFlagged(_ flags: UInt8) throws {
        let bytes = Self.input(flags, "+V:1\r\nOK\r\n+V:2\r\nOK\r\n")
        try StreamFuzzOracle.checkReceive(bytes)  // the SDK's channel passes
        let failure = #expect(throws: FuzzOracleFailure.self) {
            try StreamFuzzOracle.checkReceive(bytes, channel: NoDrainChannel.self)
        }
        // The late answer was taken for the next command's.
        #expect(failure?.description.contains("completions") == true, "\(String(describing: failure))")
        #expect(failure?.description.contains("+V:1") == true, "\(String(describing: failure))")
    }
}

/// A known-bad channel: the SDK's machine, except that a drain ends the moment
/// it starts, as if it had been quiet (its quiet timer fires at once, which
/// also forgets what the device still owes), so the next command is written
/// right after a timeout or cancellation and a late answer is read as its reply.
struct NoDrainChannel: FuzzChannel {
    var inner: AtChannelStateMachine

    static func make(encoding: XTalkAtEncoding) -> Self { Self(inner: AtChannelStateMachine(encoding: encoding)) }
    var encoding: XTalkAtEncoding { inner.encoding }
    var isIdle: Bool { inner.isIdle }
    var isDraining: Bool { inner.isDraining }
    var isClosed: Bool { inner.isClosed }

    /// When `actions` start a drain, ends it at once and hides its timers.
    private mutating func skippingDrain(_ actions: [ChannelAction]) -> [ChannelAction] {
        var bound: ChannelTimerID?
        var quiet: ChannelTimerID?
        for case .startTimer(let id, let duration) in actions {
            if duration == AtChannelStateMachine.defaultDrainBound { bound = id }
            if duration == AtChannelStateMachine.defaultDrainQuiet { quiet = id }
        }
        guard let bound, let quiet else { return actions }
        let ended = inner.timerFired(quiet)
        return actions.filter { action in
            if case .startTimer(let id, _) = action { return id != bound && id != quiet }
            return true
        }
            + ended.filter { action in
                if case .cancelTimer(bound) = action { return false }
                return true
            }
    }

    mutating func bytesReceived(_ bytes: some Collection<UInt8>) -> [ChannelAction] { inner.bytesReceived(bytes) }
    mutating func submitCommand(
        _ text: String, timeout: Duration, mode: AtChannelStateMachine.ResponseMode, log: Bool, owner: ChannelRequestID?
    ) -> (ChannelRequestID, [ChannelAction]) {
        inner.submitCommand(text, timeout: timeout, mode: mode, log: log, owner: owner)
    }
    mutating func submitSend(hexPayload: String, timeout: Duration, owner: ChannelRequestID?) -> (
        ChannelRequestID, [ChannelAction]
    ) {
        inner.submitSend(hexPayload: hexPayload, timeout: timeout, owner: owner)
    }
    mutating func writeCompleted(_ id: ChannelWriteID) -> [ChannelAction] { inner.writeCompleted(id) }
    mutating func timerFired(_ id: ChannelTimerID) -> [ChannelAction] { skippingDrain(inner.timerFired(id)) }
    mutating func cancel(_ id: ChannelRequestID) -> [ChannelAction] { skippingDrain(inner.cancel(id)) }
    mutating func setEncoding(_ encoding: XTalkAtEncoding) { inner.setEncoding(encoding) }
    mutating func disconnected(_ error: XTalkBleError) -> [ChannelAction] { inner.disconnected(error) }
}
