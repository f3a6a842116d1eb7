import Foundation

/// Identifies one operation submitted to the AT channel (a command, an RF send
/// or an exclusive session). A granted session is identified by its request.
struct ChannelRequestID: Hashable, Sendable, CustomStringConvertible {
    let raw: UInt64
    var description: String { "req#\(raw)" }
}

/// Identifies a timer the channel asked its driver to run.
struct ChannelTimerID: Hashable, Sendable, CustomStringConvertible {
    let raw: UInt64
    var description: String { "timer#\(raw)" }
}

/// Identifies one encoded line handed to the driver for writing.
struct ChannelWriteID: Hashable, Sendable, CustomStringConvertible {
    let raw: UInt64
    var description: String { "write#\(raw)" }
}

/// What the channel reports to the client's event fan-out, in order.
enum ChannelEvent: Equatable, Sendable {
    /// Every decoded printable line; `sensitive` when it belongs to a command
    /// sent with `log: false` (it must stay out of logs, not out of events).
    case line(String, sensitive: Bool)
    indirect case radioFrame(Data, XTalkDiMeta)
    case crcError(XTalkDiMeta, String)
    /// A `+SENDFIN:` line (the event is `.sendFinished`; observers get the line).
    case sendFinished(String)
    case raw(Data)
}

/// What the driver must do, in order, after feeding the channel an event.
enum ChannelAction: Equatable, Sendable {
    /// Write one whole encoded line; report `writeCompleted`/`writeFailed` for it.
    case write(ChannelWriteID, [UInt8])
    /// Write these bytes for no operation (the end of a line the previous
    /// connection cut); nothing is reported for them.
    case writeUnattributed([UInt8])
    /// Take back a line whose writing has not started (its operation ended):
    /// report `writeWithdrawn` if it never reached the wire.
    case withdrawWrite(ChannelWriteID)
    /// Run a timer and report `timerFired` when it expires (unless cancelled).
    case startTimer(ChannelTimerID, Duration)
    case cancelTimer(ChannelTimerID)
    /// Complete a command with its response lines (an RF send with `[]`).
    case succeed(ChannelRequestID, [String])
    case fail(ChannelRequestID, XTalkBleError)
    /// An exclusive session now owns the channel; report `sessionEnded` when done.
    case grantSession(ChannelRequestID)
    case emit(ChannelEvent)
}

/// What the previous connection to the same device left behind when it
/// ended: the channel of the next connection starts from it.
struct ReconnectHandover: Equatable, Sendable {
    /// How much longer the device may still answer the previous connection's
    /// commands (until the latest of their deadlines).
    var owedFor: Duration = .zero
    /// The encoding of a line of ours the lost link cut in the middle, if it
    /// did: the device's UART still holds its first half.
    var cutLineEncoding: XTalkAtEncoding?

    /// Nothing is owed and no line was cut.
    var isEmpty: Bool { owedFor <= .zero && cutLineEncoding == nil }
}

/// The AT channel of PROTOCOL.md sections 5–7 as a value-type state machine.
///
/// One FIFO queue serializes AT commands, RF sends and exclusive sessions.
/// The machine frames received bytes into lines, classifies them, removes the
/// echo, completes commands at their final result code (`.automatic`) or at
/// the end of their window (`.collectUntilTimeout`), waits for `+SENDFIN:`
/// after an accepted `AT+SEND=`, opens isolation windows for no-wait
/// operations, and quarantines the channel (drain until quiet) after a
/// timeout, a cancellation or a failed write, so that late lines never reach
/// the next command.
///
/// The machine owns the wire's state and its transitions; the queue's FIFO
/// and session rules live in `AtOperationQueue`, the rules that tell a late
/// line from a response (and a line to keep out of logs) in `StaleLineRules`.
///
/// It does no I/O and reads no clock: events go in through the mutating
/// methods, and every method returns the actions the driver must perform, in
/// order, after the call returns. One machine serves one connection; after
/// `disconnected(_:)` it is closed and everything pending has failed. An
/// input the driver can never produce (its contract, documented at each
/// method) traps in debug builds and is ignored in release builds; inputs
/// that arrive late by nature (a completion or a timer racing the end of an
/// operation) are ignored everywhere.
struct AtChannelStateMachine {
    /// Quiet time that ends a drain (PROTOCOL.md section 6).
    static let defaultDrainQuiet: Duration = .milliseconds(150)
    /// Upper bound of a drain.
    static let defaultDrainBound: Duration = .seconds(1)

    enum ResponseMode: Equatable, Sendable {
        case automatic
        case collectUntilTimeout
    }

    /// An operation that owns the wire.
    private struct Transaction {
        enum Kind {
            case command(mode: ResponseMode, log: Bool)
            /// `accepted` once the device answered `OK` to `AT+SEND=`.
            case send(accepted: Bool)
        }
        let id: ChannelRequestID
        let text: String
        var kind: Kind
        var timer: ChannelTimerID
        var lines: [String] = []
        /// The device echoed our line: every reply owed before it has ended.
        var echoed = false
        var sawFinalCode = false
        var sawRaw = false
        /// An `AT+RST` answered `OK`: it completes at `+READY` (`AtCommandPolicy.untilReady`).
        var awaitingReady = false
        /// An RF send not yet accepted took an `OK` (after its write) as the
        /// final code of a reply owed an earlier line. Its own `+SENDFIN:`,
        /// with none owed, shows that `OK` was its own (see `sendFinished`).
        var paidOwedOK = false
        /// The information line a documented query is answered with (`AtAnswerLine`).
        var answerLine: AtAnswerLine? = nil
        /// Its own information line arrived.
        var sawAnswerLine = false

        /// A line equal to ours after our own final result code is no echo.
        var sawOwnResult: Bool { echoed && sawFinalCode }

        /// What the device still owes if the transaction ends now.
        var owedAnswer: StaleLineRules.OwedAnswer? {
            switch kind {
            case .command:
                if awaitingReady || sawFinalCode {
                    nil
                } else if let answerLine, !sawAnswerLine {
                    .query(answerLine)
                } else {
                    .reply
                }
            case .send(accepted: false): .sendReply
            case .send(accepted: true): .sendFinish
            }
        }
    }

