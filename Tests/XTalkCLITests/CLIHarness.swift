import Foundation
import Testing
@testable import XTalkCLI
import XTalkSimulator

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
    let context = CommandContext(virtualClock: clock, input: stream,
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
