import Foundation
import Testing
@testable import XTalkBleSdk

/// One input of a fuzz target's committed seed corpus (Fuzz/Corpus/<target>/).
struct FuzzSeed: Sendable, CustomTestStringConvertible {
    let target: String
    let name: String
    let bytes: [UInt8]

    var testDescription: String { "\(target)/\(name)" }

    /// Fuzz/Corpus of this checkout, found from this file's path.
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz").appendingPathComponent("Corpus")

    /// Every seed of `target`, by name.
    static func all(_ target: String) -> [FuzzSeed] {
        let directory = corpus.appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.sorted().compactMap { name in
            FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
                .map { FuzzSeed(target: target, name: name, bytes: Array($0)) }
        }
    }
}

/// The `receive` and `framer` fuzz targets' seeds, replayed through the
/// targets' own oracles (Tests/XTalkBleSdkTests/FuzzOracles.swift), so that
/// every `swift test` checks them. Both targets read the same input format,
/// so every seed goes through both oracles. Inputs a fuzzer found are pinned
/// below, minimized, with what they broke.
@Suite("Fuzz regression: framer and receive path (Fuzz/README.md)")
struct StreamFuzzRegressionTests {
    static let seeds = FuzzSeed.all("receive") + FuzzSeed.all("framer")

    @Test("the committed corpus is there")
    func corpusIsThere() {
        #expect(FuzzSeed.all("receive").count >= 30, "seeds under \(FuzzSeed.corpus.path)/receive")
        #expect(FuzzSeed.all("framer").count >= 20, "seeds under \(FuzzSeed.corpus.path)/framer")
    }

    @Test("every seed passes the framer oracle: the reference framer's units, in every chunking", arguments: seeds)
    func framerOracle(_ seed: FuzzSeed) {
        do {
            try StreamFuzzOracle.checkFramer(seed.bytes)
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("every seed passes the receive oracle: the reference channel's events and completion, in every chunking",
          arguments: seeds)
    func receiveOracle(_ seed: FuzzSeed) {
        do {
            try StreamFuzzOracle.checkReceive(seed.bytes)
        } catch {
            Issue.record("\(error)")
        }
    }

    /// Hand-made inputs at corners of the oracles, in the fuzz input format
    /// (6-byte header, then the device's text; see `StreamFuzzOracle.Input`).
    /// No fuzzer input has failed on these targets so far; those would join here.
    static let pinned: [(String, [UInt8])] = [
        // xor; 51 × 80 filler bytes, then 16 × "A" and a CR: the CR in position 4097 is held at the end.
        ("a CR in position 4097 ends the stream", [0x01, 0xF2, 0, 0, 0, 0] + Array((String(repeating: "A", count: 16) + "\r").utf8)),
        // The host switches to xor after "+DI:da" while the command runs: the switch waits for the operation.
        ("a switch during a command, mid-line", [0x08, 0, 0, 0, 0, 0x5B] + Array("+DI:data=AB\r\nOK\r\n".utf8)),
        // The same switch once the command timed out: it applies at once; the line's rest is raw.
        ("a switch after a timeout, mid-line", [0x18, 0, 0, 0, 0, 0x5B] + Array("+DI:data=AB\r\nOK\r\n".utf8)),
    ]

    @Test("pinned inputs pass both oracles", arguments: pinned)
    func pinnedInput(_ name: String, _ bytes: [UInt8]) {
        do {
            try StreamFuzzOracle.checkFramer(bytes)
            try StreamFuzzOracle.checkReceive(bytes)
        } catch {
            Issue.record("\(name): \(error)")
        }
    }
}
