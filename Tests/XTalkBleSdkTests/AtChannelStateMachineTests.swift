import Foundation
import Testing
import XTalkTestSupport
@testable import XTalkBleSdk
import XTalkSimulator

/// Drives the channel machine like a driver would, recording everything.
struct ChannelHarness {
    var machine: AtChannelStateMachine
    var actions: [ChannelAction] = []
    /// Timers started and not yet cancelled or fired.
    var liveTimers: [ChannelTimerID: Duration] = [:]
    var writes: [(ChannelWriteID, [UInt8])] = []
    var outcomes: [ChannelRequestID: Result<[String], XTalkBleError>] = [:]
    var completionCount: [ChannelRequestID: Int] = [:]
    var granted: [ChannelRequestID] = []
    /// Lines the machine asked to take back.
    var withdrawals: [ChannelWriteID] = []
    /// Bytes written for no operation (the end of a cut line).
    var unattributedWrites: [[UInt8]] = []
    var events: [ChannelEvent] = []
    /// Each line is handed to the link whole as soon as it is written (as a
    /// pump with room does); its completion comes when the test says. False:
    /// lines stay in the pump until `handOver()`.
    var handsOverAtOnce = true

    init(encoding: XTalkAtEncoding = .plain) {
        machine = AtChannelStateMachine(encoding: encoding)
    }

    mutating func apply(_ new: [ChannelAction]) {
        actions += new
        for action in new {
            switch action {
            case .write(let id, let bytes):
                writes.append((id, bytes))
                if handsOverAtOnce { apply(machine.lineHandedOver(id)) }
            case .withdrawWrite(let id): withdrawals.append(id)
            case .writeUnattributed(let bytes): unattributedWrites.append(bytes)
            case .startTimer(let id, let duration): liveTimers[id] = duration
            case .cancelTimer(let id): liveTimers[id] = nil
            case .succeed(let id, let lines):
                outcomes[id] = .success(lines)
                completionCount[id, default: 0] += 1
            case .fail(let id, let error):
                outcomes[id] = .failure(error)
                completionCount[id, default: 0] += 1
            case .grantSession(let id): granted.append(id)
            case .emit(let event): events.append(event)
            }
        }
    }

    @discardableResult
    mutating func command(
        _ text: String, timeout: Duration = .seconds(3), mode: AtChannelStateMachine.ResponseMode = .automatic,
        log: Bool = true, owner: ChannelRequestID? = nil
    ) -> ChannelRequestID {
        let (id, new) = machine.submitCommand(text, timeout: timeout, mode: mode, log: log, owner: owner)
        apply(new)
        return id
    }

    @discardableResult
    mutating func send(_ hex: String, timeout: Duration = .seconds(5), owner: ChannelRequestID? = nil)
        -> ChannelRequestID
    {
        let (id, new) = machine.submitSend(hexPayload: hex, timeout: timeout, owner: owner)
        apply(new)
        return id
    }

    mutating func session() -> ChannelRequestID {
        let (id, new) = machine.submitSession()
        apply(new)
        return id
    }

    mutating func receive(_ text: String) { apply(machine.bytesReceived(machine.encoding.encodeText(text))) }
    mutating func receiveBytes(_ bytes: [UInt8]) { apply(machine.bytesReceived(bytes)) }
    mutating func completeLastWrite() { if let last = writes.last { apply(machine.writeCompleted(last.0)) } }
    mutating func completeWrites() { for write in writes { apply(machine.writeCompleted(write.0)) } }
    /// Hands every line written so far to the link (with `handsOverAtOnce` false).
    mutating func handOver() { for write in writes { apply(machine.lineHandedOver(write.0)) } }

    /// Fires the live timer of the given duration (the only one, or the newest).
    mutating func fire(_ duration: Duration) {
        let candidates = liveTimers.filter { $0.value == duration }.keys.sorted { $0.raw < $1.raw }
        guard let id = candidates.last else {
            Issue.record("no live timer of \(duration); live: \(liveTimers)")
            return
        }
        liveTimers[id] = nil
        apply(machine.timerFired(id))
    }

    /// Decoded text of every write, in order.
    var writtenLines: [String] {
        writes.map { write in
            String(decoding: write.1.map { $0 ^ machine.encoding.key }, as: UTF8.self)
        }
    }

    var lineEvents: [String] {
        events.compactMap { if case .line(let line, _) = $0 { return line } else { return nil } }
    }
}

extension XTalkAtEncoding {
    /// Encodes text that already carries its terminators (a device stream).
    func encodeText(_ text: String) -> [UInt8] { text.utf8.map { $0 ^ key } }
}

@Suite("AT channel state machine (PROTOCOL.md sections 6 and 7)", .timeLimit(.minutes(5)))
struct AtChannelStateMachineTests {
    // MARK: Commands

    @Test("a command is written with CR LF and completes at OK with its lines")
    func automaticCommand() {
        var h = ChannelHarness()
        let id = h.command("AT+VER?")
        #expect(h.writtenLines == ["AT+VER?\r\n"])
        #expect(h.liveTimers.values.contains(.seconds(3)))
        h.receive("+VER:2.1.0\r\n")
        #expect(h.outcomes[id] == nil)
        h.receive("OK\r\n")
        #expect(h.outcomes[id] == .success(["+VER:2.1.0", "OK"]))
        #expect(h.liveTimers.isEmpty)
        #expect(h.machine.isIdle)
    }

    @Test("command policy: AT+RST holds the channel from its OK until +READY; the next command waits")
    func resetHoldsUntilReady() {
        var h = ChannelHarness()
        let reset = h.command("AT+RST")
        let next = h.command("AT+VER?")
        h.completeWrites()
        h.receive("AT+RST\r\nOK\r\n")
        #expect(h.outcomes[reset] == nil, "OK alone does not end a reset")
        #expect(h.writtenLines == ["AT+RST\r\n"], "nothing is written into a rebooting radio")
        h.receive("+READY\r\n")
        #expect(h.outcomes[reset] == .success(["OK"]))
        #expect(h.events.contains(.line("+READY", sensitive: false)), "+READY is an event as always")
        #expect(h.writtenLines == ["AT+RST\r\n", "AT+VER?\r\n"])
        h.completeWrites()
        h.receive("+VER:2.1.0\r\nOK\r\n")
        #expect(h.outcomes[next] == .success(["+VER:2.1.0", "OK"]))
        #expect(AtCommandPolicy.of("at+rst") == .untilReady && AtCommandPolicy.of("AT+RST?") == .finalResultCode)
    }

