import Foundation
import Testing
@testable import XTalkBleSdk

/// The FIFO and session rules alone, without the wire (PROTOCOL.md section 7).
@Suite("AT operation queue: FIFO and exclusive sessions", .timeLimit(.minutes(1)))
struct AtOperationQueueTests {
    static func id(_ raw: UInt64) -> ChannelRequestID { ChannelRequestID(raw: raw) }

    static func command(_ raw: UInt64, owner: UInt64? = nil, timer: UInt64? = nil) -> AtOperationQueue.Pending {
        let kind = AtOperationQueue.Pending.Kind.command(
            text: "AT+C\(raw)", timeout: .seconds(3), mode: .automatic,
            log: true)
        return AtOperationQueue.Pending(
            id: id(raw), owner: owner.map(id), kind: kind,
            timer: timer.map(ChannelTimerID.init))
    }

    static func session(_ raw: UInt64) -> AtOperationQueue.Pending {
        AtOperationQueue.Pending(id: id(raw), owner: nil, kind: .session, timer: nil)
    }

    /// Takes every eligible operation, in order.
    static func drain(_ queue: inout AtOperationQueue) -> [UInt64] {
        var taken: [UInt64] = []
        while let next = queue.takeNext() { taken.append(next.id.raw) }
        return taken
    }

    @Test("operations come out in the order they went in, each once")
    func fifo() {
        var queue = AtOperationQueue()
        #expect(queue.isEmpty)
        #expect(queue.takeNext() == nil)
        for raw in [3, 1, 2] as [UInt64] { queue.enqueue(Self.command(raw)) }
        #expect(!queue.isEmpty)
        #expect(queue.isQueued(Self.id(1)))
        #expect(Self.drain(&queue) == [3, 1, 2])
        #expect(queue.isEmpty)
        #expect(!queue.isQueued(Self.id(1)))
    }

    @Test("a session taken from the queue holds the channel: only its own work is eligible, the rest keeps its place")
    func sessionHoldsTheChannel() {
        var queue = AtOperationQueue()
        queue.enqueue(Self.session(1))
        queue.enqueue(Self.command(2))
        #expect(queue.takeNext()?.id == Self.id(1))
        #expect(queue.activeSession == Self.id(1))
        #expect(!queue.isEmpty, "a session holding the channel is not empty, even with nothing queued for it")
        #expect(queue.takeNext() == nil, "the outsider waits for the session")
        queue.enqueue(Self.command(3, owner: 1))
        queue.enqueue(Self.command(4, owner: 1))
        #expect(Self.drain(&queue) == [3, 4])
        #expect(queue.isQueued(Self.id(2)))
        let ended = queue.endSession(Self.id(1))
        #expect(ended)
        #expect(queue.activeSession == nil)
        #expect(Self.drain(&queue) == [2])
        #expect(queue.isEmpty)
    }

    @Test("a session waits its turn like any operation")
    func sessionWaitsItsTurn() {
        var queue = AtOperationQueue()
        queue.enqueue(Self.command(1))
        queue.enqueue(Self.session(2))
        queue.enqueue(Self.command(3))
        #expect(queue.takeNext()?.id == Self.id(1))
        #expect(queue.activeSession == nil)
        #expect(queue.takeNext()?.id == Self.id(2))
        #expect(queue.activeSession == Self.id(2))
        #expect(queue.takeNext() == nil)
    }

    @Test("only the session holding the channel owns work: a stale owner makes an ordinary operation")
    func ownerNormalisation() {
        var queue = AtOperationQueue()
        queue.enqueue(Self.session(1))
        _ = queue.takeNext()
        let endedFirst = queue.endSession(Self.id(1))
        #expect(endedFirst)
        queue.enqueue(Self.session(2))
        _ = queue.takeNext()
        queue.enqueue(Self.command(3, owner: 1))  // names the ended session
        queue.enqueue(Self.command(4, owner: 2))
        #expect(Self.drain(&queue) == [4], "the stale owner's command waits like an outsider")
        let endedSecond = queue.endSession(Self.id(2))
        #expect(endedSecond)
        let next = queue.takeNext()
        #expect(next?.id == Self.id(3))
        #expect(next?.owner == nil)
    }

