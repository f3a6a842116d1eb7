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