    @Test("command policy: a reset refused completes at ERROR; one that never reports ready times out and drains")
    func resetWithoutReady() {
        var refused = ChannelHarness()
        let id = refused.command("AT+RST")
        refused.completeWrites()
        refused.receive("ERROR\r\n")
        #expect(refused.outcomes[id] == .success(["ERROR"]))
        #expect(refused.machine.isIdle)
        var silent = ChannelHarness()
        let lost = silent.command("AT+RST", timeout: .milliseconds(500))
        silent.completeWrites()
        silent.receive("OK\r\n")
        silent.fire(.milliseconds(500))
        #expect(silent.outcomes[lost] == .failure(.timeout))
        #expect(silent.machine.isDraining)
        // A +READY a drain sees is an event only.
        silent.receive("+READY\r\n")
        #expect(silent.completionCount[lost] == 1)
    }

    @Test("the timeout starts when the line is handed to the write pump: not while queued, not when fully written")
    func timeoutStartsAtWrite() {
        var h = ChannelHarness()
        let first = h.command("AT+A", timeout: .milliseconds(100))
        // The timer and the write come together, timer first: the clock runs while the line goes out.
        #expect(h.actions.count == 2)
        guard h.actions.count == 2, case .startTimer(_, .milliseconds(100)) = h.actions[0], case .write = h.actions[1]
        else {
            Issue.record("submitting on a free wire acted \(h.actions)")
            return
        }
        // A command queued behind it starts no timer while it waits.
        let second = h.command("AT+B", timeout: .milliseconds(700))
        #expect(h.actions.count == 2, "queued: no action")
        #expect(!h.liveTimers.values.contains(.milliseconds(700)))
        // The first line is still being written when its timeout fires: it fails with .timeout.
        h.fire(.milliseconds(100))
        #expect(h.outcomes[first] == .failure(.timeout))
        h.completeLastWrite()
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        // The second reaches the front: its timer starts with its write, in the same batch.
        #expect(h.writtenLines == ["AT+A\r\n", "AT+B\r\n"])
        #expect(h.liveTimers.values.contains(.milliseconds(700)))
        let tail = Array(h.actions.suffix(2))
        guard case .startTimer(_, .milliseconds(700)) = tail[0], case .write = tail[1] else {
            Issue.record("the second command's turn acted \(h.actions)")
            return
        }
        #expect(h.outcomes[second] == nil)
    }

    @Test("xor encoding is used for writes and reads")
    func xorCommand() {
        var h = ChannelHarness(encoding: .xor)
        let id = h.command("AT")
        #expect(h.writes[0].1 == Array("AT\r\n".utf8).map { $0 ^ 0x5A })
        h.receive("OK\r\n")
        #expect(h.outcomes[id] == .success(["OK"]))
    }

    @Test("ERROR, +CME ERROR and +ERR are returned, not thrown", arguments: ["ERROR", "+CME ERROR: 4", "+ERR:7"])
    func errorIsReturned(_ final: String) {
        var h = ChannelHarness()
        let id = h.command("AT+FREQ=1")
        h.receive(final + "\r\n")
        #expect(h.outcomes[id] == .success([final]))
    }

    @Test("the echo is dropped, and what came before it was an earlier reply's")
    func echo() {
        var h = ChannelHarness()
        let id = h.command("AT+VER?")
        h.receive("AT+VER?\r\n+VER:1\r\nOK\r\n")
        #expect(h.outcomes[id] == .success(["+VER:1", "OK"]))
        #expect(h.lineEvents == ["AT+VER?", "+VER:1", "OK"])  // still an event

        var h2 = ChannelHarness()
        let id2 = h2.command("AT+X")
        h2.receive("+Y\r\nAT+X\r\nOK\r\n")
        // The device answers in order: a line before our echo answers an earlier line.
        #expect(h2.outcomes[id2] == .success(["OK"]))
        #expect(h2.lineEvents == ["+Y", "AT+X", "OK"])

        var h3 = ChannelHarness()
        let id3 = h3.command("AT+X")
        h3.receive("AT+X\r\n+X:1\r\nOK\r\n")
        #expect(h3.outcomes[id3] == .success(["+X:1", "OK"]))
    }

