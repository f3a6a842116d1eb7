import Foundation
import Testing
import XTalkTestSupport
import XTalkFakeBlueZ

/// Node.js, for the contract driver (`Tests/BridgeContract`), if installed.
enum Node {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static var path: String? {
        let candidates = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/usr/local/bin")
            .split(separator: ":").map { "\($0)/node" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
    static var available: Bool { path != nil }
    static let missing: Comment = "skipped: Node.js is not installed (Debian: apt-get install nodejs)"

    /// The xtalk binary built next to the tests.
    static var xtalk: String? { BuiltProducts.xtalk }
}

/// On CI (`XTALK_REQUIRE_NODE=1`) the contract suite may not skip.
@Test func nodeIsPresentWhereRequired() {
    guard ProcessInfo.processInfo.environment["XTALK_REQUIRE_NODE"] == "1" else { return }
    #expect(Node.available, "XTALK_REQUIRE_NODE=1 but node was not found on PATH")
}

/// The shipped JavaScript plugin file, driven by a contract driver of our
/// own that repeats the JavaScript SDK's call patterns, through `xtalk
/// bridge --stdio` (`node --test Tests/BridgeContract`).
@Suite(
    "The JavaScript plugin over xtalk bridge --stdio, driven with the SDK's call patterns (node --test)",
    .enabled(if: Node.available, Node.missing), .timeLimit(.minutes(3)))
struct NodeContractTests {
    @Test func contractDriverPasses() async throws {
        let node = try #require(Node.path)
        let xtalk = try #require(Node.xtalk, "the xtalk binary is built next to the tests")
        var environment = ProcessInfo.processInfo.environment
        environment["XTALK"] = xtalk
        let run = try ChildProcess(
            node, ["--test", Node.packageRoot.appendingPathComponent("Tests/BridgeContract").path],
            environment: environment, ownProcessGroup: true)
        defer { run.stop() }  // node --test's test processes and their xtalks too
        let output = await run.readToEnd(timeout: .seconds(150))
        let status = await run.wait(timeout: .seconds(10))
        #expect(status == 0, "node --test exited \(status.map(String.init) ?? "late"):\n\(output)")
        #expect(output.contains("# pass 10") && output.contains("# fail 0"), "every contract test ran:\n\(output)")
    }
}
