import Foundation

/// Host-to-device byte transport of PROTOCOL.md section 3, sans I/O.
///
/// Lines queue in order and go out in chunks of at most the platform's
/// maximum write length, read at each write (the MTU can grow after
/// connecting). Without response, a chunk goes out only while the platform
/// has room (`canSendWriteWithoutResponse`), and a line is complete when its
/// last chunk was handed over; with response, one chunk is outstanding at a
/// time and a line completes at the acknowledgement of its last chunk. Chunks
/// of one line are never interleaved with another's.
struct PassthroughWritePump {
    enum Completion: Equatable {
        case completed(ChannelWriteID)
        case failed(ChannelWriteID, reason: String)
    }

    struct Chunk: Equatable {
        let bytes: Data
        /// Set when this chunk's hand-over (without response) completes its line.
        let completes: ChannelWriteID?
    }

    private struct Line {
        let id: ChannelWriteID
        let bytes: [UInt8]
        var offset = 0
    }

    let writeType: BleWriteType
    private var lines: [Line] = []
    private var head = 0
    /// With response: the line whose chunk awaits its acknowledgement.
    private var awaitingAck: ChannelWriteID?

    init(writeType: BleWriteType) {
        self.writeType = writeType
    }

    /// True while bytes wait to be written or acknowledged.
    var isBusy: Bool { head < lines.count || awaitingAck != nil }

    mutating func enqueue(_ id: ChannelWriteID, _ bytes: [UInt8]) {
        lines.append(Line(id: id, bytes: bytes))
    }

    /// The next chunk to write now, or nil when nothing can go out yet.
    /// `canSend` is the platform's flow-control answer (without response);
    /// `maximumLength` its current maximum write length.
    mutating func nextChunk(maximumLength: Int, canSend: Bool) -> Chunk? {
        guard head < lines.count, maximumLength > 0 else { return nil }
        switch writeType {
        case .withoutResponse: guard canSend else { return nil }
        case .withResponse: guard awaitingAck == nil else { return nil }
        }
        var line = lines[head]
        let end = min(line.bytes.count, line.offset + maximumLength)
        let chunk = Data(line.bytes[line.offset..<end])
        line.offset = end
        let finished = end == line.bytes.count
        lines[head] = line
        switch writeType {
        case .withoutResponse:
            if finished { advanceHead() }
            return Chunk(bytes: chunk, completes: finished ? line.id : nil)
        case .withResponse:
            awaitingAck = line.id
            return Chunk(bytes: chunk, completes: nil)
        }
    }

    /// A with-response write was acknowledged (or refused). Returns the line's
    /// completion when this was its last chunk or when it failed; a failed
    /// line's remaining chunks are dropped.
    mutating func acknowledged(error: String?) -> Completion? {
        guard let id = awaitingAck else { return nil }  // a stray acknowledgement
        awaitingAck = nil
        guard head < lines.count, lines[head].id == id else { return nil }
        if let error {
            advanceHead()
            return .failed(id, reason: error)
        }
        if lines[head].offset == lines[head].bytes.count {
            advanceHead()
            return .completed(id)
        }
        return nil
    }

    /// Takes back a queued line whose writing has not started; returns false
    /// when it is unknown or already (partly) written, which cannot be undone
    /// without leaving the device half a command.
    mutating func withdraw(_ id: ChannelWriteID) -> Bool {
        guard let index = lines[head...].firstIndex(where: { $0.id == id }), lines[index].offset == 0,
              awaitingAck != id
        else { return false }
        lines.remove(at: index)
        return true
    }

    /// Discards everything (a disconnect).
    mutating func reset() {
        lines.removeAll()
        head = 0
        awaitingAck = nil
    }

    private mutating func advanceHead() {
        head += 1
        if head > 64 && head * 2 > lines.count {
            lines.removeFirst(head)
            head = 0
        }
    }
}
