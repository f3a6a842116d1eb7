import Foundation
#if canImport(XTalkBleSdk)
    @testable import XTalkBleSdk
#endif

// The oracles of the `framer` and `receive` fuzz targets (Fuzz/README.md).
//
// This one file is compiled twice: into XTalkBleSdkTests, which replays every
// seed of Fuzz/Corpus and every pinned crash through it, and by `Fuzz/run`
// into the fuzzers, together with the SDK's protocol sources as one module
// (hence the conditional import). A broken rule throws `FuzzOracleFailure`:
// the fuzzer traps on it, the tests report it.
//
// The oracles are differential: a byte-at-a-time reference of PROTOCOL.md
// sections 4–7 and of the channel's documented rules (stale tails, late
// replies, deferred encoding switches, drains), written for clarity and
// sharing no logic with the SDK (only its value types), must agree with the
// SDK's incremental framer, classifier, field parser and AT channel for every
// input, in every chunking. When a documented behaviour changes on purpose,
// the reference changes with it; `swift test` replays the seeds to show it.

/// A rule the SDK broke for one fuzz input.
struct FuzzOracleFailure: Error, CustomStringConvertible {
    let description: String
}

/// Throws `FuzzOracleFailure(message)` unless `condition` holds.
@inline(__always)
func fuzzRequire(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzOracleFailure) {
    if !condition { throw FuzzOracleFailure(description: message()) }
}

/// The oracles of the byte-stream fuzz targets.
enum StreamFuzzOracle {
    static let maxLine = 4096
    static let commandText = "AT+FUZZ"
    static let sendPayloadHex = "48656C6C6F"
    static let timeout: Duration = .seconds(10)

    // MARK: Input

    /// A fuzz input of the byte-stream targets: a 6-byte header, then the text
    /// the device sends (decoded; the harness encodes it). Missing header bytes are 0.
    ///
    /// - byte 0, flags: bit 0 the device's encoding (0 plain, 1 xor); bits 1–2
    ///   the operation waiting for an answer (`receive`: 0 and 3 `.automatic`,
    ///   1 `.collectUntilTimeout`, 2 an RF send); bit 3 the device switches to
    ///   the other encoding at the event cut (and the host follows,
    ///   `setEncoding`); bit 4 `receive`: the operation's timer fires at the
    ///   event cut instead of at the end, `framer`: `reset()` at the event cut;
    ///   bit 5 the command is sent with `log: false`; bits 6–7 (`receive`)
    ///   the sequence: 0 one operation (as above); 1 two operations, 2 three,
    ///   3 three with the last one cancelled at the event cut (see below).
    ///
    ///   With two or three operations, all are queued at the submit cut (the
    ///   first as bits 1–2 and 5 say, the next ones the following kinds in the
    ///   order automatic, collect, send, with `log: true`); at the event cut
    ///   the operation on the wire times out (bit 4) or is cancelled (bit 4
    ///   clear); halfway between the event cut and the end, the drain's quiet
    ///   timer fires if a drain runs; after the last byte, timers fire until
    ///   every operation has completed: the one on the wire times out, a drain
    ///   ends when quiet (or at its bound when a line is still arriving).
    /// - byte 1: `n`; when n ≥ 0xC0, 80 × (n − 0xBF) filler bytes `A` (80 to
    ///   5120) are inserted into the text: long lines from short inputs.
    /// - byte 2: where the filler goes, as a fraction (n / 256) of the text.
    /// - byte 3: seeds the pseudo-random chunking.
    /// - byte 4: the submit cut (`receive`: bytes before it arrive while the
    ///   channel is idle), as a fraction of the stream.
    /// - byte 5: the event cut, as a fraction of the stream (not before the submit cut).
    struct Input {
        enum Operation { case automatic, collect, send }

        let initialEncoding: XTalkAtEncoding
        let finalEncoding: XTalkAtEncoding
        let operation: Operation
        let logs: Bool
        /// Operations queued at the submit cut (1 to 3), the first being `operation`.
        let operationCount: Int
        /// The last operation is cancelled at the event cut (three operations).
        let cancelsLast: Bool
        let switchesEncoding: Bool
        let cutAction: Bool
        let chunkSeed: UInt64
        /// The bytes as they arrive, encoded in the device's encoding of the moment.
        let stream: [UInt8]
        let submitCut: Int
        let eventCut: Int

        init(_ input: [UInt8]) {
            func header(_ index: Int) -> UInt8 { index < input.count ? input[index] : 0 }
            let flags = header(0)
            initialEncoding = flags & 1 == 0 ? .plain : .xor
            switch (flags >> 1) & 3 {
            case 1: operation = .collect
            case 2: operation = .send
            default: operation = .automatic
            }
            switchesEncoding = flags & 8 != 0
            finalEncoding = switchesEncoding ? (initialEncoding == .plain ? .xor : .plain) : initialEncoding
            cutAction = flags & 16 != 0
            logs = flags & 32 == 0
            operationCount = min(3, 1 + Int(flags >> 6))
            cancelsLast = flags >> 6 == 3
            var text = input.count > 6 ? Array(input[6...]) : []
            let pad = header(1) >= 0xC0 ? Int(header(1) - 0xBF) * 80 : 0
            if pad > 0 {
                let at = text.count * Int(header(2)) / 256
                text.insert(contentsOf: repeatElement(UInt8(ascii: "A"), count: pad), at: at)
            }
            let submitCut = text.count * Int(header(4)) / 256
            let eventCut = max(submitCut, text.count * Int(header(5)) / 256)
            let before: UInt8 = initialEncoding == .plain ? 0 : 0x5A
            let after: UInt8 = finalEncoding == .plain ? 0 : 0x5A
            stream = text.enumerated().map { $0.element ^ ($0.offset < eventCut ? before : after) }
            self.submitCut = submitCut
            self.eventCut = eventCut
            // The input itself also seeds the chunking, so that similar inputs split differently.
            var hash: UInt64 = 0xCBF2_9CE4_8422_2325
            for byte in input { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
            chunkSeed = hash ^ UInt64(header(3))
        }
    }

