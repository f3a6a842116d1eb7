/// An error from the system libcrypto; every case carries enough text to log as is.
/// Declared on every platform (unlike the loader) so that its users need no `#if` around catch clauses.
package enum LibCryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// libcrypto could not be loaded; the text names the libraries tried, or the library and the missing symbol.
    case libraryUnavailable(String)
    /// A libcrypto call failed; the text names the call.
    case operationFailed(String)

    /// A one-line human-readable explanation of the error.
    package var description: String {
        switch self {
        case .libraryUnavailable(let detail): "libcrypto unavailable: \(detail)"
        case .operationFailed(let detail): "libcrypto call failed: \(detail)"
        }
    }
}
