import Foundation

/// Host-to-device byte transport of PROTOCOL.md section 3, sans I/O.
///
/// Lines queue in order and go out as one byte stream, cut into chunks of at
/// most the platform's maximum write length, read at each write (the MTU can
/// grow after connecting). A chunk is filled across line boundaries, so that
/// queued lines keep every packet of the link full; lines are never
/// reordered or interleaved. Without response, a chunk goes out only while
/// the platform has room (`canSendWriteWithoutResponse`), and a line is
/// complete when its last byte was handed over; with response, one chunk is
/// outstanding at a time and a line completes at the acknowledgement of the
/// chunk holding its last byte.
struct PassthroughWritePump {
    enum Completion: Equatable {
        case completed(ChannelWriteID)
        case failed(ChannelWriteID, reason: String)
    }

    struct Chunk: Equatable {
        let bytes: Data
        /// Lines whose last byte is in this chunk (without response: complete now).
        let completes: [ChannelWriteID]
        /// Lines whose last byte is in this chunk, either write type: handed
        /// to the link whole now (with response, they complete at its
        /// acknowledgement). Until then the device cannot have answered them.
        let handsOver: [ChannelWriteID]
    }

    private struct Line {
        /// nil for an unattributed write: bytes no operation waits for.
        let id: ChannelWriteID?
        let bytes: [UInt8]
        var offset = 0
    }

    /// The with-response chunk awaiting its acknowledgement.
    private struct Outstanding {
        /// Lines that end in the chunk.
        let completes: [ChannelWriteID]
        /// The chunk stopped inside a line (whose id, if it has one, fails with a refused chunk).
        let stoppedInside: Bool
        let partial: ChannelWriteID?
    }

    let writeType: BleWriteType
    private var lines: [Line] = []
    private var head = 0
    private var outstanding: Outstanding?

    init(writeType: BleWriteType) {
        self.writeType = writeType
    }

    /// True while bytes wait to be written or acknowledged.
    var isBusy: Bool { head < lines.count || outstanding != nil }

    mutating func enqueue(_ id: ChannelWriteID, _ bytes: [UInt8]) {
        // (A line ends in CR LF: an empty one would complete with nothing written.)
        assert(!bytes.isEmpty, "enqueue(\(id)): an empty line")
        lines.append(Line(id: id, bytes: bytes))
    }

    /// Queues bytes that no operation waits for (the end of a line a lost link
    /// cut, a benchmark's raw lines): written in order like any line, never
    /// reported as completed or failed, never withdrawn.
    mutating func enqueueUnattributed(_ bytes: [UInt8]) {
        assert(!bytes.isEmpty, "enqueueUnattributed: no bytes")
        lines.append(Line(id: nil, bytes: bytes))
    }

    /// The next chunk to write now, or nil when nothing can go out yet.
    /// `canSend` is the platform's flow-control answer (without response);
    /// `maximumLength` its current maximum write length.
    mutating func nextChunk(maximumLength: Int, canSend: Bool) -> Chunk? {
        guard head < lines.count, maximumLength > 0 else { return nil }
        switch writeType {
        case .withoutResponse: guard canSend else { return nil }
        case .withResponse: guard outstanding == nil else { return nil }
        }
        var chunk = Data()
        chunk.reserveCapacity(maximumLength)
        var completes: [ChannelWriteID] = []
        while chunk.count < maximumLength && head < lines.count {
            let line = lines[head]
            let end = min(line.bytes.count, line.offset + (maximumLength - chunk.count))
            chunk.append(contentsOf: line.bytes[line.offset..<end])
            lines[head].offset = end
            guard end == line.bytes.count else { break }
            if let id = line.id { completes.append(id) }
            advanceHead()
        }
        switch writeType {
        case .withoutResponse:
            return Chunk(bytes: chunk, completes: completes, handsOver: completes)
        case .withResponse:
            let stoppedInside = head < lines.count && lines[head].offset > 0
            outstanding = Outstanding(
                completes: completes, stoppedInside: stoppedInside,
                partial: stoppedInside ? lines[head].id : nil)
            return Chunk(bytes: chunk, completes: [], handsOver: completes)
        }
    }

    /// A with-response chunk was acknowledged (or refused). Returns the
    /// completions of the lines that ended in it; a refused chunk fails every
    /// line it held a part of, and drops the rest of a line it stopped inside.
    mutating func acknowledged(error: String?) -> [Completion] {
        guard let chunk = outstanding else { return [] }  // a stray acknowledgement
        outstanding = nil
        guard let error else { return chunk.completes.map { .completed($0) } }
        var failures = chunk.completes.map { Completion.failed($0, reason: error) }
        if chunk.stoppedInside, head < lines.count, lines[head].offset > 0 {
            advanceHead()
            if let partial = chunk.partial { failures.append(.failed(partial, reason: error)) }
        }
        return failures
    }

    /// Takes back a queued line whose writing has not started; returns false
    /// when it is unknown or already (partly) written, which cannot be undone
    /// without leaving the device half a command.
    mutating func withdraw(_ id: ChannelWriteID) -> Bool {
        guard let index = lines[head...].firstIndex(where: { $0.id == id }), lines[index].offset == 0 else {
            return false
        }
        lines.remove(at: index)
        return true
    }

    /// Discards everything (a disconnect).
    mutating func reset() {
        lines.removeAll()
        head = 0
        outstanding = nil
    }

    private mutating func advanceHead() {
        head += 1
        if head > 64 && head * 2 > lines.count {
            lines.removeFirst(head)
            head = 0
        }
    }
}
