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
    /// The replies the device still owes, oldest first, for lines of ours
    /// whose operations ended without their answers (a timeout, a
    /// cancellation, a window that closed first), or for a reply that began
    /// while no command owned the wire. The device answers in order, so the
    /// next final result codes to arrive are those, not the next operation's
    /// (`true`: an RF send's, whose `OK` makes a `+SENDFIN:` owed). Cleared
    /// when the device shows it has caught up (our own echo, `+READY`) or the
    /// channel was quiet for the drain period; a drain that ends at its bound,
    /// with bytes still arriving, keeps them. (Should the device never send
    /// one, the next operation times out rather than take another's lines,
    /// and its drain clears the debt once the channel is quiet.)
    private var owedReplies: [OwedReply] = []
    /// One reply owed: an RF send's or a command's, with the information
    /// line a documented query's reply begins with, if that is still to come.
    private struct OwedReply {
        var isSend = false
        var answerLine: AtAnswerLine? = nil
    }
    /// `+SENDFIN:` lines the device still owes for RF sends it accepted and
    /// whose operations ended without them: the next ones to arrive are those.
    private(set) var owedSendFinishes = 0
    /// An encoding switch came while replies were owed: lines written in the
    /// old encoding reach a device in the new one garbled, and it answers
    /// each with `ERROR` (or nothing, if no line end survived), which now
    /// decodes. Until the device shows it has caught up, an `ERROR` is no
    /// operation's own; its first other response line ends the doubt.
    private(set) var garbledAnswersMayFollow = false
    /// A drain ended quiet, or the encoding switched, while replies were
    /// owed: a device slower than the quiet period may still send them, and
    /// those in an encoding the channel switches back to decode again. Until
    /// the device shows it has caught up (an echo, a command's own
    /// information line, `+READY`), a documented query, awaited or
    /// collected, takes neither a bare `OK` or `ERROR` before its information
    /// line nor another information line in its place (`AtAnswerLine`).
    private(set) var lateAnswersMayFollow = false
    /// Of those late answers, one may be an RF send's: its `ERROR` (the device
    /// refused the frame), or its `OK` taken by the next send, whose own
    /// answer (maybe `ERROR`) then comes a reply late. While this holds, a
    /// documented query takes no bare `ERROR` before its information line either.
    private(set) var lateSendAnswersMayFollow = false

    /// What an operation that ended without its answer leaves owed.
    enum OwedAnswer: Equatable, Sendable {
        /// A command's reply, up to its final result code.
        case reply
        /// A documented query's reply, its information line (`AtAnswerLine`) included.
        case query(AtAnswerLine)
        /// An RF send's `OK` or `ERROR`, and after an `OK` its `+SENDFIN:`.
        case sendReply
        /// The `+SENDFIN:` of an RF send the device accepted.
        case sendFinish
    }

    /// True while a final result code the device owes an earlier line is still to come.
    var owesReply: Bool { !owedReplies.isEmpty }

    /// Whether `line` may begin a reply still owed: an earlier query of the
    /// same kind (`AT+AUTH?` after a cancelled `AT+AUTH?`) is answered with
    /// the same information line, so that line does not show the device has
    /// reached the current one.
    func mayBeOwedInformationLine(_ line: String) -> Bool {
        owedReplies.contains { $0.answerLine?.matches(line) ?? false }
    }

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
        // Across a switch, answers owed may come in either encoding, and those
        // in the other one never decode as lines: a count of them is no longer
        // to be trusted. Those that do decode are the `ERROR`s of a device in
        // the new encoding to lines it read garbled (PROTOCOL.md section 6).
        garbledAnswersMayFollow = garbledAnswersMayFollow || owesReply
        // Those in the old encoding decode again should the channel switch
        // back (an encoding probe that guessed wrong): they are late answers.
        owedRepliesMayComeLate()
        forgetCounts()
    }

    /// Whether a line is the `ERROR` a device answers to a line it read
    /// garbled before an encoding switch, not the current operation's.
    func isGarbledLineAnswer(_ line: String) -> Bool {
        garbledAnswersMayFollow && line == "ERROR"
    }

    /// The current operation took a response line other than `ERROR`: the
    /// device has answered its line, so the garbled lines before it are done.
    mutating func currentOperationAnswered() {
        garbledAnswersMayFollow = false
    }

    /// The link is gone: no line of it is left to complete or answer.
    mutating func connectionEnded() {
        staleTail = false
        nothingOwed()
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

    /// A response line that is no operation's own: it arrived while no
    /// command owned the wire (idle, draining), before the current
    /// operation's first byte, while an answer was owed, or it cannot be the
    /// current RF send's. A final result code (`final`) pays the oldest
    /// reply owed (`ok`: it was `OK`); a line without one begins a reply whose
    /// final code is owed, if none was. An `ERROR` that may answer a line the
    /// device read garbled before an encoding switch pays nothing: the device
    /// answers in order, so those come before the reply to any line written
    /// after the switch (should that reply have been an `ERROR`, the count
    /// keeps one too many, and the next command times out rather than take
    /// another's lines).
    mutating func ownerlessResponseLine(_ line: String, final: Bool, ok: Bool = false) {
        if final {
            guard !owedReplies.isEmpty, !isGarbledLineAnswer(line) else { return }
            if owedReplies.removeFirst().isSend && ok { owedSendFinishes += 1 }
        } else if owedReplies.isEmpty {
            owedReplies.append(OwedReply())
        }
    }

    /// A `+SENDFIN:` line arrived; returns true when it is one the device
    /// owed an earlier send (then it is not the current send's).
    mutating func sendFinishedArrived() -> Bool {
        guard owedSendFinishes > 0 else { return false }
        owedSendFinishes -= 1
        return true
    }

    /// An operation whose line went out ended without its answer.
    mutating func answerLeftOwed(_ answer: OwedAnswer) {
        switch answer {
        case .reply: owedReplies.append(OwedReply())
        case .query(let line): owedReplies.append(OwedReply(answerLine: line))
        case .sendReply: owedReplies.append(OwedReply(isSend: true))
        case .sendFinish: owedSendFinishes += 1
        }
    }

    /// The device echoed the current operation's line: it answers in order,
    /// so every earlier reply has ended (a `+SENDFIN:` of a frame on air may
    /// still follow).
    mutating func deviceReachedCurrentLine() {
        owedReplies.removeAll()
        garbledAnswersMayFollow = false
        lateAnswersMayFollow = false
        lateSendAnswersMayFollow = false
    }

    /// A drain ended because the channel was quiet for the drain period:
    /// nothing earlier is owed any more, but what was owed may still come late.
    mutating func drainEndedQuiet() {
        owedRepliesMayComeLate()
        forgetCounts()
    }

    /// The device rebooted (`+READY`) or the link ended: nothing earlier is
    /// owed any more, nor can it come.
    mutating func nothingOwed() {
        forgetCounts()
        garbledAnswersMayFollow = false
        lateAnswersMayFollow = false
        lateSendAnswersMayFollow = false
    }

    /// The replies still owed are no longer counted, but may still come late:
    /// any reply (`lateAnswersMayFollow`), and an RF send's in particular.
    private mutating func owedRepliesMayComeLate() {
        lateAnswersMayFollow = lateAnswersMayFollow || owesReply
        lateSendAnswersMayFollow = lateSendAnswersMayFollow || owedReplies.contains(where: \.isSend)
    }

    /// The counts of replies and `+SENDFIN:` lines owed start again from none.
    private mutating func forgetCounts() {
        owedReplies.removeAll()
        owedSendFinishes = 0
    }
}
