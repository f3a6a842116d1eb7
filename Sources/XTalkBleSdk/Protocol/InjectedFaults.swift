/// Bugs a checker can switch on in the SDK, to prove that it catches them
/// (the chaos suite's self-test). Package API, never set in a product: each
/// is a realistic mistake of a BLE client, off by default.
package struct XTalkInjectedFaults: Sendable, Equatable {
    /// A radio-frame URC that arrives during a command joins its response lines.
    package var urcJoinsResponse = false
    /// No quarantine after a timeout, cancellation or failed write: the next command goes out at once.
    package var skipsDrain = false
    /// A command's timeout counts from the call, not from its turn on the wire.
    package var timesOutFromCall = false
    /// `+PING:` lines are dropped from responses.
    package var dropsPingLine = false
    /// A command completes with the previous command's response.
    package var answersWithPreviousReply = false
    /// Every third radio frame is not delivered.
    package var dropsRadioFrames = false
    /// After a reconnect, the last line of the previous connection is delivered again.
    package var replaysLineAfterReconnect = false
    /// After the link ends, its last radio frame is delivered again.
    package var deliversOldEventAfterDisconnect = false
    /// The passthrough never opens: `atReady` stays false on a healthy link.
    package var neverReady = false
    /// A full `events` stream drops a state change like any other event.
    package var streamDropsStateChanges = false
    /// The write pump waits for the "ready to send" callback alone: no
    /// re-poll, no write after `writeReadyTimeout` (a lost callback stalls it).
    package var waitsForReadyCallback = false
    /// An operation submitted while the channel drains after a timeout fails
    /// `.notConnected` at once, as if the quarantine were a lost link.
    package var drainCountsAsDisconnected = false
    /// A command's or RF send's timeout runs twice as long as asked.
    package var doublesTimeouts = false
    /// A connection that ends keeps its events already queued for delivery:
    /// an app that disconnects from inside a callback still gets the rest.
    package var keepsQueuedEventsAfterDisconnect = false
    /// `teardown()` forgets the `events` streams without finishing them: their readers wait for good.
    package var teardownLeavesStreamsOpen = false
    /// A `.collectUntilTimeout` window that collected several lines returns all but the last.
    package var collectDropsLastLine = false
    /// An automatic command whose answer has begun (its echo, a line, part of
    /// one) when its window ends waits a little longer for the rest (and may
    /// succeed late).
    package var waitsOutAPartialAnswer = false
    /// A no-wait command's isolation window ends after a thousandth of its
    /// time (3 ms, not 3 s: before any answer comes), as if answered: no
    /// drain, nothing left owed.
    package var shortNoWaitWindow = false
    /// An automatic command's success leaves the channel draining (a quiet
    /// period nothing is owed for): no-wait calls meanwhile throw `.busy`.
    package var drainsAfterSuccess = false
    /// A no-wait call made while the channel drains after a timeout or a
    /// cancellation is written at once, ending the drain.
    package var acceptsNoWaitDuringDrain = false
    /// A reconnect's quarantine lasts until the earliest deadline the old
    /// connection had running, not the latest.
    package var quarantinesUntilEarliestTimer = false

    package init() {}

    /// Each fault alone, by name.
    package static let each: [(name: String, faults: XTalkInjectedFaults)] = {
        let paths: [(String, WritableKeyPath<XTalkInjectedFaults, Bool>)] = [
            ("URC joins a response", \.urcJoinsResponse),
            ("drain skipped", \.skipsDrain),
            ("timeout counted from the call", \.timesOutFromCall),
            ("+PING: line dropped", \.dropsPingLine),
            ("answered with the previous reply", \.answersWithPreviousReply),
            ("radio frame dropped", \.dropsRadioFrames),
            ("old line replayed after a reconnect", \.replaysLineAfterReconnect),
            ("old event after a disconnect", \.deliversOldEventAfterDisconnect),
            ("never ready", \.neverReady),
            ("a full stream drops a state change", \.streamDropsStateChanges),
            ("waits for the ready callback alone", \.waitsForReadyCallback),
            ("a drain fails new calls as not connected", \.drainCountsAsDisconnected),
            ("a timeout twice as long as asked", \.doublesTimeouts),
            ("queued events delivered after a disconnect", \.keepsQueuedEventsAfterDisconnect),
            ("teardown leaves the event streams open", \.teardownLeavesStreamsOpen),
            ("a collect window drops its last line", \.collectDropsLastLine),
            ("a late success", \.waitsOutAPartialAnswer),
            ("a short no-wait window", \.shortNoWaitWindow),
            ("a spurious busy after a success", \.drainsAfterSuccess),
            ("a no-wait call written during a drain", \.acceptsNoWaitDuringDrain),
            ("a quarantine ends at the earliest timer", \.quarantinesUntilEarliestTimer),
        ]
        return paths.map { name, path in
            var faults = XTalkInjectedFaults()
            faults[keyPath: path] = true
            return (name, faults)
        }
    }()
}
