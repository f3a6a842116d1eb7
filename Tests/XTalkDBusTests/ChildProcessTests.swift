import Foundation
import Testing
import XTalkFakeBlueZ

#if canImport(Glibc)
    import Glibc
#endif

/// `ChildProcess`, which starts the dbus-daemons, the fake BlueZ and the
/// outside clients of these suites: what its callers rely on.
@Suite("Child processes")
struct ChildProcessTests {
    @Test("lines, the rest of the output and the exit status come back")
    func linesAndStatus() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "echo one; echo two; printf three; exit 3"])
        defer { child.stop() }
        #expect(await child.readLine(timeout: .seconds(30)) == "one")
        #expect(await child.readToEnd(timeout: .seconds(30)) == "two\nthree")
        #expect(await child.wait(timeout: .seconds(30)) == 3)
    }

    @Test("a child that goes on writing after the lines we need is not blocked by a full pipe")
    func discardedOutputNeverBlocks() async throws {
        // 300,000 bytes is several times a pipe's buffer (64 KiB on Linux):
        // unread, the child would block in its write and never exit.
        let child = try ChildProcess("/bin/sh", ["-c", "echo ready; head -c 300000 /dev/zero; exit 7"])
        defer { child.stop() }
        #expect(await child.readLine(timeout: .seconds(30)) == "ready")
        child.discardFurtherOutput()
        #expect(await child.wait(timeout: .seconds(30)) == 7)
    }

    @Test("stopping a child in a process group of its own also ends what it started (node --test's workers)")
    func stopEndsGrandchildren() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "sleep 600 & echo $!; wait"], ownProcessGroup: true)
        let line = await child.readLine(timeout: .seconds(30))
        let grandchild = try #require(
            line.flatMap { pid_t($0) }, "the child said its child's pid: \(line ?? "nothing")")
        #expect(Self.isAlive(grandchild))
        child.stop()
        #expect(
            await ChildProcess.onOwnThread {
                let deadline = ContinuousClock.now + .seconds(10)
                while Self.isAlive(grandchild) && ContinuousClock.now < deadline { usleep(2_000) }
                return !Self.isAlive(grandchild)
            }, "the grandchild \(grandchild) outlived its parent")
    }

    /// Whether `pid` runs (a zombie, killed and not yet reaped by its new parent, does not).
    private static func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].split(separator: " ").first != "Z"
    }

    @Test("a child inherits none of our descriptors beyond stdin, stdout and stderr")
    func descriptorsAreClosed() async throws {
        // A pipe without close-on-exec, as another thread's or Foundation's may be.
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { for end in ends { close(end) } }
        let child = try ChildProcess("/bin/sh", ["-c", "for fd in /proc/$$/fd/*; do echo ${fd##*/}; done"])
        defer { child.stop() }
        let listed = Set(await child.readToEnd(timeout: .seconds(30)).split(separator: "\n").compactMap { Int32($0) })
        #expect(listed.isSuperset(of: [0, 1, 2]), "the listing worked: \(listed.sorted())")
        #expect(listed.isDisjoint(with: ends), "the child has our pipe \(ends): \(listed.sorted())")
    }
}
