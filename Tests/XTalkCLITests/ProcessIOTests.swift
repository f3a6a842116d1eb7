import Dispatch
import Foundation
import Testing
import XTalkSimulator
import XTalkBleBridge
import XTalkTestSupport
@testable import XTalkCLI

@Suite("The tool's standard input and Ctrl-C")
struct ProcessIOTests {
    static let input: [UInt8] = Array("AT+VER?\nplain\r\n\n\r\nlast".utf8) + [0xFF, 0x0A] + Array("ünï\n".utf8)
    static let lines = ["AT+VER?", "plain", "", "", "last\u{FFFD}", "ünï"]

    @Test("lines as readLine() gives them, whatever the chunking", arguments: [1, 2, 3, 7, 20, 244, 4_096])
    func splitsLines(chunk: Int) {
        var splitter = LineSplitter()
        var lines: [String] = []
        for start in stride(from: 0, to: Self.input.count, by: chunk) {
            lines += splitter.feed(Self.input[start..<min(start + chunk, Self.input.count)])
        }
        #expect(splitter.end() == nil)
        #expect(lines == Self.lines)
    }

    @Test("a last line without its newline is a line; no input, no line")
    func lastLine() {
        var splitter = LineSplitter()
        #expect(splitter.feed(ArraySlice("one\ntw".utf8)) == ["one"])
        #expect(splitter.feed(ArraySlice("o\r".utf8)) == [])
        #expect(splitter.end() == "two")
        #expect(splitter.end() == nil)
        var empty = LineSplitter()
        #expect(empty.feed([]) == [])
        #expect(empty.end() == nil)
    }

    /// Each read used to search the whole of a line still waiting for its
    /// newline again: 8 MB in 4 KB reads took minutes (quadratic).
    @Test("a long line arriving in many reads is searched once: each byte once, whatever the chunking")
    func longLineIsSearchedOnce() {
        var splitter = LineSplitter()
        let piece = ArraySlice([UInt8](repeating: UInt8(ascii: "a"), count: 4_096))
        for _ in 0..<2_048 { #expect(splitter.feed(piece).isEmpty) }  // 8 MiB, no newline yet
        let tail = ArraySlice("b\nnext\nrest".utf8)
        #expect(splitter.feed(tail).map(\.utf8.count) == [8 * 1_048_576 + 1, 4])
        #expect(splitter.bytesSearched == 8 * 1_048_576 + tail.count)
        #expect(splitter.end() == "rest")
    }

    /// A line past the limit keeps only its head, however it arrives (a byte
    /// at a time, MTU-sized, 4 KB reads): memory stays bounded, and the lines
    /// around it are whole.
    @Test("past the limit a line keeps its head only, whatever the chunking", arguments: [1, 20, 244, 4_096, 65_536])
    func overlongLineKeepsItsHead(chunk: Int) {
        let limit = 1_024
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: 300_000)
        let input =
            Array("before\r\n".utf8) + long + Array("\r\nafter\n".utf8)
            + Array(repeating: UInt8(ascii: "y"), count: limit) + Array("\nend".utf8)
        var splitter = LineSplitter(maximumLength: limit)
        var lines: [String] = []
        var most = 0
        var offset = 0
        while offset < input.count {
            lines += splitter.feed(input[offset..<min(offset + chunk, input.count)])
            most = max(most, splitter.bufferedByteCount)
            offset += chunk
        }
        if let last = splitter.end() { lines.append(last) }
        #expect(most <= limit + 1, "held \(most) bytes of one line")
        #expect(lines.map(\.utf8.count) == [6, limit + 1, 5, limit, 3])
        #expect(lines[0] == "before" && lines[2] == "after" && lines[4] == "end")
        #expect(splitter.bytesSearched == input.count, "each byte searched once")
    }

