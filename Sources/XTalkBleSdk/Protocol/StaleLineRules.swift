/// What `AtChannelStateMachine` remembers to tell a line of the operation on
/// the wire from a line of what came before it, and a line it may log from
/// one it must not (PROTOCOL.md sections 6 and 7).
///
/// A line is *stale* when it arrived, whole or in part, before the current
/// operation's first byte was written: it can never be that operation's
/// response. A late reply may also straddle the next operation's first byte;
/// its final result code is then not the next command's.
struct StaleLineRules {
    /// Counts lines written, so that received units can be told apart by
    /// whether they arrived before or after a write.
    private var writesStarted: UInt64 = 0
    /// True when the framer held a partial line as the current operation began:
    /// the unit that completes it arrived (in part) before our first byte.
    private var staleTail = false
    /// A response line arrived while no command owned the wire (a late reply
    /// of an earlier command, while idle or draining) and its final result
    /// code has not: the next command's first final code is that reply's,
    /// not its own. (Should none come, the command times out: a typed
    /// failure, never another command's lines.)
    private var orphanReplyOpen = false
    /// Set when a `log: false` command ended: lines that arrive before the
    /// next operation starts may still be its own, so they stay out of logs.
    private var sensitiveAftermath = false

    // MARK: Writes

    /// An operation's line is being written. `framerHasPartialLine`: the
    /// framer holds the start of a line received before it.
    mutating func writeStarted(framerHasPartialLine: Bool) {
        writesStarted &+= 1
        staleTail = framerHasPartialLine
        sensitiveAftermath = false
    }

    /// A `log: false` command ended, whichever way.
    mutating func sensitiveCommandEnded() {
        sensitiveAftermath = true
    }

    /// The framer dropped its partial line (an encoding switch): nothing
    /// received before the current operation is left to complete.
    mutating func framerReset() {
        staleTail = false
    }

    /// The link is gone: no line of it is left to complete or answer.
    mutating func connectionEnded() {
        staleTail = false
        orphanReplyOpen = false
    }

    // MARK: Received units

    /// Where a batch of received units began (what `bytesReceived` framed
    /// from one notification).
    struct Batch {
        fileprivate let writesAtStart: UInt64
    }

    /// Call before the first unit of a batch is handled.
    func batchStarts() -> Batch {
        Batch(writesAtStart: writesStarted)
    }

    /// Whether the next unit of `batch` (call once per unit, in order) is stale.
    ///
    /// Units of a batch that follow a write it started (an operation ended
    /// and the next one was written) were received before that write: never
    /// part of its response. The framer's partial line at that moment
    /// (`staleTail`) concerns the next batch. (Only the handling of the
    /// batch's units writes, so a write since the batch began is a write
    /// during an earlier unit of it.)
    mutating func nextUnitIsStale(in batch: Batch) -> Bool {
        if writesStarted != batch.writesAtStart { return true }
        defer { staleTail = false }
        return staleTail
    }

    /// Whether a received line must stay out of logs. `unsolicited`: a URC,
    /// never anyone's response. `wire`: the operation that owns the wire
    /// (asked only for a line that may be a response).
    func isSensitive(unsolicited: Bool, stale: Bool, wire: @autoclosure () -> WireOwner) -> Bool {
        if unsolicited { return false }
        switch wire() {
        case .unloggedCommand: return true
        // A stale line belongs to what came before this command.
        case .loggedOperation: return stale && sensitiveAftermath
        case .nobody: return sensitiveAftermath
        }
    }

    /// Who owns the wire, as far as logging is concerned.
    enum WireOwner {
        /// No command or RF send (idle, a no-wait window, a drain).
        case nobody
        /// A command sent with `log: true`, or an RF send.
        case loggedOperation
        /// A command sent with `log: false`.
        case unloggedCommand
    }

    // MARK: Late replies

    /// A response line arrived while no command owned the wire. `final`: it
    /// carried a final result code. A reply left open makes the next
    /// command's first final code that reply's. (A drain that ends at its
    /// bound in the middle of a reply leaves it open.)
    mutating func ownerlessResponseLine(final: Bool) {
        orphanReplyOpen = !final
    }

    /// An operation takes the wire: whether a late reply is still open (the
    /// flag is cleared). A no-wait window ignores the answer, since it ends
    /// at the first final code, whoever's it is.
    mutating func takeOpenReply() -> Bool {
        defer { orphanReplyOpen = false }
        return orphanReplyOpen
    }
}