    @Test("URCs are never part of a response, but are events in order")
    func urcsInsideResponse() {
        var h = ChannelHarness()
        let id = h.command("AT+VER?")
        h.receive("+DI:data=01\r\n+VER:1\r\n+CRCERR:cnt=1\r\n+SENDFIN:OK\r\n+READY\r\n+DI:bad\r\nOK\r\n")
        #expect(h.outcomes[id] == .success(["+VER:1", "OK"]))
        #expect(
            h.events == [
                .line("+DI:data=01", sensitive: false), .radioFrame(Data([1]), XTalkDiMeta()),
                .line("+VER:1", sensitive: false),
                .line("+CRCERR:cnt=1", sensitive: false), .crcError(XTalkDiMeta(diCnt: 1), "+CRCERR:cnt=1"),
                .line("+SENDFIN:OK", sensitive: false), .sendFinished("+SENDFIN:OK"),
                .line("+READY", sensitive: false),
                .line("+DI:bad", sensitive: false),
                .line("OK", sensitive: false),
            ])
    }

    @Test("the completion follows the event of its final line")
    func eventBeforeCompletion() {
        var h = ChannelHarness()
        let id = h.command("AT")
        h.receive("OK\r\n")
        let emitIndex = h.actions.firstIndex(of: .emit(.line("OK", sensitive: false)))
        let succeedIndex = h.actions.firstIndex(of: .succeed(id, ["OK"]))
        #expect(emitIndex != nil && succeedIndex != nil && emitIndex! < succeedIndex!)
    }

    @Test("lines of a log:false command are marked sensitive; URCs are not")
    func sensitiveLines() {
        var h = ChannelHarness()
        h.command("AT+CHAL=00", log: false)
        h.receive("+CHAL:ERR\r\n+DI:data=01\r\nOK\r\n")
        #expect(h.events.contains(.line("+CHAL:ERR", sensitive: true)))
        #expect(h.events.contains(.line("+DI:data=01", sensitive: false)))
        #expect(h.events.contains(.line("OK", sensitive: true)))
        h.command("AT")
        h.receive("OK\r\n")
        #expect(h.events.last == .line("OK", sensitive: false))
    }

    @Test("unsolicited non-URC lines while idle are events only")
    func idleLines() {
        var h = ChannelHarness()
        h.receive("hello\r\nOK\r\n")
        #expect(h.lineEvents == ["hello", "OK"])
        let id = h.command("AT")
        #expect(h.outcomes[id] == nil)
        h.receive("OK\r\n")
        #expect(h.outcomes[id] == .success(["OK"]))
    }

    @Test("a line that began before the command's first byte is not its response")
    func staleTail() {
        var h = ChannelHarness()
        h.receive("O")  // a late partial line
        let id = h.command("AT")
        h.receive("K\r\n")  // completes the old line
        #expect(h.outcomes[id] == nil)
        #expect(h.lineEvents == ["OK"])
        h.receive("OK\r\n")
        #expect(h.outcomes[id] == .success(["OK"]))
    }

    // MARK: Timeouts, collection windows, drain

    @Test("an automatic command times out with .timeout and the channel drains")
    func timeoutDrains() {
        var h = ChannelHarness()
        let first = h.command("AT+SLOW", timeout: .milliseconds(500))
        let second = h.command("AT")
        h.completeWrites()
        #expect(h.writtenLines == ["AT+SLOW\r\n"])
        h.fire(.milliseconds(500))
        #expect(h.outcomes[first] == .failure(.timeout))
        #expect(h.machine.isDraining)
        #expect(h.writtenLines.count == 1)  // the next command waits for quiet
        h.receive("+SLOW:1\r\n")  // a late line: event only, restarts the quiet period
        h.receive("OK\r\n")
        #expect(h.lineEvents == ["+SLOW:1", "OK"])
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(h.writtenLines == ["AT+SLOW\r\n", "AT\r\n"])
        #expect(h.outcomes[second] == nil)
        h.receive("OK\r\n")
        #expect(h.outcomes[second] == .success(["OK"]))
        #expect(h.liveTimers.isEmpty)
    }

    @Test("URCs do not keep a drain going; garbage does")
    func drainQuietRules() {
        var h = ChannelHarness()
        h.command("AT", timeout: .milliseconds(100))
        h.completeWrites()
        h.fire(.milliseconds(100))
        let quietTimersBefore = h.actions.filter {
            if case .startTimer(_, AtChannelStateMachine.defaultDrainQuiet) = $0 { true } else { false }
        }.count
        h.receive("+DI:data=01\r\n+SENDFIN:OK\r\n")
        let afterURC = h.actions.filter {
            if case .startTimer(_, AtChannelStateMachine.defaultDrainQuiet) = $0 { true } else { false }
        }.count
        #expect(afterURC == quietTimersBefore)
        h.receiveBytes([0x01, 0x02, 0x0A])
        let afterGarbage = h.actions.filter {
            if case .startTimer(_, AtChannelStateMachine.defaultDrainQuiet) = $0 { true } else { false }
        }.count
        #expect(afterGarbage == quietTimersBefore + 1)
    }

    @Test("a drain ends at its 1 s bound even when the device never goes quiet")
    func drainBound() {
        var h = ChannelHarness()
        h.command("AT", timeout: .milliseconds(100))
        let next = h.command("AT+NEXT")
        h.completeWrites()
        h.fire(.milliseconds(100))
        for _ in 0..<20 { h.receiveBytes([0x01, 0x6E, 0x6F, 0x0D, 0x0A]) }  // unprintable noise lines
        #expect(h.writtenLines.count == 1)
        h.fire(AtChannelStateMachine.defaultDrainBound)
        #expect(h.writtenLines.last == "AT+NEXT\r\n")
        #expect(h.liveTimers.count == 1)  // only the next command's timeout
        // Not quiet: the timed-out command's answer is still owed, and comes first.
        h.receive("OK\r\n")
        #expect(h.outcomes[next] == nil)
        h.receive("OK\r\n")
        #expect(h.outcomes[next] == .success(["OK"]))
    }

    @Test("a quiet period that ends inside a partial line is extended")
    func drainWaitsForPartialLine() {
        var h = ChannelHarness()
        h.command("AT", timeout: .milliseconds(100))
        h.command("AT+NEXT")
        h.completeWrites()
        h.fire(.milliseconds(100))
        h.receive("LATE RES")
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(h.writtenLines.count == 1)
        h.receive("PONSE\r\n")
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(h.writtenLines.last == "AT+NEXT\r\n")
    }

    @Test("a drain does not start before the line is fully written: neither quiet period nor bound")
    func drainWaitsForWrite() {
        var h = ChannelHarness()
        let id = h.command("AT+LONG")
        let next = h.command("AT+NEXT")
        h.apply(h.machine.cancel(id))
        #expect(h.outcomes[id] == .failure(.cancelled))
        #expect(h.withdrawals == [h.writes[0].0], "the line is asked back")
        #expect(h.liveTimers.isEmpty, "no drain timer runs while our line is still going out")
        // The line had started: it is completed, then the quarantine runs.
        h.completeLastWrite()
        #expect(h.liveTimers.values.contains(AtChannelStateMachine.defaultDrainQuiet))
        #expect(h.liveTimers.values.contains(AtChannelStateMachine.defaultDrainBound))
        h.receive("OK\r\n")  // the cancelled command's answer: an event only
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(h.writtenLines.last == "AT+NEXT\r\n")
        h.receive("OK\r\n")
        #expect(h.outcomes[next] == .success(["OK"]))
    }

    @Test("a line taken back before it started needs no quarantine")
    func withdrawnWrite() {
        var h = ChannelHarness()
        let id = h.command("AT+SEND=00", timeout: .milliseconds(100))
        let next = h.command("AT+NEXT")
        h.fire(.milliseconds(100))
        #expect(h.outcomes[id] == .failure(.timeout))
        #expect(h.withdrawals.count == 1)
        h.apply(h.machine.writeWithdrawn(h.writes[0].0))
        #expect(h.writtenLines.last == "AT+NEXT\r\n", "nothing reached the device, so the next command goes at once")
        let stale = h.machine.writeWithdrawn(h.writes[0].0)
        #expect(stale.isEmpty, "a stale withdrawal changes nothing")
        h.receive("OK\r\n")
        #expect(h.outcomes[next] == .success(["OK"]))
    }

    @Test("a failed write after a cancellation starts the quarantine")
    func failedWriteDuringDrain() {
        var h = ChannelHarness()
        let id = h.command("AT+X")
        h.apply(h.machine.cancel(id))
        #expect(h.liveTimers.isEmpty)
        h.apply(h.machine.writeFailed(h.writes[0].0, reason: "refused"))
        #expect(h.liveTimers.values.contains(AtChannelStateMachine.defaultDrainQuiet))
        #expect(h.completionCount[id] == 1)
    }

    @Test("a new connection's channel can start in quarantine until an old deadline, and quiet after it")
    func quarantine() {
        var h = ChannelHarness()
        h.apply(h.machine.quarantine(for: .seconds(2)))
        #expect(h.machine.isDraining)
        #expect(h.liveTimers.values.contains(.seconds(2)))
        #expect(h.liveTimers.values.contains(.seconds(3)))
        let id = h.command("AT+NEW")
        #expect(h.writes.isEmpty)
        h.receive("+OLD:1\r\nOK\r\n")  // the old connection's late answer
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(
            h.writes.isEmpty, "quiet, but the old connection may answer until its deadline (chaos seed 77506870019032)")
        h.receive("+OLD:2\r\nOK\r\n")  // another old command's answer, still before the deadline
        h.fire(.seconds(2))
        #expect(h.writes.isEmpty, "the deadline passed, but a line came less than the quiet period ago")
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(h.writtenLines == ["AT+NEW\r\n"])
        #expect(h.liveTimers.count == 1, "only the command's own timer; the bound was cancelled: \(h.liveTimers)")
        h.receive("+NEW:1\r\nOK\r\n")
        #expect(h.outcomes[id] == .success(["+NEW:1", "OK"]))
        // Quiet all along: the quarantine ends at the deadline.
        var quiet = ChannelHarness()
        quiet.apply(quiet.machine.quarantine(for: .seconds(2)))
        let next = quiet.command("AT")
        quiet.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(quiet.writes.isEmpty)
        quiet.fire(.seconds(2))
        #expect(quiet.writtenLines == ["AT\r\n"])
        #expect(quiet.liveTimers.count == 1, "only the command's own timer: \(quiet.liveTimers)")
        quiet.receive("OK\r\n")
        #expect(quiet.outcomes[next] == .success(["OK"]))
        var idle = ChannelHarness()
        let none = idle.machine.quarantine(for: .zero)
        #expect(none.isEmpty)
        // (Only before any work: quarantining a busy channel is a driver bug, see DriverContractTests.)
    }

    @Test(
        """
        a reconnect's handover: a cut line is ended in its own encoding, unattributed, and quarantined for at least \
        the drain bound
        """
    )
    func handoverWithCutLine() {
        var h = ChannelHarness(encoding: .xor)  // the app switched to xor after the line was cut in plain
        h.apply(h.machine.resume(after: ReconnectHandover(owedFor: .milliseconds(300), cutLineEncoding: .plain)))
        #expect(h.unattributedWrites == [Array("\r\n".utf8)], "CR LF in plain, the cut line's encoding")
        #expect(h.writes.isEmpty, "no operation's line")
        #expect(h.machine.lastLineEncoding == .plain, "a line lost again now would be the repair line, in plain")
        #expect(h.machine.isDraining)
        #expect(
            h.liveTimers.values.contains(AtChannelStateMachine.defaultDrainBound),
            "at least the drain bound: \(h.liveTimers)")
        let id = h.command("AT")
        // The device's answer (in its encoding) to the half line:
        h.receiveBytes(XTalkAtEncoding.xor.encodeText("ERROR\r\n"))
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(h.writes.isEmpty, "quiet, but not before the floor")
        h.fire(AtChannelStateMachine.defaultDrainBound)
        #expect(h.writes.map(\.1) == [XTalkAtEncoding.xor.encodeLine("AT")], "the command, in the app's encoding")
        #expect(h.machine.lastLineEncoding == .xor)
        h.receiveBytes(XTalkAtEncoding.xor.encodeText("OK\r\n"))
        #expect(h.outcomes[id] == .success(["OK"]), "the ERROR stayed out of the first command")
    }

    @Test(
        "a reconnect's handover: answers still owed quarantine until their deadline; nothing left behind, nothing done")
    func handoverOwedOnly() {
        var h = ChannelHarness()
        h.apply(h.machine.resume(after: ReconnectHandover(owedFor: .seconds(2))))
        #expect(h.unattributedWrites.isEmpty)
        #expect(h.liveTimers.values.contains(.seconds(2)) && h.liveTimers.values.contains(.seconds(3)))
        var fresh = ChannelHarness()
        #expect(ReconnectHandover().isEmpty)
        #expect(fresh.machine.resume(after: ReconnectHandover()).isEmpty)
        fresh.command("AT")
        #expect(fresh.writtenLines == ["AT\r\n"])
    }

    @Test("lines after a log:false command ends abnormally stay sensitive until the next command")
    func sensitiveAftermath() {
        var h = ChannelHarness()
        h.command("AT+CHAL=00", timeout: .milliseconds(100), log: false)
        h.completeWrites()
        h.fire(.milliseconds(100))
        h.receive("+CHAL:SECRET\r\n+DI:data=01\r\n")
        #expect(h.events.contains(.line("+CHAL:SECRET", sensitive: true)))
        #expect(h.events.contains(.line("+DI:data=01", sensitive: false)))
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        h.receive("LATE\r\n")
        #expect(h.events.last == .line("LATE", sensitive: true), "still before any other command")
        h.command("AT")
        h.receive("OK\r\n")
        #expect(h.events.last == .line("OK", sensitive: false))
    }

    @Test("collectUntilTimeout returns every non-URC line of the window")
    func collectWindow() {
        var h = ChannelHarness()
        let id = h.command("AT+AUTH?", timeout: .milliseconds(800), mode: .collectUntilTimeout)
        h.completeWrites()
        h.receive("AT+AUTH?\r\n+AUTH:1\r\nOK\r\n+DI:data=01\r\nextra\r\n")
        #expect(h.outcomes[id] == nil)
        h.fire(.milliseconds(800))
        #expect(h.outcomes[id] == .success(["+AUTH:1", "OK", "extra"]))
        #expect(h.machine.isIdle)  // a final code, no garbage, no partial line: clean
    }

    @Test("an empty collection window returns no lines and quarantines the channel")
    func emptyCollectWindow() {
        var h = ChannelHarness()
        let id = h.command("AT+AUTH?", timeout: .milliseconds(800), mode: .collectUntilTimeout)
        h.completeWrites()
        h.fire(.milliseconds(800))
        #expect(h.outcomes[id] == .success([]))
        #expect(h.machine.isDraining)
    }

    @Test("garbage during a collection window quarantines the channel", arguments: [true, false])
    func garbageCollectWindow(partial: Bool) {
        var h = ChannelHarness()
        let id = h.command("AT+AUTH?", timeout: .milliseconds(800), mode: .collectUntilTimeout)
        h.completeWrites()
        h.receive("OK\r\n")
        if partial { h.receive("+AU") } else { h.receiveBytes([0x1F, 0x0A]) }
        h.fire(.milliseconds(800))
        #expect(h.outcomes[id] == .success(["OK"]))
        #expect(h.machine.isDraining)
    }

    // MARK: RF sends

    @Test("an RF send completes at +SENDFIN:OK after OK")
    func rfSend() {
        var h = ChannelHarness()
        let id = h.send("48656C6C6F")
        #expect(h.writtenLines == ["AT+SEND=48656C6C6F\r\n"])
        h.receive("AT+SEND=48656C6C6F\r\nOK\r\n")
        #expect(h.outcomes[id] == nil)
        h.receive("+SENDFIN:OK\r\n")
        #expect(h.outcomes[id] == .success([]))
        #expect(h.events.contains(.sendFinished("+SENDFIN:OK")))
    }

    @Test("an RF send fails with writeFailed on ERROR or +SENDFIN:FAIL")
    func rfSendFailures() {
        var h = ChannelHarness()
        let rejected = h.send("00")
        h.receive("ERROR\r\n")
        #expect(h.outcomes[rejected] == .failure(.writeFailed("the device rejected the frame: ERROR")))
        let failed = h.send("00")
        h.receive("OK\r\n+SENDFIN:FAIL,channel busy\r\n")
        #expect(h.outcomes[failed] == .failure(.writeFailed("the radio could not send the frame: channel busy")))
        #expect(h.machine.isIdle)
    }

    @Test("a +SENDFIN: before the send's OK belongs to an older frame")
    func earlySendFinished() {
        var h = ChannelHarness()
        let id = h.send("00")
        h.receive("+SENDFIN:OK\r\n")
        #expect(h.outcomes[id] == nil)
        h.receive("OK\r\n+SENDFIN:OK\r\n")
        #expect(h.outcomes[id] == .success([]))
    }

    @Test("an RF send without OK or +SENDFIN times out", arguments: [false, true])
    func rfSendTimeout(accepted: Bool) {
        var h = ChannelHarness()
        let id = h.send("00", timeout: .milliseconds(700))
        if accepted { h.receive("OK\r\n") }
        h.fire(.milliseconds(700))
        #expect(h.outcomes[id] == .failure(.timeout))
        #expect(h.machine.isDraining)
    }

    // MARK: Queue, sessions, isolation

    @Test("operations run strictly one at a time in FIFO order")
    func fifo() {
        var h = ChannelHarness()
        let a = h.command("AT+A")
        let b = h.send("01")
        let c = h.command("AT+C")
        #expect(h.writtenLines == ["AT+A\r\n"])
        h.receive("OK\r\n")
        #expect(h.writtenLines.last == "AT+SEND=01\r\n")
        h.receive("OK\r\n")
        #expect(h.writtenLines.count == 2)  // still waiting for +SENDFIN
        h.receive("+SENDFIN:OK\r\n")
        #expect(h.writtenLines.last == "AT+C\r\n")
        h.receive("+C:1\r\nOK\r\n")
        #expect(h.outcomes[a] == .success(["OK"]))
        #expect(h.outcomes[b] == .success([]))
        #expect(h.outcomes[c] == .success(["+C:1", "OK"]))
    }

    @Test("a session runs its own commands back to back; others wait")
    func session() {
        var h = ChannelHarness()
        let busy = h.command("AT+FIRST")
        let session = h.session()
        #expect(h.granted.isEmpty)
        h.receive("OK\r\n")
        #expect(h.granted == [session])
        let outsider = h.command("AT+OUTSIDE")
        let own1 = h.command("AT+ONE", owner: session)
        #expect(h.writtenLines.last == "AT+ONE\r\n")
        h.receive("OK\r\n")
        let own2 = h.command("AT+TWO", owner: session)
        #expect(h.writtenLines.last == "AT+TWO\r\n")
        h.receive("OK\r\n")
        #expect(h.writtenLines.count == 3)
        h.apply(h.machine.sessionEnded(session))
        #expect(h.writtenLines.last == "AT+OUTSIDE\r\n")
        h.receive("OK\r\n")
        for id in [busy, own1, own2, outsider] { #expect(h.outcomes[id] == .success(["OK"])) }
    }

    @Test("work left queued by an ended session joins the FIFO at its place")
    func sessionLeftovers() {
        var h = ChannelHarness()
        let session = h.session()
        let outsider = h.command("AT+OUT")
        h.command("AT+IN1", owner: session)
        let leftover = h.command("AT+IN2", owner: session)
        h.apply(h.machine.sessionEnded(session))
        h.receive("OK\r\n")  // AT+IN1 completes
        #expect(h.writtenLines == ["AT+IN1\r\n", "AT+OUT\r\n"])
        h.receive("OK\r\n")
        #expect(h.writtenLines.last == "AT+IN2\r\n")
        h.receive("OK\r\n")
        #expect(h.outcomes[outsider] == .success(["OK"]))
        #expect(h.outcomes[leftover] == .success(["OK"]))
    }

    @Test("a command naming an ended session is an ordinary command")
    func staleOwner() {
        var h = ChannelHarness()
        let session = h.session()
        h.apply(h.machine.sessionEnded(session))
        let second = h.session()
        let stale = h.command("AT+STALE", owner: session)
        #expect(h.writtenLines.isEmpty)  // waits for the second session
        h.apply(h.machine.sessionEnded(second))
        #expect(h.writtenLines == ["AT+STALE\r\n"])
        _ = stale
    }

    @Test("a no-wait command opens a window that ends at its final code")
    func noWaitCommand() throws {
        var h = ChannelHarness()
        h.apply(try h.machine.startNoWaitCommand("AT+PING=1", window: .seconds(3), owner: nil))
        #expect(h.writtenLines == ["AT+PING=1\r\n"])
        #expect(throws: XTalkBleError.busy) { try h.machine.startNoWaitCommand("AT", window: .seconds(3), owner: nil) }
        #expect(throws: XTalkBleError.busy) {
            try h.machine.startNoWaitSend(hexPayload: "00", window: .seconds(5), owner: nil)
        }
        let queued = h.command("AT+VER?")
        #expect(h.writtenLines.count == 1)
        h.receive("OK\r\n")
        #expect(h.writtenLines.last == "AT+VER?\r\n")
        h.receive("+VER:1\r\nOK\r\n")
        #expect(h.outcomes[queued] == .success(["+VER:1", "OK"]))
    }

    @Test("a no-wait AT+RST follows the command policy: its window ends at +READY, not at OK")
    func noWaitResetUntilReady() throws {
        var h = ChannelHarness()
        h.apply(try h.machine.startNoWaitCommand("at+rst", window: .seconds(3), owner: nil))
        let queued = h.command("AT+VER?")
        h.receive("OK\r\n")
        #expect(h.writtenLines == ["at+rst\r\n"], "nothing is written into a rebooting radio")
        #expect(throws: XTalkBleError.busy) { try h.machine.startNoWaitCommand("AT", window: .seconds(3), owner: nil) }
        h.receive("ERROR\r\n")  // noise while it reboots: an event only
        #expect(h.writtenLines.count == 1)
        h.receive("+READY\r\n")
        #expect(h.writtenLines.last == "AT+VER?\r\n")
        h.receive("+VER:1\r\nOK\r\n")
        #expect(h.outcomes[queued] == .success(["+VER:1", "OK"]))

        var refused = ChannelHarness()
        refused.apply(try refused.machine.startNoWaitCommand("AT+RST", window: .seconds(3), owner: nil))
        refused.receive("ERROR\r\n")
        #expect(refused.machine.isIdle, "a refused reset does not wait for +READY")

        var silent = ChannelHarness()
        silent.apply(try silent.machine.startNoWaitCommand("AT+RST", window: .seconds(3), owner: nil))
        silent.completeWrites()
        silent.receive("OK\r\n")
        silent.fire(.seconds(3))
        #expect(silent.machine.isDraining, "no +READY within the window: the channel is quarantined")
    }

    @Test("a no-wait send's window ends at +SENDFIN:, not at OK")
    func noWaitSend() throws {
        var h = ChannelHarness()
        h.apply(try h.machine.startNoWaitSend(hexPayload: "0102", window: .seconds(5), owner: nil))
        #expect(h.writtenLines == ["AT+SEND=0102\r\n"])
        h.receive("OK\r\n")
        #expect(throws: XTalkBleError.busy) { try h.machine.startNoWaitCommand("AT", window: .seconds(3), owner: nil) }
        h.receive("+SENDFIN:OK\r\n")
        h.apply(try h.machine.startNoWaitCommand("AT", window: .seconds(3), owner: nil))
        #expect(h.writtenLines.count == 2)
    }

    @Test("a no-wait send's window also ends when the device rejects the frame")
    func noWaitSendRejected() throws {
        var h = ChannelHarness()
        h.apply(try h.machine.startNoWaitSend(hexPayload: "00", window: .seconds(5), owner: nil))
        h.receive("ERROR\r\n")
        #expect(h.machine.isIdle)
    }

    @Test("a window that times out quarantines the channel")
    func noWaitTimeout() throws {
        var h = ChannelHarness()
        h.apply(try h.machine.startNoWaitCommand("AT+RST", window: .seconds(3), owner: nil))
        h.completeWrites()
        h.fire(.seconds(3))
        #expect(h.machine.isDraining)
        #expect(throws: XTalkBleError.busy) { try h.machine.startNoWaitCommand("AT", window: .seconds(3), owner: nil) }
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(h.machine.isIdle)
    }

    @Test("no-wait is busy during a transaction and inside another caller's session")
    func noWaitBusy() throws {
        var h = ChannelHarness()
        h.command("AT")
        #expect(throws: XTalkBleError.busy) { try h.machine.startNoWaitCommand("AT", window: .seconds(3), owner: nil) }
        h.receive("OK\r\n")
        let session = h.session()
        #expect(throws: XTalkBleError.busy) {
            try h.machine.startNoWaitSend(hexPayload: "00", window: .seconds(5), owner: nil)
        }
        h.apply(try h.machine.startNoWaitCommand("AT", window: .seconds(3), owner: session))
        #expect(h.writtenLines.last == "AT\r\n")
    }

    // MARK: Cancellation

    @Test("cancelling a queued operation removes it; others keep their order")
    func cancelQueued() {
        var h = ChannelHarness()
        h.command("AT+A")
        let b = h.command("AT+B")
        let c = h.command("AT+C")
        h.apply(h.machine.cancel(b))
        #expect(h.outcomes[b] == .failure(.cancelled))
        h.receive("OK\r\n")
        #expect(h.writtenLines == ["AT+A\r\n", "AT+C\r\n"])
        _ = c
    }

    @Test("cancelling an active command fails it once and drains; late lines stay events")
    func cancelActive() {
        var h = ChannelHarness()
        let a = h.command("AT+A")
        let b = h.command("AT+B")
        h.completeWrites()
        h.apply(h.machine.cancel(a))
        h.apply(h.machine.cancel(a))  // twice: ignored
        #expect(h.completionCount[a] == 1)
        #expect(h.outcomes[a] == .failure(.cancelled))
        h.receive("+A:late\r\nOK\r\n")
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        #expect(h.writtenLines.last == "AT+B\r\n")
        h.receive("OK\r\n")
        #expect(h.outcomes[b] == .success(["OK"]))
    }

    @Test("cancelling a completed request does nothing")
    func cancelCompleted() {
        var h = ChannelHarness()
        let a = h.command("AT")
        h.receive("OK\r\n")
        #expect(h.machine.cancel(a).isEmpty)
        #expect(h.completionCount[a] == 1)
    }

    @Test("cancelling a waiting session fails it")
    func cancelSession() {
        var h = ChannelHarness()
        h.command("AT")
        let session = h.session()
        h.apply(h.machine.cancel(session))
        #expect(h.outcomes[session] == .failure(.cancelled))
        h.receive("OK\r\n")
        #expect(h.granted.isEmpty)
    }

    // MARK: Write failures

    @Test("a failed write fails the command with writeFailed and drains")
    func writeFailure() {
        var h = ChannelHarness()
        let a = h.command("AT")
        h.apply(h.machine.writeFailed(h.writes[0].0, reason: "link refused the write"))
        #expect(h.outcomes[a] == .failure(.writeFailed("link refused the write")))
        #expect(h.machine.isDraining)
        #expect(h.machine.writeFailed(h.writes[0].0, reason: "again").isEmpty)
    }

    // MARK: Disconnect in every state

    enum Phase: String, CaseIterable, Sendable {
        case idle, queued, writing, awaitingResponse, midLine, collecting, sendAwaitingFinish, isolation, draining,
            session
    }

    @Test("disconnect fails everything pending exactly once, in every state", arguments: Phase.allCases)
    func disconnectEverywhere(_ phase: Phase) throws {
        var h = ChannelHarness()
        var pending: [ChannelRequestID] = []
        switch phase {
        case .idle:
            break
        case .queued:
            pending.append(h.command("AT+A"))
            pending.append(h.command("AT+B"))
            pending.append(h.session())
        case .writing:
            pending.append(h.command("AT+A"))
        case .awaitingResponse:
            pending.append(h.command("AT+A"))
            h.completeWrites()
            h.receive("+A:1\r\n")
        case .midLine:
            pending.append(h.command("AT+A"))
            h.completeWrites()
            h.receive("+A:par")
        case .collecting:
            pending.append(h.command("AT+A", mode: .collectUntilTimeout))
            h.completeWrites()
            h.receive("OK\r\n")
        case .sendAwaitingFinish:
            pending.append(h.send("00"))
            h.receive("OK\r\n")
        case .isolation:
            h.apply(try h.machine.startNoWaitSend(hexPayload: "00", window: .seconds(5), owner: nil))
            pending.append(h.command("AT+Q"))
        case .draining:
            let a = h.command("AT+A", timeout: .milliseconds(10))
            h.fire(.milliseconds(10))
            #expect(h.outcomes[a] == .failure(.timeout))
            pending.append(h.command("AT+B"))
        case .session:
            let session = h.session()
            pending.append(h.command("AT+OUT"))
            pending.append(h.command("AT+IN", owner: session))
        }
        h.apply(h.machine.disconnected(.notConnected))
        for id in pending {
            #expect(h.outcomes[id] == .failure(.notConnected), "\(id)")
            #expect(h.completionCount[id] == 1)
        }
        #expect(h.liveTimers.isEmpty, "every timer is cancelled")
        #expect(h.machine.isClosed)
        // Nothing of the old connection is delivered afterwards.
        let eventsBefore = h.events.count
        h.receive("OK\r\n+DI:data=01\r\n")
        #expect(h.events.count == eventsBefore)
        // Later submissions fail at once; later events are ignored.
        let late = h.command("AT")
        #expect(h.outcomes[late] == .failure(.notConnected))
        #expect(throws: XTalkBleError.notConnected) {
            try h.machine.startNoWaitCommand("AT", window: .seconds(3), owner: nil)
        }
        #expect(h.machine.disconnected(.cancelled).isEmpty)
        for id in pending { #expect(h.completionCount[id] == 1) }
    }

    @Test("a user disconnect fails pending work with .cancelled")
    func userDisconnect() {
        var h = ChannelHarness()
        let a = h.command("AT")
        h.apply(h.machine.disconnected(.cancelled))
        #expect(h.outcomes[a] == .failure(.cancelled))
    }

    // MARK: Encoding and chunking

    @Test("setEncoding discards the partial line and switches both directions")
    func setEncoding() {
        var h = ChannelHarness(encoding: .plain)
        h.receive("GARB")
        h.machine.setEncoding(.xor)
        let id = h.command("AT")
        #expect(h.writes[0].1 == Array("AT\r\n".utf8).map { $0 ^ 0x5A })
        // The device ends the discarded line (raw, stale), then answers.
        h.receive("AGE\r\nOK\r\n")  // encoded with xor by the harness
        #expect(h.outcomes[id] == .success(["OK"]))
        #expect(h.lineEvents == ["OK"])
        #expect(h.events.contains(.raw(Data(XTalkAtEncoding.xor.encodeText("AGE\r\n")))))
    }

    @Test(
        """
        lines that arrive in the chunk that ended the previous command are not the next command's (chaos seed \
        1467902980258)
        """
    )
    func linesBeforeTheWriteInTheSameChunk() {
        for echo in [false, true] {
            var h = ChannelHarness()
            let first = h.command("AT+PING=a")
            let second = h.command("AT+PING=b")
            h.completeWrites()
            // One notification: the end of A's reply, a late line, and half of another.
            h.receive("+PING:a\r\nOK\r\n+PING:late\r\nO")
            #expect(h.outcomes[first] == .success(["+PING:a", "OK"]))
            #expect(h.writes.count == 2, "B was written when A completed")
            h.completeWrites()
            h.receive("K\r\n" + (echo ? "AT+PING=b\r\n" : "") + "+PING:b\r\nOK\r\n")
            #expect(h.outcomes[second] == .success(["+PING:b", "OK"]), "echo \(echo)")
            #expect(
                h.lineEvents == ["+PING:a", "OK", "+PING:late", "OK"] + (echo ? ["AT+PING=b"] : []) + ["+PING:b", "OK"])
        }
    }

    @Test(
        """
        a late reply that straddles the next command's first byte stays out of its response (chaos seed 1467902980258)
        """,
        arguments: [false, true])
    func lateReplyStraddlingTheWrite(partial: Bool) {
        var h = ChannelHarness()
        let first = h.command("AT+PING=a")
        let second = h.command("AT+PING=b")
        h.completeWrites()
        // A's reply ends and a late reply of an older command begins in the
        // same notification, before B's first byte (B is written as A completes);
        // the late line is whole, or still partial.
        h.receive(partial ? "OK\r\n+PING:la" : "OK\r\n+PING:late\r\n")
        #expect(h.outcomes[first] == .success(["OK"]))
        h.completeWrites()
        h.receive((partial ? "te\r\n" : "") + "OK\r\n+PING:b\r\nOK\r\n")
        #expect(h.outcomes[second] == .success(["+PING:b", "OK"]))
        #expect(h.lineEvents == ["OK", "+PING:late", "OK", "+PING:b", "OK"])
    }

    @Test(
        """
        a late reply begun while the channel is idle and ended after the next write stays out of its response (chaos \
        seed 1467902980258)
        """,
        arguments: [false, true])
    func lateReplyBegunWhileIdle(endsWhileIdle: Bool) {
        var h = ChannelHarness()
        let first = h.command("AT+PING=a")
        h.completeWrites()
        h.receive("+PING:a\r\nOK\r\n")
        #expect(h.outcomes[first] == .success(["+PING:a", "OK"]))
        // Nothing on the wire: an older command's late reply begins (and maybe ends).
        h.receive("+PING:late\r\n" + (endsWhileIdle ? "OK\r\n" : ""))
        let second = h.command("AT+PING=b")
        h.completeWrites()
        h.receive((endsWhileIdle ? "" : "OK\r\n") + "+PING:b\r\nOK\r\n")
        #expect(h.outcomes[second] == .success(["+PING:b", "OK"]))
        #expect(h.lineEvents == ["+PING:a", "OK", "+PING:late", "OK", "+PING:b", "OK"])
    }

    @Test(
        """
        a drain that ends at its bound in the middle of a late reply leaves it open: its final code is not the next \
        command's
        """
    )
    func drainBoundInsideALateReply() {
        var h = ChannelHarness()
        h.command("AT+PING=a", timeout: .milliseconds(100))
        let next = h.command("AT+PING=b")
        h.completeWrites()
        h.fire(.milliseconds(100))
        for _ in 0..<20 { h.receiveBytes([0x01, 0x0D, 0x0A]) }
        h.receive("+PING:a\r\n")
        h.fire(AtChannelStateMachine.defaultDrainBound)
        #expect(h.writtenLines.last == "AT+PING=b\r\n")
        h.completeWrites()
        h.receive("OK\r\n+PING:b\r\nOK\r\n")
        #expect(h.outcomes[next] == .success(["+PING:b", "OK"]))
    }

    @Test(
        """
        a switch asked for during a transaction waits for it: its reply stays whole, the next command uses the new \
        encoding
        """
    )
    func setEncodingDuringTransaction() {
        var h = ChannelHarness(encoding: .xor)
        let first = h.command("AT+VER?")
        h.completeWrites()
        h.receiveBytes(XTalkAtEncoding.xor.encodeText("+VER:2."))
        h.machine.setEncoding(.plain)
        #expect(h.machine.encoding == .plain, "the encoding of the next operation")
        let second = h.command("AT")
        #expect(h.writes.count == 1, "the second command waits its turn")
        h.receiveBytes(XTalkAtEncoding.xor.encodeText("1.0\r\nOK\r\n"))
        #expect(h.outcomes[first] == .success(["+VER:2.1.0", "OK"]))
        #expect(h.writes.count == 2)
        #expect(h.writes.last?.1 == Array("AT\r\n".utf8), "written in plain")
        #expect(h.outcomes[second] == nil)
    }

    @Test("a switch asked for during a transaction that times out applies when the drain starts")
    func setEncodingBeforeTimeout() {
        var h = ChannelHarness(encoding: .plain)
        let first = h.command("AT+SLOW", timeout: .milliseconds(100))
        h.completeWrites()
        h.machine.setEncoding(.xor)
        h.receiveBytes(XTalkAtEncoding.plain.encodeText("+SLO"))
        h.fire(.milliseconds(100))
        #expect(h.outcomes[first] == .failure(.timeout))
        // The partial line of the old encoding was discarded with the switch;
        // its rest is raw, the next line is whole.
        h.receiveBytes(XTalkAtEncoding.xor.encodeText("W\r\n+URC:1\r\n"))
        #expect(h.lineEvents == ["+URC:1"])
    }

    /// A recorded session: a command answered amid URC and garbage traffic, an
    /// RF send, a timed-out command, the drain, and the next command.
    static func recordedSession(encoding: XTalkAtEncoding, chunks: (Int) -> [Int]) -> [ChannelAction] {
        var h = ChannelHarness(encoding: encoding)
        let stream1 = encoding.encodeText(
            "+DI:cnt=1,len=2,rssi=-80,data=ABCD\r\nAT+VER?\r\n+VER:2.1\r\n\u{01}\u{02}\r\n+CRCERR:cnt=2\r\nOK\r\n")
        let stream2 = encoding.encodeText("OK\r\n+DI:cnt=3,data=00\r\n+SENDFIN:OK\r\n")
        let stream3 = encoding.encodeText("+LATE:1\r\nOK\r\n")
        let stream4 = encoding.encodeText("+PING:abc\r\nOK\r\n")
        func feed(_ bytes: [UInt8]) {
            var offset = 0
            for size in chunks(bytes.count) where offset < bytes.count {
                let end = min(bytes.count, offset + size)
                h.apply(h.machine.bytesReceived(bytes[offset..<end]))
                offset = end
            }
        }
        h.command("AT+VER?")
        h.completeWrites()
        feed(stream1)
        h.send("0102")
        h.completeWrites()
        feed(stream2)
        h.command("AT+SLOW", timeout: .milliseconds(300))
        h.command("AT+PING=abc")
        h.completeWrites()
        h.fire(.milliseconds(300))
        feed(stream3)
        h.fire(AtChannelStateMachine.defaultDrainQuiet)
        h.completeWrites()
        feed(stream4)
        return h.actions
    }

    @Test("every split of a recorded session yields the identical action sequence (property)")
    func splitInvariance() {
        for encoding in XTalkAtEncoding.allCases {
            let reference = Self.recordedSession(encoding: encoding) { [$0] }
            #expect(reference.contains(.succeed(ChannelRequestID(raw: 1), ["+VER:2.1", "OK"])))
            #expect(reference.contains { if case .succeed(_, ["+PING:abc", "OK"]) = $0 { true } else { false } })
            #expect(Self.recordedSession(encoding: encoding) { Array(repeating: 1, count: $0) } == reference)
            for mtu in [23, 185, 247] {
                #expect(Self.recordedSession(encoding: encoding) { Array(repeating: mtu - 3, count: $0) } == reference)
            }
            let seed = PropertySeed()
            let rng = SimulatorRandom(seed: seed.value)
            for _ in 0..<100 {
                let actions = Self.recordedSession(encoding: encoding) {
                    randomChunks(total: $0, maxChunk: 24, using: rng)
                }
                #expect(actions == reference, "\(seed)")
            }
        }
    }
}
