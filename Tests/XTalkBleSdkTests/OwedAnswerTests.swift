import Foundation
import Testing
@testable import XTalkBleSdk

/// Answers the device still owes lines whose operations ended without them
/// (PROTOCOL.md section 6): the device answers in order, so the next final
/// result codes are those, never the next operation's; and a switch that
/// waited for the wire decodes in its encoding what arrived meanwhile.
@Suite("AT channel: answers still owed, and bytes of a switch that waited", .timeLimit(.minutes(1)))
struct OwedAnswerTests {
    /// Ends the drain at its bound: a line still arriving keeps it from being quiet.
    static func drainUntilBound(_ h: inout ChannelHarness) {
        h.receive("+DI:data=0")
        h.fire(AtChannelStateMachine.defaultDrainQuiet)  // not quiet: a line is arriving
        #expect(h.machine.isDraining)
        h.fire(AtChannelStateMachine.defaultDrainBound)
        h.receive("1\r\n")  // the radio frame ends
    }

    /// `first` times out (100 ms) with `next` queued behind it, unanswered;
    /// the drain ends quiet, or at its bound; `next` is written.
    static func timeOut(
        _ first: String, then next: String, quiet: Bool, _ h: inout ChannelHarness
    ) -> ChannelRequestID {
        let timedOut = h.command(first, timeout: .milliseconds(100))
        let id = h.command(next)
        timeOut(timedOut, after: .milliseconds(100), thenWrites: next, quiet: quiet, &h)
        return id
    }

    /// The operation `first`, written with others queued behind it, times out
    /// after `timeout`, unanswered; the drain ends quiet, or at its bound; the
    /// line `next` is written.
    static func timeOut(
        _ first: ChannelRequestID, after timeout: Duration, thenWrites next: String, quiet: Bool,
        _ h: inout ChannelHarness
    ) {
        h.completeWrites()
        h.fire(timeout)
        #expect(h.outcomes[first] == .failure(.timeout))
        if quiet { h.fire(AtChannelStateMachine.defaultDrainQuiet) } else { drainUntilBound(&h) }
        h.completeWrites()
        #expect(h.writtenLines.last == next + "\r\n")
    }

    @Test("a reply owed past a drain that hit its bound goes to no later command")
    func owedAfterBound() {
        var h = ChannelHarness()
        let slow = h.command("AT+SLOW", timeout: .milliseconds(100))
        let next = h.command("AT+PING=b")
        h.completeWrites()
        h.fire(.milliseconds(100))
        #expect(h.outcomes[slow] == .failure(.timeout))
        Self.drainUntilBound(&h)
        #expect(h.writtenLines == ["AT+SLOW\r\n", "AT+PING=b\r\n"])
        h.completeWrites()
        h.receive("+SLOW:1\r\nOK\r\n")  // the late reply: events only
        #expect(h.outcomes[next] == nil)
        h.receive("+PING:b\r\nOK\r\n")
        #expect(h.outcomes[next] == .success(["+PING:b", "OK"]))
        #expect(h.lineEvents.suffix(4) == ["+SLOW:1", "OK", "+PING:b", "OK"])
    }

    @Test("a collect window that closed before its final code leaves its answer owed")
    func collectWindowLeavesItsAnswerOwed() {
        var h = ChannelHarness()
        let window = h.command("AT+PING=t4", timeout: .milliseconds(250), mode: .collectUntilTimeout)
        let next = h.command("AT+PING=t6")
        h.completeWrites()
        h.fire(.milliseconds(250))
        #expect(h.outcomes[window] == .success([]))
        #expect(h.machine.isDraining, "no final code: its answer may still come")
        Self.drainUntilBound(&h)
        h.completeWrites()
        h.receive("+PING:t4\r\nOK\r\n")
        #expect(h.outcomes[next] == nil)
        h.receive("+PING:t6\r\nOK\r\n")
        #expect(h.outcomes[next] == .success(["+PING:t6", "OK"]))
    }

