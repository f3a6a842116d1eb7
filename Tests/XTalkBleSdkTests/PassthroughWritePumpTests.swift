import Foundation
import Testing
@testable import XTalkBleSdk

@Suite("Passthrough write pump: chunking and flow control (PROTOCOL.md section 3)", .timeLimit(.minutes(5)))
struct PassthroughWritePumpTests {
    let a = ChannelWriteID(raw: 1)
    let b = ChannelWriteID(raw: 2)

    @Test("without response: chunks of the current maximum length, while there is room")
    func withoutResponse() {
        var pump = PassthroughWritePump(writeType: .withoutResponse)
        pump.enqueue(a, Array(0..<50))
        pump.enqueue(b, Array(50..<60))
        #expect(pump.nextChunk(maximumLength: 20, canSend: false) == nil)
        #expect(
            pump.nextChunk(maximumLength: 20, canSend: true) == .init(bytes: Data(0..<20), completes: [], handsOver: [])
        )
        // The MTU grew: the next chunk is larger, and filled across the line boundary.
        #expect(
            pump.nextChunk(maximumLength: 244, canSend: true)
                == .init(bytes: Data(20..<60), completes: [a, b], handsOver: [a, b]))
        #expect(pump.nextChunk(maximumLength: 244, canSend: true) == nil)
        #expect(!pump.isBusy)
    }

    @Test("an unattributed write goes out in order, packed with the next line, and is never reported or withdrawn")
    func unattributed() {
        var pump = PassthroughWritePump(writeType: .withoutResponse)
        pump.enqueueUnattributed([0x0D, 0x0A])
        pump.enqueue(a, Array(0..<10))
        #expect(
            pump.nextChunk(maximumLength: 20, canSend: true)
                == .init(bytes: Data([0x0D, 0x0A] + Array(0..<10)), completes: [a], handsOver: [a]))
        #expect(!pump.isBusy)
        // With response: a refused chunk that stopped inside an unattributed
        // write drops its rest and fails only the attributed lines it held.
        var acked = PassthroughWritePump(writeType: .withResponse)
        acked.enqueue(a, [1, 2])
        acked.enqueueUnattributed(Array(repeating: 0x55, count: 30))
        acked.enqueue(b, [3])
        let withdrawn = acked.withdraw(b)
        #expect(withdrawn, "an attributed line not yet started can be withdrawn")
        acked.enqueue(b, [3])
        let first = acked.nextChunk(maximumLength: 20, canSend: true)
        #expect(first?.bytes.count == 20)
        // With response: a line ends in the chunk, handed over now, complete only at the acknowledgement.
        #expect(first?.handsOver == [a] && first?.completes == [])
        #expect(acked.acknowledged(error: "refused") == [.failed(a, reason: "refused")])
        #expect(
            acked.nextChunk(maximumLength: 20, canSend: true)?.bytes == Data([3]),
            "the rest of the unattributed write is dropped")
        #expect(acked.acknowledged(error: nil) == [.completed(b)])
    }

    @Test("lines are never interleaved or reordered; chunks are full across line boundaries")
    func noInterleaving() {
        var pump = PassthroughWritePump(writeType: .withoutResponse)
        pump.enqueue(a, Array(repeating: 0xAA, count: 45))
        pump.enqueue(b, Array(repeating: 0xBB, count: 45))
        var out: [UInt8] = []
        var sizes: [Int] = []
        var completions: [[ChannelWriteID]] = []
        while let chunk = pump.nextChunk(maximumLength: 20, canSend: true) {
            out += chunk.bytes
            sizes.append(chunk.bytes.count)
            completions.append(chunk.completes)
        }
        #expect(out == Array(repeating: 0xAA, count: 45) + Array(repeating: 0xBB, count: 45))
        #expect(sizes == [20, 20, 20, 20, 10], "every packet full but the last")
        #expect(completions == [[], [], [a], [], [b]])
    }

    @Test("with response: one chunk outstanding; the line completes at its last acknowledgement")
    func withResponse() {
        var pump = PassthroughWritePump(writeType: .withResponse)
        pump.enqueue(a, Array(0..<30))
        pump.enqueue(b, Array(30..<35))
        #expect(pump.nextChunk(maximumLength: 20, canSend: false)?.bytes == Data(0..<20))
        #expect(pump.nextChunk(maximumLength: 20, canSend: true) == nil)
        #expect(pump.acknowledged(error: nil) == [])
        #expect(pump.nextChunk(maximumLength: 20, canSend: false)?.bytes == Data(20..<35))
        #expect(pump.acknowledged(error: nil) == [.completed(a), .completed(b)])
        #expect(pump.acknowledged(error: nil) == [], "a stray acknowledgement")
        #expect(!pump.isBusy)
    }

    @Test("with response: a refused chunk fails its line and drops the rest of it")
    func withResponseFailure() {
        var pump = PassthroughWritePump(writeType: .withResponse)
        pump.enqueue(a, Array(0..<30))
        pump.enqueue(b, Array(30..<35))
        _ = pump.nextChunk(maximumLength: 20, canSend: true)
        #expect(pump.acknowledged(error: "write not permitted") == [.failed(a, reason: "write not permitted")])
        #expect(pump.nextChunk(maximumLength: 20, canSend: true)?.bytes == Data(30..<35))
        // A refused chunk that ends one line and starts the next fails both.
        var spanning = PassthroughWritePump(writeType: .withResponse)
        spanning.enqueue(a, Array(0..<10))
        spanning.enqueue(b, Array(10..<30))
        spanning.enqueue(ChannelWriteID(raw: 3), [99])
        #expect(spanning.nextChunk(maximumLength: 20, canSend: true)?.bytes == Data(0..<20))
        #expect(
            spanning.acknowledged(error: "refused") == [.failed(a, reason: "refused"), .failed(b, reason: "refused")])
        #expect(spanning.nextChunk(maximumLength: 20, canSend: true)?.bytes == Data([99]), "b's rest is dropped")
    }

    @Test("only a line whose writing has not started can be taken back")
    func withdraw() {
        var pump = PassthroughWritePump(writeType: .withoutResponse)
        pump.enqueue(a, Array(0..<30))
        pump.enqueue(b, Array(30..<35))
        _ = pump.nextChunk(maximumLength: 20, canSend: true)
        let halfWritten = pump.withdraw(a)
        let queued = pump.withdraw(b)
        let gone = pump.withdraw(b)
        #expect(!halfWritten, "a is half written")
        #expect(queued)
        #expect(!gone, "already gone")
        #expect(
            pump.nextChunk(maximumLength: 20, canSend: true)
                == .init(bytes: Data(20..<30), completes: [a], handsOver: [a]))
        #expect(pump.nextChunk(maximumLength: 20, canSend: true) == nil)
        var withResponse = PassthroughWritePump(writeType: .withResponse)
        withResponse.enqueue(a, [1])
        _ = withResponse.nextChunk(maximumLength: 20, canSend: true)
        let awaitingAck = withResponse.withdraw(a)
        #expect(!awaitingAck, "its only chunk awaits its acknowledgement")
    }

    @Test("a zero maximum length (not connected) writes nothing")
    func zeroLength() {
        var pump = PassthroughWritePump(writeType: .withoutResponse)
        pump.enqueue(a, [1])
        #expect(pump.nextChunk(maximumLength: 0, canSend: true) == nil)
    }

    @Test("reset discards every queued line and reports them")
    func reset() {
        var pump = PassthroughWritePump(writeType: .withoutResponse)
        pump.enqueue(a, Array(0..<30))
        pump.enqueue(b, [1])
        _ = pump.nextChunk(maximumLength: 20, canSend: true)
        pump.reset()
        #expect(!pump.isBusy)
        #expect(pump.nextChunk(maximumLength: 20, canSend: true) == nil)
    }

    @Test("a long queue stays correct as consumed lines are compacted")
    func compaction() {
        var pump = PassthroughWritePump(writeType: .withoutResponse)
        var completed: [UInt64] = []
        for round in 0..<10 {
            for i in 0..<50 { pump.enqueue(ChannelWriteID(raw: UInt64(round * 50 + i)), [UInt8(i)]) }
            while let chunk = pump.nextChunk(maximumLength: 20, canSend: true) {
                completed += chunk.completes.map(\.raw)
            }
        }
        #expect(completed == (0..<500).map(UInt64.init))
    }
}
