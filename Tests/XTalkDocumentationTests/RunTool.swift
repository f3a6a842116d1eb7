import Foundation

/// Runs a toolchain command (found on PATH) to its end; its output goes to a
/// temporary file rather than a pipe, so a long output never blocks it.
func runTool(_ arguments: [String]) throws -> (status: Int32, output: String) {
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
    try process.run()
    process.waitUntilExit()
    try handle.close()
    let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
    return (process.terminationStatus, output)
}

struct ToolError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