    @Test("our own echo ends every reply owed before it; what a window collected before it was another's")
    func echoEndsEarlierReplies() {
        var h = ChannelHarness()
        let window = h.command("AT+PING=t4", timeout: .milliseconds(250), mode: .collectUntilTimeout)
        h.completeWrites()
        h.receive("+PING:t3\r\nOK\r\nAT+PING=t4\r\n")
        h.fire(.milliseconds(250))
        #expect(h.outcomes[window] == .success([]))
        #expect(h.machine.isDraining, "its own final code never came")

        // Owed replies end at the echo: the command's own lines follow it.
        var g = ChannelHarness()
        g.command("AT+SLOW", timeout: .milliseconds(100))
        let next = g.command("AT+PING=b")
        g.completeWrites()
        g.fire(.milliseconds(100))
        Self.drainUntilBound(&g)
        g.completeWrites()
        g.receive("AT+PING=b\r\n+PING:b\r\nOK\r\n")  // the device never answered AT+SLOW
        #expect(g.outcomes[next] == .success(["+PING:b", "OK"]))
    }

    @Test("an RF send skips an earlier send's late OK and +SENDFIN:, and any other reply")
    func sendSkipsOwedAnswers() {
        var h = ChannelHarness()
        let first = h.send("0102", timeout: .milliseconds(200))
        let second = h.send("0304")
        Self.timeOut(first, after: .milliseconds(200), thenWrites: "AT+SEND=0304", quiet: false, &h)
        h.receive("+PING:t8\r\nOK\r\n")  // a reply no send gives: up to its final code, another's
        h.receive("OK\r\n+SENDFIN:FAIL,CAD_BUSY\r\n")  // the first send's
        #expect(h.outcomes[second] == nil)
        h.receive("OK\r\n+SENDFIN:OK\r\n")
        #expect(h.outcomes[second] == .success([]))
    }

    /// Seed 53094191480991448: a command the device never answers (silent)
    /// times out, its drain ends at the bound while radio frames stream, and
    /// the send after it takes its own `OK` as the silent command's. Its
    /// `+SENDFIN:`, none being owed, shows the `OK` was its own: the send
    /// succeeds, and nothing stays owed (the next command gets its answer).
    @Test("an RF send whose OK was taken as a silent command's owed reply completes at its own +SENDFIN:")
    func sendFinishShowsTheOKWasOurs() {
        var h = ChannelHarness()
        let silent = h.command("AT+PING=t10", timeout: .milliseconds(100))
        let send = h.send("0008C5C9D3C9")
        let next = h.command("AT+PING=t11")
        Self.timeOut(silent, after: .milliseconds(100), thenWrites: "AT+SEND=0008C5C9D3C9", quiet: false, &h)
        h.receive("OK\r\n")  // taken as the silent command's: a reply was owed
        #expect(h.outcomes[send] == nil)
        h.receive("+SENDFIN:OK\r\n")
        #expect(h.outcomes[send] == .success([]))
        #expect(h.writtenLines.last == "AT+PING=t11\r\n")
        h.completeWrites()
        h.receive("+PING:t11\r\nOK\r\n")
        #expect(h.outcomes[next] == .success(["+PING:t11", "OK"]), "nothing stays owed")

        // A +SENDFIN: with no OK taken at all (one from before the write) is still not ours.
        var g = ChannelHarness()
        let lone = g.send("0102", timeout: .milliseconds(500))
        g.completeWrites()
        g.receive("+SENDFIN:OK\r\n")
        #expect(g.outcomes[lone] == nil)
        g.receive("OK\r\n+SENDFIN:OK\r\n")
        #expect(g.outcomes[lone] == .success([]))

        // An OK taken as owed, then our echo: that OK came before our line, so
        // it was not ours, and a +SENDFIN: before our own OK is an older frame's.
        var e = ChannelHarness()
        let silentToo = e.command("AT+PING=t12", timeout: .milliseconds(100))
        let echoed = e.send("0008C5C9D3C9")
        e.completeWrites()
        e.fire(.milliseconds(100))
        #expect(e.outcomes[silentToo] == .failure(.timeout))
        Self.drainUntilBound(&e)
        e.completeWrites()
        e.receive("OK\r\nAT+SEND=0008C5C9D3C9\r\n+SENDFIN:OK\r\n")
        #expect(e.outcomes[echoed] == nil, "the OK before our echo was not ours")
        e.receive("OK\r\n+SENDFIN:FAIL,no ack\r\n")
        #expect(e.outcomes[echoed] == .failure(.writeFailed("the radio could not send the frame: no ack")))
    }

