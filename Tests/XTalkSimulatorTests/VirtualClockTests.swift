import Foundation
import Testing
@testable import XTalkBleSdk
@testable import XTalkSimulator

@Suite("Virtual time: the timer queue, the virtual clock and the clock scheduler", .timeLimit(.minutes(5)))
@MainActor
struct VirtualClockTests {
    @Test("the timer queue pops by deadline, ties in scheduling order, and skips cancelled timers")
    func timerQueue() {
        var queue = TimerQueue<String>()
        _ = queue.insert(deadline: .milliseconds(30), "c")
        let b = queue.insert(deadline: .milliseconds(10), "b1")
        _ = queue.insert(deadline: .milliseconds(10), "b2")
        _ = queue.insert(deadline: .milliseconds(5), "a")
        _ = queue.insert(deadline: .milliseconds(10), "b3")
        #expect(queue.remove(b) == "b1")
        #expect(queue.remove(b) == nil)
        #expect(queue.count == 4)
        #expect(queue.earliestDeadline() == .milliseconds(5))
        #expect(queue.popDue(at: .milliseconds(4)) == nil)
        var popped: [String] = []
        while let entry = queue.popDue(at: .milliseconds(100)) { popped.append(entry.action) }
        #expect(popped == ["a", "b2", "b3", "c"])
        #expect(queue.count == 0)
        #expect(queue.earliestDeadline() == nil)
    }

    @Test("the heap stays ordered under random inserts and cancellations (property)")
    func timerQueueProperty() {
        let rng = SimulatorRandom(seed: 42)
        var queue = TimerQueue<Int>()
        var expected: [(Int, Int)] = []  // (deadline ms, insertion index)
        var tokens: [(TimerToken, Int)] = []
        for index in 0..<500 {
            let deadline = Int(rng.next() % 50)
            tokens.append((queue.insert(deadline: .milliseconds(deadline), index), index))
            expected.append((deadline, index))
        }
        for (token, index) in tokens where index % 3 == 0 {
            queue.remove(token)
            expected.removeAll { $0.1 == index }
        }
        var popped: [Int] = []
        while let entry = queue.popDue(at: .seconds(1)) { popped.append(entry.action) }
        #expect(popped == expected.sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }.map(\.1))
    }

    @Test("advancing runs due timers in order at their deadlines, never early")
    func advance() async {
        let clock = XTalkVirtualClock()
        var log: [String] = []
        _ = clock.schedule(after: .milliseconds(20)) { log.append("20@\(clock.elapsed)") }
        _ = clock.schedule(after: .milliseconds(10)) {
            log.append("10@\(clock.elapsed)")
            _ = clock.schedule(after: .zero) { log.append("chained@\(clock.elapsed)") }
        }
        let cancelled = clock.schedule(after: .milliseconds(15)) { log.append("cancelled") }
        clock.cancel(cancelled)
        await clock.advance(by: .milliseconds(9))
        #expect(log.isEmpty)
        #expect(clock.elapsed == .milliseconds(9))
        await clock.advance(by: .milliseconds(11))
        #expect(log == ["10@0.01 seconds", "chained@0.01 seconds", "20@0.02 seconds"])
        #expect(clock.elapsed == .milliseconds(20))
        #expect(clock.pendingTimerCount == 0)
    }

    @Test("actions never run inside schedule, even with a zero delay")
    func noReentrancy() async {
        let clock = XTalkVirtualClock()
        var ran = false
        _ = clock.schedule(after: .zero) { ran = true }
        #expect(!ran)
        await clock.advance()
        #expect(ran)
    }

    @Test("tasks sleeping on the clock wake at virtual deadlines and can be cancelled")
    func sleeping() async {
        let clock = XTalkVirtualClock()
        var woke: [Duration] = []
        let sleeper = Task { @MainActor in
            try await clock.sleep(for: .seconds(5))
            woke.append(clock.elapsed)
        }
        let cancelled = Task { @MainActor in
            do {
                try await clock.sleep(for: .seconds(10))
                return false
            } catch {
                return error is CancellationError
            }
        }
        await clock.settle()
        #expect(clock.pendingTimerCount == 2)
        await clock.advance(by: .seconds(4))
        #expect(woke.isEmpty)
        await clock.advance(by: .seconds(1))
        #expect(woke == [.seconds(5)])
        cancelled.cancel()
        #expect(await cancelled.value)
        #expect(clock.pendingTimerCount == 0)
        _ = try? await sleeper.value
    }

