import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process for tests, benchmarks and tools: its stdout on a pipe we
/// read with bounded waits, stderr to /dev/null, an empty signal mask and
/// default signal actions whatever thread starts it.
///
/// Spawned with `posix_spawn`, not Foundation's `Process`: a child started by
/// `Process` from a test thread inherited a signal mask that blocks SIGTERM,
/// and `waitUntilExit()` runs a nested run loop on the caller's thread (the
/// main actor's, in tests), which wedged a whole test run. Stopped with
/// SIGKILL; `stop()` reaps it. Started with `ownProcessGroup`, the child
/// leads a process group of its own, and `stop()` kills the group: what the
/// child started too (`node --test`'s test processes and their `xtalk`s).
/// Without it, the child stays in ours and gets the terminal's Ctrl-C with
/// us (a tool's helper process).
package final class ChildProcess: @unchecked Sendable {
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    package let pid: pid_t
    private let output: Int32
    private let lock = NSLock()
    private var pending: [UInt8] = []
    private var reaped = false
    private var status: Int32 = 0

    /// Whether the child leads a process group of its own.
    private let ownProcessGroup: Bool

    /// Starts `path arguments`; `environment` replaces the child's environment (default: ours).
    package init(
        _ path: String, _ arguments: [String], environment: [String: String]? = nil, ownProcessGroup: Bool = false
    ) throws {
        self.ownProcessGroup = ownProcessGroup
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw Failure(description: "pipe() failed") }
        for descriptor in pipeFDs { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        #if os(Linux)
            // Nothing else of ours: descriptors without close-on-exec (another
            // thread's pipes to its own child, Foundation's) would otherwise
            // stay open in this child, and whoever waits for their end would
            // wait as long as it lives.
            if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }
        #endif
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes,
            Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (ownProcessGroup ? POSIX_SPAWN_SETPGROUP : 0)))
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { variables in
            variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var pid: pid_t = 0
        let result =
            if let envp { posix_spawn(&pid, path, &actions, &attributes, argv, envp) } else {
                posix_spawn(&pid, path, &actions, &attributes, argv, environ)
            }
        close(pipeFDs[1])
        guard result == 0 else {
            close(pipeFDs[0])
            throw Failure(description: "could not start \(path): \(String(cString: strerror(result)))")
        }
        self.pid = pid
        output = pipeFDs[0]
    }

    #if os(Linux)
        /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later),
        /// looked up at run time: the Glibc module does not import it.
        private static let addCloseFrom:
            (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
                guard
                    let symbol = dlsym(
                        UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
                else { return nil }
                return unsafeBitCast(
                    symbol,
                    to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
            }()
    #endif

    /// The next line of the child's stdout (without its newline), or nil at
    /// end of output or when `timeout` passes first.
    package func readLine(timeout: Duration) -> String? {
        let deadline = ContinuousClock.now + timeout
        return lock.withLock {
            while true {
                if let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeFirst(newline + 1)
                    return line
                }
                guard readMore(until: deadline) else { return nil }
            }
        }
    }

    /// Everything the child writes to stdout until it closes it, bounded by `timeout`.
    package func readToEnd(timeout: Duration) -> String {
        let deadline = ContinuousClock.now + timeout
        return lock.withLock {
            while readMore(until: deadline) {}
            defer { pending.removeAll() }
            return String(decoding: pending, as: UTF8.self)
        }
    }

    /// Reads what is available (waiting until `deadline`); false at end of output or deadline.
    private func readMore(until deadline: ContinuousClock.Instant) -> Bool {
        while ContinuousClock.now < deadline {
            var descriptor = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 20)
            if ready < 0 && errno != EINTR { return false }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4_096)
            let count = read(output, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            pending += chunk[0..<count]
            return true
        }
        return false
    }

    /// Reads and drops whatever the child writes to stdout from now on, on a
    /// thread of its own, until it closes it: for a child that serves others
    /// (a fake BlueZ) after the lines we needed, so that its writes never
    /// block on a full pipe. Call it after the last `readLine`; the lines
    /// already read stay read, the rest of the buffer is dropped.
    package func discardFurtherOutput() {
        let copy: Int32 = lock.withLock {
            pending.removeAll()
            return reaped ? -1 : dup(output)
        }
        guard copy >= 0 else { return }
        // A duplicate descriptor: `reap` may close ours meanwhile.
        Thread.detachNewThread {
            var chunk = [UInt8](repeating: 0, count: 4_096)
            while true {
                let count = read(copy, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
            }
            close(copy)
        }
    }

    /// Waits (bounded) for the child to exit on its own; its exit status, or nil if it is still running.
    package func wait(timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = reap(blocking: false) { return status }
            usleep(2_000)
        }
        return nil
    }

    /// Sends SIGINT (Ctrl-C) to the child.
    package func interrupt() {
        lock.withLock { if !reaped { kill(pid, SIGINT) } }
    }

    /// Interrupts the child (SIGINT, so that it stops what it started, e.g. its
    /// dbus-daemon), waits up to `grace` for it to exit, then `stop()`s it.
    package func stopGracefully(grace: Duration = .seconds(5)) {
        interrupt()
        _ = wait(timeout: grace)
        stop()
    }

    /// Kills the child (SIGKILL; with `ownProcessGroup`, its whole group)
    /// unless it has exited, reaps it and closes the pipe. Idempotent. (While
    /// the child is not reaped, its pid, the group's id, is no one else's.)
    package func stop() {
        if lock.withLock({ !reaped }) { kill(ownProcessGroup ? -pid : pid, SIGKILL) }
        _ = reap(blocking: true)
    }

    private func reap(blocking: Bool) -> Int32? {
        lock.withLock {
            if reaped { return status }
            var raw: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &raw, blocking ? 0 : WNOHANG) } while result < 0 && errno == EINTR
            guard result == pid else { return nil }
            reaped = true
            close(output)
            // WIFEXITED / WEXITSTATUS, spelled out (the macros are not imported).
            status = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
            return status
        }
    }

    deinit { stop() }

    // The waits again, for async callers (tests): each blocks a thread of its
    // own, not one of the few Swift concurrency runs every task on. A test
    // that waited on one of those for a child stalled every other suite's work.

    /// `readLine(timeout:)` on a thread of its own.
    package func readLine(timeout: Duration) async -> String? {
        await Self.onOwnThread { self.readLine(timeout: timeout) }
    }

    /// `readToEnd(timeout:)` on a thread of its own.
    package func readToEnd(timeout: Duration) async -> String {
        await Self.onOwnThread { self.readToEnd(timeout: timeout) }
    }

    /// `wait(timeout:)` on a thread of its own.
    package func wait(timeout: Duration) async -> Int32? {
        await Self.onOwnThread { self.wait(timeout: timeout) }
    }

    /// Runs the blocking `work` on a new thread and returns its result.
    package static func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: work()) }
        }
    }
}