    @Test("the echo of another command line begins that line's reply: up to its final code, not ours")
    func echoOfAnotherLine() {
        var h = ChannelHarness()
        let probe = h.command("AT+AUTH?")
        h.completeWrites()
        h.receive("AT+SEND=0102\r\nOK\r\n")  // an RF send's late echo and OK
        #expect(h.outcomes[probe] == nil)
        h.receive("AT+AUTH?\r\n+AUTH:1\r\nOK\r\n")
        #expect(h.outcomes[probe] == .success(["+AUTH:1", "OK"]))
    }

    @Test("a drain that ends quiet owes nothing: a command the device never answered costs no later one")
    func quietClearsWhatWasOwed() {
        var h = ChannelHarness()
        let next = Self.timeOut("AT+SILENT", then: "AT", quiet: true, &h)
        h.receive("OK\r\n")
        #expect(h.outcomes[next] == .success(["OK"]))
    }

    /// A drain that ended quiet while a reply was owed: a device slower than
    /// the quiet period may still send it. A documented query (the command
    /// table of PROTOCOL.md section 6) tells its own answer by its
    /// information line.
    @Test("after a quiet drain that dropped a debt, a query skips another information line and its OK")
    func quietDebtSkipsAnotherInformationLine() {
        var h = ChannelHarness()
        let next = Self.timeOut("AT+PING=t1", then: "AT+PING=t2", quiet: true, &h)
        h.receive("+PING:t1\r\nOK\r\n")  // t1's, late: events only
        #expect(h.outcomes[next] == nil)
        h.receive("+PING:t2\r\nOK\r\n")
        #expect(h.outcomes[next] == .success(["+PING:t2", "OK"]))
    }

    @Test("after a quiet drain that dropped a debt, a bare OK before a query's information line is another's")
    func quietDebtSkipsABareOK() {
        var h = ChannelHarness()
        let next = Self.timeOut("AT+SILENT", then: "AT+VER?", quiet: true, &h)
        h.receive("OK\r\n")  // AT+SILENT's, late
        #expect(h.outcomes[next] == nil)
        h.receive("+VER:1.4.2\r\nOK\r\n")
        #expect(h.outcomes[next] == .success(["+VER:1.4.2", "OK"]))
        // The information line showed the device caught up: the next query takes a bare OK.
        let after = h.command("AT+AUTH?")
        h.completeWrites()
        h.receive("OK\r\n")
        #expect(h.outcomes[after] == .success(["OK"]))
    }

