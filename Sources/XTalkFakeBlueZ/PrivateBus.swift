import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A private `dbus-daemon` on its own socket, for tests, benchmarks and the
/// fake BlueZ: point `DBUS_SYSTEM_BUS_ADDRESS` at `address` and every D-Bus
/// client (ours, bleak) uses it as the system bus.
///
/// The daemon runs in the foreground (`--nofork`) as our child, is stopped
/// with SIGKILL (a child started from a test thread may block SIGTERM), and
/// every wait for it is bounded.
package final class PrivateBus: @unchecked Sendable {
    package struct Unavailable: Error, CustomStringConvertible {
        package let description: String
    }

    /// The bus address (`unix:path=…`).
    package let address: String
    private let daemon: ChildProcess
    private let directory: URL

    /// Whether this machine can start one: the executable named by
    /// `XTALK_DBUS_DAEMON`, else `dbus-daemon` on the PATH.
    package static func daemonPath() -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["XTALK_DBUS_DAEMON"], FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        for directory in (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/dbus-daemon"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    /// Starts a daemon and waits (at most `timeout`) until it listens, on
    /// `socketPath` if given (its directory must exist), else in a directory of its own.
    package init(socketPath: String? = nil, timeout: Duration = .seconds(10)) throws {
        guard let executable = PrivateBus.daemonPath() else {
            throw Unavailable(description: "dbus-daemon is not installed (Debian: apt-get install dbus-daemon)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "xtalk-bus-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let socket = socketPath ?? directory.appendingPathComponent("bus").path
        let config = directory.appendingPathComponent("bus.conf")
        // A session-type bus: anyone may own any name and talk to anyone (the
        // real system bus restricts org.bluez to root; the fake runs as us).
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:path=\(socket)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """.write(to: config, atomically: true, encoding: .utf8)
        daemon = try ChildProcess(
            executable, ["--config-file=\(config.path)", "--nofork", "--nopidfile", "--print-address=1"])
        // The address line: the daemon prints it once it listens.
        guard daemon.readLine(timeout: timeout)?.hasPrefix("unix:") == true else {
            daemon.stop()
            try? FileManager.default.removeItem(at: directory)
            throw Unavailable(description: "dbus-daemon did not start within \(timeout)")
        }
        address = "unix:path=\(socket)"
    }

    /// `init`, its wait for the daemon on a thread of its own: for async
    /// callers (tests on the main actor), which must not block their thread.
    package static func start(socketPath: String? = nil, timeout: Duration = .seconds(10)) async throws -> PrivateBus {
        try await ChildProcess.onOwnThread { Result { try PrivateBus(socketPath: socketPath, timeout: timeout) } }.get()
    }

    /// Stops the daemon (SIGKILL), reaps it and removes its files. Idempotent.
    package func stop() {
        daemon.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}
