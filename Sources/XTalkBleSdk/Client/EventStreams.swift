import Foundation

/// One reader of `XTalkBleClient.events`: its own bounded buffer and, while
/// the reader waits, its continuation. The stream owns it (through the
/// unfolding closure); the client keeps it weakly, so a stream that is
/// dropped without being read costs nothing once it is gone.
@MainActor
final class EventSubscriber {
    private var buffer: EventBuffer
    private var waiter: CheckedContinuation<XTalkBleEvent?, Never>?
    private(set) var isFinished = false

    init(limit: Int, finished: Bool = false, dropsStateChanges: Bool = false) {
        buffer = EventBuffer(limit: limit, dropsStateChanges: dropsStateChanges)
        isFinished = finished
    }

    /// Events this stream dropped because its reader fell behind.
    var dropped: Int { buffer.dropped }

    /// Hands `event` to the waiting reader, or buffers it. Returns how many
    /// events the buffer dropped to make room (0 or 1).
    func push(_ event: XTalkBleEvent) -> Int {
        guard !isFinished else { return 0 }
        if let waiter {
            self.waiter = nil
            waiter.resume(returning: event)
            return 0
        }
        let before = buffer.dropped
        buffer.append(event)
        return buffer.dropped - before
    }

    /// No more events: the reader gets what is buffered, then the end.
    func finish() {
        isFinished = true
        if let waiter {
            self.waiter = nil
            waiter.resume(returning: nil)
        }
    }

    /// The reader's task was cancelled: the stream ends now, buffered events too.
    private func cancel() {
        while buffer.popFirst() != nil {}
        finish()
    }

    /// The next event, or nil at the end (finished and drained, or the reader cancelled).
    func next() async -> XTalkBleEvent? {
        if Task.isCancelled {
            cancel()
            return nil
        }
        if let event = buffer.popFirst() { return event }
        if isFinished { return nil }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<XTalkBleEvent?, Never>) in
                if isFinished {
                    continuation.resume(returning: nil)
                } else {
                    waiter = continuation
                }
            }
        } onCancel: {
            Task { @MainActor [weak self] in self?.cancel() }
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
