import Testing
import XTalkSimulator

/// Helpers shared by the test targets (a library only tests depend on).

extension XTalkVirtualClock {
    /// Waits for `task` to end, moving virtual time at most `limit`. A task
    /// still running then, or still waiting after hundreds of rounds of the
    /// main actor with nothing scheduled (it never could end), is a named
    /// failure and is cancelled: a wait that would hang the run fails in
    /// seconds instead, saying what did not end.
    @MainActor
    package func awaitEnd<T: Sendable>(
        of task: Task<T, Never>, _ what: String, within limit: Duration = .seconds(10),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async -> T? {
        let result = EndBox<T>()
        let waiter = Task { @MainActor in result.value = await task.value }
        let end = now.advanced(by: limit)
        var idleRounds = 0
        while result.value == nil {
            await settle()
            if result.value != nil { break }
            if let next = nextDeadline, next <= end {
                await advance(to: next)
                idleRounds = 0
            } else if idleRounds < 500 {
                idleRounds += 1  // nothing due in time: the task can only end by itself
            } else {
                task.cancel()
                // A task stuck on a continuation nobody will resume ignores
                // cancellation: give it a few turns, then report it, never wait on it.
                for _ in 0..<100 where result.value == nil { await settle() }
                if result.value == nil { waiter.cancel() }
                let why = nextDeadline == nil ? "nothing is scheduled" : "nothing ended it before \(end)"
                Issue.record(
                    "\(what) did not end within \(limit) of virtual time (\(why))", sourceLocation: sourceLocation)
                return nil
            }
        }
        return result.value
    }
}

@MainActor
private final class EndBox<T> {
    var value: T?
}
