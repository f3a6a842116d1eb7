import Foundation
import XTalkBleSdk

/// A clock whose time moves only when you move it: tests and previews run the
/// simulated device and the client in virtual time and never sleep.
///
/// Everything the simulator and the client do over time (link latency, radio
/// airtime, command timeouts, drains) is a timer on this clock. `advance(by:)`
/// runs those timers in deadline order and, between them, lets tasks on the
/// main actor react, so `async` calls complete exactly as they would in real
/// time, only without waiting. `run(_:)` drives time until an operation
/// finishes. Create one clock per test: there is no global state.
///
/// It is also a `Clock`, so code that takes `any Clock<Duration>` can sleep on
/// it: such sleeps end when virtual time reaches their deadline.
public final class XTalkVirtualClock: Clock, @unchecked Sendable {
    /// A point in virtual time: the time since the clock was created.
    public struct Instant: InstantProtocol, Sendable, CustomStringConvertible {
        /// Time since the clock's origin.
        public var offset: Duration

        /// The instant `offset` after the clock's start.
        public init(offset: Duration) { self.offset = offset }

        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// The time from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "t+\(offset)" }
    }

    /// A timer's work: a main-actor action, or a sleeping task to resume.
    private enum Wakeup {
        case action(@MainActor () -> Void)
        case sleeper(CheckedContinuation<Void, any Error>)
    }

    /// Guards `current` and `timers`: `now` and `sleep` may be used from any task.
    private let lock = NSLock()
    private var current: Duration = .zero
    private var timers = TimerQueue<Wakeup>()
    private let settleYields: Int
    private let firesInstantTogether: Bool

    /// Creates a clock at time zero. `settleYields` is how many times the main
    /// actor is yielded after each timer so that resumed tasks can react; the
    /// default suits the SDK's own tasks. With `firesInstantTogether`, every
    /// timer due at the same instant fires before tasks are let to react (one
    /// settle per instant instead of one per timer): much cheaper when chains
    /// of zero-delay timers are the common case (benchmarks), at the price of
    /// tasks seeing an instant's events together.
    public init(settleYields: Int = 24, firesInstantTogether: Bool = false) {
        self.settleYields = max(1, settleYields)
        self.firesInstantTogether = firesInstantTogether
    }

    /// The current virtual time.
    public var now: Instant { Instant(offset: lock.withLock { current }) }
    /// One nanosecond: virtual time has no granularity of its own.
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Time since the clock's origin.
    public var elapsed: Duration { lock.withLock { current } }

    /// Number of timers and sleeps still scheduled. A finished test that tore
    /// everything down expects zero: nothing is left waiting.
    public var pendingTimerCount: Int { lock.withLock { timers.count } }

    /// The deadline of the earliest scheduled timer, if any.
    public var nextDeadline: Instant? {
        lock.withLock { timers.earliestDeadline().map { Instant(offset: $0) } }
    }