    /// A no-wait operation's isolation window.
    private struct Isolation {
        enum Kind {
            case command
            case send
        }
        let kind: Kind
        /// The line written, for its echo.
        let text: String
        let timer: ChannelTimerID
        /// A no-wait send the device accepted (`OK`): its `+SENDFIN:` is next.
        var accepted = false
        /// How a no-wait command's window ends: by the same command policy as
        /// `.automatic` (an `AT+RST` holds it from its `OK` until `+READY`).
        var policy: AtCommandPolicy = .finalResultCode
        var awaitingReady = false

        /// What the device still owes if the window ends now.
        var owedAnswer: StaleLineRules.OwedAnswer? {
            switch kind {
            case .command: awaitingReady ? nil : .reply
            case .send: accepted ? .sendFinish : .sendReply
            }
        }
    }

    /// The quarantine after a timeout, cancellation or failed write.
    private struct Drain {
        /// Runs while nothing attributable arrives. Both timers are nil while
        /// our own line is still going out: the device cannot have answered
        /// it yet, and the quarantine starts once it is fully written.
        var quietTimer: ChannelTimerID?
        var boundTimer: ChannelTimerID?
        /// A quarantine's deadline: the device may answer the previous
        /// connection until then, so quiet before it does not end the drain.
        /// When it is set and `quietTimer` is nil, the quiet period has passed.
        var floorTimer: ChannelTimerID?
        /// What the operation that ended leaves owed once its line, still
        /// being written, has gone out (nothing if it is taken back).
        var owedOnceWritten: StaleLineRules.OwedAnswer?
    }

    private enum State {
        /// Nothing on the wire. → `.transaction` (the queue's next operation),
        /// → `.isolation` (a no-wait operation), → `.closed`.
        case idle
        /// A command or RF send owns the wire. → `.idle` (completed),
        /// → `.draining` (timeout, cancellation, write failure, unclean window), → `.closed`.
        case transaction(Transaction)
        /// A no-wait operation's window. → `.idle` (its result arrived),
        /// → `.draining` (timeout or write failure), → `.closed`.
        case isolation(Isolation)
        /// Lines are events only until the channel has been quiet.
        /// → `.idle`, → `.closed`.
        case draining(Drain)
        /// The connection is gone; terminal.
        case closed(XTalkBleError)
        /// Only inside a mutating method, while it changes the transaction it
        /// took out of `.transaction`: with the enum holding no copy of it,
        /// the transaction's storage is unique, so appending to its `lines`
        /// does not copy the whole array for every line. The method stores
        /// the transaction back or ends it before it returns; any other code
        /// that meets this state is a bug (`modifyingEscaped`).
        case modifying
    }

    private var state: State = .idle
    /// Bugs switched on for a checker's self-test; none by default.
    var faults = XTalkInjectedFaults()
    /// The last response a command completed with (for `answersWithPreviousReply`).
    private var previousReply: [String]?
    /// An encoding switch waiting for the operation on the wire to end.
    private var pendingEncoding: XTalkAtEncoding?
    /// The FIFO of operations and the exclusive session holding the channel.
    private var operations = AtOperationQueue()
    /// What tells a line of the operation on the wire from a late one.
    private var staleLines = StaleLineRules()
    private var framer: LineFramer
    /// The line being written, if any; drains wait for it to finish.
    private var outstandingWrite: ChannelWriteID?
    /// The end of `outstandingWrite`'s line has been handed to the link
    /// (`lineHandedOver`; with response, before its acknowledgement). Until
    /// then the device cannot have answered the line, nor echoed it.
    private var outstandingLineHandedOver = false
    /// The line of the operation on the wire has not all gone to the link yet.
    private var ownLineUnsent: Bool { outstandingWrite != nil && !outstandingLineHandedOver }
    private var nextID: UInt64 = 0
    private var units: [FramedUnit] = []
    /// Bytes a switch that waited hands back to be decoded in its encoding
    /// (`LineFramer.switchEncoding(to:)`), and whether a batch of received
    /// units is being handled (then they are handled after it).
    private var replay: [UInt8] = []
    private var receivingBatch = false
    private let drainQuiet: Duration
    private let drainBound: Duration

    init(
        encoding: XTalkAtEncoding,
        drainQuiet: Duration = Self.defaultDrainQuiet,
        drainBound: Duration = Self.defaultDrainBound
    ) {
        framer = LineFramer(encoding: encoding)
        lastLineEncoding = encoding
        self.drainQuiet = drainQuiet
        self.drainBound = drainBound
    }

    // MARK: Introspection (for the driver and tests)

    /// The encoding of the next operation (a switch may wait for the current one).
    var encoding: XTalkAtEncoding { pendingEncoding ?? framer.encoding }

    /// The encoding received bytes are decoded in now (a switch that waits
    /// for the operation on the wire applies when it ends).
    var decodingEncoding: XTalkAtEncoding { framer.encoding }

    /// True when nothing is on the wire, queued, or holding the channel.
    var isIdle: Bool {
        switch state {
        case .idle: operations.isEmpty
        case .transaction, .isolation, .draining, .closed: false
        case .modifying: Self.modifyingEscaped()
        }
    }

    var isClosed: Bool {
        switch state {
        case .closed: true
        case .idle, .transaction, .isolation, .draining: false
        case .modifying: Self.modifyingEscaped()
        }
    }

    /// True when a line of ours may not have reached the device whole: an
    /// operation owns the wire (its line may still be in flight) or its write
    /// has not been confirmed.
    var isWriting: Bool {
        if outstandingWrite != nil { return true }
        switch state {
        case .transaction, .isolation: return true
        case .idle, .draining, .closed: return false
        case .modifying: Self.modifyingEscaped()
        }
    }

    var isDraining: Bool {
        switch state {
        case .draining: true
        case .idle, .transaction, .isolation, .closed: false
        case .modifying: Self.modifyingEscaped()
        }
    }

    /// The exclusive session that owns the channel, if any.
    var currentSession: ChannelRequestID? { operations.activeSession }

