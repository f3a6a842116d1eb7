import Foundation
import Testing
@testable import XTalkBleSdk

/// The stale-line and sensitivity rules alone, without a framer or a wire
/// (PROTOCOL.md sections 6 and 7).
@Suite("Stale-line rules: what arrived before our write, what stays out of logs", .timeLimit(.minutes(1)))
struct StaleLineRulesTests {
    /// Whether each of `count` units of one batch is stale, with a write
    /// during the handling of the units at `writesAt` (its partial-line flag).
    static func batch(
        _ rules: inout StaleLineRules, units count: Int,
        writesAt: [Int: Bool] = [:]
    ) -> [Bool] {
        let batch = rules.batchStarts()
        var stale: [Bool] = []
        for unit in 0..<count {
            stale.append(rules.nextUnitIsStale(in: batch))
            if let partial = writesAt[unit] { rules.writeStarted(framerHasPartialLine: partial) }
        }
        return stale
    }

    @Test("with nothing written, no unit is stale")
    func nothingWritten() {
        var rules = StaleLineRules()
        #expect(Self.batch(&rules, units: 3) == [false, false, false])
    }

    @Test("a line the framer held when our write started is stale; the units after it are not")
    func staleTail() {
        var rules = StaleLineRules()
        rules.writeStarted(framerHasPartialLine: true)
        #expect(Self.batch(&rules, units: 3) == [true, false, false])
        #expect(Self.batch(&rules, units: 1) == [false], "the tail is consumed once")
        rules.writeStarted(framerHasPartialLine: false)
        #expect(Self.batch(&rules, units: 2) == [false, false])
    }

    @Test("units of a batch that follow a write it started were received before that write")
    func writeDuringBatch() {
        var rules = StaleLineRules()
        #expect(Self.batch(&rules, units: 4, writesAt: [1: false]) == [false, false, true, true])
        #expect(Self.batch(&rules, units: 2) == [false, false], "the next batch came after the write")
    }

    @Test("the framer's partial line at a write within a batch concerns the next batch")
    func tailOfAWriteWithinABatch() {
        var rules = StaleLineRules()
        #expect(Self.batch(&rules, units: 3, writesAt: [0: true]) == [false, true, true])
        #expect(Self.batch(&rules, units: 2) == [true, false])
    }

    @Test("the unit that completes a stale tail may end the operation: the units after the next write are stale too")
    func tailSurvivesAWrite() {
        var rules = StaleLineRules()
        rules.writeStarted(framerHasPartialLine: true)
        #expect(Self.batch(&rules, units: 3, writesAt: [0: false]) == [true, true, true])
        #expect(Self.batch(&rules, units: 1) == [false])
    }

    @Test("a framer reset (encoding switch) and the end of the link drop the stale tail")
    func resets() {
        var rules = StaleLineRules()
        rules.writeStarted(framerHasPartialLine: true)
        rules.framerReset()
        #expect(Self.batch(&rules, units: 1) == [false])
        rules.writeStarted(framerHasPartialLine: true)
        rules.connectionEnded()
        #expect(Self.batch(&rules, units: 1) == [false])
    }

