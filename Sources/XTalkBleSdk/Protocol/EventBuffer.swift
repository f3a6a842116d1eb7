/// The bounded buffer of one `events` stream: the events its reader has not
/// taken yet, in order, at most `limit` of them.
///
/// When it is full, the oldest radio frame, line or other event goes first;
/// a `.connectionStateChanged` is never dropped (an app that falls behind
/// under a `+DI:` flood still learns that the link was lost), so a buffer
/// holding only state changes may exceed `limit` by the state changes that
/// keep arriving (they come from the app's own calls and link events, a few
/// per connection). Dropping is amortised O(1): a cursor remembers where the
/// oldest droppable event may be, and dropped slots are left empty until the
/// reader passes them or they are half of the storage (then they are squeezed
/// out), so the memory stays proportional to `limit`.
struct EventBuffer {
    /// At most this many events are kept (state changes excepted); at least 1.
    let limit: Int
    /// Events this buffer dropped.
    private(set) var dropped = 0
    /// Events waiting for the reader.
    private(set) var count = 0
    private var slots: [XTalkBleEvent?] = []
    /// The next slot for the reader.
    private var head = 0
    /// No droppable event lies before this slot.
    private var dropCursor = 0

    /// The `streamDropsStateChanges` fault (a checker's self-test): state changes are dropped like the rest.
    private let dropsStateChanges: Bool

    init(limit: Int, dropsStateChanges: Bool = false) {
        self.limit = max(1, limit)
        self.dropsStateChanges = dropsStateChanges
    }

    var isEmpty: Bool { count == 0 }

    /// Slots in storage, live or dropped (for tests of the memory bound).
    var storageCount: Int { slots.count - head }

    /// Keeps `event`, dropping the oldest droppable event when the buffer is full.
    mutating func append(_ event: XTalkBleEvent) {
        if count >= limit && !dropOldestDroppable() {
            // Only state changes are buffered: they stay, and so does a new one.
            guard Self.isStateChange(event) else {
                dropped += 1
                return
            }
        }
        slots.append(event)
        count += 1
        // A reader that does not read leaves dropped slots behind: squeeze them
        // out once they are half of the storage (amortised O(1), memory O(limit)).
        if slots.count - head >= 2 * max(count, 32) { squeeze() }
    }

    /// Keeps only the live events, from the reader's position.
    private mutating func squeeze() {
        let live: [XTalkBleEvent] = slots[head...].compactMap { $0 }
        slots = live
        head = 0
        dropCursor = 0
    }

    /// The oldest event, if any.
    mutating func popFirst() -> XTalkBleEvent? {
        while head < slots.count {
            let event = slots[head]
            slots[head] = nil
            head += 1
            if let event {
                count -= 1
                compactIfWorthIt()
                return event
            }
        }
        compactIfWorthIt()
        return nil
    }

    private mutating func dropOldestDroppable() -> Bool {
        var index = max(dropCursor, head)
        while index < slots.count {
            if let event = slots[index], dropsStateChanges || !Self.isStateChange(event) {
                slots[index] = nil
                count -= 1
                dropped += 1
                dropCursor = index + 1
                return true
            }
            index += 1
        }
        dropCursor = index
        return false
    }

    private mutating func compactIfWorthIt() {
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
            dropCursor = 0
        } else if head >= 1_024 && head * 2 >= slots.count {
            slots.removeFirst(head)
            dropCursor = max(0, dropCursor - head)
            head = 0
        }
    }

    static func isStateChange(_ event: XTalkBleEvent) -> Bool {
        if case .connectionStateChanged = event { return true }
        return false
    }
}
