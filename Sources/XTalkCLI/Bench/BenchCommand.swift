import Foundation
import XTalkBleSdk

/// One row of the benchmark table.
struct BenchRow {
    let figure: String
    let target: String
    let measured: String
    let passed: Bool
    /// Numbers for --json.
    let values: [(String, JSONValue)]
}

enum BenchCommand {
    static let command = Command(
        spec: CommandSpec(
            name: "bench",
            summary: "Measure the SDK against the link's physical limit and against the naive way; print one table.",
            positionals: [],
            options: [
                OptionSpec("quick", help: "Small sizes (seconds instead of minutes); for tests and a first look."),
                OptionSpec("only", value: "ROWS", help: "Comma-separated rows to run: link,pipeline,transactions,auth,memory,scale."),
                CommonOptions.json,
            ],
            discussion: """
                Every row prints a figure, its target, the measured value and PASS/FAIL. Ratios are measured
                in one run, so noise on a shared machine cancels out. Exits 1 when a row misses its target.
                Build with -c release for real figures:
                swift run -c release xtalk bench
                """),
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        let quick = arguments.has("quick")
        let only = Set((arguments.value("only") ?? "link,pipeline,transactions,auth,memory,scale").split(separator: ",").map(String.init))
        let known: Set<String> = ["link", "pipeline", "transactions", "auth", "memory", "scale"]
        if let unknown = only.subtracting(known).first {
            throw CLIError(.usage, "invalid value '\(unknown)' for --only: expected link, pipeline, transactions, auth, memory or scale")
        }
        var rows: [BenchRow] = []
        @MainActor func add(_ new: [BenchRow]) {
            for row in new {
                rows.append(row)
                printer.record("bench", [("figure", .string(row.figure)), ("target", .string(row.target)),
                                         ("measured", .string(row.measured)), ("passed", .bool(row.passed))] + row.values,
                               human: line(row))
            }
        }
        printer.text(header())
        if only.contains("link") { add(try await LinkRow.rows(quick: quick)) }
        if only.contains("pipeline") { add(pipelineRows(quick: quick)) }
        if only.contains("transactions") { add(try await TransactionRow.rows(quick: quick)) }
        if only.contains("auth") { add(try await AuthRow.rows(quick: quick)) }
        if only.contains("memory") { add(try await MemoryRow.rows(quick: quick)) }
        if only.contains("scale") { add(try await ScaleRow.rows(quick: quick)) }
        let failed = rows.filter { !$0.passed }.count
        printer.record("bench_summary", [("rows", .int(rows.count)), ("failed", .int(failed))],
                       human: "\n\(rows.count) rows, \(failed == 0 ? "all passed" : "\(failed) failed")")
        // A missed target fails the command, so scripts can gate on it.
        if failed > 0 { throw CLIError(.failure, "\(failed) of \(rows.count) rows missed their target") }
    }

    static func header() -> String {
        pad("figure", 56) + "  " + pad("target", 24) + "  " + pad("measured", 40) + "  result\n" + String(repeating: "-", count: 134)
    }

    static func line(_ row: BenchRow) -> String {
        pad(row.figure, 56) + "  " + pad(row.target, 24) + "  " + pad(row.measured, 40) + "  " + (row.passed ? "PASS" : "FAIL")
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    static func pipelineRows(quick: Bool) -> [BenchRow] {
        [20, 244].flatMap { chunk -> [BenchRow] in
            let outcome = ReceivePipelineRow.measure(bytes: quick ? 200_000 : 4_000_000, chunk: chunk, repetitions: quick ? 3 : 5)
            let rate = String(format: "%.0f MB/s, %.2fM lines/s", outcome.megabytesPerSecond, outcome.linesPerSecond / 1e6)
            return [
                BenchRow(figure: "2. receive pipeline, \(chunk)-byte chunks: vs naive", target: ">= 10x",
                         measured: String(format: "%.1fx (%@)", outcome.naiveRatio, rate),
                         passed: outcome.naiveRatio >= 10 && outcome.correct,
                         values: [("ratio", .double(outcome.naiveRatio)), ("mb_per_s", .double(outcome.megabytesPerSecond)),
                                  ("lines_per_s", .double(outcome.linesPerSecond))]),
                BenchRow(figure: "2. receive pipeline, \(chunk)-byte chunks: CPU at 1.4 Mbit/s", target: "<= 0.1 % of a core",
                         measured: String(format: "%.3f %%", outcome.cpuShareAtPhyLimit * 100),
                         passed: outcome.cpuShareAtPhyLimit <= 0.001 && outcome.correct,
                         values: [("cpu_share", .double(outcome.cpuShareAtPhyLimit))]),
            ]
        }
    }
}
