import Foundation

/// One reader of `XTalkBleClient.events`: its own bounded buffer and, while
/// the reader waits, its continuation. The stream owns it (through the
/// unfolding closure); the client keeps it weakly, so a stream that is
/// dropped without being read costs nothing once it is gone.
///
/// The client pushes on the main actor; the reader takes on whatever executor
/// the stream's iterator runs `next()` on. The state is behind a lock rather
/// than on the main actor because `AsyncStream(unfolding:)` calls its closure
/// off any actor: a main-actor `next()` would add a hop there and back for
/// every event, and those hops (thread wake-ups) were most of what each
/// further stream cost (`xtalk bench`, row 2).
final class EventSubscriber: @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`:
    private var buffer: EventBuffer
    /// Readers waiting for an event, oldest first. One at a time in proper use
    /// (a stream has one iterator); several tasks sharing an iterator's stream
    /// each still get an event or the end, never a hang.
    private var waiters: [CheckedContinuation<XTalkBleEvent?, Never>] = []
    private var finished: Bool
    /// A push found a reader waiting and asked the client to `wake()` it.
    private var wakeRequested = false

    init(limit: Int, finished: Bool = false, dropsStateChanges: Bool = false) {
        buffer = EventBuffer(limit: limit, dropsStateChanges: dropsStateChanges)
        self.finished = finished
    }

    var isFinished: Bool { lock.withLock { finished } }

    /// Events this stream dropped because its reader fell behind.
    var dropped: Int { lock.withLock { buffer.dropped } }

    /// Buffers `event` for the reader. Returns how many events the buffer
    /// dropped to make room (0 or 1) and whether the reader waits for an
    /// event and `wake()` should be called (once for any number of pushes),
    /// or nil when the stream has ended (the client then forgets it).
    ///
    /// The reader is not resumed here: the client pushes every event of one
    /// delivery round, then wakes each waiting reader once, so a reader is
    /// woken (a thread wake-up when it runs elsewhere) once per round rather
    /// than once per event, and takes the rest without waiting.
    func push(_ event: XTalkBleEvent) -> (dropped: Int, wake: Bool)? {
        lock.withLock {
            guard !finished else { return nil }
            let before = buffer.dropped
            buffer.append(event)
            let wake = !waiters.isEmpty && !wakeRequested
            if wake { wakeRequested = true }
            return (buffer.dropped - before, wake)
        }
    }

    /// Hands buffered events to the readers that wait, oldest first.
    func wake() {
        let handed = lock.withLock {
            wakeRequested = false
            return handOut()
        }
        for (waiter, event) in handed { waiter.resume(returning: event) }
    }

    /// Pairs waiting readers with buffered events (under the lock).
    private func handOut() -> [(CheckedContinuation<XTalkBleEvent?, Never>, XTalkBleEvent)] {
        var handed: [(CheckedContinuation<XTalkBleEvent?, Never>, XTalkBleEvent)] = []
        while !waiters.isEmpty, let event = buffer.popFirst() { handed.append((waiters.removeFirst(), event)) }
        return handed
    }

    /// No more events: the reader gets what is buffered, then the end.
    func finish() {
        let (handed, ended) = lock.withLock {
            finished = true
            let handed = handOut()
            defer { waiters.removeAll() }
            return (handed, waiters)
        }
        for (waiter, event) in handed { waiter.resume(returning: event) }
        for waiter in ended { waiter.resume(returning: nil) }
    }

    /// The reader's task was cancelled: the stream ends now, buffered events too.
    private func cancel() {
        let waiting = lock.withLock {
            while buffer.popFirst() != nil {}
            finished = true
            defer { waiters.removeAll() }
            return waiters
        }
        for waiter in waiting { waiter.resume(returning: nil) }
    }

    /// What a reader gets without waiting: an event, the end, or nothing yet.
    private enum Take {
        case event(XTalkBleEvent)
        case end
        case wait
    }

    private func take(orWait waiter: CheckedContinuation<XTalkBleEvent?, Never>? = nil) -> Take {
        lock.withLock {
            if let event = buffer.popFirst() { return .event(event) }
            if finished { return .end }
            if let waiter { waiters.append(waiter) }
            return .wait
        }
    }

    /// The next event, or nil at the end (finished and drained, or the reader cancelled).
    func next() async -> XTalkBleEvent? {
        if Task.isCancelled {
            cancel()
            return nil
        }
        switch take() {
        case .event(let event): return event
        case .end: return nil
        case .wait: break
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<XTalkBleEvent?, Never>) in
                // Checked again under the lock that `push`, `finish` and
                // `cancel` take: an event or the end that came meanwhile is
                // not missed, and the waiter is resumed exactly once.
                switch take(orWait: continuation) {
                case .event(let event): continuation.resume(returning: event)
                case .end: continuation.resume(returning: nil)
                case .wait: break
                }
            }
        } onCancel: {
            cancel()
        }
    }
}

extension XTalkBleClient {
    /// A new stream for one reader: every event from now on, in order,
    /// bounded by `eventBufferLimit`.
    func makeEventStream(register: (EventSubscriber) -> Void) -> AsyncStream<XTalkBleEvent> {
        let subscriber = EventSubscriber(
            limit: options.eventBufferLimit, finished: isTornDown,
            dropsStateChanges: injectedFaults.streamDropsStateChanges)
        if !isTornDown { register(subscriber) }
        return AsyncStream(unfolding: { await subscriber.next() })
    }
}