    /// At the limit's edge: a line of exactly the limit with CR LF is whole
    /// (its CR is its end); a longer line whose kept head ends in a CR keeps
    /// that CR, so the reader still sees it is too long.
    @Test("at the limit: CR LF after exactly the limit is a whole line; a CR inside a cut head stays")
    func limitEdges() {
        let limit = 8
        var splitter = LineSplitter(maximumLength: limit)
        let exact = Array("12345678\r\n".utf8)
        #expect(splitter.feed(exact[...]) == ["12345678"])
        let crAtTheCut = Array("12345678\rmore\n".utf8)
        let cut = splitter.feed(crAtTheCut[...])
        #expect(cut.map(\.utf8.count) == [limit + 1], "\(cut)")
        #expect(cut.first?.hasSuffix("\r") == true)
        #expect(splitter.feed(ArraySlice("1234\r".utf8)).isEmpty)
        #expect(splitter.end() == "1234", "a last line without newline loses its CR too")
    }

    /// What `xtalk bridge --stdio` does with a request far over 1 MiB: its
    /// reader keeps the head only, and the router answers it as too long,
    /// with the id the head gives (hosts match replies by id).
    @Test("a 4 MiB request read from a pipe: the head only, answered with its id")
    @MainActor
    func overlongRequestFromAPipe() throws {
        let request =
            "{\"id\":77,\"method\":\"send\",\"params\":{\"uuid\":\"x\",\"data\":\""
            + String(repeating: "ab", count: 2 * 1_048_576) + "\"}}"
        let lines = Self.read(request + "\n{\"id\":78,\"method\":\"version\"}\n")
        #expect(lines.map(\.utf8.count) == [StandardInputLines.maximumLineLength + 1, 28])
        let router = BridgeRouter(bridge: BleBridge(backend: XTalkSimulatedEnvironment().backend))
        var replies: [String] = []
        for line in lines { router.handle(Array(line.utf8)) { replies.append($0) } }
        #expect(replies.count == 2)
        #expect(replies.first?.hasPrefix("{\"id\":77,\"error\":{\"code\":900,") == true, "\(replies.first ?? "")")
        #expect(replies.first?.contains("more than 1 MiB") == true)
        #expect(replies.last == "{\"id\":78,\"result\":\"1.0.0\"}")
    }