    /// How a stream is split into notifications.
    enum Chunking: CaseIterable, CustomStringConvertible {
        /// Each segment between cuts in one call.
        case whole
        case oneByte
        /// Pseudo-random sizes up to a bound derived from the input; fed as a
        /// non-contiguous collection, so the framer's copying path runs too.
        case random

        var description: String {
            switch self {
            case .whole: "whole"
            case .oneByte: "one byte at a time"
            case .random: "random chunks"
            }
        }
    }

    /// Splits segments of a stream according to a chunking (deterministic).
    struct Chunker {
        static let bounds = [2, 3, 5, 8, 20, 64, 182, 244, 509, 4095, 4096, 4097, 4098]
        let chunking: Chunking
        var state: UInt64
        let bound: Int

        init(_ chunking: Chunking, seed: UInt64) {
            self.chunking = chunking
            state = seed
            bound = Self.bounds[Int(seed % UInt64(Self.bounds.count))]
        }

        /// SplitMix64.
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }

        /// The chunks of `range`, in order.
        mutating func split(_ range: Range<Int>) -> [Range<Int>] {
            switch chunking {
            case .whole: return range.isEmpty ? [] : [range]
            case .oneByte: return range.map { $0..<($0 + 1) }
            case .random:
                var chunks: [Range<Int>] = []
                var start = range.lowerBound
                while start < range.upperBound {
                    let size = 1 + Int(next() % UInt64(bound))
                    let end = min(range.upperBound, start + size)
                    chunks.append(start..<end)
                    start = end
                }
                return chunks
            }
        }
    }

    // MARK: Reference framer (PROTOCOL.md section 4), one byte at a time

    /// The framing rules, one byte at a time, written for clarity.
    struct ReferenceFramer {
        private(set) var key: UInt8
        /// The raw bytes of the unterminated line (at most 4096, plus a CR that may start a CR LF).
        private(set) var pending: [UInt8] = []
        /// A switch of encoding discarded a partial line: up to the next LF, bytes are its rest, raw.
        private(set) var discarding = false

        init(encoding: XTalkAtEncoding) { key = encoding == .plain ? 0 : 0x5A }

        var hasPartialLine: Bool { !pending.isEmpty || discarding }

        var encoding: XTalkAtEncoding { key == 0 ? .plain : .xor }

        /// The last byte of the stream (encoded), if any.
        private(set) var lastByte: UInt8?

        /// `setEncoding`: the partial line is discarded; its rest, when it
        /// comes, is raw. Whether the device is mid-line is judged in the new
        /// encoding: the device's encoding never changes, so it is mid-line
        /// unless the last byte it sent is the new encoding's LF.
        mutating func reset(encoding: XTalkAtEncoding) {
            key = encoding == .plain ? 0 : 0x5A
            if let lastByte { discarding = lastByte != 0x0A ^ key }
            pending = []
        }

        /// A switch that waited: as `reset(encoding:)`, judged from `before`,
        /// the byte received before `replay`, which is then pushed again.
        mutating func reset(encoding: XTalkAtEncoding, replaying replay: [UInt8], after before: UInt8?)
            -> [FramedUnit]
        {
            lastByte = before
            reset(encoding: encoding)
            var units: [FramedUnit] = []
            for byte in replay { push(byte, into: &units) }
            return units
        }

        /// A new stream (disconnection): nothing of the old one is kept.
        mutating func reset() {
            pending = []
            discarding = false
            lastByte = nil
        }

