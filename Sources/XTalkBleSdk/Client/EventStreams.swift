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
/// further stream cost (issue 14; `xtalk bench`, row 2).
final class EventSubscriber: @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`:
    private var buffer: EventBuffer
    /// Readers waiting for an event, oldest first. One at a time in proper use
    /// (a stream has one iterator); several tasks sharing an iterator's stream
    /// each still get an event or the end, never a hang.
    private var waiters: [CheckedContinuation<XTalkBleEvent?, Never>] = []
    private var finished: Bool

    init(limit: Int, finished: Bool = false, dropsStateChanges: Bool = false) {
        buffer = EventBuffer(limit: limit, dropsStateChanges: dropsStateChanges)
        self.finished = finished
    }

    var isFinished: Bool { lock.withLock { finished } }

    /// Events this stream dropped because its reader fell behind.
    var dropped: Int { lock.withLock { buffer.dropped } }

    /// Hands `event` to the waiting reader, or buffers it. Returns how many
    /// events the buffer dropped to make room (0 or 1), or nil when the stream
    /// has ended (the client then forgets it).
    func push(_ event: XTalkBleEvent) -> Int? {
        let outcome: (waiter: CheckedContinuation<XTalkBleEvent?, Never>?, dropped: Int)? = lock.withLock {
            guard !finished else { return nil }
            if !waiters.isEmpty { return (waiters.removeFirst(), 0) }
            let before = buffer.dropped
            buffer.append(event)
            return (nil, buffer.dropped - before)
        }
        outcome?.waiter?.resume(returning: event)
        return outcome?.dropped
    }

    /// No more events: the reader gets what is buffered, then the end.
    func finish() {
        let waiting = lock.withLock {
            finished = true
            defer { waiters.removeAll() }
            return waiters
        }
        for waiter in waiting { waiter.resume(returning: nil) }
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
