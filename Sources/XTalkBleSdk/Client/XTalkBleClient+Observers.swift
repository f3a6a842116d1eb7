import Foundation

extension XTalkBleClient {
    /// Calls `handler` with every AT line (`.atLine` events), in order, on the
    /// main actor. Returns a token accepted only by `removeAtLineObserver(_:)`.
    @discardableResult
    public func observeAtLines(_ handler: @escaping @MainActor (String) -> Void) -> UUID {
        atLineObservers.add(handler, closed: isTornDown)
    }

    /// Removes the AT-line observer registered with `id` (a token of
    /// `observeAtLines(_:)`; any other token, or one already removed, does nothing).
    public func removeAtLineObserver(_ id: UUID) {
        atLineObservers.remove(id)
    }

    /// Calls `handler` with every `+SENDFIN:` line (the `.sendFinished`
    /// events). Returns a token accepted only by `removeSendFinishLineObserver(_:)`.
    @discardableResult
    public func observeSendFinishLines(_ handler: @escaping @MainActor (String) -> Void) -> UUID {
        sendFinishObservers.add(handler, closed: isTornDown)
    }

    /// Removes the send-finish observer registered with `id` (a token of
    /// `observeSendFinishLines(_:)`; any other token, or one already removed, does nothing).
    public func removeSendFinishLineObserver(_ id: UUID) {
        sendFinishObservers.remove(id)
    }

    /// Calls `handler` with the bytes of every `.passthroughRaw` event.
    /// Returns a token accepted only by `removePassthroughRawObserver(_:)`.
    @discardableResult
    public func observePassthroughRaw(_ handler: @escaping @MainActor (Data) -> Void) -> UUID {
        rawObservers.add(handler, closed: isTornDown)
    }

    /// Removes the raw-passthrough observer registered with `id` (a token of
    /// `observePassthroughRaw(_:)`; any other token, or one already removed, does nothing).
    public func removePassthroughRawObserver(_ id: UUID) {
        rawObservers.remove(id)
    }
}
