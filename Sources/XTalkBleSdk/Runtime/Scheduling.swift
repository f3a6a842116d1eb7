import Dispatch
import Foundation

/// A handle to cancel a scheduled timer.
package struct TimerToken: Hashable, Sendable {
    package let raw: UInt64
    package init(raw: UInt64) { self.raw = raw }
}

/// Runs timers on the main actor, in deadline order (ties in scheduling order).
///
/// This is how time enters the drivers and the simulator: the sans-I/O core
/// asks for timers, a driver schedules them here. With a real clock it sleeps;
/// with the simulator's virtual clock, tests advance time by hand and nothing
/// sleeps. Actions never run inside `schedule` (no re-entrancy), even with a
/// zero delay.
@MainActor
package protocol TimerScheduling: AnyObject {
    /// Time elapsed since the scheduler's origin.
    var elapsed: Duration { get }
    /// Runs `action` on the main actor after `delay`, unless cancelled first.
    func schedule(after delay: Duration, _ action: @escaping @MainActor () -> Void) -> TimerToken
    /// Cancels a timer; cancelling a fired or unknown timer does nothing.
    func cancel(_ token: TimerToken)
}

/// Timers ordered by deadline, then by scheduling order: the shared core of
/// the real-clock scheduler and the virtual clock.
package struct TimerQueue<Action> {
    package struct Entry {
        package let deadline: Duration
        package let token: TimerToken
        package let action: Action
    }

    private struct Key {
        let deadline: Duration
        let token: UInt64
    }

    private var heap: [Key] = []
    /// Live timers' actions; a heap key without one was cancelled (lazy deletion).
    private var actions: [UInt64: Action] = [:]
    private var nextToken: UInt64 = 0

    package init() {}

    /// Number of timers scheduled and not yet fired or cancelled.
    package var count: Int { actions.count }

    package mutating func insert(deadline: Duration, _ action: Action) -> TimerToken {
        nextToken += 1
        actions[nextToken] = action
        heap.append(Key(deadline: deadline, token: nextToken))
        siftUp(heap.count - 1)
        return TimerToken(raw: nextToken)
    }

    /// Removes a timer; returns its action when it was still scheduled.
    @discardableResult
    package mutating func remove(_ token: TimerToken) -> Action? {
        actions.removeValue(forKey: token.raw)
    }

    /// The earliest live deadline.
    package mutating func earliestDeadline() -> Duration? {
        dropCancelled()
        return heap.first?.deadline
    }

    /// Removes and returns the earliest live timer if it is due at `now`.
    package mutating func popDue(at now: Duration) -> Entry? {
        dropCancelled()
        guard let first = heap.first, first.deadline <= now, let action = actions.removeValue(forKey: first.token)
        else {
            return nil
        }
        popFirst()
        return Entry(deadline: first.deadline, token: TimerToken(raw: first.token), action: action)
    }

    private mutating func dropCancelled() {
        while let first = heap.first, actions[first.token] == nil { popFirst() }
    }

    private static func precedes(_ a: Key, _ b: Key) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.token < b.token
    }

    private mutating func popFirst() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.precedes(heap[child], heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var first = parent
            if left < heap.count && Self.precedes(heap[left], heap[first]) { first = left }
            if right < heap.count && Self.precedes(heap[right], heap[first]) { first = right }
            if first == parent { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}

/// Timers on any `Clock` whose duration is `Duration` (the real clock in apps
/// and in the CLI): one wake-up at the earliest deadline runs every due timer
/// in order, so equal deadlines keep their scheduling order.
///
/// On `ContinuousClock` the wake-up is a dispatch timer on the main queue,
/// which runs the main actor's turn directly. A task sleeping on the clock
/// (how other clocks are waited on) starts off the main actor and hops back
/// when it wakes: two or three thread wake-ups more for every timer, and a
/// simulated link on the real clock fires one each connection event.
@MainActor
package final class ClockTimerScheduler<C: Clock>: TimerScheduling where C.Duration == Duration {
    private let clock: C
    private let origin: C.Instant
    private var queue = TimerQueue<@MainActor () -> Void>()
    private var sleeper: Task<Void, Never>?
    /// The main-queue timer (`ContinuousClock` only), and whether it is armed.
    private let mainQueueTimer: MainQueueTimer?
    private var mainQueueTimerArmed = false
    private var sleeperDeadline: Duration?
    /// A turn of the main actor that runs timers already due is queued.
    private var immediatePending = false

    package init(clock: C) {
        self.clock = clock
        origin = clock.now
        mainQueueTimer = C.self == ContinuousClock.self ? MainQueueTimer() : nil
        mainQueueTimer?.onFire = { [weak self] in
            guard let self else { return }
            self.mainQueueTimerArmed = false
            self.fireDue()
        }
    }

    package var elapsed: Duration { origin.duration(to: clock.now) }

    package func schedule(after delay: Duration, _ action: @escaping @MainActor () -> Void) -> TimerToken {
        let token = queue.insert(deadline: elapsed + max(delay, .zero), action)
        rearm()
        return token
    }

    package func cancel(_ token: TimerToken) {
        // The sleeper stays: it wakes at its deadline, finds nothing due and
        // re-arms. Cancelling it on every emptied queue (every command's
        // timeout is cancelled) would cost a cross-thread wake-up each time.
        queue.remove(token)
    }

    /// Makes sure a sleeper wakes at the earliest deadline.
    private func rearm() {
        guard let earliest = queue.earliestDeadline() else { return }
        if earliest <= elapsed {
            // Already due (a zero delay): run on the main actor's next turn,
            // without a clock sleep, which would hop through another thread.
            guard !immediatePending else { return }
            immediatePending = true
            // Straight onto the main queue (the main actor's executor): a Task
            // would start on the global executor and hop, waking a worker thread.
            DispatchQueue.main.async { [weak self] in
                MainActor.assumeIsolated {
                    guard let self else { return }
                    self.immediatePending = false
                    self.fireDue()
                }
            }
            return
        }
        if let current = sleeperDeadline, current <= earliest, sleeper != nil || mainQueueTimerArmed { return }
        sleeperDeadline = earliest
        if let mainQueueTimer {
            mainQueueTimer.arm(after: earliest - elapsed)
            mainQueueTimerArmed = true
            return
        }
        sleeper?.cancel()
        let clock = self.clock
        let deadline = origin.advanced(by: earliest)
        sleeper = Task { @MainActor [weak self] in
            do {
                try await clock.sleep(until: deadline, tolerance: nil)
            } catch {
                return  // re-armed or cancelled
            }
            self?.fireDue()
        }
    }

    private func fireDue() {
        if sleeperDeadline.map({ $0 <= elapsed }) ?? true {
            sleeper = nil
            sleeperDeadline = nil
        }
        // What the fired timers schedule for "now" (zero delays) runs in this
        // same job: a chain of zero-delay hops costs no task and no sleep each.
        // Bounded, so that a timer rescheduling itself at once cannot starve others.
        var now = elapsed
        var fired = 0
        while fired < 10_000, let entry = queue.popDue(at: now) {
            entry.action()
            fired += 1
            if queue.earliestDeadline().map({ $0 > now }) ?? true { now = elapsed }
        }
        rearm()
    }
}

/// A dispatch timer on the main queue whose handler runs on the main actor.
/// Re-arming moves its one deadline; it is cancelled when released.
private final class MainQueueTimer: @unchecked Sendable {
    private let source: any DispatchSourceTimer
    /// Set once, on the main actor, before the timer is first armed.
    nonisolated(unsafe) var onFire: (@MainActor () -> Void)?

    init() {
        source = DispatchSource.makeTimerSource(queue: .main)
        source.setEventHandler { [weak self] in
            MainActor.assumeIsolated { self?.onFire?() }
        }
        // Activated at once (a source must not be released inactive); it
        // fires only once scheduled.
        source.activate()
    }

    func arm(after delay: Duration) {
        let (seconds, attoseconds) = max(delay, .zero).components
        // A delay of a century or more (the API takes `timeoutMs: .max`) is
        // never: beyond about 292 years the nanoseconds would not fit at all.
        guard seconds < Self.never else {
            return source.schedule(deadline: .distantFuture, repeating: .never, leeway: .nanoseconds(0))
        }
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        source.schedule(deadline: .now() + .nanoseconds(Int(nanoseconds)), repeating: .never, leeway: .nanoseconds(0))
    }

    /// A century, in seconds.
    private static let never: Int64 = 100 * 365 * 24 * 3_600

    deinit {
        // Only cancelled: its handler holds this timer weakly, and replacing the
        // handler of an activated source is a misuse that libdispatch reports
        // through syslog(3), which blocks when the system log does not keep up.
        source.cancel()
    }
}