    @Test("run drives time until the operation finishes and returns its result")
    func runToCompletion() async throws {
        let clock = XTalkVirtualClock()
        let value = try await clock.run {
            try await clock.sleep(for: .seconds(30))
            return 42
        }
        #expect(value == 42)
        #expect(clock.elapsed == .seconds(30))
    }

    @Test("run reports an operation that can never finish, and one that runs past its limit")
    func runFailures() async {
        let clock = XTalkVirtualClock()
        let parked = ParkedContinuation()
        await #expect(throws: XTalkVirtualClockError.self) {
            try await clock.run {
                // Waits for something no timer will ever bring.
                await withCheckedContinuation { parked.continuation = $0 }
            }
        }
        parked.continuation?.resume()  // release it, so nothing leaks
        let second = XTalkVirtualClock()
        await #expect(throws: XTalkVirtualClockError.deadlineExceeded(.seconds(10))) {
            try await second.run(limit: .seconds(10)) { try await second.sleep(for: .seconds(11)) }
        }
        #expect(second.pendingTimerCount == 0, "the cancelled sleep left nothing behind")
    }

    @Test("the real-clock scheduler runs timers in order on any clock (here a virtual one)")
    func clockScheduler() async {
        let clock = XTalkVirtualClock()
        let scheduler = ClockTimerScheduler(clock: clock)
        var log: [String] = []
        _ = scheduler.schedule(after: .milliseconds(30)) { log.append("30") }
        _ = scheduler.schedule(after: .milliseconds(10)) { log.append("10a") }
        _ = scheduler.schedule(after: .milliseconds(10)) { log.append("10b") }
        let cancelled = scheduler.schedule(after: .milliseconds(20)) { log.append("cancelled") }
        scheduler.cancel(cancelled)
        await clock.advance(by: .milliseconds(10))
        #expect(log == ["10a", "10b"])
        // An earlier timer scheduled later re-arms the sleeper.
        _ = scheduler.schedule(after: .milliseconds(5)) { log.append("15") }
        await clock.advance(by: .milliseconds(20))
        #expect(log == ["10a", "10b", "15", "30"])
        #expect(scheduler.elapsed == .milliseconds(30))
        await clock.settle()
        #expect(clock.pendingTimerCount == 0, "no sleeper is left once every timer ran")
    }

    /// The one test here on the real clock: `ContinuousClock` wakes through a
    /// main-queue dispatch timer, which only real time can exercise. Order is
    /// exact; the one duration checked has a 250-fold margin.
    @Test("the real-clock scheduler on ContinuousClock: deadline order, cancelled never, earlier re-arms")
    func continuousClockScheduler() async {
        let scheduler = ClockTimerScheduler(clock: ContinuousClock())
        var log: [String] = []
        var finishedAt: Duration?
        // The largest timeout the API takes (`timeoutMs: .max`, 292 million
        // years) is further than a dispatch deadline holds: armed first, it
        // must neither crash nor fire.
        let never = scheduler.schedule(after: .milliseconds(Int.max)) { log.append("never") }
        defer { scheduler.cancel(never) }
        // Armed first, far away: every timer below is earlier and must move the wake-up.
        let late = scheduler.schedule(after: .seconds(10)) { log.append("late") }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            var pending: CheckedContinuation<Void, Never>? = continuation
            let done = {
                pending?.resume()
                pending = nil
            }
            // A scheduler that never fires is a failure in seconds, not a hang.
            DispatchQueue.main.asyncAfter(deadline: .now() + 20) { MainActor.assumeIsolated { done() } }
            _ = scheduler.schedule(after: .milliseconds(40)) {
                log.append("40")
                finishedAt = scheduler.elapsed
                scheduler.cancel(late)  // here, not after the test resumes (which a loaded machine delays)
                done()
            }
            _ = scheduler.schedule(after: .milliseconds(20)) { log.append("20a") }
            _ = scheduler.schedule(after: .milliseconds(20)) { log.append("20b") }
            let cancelled = scheduler.schedule(after: .milliseconds(30)) { log.append("cancelled") }
            scheduler.cancel(cancelled)
            _ = scheduler.schedule(after: .milliseconds(5)) { log.append("5") }
        }
        #expect(log == ["5", "20a", "20b", "40"])
        #expect(
            finishedAt.map { $0 >= .milliseconds(40) && $0 < .seconds(10) } == true,
            "woke at \(String(describing: finishedAt)), not at the 10 s timer")
    }
}

@MainActor
final class ParkedContinuation {
    var continuation: CheckedContinuation<Void, Never>?
}
