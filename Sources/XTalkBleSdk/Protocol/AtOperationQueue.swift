/// The FIFO and session rules of the AT channel (PROTOCOL.md section 7), for
/// `AtChannelStateMachine`.
///
/// One queue serializes AT commands, RF sends and exclusive sessions. While a
/// session holds the channel, only its own work is eligible; everyone else
/// keeps their place. It knows nothing of the wire: the machine asks it for
/// the next eligible operation whenever the wire is free.
struct AtOperationQueue {
    /// An operation waiting in the queue.
    struct Pending {
        enum Kind {
            case command(text: String, timeout: Duration, mode: AtChannelStateMachine.ResponseMode, log: Bool)
            case send(text: String, timeout: Duration)
            case session
        }
        let id: ChannelRequestID
        /// The exclusive session this operation belongs to, if any.
        var owner: ChannelRequestID?
        let kind: Kind
        /// Its timer, already running (only with the `timesOutFromCall` fault).
        var timer: ChannelTimerID?
    }

    private var queue: [Pending] = []
    /// The exclusive session that holds the channel, if any.
    private(set) var activeSession: ChannelRequestID?

    /// True when nothing is queued and no session holds the channel.
    var isEmpty: Bool { queue.isEmpty && activeSession == nil }

    /// True while `id` waits in the queue (not yet started or granted).
    func isQueued(_ id: ChannelRequestID) -> Bool {
        queue.contains { $0.id == id }
    }

    /// Queues an operation at the end. Only the session that holds the
    /// channel can own work; a stale owner (an ended session) makes the
    /// operation an ordinary one.
    mutating func enqueue(_ pending: Pending) {
        var pending = pending
        if pending.owner != activeSession { pending.owner = nil }
        queue.append(pending)
    }

    /// Removes the next eligible operation: the first one, or while a session
    /// holds the channel, the first one of that session. A session it returns
    /// now holds the channel (the machine grants it).
    mutating func takeNext() -> Pending? {
        guard let index = nextEligibleIndex() else { return nil }
        let pending = queue.remove(at: index)
        if case .session = pending.kind { activeSession = pending.id }
        return pending
    }

    private func nextEligibleIndex() -> Int? {
        guard let session = activeSession else { return queue.isEmpty ? nil : 0 }
        return queue.firstIndex { $0.owner == session }
    }

    /// The caller of a queued operation was cancelled: it is removed and
    /// fails with `.cancelled`. Returns false when `id` is not queued.
    mutating func cancel(_ id: ChannelRequestID, into actions: inout [ChannelAction]) -> Bool {
        guard let index = queue.firstIndex(where: { $0.id == id }) else { return false }
        queue.remove(at: index)
        actions.append(.fail(id, .cancelled))
        return true
    }

    /// A timer of a queued operation expired (the `timesOutFromCall` fault):
    /// it is removed and fails with `.timeout`. Returns false when no queued
    /// operation runs that timer.
    mutating func timerFired(_ timer: ChannelTimerID, into actions: inout [ChannelAction]) -> Bool {
        guard let index = queue.firstIndex(where: { $0.timer == timer }) else { return false }
        actions.append(.fail(queue.remove(at: index).id, .timeout))
        return true
    }

    /// The session `id` ended and releases the channel. Work it left behind
    /// (a misbehaving child task) joins the ordinary FIFO at its original
    /// position. Returns false, changing nothing, when `id` does not hold the
    /// channel.
    mutating func endSession(_ id: ChannelRequestID) -> Bool {
        guard activeSession == id else { return false }
        activeSession = nil
        for index in queue.indices where queue[index].owner == id { queue[index].owner = nil }
        return true
    }

    /// The link is gone: every queued operation fails with `error`, in queue
    /// order, and the session (if any) no longer holds the channel.
    mutating func failAll(_ error: XTalkBleError, into actions: inout [ChannelAction]) {
        for pending in queue { actions.append(.fail(pending.id, error)) }
        queue.removeAll()
        activeSession = nil
    }
}
