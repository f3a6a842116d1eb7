import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file descriptor received in (or to be sent with) a message: the
/// specification's `UNIX_FD` type. It owns the descriptor: the descriptor is
/// closed when the last reference goes, unless someone took it. So a message
/// that nobody reads to the end cannot leak what it carried.
package final class DBusFileDescriptor: @unchecked Sendable, Hashable, CustomStringConvertible {
    private let lock = NSLock()
    private var descriptor: Int32?

    /// Owns `descriptor` from now on.
    package init(adopting descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        if let descriptor { _ = DBusFileDescriptor.systemClose(descriptor) }
    }

    /// The descriptor, while this object still owns it.
    package var rawValue: Int32? { lock.withLock { descriptor } }

    /// Hands the descriptor over: the caller closes it from now on.
    package func take() -> Int32? {
        lock.withLock {
            defer { descriptor = nil }
            return descriptor
        }
    }

    /// Closes the descriptor now (once).
    package func close() {
        if let descriptor = take() { _ = DBusFileDescriptor.systemClose(descriptor) }
    }

    package static func == (lhs: DBusFileDescriptor, rhs: DBusFileDescriptor) -> Bool { lhs === rhs }
    package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    package var description: String { rawValue.map { "fd \($0)" } ?? "fd (closed)" }

    static func systemClose(_ descriptor: Int32) -> Int32 {
        #if canImport(Glibc)
            Glibc.close(descriptor)
        #else
            Darwin.close(descriptor)
        #endif
    }
}
