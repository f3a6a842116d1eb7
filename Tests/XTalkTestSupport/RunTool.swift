import Foundation

/// Runs a command (found on PATH, or an absolute path) to its end, its
/// standard output and error together in a temporary file rather than a
/// pipe, so a long output never blocks it. One that has not ended after
/// `seconds` is killed, and the call throws with its output so far: a stuck
/// tool names itself instead of stalling the run. Blocks the calling thread.
package func runTool(_ arguments: [String], seconds: Int = 600) throws -> (status: Int32, output: String) {
    let log = FileManager.default.temporaryDirectory.appendingPathComponent("xtalk-tool-\(UUID().uuidString).log")
    guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
        throw ToolError("cannot create \(log.path)")
    }
    defer { try? FileManager.default.removeItem(at: log) }
    let handle = try FileHandle(forWritingTo: log)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.standardOutput = handle
    process.standardError = handle
    process.standardInput = FileHandle.nullDevice
    let ended = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in ended.signal() }
    try process.run()
    let timedOut = ended.wait(timeout: .now() + .seconds(seconds)) == .timedOut
    if timedOut {
        // SIGKILL: a child started from a test thread may block SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        _ = ended.wait(timeout: .now() + .seconds(10))
    }
    try handle.close()
    let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
    if timedOut {
        throw ToolError("\(arguments.joined(separator: " ")) did not end within \(seconds) s; its output:\n\(output)")
    }
    return (process.terminationStatus, output)
}

package struct ToolError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
