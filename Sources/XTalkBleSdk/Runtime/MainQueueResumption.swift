import Dispatch

/// Where the client's waits resume.
///
/// A main-actor task suspended on a continuation is, on current Swift
/// runtimes, resumed on the global executor and only then hops back to the
/// main actor: two thread wake-ups for every awaited AT command, which the
/// benchmark measured as most of a transaction's CPU cost (and which costs
/// battery on a phone). With this executor preferred for the wait, the resumed
/// task is queued straight onto the main queue, the main actor's own executor,
/// and continues there without waking any other thread.
///
/// Only the SDK's own waits run with the preference; nothing of the caller's
/// code does, and no task the SDK starts inherits it.
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
package final class MainQueueTaskExecutor: TaskExecutor {
    package static let shared = MainQueueTaskExecutor()

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        DispatchQueue.main.async { job.runSynchronously(on: executor) }
    }
}

/// Runs `operation` (one of the client's waits) with the main queue as the
/// preferred executor where the platform has task executors; as is elsewhere.
@MainActor
package func resumingOnMainQueue<T>(_ operation: @MainActor () async throws -> T) async rethrows -> T {
    if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
        return try await withTaskExecutorPreference(MainQueueTaskExecutor.shared) { try await operation() }
    }
    return try await operation()
}
