import Foundation

/// Log lines collected from a log handler, which may run on any thread.
package final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []

    package init() {}

    /// Records one line.
    package func append(_ line: String) { lock.withLock { lines.append(line) } }
    /// Every line so far, in order.
    package var all: [String] { lock.withLock { lines } }
}
