import Foundation
import Testing
@testable import XTalkBleSdk

/// True where `assert` is checked (debug builds): there a driver's contract
/// violation traps; in release builds the machines ignore it as before.
let assertionsEnabled: Bool = {
    var enabled = false
    assert(
        {
            enabled = true
            return true
        }())
    return enabled
}()

/// Inputs the driver (the client) can never produce hit an `assert` in the
/// sans-I/O machines; inputs it can produce (a late completion, a timer that
/// fired as it was cancelled, a session ended by the connection's end) stay
/// silent. Each violation runs in a child process, which must trap in debug.
@Suite("Driver contract: violations trap in debug builds, legitimate late inputs are ignored", .timeLimit(.minutes(2)))
struct DriverContractTests {
    // MARK: Violations

    @Test("quarantining a channel that has work")
    func quarantineBusy() async {
        guard assertionsEnabled else {
            // Release: ignored, as before the assert (only before any work).
            var h = ChannelHarness()
            h.command("AT")
            #expect(h.machine.quarantine(for: .seconds(1)).isEmpty, "only before any work")
            return
        }
        await #expect(processExitsWith: .failure) {
            var machine = AtChannelStateMachine(encoding: .plain)
            _ = machine.submitCommand("AT", timeout: .seconds(3), mode: .automatic, log: true, owner: nil)
            _ = machine.quarantine(for: .seconds(1))
        }
    }

    @Test("resuming from a handover while a session holds the channel")
    func resumeInSession() async {
        guard assertionsEnabled else { return }
        await #expect(processExitsWith: .failure) {
            var machine = AtChannelStateMachine(encoding: .plain)
            _ = machine.submitSession()
            _ = machine.resume(after: ReconnectHandover(owedFor: .seconds(1)))
        }
    }

    @Test("ending a session that was never granted")
    func endQueuedSession() async {
        guard assertionsEnabled else { return }
        await #expect(processExitsWith: .failure) {
            var machine = AtChannelStateMachine(encoding: .plain)
            _ = machine.submitCommand("AT", timeout: .seconds(3), mode: .automatic, log: true, owner: nil)
            let (waiting, _) = machine.submitSession()
            _ = machine.sessionEnded(waiting)
        }
    }

    @Test("ending a session twice")
    func endSessionTwice() async {
        guard assertionsEnabled else { return }
        await #expect(processExitsWith: .failure) {
            var machine = AtChannelStateMachine(encoding: .plain)
            let (session, _) = machine.submitSession()
            _ = machine.sessionEnded(session)
            _ = machine.sessionEnded(session)
        }
    }

    @Test("work owned by a session that is still waiting for its turn")
    func ownerNotGranted() async {
        guard assertionsEnabled else { return }
        await #expect(processExitsWith: .failure) {
            var machine = AtChannelStateMachine(encoding: .plain)
            _ = machine.submitCommand("AT", timeout: .seconds(3), mode: .automatic, log: true, owner: nil)
            let (waiting, _) = machine.submitSession()
            _ = machine.submitCommand("AT+IN", timeout: .seconds(3), mode: .automatic, log: true, owner: waiting)
        }
    }

    @Test("taking back a line the channel did not ask to take back")
    func unrequestedWithdrawal() async {
        guard assertionsEnabled else { return }
        await #expect(processExitsWith: .failure) {
            var machine = AtChannelStateMachine(encoding: .plain)
            let (_, actions) = machine.submitCommand(
                "AT", timeout: .seconds(3), mode: .automatic, log: true,
                owner: nil)
            for case .write(let id, _) in actions { _ = machine.writeWithdrawn(id) }
        }
    }

    @Test("an empty line for the write pump")
    func emptyLine() async {
        guard assertionsEnabled else { return }
        await #expect(processExitsWith: .failure) {
            var pump = PassthroughWritePump(writeType: .withoutResponse)
            pump.enqueue(ChannelWriteID(raw: 1), [])
        }
    }

    // MARK: Legitimate late inputs (silent in every build)

    @Test("a session that ended with the connection, and a line confirmed after it")
    func afterDisconnect() {
        var h = ChannelHarness()
        let session = h.session()
        h.command("AT", owner: session)
        h.apply(h.machine.disconnected(.notConnected))
        #expect(h.machine.sessionEnded(session).isEmpty)
        #expect(h.machine.writeCompleted(h.writes[0].0).isEmpty)
        #expect(h.machine.writeFailed(h.writes[0].0, reason: "gone").isEmpty)
        #expect(h.machine.writeWithdrawn(h.writes[0].0).isEmpty)
        #expect(h.machine.cancel(session).isEmpty)
    }

    @Test("a timer that fired as it was cancelled, and a cancellation reported after the grant")
    func lateTimerAndCancellation() throws {
        var h = ChannelHarness()
        let a = h.command("AT")
        let timer = try #require(h.liveTimers.keys.first)
        h.receive("OK\r\n")
        #expect(h.liveTimers.isEmpty)
        #expect(h.machine.timerFired(timer).isEmpty)
        #expect(h.machine.cancel(a).isEmpty)
        let session = h.session()
        #expect(h.granted == [session])
        #expect(h.machine.cancel(session).isEmpty, "a granted session ends when its closure returns")
        #expect(h.machine.currentSession == session)
    }

    @Test("work owned by a session that ended is ordinary work")
    func endedOwner() throws {
        var h = ChannelHarness()
        let session = h.session()
        h.apply(h.machine.sessionEnded(session))
        let id = h.command("AT", owner: session)
        h.receive("OK\r\n")
        #expect(h.outcomes[id] == .success(["OK"]))
        h.apply(try h.machine.startNoWaitCommand("AT+RST", window: .seconds(3), owner: session))
        #expect(h.writtenLines.last == "AT+RST\r\n")
    }

    @Test("a window that closed before its line was confirmed: the late confirmation or failure")
    func windowClosedBeforeConfirmation() throws {
        var h = ChannelHarness()
        h.apply(try h.machine.startNoWaitCommand("AT+PING=1", window: .seconds(3), owner: nil))
        h.receive("OK\r\n")
        #expect(h.machine.isIdle)
        #expect(h.machine.writeFailed(h.writes[0].0, reason: "refused").isEmpty)
        #expect(h.machine.writeCompleted(h.writes[0].0).isEmpty)
    }
}
