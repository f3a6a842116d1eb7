import Dispatch
import Foundation

/// Standard input as lines, read with read(2) rather than stdio.
///
/// `readLine()` waits inside `getline(stdin)` holding stdin's stdio lock, and
/// `exit()` in glibc 2.39 and later takes every stream's lock before it
/// flushes: a tool that exits while its reader waits for a line (`xtalk
/// shell`'s `:quit`, Ctrl-C in `shell` or `bridge`) would never end. Reading
/// the descriptor directly holds no stdio lock.
package enum StandardInputLines {
    /// Reads `descriptor` to its end and offers each line (see `LineSplitter`);
    /// stops early when `offer` returns false. Blocks its thread: run it on one of its own.
    package static func readLines(from descriptor: Int32, offer: (String) -> Bool) {
        var splitter = LineSplitter()
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

/// Splits bytes into lines as `readLine()` does: without their "\n" or
/// "\r\n", invalid UTF-8 repaired; a last line without a newline counts.
package struct LineSplitter {
    private var pending: [UInt8] = []
    /// How much of `pending` is known to hold no newline: a long line is
    /// searched once, not again with every read that extends it.
    private var searched = 0
    /// Bytes searched for a newline so far (for tests: each byte once).
    package private(set) var bytesSearched = 0

    package init() {}

    /// The lines that `bytes` completes, in order.
    package mutating func feed(_ bytes: ArraySlice<UInt8>) -> [String] {
        pending.append(contentsOf: bytes)
        var lines: [String] = []
        var start = 0
        while let newline = pending[max(start, searched)...].firstIndex(of: 0x0A) {
            bytesSearched += newline + 1 - max(start, searched)
            lines.append(Self.line(pending[start..<newline]))
            start = newline + 1
        }
        bytesSearched += pending.count - max(start, searched)
        pending.removeFirst(start)
        searched = pending.count
        return lines
    }

    /// The last line, when the input ended without a newline.
    package mutating func end() -> String? {
        defer {
            pending = []
            searched = 0
        }
        return pending.isEmpty ? nil : Self.line(pending[...])
    }

    private static func line(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.last == 0x0D ? bytes.dropLast() : bytes, as: UTF8.self)
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
