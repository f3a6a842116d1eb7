import Foundation
import Testing
@testable import XTalkCLI
import XTalkFakeBlueZ
import XTalkSimulator
import XTalkTestSupport

/// Output lines collected from a command.
@MainActor
final class Lines {
    var all: [String] = []
    var text: String { all.joined(separator: "\n") }
}

/// What one in-process run of `xtalk` produced.
struct CLIResult {
    let code: Int32
    let out: [String]
    let err: [String]
    let elapsed: Duration
    var stdout: String { out.joined(separator: "\n") }
    var stderr: String { err.joined(separator: "\n") }

    /// The JSON lines of stdout, parsed.
    var records: [[String: Any]] {
        out.flatMap { $0.split(separator: "\n") }.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    func records(ofType type: String) -> [[String: Any]] {
        records.filter { $0["type"] as? String == type }
    }
}

/// Runs `xtalk` in-process on a virtual clock.
@MainActor
func xtalk(_ arguments: [String], input: [String] = [], cancelAfter: Duration? = nil) async -> CLIResult {
    let clock = XTalkVirtualClock()
    let out = Lines()
    let err = Lines()
    let (stream, continuation) = AsyncStream<String>.makeStream()
    for line in input { continuation.yield(line) }
    continuation.finish()
    let context = CommandContext(
        virtualClock: clock, input: stream,
        writeOut: { out.all.append($0) }, writeError: { err.all.append($0) })
    let task = Task { @MainActor in await XTalkCLI.run(arguments, context: context) }
    if let cancelAfter {
        await clock.advance(by: cancelAfter)
        task.cancel()
    }
    let code: Int32
    do {
        code = try await clock.run(limit: .seconds(300)) { await task.value }
    } catch {
        Issue.record("xtalk \(arguments.joined(separator: " ")) did not finish: \(error)")
        code = -1
    }
    return CLIResult(code: code, out: out.all, err: err.all, elapsed: clock.elapsed)
}

/// The built `xtalk` binary, run as a child process on the real clock. Every
/// wait on it is bounded in wall-clock seconds: a child that does not answer
/// in time is killed and the test fails naming what it waited for, instead of
/// blocking the run. Its stdout and stderr are read on their own threads, so a
/// full pipe never stalls it, and stderr is kept for `expectCleanStderr()`.
final class XtalkChild: @unchecked Sendable {
    let arguments: [String]
    private let process = Process()
    private let condition = NSCondition()
    private var out = Data()
    private var err = Data()
    private var openStreams = 2
    private var exited = false