    /// A send cancelled before its answer, a drain that ended quiet, and the
    /// next send took that send's late `OK` and `+SENDFIN:FAIL` (the protocol
    /// cannot tell them apart): its own `ERROR` comes a reply late, and a query
    /// takes it no more than a bare `OK` (chaos seed 34523387220059788:
    /// `AT+PING=t2` got an RF send's `ERROR`). With only a command's reply in
    /// doubt, an `ERROR` is the query's own (the garbled-line rule aside).
    @Test("after a quiet drain that dropped an RF send's reply, a bare ERROR before a query's own line is another's")
    func quietSendDebtSkipsABareError() {
        var h = ChannelHarness()
        let first = h.send("0001", timeout: .milliseconds(100))
        let second = h.send("0002")
        let query = h.command("AT+PING=t2")
        Self.timeOut(first, after: .milliseconds(100), thenWrites: "AT+SEND=0002", quiet: true, &h)
        h.receive("OK\r\n+SENDFIN:FAIL,CAD_BUSY\r\n")  // the first send's, late: taken by the second
        #expect(h.outcomes[second] == .failure(.writeFailed("the radio could not send the frame: CAD_BUSY")))
        h.completeWrites()
        #expect(h.writtenLines.last == "AT+PING=t2\r\n")
        h.receive("ERROR\r\n")  // the second send's, a reply late
        #expect(h.outcomes[query] == nil)
        h.receive("+PING:t2\r\nOK\r\n")
        #expect(h.outcomes[query] == .success(["+PING:t2", "OK"]))
        // The information line showed the device caught up: a query's ERROR is its own again.
        let after = h.command("AT+VER?")
        h.completeWrites()
        h.receive("ERROR\r\n")
        #expect(h.outcomes[after] == .success(["ERROR"]))

        // Only a command's reply in doubt: the ERROR is the query's own.
        var g = ChannelHarness()
        let next = Self.timeOut("AT+SILENT", then: "AT+PING=t3", quiet: true, &g)
        g.receive("ERROR\r\n")
        #expect(g.outcomes[next] == .success(["ERROR"]))
    }

    @Test("a query's own information line ends every reply owed before it")
    func ownInformationLineEndsTheDebt() {
        // The drain hit its bound with a reply owed; the device never sends it.
        var h = ChannelHarness()
        let next = Self.timeOut("AT+SILENT", then: "AT+PING=t3", quiet: false, &h)
        h.receive("+PING:t3\r\nOK\r\n")
        #expect(h.outcomes[next] == .success(["+PING:t3", "OK"]))
    }

    @Test("with no debt in doubt, a query answered OK alone gets that OK (the caller sees the missing line)")
    func noDoubtBareOKIsTaken() {
        var h = ChannelHarness()
        let probe = h.command("AT+AUTH?")
        h.completeWrites()
        h.receive("OK\r\n")
        #expect(h.outcomes[probe] == .success(["OK"]))

        // A drain that ends quiet with its debt paid (the late answer came
        // during the drain) leaves no doubt either.
        var g = ChannelHarness()
        let late = g.command("AT+PING=t4", timeout: .milliseconds(100))
        let next = g.command("AT+AUTH?")
        g.completeWrites()
        g.fire(.milliseconds(100))
        #expect(g.outcomes[late] == .failure(.timeout))
        g.receive("+PING:t4\r\nOK\r\n")  // during the drain: pays what was owed
        g.fire(AtChannelStateMachine.defaultDrainQuiet)
        g.completeWrites()
        #expect(g.writtenLines.last == "AT+AUTH?\r\n")
        g.receive("OK\r\n")
        #expect(g.outcomes[next] == .success(["OK"]))
    }

    @Test("an encoding switch ends the count: answers in the other encoding never decode as lines")
    func switchClearsWhatWasOwed() {
        var h = ChannelHarness()
        h.command("AT+SILENT", timeout: .milliseconds(100))
        h.completeWrites()
        h.fire(.milliseconds(100))
        Self.drainUntilBound(&h)
        h.machine.setEncoding(.xor)
        h.receive("\r\n")  // the device's line end, in the new encoding
        let next = h.command("AT")
        h.completeWrites()
        h.receive("OK\r\n")
        #expect(h.outcomes[next] == .success(["OK"]))
    }

    /// A probe written in xor to a plain device times out; the app switches to
    /// plain; an RF send and then `next` are queued, and the send's line is
    /// written once the drain ends at its bound.
    static func garbledProbeThenSend(sendTimeout: Duration, then next: String) -> (
        ChannelHarness, ChannelRequestID, ChannelRequestID
    ) {
        var h = ChannelHarness(encoding: .xor)
        let probe = h.command("AT+AUTH?", timeout: .milliseconds(800))
        h.completeWrites()
        h.fire(.milliseconds(800))
        #expect(h.outcomes[probe] == .failure(.timeout))
        h.machine.setEncoding(.plain)
        let send = h.send("0008C5C9", timeout: sendTimeout)
        let queued = h.command(next)
        drainUntilBound(&h)
        h.completeWrites()
        #expect(h.writtenLines.last == "AT+SEND=0008C5C9\r\n")
        return (h, send, queued)
    }

