import Foundation

/// One unit the framer cuts out of the received byte stream.
enum FramedUnit: Equatable, Sendable {
    /// A decoded line of printable ASCII (tab allowed), terminator stripped.
    case line(String)
    /// Bytes that are not a printable line, still encoded, as received: an
    /// overflowed line's first 4096 bytes, or a non-printable line with its
    /// terminator.
    case raw(Data)
}

/// The incremental bytes-to-lines rules of PROTOCOL.md section 4.
///
/// Bytes arrive in any chunking (part of a line, one line, several lines); the
/// framer keeps the unterminated tail between calls and yields exactly the same
/// units for every split of the same stream. It decodes per byte (both
/// encodings are stateless), accepts CR LF and bare LF, ignores empty lines,
/// and bounds a line at 4096 bytes: a 4097th byte that is not a terminator
/// flushes the 4096 buffered bytes as `.raw` and starts a new line with itself.
/// A CR in position 4097 may still be the first half of a CR LF terminator, so
/// it is held until the next byte decides.
struct LineFramer {
    /// The longest line, terminator excluded.
    static let maxLineLength = 4096

    private(set) var encoding: XTalkAtEncoding
    /// The raw (still encoded) bytes of the unterminated line.
    private var pending: [UInt8] = []

    init(encoding: XTalkAtEncoding) {
        self.encoding = encoding
        pending.reserveCapacity(256)
    }

    /// True after a reset discarded a partial line: the bytes up to the next
    /// terminator are the rest of that line, not a line of their own.
    private var discarding = false

    /// True when bytes of an unterminated line are buffered, or the rest of a
    /// discarded one is still to come.
    var hasPartialLine: Bool { !pending.isEmpty || discarding }

    /// The last byte received on this stream, still encoded.
    private var lastByte: UInt8?

    /// Where the bytes received since a switch was asked for begin in
    /// `pending` (`markSwitchRequest()`), and the byte received just before
    /// them; nil when no switch is waiting.
    private var requestMark: (offset: Int, before: UInt8?)?

    /// A switch to another encoding was asked for, to apply later
    /// (`switchEncoding(to:)`): bytes from now on that form no line in the
    /// current encoding are decoded in the new one.
    mutating func markSwitchRequest() {
        requestMark = (pending.count, pending.last ?? lastByte)
    }

    /// Applies a switch asked for earlier (`markSwitchRequest()`), as
    /// `reset(encoding:)` does, and returns the bytes received since the
    /// request that formed no line in the old encoding (the device was
    /// already sending in the new one): the caller feeds them again. Without
    /// a request, it is `reset(encoding:)` and returns nothing.
    mutating func switchEncoding(to encoding: XTalkAtEncoding) -> [UInt8] {
        // (`reset(encoding:)` drops the mark.)
        guard let mark = requestMark, mark.offset < pending.count else {
            reset(encoding: encoding)
            return []
        }
        let replay = Array(pending[mark.offset...])
        lastByte = mark.before
        reset(encoding: encoding)
        return replay
    }

    /// Switches the encoding and discards the buffered partial line. The rest
    /// of that line, when it arrives, is delivered as `.raw`: a fragment is
    /// not a line (it would otherwise pose as one, e.g. the tail of a `+DI:`).
    ///
    /// Whether the device is in the middle of a line is judged in the new
    /// encoding, from the last byte received: unless it is the new
    /// encoding's line end, the device's next bytes continue a line. Bytes
    /// read under the old encoding (garbage, when it was the wrong one) may
    /// hold the device's line end where the old one saw none, or look like a
    /// line end where the device had none; and a switch to the encoding
    /// already in use re-judges nothing but the same bytes.
    mutating func reset(encoding: XTalkAtEncoding) {
        requestMark = nil
        self.encoding = encoding
        if let lastByte { discarding = lastByte != 0x0A ^ encoding.key }
        pending.removeAll(keepingCapacity: true)
    }

    /// Discards the buffered partial line and anything after it (a disconnect:
    /// the next bytes start a new stream).
    mutating func reset() {
        requestMark = nil
        discarding = false
        lastByte = nil
        pending.removeAll(keepingCapacity: true)
    }

    /// Feeds received bytes; appends every completed unit to `units`, in order.
    mutating func feed(_ bytes: some Collection<UInt8>, into units: inout [FramedUnit]) {
        let handled: Void? = bytes.withContiguousStorageIfAvailable { feed(buffer: $0, into: &units) }
        if handled == nil {
            let copy = Array(bytes)
            copy.withUnsafeBufferPointer { feed(buffer: $0, into: &units) }
        }
    }

