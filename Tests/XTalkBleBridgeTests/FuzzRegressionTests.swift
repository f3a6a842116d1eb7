import Foundation
import Testing
import XTalkBleBridge
import XTalkSimulator
import XTalkTestSupport

/// The `bridge-router` fuzz target's seeds and random mutations of them,
/// through its oracle (FuzzOracles.swift), in every `swift test`.
@Suite("Fuzz regression: the bridge's request parser, strict hex and quoting (Fuzz/README.md)")
struct BridgeFuzzRegressionTests {
    @Test func corpusIsThere() {
        #expect(FuzzSeed.all("bridge-router").count >= 15, "seeds under \(FuzzSeed.corpus.path)/bridge-router")
    }

    @Test("every bridge-router seed passes its oracle", arguments: FuzzSeed.all("bridge-router"))
    func seedPasses(_ seed: FuzzSeed) {
        do {
            try BridgeFuzzOracle.check(seed.bytes)
        } catch {
            Issue.record("\(error)")
        }
    }

    /// 20,000 seeds with random bytes flipped, inserted, removed or repeated:
    /// every one checked (counted), none breaks the oracle.
    @Test func mutationsPassTheOracle() {
        let seeds = FuzzSeed.all("bridge-router").map(\.bytes)
        let random = SimulatorRandom(seed: 0xB41D6E)
        var checked = 0
        for _ in 0..<20_000 {
            var input = seeds[random.int(in: 0...(seeds.count - 1))]
            for _ in 0..<random.int(in: 1...4) {
                let position = input.isEmpty ? 0 : random.int(in: 0...(input.count - 1))
                switch random.int(in: 0...3) {
                case 0 where !input.isEmpty: input[position] = UInt8(truncatingIfNeeded: random.next())
                case 1: input.insert(UInt8(truncatingIfNeeded: random.next()), at: position)
                case 2 where !input.isEmpty: input.remove(at: position)
                default: input += input.prefix(random.int(in: 0...8))
                }
            }
            do {
                try BridgeFuzzOracle.check(input)
                checked += 1
            } catch {
                Issue.record("\(error): \(input)")
                return
            }
        }
        #expect(checked == 20_000)
    }
}