        mutating func push(_ raw: UInt8, into units: inout [FramedUnit]) {
            lastByte = raw
            let byte = raw ^ key
            if byte == 0x0A {
                defer {
                    pending = []
                    discarding = false
                }
                if discarding {
                    units.append(.raw(Data(pending + [raw])))
                    return
                }
                var decoded = pending.map { $0 ^ key }
                if decoded.last == 0x0D { decoded.removeLast() }
                if decoded.isEmpty { return }  // empty lines are ignored
                if decoded.allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0x09 }) {
                    units.append(.line(String(decoding: decoded, as: UTF8.self)))
                } else {
                    units.append(.raw(Data(pending + [raw])))  // as received, terminator included
                }
                return
            }
            if pending.count == maxLine + 1 {
                // A CR in position 4097 that was not followed by LF: the 4096 bytes
                // overflowed, and the CR starts the next line.
                units.append(.raw(Data(pending[0..<maxLine])))
                pending = [pending[maxLine]]
            } else if pending.count == maxLine {
                if byte == 0x0D {
                    pending.append(raw)  // maybe the first half of CR LF
                    return
                }
                units.append(.raw(Data(pending)))
                pending = []
            }
            pending.append(raw)
        }
    }

    // MARK: Reference classifier (PROTOCOL.md section 5)

    enum ReferenceClass: Equatable {
        case radioFrame(Data, XTalkDiMeta)
        case malformedRadioFrame
        case crcError(XTalkDiMeta)
        case malformedCrcError
        case sendFinished(failure: String?)
        case ready
        case response(final: ReferenceFinal?)

        var isUnsolicited: Bool {
            if case .response = self { return false }
            return true
        }
    }

    enum ReferenceFinal: Equatable { case ok, error }

    static func referenceClass(_ line: String) -> ReferenceClass {
        let bytes = Array(line.utf8)
        func starts(_ prefix: String) -> Bool { bytes.starts(with: prefix.utf8) }
        if starts("+DI:") {
            guard let (meta, payload) = referenceFields(bytes.dropFirst(4), radioFrame: true) else {
                return .malformedRadioFrame
            }
            return .radioFrame(payload, meta)
        }
        if starts("+CRCERR:") {
            if bytes.count == 8 { return .crcError(XTalkDiMeta()) }  // a report without fields
            guard let (meta, _) = referenceFields(bytes.dropFirst(8), radioFrame: false) else {
                return .malformedCrcError
            }
            return .crcError(meta)
        }
        if starts("+SENDFIN:") {
            let rest = Array(bytes.dropFirst(9))
            if rest == Array("OK".utf8) { return .sendFinished(failure: nil) }
            let reason = rest.starts(with: "FAIL,".utf8) ? rest.dropFirst(5) : rest[...]
            return .sendFinished(failure: String(decoding: reason, as: UTF8.self))
        }
        if starts("+READY") { return .ready }
        if starts("+CME ERROR:") || starts("+ERR:") || line == "ERROR" { return .response(final: .error) }
        if line == "OK" { return .response(final: .ok) }
        return .response(final: nil)
    }

    static let referenceKeys = ["cnt", "len", "slot", "snr", "rssi", "lsnr", "lrssi", "rsnr", "rrssi", "txp"]
        .map { Array($0.utf8) }

    /// The `key=value` fields: nil when malformed (no `=`, empty key, a known
    /// key twice or not a decimal `Int`; for a radio frame, `data` missing,
    /// twice, empty or not even-length hex, or `len` not its length).
    static func referenceFields(_ text: ArraySlice<UInt8>, radioFrame: Bool) -> (XTalkDiMeta, Data)? {
        var values = [Int?](repeating: nil, count: referenceKeys.count)
        var payload: [UInt8]? = nil
        for field in text.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            guard let equals = field.firstIndex(of: UInt8(ascii: "=")), equals > field.startIndex else { return nil }
            let key = Array(field[..<equals])
            let value = Array(field[(equals + 1)...])
            if radioFrame && key == Array("data".utf8) {
                guard payload == nil, !value.isEmpty, let bytes = referenceHex(value) else { return nil }
                payload = bytes
            } else if let index = referenceKeys.firstIndex(of: key) {
                guard values[index] == nil, let number = referenceInteger(value) else { return nil }
                values[index] = number
            }
        }
        let meta = XTalkDiMeta(
            diCnt: values[0], len: values[1], slot: values[2], snr: values[3], rssi: values[4],
            localSnr: values[5], localRssi: values[6], remoteSnr: values[7], remoteRssi: values[8], txp: values[9])
        guard radioFrame else { return (meta, Data()) }
        guard let payload, meta.len == nil || meta.len == payload.count else { return nil }
        return (meta, Data(payload))
    }

    static func referenceInteger(_ text: [UInt8]) -> Int? {
        let digits = text.first == UInt8(ascii: "-") ? text.dropFirst() : text[...]
        guard !digits.isEmpty, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int(String(decoding: text, as: UTF8.self))  // nil when out of range
    }

    static func referenceHex(_ text: [UInt8]) -> [UInt8]? {
        func nibble(_ c: UInt8) -> UInt8? {
            (lowerHexDigits.firstIndex(of: c) ?? upperHexDigits.firstIndex(of: c)).map { UInt8($0) }
        }
        guard text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < text.count {
            guard let high = nibble(text[index]), let low = nibble(text[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    static let lowerHexDigits = Array("0123456789abcdef".utf8)
    static let upperHexDigits = Array("0123456789ABCDEF".utf8)

    /// `+DI:`/`+CRCERR:` text of a frame, with the fields in the given order.
    static func encodeFields(_ meta: XTalkDiMeta, payload: Data?, reversed: Bool) -> String {
        let known: [(String, Int?)] = [
            ("cnt", meta.diCnt), ("len", meta.len), ("slot", meta.slot), ("snr", meta.snr), ("rssi", meta.rssi),
            ("lsnr", meta.localSnr), ("lrssi", meta.localRssi), ("rsnr", meta.remoteSnr),
            ("rrssi", meta.remoteRssi), ("txp", meta.txp),
        ]
        var fields = known.compactMap { key, value in value.map { "\(key)=\($0)" } }
        fields.append("x-unknown=1")
        if let payload {
            // Lowercase, where the SDK writes uppercase: both are valid.
            var digits: [UInt8] = []
            for byte in payload { digits += [lowerHexDigits[Int(byte >> 4)], lowerHexDigits[Int(byte & 0xF)]] }
            fields.append("data=" + String(decoding: digits, as: UTF8.self))
        }
        if reversed { fields.reverse() }
        return fields.joined(separator: ",")
    }

    // MARK: Framer oracle

    /// The `framer` target: the SDK's framer agrees with the reference in every chunking.
    static func checkFramer(_ bytes: [UInt8]) throws(FuzzOracleFailure) {
        let input = Input(bytes)
        var reference = ReferenceFramer(encoding: input.initialEncoding)
        var expected: [FramedUnit] = []
        for (offset, byte) in input.stream.enumerated() {
            if offset == input.eventCut { applyCut(input, to: &reference) }
            reference.push(byte, into: &expected)
        }
        if input.stream.count == input.eventCut { applyCut(input, to: &reference) }
        try checkUnits(expected, fed: input.stream.count, what: "reference")

        for chunking in Chunking.allCases {
            var framer = LineFramer(encoding: input.initialEncoding)
            var units: [FramedUnit] = []
            var chunker = Chunker(chunking, seed: input.chunkSeed)
            func feed(_ range: Range<Int>) {
                for chunk in chunker.split(range) {
                    if chunking == .random {
                        framer.feed(input.stream[chunk].lazy.map { $0 }, into: &units)
                    } else {
                        framer.feed(input.stream[chunk], into: &units)
                    }
                }
            }
            feed(0..<input.eventCut)
            if input.cutAction { framer.reset() }
            if input.switchesEncoding { framer.reset(encoding: input.finalEncoding) }
            feed(input.eventCut..<input.stream.count)
            try checkUnits(units, fed: input.stream.count, what: "\(chunking)")
            try fuzzRequire(units == expected, "framer, \(chunking): \(firstDifference(units, expected))")
            try fuzzRequire(
                framer.hasPartialLine == reference.hasPartialLine,
                "framer, \(chunking): hasPartialLine is \(framer.hasPartialLine), expected \(reference.hasPartialLine)")
            try fuzzRequire(
                framer.encoding == input.finalEncoding, "framer, \(chunking): encoding is \(framer.encoding)")
        }
    }

    private static func applyCut(_ input: Input, to reference: inout ReferenceFramer) {
        if input.cutAction { reference.reset() }
        if input.switchesEncoding { reference.reset(encoding: input.finalEncoding) }
    }

    /// Rules every unit sequence obeys, whatever the reference says.
    static func checkUnits(_ units: [FramedUnit], fed: Int, what: String) throws(FuzzOracleFailure) {
        var accounted = 0
        for (index, unit) in units.enumerated() {
            switch unit {
            case .line(let line):
                let bytes = Array(line.utf8)
                try fuzzRequire(
                    !bytes.isEmpty && bytes.count <= maxLine,
                    "\(what): unit \(index) is a line of \(bytes.count) bytes")
                try fuzzRequire(
                    bytes.allSatisfy { (0x20...0x7E).contains($0) || $0 == 0x09 },
                    "\(what): unit \(index) is a line with a non-printable byte: \(line.debugDescription)")
                accounted += bytes.count + 1  // at least its LF
            case .raw(let data):
                try fuzzRequire(
                    !data.isEmpty && data.count <= maxLine + 2,
                    "\(what): unit \(index) is raw of \(data.count) bytes")
                accounted += data.count
            }
        }
        try fuzzRequire(accounted <= fed, "\(what): the units account for \(accounted) bytes, only \(fed) were fed")
    }

    // MARK: Receive oracle

    /// What the AT channel must do with one stream while one to three
    /// operations wait (PROTOCOL.md sections 5–7 and the channel's documented
    /// rules), one byte at a time: one FIFO, each operation's line written
    /// when the wire is free, late lines after a timeout or cancellation
    /// drained as events until quiet.
    struct ReferenceChannel {
        enum Phase: Equatable { case idle, transaction, draining }
        enum Completion: Equatable {
            case succeed([String])
            case fail(XTalkBleError)
        }
        /// One queued operation.
        struct Operation {
            let kind: Input.Operation
            let logs: Bool
            let text: String
        }

        let operations: [Operation]
        /// The operation on the wire (while `.transaction`), or the last one that was.
        var active = 0
        /// Operations waiting for the wire, in order.
        var queue: [Int] = []
        var framer: ReferenceFramer
        var phase = Phase.idle
        var responseStarted = false
        var accepted = false
        /// The RF send on the wire, not yet accepted, took an OK as an owed
        /// reply's final code: a +SENDFIN: with none owed shows it was its own.
        var paidOwedOK = false
        var lines: [String] = []
        var sawFinal = false
        var sawRaw = false
        /// The next unit completes a line that began before the command's write.
        var stale = false
        /// Replies the device owes, oldest first (true: an RF send's, whose OK
        /// makes its +SENDFIN: owed): the next final codes are theirs.
        var owed: [Bool] = []
        var owedFinishes = 0
        /// A switch came while replies were owed: until the device shows it has
        /// caught up, an `ERROR` may answer a line it read garbled (PROTOCOL.md
        /// section 6): no operation's own, and it pays no reply owed.
        var garbled = false
        /// The device echoed the line of the operation on the wire.
        var echoed = false
        /// Since a deferred switch was asked for: every byte pushed, and the byte before them.
        var sinceRequest: [UInt8] = []
        var beforeRequest: UInt8?
        /// A `log: false` command ended and no operation began since.
        var aftermath = false
        /// An encoding switch asked for while the operation owned the wire.
        var deferredEncoding: XTalkAtEncoding?
        var events: [ChannelEvent] = []
        var lineEvents = 0
        /// Each completion: the operation, its result, the number of line events before it.
        var completions: [(operation: Int, completion: Completion, lineEvents: Int)] = []
        /// Each line written: the operation, and the encoding it is written in.
        var writes: [(operation: Int, encoding: XTalkAtEncoding)] = []
        /// Bytes pushed so far.
        var offset = 0
        /// Offsets at which a unit ended an operation and, at once, a deferred
        /// switch took effect or the next operation's line was written: from
        /// there on bytes decode in the new encoding, or were received after
        /// that write. To compare chunkings, notifications end there.
        var splitOffsets: [Int] = []

        var operation: Input.Operation { operations[active].kind }
        var logs: Bool { operations[active].logs }
        var text: String { operations[active].text }

        /// The operations an input queues: the first as its header says, the
        /// next ones the following kinds (automatic, collect, send, ...), logged.
        static func operations(_ input: Input) -> [Operation] {
            let kinds: [Input.Operation] = [.automatic, .collect, .send]
            var kind = input.operation
            var all: [Operation] = []
            for index in 0..<input.operationCount {
                let text =
                    kind == .send ? "AT+SEND=" + sendPayloadHex : commandText + (index == 0 ? "" : "\(index + 1)")
                all.append(Operation(kind: kind, logs: index > 0 || input.logs || kind == .send, text: text))
                let next = (kinds.firstIndex(of: kind) ?? 0) + 1
                kind = kinds[next % kinds.count]
            }
            return all
        }

        init(_ input: Input) {
            operations = Self.operations(input)
            framer = ReferenceFramer(encoding: input.initialEncoding)
        }

        mutating func push(_ byte: UInt8) {
            var units: [FramedUnit] = []
            framer.push(byte, into: &units)
            if deferredEncoding != nil { sinceRequest.append(byte) }
            lastPushed = byte
            offset += 1
            for unit in units { self.unit(unit) }
            flushReplay()
        }

        private mutating func flushReplay() {
            let wrote = writes.count != writesAtRelease
            while !pendingReplay.isEmpty {
                let next = pendingReplay.removeFirst()
                if wrote { stale = true }  // received before the write the release led to
                unit(next)
            }
        }

        /// Every operation is queued at once; the first one's line is written.
        mutating func submit() {
            queue = Array(operations.indices)
            pump(byUnit: false)
        }

        /// The wire is free: the next waiting operation's line is written.
        private mutating func pump(byUnit: Bool) {
            guard phase == .idle, !queue.isEmpty else { return }
            active = queue.removeFirst()
            phase = .transaction
            stale = framer.hasPartialLine
            aftermath = false
            responseStarted = false
            accepted = false
            paidOwedOK = false
            lines = []
            sawFinal = false
            sawRaw = false
            echoed = false
            writes.append((active, framer.encoding))
            if byUnit { split() }
        }

        private mutating func split() {
            if splitOffsets.last != offset { splitOffsets.append(offset) }
        }

        mutating func setEncoding(_ encoding: XTalkAtEncoding) {
            if phase == .transaction {
                deferredEncoding = encoding
                sinceRequest = []
                beforeRequest = lastPushed
            } else {
                deferredEncoding = nil
                if encoding != framer.encoding {  // answers across a switch are not counted
                    garbled = garbled || !owed.isEmpty
                    clearOwed()
                }
                framer.reset(encoding: encoding)
                stale = false
            }
        }

        /// The last byte pushed, if any.
        var lastPushed: UInt8?

        private mutating func clearOwed() {
            owed = []
            owedFinishes = 0
        }

        /// The operation released the wire (idle or draining): a deferred
        /// switch applies, and the bytes since it was asked for that formed no
        /// line in the old encoding are decoded in the new one.
        private mutating func released(byUnit: Bool) {
            guard let encoding = deferredEncoding else { return }
            deferredEncoding = nil
            let count = min(framer.pending.count, sinceRequest.count)
            let replay = Array(sinceRequest.suffix(count))
            let before = count < sinceRequest.count ? sinceRequest[sinceRequest.count - count - 1] : beforeRequest
            let replayed = framer.reset(encoding: encoding, replaying: replay, after: before)
            stale = false
            garbled = garbled || !owed.isEmpty
            clearOwed()
            if byUnit {
                // Released by a received unit: handled after it, and before any write since.
                split()
                pendingReplay += replayed
                writesAtRelease = writes.count
            } else {
                for replayedUnit in replayed { unit(replayedUnit) }
            }
        }

        /// Units decoded again by a switch that waited, handled once the unit that released the wire is.
        var pendingReplay: [FramedUnit] = []
        var writesAtRelease = 0

        private mutating func complete(_ completion: Completion, then next: Phase, byUnit: Bool) {
            completions.append((active, completion, lineEvents))
            if operation != .send && !logs { aftermath = true }
            phase = next
            released(byUnit: byUnit)
            pump(byUnit: byUnit)
        }

        mutating func unit(_ unit: FramedUnit) {
            let wasStale = stale
            stale = false
            switch unit {
            case .raw(let data):
                events.append(.raw(data))
                if phase == .transaction && !wasStale { sawRaw = true }
            case .line(let line):
                let lineClass = referenceClass(line)
                let sensitive =
                    !lineClass.isUnsolicited
                    && (phase == .transaction ? (operation != .send && !logs) : aftermath)
                events.append(.line(line, sensitive: sensitive))
                lineEvents += 1
                switch lineClass {
                case .radioFrame(let payload, let meta): events.append(.radioFrame(payload, meta))
                case .crcError(let meta): events.append(.crcError(meta, line))
                case .sendFinished(let failure):
                    events.append(.sendFinished(line))
                    // One owed an earlier send is that send's; and only after the device
                    // accepted our frame: an earlier one is an older frame's.
                    // Unless the send took an OK after its write as an owed reply's: the
                    // device sends +SENDFIN: only for a frame it accepted, so that OK was
                    // ours, and the reply thought owed will not come.
                    if owedFinishes > 0 {
                        owedFinishes -= 1
                    } else if phase == .transaction && operation == .send && (accepted || paidOwedOK) {
                        if !accepted { owed = [] }
                        let completion = failure.map {
                            Completion.fail(.writeFailed("the radio could not send the frame: \($0)"))
                        }
                        complete(completion ?? .succeed([]), then: .idle, byUnit: true)
                    }
                case .ready:  // the device rebooted
                    clearOwed()
                    garbled = false
                case .malformedRadioFrame, .malformedCrcError: break
                case .response(let final):
                    if !wasStale {
                        response(line, final: final)
                    } else if phase == .transaction {
                        ownerless(line, final: final)
                    }
                }
            }
        }

        /// The `ERROR` a device may answer a line it read garbled before a switch.
        private func isGarbledLineAnswer(_ line: String) -> Bool { garbled && line == "ERROR" }

        /// A reply line that is no operation's own: a final code pays the oldest owed.
        private mutating func ownerless(_ line: String, final: ReferenceFinal?) {
            if let final {
                guard !owed.isEmpty, !isGarbledLineAnswer(line) else { return }
                if owed.removeFirst() && final == .ok { owedFinishes += 1 }
            } else if owed.isEmpty {
                owed.append(false)
            }
        }

        private mutating func response(_ line: String, final: ReferenceFinal?) {
            guard phase == .transaction else { return ownerless(line, final: final) }
            if line == text && !(echoed && sawFinal) {
                // Our echo: earlier replies have ended, and what came before it was theirs.
                echoed = true
                lines = []
                sawFinal = false
                sawRaw = false
                paidOwedOK = false  // that OK came before our line: not ours
                owed = []
                garbled = false
                return
            }
            // Owed replies come first; an echo of another line (no answer begins
            // with "AT") starts one.
            if !owed.isEmpty || (final == nil && line.hasPrefix("AT")) || isGarbledLineAnswer(line) {
                if !owed.isEmpty && final == .ok && operation == .send && !accepted { paidOwedOK = true }
                return ownerless(line, final: final)
            }
            responseStarted = true
            switch operation {
            case .automatic, .collect:
                garbled = false  // the device answered our line
                lines.append(line)
                if final != nil { sawFinal = true }
                if operation == .automatic && final != nil { complete(.succeed(lines), then: .idle, byUnit: true) }
            case .send:
                guard !accepted else { return ownerless(line, final: final) }
                switch final {
                case .ok:
                    accepted = true
                    garbled = false
                case .error:
                    complete(.fail(.writeFailed("the device rejected the frame: \(line)")), then: .idle, byUnit: true)
                case nil: ownerless(line, final: nil)  // an RF send is answered OK or ERROR alone
                }
            }
        }

        /// What the operation on the wire leaves owed if it ends now without its answer.
        private mutating func leaveOwed() {
            switch operation {
            case .automatic, .collect: if !sawFinal { owed.append(false) }
            case .send: if accepted { owedFinishes += 1 } else { owed.append(true) }
            }
        }

        /// The timer of the operation on the wire fires.
        mutating func timerFired() {
            guard phase == .transaction else { return }  // completed: the driver cancelled the timer
            if operation == .collect {
                let clean = sawFinal && !sawRaw && !framer.hasPartialLine
                if !clean { leaveOwed() }
                complete(.succeed(lines), then: clean ? .idle : .draining, byUnit: false)
            } else {
                leaveOwed()
                complete(.fail(.timeout), then: .draining, byUnit: false)
            }
        }

        /// The caller of an operation is cancelled: a waiting one leaves the
        /// queue, never written; the one on the wire fails and the channel
        /// drains; a completed one is left alone.
        mutating func cancel(_ index: Int) {
            if let position = queue.firstIndex(of: index) {
                queue.remove(at: position)
                completions.append((index, .fail(.cancelled), lineEvents))
            } else if phase == .transaction && active == index {
                leaveOwed()
                complete(.fail(.cancelled), then: .draining, byUnit: false)
            }
        }

        /// The drain's quiet period passed: the drain ends unless a line is
        /// still arriving (then it waits for another quiet period).
        mutating func quietFired() {
            guard phase == .draining, !framer.hasPartialLine else { return }
            phase = .idle
            clearOwed()  // quiet: nothing earlier is owed any more
            pump(byUnit: false)
        }

        /// The drain's bound: it ends, quiet or not.
        mutating func boundFired() {
            guard phase == .draining else { return }
            phase = .idle
            pump(byUnit: false)
        }

        /// After the last byte: timers fire until every operation has
        /// completed (the one on the wire times out; a drain ends when quiet,
        /// else at its bound).
        mutating func runOut() {
            for _ in 0..<(2 * operations.count + 1) {
                switch phase {
                case .transaction:
                    timerFired()
                case .draining:
                    quietFired()
                    boundFired()
                case .idle:
                    return
                }
            }
        }
    }

    /// What one run of the channel machine did.
    struct ChannelRun: Equatable {
        var actions: [ChannelAction] = []
        /// The request of each operation, by index.
        var requests: [ChannelRequestID] = []
        /// Each line written, with the operation it belongs to.
        var writes: [Int] = []
        var endedIdle = false
        var endedDraining = false

        /// Each completion: the operation, its result, the number of line events before it.
        var completions: [(operation: Int, completion: ReferenceChannel.Completion, lineEvents: Int)] {
            var all: [(Int, ReferenceChannel.Completion, Int)] = []
            var lineEvents = 0
            for action in actions {
                switch action {
                case .emit(.line): lineEvents += 1
                case .succeed(let id, let lines):
                    all.append((requests.firstIndex(of: id) ?? -1, .succeed(lines), lineEvents))
                case .fail(let id, let error): all.append((requests.firstIndex(of: id) ?? -1, .fail(error), lineEvents))
                default: break
                }
            }
            return all
        }
    }

    /// The `receive` target: the AT channel, fed the stream in every chunking
    /// with one to three operations waiting, agrees with the reference: the
    /// same events, every operation completed once with the expected result
    /// after the expected line, each line written in turn and in the expected
    /// encoding, timers balanced, the same end state; every chunking acts
    /// identically; and every parsed `+DI:`/`+CRCERR:` re-encodes to the same frame.
    static func checkReceive(_ bytes: [UInt8]) throws(FuzzOracleFailure) {
        try checkReceive(bytes, channel: AtChannelStateMachine.self)
    }

    /// `checkReceive` against any channel (tests show it flags a broken one).
    static func checkReceive<Channel: FuzzChannel>(_ bytes: [UInt8], channel: Channel.Type) throws(FuzzOracleFailure) {
        let input = Input(bytes)
        let model = reference(input)
        try fuzzRequire(
            model.completions.count == model.operations.count
                && Set(model.completions.map(\.operation)).count == model.operations.count,
            "reference: completions \(model.completions) for \(model.operations.count) operations")

        var first: ChannelRun? = nil
        for chunking in Chunking.allCases {
            // A switch deferred until the operation ended, and the next operation's
            // write, take effect after the batch that ended it; to compare
            // chunkings, notifications end there.
            let run = try runChannel(input, channel: Channel.self, chunking: chunking, alsoSplitAt: model.splitOffsets)
            let events = run.actions.compactMap { action -> ChannelEvent? in
                if case .emit(let event) = action { return event } else { return nil }
            }
            try fuzzRequire(events == model.events, "receive, \(chunking): \(firstDifference(events, model.events))")
            let completions = run.completions
            try fuzzRequire(
                completions.map(\.operation) == model.completions.map(\.operation)
                    && completions.map(\.completion) == model.completions.map(\.completion)
                    && completions.map(\.lineEvents) == model.completions.map(\.lineEvents),
                "receive, \(chunking): completions \(completions), expected \(model.completions)")
            try fuzzRequire(
                run.writes == model.writes.map(\.operation),
                "receive, \(chunking): lines written for operations \(run.writes), expected "
                    + "\(model.writes.map(\.operation))"
            )
            try fuzzRequire(
                run.endedIdle == (model.phase == .idle) && run.endedDraining == (model.phase == .draining),
                "receive, \(chunking): ended idle \(run.endedIdle), draining \(run.endedDraining); expected "
                    + "\(model.phase)"
            )
            var written = 0
            for action in run.actions {
                guard case .write(_, let line) = action else { continue }
                let (operation, encoding) = model.writes[written]
                let key: UInt8 = encoding == .plain ? 0 : 0x5A
                let expected = Array((model.operations[operation].text + "\r\n").utf8).map { $0 ^ key }
                try fuzzRequire(
                    line == expected, "receive, \(chunking): write \(written) is \(line), expected \(expected)")
                written += 1
            }
            if let first {
                try fuzzRequire(
                    run == first,
                    "receive: \(chunking) acted differently: \(firstDifference(run.actions, first.actions))")
            } else {
                first = run
            }
        }

        for event in model.events {
            switch event {
            case .radioFrame(let payload, let meta):
                try fuzzRequire(
                    !payload.isEmpty && (meta.len == nil || meta.len == payload.count),
                    "a radio frame of \(payload.count) bytes with len \(String(describing: meta.len))")
                for reversed in [false, true] {
                    let line = "+DI:" + encodeFields(meta, payload: payload, reversed: reversed)
                    let again = LineClassifier.classify(line)
                    try fuzzRequire(again == .radioFrame(payload, meta), "re-encoded \(line) classified as \(again)")
                }
                let hex = Hex.encode(payload)
                try fuzzRequire(
                    Hex.decode(Array(hex.utf8)) == Array(payload)
                        && Hex.decode(Array(hex.lowercased().utf8)) == Array(payload),
                    "Hex round trip of \(hex)")
            case .crcError(let meta, _):
                for reversed in [false, true] {
                    let line = "+CRCERR:" + encodeFields(meta, payload: nil, reversed: reversed)
                    let again = LineClassifier.classify(line)
                    try fuzzRequire(again == .crcError(meta), "re-encoded \(line) classified as \(again)")
                }
            case .line, .sendFinished, .raw:
                break
            }
        }
    }

    /// Where the stream's half after the event cut begins (two or three operations: the drain's quiet timer fires
    /// there).
    static func drainCut(_ input: Input) -> Int {
        input.eventCut + (input.stream.count - input.eventCut) / 2
    }

    /// The reference, driven through the input's script.
    static func reference(_ input: Input) -> ReferenceChannel {
        var model = ReferenceChannel(input)
        let sequence = input.operationCount > 1
        for offset in 0..<input.submitCut { model.push(input.stream[offset]) }
        model.submit()
        for offset in input.submitCut..<input.eventCut { model.push(input.stream[offset]) }
        if input.cutAction {
            model.timerFired()
        } else if sequence {
            model.cancel(model.active)
        }
        if input.cancelsLast { model.cancel(input.operationCount - 1) }
        if input.switchesEncoding { model.setEncoding(input.finalEncoding) }
        let drainCut = sequence ? drainCut(input) : input.eventCut
        for offset in input.eventCut..<drainCut { model.push(input.stream[offset]) }
        if sequence { model.quietFired() }
        for offset in drainCut..<input.stream.count { model.push(input.stream[offset]) }
        if sequence {
            model.runOut()
        } else if !input.cutAction {
            model.timerFired()
        }
        return model
    }

    /// Runs a channel machine over the stream through the input's script,
    /// notifications also ending at `alsoSplitAt`; checks the action protocol
    /// (lines written one at a time, each completed at once; timers started
    /// once, cancelled only while running; requests completed once).
    static func runChannel<Channel: FuzzChannel>(
        _ input: Input, channel _: Channel.Type, chunking: Chunking, alsoSplitAt splits: [Int]
    ) throws(FuzzOracleFailure) -> ChannelRun {
        var channel = Channel.make(encoding: input.initialEncoding)
        let operations = ReferenceChannel.operations(input)
        let sequence = operations.count > 1
        var run = ChannelRun()
        var live: [ChannelTimerID: Duration] = [:]
        var started = Set<ChannelTimerID>()
        var completed = Set<ChannelRequestID>()
        func apply(_ actions: [ChannelAction]) throws(FuzzOracleFailure) {
            var writes: [ChannelWriteID] = []
            for action in actions {
                switch action {
                case .startTimer(let id, let duration):
                    try fuzzRequire(started.insert(id).inserted, "\(chunking): \(id) started twice")
                    live[id] = duration
                case .cancelTimer(let id):
                    try fuzzRequire(live.removeValue(forKey: id) != nil, "\(chunking): \(id) cancelled but not running")
                case .write(let id, _):
                    // The line of the first operation neither written nor completed.
                    let next = run.requests.indices.first {
                        !run.writes.contains($0) && !completed.contains(run.requests[$0])
                    }
                    try fuzzRequire(next != nil, "\(chunking): a write with no operation waiting")
                    run.writes.append(next ?? -1)
                    writes.append(id)
                case .succeed(let id, _), .fail(let id, _):
                    try fuzzRequire(completed.insert(id).inserted, "\(chunking): \(id) completed twice")
                case .withdrawWrite, .writeUnattributed, .grantSession:
                    throw FuzzOracleFailure(description: "\(chunking): unexpected \(action)")
                case .emit: break
                }
            }
            run.actions += actions
            // The link takes each line at once.
            for id in writes { try apply(channel.writeCompleted(id)) }
        }
        /// Fires the running timer of that duration, if any.
        func fire(_ duration: Duration) throws(FuzzOracleFailure) {
            guard let id = live.first(where: { $0.value == duration })?.key else { return }
            live.removeValue(forKey: id)
            try apply(channel.timerFired(id))
        }
        var chunker = Chunker(chunking, seed: input.chunkSeed)
        var position = 0
        func feed(to end: Int) throws(FuzzOracleFailure) {
            while position < end {
                let stop = min(end, splits.first { $0 > position } ?? end)
                for chunk in chunker.split(position..<stop) {
                    if chunking == .random {
                        try apply(channel.bytesReceived(input.stream[chunk].lazy.map { $0 }))
                    } else {
                        try apply(channel.bytesReceived(input.stream[chunk]))
                    }
                }
                position = stop
            }
        }

        try feed(to: input.submitCut)
        for (index, operation) in operations.enumerated() {
            let (id, submitted): (ChannelRequestID, [ChannelAction])
            switch operation.kind {
            case .automatic, .collect:
                (id, submitted) = channel.submitCommand(
                    operation.text, timeout: timeout,
                    mode: operation.kind == .collect ? .collectUntilTimeout : .automatic,
                    log: operation.logs, owner: nil)
            case .send:
                (id, submitted) = channel.submitSend(hexPayload: sendPayloadHex, timeout: timeout, owner: nil)
            }
            run.requests.append(id)
            if index == 0 {
                let key: UInt8 = input.initialEncoding == .plain ? 0 : 0x5A
                guard submitted.count == 2, case .startTimer(_, timeout) = submitted[0],
                    case .write(_, let line) = submitted[1],
                    line == Array((operation.text + "\r\n").utf8).map({ $0 ^ key })
                else { throw FuzzOracleFailure(description: "\(chunking): submitting acted \(submitted)") }
            } else {
                try fuzzRequire(submitted.isEmpty, "\(chunking): submitting a queued operation acted \(submitted)")
            }
            try apply(submitted)
        }
        try feed(to: input.eventCut)
        if input.cutAction {
            try fire(timeout)
        } else if sequence, let wire = run.writes.last, !completed.contains(run.requests[wire]) {
            try apply(channel.cancel(run.requests[wire]))
        }
        if input.cancelsLast { try apply(channel.cancel(run.requests[operations.count - 1])) }
        if input.switchesEncoding { channel.setEncoding(input.finalEncoding) }
        if sequence {
            try feed(to: drainCut(input))
            try fire(AtChannelStateMachine.defaultDrainQuiet)
        }
        try feed(to: input.stream.count)
        if sequence {
            for _ in 0..<(2 * operations.count + 1) {
                if live.values.contains(timeout) {
                    try fire(timeout)
                } else if channel.isDraining {
                    try fire(AtChannelStateMachine.defaultDrainQuiet)
                    if channel.isDraining { try fire(AtChannelStateMachine.defaultDrainBound) }
                } else {
                    break
                }
            }
        } else if !input.cutAction {
            try fire(timeout)
        }
        try fuzzRequire(
            completed.count == operations.count,
            "\(chunking): \(completed.count) of \(operations.count) operations completed")
        try fuzzRequire(channel.encoding == input.finalEncoding, "\(chunking): the encoding is \(channel.encoding)")
        run.endedIdle = channel.isIdle
        run.endedDraining = channel.isDraining
        // Idle: no timer left; draining: its quiet and bound timers.
        try fuzzRequire(live.count == (run.endedDraining ? 2 : 0), "\(chunking): timers \(live) still running")

        try apply(channel.disconnected(.notConnected))
        try fuzzRequire(live.isEmpty, "\(chunking): timers \(live) still running after disconnection")
        try fuzzRequire(channel.isClosed, "\(chunking): not closed after disconnection")
        let late = channel.bytesReceived(input.stream)
        try fuzzRequire(late.isEmpty, "\(chunking): bytes after disconnection acted \(late)")
        return run
    }

    /// The first index where two sequences differ, for failure messages.
    static func firstDifference<T: Equatable>(_ actual: [T], _ expected: [T]) -> String {
        let index =
            zip(actual, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            ?? min(actual.count, expected.count)
        let got = index < actual.count ? "\(actual[index])" : "nothing"
        let want = index < expected.count ? "\(expected[index])" : "nothing"
        return "at \(index) of \(actual.count) (expected \(expected.count)): got \(got), expected \(want)"
    }
}

/// The channel interface the `receive` oracle drives: the SDK's machine, or in
/// tests a deliberately broken variant that the oracle must flag.
protocol FuzzChannel {
    static func make(encoding: XTalkAtEncoding) -> Self
    var encoding: XTalkAtEncoding { get }
    var isIdle: Bool { get }
    var isDraining: Bool { get }
    var isClosed: Bool { get }
    mutating func bytesReceived(_ bytes: some Collection<UInt8>) -> [ChannelAction]
    mutating func submitCommand(
        _ text: String, timeout: Duration, mode: AtChannelStateMachine.ResponseMode, log: Bool, owner: ChannelRequestID?
    ) -> (ChannelRequestID, [ChannelAction])
    mutating func submitSend(hexPayload: String, timeout: Duration, owner: ChannelRequestID?) -> (
        ChannelRequestID, [ChannelAction]
    )
    mutating func writeCompleted(_ id: ChannelWriteID) -> [ChannelAction]
    mutating func timerFired(_ id: ChannelTimerID) -> [ChannelAction]
    mutating func cancel(_ id: ChannelRequestID) -> [ChannelAction]
    mutating func setEncoding(_ encoding: XTalkAtEncoding)
    mutating func disconnected(_ error: XTalkBleError) -> [ChannelAction]
}

extension AtChannelStateMachine: FuzzChannel {
    static func make(encoding: XTalkAtEncoding) -> Self { Self(encoding: encoding) }
}