    @Test("a reply begun with no owner is owed until its final code; owed replies are paid in order")
    func owedReplies() {
        var rules = StaleLineRules()
        #expect(!rules.owesReply)
        rules.ownerlessResponseLine("+X:1", final: false)
        #expect(rules.owesReply)
        rules.ownerlessResponseLine("+X:1", final: false)  // the same reply goes on
        rules.ownerlessResponseLine("OK", final: true)
        #expect(!rules.owesReply, "its final code closed it")
        rules.ownerlessResponseLine("OK", final: true)  // nothing owed: nothing to pay
        #expect(!rules.owesReply)

        // Two owed, paid in order; an RF send's OK makes its +SENDFIN: owed, its ERROR does not.
        rules.answerLeftOwed(.sendReply)
        rules.answerLeftOwed(.reply)
        rules.answerLeftOwed(.sendReply)
        rules.ownerlessResponseLine("OK", final: true, ok: true)
        #expect(rules.owedSendFinishes == 1)
        rules.ownerlessResponseLine("OK", final: true, ok: true)  // the command's: no +SENDFIN: follows
        #expect(rules.owedSendFinishes == 1)
        #expect(rules.owesReply)
        rules.ownerlessResponseLine("ERROR", final: true, ok: false)  // the second send's ERROR
        #expect(!rules.owesReply)
        #expect(rules.owedSendFinishes == 1)
        let owedOne = rules.sendFinishedArrived()
        let owedTwo = rules.sendFinishedArrived()
        #expect(owedOne)
        #expect(!owedTwo, "one +SENDFIN: was owed")

        // What clears the debt: our echo (replies only), quiet or +READY, a switch, the link's end.
        rules.answerLeftOwed(.reply)
        rules.answerLeftOwed(.sendFinish)
        rules.deviceReachedCurrentLine()
        #expect(!rules.owesReply)
        #expect(rules.owedSendFinishes == 1, "a frame on air may still finish after our echo")
        rules.nothingOwed()
        #expect(rules.owedSendFinishes == 0)
        rules.answerLeftOwed(.reply)
        rules.framerReset()
        #expect(!rules.owesReply)
        rules.answerLeftOwed(.sendReply)
        rules.connectionEnded()
        #expect(!rules.owesReply)
    }

    @Test("after a switch that dropped a debt, an ERROR pays no reply owed since; another final code does")
    func garbledErrorsPayNothing() {
        var rules = StaleLineRules()
        rules.answerLeftOwed(.reply)
        rules.framerReset()  // the switch: ERRORs to lines read garbled may follow
        rules.answerLeftOwed(.sendReply)  // a send written after the switch, unanswered
        rules.ownerlessResponseLine("ERROR", final: true)
        #expect(rules.owesReply, "a garbled line's ERROR: the send's reply is still owed")
        rules.ownerlessResponseLine("OK", final: true, ok: true)
        #expect(!rules.owesReply)
        #expect(rules.owedSendFinishes == 1, "the send's OK: its +SENDFIN: is owed")
        // With no switch in doubt, an ERROR pays as any final code.
        var plain = StaleLineRules()
        plain.answerLeftOwed(.reply)
        plain.ownerlessResponseLine("ERROR", final: true)
        #expect(!plain.owesReply)
    }

    @Test("a log:false command's lines are sensitive, and so is what follows its end until the next write; URCs never")
    func sensitivity() {
        var rules = StaleLineRules()
        for stale in [false, true] {
            #expect(rules.isSensitive(unsolicited: false, stale: stale, wire: .unloggedCommand))
            #expect(!rules.isSensitive(unsolicited: true, stale: stale, wire: .unloggedCommand))
            #expect(!rules.isSensitive(unsolicited: false, stale: stale, wire: .loggedOperation))
            #expect(!rules.isSensitive(unsolicited: false, stale: stale, wire: .nobody))
        }
        rules.sensitiveCommandEnded()
        #expect(rules.isSensitive(unsolicited: false, stale: false, wire: .nobody), "its late reply, while idle")
        #expect(!rules.isSensitive(unsolicited: true, stale: false, wire: .nobody))
        #expect(
            rules.isSensitive(unsolicited: false, stale: true, wire: .loggedOperation),
            "received before the next command's write: still the old command's")
        #expect(
            !rules.isSensitive(unsolicited: false, stale: false, wire: .loggedOperation),
            "the next command's own response")
        rules.writeStarted(framerHasPartialLine: false)
        #expect(!rules.isSensitive(unsolicited: false, stale: true, wire: .loggedOperation), "a new write ends it")
        #expect(!rules.isSensitive(unsolicited: false, stale: false, wire: .nobody))
    }

    @Test("who owns the wire is asked only for a line that may be a response")
    func wireOwnerIsLazy() {
        final class Probe { var asked = 0 }
        let probe = Probe()
        func owner() -> StaleLineRules.WireOwner {
            probe.asked += 1
            return .unloggedCommand
        }
        let rules = StaleLineRules()
        // (Outside `#expect`, which evaluates a call's arguments itself.)
        let urc = rules.isSensitive(unsolicited: true, stale: false, wire: owner())
        #expect(!urc)
        #expect(probe.asked == 0)
        let response = rules.isSensitive(unsolicited: false, stale: false, wire: owner())
        #expect(response)
        #expect(probe.asked == 1)
    }
}
