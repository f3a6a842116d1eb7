import Foundation
import XTalkChaos

/// `xtalk chaos`: the seeded chaos suite, for long local runs and for
/// replaying one seed with its full trace.
enum ChaosCommand {
    static let scenarios = OptionSpec.int(
        "scenarios", value: "N", in: 1...10_000_000,
        help: "How many scenarios (default 2000, as CI runs).")
    static let first = OptionSpec.int(
        "first", value: "K", in: 0...Int(Int32.max),
        help: "Start at scenario K (default 0): scenario K has the same seed as in the tests.")
    static let seed = OptionSpec.parsed(
        "seed", value: "SEED", help: "Replay the scenario with this seed (as printed by a failure).",
        expected: "an unsigned integer"
    ) { UInt64($0) }
    static let verbose = OptionSpec.flag("verbose", help: "Print each scenario's trace, with the client's AT traffic.")
    static let selfTest = OptionSpec.flag(
        "self-test", help: "Switch each known bug on in the SDK in turn; each must be flagged within N scenarios.")

    static let command = Command(
        spec: CommandSpec(
            name: "chaos",
            summary: "Run seeded chaos scenarios against the simulator in virtual time and check every invariant.",
            positionals: [],
            options: [scenarios, first, seed, verbose, selfTest, CommonOptions.json],
            discussion: """
                Each scenario draws a device (encoding, echo, challenge, delays, late replies, silence, MTU,
                notification splits, flow control) and a random mix of concurrent AT commands, RF sends,
                exclusive sessions, no-wait calls, authentications, radio-frame floods, line noise, encoding
                switches, disconnects at random byte offsets, Bluetooth power cycles, cancellations and
                teardown; one device in ten is an impostor. Every call, error, authentication result, radio
                frame and line is checked against the simulated device's record of what it read and wrote and
                when it reached the host: a call gets its own command's answer, or a late reply the record
                shows came after that command's drain, or a typed error the record explains. Prints what was
                checked (strictly, excused by reason, late replies, frames). --self-test switches each known
                bug on in the SDK in turn and fails unless every one is flagged. Exits 1 when a scenario fails.
                """),
        endsOnInterrupt: false
    ) { arguments, context, printer throws(CLIError) in
        let count: Int
        let first: Int
        let seed: UInt64?
        do throws(UsageError) {
            count = try arguments[Self.scenarios] ?? 2_000
            first = try arguments[Self.first] ?? 0
            seed = try arguments[Self.seed]
        } catch {
            throw CLIError.usage(error)
        }
        let verbose = arguments[Self.verbose]
        if arguments[Self.selfTest] {
            var missed: [String] = []
            for (name, faults) in ChaosFaults.each {
                var found: (index: Int, violation: String)?
                for index in first..<(first + count) where found == nil {
                    if Task.isCancelled { throw CLIError(.interrupted, "interrupted") }
                    let report = await ChaosScenario(seed: ChaosSeeds.seed(ofScenario: index), faults: faults).run()
                    // A scenario cut by Ctrl-C has no verdict.
                    if Task.isCancelled { throw CLIError(.interrupted, "interrupted") }
                    if let violation = report.violations.first { found = (index, violation) }
                }
                if found == nil { missed.append(name) }
                printer.record(
                    "self_test",
                    [
                        ("fault", .string(name)), ("flagged", .bool(found != nil)),
                        ("scenario", found.map { .int($0.index) } ?? .null),
                    ],
                    human: found.map { "\(name): flagged by scenario \($0.index): \($0.violation.prefix(150))" }
                        ?? "\(name): NOT flagged in \(count) scenarios")
            }
            if !missed.isEmpty { throw CLIError(.failure, "the checker missed \(missed.joined(separator: ", "))") }
            return
        }
        let seeds: [UInt64] = seed.map { [$0] } ?? (first..<(first + count)).map(ChaosSeeds.seed(ofScenario:))
        var failed = 0
        var tally = ChaosTally()
        let start = ContinuousClock.now
        var ran = 0
        for seed in seeds {
            if Task.isCancelled { break }
            let report = await ChaosScenario(seed: seed, traceTraffic: verbose).run()
            // A scenario cut by Ctrl-C has no verdict: what its checker saw is the interruption.
            if Task.isCancelled { break }
            ran += 1
            if !report.passed { failed += 1 }
            tally.add(report.tally)
            if !report.passed || verbose {
                printer.record(
                    "scenario",
                    [
                        ("seed", .string(String(seed))), ("passed", .bool(report.passed)),
                        ("violations", .array(report.violations.map { .string($0) })),
                    ],
                    human: verbose
                        ? report.description + "\n" + report.trace.joined(separator: "\n") : report.description)
            }
        }
        let seconds =
            Double((ContinuousClock.now - start).components.seconds)
            + Double((ContinuousClock.now - start).components.attoseconds) / 1e18
        let interrupted = ran < seeds.count
        printer.record(
            "chaos_summary",
            [
                ("scenarios", .int(ran)), ("failed", .int(failed)), ("seconds", .double(seconds)),
                ("interrupted", .bool(interrupted)),
            ],
            human: "\(ran) scenarios\(interrupted ? " (interrupted)" : ""), "
                + "\(failed == 0 ? "all passed" : "\(failed) failed")"
                + String(format: " in %.1f s", seconds) + "\n" + tally.summary)
        if failed > 0 { throw CLIError(.failure, "\(failed) of \(ran) chaos scenarios failed") }
        if interrupted { throw CLIError(.interrupted, "interrupted after \(ran) of \(seeds.count) scenarios") }
    }
}