    /// Starts the channel of a new connection in quarantine: the device may
    /// still answer a command of the previous connection until that command's
    /// deadline, `remaining` from now. Until then (and until the channel has
    /// been quiet for the drain period) lines are events only. Call before
    /// submitting work.
    mutating func quarantine(for remaining: Duration) -> [ChannelAction] {
        // (A driver contract: the new connection's channel starts from its
        // handover before anything else.)
        assert(isIdle && outstandingWrite == nil, "quarantine(for:) on a channel that is not idle and empty")
        guard isWireFree, remaining > .zero else { return [] }
        var actions: [ChannelAction] = []
        let floor = startTimer(remaining, into: &actions)
        let quiet = startTimer(drainQuiet, into: &actions)
        let bound = startTimer(remaining + drainBound, into: &actions)
        state = .draining(Drain(quietTimer: quiet, boundTimer: bound, floorTimer: floor))
        return actions
    }

    /// Starts the channel of a new connection from what the previous one left
    /// behind (call before submitting work). A cut line is ended as it would
    /// have ended, with CR LF in the encoding it was written in (the app may
    /// have switched since), and the device's answer to it (maybe ERROR) is
    /// kept out of the first command by a quarantine of at least the drain
    /// bound; answers the device still owes keep the channel quarantined
    /// until their deadline.
    mutating func resume(after handover: ReconnectHandover) -> [ChannelAction] {
        assert(isIdle && outstandingWrite == nil, "resume(after:) on a channel that is not idle and empty")
        var actions: [ChannelAction] = []
        var remaining = handover.owedFor
        if let encoding = handover.cutLineEncoding {
            actions.append(.writeUnattributed(encoding.encodeLine("")))
            lastLineEncoding = encoding
            remaining = max(remaining, drainBound)
        }
        actions += quarantine(for: remaining)
        return actions
    }

    /// The encoding of the newest line handed to the driver: the one a lost
    /// link may cut (a switch applies between operations).
    private(set) var lastLineEncoding: XTalkAtEncoding

    /// True when the wire is busy with an operation, a window or a drain:
    /// the device may still owe answers.
    var owesAnswers: Bool {
        switch state {
        case .transaction, .isolation, .draining: true
        case .idle, .closed: false
        case .modifying: Self.modifyingEscaped()
        }
    }

    // MARK: Submitting work

    /// Queues an AT command. `text` must already be validated; `owner` is the
    /// caller's exclusive session, if it holds one.
    mutating func submitCommand(
        _ text: String, timeout: Duration, mode: ResponseMode, log: Bool, owner: ChannelRequestID?
    ) -> (ChannelRequestID, [ChannelAction]) {
        submit(.command(text: text, timeout: timeout, mode: mode, log: log), owner: owner)
    }

    /// Queues an RF send. `hexPayload` is the validated payload as uppercase hex.
    mutating func submitSend(
        hexPayload: String, timeout: Duration, owner: ChannelRequestID?
    ) -> (ChannelRequestID, [ChannelAction]) {
        submit(.send(text: "AT+SEND=" + hexPayload, timeout: timeout), owner: owner)
    }

    /// Queues an exclusive session; `grantSession` tells when it owns the channel.
    /// Nested sessions are run inline by the caller and never reach the machine.
    mutating func submitSession() -> (ChannelRequestID, [ChannelAction]) {
        submit(.session, owner: nil)
    }

    private mutating func submit(
        _ kind: AtOperationQueue.Pending.Kind, owner: ChannelRequestID?
    ) -> (ChannelRequestID, [ChannelAction]) {
        assertOwnerWasGranted(owner)
        let id = ChannelRequestID(raw: makeID())
        var actions: [ChannelAction] = []
        switch state {
        case .closed(let error):
            actions.append(.fail(id, error))
            return (id, actions)
        case .draining where faults.drainCountsAsDisconnected:
            actions.append(.fail(id, .notConnected))
            return (id, actions)
        case .idle, .transaction, .isolation, .draining:
            break
        case .modifying: Self.modifyingEscaped()
        }
        var timer: ChannelTimerID?
        if faults.timesOutFromCall {
            switch kind {
            case .command(_, let timeout, _, _), .send(_, let timeout): timer = startTimer(timeout, into: &actions)
            case .session: break
            }
        }
        operations.enqueue(AtOperationQueue.Pending(id: id, owner: owner, kind: kind, timer: timer))
        pump(into: &actions)
        return (id, actions)
    }

    /// Writes a no-wait AT command and opens its isolation window, which ends
    /// at the final result code or after `window`. Throws `.busy` when a
    /// transaction, window, drain, or another caller's session is active
    /// (`.notConnected` once closed).
    mutating func startNoWaitCommand(
        _ text: String, window: Duration, owner: ChannelRequestID?
    ) throws(XTalkBleError) -> [ChannelAction] {
        try startNoWait(text: text, kind: .command, window: window, owner: owner)
    }

    /// Writes a no-wait `AT+SEND=` and opens its isolation window, which ends
    /// at `+SENDFIN:`, at an error result, or after `window`. Throws as
    /// `startNoWaitCommand`.
    mutating func startNoWaitSend(
        hexPayload: String, window: Duration, owner: ChannelRequestID?
    ) throws(XTalkBleError) -> [ChannelAction] {
        try startNoWait(text: "AT+SEND=" + hexPayload, kind: .send, window: window, owner: owner)
    }

    private mutating func startNoWait(
        text: String, kind: Isolation.Kind, window: Duration, owner: ChannelRequestID?
    ) throws(XTalkBleError) -> [ChannelAction] {
        assertOwnerWasGranted(owner)
        var actionsBeforeWrite: [ChannelAction] = []
        switch state {
        case .closed: throw .notConnected
        case .draining(let drain) where faults.acceptsNoWaitDuringDrain:
            for timer in [drain.quietTimer, drain.boundTimer, drain.floorTimer].compactMap({ $0 }) {
                actionsBeforeWrite.append(.cancelTimer(timer))
            }
        case .transaction, .isolation, .draining: throw .busy
        case .idle: break
        case .modifying: Self.modifyingEscaped()
        }
        if let session = operations.activeSession, session != owner { throw .busy }
        var actions = actionsBeforeWrite
        let timer = ChannelTimerID(raw: makeID())
        write(text, into: &actions)
        actions.append(.startTimer(timer, faults.shortNoWaitWindow && kind == .command ? window / 1_000 : window))
        state = .isolation(
            Isolation(
                kind: kind, text: text, timer: timer,
                policy: kind == .command ? AtCommandPolicy.of(text) : .finalResultCode))
        return actions
    }