    @Test("after a switch that dropped a debt, an ERROR is a garbled line's, until the device answers ours")
    func switchLeavesGarbledLinesErrors() {
        // A line written in xor to a plain device, on a congested link: the
        // device reads it garbled and answers ERROR, in plain, seconds later.
        let (start, send, next) = Self.garbledProbeThenSend(sendTimeout: .seconds(5), then: "AT+PING=t6")
        var h = start
        h.receive("ERROR\r\n")  // the garbled probe's: not the send's
        #expect(h.outcomes[send] == nil)
        h.receive("OK\r\n+SENDFIN:OK\r\n")
        #expect(h.outcomes[send] == .success([]))
        h.completeWrites()
        h.receive("ERROR\r\n")  // the device answered the send: this ERROR is the ping's own
        #expect(h.outcomes[next] == .success(["ERROR"]))

        // With nothing owed at the switch, an ERROR after it is the next command's own.
        var g = ChannelHarness(encoding: .xor)
        g.machine.setEncoding(.plain)
        let own = g.command("AT+NOPE")
        g.completeWrites()
        g.receive("ERROR\r\n")
        #expect(g.outcomes[own] == .success(["ERROR"]))

        // The device's echo of our line shows it caught up: the ERROR after it is ours.
        var e = ChannelHarness(encoding: .xor)
        e.command("AT+AUTH?", timeout: .milliseconds(800))
        e.completeWrites()
        e.fire(.milliseconds(800))
        e.fire(AtChannelStateMachine.defaultDrainBound)
        e.machine.setEncoding(.plain)
        let echoed = e.command("AT+NOPE")
        e.completeWrites()
        e.receive("AT+NOPE\r\nERROR\r\n")
        #expect(e.outcomes[echoed] == .success(["ERROR"]))
    }

    @Test("a garbled line's ERROR pays no reply owed after the switch: the next command still gets its own")
    func garbledErrorPaysNoOwedReply() {
        // Chaos seed 79642376867370346: the ERROR a device in plain answered a line it read garbled
        // (written in xor) paid the reply owed a send that timed out after the switch; the send's OK then
        // went to the next command, and each command after it took the answer of the one before.
        let (start, send, next) = Self.garbledProbeThenSend(sendTimeout: .milliseconds(200), then: "AT+PING=t7")
        var h = start
        h.fire(.milliseconds(200))  // the send times out, unanswered: its OK and +SENDFIN: are owed
        #expect(h.outcomes[send] == .failure(.timeout))
        Self.drainUntilBound(&h)
        h.completeWrites()
        #expect(h.writtenLines.last == "AT+PING=t7\r\n")
        h.receive("ERROR\r\n")  // the garbled probe's: pays nothing
        h.receive("OK\r\n+SENDFIN:OK\r\n")  // the send's, late
        #expect(h.outcomes[next] == nil)
        h.receive("+PING:t7\r\nOK\r\n")
        #expect(h.outcomes[next] == .success(["+PING:t7", "OK"]))
    }

    @Test("an owed query's information line, alike the next query's own, does not end the debt")
    func owedQueryOfTheSameKind() {
        // Chaos seed 79652944176166735: a cancelled AT+AUTH?'s answer, owed past a drain that hit its
        // bound, reached the next AT+AUTH?, whose own information line it matched: taken as proof that
        // the device had reached that line, it ended the debt, and each command took the last one's answer.
        var h = ChannelHarness()
        let first = h.command("AT+AUTH?", timeout: .milliseconds(800))
        let second = h.command("AT+AUTH?", timeout: .milliseconds(800))
        let ping = h.command("AT+PING=t6")
        h.completeWrites()
        h.apply(h.machine.cancel(first))
        Self.drainUntilBound(&h)
        h.completeWrites()
        #expect(h.writtenLines.last == "AT+AUTH?\r\n")
        h.receive("+AUTH:1\r\nOK\r\n")  // the first probe's, late
        #expect(h.outcomes[second] == nil)
        h.receive("+AUTH:0\r\nOK\r\n")
        #expect(h.outcomes[second] == .success(["+AUTH:0", "OK"]))
        h.completeWrites()
        h.receive("+PING:t6\r\nOK\r\n")
        #expect(h.outcomes[ping] == .success(["+PING:t6", "OK"]))
    }