    private mutating func feed(buffer: UnsafeBufferPointer<UInt8>, into units: inout [FramedUnit]) {
        let key = encoding.key
        let lf = 0x0A ^ key
        var start = 0
        let end = buffer.count
        guard let base = buffer.baseAddress, end > 0 else { return }
        lastByte = base[end - 1]
        while start < end {
            // Scan the still-encoded bytes for the encoded LF (memchr: vectorised,
            // and no per-byte decode is needed to find lines).
            let found = memchr(base + start, Int32(lf), end - start)
            let index = found.map { UnsafeRawPointer($0) - UnsafeRawPointer(base) } ?? end
            let segment = UnsafeBufferPointer(rebasing: buffer[start..<index])
            if index == end {
                appendContent(segment, into: &units)
                return
            }
            if discarding {
                // The rest of a discarded line, terminator included, as received.
                appendContent(segment, into: &units)
                pending.append(lf)
                units.append(.raw(Data(pending)))
                pending.removeAll(keepingCapacity: true)
                discarding = false
            } else if pending.isEmpty && segment.count <= Self.maxLineLength {
                // Fast path: the whole line is in this chunk; no copy into `pending`.
                Self.emitLine(UnsafeBufferPointer(rebasing: buffer[start...index]), key: key, into: &units)
            } else {
                appendContent(segment, into: &units)
                pending.append(lf)
                // Emitted in place, so the buffer keeps its capacity (no copy per line).
                pending.withUnsafeBufferPointer { Self.emitLine($0, key: key, into: &units) }
                pending.removeAll(keepingCapacity: true)
            }
            // A line ended here: every byte buffered after it came after a switch's request, and the
            // byte before them is this LF. (Set after the line is taken: an overflow of the line
            // moves the mark as it flushes, and the LF must have the last word.)
            if requestMark != nil { requestMark = (0, lf) }
            start = index + 1
        }
    }

    /// Appends line content (no LF inside), applying the 4096-byte bound.
    private mutating func appendContent(_ segment: UnsafeBufferPointer<UInt8>, into units: inout [FramedUnit]) {
        let cr = 0x0D ^ encoding.key
        var rest = segment
        while !rest.isEmpty {
            if pending.count > Self.maxLineLength {
                // A held CR in position 4097 was followed by a non-terminator: it starts the new line.
                flushOverflow(into: &units)
            }
            let room = Self.maxLineLength - pending.count
            if rest.count <= room {
                pending.append(contentsOf: rest)
                return
            }
            pending.append(contentsOf: UnsafeBufferPointer(rebasing: rest[0..<room]))
            rest = UnsafeBufferPointer(rebasing: rest[room...])
            // The buffer is full and `rest.first` is byte 4097.
            if rest.count == 1 && rest.first == cr {
                pending.append(cr)  // maybe the first half of CR LF: hold it
                return
            }
            flushOverflow(into: &units)
        }
    }

    /// Delivers the first 4096 buffered bytes as raw and keeps the remainder.
    private mutating func flushOverflow(into units: inout [FramedUnit]) {
        units.append(.raw(Data(pending[0..<Self.maxLineLength])))
        if let mark = requestMark {
            requestMark =
                mark.offset > Self.maxLineLength
                ? (mark.offset - Self.maxLineLength, mark.before) : (0, pending[Self.maxLineLength - 1])
        }
        pending.removeFirst(Self.maxLineLength)
    }

    /// Emits one terminated line: `line` is its raw bytes, ending with the LF
    /// (and, before it, the CR of a CR LF pair, if any).
    private static func emitLine(_ line: UnsafeBufferPointer<UInt8>, key: UInt8, into units: inout [FramedUnit]) {
        var length = line.count - 1
        if length > 0 && line[length - 1] == 0x0D ^ key { length -= 1 }
        if length == 0 { return }  // empty lines are ignored
        // Decode straight into the string's storage: one allocation, one pass.
        var printable = true
        let text = String(unsafeUninitializedCapacity: length) { storage in
            var offending = 0
            for i in 0..<length {
                let byte = line[i] ^ key
                storage[i] = byte
                // Printable ASCII or tab; anything else makes the line raw.
                offending |= (byte &- 0x20 > 0x5E && byte != 0x09) ? 1 : 0
            }
            printable = offending == 0
            return printable ? length : 0
        }
        if printable {
            units.append(.line(text))
        } else {
            units.append(.raw(Data(buffer: line)))  // as received, terminator included
        }
    }
}
