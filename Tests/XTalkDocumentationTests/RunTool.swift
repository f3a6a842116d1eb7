import Foundation

/// Runs a toolchain command (found on PATH) to its end; its output goes to a
/// temporary file, not a pipe, and its end is signalled by its termination
/// handler. Every `Process` is kept for the life of the test process:
/// Foundation's monitoring thread on Linux still reads it (unowned) after its
/// end was reported, and crashed here ("attempted to read an unowned
/// reference") when it had already been freed.
/// One at a time: Foundation's `Process` on Linux crashed with several
/// launched and reaped at once from this target's parallel tests.
func runTool(_ arguments: [String]) throws -> (status: Int32, output: String) {
    try KeptProcesses.oneAtATime { try runToolAlone(arguments) }
}

private func runToolAlone(_ arguments: [String]) throws -> (status: Int32, output: String) {
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
    KeptProcesses.keep(process)
    let ended = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in ended.signal() }
    try process.run()
    ended.wait()
    try handle.close()
    let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
    return (process.terminationStatus, output)
}

struct ToolError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private enum KeptProcesses {
    nonisolated(unsafe) private static var all: [Process] = []
    private static let lock = NSLock()
    private static let running = NSLock()
    static func keep(_ process: Process) { lock.withLock { all.append(process) } }
    static func oneAtATime<T>(_ body: () throws -> T) rethrows -> T { try running.withLock(body) }
}
