import Foundation

/// Waits (bounded, on the real clock: for suites that do real I/O, such as
/// D-Bus) until `condition` holds; false when `limit` passed first.
@MainActor
package func eventually(within limit: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}
