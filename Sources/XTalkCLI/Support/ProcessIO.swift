import Dispatch
import Foundation
import XTalkBleBridge

/// Standard input as lines, read with read(2) rather than stdio.
///
/// `readLine()` waits inside `getline(stdin)` holding stdin's stdio lock, and
/// `exit()` in glibc 2.39 and later takes every stream's lock before it
/// flushes: a tool that exits while its reader waits for a line (`xtalk
/// shell`'s `:quit`, Ctrl-C in `shell` or `bridge`) would never end. Reading
/// the descriptor directly holds no stdio lock.
package enum StandardInputLines {
    /// The longest line kept whole: the bridge's longest request. A longer
    /// line is offered cut to its first `maximumLineLength + 1` bytes (the
    /// bridge answers it as too long, with the id its head gives; the shell
    /// refuses it as a command): a line's memory stays bounded whatever comes in.
    package static let maximumLineLength = BridgeRouter.maximumRequestLength

    /// Reads `descriptor` to its end and offers each line (see `LineSplitter`);
    /// stops early when `offer` returns false. Blocks its thread: run it on one of its own.
    package static func readLines(
        from descriptor: Int32, maximumLineLength: Int = maximumLineLength, offer: (String) -> Bool
    ) {
        var splitter = LineSplitter(maximumLength: maximumLineLength)
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }  // end of input, or an error that ends it
            for line in splitter.feed(chunk[..<count]) where !offer(line) { return }
        }
        if let last = splitter.end() { _ = offer(last) }
    }
}

/// Lines from standard input waiting for the command (`shell`, `bridge
/// --stdio`): at most `maximumLines` of them and `maximumBytes` in all, so a
/// fast writer and a slow command keep a few MiB, not a thousand 1 MiB lines.
/// A line longer than `maximumBytes` is still taken when no other waits. When
/// full, `put` holds the reading thread until the command takes a line (the
/// writer then blocks on the pipe): no line is ever dropped.
///
/// `finish()` ends the input (its end, or the command's): lines already
/// waiting are still read, then `next()` returns nil, and `put` returns false
/// (the reader stops). A reader whose task is cancelled gets nil at once, and
/// the queue is finished, as a cancelled `AsyncStream`'s.
package final class InputLineQueue: @unchecked Sendable {
    package let maximumLines: Int
    package let maximumBytes: Int
    private let condition = NSCondition()
    private var lines: [String] = []
    private var head = 0
    private var bytes = 0
    private var finished = false
    private var cancelled = false
    /// Readers waiting (only while no line does), first come first served.
    private var waiters: [CheckedContinuation<String?, Never>] = []

    package init(
        maximumLines: Int = 1_024, maximumBytes: Int = 4 * (StandardInputLines.maximumLineLength + 1)
    ) {
        self.maximumLines = max(1, maximumLines)
        self.maximumBytes = max(1, maximumBytes)
    }

    /// The lines as the command reads them.
    package var stream: AsyncStream<String> {
        AsyncStream(unfolding: { await self.next() }, onCancel: { self.end(cancelled: true) })
    }

    /// What waits now: lines and their bytes (UTF-8).
    package var waiting: (lines: Int, bytes: Int) { condition.withLock { (lines.count - head, bytes) } }

    package enum Offer: Equatable { case taken, full, finished }

    /// Takes `line` if there is room for it now; never blocks.
    package func offer(_ line: String) -> Offer {
        let resumed: CheckedContinuation<String?, Never>?
        condition.lock()
        guard !finished else {
            condition.unlock()
            return .finished
        }
        if !waiters.isEmpty {
            resumed = waiters.removeFirst()
        } else {
            let size = line.utf8.count
            guard hasRoom(for: size) else {
                condition.unlock()
                return .full
            }
            lines.append(line)
            bytes += size
            resumed = nil
        }
        condition.unlock()
        resumed?.resume(returning: line)
        return .taken
    }

    /// Takes `line`, waiting (blocking this thread) while the queue is full.
    /// False once finished: the line is not taken, and reading should stop.
    package func put(_ line: String) -> Bool {
        while true {
            switch offer(line) {
            case .taken: return true
            case .finished: return false
            case .full:
                condition.lock()
                // Room is made, or the end comes, under the lock: a signal cannot be missed.
                while !finished && !hasRoom(for: line.utf8.count) { condition.wait() }
                condition.unlock()
            }
        }
    }

    private func hasRoom(for size: Int) -> Bool {
        let count = lines.count - head
        return count == 0 || count < maximumLines && bytes + size <= maximumBytes
    }

    /// The next line; nil once finished and read to the end, or when the task is cancelled.
    package func next() async -> String? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                condition.lock()
                if !cancelled, head < lines.count {
                    let line = lines[head]
                    head += 1
                    bytes -= line.utf8.count
                    if head == lines.count {
                        lines.removeAll(keepingCapacity: true)
                        head = 0
                    } else if head >= 64 && head * 2 >= lines.count {
                        lines.removeFirst(head)
                        head = 0
                    }
                    condition.broadcast()
                    condition.unlock()
                    continuation.resume(returning: line)
                } else if finished || cancelled {
                    condition.unlock()
                    continuation.resume(returning: nil)
                } else {
                    waiters.append(continuation)
                    condition.unlock()
                }
            }
        } onCancel: {
            end(cancelled: true)
        }
    }

    /// Ends the input: what waits is still read; `put` returns false from now on.
    package func finish() { end(cancelled: false) }

    /// Finishes the queue. `cancelled`: the reader went, so lines still waiting are not read either.
    private func end(cancelled: Bool) {
        condition.lock()
        finished = true
        if cancelled { self.cancelled = true }
        // Readers wait only while no line does: they get the end.
        let ended = waiters
        waiters.removeAll()
        condition.broadcast()
        condition.unlock()
        for waiter in ended { waiter.resume(returning: nil) }
    }
}