    /// An owner is the session the caller's task runs in: one the channel
    /// granted (it may have ended since, which makes the work an ordinary
    /// operation), never one still waiting for its turn.
    private func assertOwnerWasGranted(_ owner: ChannelRequestID?) {
        assert(
            owner.map { !operations.isQueued($0) } ?? true,
            "work owned by \(owner.map(String.init(describing:)) ?? "-"), a session not granted yet")
    }

    // MARK: Events from the driver

    /// Bytes received on the passthrough (RX notifications), in any chunking.
    mutating func bytesReceived(_ bytes: some Collection<UInt8>) -> [ChannelAction] {
        switch state {
        case .closed: return []  // nothing of an old connection is delivered
        case .idle, .transaction, .isolation, .draining: break
        case .modifying: Self.modifyingEscaped()
        }
        if !units.isEmpty { units.removeAll(keepingCapacity: true) }
        framer.feed(bytes, into: &units)
        var actions: [ChannelAction] = []
        if units.isEmpty { return actions }
        actions.reserveCapacity(units.count * 2 + 2)
        let batch = staleLines.batchStarts()
        receivingBatch = true
        handle(units, of: batch, into: &actions)
        receivingBatch = false
        if !replay.isEmpty { handleReplay(of: batch, into: &actions) }
        return actions
    }

    private mutating func handle(
        _ units: [FramedUnit], of batch: StaleLineRules.Batch, into actions: inout [ChannelAction]
    ) {
        for unit in units {
            let stale = staleLines.nextUnitIsStale(in: batch)
            switch unit {
            case .raw(let data):
                actions.append(.emit(.raw(data)))
                rawReceived(stale: stale, into: &actions)
            case .line(let line):
                lineReceived(line, stale: stale, into: &actions)
            }
        }
    }

    /// Decodes again, in the encoding a switch that waited has just set, the
    /// bytes received since it was asked for that formed no line in the old
    /// one (they were received before any write since: `batch`, or now).
    private mutating func handleReplay(of batch: StaleLineRules.Batch? = nil, into actions: inout [ChannelAction]) {
        let bytes = replay
        replay = []
        var replayed: [FramedUnit] = []
        framer.feed(bytes, into: &replayed)
        handle(replayed, of: batch ?? staleLines.batchStarts(), into: &actions)
    }

    /// The last byte of a line went to the link (the driver's write pump
    /// handed over the chunk that ends it); its completion may follow later
    /// (with response, at the acknowledgement). Nothing to perform: lines that
    /// arrive before this are never the line's answer.
    mutating func lineHandedOver(_ id: ChannelWriteID) -> [ChannelAction] {
        if outstandingWrite == id { outstandingLineHandedOver = true }
        return []
    }

    /// The driver finished writing a line.
    mutating func writeCompleted(_ id: ChannelWriteID) -> [ChannelAction] {
        // (Not outstanding: a line of an operation the channel already moved
        // past, e.g. a window that closed before its write was confirmed.)
        guard outstandingWrite == id else { return [] }
        outstandingWrite = nil
        var actions: [ChannelAction] = []
        startDeferredDrain(lineWentOut: true, into: &actions)
        return actions
    }

    /// A withdrawn line never reached the wire: nothing of its operation can
    /// arrive, so a quarantine waiting for it is not needed.
    mutating func writeWithdrawn(_ id: ChannelWriteID) -> [ChannelAction] {
        guard outstandingWrite == id else { return [] }
        outstandingWrite = nil
        var actions: [ChannelAction] = []
        switch state {
        case .draining(let drain) where drain.boundTimer == nil:
            becomeIdle(into: &actions)
        case .idle, .transaction, .isolation, .draining, .closed:
            // Only a drain that waits for the line asks to take it back, and
            // the driver answers at once (before any other input).
            assertionFailure("writeWithdrawn(\(id)): a line the channel did not ask to take back")
        case .modifying: Self.modifyingEscaped()
        }
        return actions
    }

    /// The driver could not write a line (the link refused it or went away).
    mutating func writeFailed(_ id: ChannelWriteID, reason: String) -> [ChannelAction] {
        guard outstandingWrite == id else { return [] }
        outstandingWrite = nil
        var actions: [ChannelAction] = []
        switch state {
        // (Nothing is owed for a line the link refused: the device got none
        // of it, or a piece that joins its next line, answered once.)
        case .transaction(let transaction):
            actions.append(.cancelTimer(transaction.timer))
            actions.append(.fail(transaction.id, .writeFailed(reason)))
            endTransaction(transaction)
            startDrain(leaving: nil, into: &actions)
        case .isolation(let isolation):
            actions.append(.cancelTimer(isolation.timer))
            startDrain(leaving: nil, into: &actions)
        case .draining:
            // Part of the line may have gone out: quarantine from now.
            startDeferredDrain(lineWentOut: false, into: &actions)
        case .idle, .closed:
            break  // (idle: a window that closed before its line was confirmed)
        case .modifying: Self.modifyingEscaped()
        }
        return actions
    }

    /// Starts the timers of a drain that waited for our line to be written
    /// (`lineWentOut`: whole; then what its operation left unanswered is owed).
    private mutating func startDeferredDrain(lineWentOut: Bool, into actions: inout [ChannelAction]) {
        switch state {
        case .draining(var drain) where drain.boundTimer == nil:
            if lineWentOut, let owed = drain.owedOnceWritten { staleLines.answerLeftOwed(owed) }
            drain.owedOnceWritten = nil
            drain.quietTimer = startTimer(drainQuiet, into: &actions)
            drain.boundTimer = startTimer(drainBound, into: &actions)
            state = .draining(drain)
        case .idle, .transaction, .isolation, .draining, .closed:
            break
        case .modifying: Self.modifyingEscaped()
        }
    }

