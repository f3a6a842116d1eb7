import Foundation
import Testing
import XTalkSimulator
@testable import XTalkBleSdk

/// One `events` stream's buffer: bounded, oldest droppable first, state changes never dropped.
@Suite("Event buffer: bounded, the oldest lines and frames go first, state changes stay", .timeLimit(.minutes(1)))
struct EventBufferTests {
    static func line(_ n: Int) -> XTalkBleEvent { .atLine("+N:\(n)") }
    static let lost = XTalkBleEvent.connectionStateChanged(.disconnected)

    static func drain(_ buffer: inout EventBuffer) -> [XTalkBleEvent] {
        var out: [XTalkBleEvent] = []
        while let event = buffer.popFirst() { out.append(event) }
        return out
    }

    @Test("full: the oldest line goes, the newest are kept in order")
    func dropsOldest() {
        var buffer = EventBuffer(limit: 3)
        for n in 0..<5 { buffer.append(Self.line(n)) }
        #expect(buffer.dropped == 2 && buffer.count == 3)
        #expect(Self.drain(&buffer) == [Self.line(2), Self.line(3), Self.line(4)])
        #expect(buffer.isEmpty && buffer.popFirst() == nil)
    }

    @Test("a state change is never dropped: lines around it go first, in age order")
    func stateChangesStay() {
        var buffer = EventBuffer(limit: 3)
        buffer.append(Self.line(0))
        buffer.append(Self.lost)
        for n in 1..<6 { buffer.append(Self.line(n)) }
        #expect(Self.drain(&buffer) == [Self.lost, Self.line(4), Self.line(5)])
        var full = EventBuffer(limit: 1)
        full.append(Self.lost)
        full.append(Self.line(1))
        full.append(.connectionStateChanged(.scanning))
        #expect(full.dropped == 1, "only the line")
        #expect(Self.drain(&full) == [Self.lost, .connectionStateChanged(.scanning)])
    }

    @Test("a reader that never reads: the storage stays proportional to the limit")
    func boundedStorage() {
        var buffer = EventBuffer(limit: 16)
        buffer.append(Self.lost)
        for n in 0..<100_000 { buffer.append(Self.line(n)) }
        #expect(buffer.count == 16 && buffer.dropped == 100_000 - 15)
        #expect(buffer.storageCount <= 2 * 32 + 1, "storage: \(buffer.storageCount) slots")
        let kept = Self.drain(&buffer)
        #expect(kept.first == Self.lost && kept.last == Self.line(99_999) && kept.count == 16)
    }

    @Test("limits below 1 mean 1")
    func limitFloor() {
        var buffer = EventBuffer(limit: -3)
        buffer.append(Self.line(0))
        buffer.append(Self.line(1))
        #expect(Self.drain(&buffer) == [Self.line(1)])
    }

    @Test("random appends and reads agree with a plain model", arguments: 0..<20)
    func againstModel(round: Int) {
        var random = SimulatorRandom(seed: UInt64(round) &+ 0x9E37_79B9)  // seeded: a failing round replays
        let limit = Int.random(in: 1...8, using: &random)
        var buffer = EventBuffer(limit: limit)
        var model: [XTalkBleEvent] = []
        var modelDropped = 0
        var checked = 0
        for step in 0..<4_000 {
            if Int.random(in: 0..<3, using: &random) == 0 {
                let expected = model.isEmpty ? nil : model.removeFirst()
                #expect(buffer.popFirst() == expected)
                checked += 1
            } else {
                let event = Int.random(in: 0..<10, using: &random) == 0 ? Self.lost : Self.line(step)
                if model.count >= limit {
                    if let index = model.firstIndex(where: { !EventBuffer.isStateChange($0) }) {
                        model.remove(at: index)
                        modelDropped += 1
                        model.append(event)
                    } else if EventBuffer.isStateChange(event) {
                        model.append(event)
                    } else {
                        modelDropped += 1
                    }
                } else {
                    model.append(event)
                }
                buffer.append(event)
            }
            #expect(buffer.count == model.count && buffer.dropped == modelDropped)
        }
        #expect(checked > 1_000)
    }
}
