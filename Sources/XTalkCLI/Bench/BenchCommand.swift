import Foundation
import XTalkBleSdk

/// One row of the benchmark table.
struct BenchRow {
    enum Verdict: String {
        case pass = "PASS"
        case fail = "FAIL"
        /// No target: reported, not counted.
        case info
    }

    let figure: String
    let target: String
    let measured: String
    let verdict: Verdict
    /// Measured in virtual time: the same on every machine and every run, so
    /// CI gates it (`--deterministic`).
    let deterministic: Bool
    /// Numbers for --json.
    let values: [(String, JSONValue)]

    init(
        figure: String, target: String, measured: String, passed: Bool, deterministic: Bool = false,
        values: [(String, JSONValue)]
    ) {
        self.figure = figure
        self.target = target
        self.measured = measured
        verdict = passed ? .pass : .fail
        self.deterministic = deterministic
        self.values = values
    }

    private init(info figure: String, measured: String, values: [(String, JSONValue)]) {
        self.figure = figure
        target = "none"
        self.measured = measured
        verdict = .info
        deterministic = false
        self.values = values
    }

    /// A figure without a target: printed as "info", never counted as passed or failed.
    static func info(figure: String, measured: String, values: [(String, JSONValue)]) -> BenchRow {
        BenchRow(info: figure, measured: measured, values: values)
    }
}

enum BenchCommand {
    static let groups = ["link", "pipeline", "transactions", "auth", "memory", "scale", "bluez", "bridge"]

    static let quick = OptionSpec.flag(
        "quick", help: "Small sizes (seconds instead of minutes); for tests and a first look.")
    static let only = OptionSpec.string(
        "only", value: "ROWS",
        help: "Comma-separated rows to run: link,pipeline,transactions,auth,memory,scale,bluez,bridge.")
    static let deterministic = OptionSpec.flag(
        "deterministic", help: "Only the rows measured in virtual time (the same on every machine): what CI gates.")

    static let command = Command(
        spec: CommandSpec(
            name: "bench",
            summary:
                "Measure the SDK against limits derived from the design and against the naive way; print one table.",
            positionals: [],
            options: [quick, only, deterministic, CommonOptions.json],
            discussion: """
                Every row prints a figure, its target, the measured value and PASS or FAIL; a row without
                a target prints "info" and is not counted. Rows marked "gated" run in virtual time: their
                figures are the same on every machine and every run, and CI fails on a miss
                (--deterministic runs only those). Exits 1 when a row misses its target. Build with
                -c release for real CPU figures:
                swift run -c release xtalk bench
                """),
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        let quick = arguments[Self.quick]
        let deterministic = arguments[Self.deterministic]
        let only: Set<String>
        do throws(UsageError) {
            let rows = try arguments[Self.only] ?? groups.joined(separator: ",")
            only = Set(rows.split(separator: ",", omittingEmptySubsequences: false).map(String.init))
        } catch {
            throw CLIError.usage(error)
        }
        if let unknown = only.subtracting(groups).first {
            throw CLIError(
                .usage,
                "invalid value '\(unknown)' for --only: expected "
                    + "link, pipeline, transactions, auth, memory, scale, bluez or bridge")
        }
        var rows: [BenchRow] = []
        // Ctrl-C ends the run between row groups (exit 130): a group measured
        // while the run was interrupted is not printed.
        @MainActor func add(_ new: [BenchRow]) throws(CLIError) {
            if Task.isCancelled { throw CLIError(.interrupted, "interrupted after \(rows.count) rows") }
            for row in new {
                rows.append(row)
                var fields: [(String, JSONValue)] = [
                    ("figure", .string(row.figure)), ("target", .string(row.target)),
                    ("measured", .string(row.measured)), ("result", .string(row.verdict.rawValue)),
                ]
                if row.verdict != .info { fields.append(("passed", .bool(row.verdict == .pass))) }
                fields.append(("deterministic", .bool(row.deterministic)))
                printer.record("bench", fields + row.values, human: line(row))
            }
        }
        printer.text(header())
        if only.contains("link") { try add(try await LinkRow.rows(quick: quick)) }
        if only.contains("pipeline") && !deterministic { try add(try await pipelineRows(quick: quick)) }
        if only.contains("transactions") && !deterministic { try add(try await TransactionRow.rows(quick: quick)) }
        if only.contains("auth") { try add(try await AuthRow.rows(quick: quick, deterministicOnly: deterministic)) }
        if only.contains("memory") && !deterministic { try add(try await MemoryRow.rows(quick: quick)) }
        if only.contains("scale") && !deterministic { try add(try await ScaleRow.rows(quick: quick)) }
        if only.contains("bluez") && !deterministic { try add(try await BlueZRow.rows(quick: quick)) }
        if only.contains("bridge") {
            try add(try await BridgeRow.rows(quick: quick, deterministicOnly: deterministic))
        }
        let counted = rows.filter { $0.verdict != .info }.count
        let failed = rows.filter { $0.verdict == .fail }.count
        let info = rows.count - counted
        printer.record(
            "bench_summary",
            [
                ("rows", .int(rows.count)), ("counted", .int(counted)), ("failed", .int(failed)),
                ("info", .int(info)),
            ],
            human: "\n\(counted) rows with a target, \(failed == 0 ? "all passed" : "\(failed) failed")"
                + (info > 0 ? "; \(info) info (no target, not counted)" : ""))
        // A missed target fails the command, so scripts and CI can gate on it.
        if failed > 0 { throw CLIError(.failure, "\(failed) of \(counted) rows missed their target") }
    }

    static func header() -> String {
        pad("figure", 78) + "  " + pad("target", 30) + "  " + pad("measured", 44) + "  result  CI\n"
            + String(repeating: "-", count: 170)
    }

