import Foundation

/// Executables SwiftPM built next to the test bundle.
package enum BuiltProducts {
    /// The xtalk binary (in the build directory, beside the tests or one level up).
    package static var xtalk: String? {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return [directory, directory.deletingLastPathComponent()].map { $0.appendingPathComponent("xtalk").path }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
