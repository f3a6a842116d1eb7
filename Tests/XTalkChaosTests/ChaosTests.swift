import Foundation
import Testing
import XTalkChaos

/// The seeded chaos suite: `XTALK_CHAOS_SCENARIOS` scenarios (2,000 by
/// default), split across shards that run concurrently; `XTALK_CHAOS_SEED`
/// replays one scenario. Every failure prints its seed and trace.
@Suite("Chaos: seeded random scenarios against the simulator, in virtual time")
@MainActor
struct ChaosTests {
    nonisolated static let environment = ProcessInfo.processInfo.environment
    nonisolated static let scenarios = Int(environment["XTALK_CHAOS_SCENARIOS"] ?? "") ?? 2_000
    nonisolated static let shards = 8

    @Test("every call ends once with its own answer or a typed error; nothing lost, stale or late", arguments: 0..<shards)
    func scenarios(shard: Int) async {
        if let replay = Self.environment["XTALK_CHAOS_SEED"].flatMap(UInt64.init) {
            if shard == 0 { await Self.check(seed: replay) }
            return
        }
        for index in stride(from: shard, to: Self.scenarios, by: Self.shards) {
            await Self.check(seed: ChaosSeeds.seed(ofScenario: index))
        }
    }

    static func check(seed: UInt64) async {
        let report = await ChaosScenario(seed: seed).run()
        #expect(report.passed, "\(report.description)")
    }
}