/// The tool's standard output and error, written with write(2). A write
/// that fails (stdout a pipe whose reader left while SIGPIPE is ignored, a
/// full disk, a closed descriptor) is reported once, on standard error when
/// that still works, and `onFailure` runs once so that the command ends
/// cleanly (its link closed); later writes are dropped. Foundation's
/// `FileHandle.write` traps on such an error instead.
package final class StandardStreams: @unchecked Sendable {
    private let lock = NSLock()
    private let output: Int32
    private let error: Int32
    private var failed: String?
    private var pipeBroken = false
    private var errorFailed = false
    /// Runs once, on the thread whose write failed.
    package var onFailure: (@Sendable () -> Void)? {
        get { lock.withLock { failureHandler } }
        set { lock.withLock { failureHandler = newValue } }
    }
    private var failureHandler: (@Sendable () -> Void)?

    package init(output: Int32 = 1, error: Int32 = 2) {
        self.output = output
        self.error = error
    }

    /// Why writing the output failed (nil: every line so far went through).
    package var failure: String? { lock.withLock { failed } }

    /// The output's reader went away (EPIPE; SIGPIPE is ignored so that the
    /// command can end cleanly): said by no message, as a pipe's end usually is.
    package var brokenPipe: Bool { lock.withLock { pipeBroken } }

    /// Writes a line of output; the first failure ends the command (`onFailure`).
    package func writeOut(_ line: String) {
        let handler: (@Sendable () -> Void)? = lock.withLock {
            // One line at a time, whole: lines of several threads never interleave.
            guard failed == nil, let code = Self.writeAll(line + "\n", to: output) else { return nil }
            failed = "cannot write to standard output: \(String(cString: strerror(code)))"
            pipeBroken = code == EPIPE
            if !pipeBroken, !errorFailed, let failed { _ = Self.writeAll("xtalk: \(failed)\n", to: error) }
            return failureHandler ?? {}
        }
        handler?()
    }

    /// Writes a diagnostic line. Diagnostics that cannot be written are
    /// dropped: the command and its output go on.
    package func writeError(_ line: String) {
        lock.withLock {
            guard !errorFailed, Self.writeAll(line + "\n", to: error) != nil else { return }
            errorFailed = true
        }
    }

    /// Writes all of `text`, again after an interrupted or partial write;
    /// returns the error number of a failure (nil: written).
    package static func writeAll(_ text: String, to descriptor: Int32) -> Int32? {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { raw in Foundation.write(descriptor, raw.baseAddress, raw.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            bytes = bytes.dropFirst(written)
        }
        return nil
    }
}

/// Splits bytes into lines as `readLine()` does: without their "\n" or
/// "\r\n", invalid UTF-8 repaired; a last line without a newline counts.
/// Each byte is searched for a newline once, however a long line arrives.
/// With a `maximumLength`, a longer line keeps only its first
/// `maximumLength + 1` bytes (the rest is read and dropped), so that its
/// reader can tell it was too long and memory stays bounded.
package struct LineSplitter {
    package let maximumLength: Int?
    private var pending: [UInt8] = []
    /// The current line's length so far, and its last byte (kept or not).
    private var total = 0
    private var last: UInt8?
    /// Bytes searched for a newline so far (for tests: each byte once).
    package private(set) var bytesSearched = 0

    package init(maximumLength: Int? = nil) {
        self.maximumLength = maximumLength
    }

    /// Bytes of the current line held (for tests: bounded by the limit).
    package var bufferedByteCount: Int { pending.count }

    /// The lines that `bytes` completes, in order.
    package mutating func feed(_ bytes: ArraySlice<UInt8>) -> [String] {
        var lines: [String] = []
        var rest = bytes
        while let newline = rest.firstIndex(of: 0x0A) {
            bytesSearched += newline + 1 - rest.startIndex
            keep(rest[..<newline])
            lines.append(takeLine())
            rest = rest[(newline + 1)...]
        }
        bytesSearched += rest.count
        keep(rest)
        return lines
    }

    /// The last line, when the input ended without a newline.
    package mutating func end() -> String? {
        total == 0 ? nil : takeLine()
    }

    private mutating func keep(_ bytes: ArraySlice<UInt8>) {
        guard !bytes.isEmpty else { return }
        total += bytes.count
        last = bytes.last
        guard let maximumLength else { return pending.append(contentsOf: bytes) }
        let room = maximumLength + 1 - pending.count
        if room > 0 { pending.append(contentsOf: bytes.prefix(room)) }
    }

    /// The current line, without its CR. A line longer than the limit keeps
    /// its `maximumLength + 1` bytes as they are (a CR among them is not its
    /// end), so its reader always sees that it is too long.
    private mutating func takeLine() -> String {
        let length = total - (last == 0x0D ? 1 : 0)
        let cut = maximumLength.map { length > $0 } ?? false
        let line = String(decoding: !cut && last == 0x0D ? pending.dropLast() : pending[...], as: UTF8.self)
        pending.removeAll(keepingCapacity: maximumLength != nil)
        total = 0
        last = nil
        return line
    }
}

/// Ctrl-C for the tool: the first SIGINT calls `first`, every later one
/// `again`, on a queue of their own, so that a main thread blocked (a write to
/// a stalled pipe, a long job) neither delays nor swallows them.
package final class InterruptHandler {
    private let source: any DispatchSourceSignal

    /// Installs the handler for `signal` (SIGINT for Ctrl-C) until this object
    /// is released. It is in place once `registered` has been called: a signal
    /// that comes sooner is ignored.
    package init(
        signal number: Int32 = SIGINT, first: @escaping @Sendable () -> Void, again: @escaping @Sendable () -> Void,
        registered: (@Sendable () -> Void)? = nil
    ) {
        // The source replaces the default action (which would end the process at once).
        _ = signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: DispatchQueue(label: "xtalk.interrupt"))
        let count = Counter()
        // Cancelling the source releases this handler, and with it the source it holds.
        source.setEventHandler {
            // The queue is serial: one handler at a time. Signals that arrive
            // before it runs are one event: `data` says how many.
            let before = count.value
            count.value += max(Int(source.data), 1)
            if before == 0 { first() }
            if count.value > 1 { again() }
        }
        if let registered { source.setRegistrationHandler(handler: registered) }
        source.activate()
        self.source = source
    }

    deinit { source.cancel() }

    /// Touched only on the source's serial queue.
    private final class Counter: @unchecked Sendable {
        var value = 0
    }
}