    @Test("a line still in the write pump has no answer yet: what arrives meanwhile is another line's")
    func noAnswerBeforeTheLineIsHandedOver() {
        // Chaos seed 53184280376555539: the pump held AT+AUTH? behind a stuck ready flag; the device's
        // ERROR to the tail of an RF send that had timed out arrived, and the probe took it as its answer
        // (the authenticator then probed again, and a window collected two answers).
        var h = ChannelHarness()
        h.handsOverAtOnce = false
        let probe = h.command("AT+AUTH?", timeout: .milliseconds(800))
        h.receive("ERROR\r\n")
        #expect(h.outcomes[probe] == nil, "the device cannot have answered a line it has not received")
        h.receive("+X:1\r\nOK\r\n")  // a whole reply, too
        #expect(h.outcomes[probe] == nil)
        h.handOver()
        h.receive("+AUTH:0\r\nOK\r\n")
        #expect(h.outcomes[probe] == .success(["+AUTH:0", "OK"]))
        #expect(h.lineEvents.prefix(3) == ["ERROR", "+X:1", "OK"])

        // Handed over but not confirmed yet (with response: before the acknowledgement): its answer.
        var acked = ChannelHarness()
        let query = acked.command("AT+VER?")
        acked.receive("+VER:1\r\nOK\r\n")
        #expect(acked.outcomes[query] == .success(["+VER:1", "OK"]))
    }

    @Test("a reply that began before a timed-out line is another's in the drain too: it is owed, and not quiet")
    func staleLineInDrain() {
        // Chaos seed 53215642535166274: a device 9 s behind echoed a timed-out RF send's line, begun before
        // the probe that then timed out. Completed in that probe's drain, the echo was dropped unseen: the
        // drain ended quiet 10 ms later, and the next probe's window collected the send's OK.
        var h = ChannelHarness()
        h.receive("AT+SEND=00")  // a late echo, arriving byte by byte
        let probe = h.command("AT+AUTH?", timeout: .milliseconds(800))
        let window = h.command("AT+AUTH?", timeout: .milliseconds(1200), mode: .collectUntilTimeout)
        h.completeWrites()
        h.fire(.milliseconds(800))
        #expect(h.outcomes[probe] == .failure(.timeout))
        #expect(h.machine.isDraining)
        let quiet = AtChannelStateMachine.defaultDrainQuiet
        let quietSinceDrain = h.liveTimers.filter { $0.value == quiet }.keys
        h.receive("11\r\n")  // the echo ends, in the drain
        let quietSinceLine = h.liveTimers.filter { $0.value == quiet }.keys
        #expect(quietSinceLine.count == 1 && quietSinceLine != quietSinceDrain, "a line arrived: not quiet")
        h.receive("OK\r\n")  // the send's
        h.fire(quiet)
        h.completeWrites()
        #expect(h.writtenLines.last == "AT+AUTH?\r\n")
        #expect(h.lineEvents == ["AT+SEND=0011", "OK"])
        h.receive("+AUTH:0\r\nOK\r\n")
        h.fire(.milliseconds(1200))
        #expect(h.outcomes[window] == .success(["+AUTH:0", "OK"]))
    }