    /// A timer the machine started has expired.
    mutating func timerFired(_ id: ChannelTimerID) -> [ChannelAction] {
        var actions: [ChannelAction] = []
        if operations.timerFired(id, into: &actions) { return actions }  // (the timesOutFromCall fault)
        switch state {
        case .transaction(var transaction) where transaction.timer == id:
            if faults.waitsOutAPartialAnswer, !transaction.sawFinalCode,
                transaction.echoed || !transaction.lines.isEmpty || framer.hasPartialLine,
                case .command(.automatic, _) = transaction.kind
            {
                transaction.timer = startTimer(drainBound / 2, into: &actions)
                state = .transaction(transaction)
                return actions
            }
            endTransaction(transaction)
            switch transaction.kind {
            case .command(.collectUntilTimeout, _):
                var lines = transaction.lines
                if faults.collectDropsLastLine && lines.count > 1 { lines.removeLast() }
                actions.append(.succeed(transaction.id, lines))
                // A window that ended cleanly needs no quarantine; garbage,
                // a missing final code or a partial line might be followed by more.
                // Without its final code, the command's answer is still owed:
                // the next command's answer comes after it (PROTOCOL.md section 6).
                if transaction.sawFinalCode && !transaction.sawRaw && !framer.hasPartialLine {
                    becomeIdle(into: &actions)
                } else {
                    startDrain(leaving: transaction.owedAnswer, into: &actions)
                }
            case .command(.automatic, _), .send:
                actions.append(.fail(transaction.id, .timeout))
                startDrain(leaving: transaction.owedAnswer, into: &actions)
            }
        case .isolation(let isolation) where isolation.timer == id:
            if faults.shortNoWaitWindow {
                becomeIdle(into: &actions)
            } else {
                startDrain(leaving: isolation.owedAnswer, into: &actions)
            }
        case .draining(var drain):
            if drain.boundTimer == id {
                // Not quiet: what the device owes may still come (it keeps its place).
                if let quiet = drain.quietTimer { actions.append(.cancelTimer(quiet)) }
                if let floor = drain.floorTimer { actions.append(.cancelTimer(floor)) }
                becomeIdle(into: &actions)
            } else if drain.quietTimer == id {
                if framer.hasPartialLine {
                    // A line is still arriving: it is not quiet yet.
                    drain.quietTimer = startTimer(drainQuiet, into: &actions)
                    state = .draining(drain)
                } else if drain.floorTimer != nil {
                    // Quiet, but the previous connection's answers may still come.
                    drain.quietTimer = nil
                    state = .draining(drain)
                } else {
                    if let bound = drain.boundTimer { actions.append(.cancelTimer(bound)) }
                    staleLines.drainEndedQuiet()
                    becomeIdle(into: &actions)
                }
            } else if drain.floorTimer == id {
                drain.floorTimer = nil
                if drain.quietTimer == nil {
                    // Quiet already: the quarantine is over.
                    if let bound = drain.boundTimer { actions.append(.cancelTimer(bound)) }
                    staleLines.drainEndedQuiet()
                    becomeIdle(into: &actions)
                } else {
                    state = .draining(drain)
                }
            }
        case .idle, .transaction, .isolation, .closed:
            break  // a timer that was cancelled or belongs to an earlier state
        case .modifying: Self.modifyingEscaped()
        }
        return actions
    }

    /// The caller of an operation was cancelled. A queued operation is removed;
    /// an active one fails and the channel is drained. Unknown or finished
    /// requests are ignored, so every request completes exactly once.
    mutating func cancel(_ id: ChannelRequestID) -> [ChannelAction] {
        var actions: [ChannelAction] = []
        if operations.cancel(id, into: &actions) { return actions }
        switch state {
        case .transaction(let transaction) where transaction.id == id:
            actions.append(.cancelTimer(transaction.timer))
            actions.append(.fail(id, .cancelled))
            endTransaction(transaction)
            startDrain(leaving: transaction.owedAnswer, into: &actions)
        case .idle, .transaction, .isolation, .draining, .closed:
            // (Also a granted session: its caller's cancellation may be
            // reported after the grant; the session ends when its closure returns.)
            break
        case .modifying: Self.modifyingEscaped()
        }
        return actions
    }

    /// The closure of a granted exclusive session returned.
    mutating func sessionEnded(_ id: ChannelRequestID) -> [ChannelAction] {
        guard operations.endSession(id) else {
            // A session no longer holds the channel once the connection ended;
            // otherwise the driver ends only the session it was granted, once.
            assert(isClosed, "sessionEnded(\(id)): a session that does not hold the channel")
            return []
        }
        var actions: [ChannelAction] = []
        pump(into: &actions)
        return actions
    }

    /// Switches the encoding for later writes and reads; the partial line the
    /// framer held is discarded (PROTOCOL.md section 4). Asked for while an
    /// operation owns the wire (the documented "never switch during a
    /// transaction" broken, e.g. by an authentication started next to an app
    /// command), the switch waits until that operation ends, so that its reply
    /// is decoded as its command was encoded and no byte of it is discarded.
    /// The encoding already in effect is no switch: the partial line stays
    /// (*iOS End-to-End Integration* sets the encoding the authenticator found, usually the one
    /// in use, while radio frames may be arriving).
    mutating func setEncoding(_ encoding: XTalkAtEncoding) {
        switch state {
        case .transaction, .isolation:
            pendingEncoding = encoding == framer.encoding ? nil : encoding
            // Bytes from now on that form no line in the current encoding were
            // sent in the new one: decoded again when the switch applies.
            if pendingEncoding != nil { framer.markSwitchRequest() }
        case .idle, .draining, .closed:
            pendingEncoding = nil
            guard encoding != framer.encoding else { return }
            framer.reset(encoding: encoding)
            staleLines.framerReset()
        case .modifying: Self.modifyingEscaped()
        }
    }

    /// Applies a switch that waited for the wire to be free (call with the
    /// state already idle or draining): the bytes received since it was asked
    /// for that formed no line in the old encoding are decoded in the new one.
    private mutating func applyPendingEncoding(into actions: inout [ChannelAction]) {
        guard let encoding = pendingEncoding else { return }
        pendingEncoding = nil
        replay = framer.switchEncoding(to: encoding)
        staleLines.framerReset()
        if !replay.isEmpty && !receivingBatch { handleReplay(into: &actions) }
    }