    @Test("work an ended session left behind joins the FIFO at its original place")
    func endedSessionReleasesItsWork() {
        var queue = AtOperationQueue()
        queue.enqueue(Self.session(1))
        _ = queue.takeNext()
        queue.enqueue(Self.command(2))
        queue.enqueue(Self.command(3, owner: 1))
        queue.enqueue(Self.command(4))
        queue.enqueue(Self.session(5))
        queue.enqueue(Self.command(6, owner: 1))
        let ended = queue.endSession(Self.id(1))
        #expect(ended)
        #expect(queue.takeNext()?.id == Self.id(2))
        let released = queue.takeNext()
        #expect(released?.id == Self.id(3))
        #expect(released?.owner == nil)
        #expect(queue.takeNext()?.id == Self.id(4))
        #expect(queue.takeNext()?.id == Self.id(5))
        #expect(queue.takeNext() == nil, "the old session's leftover is ordinary work now: it waits for session 5")
        #expect(queue.isQueued(Self.id(6)))
    }

    @Test("ending a session that does not hold the channel changes nothing")
    func endSessionNotHeld() {
        var queue = AtOperationQueue()
        queue.enqueue(Self.command(1))
        queue.enqueue(Self.session(2))
        let queuedEnded = queue.endSession(Self.id(2))
        #expect(!queuedEnded, "still queued")
        let unknownEnded = queue.endSession(Self.id(9))
        #expect(!unknownEnded, "unknown")
        #expect(Self.drain(&queue) == [1, 2])
        #expect(queue.activeSession == Self.id(2))
    }

    @Test("cancelling a queued operation removes it and fails it once; others keep their order")
    func cancel() {
        var queue = AtOperationQueue()
        for raw in [1, 2, 3] as [UInt64] { queue.enqueue(Self.command(raw)) }
        var actions: [ChannelAction] = []
        let cancelled = queue.cancel(Self.id(2), into: &actions)
        #expect(cancelled)
        #expect(actions == [.fail(Self.id(2), .cancelled)])
        let cancelledAgain = queue.cancel(Self.id(2), into: &actions)
        #expect(!cancelledAgain, "already gone")
        let unknownCancelled = queue.cancel(Self.id(7), into: &actions)
        #expect(!unknownCancelled, "unknown")
        #expect(actions.count == 1)
        #expect(Self.drain(&queue) == [1, 3])
    }

    @Test("a queued operation's running timer fails it with .timeout (the timesOutFromCall fault)")
    func queuedTimer() {
        var queue = AtOperationQueue()
        queue.enqueue(Self.command(1))
        queue.enqueue(Self.command(2, timer: 20))
        queue.enqueue(Self.command(3, timer: 30))
        var actions: [ChannelAction] = []
        let strayFired = queue.timerFired(ChannelTimerID(raw: 99), into: &actions)
        #expect(!strayFired)
        #expect(actions.isEmpty)
        let fired = queue.timerFired(ChannelTimerID(raw: 30), into: &actions)
        #expect(fired)
        #expect(actions == [.fail(Self.id(3), .timeout)])
        #expect(Self.drain(&queue) == [1, 2])
    }

    @Test("the end of the link fails everything queued, in order, and releases the session")
    func failAll() {
        var queue = AtOperationQueue()
        queue.enqueue(Self.session(1))
        _ = queue.takeNext()
        queue.enqueue(Self.command(2))
        queue.enqueue(Self.command(3, owner: 1))
        queue.enqueue(Self.session(4))
        var actions: [ChannelAction] = []
        queue.failAll(.notConnected, into: &actions)
        #expect(
            actions == [
                .fail(Self.id(2), .notConnected), .fail(Self.id(3), .notConnected),
                .fail(Self.id(4), .notConnected),
            ])
        #expect(queue.isEmpty)
        #expect(queue.activeSession == nil)
        #expect(queue.takeNext() == nil)
    }
}
