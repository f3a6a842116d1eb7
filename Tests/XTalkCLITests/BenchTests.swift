import Foundation
import Testing
@testable import XTalkCLI

/// Runs `xtalk` in-process on the real clock (the benchmark measures real CPU).
@MainActor
private func xtalkRealTime(_ arguments: [String]) async -> CLIResult {
    let out = Lines()
    let err = Lines()
    let (stream, continuation) = AsyncStream<String>.makeStream()
    continuation.finish()
    let context = CommandContext(virtualClock: nil, input: stream,
                                 writeOut: { out.all.append($0) }, writeError: { err.all.append($0) })
    let start = ContinuousClock.now
    let code = await XTalkCLI.run(arguments, context: context)
    return CLIResult(code: code, out: out.all, err: err.all, elapsed: ContinuousClock.now - start)
}

/// Every row the benchmark promises, by its figure's leading number: six
/// MTU/packet configurations × two workloads, two chunk sizes × two figures,
/// two transaction figures, four authentication figures, two memory figures
/// and the scale figure.
private let expectedRowsPerFigure: [String: Int] = ["1": 12, "2": 4, "3": 2, "4": 4, "5": 2, "6": 1]

@Suite("xtalk bench", .timeLimit(.minutes(10)))
@MainActor
struct BenchTests {
    // No timing assertions: figures depend on the machine. What is checked is
    // that every row is produced, complete, and its numbers are sane.
    @Test("--quick produces every row with figure, target, measured value and a verdict")
    func quickProducesEveryRow() async throws {
        let result = await xtalkRealTime(["bench", "--quick", "--json"])
        #expect(result.code == 0 || result.code == 1, "stderr: \(result.stderr)")
        if result.code == 0 { #expect(result.stderr.isEmpty) }
        let rows = result.records(ofType: "bench")
        var perFigure: [String: Int] = [:]
        for row in rows {
            let figure = try #require(row["figure"] as? String)
            perFigure[String(figure.prefix { $0 != "." }), default: 0] += 1
            #expect((row["target"] as? String)?.isEmpty == false, "\(figure)")
            #expect((row["measured"] as? String)?.isEmpty == false, "\(figure)")
            #expect(row["passed"] is Bool, "\(figure)")
        }
        #expect(perFigure == expectedRowsPerFigure)
        let summary = try #require(result.records(ofType: "bench_summary").first)
        #expect(summary["rows"] as? Int == rows.count)
        let failed = rows.filter { $0["passed"] as? Bool == false }.count
        #expect(summary["failed"] as? Int == failed)
        // A failed row makes the command fail.
        #expect(result.code == (failed == 0 ? 0 : 1))
        // Figures that do not depend on timing hold on any machine.
        for row in rows where (row["figure"] as? String)?.hasPrefix("1.") == true {
            let ratio = try #require(row["ratio"] as? Double)
            #expect(ratio > 0.5 && ratio <= 1.0001, "link utilisation \(ratio)")
        }
        let trips = rows.first { $0["figure"] as? String == "4. authentication, happy path: round trips" }
        #expect(trips?["round_trips"] as? Int == 3)
    }

    @Test("bench --help names its options and the release command")
    func help() async {
        let result = await xtalkRealTime(["bench", "--help"])
        #expect(result.code == 0)
        for text in ["USAGE: xtalk bench", "--quick", "--only ROWS", "--json", "swift run -c release xtalk bench"] {
            #expect(result.stdout.contains(text), "\(text)")
        }
    }

    @Test("--only runs the named rows; an unknown row is a usage error")
    func onlySelectsRows() async {
        let result = await xtalkRealTime(["bench", "--quick", "--only", "pipeline", "--json"])
        let figures = result.records(ofType: "bench").compactMap { $0["figure"] as? String }
        #expect(figures.count == 4 && figures.allSatisfy { $0.hasPrefix("2.") })
        let wrong = await xtalkRealTime(["bench", "--only", "pipeline,speed"])
        #expect(wrong.code == 2)
        #expect(wrong.stderr.contains("invalid value 'speed' for --only"))
    }
}

@Suite("xtalk chaos", .timeLimit(.minutes(10)))
@MainActor
struct ChaosCommandTests {
    @Test("--scenarios N runs N scenarios and summarises; --seed replays one with its trace")
    func runsAndReplays() async {
        let result = await xtalkRealTime(["chaos", "--scenarios", "3", "--json"])
        #expect(result.code == 0, "\(result.stderr)")
        let summary = result.records(ofType: "chaos_summary").first
        #expect(summary?["scenarios"] as? Int == 3)
        #expect(summary?["failed"] as? Int == 0)
        let replay = await xtalkRealTime(["chaos", "--seed", "15926614615", "--verbose"])
        #expect(replay.code == 0)
        #expect(replay.stdout.contains("chaos scenario seed 15926614615"))
        #expect(replay.stdout.contains("device:"), "the trace is printed")
        let bad = await xtalkRealTime(["chaos", "--seed", "-1"])
        #expect(bad.code == 2)
        #expect(bad.stderr.contains("invalid value '-1' for --seed"))
    }
}
