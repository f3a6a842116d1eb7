// Stand-in for Apple's os framework (unified logging), the part the SDK uses:
// `Logger` and the string interpolation of `OSLogMessage` with `privacy:`. It
// exists only so that the Apple code path of
// Sources/XTalkBleSdk/Client/SystemLog.swift compiles and runs on Linux in the
// Apple stand-in build (XTALK_APPLE_STANDINS=1); it is never shipped.
//
// Each declaration has the Swift-visible shape of Apple's, from
// https://developer.apple.com/documentation/os/<symbol>:
//   Logger                 https://developer.apple.com/documentation/os/logger
//   Logger.init(subsystem:category:)
//                          https://developer.apple.com/documentation/os/logger/init(subsystem:category:)
//   Logger.debug(_:) and its siblings
//                          https://developer.apple.com/documentation/os/logger/debug(_:)
//   OSLogType              https://developer.apple.com/documentation/os/oslogtype
//   OSLogMessage           https://developer.apple.com/documentation/os/oslogmessage
//   OSLogInterpolation     https://developer.apple.com/documentation/os/osloginterpolation
//   OSLogPrivacy           https://developer.apple.com/documentation/os/oslogprivacy
//
// Records are rendered as the system would show them outside a debugger
// (values not marked `.public` become "<private>"), then dropped; set
// XTALK_STANDIN_OSLOG=1 in the environment to see them on standard error.

import Glibc

/// How much a record matters; the five levels of the unified logging system.
public struct OSLogType: Equatable, Hashable, Sendable, RawRepresentable {
    /// The system's numeric level.
    public let rawValue: UInt8

    /// Wraps the system's numeric level.
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// Persisted up to a storage limit: the default level, shown by `Logger.notice(_:)`.
    public static let `default` = OSLogType(rawValue: 0x00)
    /// Helpful but not essential information.
    public static let info = OSLogType(rawValue: 0x01)
    /// Information useful only while debugging.
    public static let debug = OSLogType(rawValue: 0x02)
    /// An error in the process.
    public static let error = OSLogType(rawValue: 0x10)
    /// A bug, or an error in another process or the system.
    public static let fault = OSLogType(rawValue: 0x11)
}

/// Whether an interpolated value may be shown in the log, or is redacted as "<private>".
public struct OSLogPrivacy: Equatable, Sendable {
    /// The three behaviours, in the order of the public static properties.
    enum Kind: Equatable, Sendable {
        case `public`
        case `private`
        case auto
    }

    /// The behaviour of this value.
    let kind: Kind

    /// Shown as is: the value holds nothing sensitive.
    public static let `public` = OSLogPrivacy(kind: .public)
    /// Redacted: the value may hold personal information.
    public static let `private` = OSLogPrivacy(kind: .private)
    /// Redacted as `.private`, except for the scalar values the system deems safe.
    public static let auto = OSLogPrivacy(kind: .auto)
    /// Redacted always, even where `.private` values would be shown.
    public static let sensitive = OSLogPrivacy(kind: .private)
}

/// The text alignment of an interpolated value; the SDK uses only the default.
public struct OSLogStringAlignment: Sendable {
    /// No padding.
    public static let none = OSLogStringAlignment()
}

/// Collects the literal segments and the interpolated values of an `OSLogMessage`.
public struct OSLogInterpolation: StringInterpolationProtocol {
    /// The message as rendered so far, private values already redacted.
    var rendered = ""

    /// Reserves room for the literal text; part of the interpolation protocol.
    public init(literalCapacity: Int, interpolationCount: Int) {
        rendered.reserveCapacity(literalCapacity + 16 * interpolationCount)
    }

    /// Appends a literal segment of the message.
    public mutating func appendLiteral(_ literal: String) {
        rendered += literal
    }

    /// Appends a string value; strings are private unless marked `.public` (`.auto` counts as private).
    public mutating func appendInterpolation(
        _ argumentString: @autoclosure @escaping () -> String,
        align: OSLogStringAlignment = .none,
        privacy: OSLogPrivacy = .auto
    ) {
        rendered += privacy.kind == .public ? argumentString() : "<private>"
    }