    /// The link is gone: everything pending fails with `error`, buffered bytes
    /// are discarded, and the machine is closed for good.
    mutating func disconnected(_ error: XTalkBleError) -> [ChannelAction] {
        var actions: [ChannelAction] = []
        switch state {
        case .closed:
            return []
        case .transaction(let transaction):
            actions.append(.cancelTimer(transaction.timer))
            actions.append(.fail(transaction.id, error))
        case .isolation(let isolation):
            actions.append(.cancelTimer(isolation.timer))
        case .draining(let drain):
            if let quiet = drain.quietTimer { actions.append(.cancelTimer(quiet)) }
            if let bound = drain.boundTimer { actions.append(.cancelTimer(bound)) }
            if let floor = drain.floorTimer { actions.append(.cancelTimer(floor)) }
        case .idle:
            break
        case .modifying: Self.modifyingEscaped()
        }
        operations.failAll(error, into: &actions)
        outstandingWrite = nil
        staleLines.connectionEnded()
        framer.reset()
        state = .closed(error)
        return actions
    }

    // MARK: Internals

    /// `.modifying` met outside the mutation that set it: a bug in this file.
    private static func modifyingEscaped(_ function: StaticString = #function) -> Never {
        preconditionFailure("AT channel: the transient .modifying state escaped to \(function)")
    }

    /// True when nothing owns the wire (an operation may start).
    private var isWireFree: Bool {
        switch state {
        case .idle: true
        case .transaction, .isolation, .draining, .closed: false
        case .modifying: Self.modifyingEscaped()
        }
    }

    /// Who owns the wire, for the sensitivity of a received line.
    private var wireOwner: StaleLineRules.WireOwner {
        switch state {
        case .transaction(let transaction):
            if case .command(_, log: false) = transaction.kind { .unloggedCommand } else { .loggedOperation }
        case .idle, .isolation, .draining, .closed:
            .nobody
        case .modifying: Self.modifyingEscaped()
        }
    }

    private mutating func lineReceived(_ line: String, stale: Bool, into actions: inout [ChannelAction]) {
        let lineClass = LineClassifier.classify(line)
        let sensitive = staleLines.isSensitive(unsolicited: lineClass.isUnsolicited, stale: stale, wire: wireOwner)
        actions.append(.emit(.line(line, sensitive: sensitive)))
        switch lineClass {
        case .radioFrame(let payload, let meta):
            actions.append(.emit(.radioFrame(payload, meta)))
            if faults.urcJoinsResponse { urcJoinsResponse(line) }
        case .crcError(let meta):
            actions.append(.emit(.crcError(meta, line)))
        case .sendFinished(let failure):
            actions.append(.emit(.sendFinished(line)))
            sendFinished(failure: failure, into: &actions)
        case .ready:
            readyReceived(into: &actions)
        case .malformedRadioFrame, .malformedCrcError:
            break
        case .response(let finalCode):
            if stale {
                staleResponseLine(line, finalCode: finalCode, into: &actions)
            } else {
                responseLine(line, finalCode: finalCode, into: &actions)
            }
        }
    }

    /// The `urcJoinsResponse` fault: a radio frame joins the response of the
    /// command on the wire.
    private mutating func urcJoinsResponse(_ line: String) {
        switch state {
        case .transaction(var transaction):
            guard case .command = transaction.kind else { return }
            state = .modifying
            transaction.lines.append(line)
            state = .transaction(transaction)
        case .idle, .isolation, .draining, .closed:
            break
        case .modifying: Self.modifyingEscaped()
        }
    }

    /// A response line that arrived (in part) before the current operation's
    /// first byte: never its response, but a reply it leaves open makes the
    /// next final code not ours, and a final code pays the oldest reply owed.
    private mutating func staleResponseLine(
        _ line: String, finalCode: FinalResultCode?, into actions: inout [ChannelAction]
    ) {
        switch state {
        case .transaction, .isolation:
            staleLines.ownerlessResponseLine(line, final: finalCode != nil, ok: finalCode == .ok)
        case .idle, .draining:
            // No operation owns the wire: when the line began does not matter,
            // it arrived now, like any other (a drain is not quiet; chaos seed
            // 53215642535166274: a device far behind echoed a timed-out send's
            // line in a drain that then ended quiet at once, and the next
            // window took that send's `OK`).
            responseLine(line, finalCode: finalCode, into: &actions)
        case .closed:
            break
        case .modifying: Self.modifyingEscaped()
        }
    }

