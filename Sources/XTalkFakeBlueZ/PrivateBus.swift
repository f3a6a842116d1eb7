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
    private let pid: pid_t
    private let directory: URL
    private let lock = NSLock()
    private var stopped = false

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

    /// Starts a daemon and waits (at most `timeout`) until it listens.
    ///
    /// Spawned with `posix_spawn`, not Foundation's `Process`: the child gets
    /// an empty signal mask whatever thread starts it, and stopping it never
    /// runs a nested run loop on the caller's thread (the main actor's, in tests).
    package init(timeout: Duration = .seconds(10)) throws {
        guard let daemon = PrivateBus.daemonPath() else {
            throw Unavailable(description: "dbus-daemon is not installed (Debian: apt-get install dbus-daemon)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "xtalk-bus-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let socket = directory.appendingPathComponent("bus").path
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
        let (pid, output) = try PrivateBus.spawn(
            daemon, ["--config-file=\(config.path)", "--nofork", "--nopidfile", "--print-address=1"])
        self.pid = pid
        defer { close(output) }
        // The address line: the daemon prints it once it listens.
        var bytes: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while !bytes.contains(0x0A), ContinuousClock.now < deadline {
            var descriptor = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) >= 0 || errno == EINTR else { break }
            guard descriptor.revents != 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 512)
            let count = read(output, &chunk, chunk.count)
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        guard String(decoding: bytes, as: UTF8.self).hasPrefix("unix:") else {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            try? FileManager.default.removeItem(at: directory)
            throw Unavailable(description: "dbus-daemon did not start within \(timeout)")
        }
        address = "unix:path=\(socket)"
    }

    /// Starts `path arguments` with stdout on a pipe (returned), stderr to
    /// /dev/null, an empty signal mask and default signal actions.
    private static func spawn(_ path: String, _ arguments: [String]) throws -> (pid_t, Int32) {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw Unavailable(description: "pipe() failed") }
        for descriptor in pipeFDs { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        close(pipeFDs[1])
        guard result == 0 else {
            close(pipeFDs[0])
            throw Unavailable(description: "could not start \(path): \(String(cString: strerror(result)))")
        }
        return (pid, pipeFDs[0])
    }

    /// Stops the daemon (SIGKILL), reaps it and removes its files. Idempotent.
    package func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}