    @Test("an RF send's late OK in a drain makes its +SENDFIN owed: the next send's comes after")
    func lateSendOkInDrain() {
        var h = ChannelHarness()
        let first = h.send("00AA", timeout: .milliseconds(100))
        let second = h.send("00BB")
        h.completeWrites()
        h.fire(.milliseconds(100))
        #expect(h.outcomes[first] == .failure(.timeout))
        h.receive("AT+SEND=00AA\r\nOK\r\n")  // the first send's echo and OK, in the drain
        Self.drainUntilBound(&h)
        h.completeWrites()
        #expect(h.writtenLines.last == "AT+SEND=00BB\r\n")
        h.receive("OK\r\n+SENDFIN:OK\r\n")  // the second accepted; the first frame's end
        #expect(h.outcomes[second] == nil, "that +SENDFIN is the first frame's")
        h.receive("+SENDFIN:OK\r\n")
        #expect(h.outcomes[second] == .success([]))
    }

    @Test("after a switch that dropped a debt, a query, awaited or collected, takes no late answer")
    func lateAnswersAfterSwitch() {
        // Chaos seed 79668493860901537: against xor firmware 10 s behind, the authenticator probed plain,
        // then xor again; the xor lines' late answers decoded once more, and an AT+AUTH? window collected
        // ["OK", "+PING:t17", "OK", "OK"].
        func owingAcrossTwoSwitches() -> ChannelHarness {
            var h = ChannelHarness(encoding: .xor)
            h.command("AT+PING=a", timeout: .milliseconds(100))
            h.completeWrites()
            h.fire(.milliseconds(100))
            Self.drainUntilBound(&h)  // the reply stays owed
            h.machine.setEncoding(.plain)  // the count of replies owed is dropped
            h.machine.setEncoding(.xor)
            return h
        }
        var h = owingAcrossTwoSwitches()
        let window = h.command("AT+AUTH?", timeout: .milliseconds(1200), mode: .collectUntilTimeout)
        h.completeWrites()
        h.receive("OK\r\n+PING:a\r\nOK\r\n")  // a send's OK, then the ping's answer
        h.receive("+AUTH:0\r\nOK\r\n")
        h.fire(.milliseconds(1200))
        #expect(h.outcomes[window] == .success(["+AUTH:0", "OK"]))
        #expect(h.lineEvents.suffix(5) == ["OK", "+PING:a", "OK", "+AUTH:0", "OK"])

        var awaited = owingAcrossTwoSwitches()
        let ping = awaited.command("AT+PING=b")
        awaited.completeWrites()
        awaited.receive("OK\r\n")
        #expect(awaited.outcomes[ping] == nil)
        awaited.receive("+PING:b\r\nOK\r\n")
        #expect(awaited.outcomes[ping] == .success(["+PING:b", "OK"]))

        // Its own information line shows the device caught up: a bare OK later is an answer again.
        let vers = awaited.command("AT+VER?")
        awaited.completeWrites()
        awaited.receive("OK\r\n")
        #expect(awaited.outcomes[vers] == .success(["OK"]))
    }

    @Test("a no-wait window ends at its own result, not at a reply owed an earlier line")
    func noWaitWaitsForItsOwn() throws {
        var h = ChannelHarness()
        h.command("AT+SLOW", timeout: .milliseconds(100))
        h.completeWrites()
        h.fire(.milliseconds(100))
        Self.drainUntilBound(&h)
        #expect(h.machine.isIdle)
        h.apply(try h.machine.startNoWaitCommand("AT+PING=n", window: .seconds(3), owner: nil))
        h.completeWrites()
        h.receive("OK\r\n")  // AT+SLOW's
        #expect(throws: XTalkBleError.busy) { try h.machine.startNoWaitCommand("AT", window: .seconds(3), owner: nil) }
        h.receive("+PING:n\r\nOK\r\n")
        #expect(h.machine.isIdle)
    }

    @Test("+READY: a rebooted device owes nothing")
    func readyClearsWhatWasOwed() {
        var h = ChannelHarness()
        h.command("AT+SLOW", timeout: .milliseconds(100))
        h.completeWrites()
        h.fire(.milliseconds(100))
        Self.drainUntilBound(&h)
        h.receive("+READY\r\n")
        let next = h.command("AT")
        h.completeWrites()
        h.receive("OK\r\n")
        #expect(h.outcomes[next] == .success(["OK"]))
    }