    /// Appends a value by its description; like strings, private unless marked `.public`.
    public mutating func appendInterpolation<T: CustomStringConvertible>(
        _ value: @autoclosure @escaping () -> T,
        align: OSLogStringAlignment = .none,
        privacy: OSLogPrivacy = .auto
    ) {
        rendered += privacy.kind == .public ? value().description : "<private>"
    }

    /// Appends an integer; integers are shown under `.auto`, as the system shows scalars.
    public mutating func appendInterpolation(
        _ number: @autoclosure @escaping () -> Int,
        align: OSLogStringAlignment = .none,
        privacy: OSLogPrivacy = .auto
    ) {
        rendered += privacy.kind == .private ? "<private>" : String(number())
    }
}

/// A log message: a string literal whose interpolations carry a privacy level.
public struct OSLogMessage: ExpressibleByStringInterpolation, ExpressibleByStringLiteral {
    /// The collected segments and values.
    public let interpolation: OSLogInterpolation

    /// A message with interpolated values.
    public init(stringInterpolation: OSLogInterpolation) {
        interpolation = stringInterpolation
    }

    /// A message that is one literal.
    public init(stringLiteral value: String) {
        var interpolation = OSLogInterpolation(literalCapacity: value.utf8.count, interpolationCount: 0)
        interpolation.appendLiteral(value)
        self.interpolation = interpolation
    }
}

/// Writes records to the unified logging system under a subsystem and a category.
public struct Logger: Sendable {
    /// The reverse-DNS identifier of the writing subsystem, e.g. "com.xtalk.sdk".
    let subsystem: String
    /// The part of the subsystem writing, e.g. "ble".
    let category: String

    /// A logger for a subsystem and category.
    public init(subsystem: String, category: String) {
        self.subsystem = subsystem
        self.category = category
    }

    /// Writes a record at the given level.
    public func log(level: OSLogType, _ message: OSLogMessage) {
        StandInLogSink.write(level: level, subsystem: subsystem, category: category, message.interpolation.rendered)
    }

    /// Writes a record at the default level.
    public func log(_ message: OSLogMessage) {
        log(level: .default, message)
    }

    /// Writes a debug-level record.
    public func trace(_ message: OSLogMessage) {
        log(level: .debug, message)
    }

    /// Writes a debug-level record.
    public func debug(_ message: OSLogMessage) {
        log(level: .debug, message)
    }

    /// Writes an info-level record.
    public func info(_ message: OSLogMessage) {
        log(level: .info, message)
    }

    /// Writes a default-level record.
    public func notice(_ message: OSLogMessage) {
        log(level: .default, message)
    }

    /// Writes a warning, which the system records at the error level.
    public func warning(_ message: OSLogMessage) {
        log(level: .error, message)
    }

    /// Writes an error-level record.
    public func error(_ message: OSLogMessage) {
        log(level: .error, message)
    }

    /// Writes a critical record, which the system records at the fault level.
    public func critical(_ message: OSLogMessage) {
        log(level: .fault, message)
    }

    /// Writes a fault-level record.
    public func fault(_ message: OSLogMessage) {
        log(level: .fault, message)
    }
}

/// Where the stand-in's records go: standard error when XTALK_STANDIN_OSLOG=1, otherwise nowhere,
/// so that test runs stay quiet while the rendering (and its redaction) still runs.
enum StandInLogSink {
    /// Read once: the environment does not change what a running process logs.
    static let enabled: Bool = getenv("XTALK_STANDIN_OSLOG").map { String(cString: $0) == "1" } ?? false

    /// Renders one record the way `log stream` shows it, and prints it if enabled.
    static func write(level: OSLogType, subsystem: String, category: String, _ text: String) {
        guard enabled else { return }
        let name =
            switch level {
            case .debug: "Debug"
            case .info: "Info"
            case .error: "Error"
            case .fault: "Fault"
            default: "Default"
            }
        // write(2) on the descriptor rather than stdio's `stderr`, a C global Swift 6 deems unsafe to share.
        var line = "[\(subsystem):\(category)] \(name): \(text)\n"
        line.withUTF8 { bytes in _ = Glibc.write(STDERR_FILENO, bytes.baseAddress, bytes.count) }
    }
}
