import Foundation
import XTalkChaos

/// `xtalk chaos`: the seeded chaos suite, for long local runs and for
/// replaying one seed with its full trace.
enum ChaosCommand {
    static let command = Command(
        spec: CommandSpec(
            name: "chaos",
            summary: "Run seeded chaos scenarios against the simulator in virtual time and check every invariant.",
            positionals: [],
            options: [
                OptionSpec("scenarios", value: "N", help: "How many scenarios (default 2000, as CI runs)."),
                OptionSpec("first", value: "K", help: "Start at scenario K (default 0): scenario K has the same seed as in the tests."),
                OptionSpec("seed", value: "SEED", help: "Replay the scenario with this seed (as printed by a failure)."),
                OptionSpec("verbose", help: "Print each scenario's trace, with the client's AT traffic."),
                CommonOptions.json,
            ],
            discussion: """
                Each scenario draws a device (encoding, echo, challenge, delays, late replies, silence, MTU,
                notification splits, flow control) and a random mix of concurrent AT commands, RF sends,
                exclusive sessions, no-wait calls, authentications, radio-frame floods, line noise, encoding
                switches, disconnects at random byte offsets, Bluetooth power cycles, cancellations and
                teardown. After every step and at the end it checks: every call finished exactly once, with
                its own command's lines or a typed error; radio frames in order, none repeated, none stale;
                flags consistent with the link; nothing after teardown(). Exits 1 when a scenario fails.
                """),
        endsOnInterrupt: true
    ) { arguments, context, printer throws(CLIError) in
        let count: Int
        let first: Int
        let seed: UInt64?
        do throws(UsageError) {
            count = try arguments.int("scenarios", in: 1...10_000_000) ?? 2_000
            first = try arguments.int("first", in: 0...Int(Int32.max)) ?? 0
            if let text = arguments.value("seed") {
                guard let value = UInt64(text) else { throw UsageError("invalid value '\(text)' for --seed: expected an unsigned integer") }
                seed = value
            } else {
                seed = nil
            }
        } catch {
            throw CLIError.usage(error)
        }
        let verbose = arguments.has("verbose")
        let seeds: [UInt64] = seed.map { [$0] } ?? (first..<(first + count)).map(ChaosSeeds.seed(ofScenario:))
        var failed = 0
        let start = ContinuousClock.now
        for (index, seed) in seeds.enumerated() {
            if Task.isCancelled { throw CLIError(.interrupted, "interrupted after \(index) scenarios") }
            let report = await ChaosScenario(seed: seed, traceTraffic: verbose).run()
            if !report.passed { failed += 1 }
            if !report.passed || verbose {
                printer.record("scenario", [("seed", .string(String(seed))), ("passed", .bool(report.passed)),
                                            ("violations", .array(report.violations.map { .string($0) }))],
                               human: verbose ? report.description + "\n" + report.trace.joined(separator: "\n") : report.description)
            }
        }
        let seconds = Double((ContinuousClock.now - start).components.seconds)
            + Double((ContinuousClock.now - start).components.attoseconds) / 1e18
        printer.record("chaos_summary", [("scenarios", .int(seeds.count)), ("failed", .int(failed)), ("seconds", .double(seconds))],
                       human: "\(seeds.count) scenarios, \(failed == 0 ? "all passed" : "\(failed) failed")"
                           + String(format: " in %.1f s", seconds))
        if failed > 0 { throw CLIError(.failure, "\(failed) of \(seeds.count) chaos scenarios failed") }
    }
}