    static func line(_ row: BenchRow) -> String {
        pad(row.figure, 78) + "  " + pad(row.target, 30) + "  " + pad(row.measured, 44) + "  "
            + pad(row.verdict.rawValue, 6)
            + (row.deterministic ? "  gated" : "")
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// A row of the client's CPU while it receives 1.4 Mbit/s: a stream that
    /// lost frames fails, saying so instead of a figure.
    static func streamCPURow(
        _ figure: String, _ outcome: StreamCPURow.Outcome, values extra: [(String, JSONValue)] = []
    ) -> BenchRow {
        BenchRow(
            figure: figure, target: "<= 0.1 % of a core",
            measured: outcome.lost
                ?? String(
                    format: "%.2f %% (process; %.2f Mbit/s)", outcome.cpuShare * 100,
                    outcome.achievedBytesPerSecond * 8 / 1e6),
            passed: outcome.lost == nil && outcome.cpuShare <= 0.001,
            values: [
                ("cpu_share", .double(outcome.cpuShare)), ("bytes_per_s", .double(outcome.achievedBytesPerSecond)),
                ("frames", .int(outcome.frames)),
            ] + extra + [("lost_frames", .bool(outcome.lost != nil))])
    }

    static func pipelineRows(quick: Bool) async throws(CLIError) -> [BenchRow] {
        var rows: [BenchRow] = []
        for chunk in [20, 244] {
            let outcome = ReceivePipelineRow.measure(
                bytes: quick ? 200_000 : 4_000_000, chunk: chunk, repetitions: quick ? 3 : 5)
            guard outcome.correct else {
                throw CLIError(.failure, "the receive pipelines disagree with the stream they were given")
            }
            let rate = String(
                format: "%.0f MB/s, %.2fM lines/s", outcome.megabytesPerSecond, outcome.linesPerSecond / 1e6)
            rows.append(
                BenchRow(
                    figure: "2. receive pipeline, \(chunk)-byte chunks: vs naive", target: ">= 10x",
                    measured: String(format: "%.1fx (%@)", outcome.naiveRatio, rate),
                    passed: outcome.naiveRatio >= 10,
                    values: [
                        ("ratio", .double(outcome.naiveRatio)), ("mb_per_s", .double(outcome.megabytesPerSecond)),
                        ("lines_per_s", .double(outcome.linesPerSecond)),
                    ]))
            let stream = try await StreamCPURow.measure(notificationBytes: chunk, seconds: quick ? 1 : 10)
            rows.append(streamCPURow("2. client, \(chunk)-byte notifications: CPU at 1.4 Mbit/s", stream))
        }
        // The same with three live `events` streams (several views reading events).
        let three = try await StreamCPURow.measure(notificationBytes: 244, seconds: quick ? 1 : 10, streams: 3)
        rows.append(
            streamCPURow(
                "2. client, 244-byte notifications, 3 event streams: CPU at 1.4 Mbit/s", three,
                values: [("streams", .int(3))]))
        let floor = await AsyncStreamFloorRow.measure(streams: 3, seconds: quick ? 1 : 10)
        rows.append(
            BenchRow.info(
                figure: "2. for comparison: 3 plain AsyncStreams, same events and rate, no SDK",
                measured: String(format: "%.2f %% (process)", floor * 100),
                values: [("cpu_share", .double(floor)), ("streams", .int(3))]))
        // What taking the events from three `AsyncStream`s costs by itself,
        // however cheap the SDK behind them: a floor for the rows below.
        let element = await AsyncStreamFloorRow.elementCost(elements: quick ? 200_000 : 2_000_000)
        let elementsPerSecond =
            StreamCPURow.bytesPerSecond / AsyncStreamFloorRow.lineBytes * AsyncStreamFloorRow.eventsPerFrame * 3
        let iterationFloor = Measure.seconds(element) * elementsPerSecond
        rows.append(
            BenchRow.info(
                figure: "2. for comparison: 3 readers taking the same events from AsyncStreams, nothing else",
                measured: String(
                    format: "%.2f %% (%.0f ns an element, %.0f a second)", iterationFloor * 100,
                    Measure.seconds(element) * 1e9, elementsPerSecond),
                values: [
                    ("cpu_share", .double(iterationFloor)), ("ns_per_element", .double(Measure.seconds(element) * 1e9)),
                ]))
        // The SDK's own share: no simulator, no real clock, no hop to the main actor.
        for chunk in [20, 244] {
            var shares: [Int: ReceivePathRow.Outcome] = [:]
            for readers in [0, 1, 3] {
                shares[readers] = try await ReceivePathRow.measure(
                    notificationBytes: chunk, frames: quick ? 10_000 : 100_000, readers: readers)
            }
            guard let three = shares[3], let one = shares[1], let none = shares[0] else { continue }
            rows.append(
                BenchRow(
                    figure:
                        "2. receive path alone, \(chunk)-byte notifications, 3 readers: share of a core at 1.4 Mbit/s",
                    target: "<= 0.1 % of a core",
                    measured: String(
                        format: "%.2f %% (1 reader %.2f, none %.2f)", three.cpuShare * 100, one.cpuShare * 100,
                        none.cpuShare * 100),
                    passed: three.cpuShare <= 0.001,
                    values: [
                        ("cpu_share", .double(three.cpuShare)), ("cpu_share_1_reader", .double(one.cpuShare)),
                        ("cpu_share_no_reader", .double(none.cpuShare)),
                        ("us_per_kb", .double(three.microsecondsPerKilobyte)), ("frames", .int(three.frames)),
                        ("events_per_reader", .int(three.eventsPerReader)),
                    ]))
        }
        return rows
    }
}