    /// The xtalk binary built next to the tests (the test fails without it).
    static func binary(sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [
            directory.appendingPathComponent("xtalk"),
            directory.deletingLastPathComponent().appendingPathComponent("xtalk"),
        ]
        return try #require(
            candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) },
            "the xtalk binary is built next to the tests", sourceLocation: sourceLocation)
    }

    /// Starts `xtalk arguments`; fails the test when the binary is not built next to the tests.
    init(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        self.arguments = arguments
        process.executableURL = try Self.binary(sourceLocation: sourceLocation)
        process.arguments = arguments
        let outPipe = Pipe()
        let errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        process.standardInput = FileHandle.nullDevice
        // libdispatch reports a client's misuse through syslog(3) unless told
        // otherwise: on stderr, expectCleanStderr() sees it. (A syslog that
        // does not keep up blocks the report, and with it the child's exit.)
        process.environment = ProcessInfo.processInfo.environment.merging(["LIBDISPATCH_LOG": "stderr"]) { $1 }
        // Weak: the process keeps its handler, so a strong capture would keep this object (and its output) forever.
        process.terminationHandler = { [weak self, condition] _ in
            condition.lock()
            defer { condition.unlock() }
            self?.exited = true
            condition.broadcast()
        }
        try process.run()
        read(outPipe.fileHandleForReading, toStderr: false)
        read(errPipe.fileHandleForReading, toStderr: true)
    }

    private func read(_ handle: FileHandle, toStderr: Bool) {
        Thread.detachNewThread { [self] in
            while true {
                let data = handle.availableData
                condition.lock()
                if data.isEmpty { openStreams -= 1 } else if toStderr { err.append(data) } else { out.append(data) }
                condition.broadcast()
                condition.unlock()
                if data.isEmpty { return }
            }
        }
    }

    var stdout: String { condition.withLock { String(decoding: out, as: UTF8.self) } }
    var stderr: String { condition.withLock { String(decoding: err, as: UTF8.self) } }
    var terminationStatus: Int32 { process.terminationStatus }
    var terminationReason: Process.TerminationReason { process.terminationReason }
    var name: String { (["xtalk"] + arguments).joined(separator: " ") }

    /// Waits until `done(stdout)` holds. After `seconds`, or when the child
    /// ended without it, records a failure naming `what`, kills the child and
    /// returns false. The wait blocks a thread of its own (see `onOwnThread`).
    @discardableResult
    func waitForOutput(
        _ what: String, within seconds: Double, sourceLocation: SourceLocation = #_sourceLocation,
        until done: @escaping @Sendable (String) -> Bool
    ) async -> Bool {
        let failure = await ChildProcess.onOwnThread { [self] () -> String? in
            let deadline = Date(timeIntervalSinceNow: seconds)
            condition.lock()
            while !done(String(decoding: out, as: UTF8.self)) {
                if openStreams == 0 && exited || !condition.wait(until: deadline) {
                    condition.unlock()
                    return killed("\(name): \(what) did not appear within \(seconds) s")
                }
            }
            condition.unlock()
            return nil
        }
        return record(failure, sourceLocation)
    }

    /// Waits for the child to exit and its output to end. After `seconds`,
    /// records a failure, kills it and returns false. The wait blocks a thread of its own.
    @discardableResult
    func waitForExit(within seconds: Double, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        let failure = await ChildProcess.onOwnThread { [self] () -> String? in
            let deadline = Date(timeIntervalSinceNow: seconds)
            condition.lock()
            while !(exited && openStreams == 0) {
                if !condition.wait(until: deadline) {
                    condition.unlock()
                    return killed("\(name) did not exit within \(seconds) s")
                }
            }
            condition.unlock()
            process.waitUntilExit()
            return nil
        }
        return record(failure, sourceLocation)
    }

    /// Records `failure`, if any, in the calling test; true when there is none.
    private func record(_ failure: String?, _ sourceLocation: SourceLocation) -> Bool {
        guard let failure else { return true }
        Issue.record("\(failure)", sourceLocation: sourceLocation)
        return false
    }

    func interrupt() { process.interrupt() }

    /// Sends SIGTERM, as a service manager, `timeout` or `kill` does.
    func terminate() { process.terminate() }

    /// A continuation resumed twice or never is reported on stderr by the
    /// Swift runtime, and a misused dispatch object by libdispatch (see
    /// init), and the process may still exit 0: a failure here.
    func expectCleanStderr(sourceLocation: SourceLocation = #_sourceLocation) {
        let text = stderr
        #expect(
            text.range(
                of: #"continuation misuse|leaked (its )?continuation|libdispatch"#,
                options: [.regularExpression, .caseInsensitive])
                == nil,
            "\(name) reported a runtime misuse on stderr:\n\(text)", sourceLocation: sourceLocation)
    }

    /// `message` with the child's output and, when it still runs, its
    /// threads' stacks; the child is then killed (SIGKILL) and waited for
    /// (bounded), so that nothing outlives the test. Blocks.
    private func killed(_ message: String) -> String {
        var report = "\(message)\nstdout so far:\n\(stdout)\nstderr so far:\n\(stderr)"
        if process.isRunning, let stacks = Self.stacks(of: process.processIdentifier) {
            report += "\nits threads' stacks (gdb):\n\(stacks)"
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        // Bounded too: Foundation may learn of the end late (a descendant
        // holding what it watches), and a failed test must not stall the run.
        let deadline = Date(timeIntervalSinceNow: 30)
        condition.lock()
        while !exited && condition.wait(until: deadline) {}
        let ended = exited
        condition.unlock()
        if !ended { report += "\n(killed, but not seen to end within 30 s)" }
        return report
    }

    /// Every thread's stack of the hung process `pid`, when gdb is installed:
    /// what a hang seen once in CI needs to be understood. Bounded: gdb gets 60 s.
    private static func stacks(of pid: Int32) -> String? {
        let gdb = "/usr/bin/gdb"
        guard FileManager.default.isExecutableFile(atPath: gdb) else { return nil }
        let text: String
        do {
            text = try runTool([gdb, "-q", "-batch", "-p", "\(pid)", "-ex", "thread apply all bt 40"], seconds: 60)
                .output
        } catch {
            return "gdb failed: \(error)"
        }
        // The stacks only: gdb's notes on symbols and threads are noise here.
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("Thread ") || $0.hasPrefix("#") }
        return lines.isEmpty ? "gdb printed no stack" : lines.joined(separator: "\n")
    }
}
