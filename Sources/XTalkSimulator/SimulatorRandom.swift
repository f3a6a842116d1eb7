/// The simulator's only source of randomness: seeded, so that every run of a
/// scenario (RSSI jitter, notification splits, garbage, radio traffic) is
/// reproducible from its seed.
package final class SimulatorRandom: RandomNumberGenerator {
    private var state: UInt64

    package init(seed: UInt64) {
        state = seed
    }

    /// SplitMix64: tiny, fast, and good enough for simulation (not for keys).
    package func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniformly random integer in `range`.
    package func int(in range: ClosedRange<Int>) -> Int {
        var generator = self
        return Int.random(in: range, using: &generator)
    }

    /// `count` random bytes.
    package func bytes(_ count: Int) -> [UInt8] {
        (0..<max(0, count)).map { _ in UInt8(truncatingIfNeeded: next()) }
    }
}
