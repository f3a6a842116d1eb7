import Foundation

/// The handlers of one kind of observer, in registration order, each with
/// the token that removes it (a token fits only the list that issued it).
struct ObserverList<Value> {
    private var entries: [(id: UUID, handler: @MainActor (Value) -> Void)] = []

    /// Adds `handler` unless `closed`; returns its token either way.
    mutating func add(_ handler: @escaping @MainActor (Value) -> Void, closed: Bool) -> UUID {
        let id = UUID()
        if !closed { entries.append((id, handler)) }
        return id
    }

    mutating func remove(_ id: UUID) {
        entries.removeAll { $0.id == id }
    }

    mutating func removeAll() {
        entries.removeAll()
    }

    /// Calls every handler registered now, in order (one added or removed by a
    /// handler takes effect from the next value).
    @MainActor
    func notify(_ value: Value) {
        for entry in entries { entry.handler(value) }
    }
}
