import Foundation

/// The seed of a property test's random draws: `XTALK_PROPERTY_SEED` when it
/// is set (to replay a failure), otherwise a fresh one each run. A failure
/// message carries `description`, which names the seed and how to replay it.
package struct PropertySeed: Sendable, CustomStringConvertible {
    package let value: UInt64

    package init() {
        if let text = ProcessInfo.processInfo.environment["XTALK_PROPERTY_SEED"], let seed = UInt64(text) {
            value = seed
        } else {
            value = UInt64.random(in: 0...UInt64.max)
        }
    }

    package var description: String { "seed \(value) (replay: XTALK_PROPERTY_SEED=\(value) swift test --filter …)" }
}