    private mutating func responseLine(_ line: String, finalCode: FinalResultCode?, into actions: inout [ChannelAction])
    {
        switch state {
        case .transaction(var transaction):
            // Release the state's copy first: appending to `lines` while the enum
            // still shares its storage would copy the whole array for every line.
            // Every path below stores the transaction back or ends it.
            state = .modifying
            if ownLineUnsent {
                // Our line has not all gone to the link: the device cannot have
                // answered it yet. Another line's reply, up to its final code
                // (e.g. one the device owed a send whose line the pump finished
                // only after that send timed out): an event only.
                staleLines.ownerlessResponseLine(line, final: finalCode != nil, ok: finalCode == .ok)
                state = .transaction(transaction)
                return
            }
            if line == transaction.text && !transaction.awaitingReady && !transaction.sawOwnResult {
                // Our echo: the device answers in order, so every reply it owed
                // before our line has ended, and whatever a command collected
                // before it was an earlier reply's (an event only).
                transaction.echoed = true
                transaction.lines.removeAll()
                transaction.sawFinalCode = false
                transaction.sawRaw = false
                transaction.paidOwedOK = false  // that `OK` came before our line: not ours
                staleLines.deviceReachedCurrentLine()
                state = .transaction(transaction)
                return
            }
            if let answerLine = transaction.answerLine, !transaction.sawAnswerLine,
                case .command = transaction.kind
            {
                if finalCode == nil, answerLine.matches(line), !staleLines.mayBeOwedInformationLine(line) {
                    // Our own information line: the device answers in order, so
                    // every reply it owed before our line has ended.
                    transaction.sawAnswerLine = true
                    staleLines.deviceReachedCurrentLine()
                } else if staleLines.lateAnswersMayFollow,
                    finalCode == .ok || (finalCode == .error && staleLines.lateSendAnswersMayFollow)
                        || (finalCode == nil && !Self.isEchoOfAnotherLine(line, finalCode))
                {
                    // While a late answer may still come, a bare `OK` before our
                    // information line, or another line in its place, is another
                    // reply's, up to its final code (an event only); so is a bare
                    // `ERROR` when that late answer may be an RF send's. (An
                    // `ERROR` of our own then costs a timeout: a typed failure,
                    // never another command's answer.)
                    staleLines.ownerlessResponseLine(line, final: finalCode != nil, ok: finalCode == .ok)
                    state = .transaction(transaction)
                    return
                }
            }
            if staleLines.owesReply || Self.isEchoOfAnotherLine(line, finalCode)
                || (staleLines.isGarbledLineAnswer(line) && !transaction.awaitingReady)
            {
                // The rest of a reply the device owed an earlier line, or the echo
                // that begins one, or its answer to a line it read garbled before
                // an encoding switch: an event only, up to and including its final
                // code (PROTOCOL.md section 6).
                if staleLines.owesReply, finalCode == .ok, case .send(accepted: false) = transaction.kind {
                    transaction.paidOwedOK = true
                }
                staleLines.ownerlessResponseLine(line, final: finalCode != nil, ok: finalCode == .ok)
                state = .transaction(transaction)
                return
            }
            switch transaction.kind {
            case .command where transaction.awaitingReady:
                // The device is rebooting: whatever arrives before `+READY` is an event only.
                state = .transaction(transaction)
            case .command(let mode, _):
                staleLines.currentOperationAnswered()
                if !(faults.dropsPingLine && line.hasPrefix("+PING:")) { transaction.lines.append(line) }
                if finalCode != nil { transaction.sawFinalCode = true }
                if mode == .automatic && finalCode == .ok && AtCommandPolicy.of(transaction.text) == .untilReady {
                    transaction.awaitingReady = true
                    state = .transaction(transaction)
                } else if mode == .automatic && finalCode != nil {
                    actions.append(.cancelTimer(transaction.timer))
                    var lines = transaction.lines
                    if faults.answersWithPreviousReply {
                        lines = previousReply ?? transaction.lines  // (the first time: its own)
                        previousReply = transaction.lines
                    }
                    actions.append(.succeed(transaction.id, lines))
                    endTransaction(transaction)
                    if faults.drainsAfterSuccess {
                        startDrain(leaving: nil, into: &actions)
                    } else {
                        becomeIdle(into: &actions)
                    }
                } else {
                    state = .transaction(transaction)
                }
            case .send(accepted: false):
                switch finalCode {
                case .ok:
                    staleLines.currentOperationAnswered()
                    transaction.kind = .send(accepted: true)
                    state = .transaction(transaction)
                case .error:
                    actions.append(.cancelTimer(transaction.timer))
                    actions.append(.fail(transaction.id, .writeFailed("the device rejected the frame: \(line)")))
                    becomeIdle(into: &actions)
                case nil:
                    // An RF send is answered OK or ERROR alone: another line begins
                    // a reply the device owed an earlier command, up to its final code.
                    staleLines.ownerlessResponseLine(line, final: false)
                    state = .transaction(transaction)
                }
            case .send(accepted: true):
                // Accepted: the send's own answer is complete; any reply now is another's.
                staleLines.ownerlessResponseLine(line, final: finalCode != nil, ok: finalCode == .ok)
                state = .transaction(transaction)
            }
        case .isolation(var isolation):
            if line == isolation.text && !isolation.awaitingReady {
                staleLines.deviceReachedCurrentLine()  // our echo: every earlier reply has ended
                return
            }
            if ownLineUnsent
                || ((staleLines.owesReply || Self.isEchoOfAnotherLine(line, finalCode)
                    || staleLines.isGarbledLineAnswer(line)) && !isolation.awaitingReady)
            {
                // A reply the device owed an earlier line: the window waits for its own result.
                staleLines.ownerlessResponseLine(line, final: finalCode != nil, ok: finalCode == .ok)
                return
            }
            // Its own answer (an `ERROR` may still be a garbled line's; a send is answered `OK`).
            if finalCode != .error && (isolation.kind == .command || finalCode == .ok) {
                staleLines.currentOperationAnswered()
            }
            switch (isolation.kind, finalCode) {
            case (.command, .some) where isolation.awaitingReady:
                break  // the device is rebooting: an event only
            case (.send, .ok):
                isolation.accepted = true
                state = .isolation(isolation)
            case (.command, .ok) where isolation.policy == .untilReady:
                // An `AT+RST` accepted: the window stays open until `+READY`.
                isolation.awaitingReady = true
                state = .isolation(isolation)
            case (.command, .some), (.send, .error):
                // The no-wait operation's result arrived: the window closes.
                actions.append(.cancelTimer(isolation.timer))
                becomeIdle(into: &actions)
            case (.command, nil), (.send, nil):
                break
            }
        case .draining(var drain):
            // A drain that ends at its bound in the middle of a reply leaves it open.
            staleLines.ownerlessResponseLine(line, final: finalCode != nil, ok: finalCode == .ok)
            restartQuiet(&drain, into: &actions)
            state = .draining(drain)
        case .idle:
            staleLines.ownerlessResponseLine(line, final: finalCode != nil, ok: finalCode == .ok)
        case .closed:
            break
        case .modifying: Self.modifyingEscaped()
        }
    }

    /// A device's echo of a command line other than the one on the wire (no
    /// answer line begins with `AT`): the start of an earlier line's reply.
    private static func isEchoOfAnotherLine(_ line: String, _ finalCode: FinalResultCode?) -> Bool {
        finalCode == nil && line.utf8.starts(with: "AT".utf8)
    }

