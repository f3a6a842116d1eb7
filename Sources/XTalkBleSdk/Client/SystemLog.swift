// Where the client's log records go when the app gives no `logHandler`: on
// Apple platforms, the unified logging system (subsystem "com.xtalk.sdk",
// category "ble"), so that they show in Console and `log stream` next to the
// app's own; elsewhere, nowhere. Records are marked public: the SDK never logs
// a `log: false` command or its lines, so what remains is safe to show.

#if canImport(os)
    import os
#endif

/// The client's fallback log destination.
enum SystemLog {
    #if canImport(os)
        /// The SDK's logger; `Logger` is `Sendable`, so one instance serves every client.
        private static let logger = Logger(subsystem: "com.xtalk.sdk", category: "ble")
    #endif

    /// Writes one record at the matching system level (`warning` is recorded at the error level, as `Logger.warning`
    /// does).
    /// The message is built only where it goes somewhere.
    static func write(_ level: XTalkLogLevel, _ message: @autoclosure () -> String) {
        #if canImport(os)
            let message = message()
            switch level {
            case .debug: logger.debug("\(message, privacy: .public)")
            case .info: logger.info("\(message, privacy: .public)")
            case .warning: logger.warning("\(message, privacy: .public)")
            case .error: logger.error("\(message, privacy: .public)")
            }
        #endif
    }
}