    // MARK: A switch that waited for the wire

    @Test("bytes that formed no line while a switch waited are decoded in the new encoding")
    func switchThatWaitedDecodesWhatCameMeanwhile() {
        var h = ChannelHarness()
        let send = h.send("0102", timeout: .milliseconds(200))
        h.completeWrites()
        h.machine.setEncoding(.xor)  // asked for while the send owns the wire: it waits
        h.receiveBytes(XTalkAtEncoding.xor.encodeText("+DI:cnt=1,data=0A0B\r\n+DI:cnt=2,data=0C"))
        #expect(!h.events.contains { if case .radioFrame = $0 { true } else { false } })
        h.fire(.milliseconds(200))
        #expect(h.outcomes[send] == .failure(.timeout))
        h.receiveBytes(XTalkAtEncoding.xor.encodeText("0D\r\n"))
        let frames = h.events.compactMap { event -> Data? in
            if case .radioFrame(let payload, _) = event { payload } else { nil }
        }
        #expect(frames == [Data([0x0A, 0x0B]), Data([0x0C, 0x0D])])
    }

    @Test("the framer hands back only what arrived after the request, and nothing without one")
    func framerReplay() {
        var framer = LineFramer(encoding: .plain)
        var units: [FramedUnit] = []
        // The device's lines in xor, read as plain: no line end, one partial line.
        framer.feed(XTalkAtEncoding.xor.encodeText("+ID:0\r\n"), into: &units)
        framer.markSwitchRequest()
        // (No "P" in them: its xor form is the plain LF.)
        framer.feed(XTalkAtEncoding.xor.encodeText("+ID:1\r\n+I"), into: &units)
        #expect(units.isEmpty)
        let replay = framer.switchEncoding(to: .xor)
        #expect(replay == XTalkAtEncoding.xor.encodeText("+ID:1\r\n+I"))
        framer.feed(replay, into: &units)
        framer.feed(XTalkAtEncoding.xor.encodeText("D:2\r\n"), into: &units)
        #expect(units.compactMap { if case .line(let l) = $0 { l } else { nil } } == ["+ID:1", "+ID:2"])

        // A line ended in the old encoding: only the bytes after it come back.
        var other = LineFramer(encoding: .plain)
        other.markSwitchRequest()
        other.feed(Array("OK\r\nAB".utf8), into: &units)
        #expect(other.switchEncoding(to: .xor) == Array("AB".utf8))
        // A line that overflowed ends in the old encoding: the byte before what comes back is its LF, in
        // every chunking, whatever byte 4096 of the line was. (Found by the receive fuzzer: with the line
        // and its LF in one chunk, byte 4096, here the xor LF, once stood before the bytes handed back, so
        // the rest of a line the device was in the middle of posed as a line of its own.)
        let overflowing = Array(repeating: UInt8(ascii: "A"), count: 4095) + [0x0A ^ 0x5A] + Array("AAAA\n".utf8)
        let stream = overflowing + XTalkAtEncoding.xor.encodeText(":old\r\n")
        for chunk in [stream.count, 1, 7] {
            var overflow = LineFramer(encoding: .plain)
            var oldUnits: [FramedUnit] = []
            overflow.markSwitchRequest()
            for start in stride(from: 0, to: stream.count, by: chunk) {
                overflow.feed(stream[start..<min(stream.count, start + chunk)], into: &oldUnits)
            }
            let back = overflow.switchEncoding(to: .xor)
            #expect(back == XTalkAtEncoding.xor.encodeText(":old\r\n"), "chunks of \(chunk)")
            var newUnits: [FramedUnit] = []
            overflow.feed(back, into: &newUnits)
            #expect(newUnits == [.raw(Data(back))], "chunks of \(chunk): the rest of a line, not a line")
        }

        // No request: a plain reset.
        var plain = LineFramer(encoding: .plain)
        plain.feed(Array("AB".utf8), into: &units)
        #expect(plain.switchEncoding(to: .xor).isEmpty)
    }
}