    /// `+READY`: completes an `AT+RST` that waits for it (an event otherwise).
    private mutating func readyReceived(into actions: inout [ChannelAction]) {
        staleLines.nothingOwed()  // the MCU rebooted: it owes nothing it owed before
        if case .isolation(let isolation) = state, isolation.awaitingReady {
            actions.append(.cancelTimer(isolation.timer))
            becomeIdle(into: &actions)
            return
        }
        guard case .transaction(let transaction) = state, transaction.awaitingReady else { return }
        actions.append(.cancelTimer(transaction.timer))
        actions.append(.succeed(transaction.id, transaction.lines))
        endTransaction(transaction)
        becomeIdle(into: &actions)
    }

    private mutating func sendFinished(failure: String?, into actions: inout [ChannelAction]) {
        switch state {
        case .transaction(let transaction):
            // One the device owed an earlier send is that send's; and only after
            // our `OK`: an earlier `+SENDFIN:` belongs to an older frame. Unless
            // we took an `OK` after our write as a reply owed an earlier line:
            // the device sends `+SENDFIN:` only for a frame it accepted, and
            // none is owed, so that `OK` was ours. The device answers in order,
            // so the reply we thought owed will not come: nothing is owed.
            guard !staleLines.sendFinishedArrived() else { return }
            switch transaction.kind {
            case .send(accepted: true): break
            case .send(accepted: false) where transaction.paidOwedOK: staleLines.deviceReachedCurrentLine()
            case .send, .command: return
            }
            actions.append(.cancelTimer(transaction.timer))
            if let failure {
                actions.append(.fail(transaction.id, .writeFailed("the radio could not send the frame: \(failure)")))
            } else {
                actions.append(.succeed(transaction.id, []))
            }
            becomeIdle(into: &actions)
        case .isolation(let isolation) where isolation.kind == .send:
            guard !staleLines.sendFinishedArrived() else { return }
            actions.append(.cancelTimer(isolation.timer))
            becomeIdle(into: &actions)
        case .idle, .isolation, .draining:
            _ = staleLines.sendFinishedArrived()
        case .closed:
            break
        case .modifying: Self.modifyingEscaped()
        }
    }

    private mutating func rawReceived(stale: Bool, into actions: inout [ChannelAction]) {
        switch state {
        case .transaction(var transaction) where !stale:
            transaction.sawRaw = true
            state = .transaction(transaction)
        case .draining(var drain):
            restartQuiet(&drain, into: &actions)
            state = .draining(drain)
        case .idle, .transaction, .isolation, .closed:
            break
        case .modifying: Self.modifyingEscaped()
        }
    }

    private mutating func restartQuiet(_ drain: inout Drain, into actions: inout [ChannelAction]) {
        if let quiet = drain.quietTimer {
            actions.append(.cancelTimer(quiet))
        } else if drain.floorTimer == nil {
            return  // still writing: the clock has not started
        }
        // (A quarantine that had been quiet before its deadline is not quiet any more.)
        drain.quietTimer = startTimer(drainQuiet, into: &actions)
    }

    /// Quarantines the channel. While our line is still being written, the
    /// driver is asked to take it back (if it has not started) and the
    /// quarantine waits for it; otherwise it starts now.
    /// `owed`: what the operation that ended leaves unanswered, owed once its line is out.
    private mutating func startDrain(leaving owed: StaleLineRules.OwedAnswer?, into actions: inout [ChannelAction]) {
        if faults.skipsDrain {
            outstandingWrite = nil
            becomeIdle(into: &actions)
            return
        }
        if let pending = outstandingWrite {
            actions.append(.withdrawWrite(pending))
            state = .draining(Drain(quietTimer: nil, boundTimer: nil, owedOnceWritten: owed))
        } else {
            if let owed { staleLines.answerLeftOwed(owed) }
            let bound = startTimer(drainBound, into: &actions)
            let quiet = startTimer(drainQuiet, into: &actions)
            state = .draining(Drain(quietTimer: quiet, boundTimer: bound))
        }
        applyPendingEncoding(into: &actions)
    }

    /// Bookkeeping when a transaction ends, whichever way.
    private mutating func endTransaction(_ transaction: Transaction) {
        if case .command(_, log: false) = transaction.kind { staleLines.sensitiveCommandEnded() }
    }

    private mutating func becomeIdle(into actions: inout [ChannelAction]) {
        state = .idle
        applyPendingEncoding(into: &actions)
        pump(into: &actions)
    }

    /// Starts the next eligible operation while the wire is free.
    private mutating func pump(into actions: inout [ChannelAction]) {
        guard isWireFree else { return }
        while let pending = operations.takeNext() {
            switch pending.kind {
            case .session:
                actions.append(.grantSession(pending.id))
            case .command(let text, let timeout, let mode, let log):
                let timer = pending.timer ?? startOperationTimer(timeout, into: &actions)
                write(text, into: &actions)
                var transaction = Transaction(
                    id: pending.id, text: text, kind: .command(mode: mode, log: log), timer: timer)
                transaction.answerLine = AtAnswerLine.of(text)
                state = .transaction(transaction)
                return
            case .send(let text, let timeout):
                let timer = pending.timer ?? startOperationTimer(timeout, into: &actions)
                write(text, into: &actions)
                state = .transaction(
                    Transaction(id: pending.id, text: text, kind: .send(accepted: false), timer: timer))
                return
            }
        }
    }

    /// Writes the line of the operation that now owns the wire.
    private mutating func write(_ text: String, into actions: inout [ChannelAction]) {
        staleLines.writeStarted(framerHasPartialLine: framer.hasPartialLine)
        let id = ChannelWriteID(raw: makeID())
        outstandingWrite = id
        outstandingLineHandedOver = false
        lastLineEncoding = framer.encoding
        actions.append(.write(id, framer.encoding.encodeLine(text)))
    }

    /// The timer of an operation that starts on the wire now.
    private mutating func startOperationTimer(
        _ timeout: Duration, into actions: inout [ChannelAction]
    ) -> ChannelTimerID {
        startTimer(faults.doublesTimeouts ? timeout * 2 : timeout, into: &actions)
    }

    private mutating func startTimer(_ duration: Duration, into actions: inout [ChannelAction]) -> ChannelTimerID {
        let id = ChannelTimerID(raw: makeID())
        actions.append(.startTimer(id, duration))
        return id
    }

    private mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }
}
