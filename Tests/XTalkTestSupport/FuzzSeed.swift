import Foundation
import Testing

/// One input of a fuzz target's committed seed corpus (Fuzz/Corpus/<target>/).
package struct FuzzSeed: Sendable, CustomTestStringConvertible {
    package let target: String
    package let name: String
    package let bytes: [UInt8]

    package init(target: String, name: String, bytes: [UInt8]) {
        self.target = target
        self.name = name
        self.bytes = bytes
    }

    package var testDescription: String { "\(target)/\(name)" }

    /// Fuzz/Corpus of this checkout, found from this file's path.
    package static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz").appendingPathComponent("Corpus")

    /// Every seed of `target`, by name.
    package static func all(_ target: String) -> [FuzzSeed] {
        let directory = corpus.appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.sorted().compactMap { name in
            FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
                .map { FuzzSeed(target: target, name: name, bytes: Array($0)) }
        }
    }
}
