import Foundation

/// Counts notifications that may arrive from any thread (Observation's
/// `onChange`, for one).
package final class ChangeCounter: @unchecked Sendable {
    /// Guards `count`.
    private let lock = NSLock()
    /// Notifications so far.
    private var count = 0

    package init() {}

    /// Records one notification.
    package func increment() { lock.withLock { count += 1 } }
    /// Notifications so far.
    package var value: Int { lock.withLock { count } }
}