    /// Started with standard input closed (`xtalk bridge --stdio <&-`): no
    /// input, so no request and no reply. Descriptor 0 used to be whatever
    /// the runtime opened first (libdispatch's eventfd), read as a request.
    @Test("bridge --stdio with standard input closed answers nothing and exits 0")
    func closedStandardInput() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "exec timeout 20 \"$0\" bridge --stdio <&-", try XtalkChild.binary().path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let written = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(String(decoding: written, as: UTF8.self) == "")
    }

    /// Output that cannot be written (here /dev/full: "No space left on
    /// device") is said once on standard error and ends the command once;
    /// FileHandle.write used to trap, with a backtrace.
    @Test("a failed write to standard output is reported once and ends the command, never a trap")
    func failedOutput() throws {
        let full = open("/dev/full", O_WRONLY)
        try #require(full >= 0)
        defer { close(full) }
        let errors = Pipe()
        let streams = StandardStreams(output: full, error: errors.fileHandleForWriting.fileDescriptor)
        let ended = Counter()
        streams.onFailure = { ended.add() }
        #expect(streams.failure == nil)
        streams.writeOut("first line")
        streams.writeOut("second line")
        streams.writeError("a later diagnostic still goes out")
        #expect(streams.failure == "cannot write to standard output: No space left on device")
        #expect(!streams.brokenPipe)
        #expect(ended.value == 1, "the command is ended once")
        try errors.fileHandleForWriting.close()
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(
            said == "xtalk: cannot write to standard output: No space left on device\n"
                + "a later diagnostic still goes out\n")
        // Diagnostics that cannot be written are dropped; the command and its output go on.
        let output = Pipe()
        let quiet = StandardStreams(output: output.fileHandleForWriting.fileDescriptor, error: full)
        let stopped = Counter()
        quiet.onFailure = { stopped.add() }
        quiet.writeError("lost")
        quiet.writeOut("still written")
        #expect(quiet.failure == nil && stopped.value == 0)
        try output.fileHandleForWriting.close()
        #expect(output.fileHandleForReading.readDataToEndOfFile() == Data("still written\n".utf8))
        // Written whole when the descriptor takes it.
        let pipe = Pipe()
        #expect(StandardStreams.writeAll("ünï\n", to: pipe.fileHandleForWriting.fileDescriptor) == nil)
        try pipe.fileHandleForWriting.close()
        #expect(pipe.fileHandleForReading.readDataToEndOfFile() == Data("ünï\n".utf8))
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func add() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }

    @Test("from a descriptor: every line, a long one across reads, and an early stop")
    func readsDescriptor() throws {
        let long = String(repeating: "0123456789ABCDEF", count: 1_000)  // 16,000 bytes: several reads
        let text = "first\n\(long)\r\nthird"
        #expect(Self.read(text) == ["first", long, "third"])
        #expect(Self.read(text, stopAfter: 1) == ["first"])
        #expect(Self.read("") == [])
    }

    @Test("the input queue: bounded in lines and in bytes, a line over the bound taken alone, then the end")
    func inputQueueBounds() async {
        let queue = InputLineQueue(maximumLines: 3, maximumBytes: 10)
        #expect(queue.offer("12345") == .taken)
        #expect(queue.offer("123456") == .full, "5 + 6 bytes: over the byte bound")
        #expect(queue.offer("1234") == .taken)
        #expect(queue.offer("") == .taken)
        #expect(queue.offer("") == .full, "three lines: the line bound")
        #expect(queue.waiting == (3, 9))
        #expect(await queue.next() == "12345")
        #expect(queue.offer("1234567") == .full, "4 + 7 bytes")
        #expect(await queue.next() == "1234")
        #expect(queue.offer("1234567") == .taken)
        #expect(await queue.next() == "")
        #expect(await queue.next() == "1234567")
        #expect(queue.waiting == (0, 0))
        // A line longer than the whole bound: taken when nothing waits, and alone.
        let long = String(repeating: "x", count: 50)
        #expect(queue.offer(long) == .taken)
        #expect(queue.offer("a") == .full)
        #expect(await queue.next() == long)
        #expect(queue.offer("ü") == .taken)
        #expect(queue.waiting == (1, 2), "bytes are UTF-8 bytes")
        // The end: what waits is still read, nothing more is taken.
        queue.finish()
        #expect(queue.offer("after") == .finished)
        #expect(await queue.next() == "ü")
        #expect(await queue.next() == nil)
        #expect(await queue.next() == nil)
    }

    /// Many lines through small bounds from a reading thread: every line, in
    /// order, and what waits never over the bounds (checked after each put).
    @Test("a full input queue holds the reading thread: every line arrives, in order, within the bounds")
    func inputQueueHoldsTheReader() async {
        let queue = InputLineQueue(maximumLines: 4, maximumBytes: 64)
        let lines = (0..<2_000).map { String(repeating: "\($0 % 10)", count: $0 % 40) + "#\($0)" }
        final class Overruns: @unchecked Sendable {
            let lock = NSLock()
            var count = 0
            var refused = 0
        }
        let overruns = Overruns()
        Thread.detachNewThread {
            for line in lines {
                let taken = queue.put(line)
                let waiting = queue.waiting
                overruns.lock.withLock {
                    if !taken { overruns.refused += 1 }
                    if waiting.lines > 4 || waiting.lines > 1 && waiting.bytes > 64 { overruns.count += 1 }
                }
            }
            queue.finish()
        }
        var received: [String] = []
        for await line in queue.stream { received.append(line) }
        #expect(received == lines)
        #expect(overruns.lock.withLock { (overruns.count, overruns.refused) } == (0, 0))
    }

    /// The command ends while the reader waits for room: the reader stops;
    /// what waited is still read (as a finished `AsyncStream`'s buffer).
    @Test("the input ends while the reader waits for room: put returns false, what waited is still read")
    func inputQueueEndsWhileFull() async {
        let queue = InputLineQueue(maximumLines: 1, maximumBytes: 100)
        final class Results: @unchecked Sendable {
            let lock = NSLock()
            var values: [Bool] = []
        }
        let results = Results()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            for line in ["a", "b", "c"] {
                let taken = queue.put(line)
                results.lock.withLock { results.values.append(taken) }
            }
            done.signal()
        }
        #expect(await queue.next() == "a")
        // "b" takes the only place; "c" can only wait for it, or find the end.
        #expect(await eventually { queue.waiting.lines == 1 })
        queue.finish()
        #expect(await eventually { done.wait(timeout: .now()) == .success })
        #expect(results.lock.withLock { results.values } == [true, true, false])
        #expect(await queue.next() == "b")
        #expect(await queue.next() == nil)
    }

    @Test("two readers waiting at once: each line goes to one of them, and the end reaches both")
    func inputQueueTwoReaders() async {
        let queue = InputLineQueue()
        let first = Task { await queue.next() }
        let second = Task { await queue.next() }
        #expect(queue.offer("a") == .taken)
        #expect(queue.offer("b") == .taken)
        let lines = await [first.value, second.value]
        #expect(Set(lines.compactMap { $0 }) == ["a", "b"])
        let third = Task { await queue.next() }
        let fourth = Task { await queue.next() }
        queue.finish()
        #expect(await [third.value, fourth.value] == [nil, nil])
    }

    @Test("a reader cancelled while it waits gets nil at once, and the queue takes no more lines")
    func inputQueueCancelledReader() async {
        let queue = InputLineQueue()
        let reader = Task { await queue.next() }
        reader.cancel()
        #expect(await reader.value == nil)
        #expect(queue.offer("late") == .finished)
        // The same through the stream a command iterates.
        let other = InputLineQueue()
        let iterating = Task {
            var count = 0
            for await _ in other.stream { count += 1 }
            return count
        }
        #expect(other.offer("one") == .taken)
        iterating.cancel()
        #expect(await iterating.value <= 1)
        #expect(other.offer("late") == .finished)
    }

    /// Writes `text` into a pipe (from another thread, as a terminal would) and reads its lines.
    private static func read(_ text: String, stopAfter limit: Int = .max) -> [String] {
        let pipe = Pipe()
        let writer = pipe.fileHandleForWriting
        Thread.detachNewThread {
            writer.write(Data(text.utf8))
            try? writer.close()
        }
        var lines: [String] = []
        StandardInputLines.readLines(from: pipe.fileHandleForReading.fileDescriptor) { line in
            lines.append(line)
            return lines.count < limit
        }
        return lines
    }

    /// A signal is sent to this process and taken by the handler's own queue
    /// while the main thread is blocked: on the main queue (as before), it
    /// would wait for the main thread, here for ever.
    @Test("Ctrl-C reaches the tool while its main thread is blocked; a second one is told apart")
    @MainActor
    func interruptWhileMainThreadIsBlocked() throws {
        let firsts = DispatchSemaphore(value: 0)
        let agains = DispatchSemaphore(value: 0)
        // SIGUSR2 stands in for SIGINT, which would reach the test runner's own handling.
        let registered = DispatchSemaphore(value: 0)
        let handler = InterruptHandler(
            signal: SIGUSR2, first: { firsts.signal() }, again: { agains.signal() },
            registered: { registered.signal() })
        try #require(registered.wait(timeout: .now() + 10) == .success, "the handler is in place")
        kill(getpid(), SIGUSR2)
        // The main thread blocks here, as it does in a write to a stalled pipe.
        #expect(firsts.wait(timeout: .now() + 10) == .success, "the first signal was handled")
        kill(getpid(), SIGUSR2)
        #expect(agains.wait(timeout: .now() + 10) == .success, "the second signal was handled as a second")
        #expect(firsts.wait(timeout: .now()) == .timedOut, "first ran once")
        withExtendedLifetime(handler) {}
    }
}
