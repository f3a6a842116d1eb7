import Foundation
import Testing
@testable import XTalkCLI

@Suite("xtalk demo")
@MainActor
struct DemoTests {
    @Test("in-process: six steps pass, each with its outcome and duration; JSON too")
    func demo() async {
        let result = await xtalk(["demo"])
        #expect(result.code == 0, "\(result.stderr)")
        for step in 1...6 { #expect(result.stdout.contains("Step \(step)/6  ")) }
        #expect(result.out.filter { $0.contains("          passed in ") }.count == 6)
        #expect(result.stdout.contains("did:xtalk:B5803039"))
        #expect(result.stdout.contains("refused (no authenticated identity)"))
        #expect(result.stdout.contains("AT+VER?   → +VER:2.1.0 OK"))
        #expect(result.stdout.contains("→ +SENDFIN:OK after"))
        #expect(result.stdout.contains("frame  16 bytes"))
        #expect(result.stdout.contains("link lost: state disconnected, identity cleared"))
        #expect(result.stdout.contains("pending AT+VER? ended with .cancelled"))
        #expect(result.out.last?.hasPrefix("All 6 steps passed in ") == true)
        #expect(result.elapsed < .seconds(10))
        let json = await xtalk(["demo", "--json"])
        let steps = json.records(ofType: "step")
        #expect(steps.count == 6)
        #expect(steps.allSatisfy { $0["passed"] as? Bool == true && $0["seconds"] is Double && $0["details"] is [Any] })
        #expect(json.records(ofType: "summary").first?["passed"] as? Bool == true)
    }

    @Test("a failing step says what failed and exits non-zero", arguments: [
        (["--untrusted-key"], 3, Int32(6)),
        (["--backend", "platform"], 1, Int32(4)),
    ])
    func failingStep(_ extra: [String], _ failingStep: Int, _ code: Int32) async {
        #if !os(Linux)
        if extra.contains("platform") { return }  // a real backend may exist elsewhere
        #endif
        let result = await xtalk(["demo"] + extra)
        #expect(result.code == code)
        #expect(result.stdout.contains("Step \(failingStep)/6"))
        #expect(result.out.contains { $0.contains("FAILED after") })
        #expect(!result.stdout.contains("Step \(failingStep + 1)/6"), "the demo stops at the failed step")
        #expect(result.err.count == 1)
    }

    @Test("the built xtalk binary runs the demo on the real clock and exits 0")
    func binary() throws {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [directory.appendingPathComponent("xtalk"),
                          directory.deletingLastPathComponent().appendingPathComponent("xtalk")]
        let binary = try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) },
                                  "the xtalk binary is built next to the tests")
        let process = Process()
        process.executableURL = binary
        process.arguments = ["demo"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        #expect(process.terminationStatus == 0, "\(text)")
        let stepLines = text.split(separator: "\n").filter { $0.hasPrefix("Step ") }
        #expect(stepLines.count == 6)
        for step in 1...6 { #expect(stepLines.contains { $0.hasPrefix("Step \(step)/6  ") }) }
        #expect(text.contains("All 6 steps passed in "))
    }
}

@Suite("xtalk binary: Ctrl-C")
struct InterruptTests {
    @Test("Ctrl-C ends xtalk listen cleanly with exit 0")
    func interruptListen() throws {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let binary = directory.appendingPathComponent("xtalk")
        try #require(FileManager.default.isExecutableFile(atPath: binary.path))
        let process = Process()
        process.executableURL = binary
        process.arguments = ["listen", "--traffic", "20"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()
        // Wait (bounded) for the first frame, then press Ctrl-C.
        var text = ""
        let handle = output.fileHandleForReading
        let deadline = Date().addingTimeInterval(10)
        while !text.contains("frame") && Date() < deadline {
            text += String(decoding: handle.availableData, as: UTF8.self)
        }
        #expect(text.contains("frame"))
        process.interrupt()
        // A watchdog bounds the wait: a process that ignores Ctrl-C is killed (and the test fails).
        let watched = WatchedProcess(process)
        DispatchQueue.global().asyncAfter(deadline: .now() + 5) { watched.killIfRunning() }
        process.waitUntilExit()
        #expect(process.terminationReason == .exit, "ended by itself, not killed")
        #expect(process.terminationStatus == 0)
    }
}

/// Lets a watchdog kill a process only while it still runs (never a reused pid).
final class WatchedProcess: @unchecked Sendable {
    private let process: Process
    init(_ process: Process) { self.process = process }
    func killIfRunning() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