    /// Suspends until virtual time reaches `deadline` (the test moves it);
    /// throws `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let box = TokenBox()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let token = lock.withLock { timers.insert(deadline: deadline.offset, .sleeper(continuation)) }
                // The cancellation handler may already have run: then it found no token, so cancel here.
                if box.set(token) { cancelSleeper(token) }
            }
        } onCancel: {
            if let token = box.cancel() { cancelSleeper(token) }
        }
    }

    private func cancelSleeper(_ token: TimerToken) {
        // Whoever removes the timer resumes its continuation: exactly once.
        let removed = lock.withLock { timers.remove(token) }
        if case .sleeper(let continuation) = removed { continuation.resume(throwing: CancellationError()) }
    }

    // MARK: Driving time

    /// Moves time forward by `duration`, running every timer that falls due, in
    /// order, and letting the tasks it resumes react before time moves on.
    @MainActor
    public func advance(by duration: Duration = .zero) async {
        await advance(to: Instant(offset: elapsed + max(duration, .zero)))
    }

    /// Moves time forward to `deadline` (never backwards), running due timers.
    @MainActor
    public func advance(to deadline: Instant) async {
        await settle()
        while let entry = popEarliest(notAfter: deadline.offset) {
            fire(entry)
            await settle()
        }
        lock.withLock { current = max(current, deadline.offset) }
        await settle()
    }

    /// Runs `operation`, moving time forward until it finishes, and returns its
    /// result. Throws `XTalkVirtualClockError.stalled` when nothing is
    /// scheduled and the operation still waits (it could never finish), and
    /// `.deadlineExceeded` when it is still running `limit` after starting;
    /// either way the operation's task is cancelled.
    @MainActor
    public func run<T: Sendable>(
        limit: Duration = .seconds(3600),
        _ operation: @escaping @MainActor () async throws -> T
    ) async throws -> T {
        let box = ResultBox<T>()
        let task = Task { @MainActor in
            do {
                box.result = .success(try await operation())
            } catch {
                box.result = .failure(error)
            }
        }
        let end = elapsed + max(limit, .zero)
        await settle()
        while box.result == nil {
            guard let deadline = lock.withLock({ timers.earliestDeadline() }) else {
                task.cancel()
                await settleUntilFinished(box)
                throw XTalkVirtualClockError.stalled(at: now)
            }
            guard deadline <= end, let entry = popEarliest(notAfter: end) else {
                task.cancel()
                await settleUntilFinished(box)
                throw XTalkVirtualClockError.deadlineExceeded(limit)
            }
            fire(entry)
            await settle()
        }
        guard let result = box.result else { throw XTalkVirtualClockError.stalled(at: now) }
        return try result.get()
    }

    /// Yields the main actor so that tasks resumed by a timer run to their next
    /// suspension point.
    @MainActor
    public func settle() async {
        // Work reaches the main actor two ways: tasks the SDK resumes are
        // queued on the main queue, other awaits come back through a
        // global-executor thread. Each round lets both land: one yield goes
        // through a global thread, one queues behind everything on the main queue.
        for _ in 0..<settleYields {
            await Task.yield()
            await resumingOnMainQueue { await Task.yield() }
        }
    }

    @MainActor
    private func settleUntilFinished<T>(_ box: ResultBox<T>) async {
        for _ in 0..<1_000 where box.result == nil {
            await Task.yield()
            await resumingOnMainQueue { await Task.yield() }
        }
    }

    private func popEarliest(notAfter limit: Duration) -> TimerQueue<Wakeup>.Entry? {
        lock.withLock {
            guard let deadline = timers.earliestDeadline(), deadline <= limit else { return nil }
            current = max(current, deadline)
            return timers.popDue(at: current)
        }
    }

    @MainActor
    private func fire(_ entry: TimerQueue<Wakeup>.Entry) {
        fireOne(entry)
        guard firesInstantTogether else { return }
        // Everything else due now, including what these timers schedule for now.
        let now = entry.deadline
        while let next = lock.withLock({ timers.popDue(at: now) }) { fireOne(next) }
    }

    @MainActor
    private func fireOne(_ entry: TimerQueue<Wakeup>.Entry) {
        switch entry.action {
        case .action(let action): action()
        case .sleeper(let continuation): continuation.resume()
        }
    }
}

extension XTalkVirtualClock: TimerScheduling {
    @MainActor
    package func schedule(after delay: Duration, _ action: @escaping @MainActor () -> Void) -> TimerToken {
        lock.withLock { timers.insert(deadline: current + max(delay, .zero), .action(action)) }
    }

    @MainActor
    package func cancel(_ token: TimerToken) {
        // A sleeper's continuation is only ever removed by its own cancellation handler.
        let removed = lock.withLock { timers.remove(token) }
        if case .sleeper(let continuation) = removed { continuation.resume(throwing: CancellationError()) }
    }
}

/// Why `XTalkVirtualClock.run` gave up.
public enum XTalkVirtualClockError: Error, Equatable, CustomStringConvertible {
    /// The operation waits but no timer is scheduled: it can never finish.
    case stalled(at: XTalkVirtualClock.Instant)
    /// The operation ran longer than the given limit of virtual time.
    case deadlineExceeded(Duration)

    public var description: String {
        switch self {
        case .stalled(let instant): "the operation is stalled at \(instant): it waits and nothing is scheduled"
        case .deadlineExceeded(let limit): "the operation did not finish within \(limit) of virtual time"
        }
    }
}

@MainActor
private final class ResultBox<T> {
    var result: Result<T, any Error>?
}

/// Hands a sleeper's token between the registering code and the
/// cancellation handler, which may run first, on another thread.
private final class TokenBox: @unchecked Sendable {
    private let lock = NSLock()
    private var token: TimerToken?
    private var cancelled = false

    /// Stores the token; returns true when cancellation already happened.
    func set(_ token: TimerToken) -> Bool {
        lock.withLock {
            self.token = token
            return cancelled
        }
    }

    /// Marks cancellation; returns the token if it was already registered.
    func cancel() -> TimerToken? {
        lock.withLock {
            cancelled = true
            return token
        }
    }
}
