import Foundation

#if canImport(os)
    import os
#endif

/// Where the authenticator's warnings go without a `logHandler`: the system
/// log on Apple platforms, standard error elsewhere (a gateway's journal).
enum AuthLog {
    #if canImport(os)
        private static let logger = Logger(subsystem: "com.xtalk.sdk", category: "auth")
    #endif

    static func warning(_ message: String) {
        #if canImport(os)
            logger.warning("\(message, privacy: .public)")
        #else
            FileHandle.standardError.write(Data(("XTalkDeviceAuthSdk warning: " + message + "\n").utf8))
        #endif
    }
}
