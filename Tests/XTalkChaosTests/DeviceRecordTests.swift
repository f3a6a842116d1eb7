import Foundation
import Testing
@testable import XTalkSimulator

/// The device record's helpers that the chaos checker trusts to excuse a
/// call: each is exact at its edges, so an excuse holds only while its
/// condition did, never before it began or after it ended.
@Suite("Chaos: the device record's helpers the checker trusts")
struct DeviceRecordTests {
    static func ms(_ value: Int) -> Duration { .milliseconds(value) }

    @Test("wasUnreachable: only while the device was gone and the central still had the link")
    func unreachable() {
        var record = XTalkDeviceRecord()
        #expect(!record.wasUnreachable(from: .zero, to: Self.ms(10_000)), "never lost")
        record.recordConnection(1, at: Self.ms(100))
        record.recordLinkLost(1, at: Self.ms(1_000))
        #expect(!record.wasUnreachable(from: Self.ms(200), to: Self.ms(999)), "before the loss")
        #expect(record.wasUnreachable(from: Self.ms(500), to: Self.ms(1_000)), "the loss's first moment")
        #expect(record.wasUnreachable(from: Self.ms(5_000), to: Self.ms(6_000)), "open: the central has not noticed")
        record.recordCentralEnded(1, at: Self.ms(1_720))
        #expect(record.wasUnreachable(from: Self.ms(1_500), to: Self.ms(1_600)), "inside")
        #expect(record.wasUnreachable(from: Self.ms(1_720), to: Self.ms(2_000)), "the end's moment")
        #expect(!record.wasUnreachable(from: Self.ms(1_721), to: Self.ms(9_000)), "after the central ended it")
        #expect(!record.wasUnreachable(from: Self.ms(0), to: Self.ms(999)), "before, on a closed interval")
        // A second connection, reachable throughout: the first one's loss does not spread.
        record.recordConnection(2, at: Self.ms(2_000))
        #expect(!record.wasUnreachable(from: Self.ms(2_000), to: Self.ms(9_000)))
    }

    @Test("readyFlagWasStuck: from the lost callback to the host's next write, each interval on its own")
    func readyFlagStuck() {
        var record = XTalkDeviceRecord()
        #expect(!record.readyFlagWasStuck(from: .zero, to: Self.ms(10_000)))
        record.recordReadyFlagStuck(at: Self.ms(300))
        #expect(record.readyFlagWasStuck(from: Self.ms(5_000), to: Self.ms(5_001)), "open until freed")
        record.recordReadyFlagFreed(at: Self.ms(2_300))
        #expect(!record.readyFlagWasStuck(from: Self.ms(0), to: Self.ms(299)))
        #expect(record.readyFlagWasStuck(from: Self.ms(0), to: Self.ms(300)))
        #expect(record.readyFlagWasStuck(from: Self.ms(2_300), to: Self.ms(2_400)))
        #expect(!record.readyFlagWasStuck(from: Self.ms(2_301), to: Self.ms(4_000)), "freed: no longer stuck")
        record.recordReadyFlagStuck(at: Self.ms(4_000))
        record.recordReadyFlagFreed(at: Self.ms(4_100))
        #expect(!record.readyFlagWasStuck(from: Self.ms(2_400), to: Self.ms(3_999)), "between the two")
        #expect(record.readyFlagWasStuck(from: Self.ms(3_000), to: Self.ms(4_050)))
        #expect(!record.readyFlagWasStuck(from: Self.ms(4_101), to: Self.ms(9_000)))
        record.recordReadyFlagFreed(at: Self.ms(9_000))
        #expect(
            !record.readyFlagWasStuck(from: Self.ms(4_101), to: Self.ms(9_500)),
            "a free flag freed again changes nothing")
    }

    static func line(_ text: String) -> XTalkDeviceOutput { XTalkDeviceOutput(kind: .line, lines: [text]) }

    @Test("firstDeliveredAt and deliveredAt: when the first and the last queued byte reached the host")
    func delivery() {
        var record = XTalkDeviceRecord()
        record.recordConnection(1, at: .zero)
        record.recordEmission(
            Self.line("+A"), bytes: Array("+A\r\n".utf8), at: Self.ms(10), connection: 1, queued: 4, streamStart: 0)
        record.recordEmission(
            Self.line("+B"), bytes: Array("+B\r\n".utf8), at: Self.ms(11), connection: 1, queued: 4, streamStart: 4)
        record.notified(connection: 1, upTo: 2, at: Self.ms(20))
        #expect(record.emission(0)?.firstDeliveredAt == Self.ms(20) && record.emission(0)?.deliveredAt == nil)
        #expect(record.emission(1)?.firstDeliveredAt == nil)
        record.notified(connection: 1, upTo: 5, at: Self.ms(30))
        #expect(record.emission(0)?.deliveredAt == Self.ms(30) && record.emission(0)?.deliveredWhole == true)
        #expect(record.emission(1)?.firstDeliveredAt == Self.ms(30) && record.emission(1)?.deliveredAt == nil)
        record.notified(connection: 1, upTo: 8, at: Self.ms(40))
        #expect(record.emission(1)?.firstDeliveredAt == Self.ms(30) && record.emission(1)?.deliveredAt == Self.ms(40))
        // An output written while no connection was up never arrives.
        record.recordEmission(
            Self.line("+C"), bytes: Array("+C\r\n".utf8), at: Self.ms(50), connection: nil, queued: 0, streamStart: 8)
        record.notified(connection: 1, upTo: 8, at: Self.ms(60))
        #expect(record.emission(2)?.firstDeliveredAt == nil && record.emission(2)?.deliveredWhole == false)
    }

    @Test("followsACutOutput: only right after an output the notification queue cut, on the same connection")
    func cutOutputs() {
        var record = XTalkDeviceRecord()
        record.recordConnection(1, at: .zero)
        record.recordEmission(
            Self.line("+A"), bytes: Array("+A\r\n".utf8), at: Self.ms(10), connection: 1, queued: 4, streamStart: 0)
        record.recordEmission(
            Self.line("+B"), bytes: Array("+LONG\r\n".utf8), at: Self.ms(11), connection: 1, queued: 3, streamStart: 4)
        record.recordEmission(
            Self.line("+C"), bytes: Array("+C\r\n".utf8), at: Self.ms(12), connection: 1, queued: 4, streamStart: 7)
        record.recordEmission(
            Self.line("+D"), bytes: Array("+D\r\n".utf8), at: Self.ms(13), connection: 1, queued: 4, streamStart: 11)
        let emissions = (0..<4).compactMap { record.emission($0) }
        #expect(emissions.count == 4)
        #expect(!record.followsACutOutput(emissions[0]), "nothing before it")
        #expect(!record.followsACutOutput(emissions[1]), "follows a whole output")
        #expect(record.followsACutOutput(emissions[2]), "follows the cut one")
        #expect(!record.followsACutOutput(emissions[3]), "two after the cut: its predecessor was whole")
        // An output that was not queued at all (not subscribed) is skipped: what
        // the host reads joins the cut output to the next one that was queued.
        record.recordEmission(
            Self.line("+E"), bytes: Array("+EEE\r\n".utf8), at: Self.ms(14), connection: 1, queued: 2, streamStart: 15)
        record.recordEmission(
            Self.line("+F"), bytes: Array("+F\r\n".utf8), at: Self.ms(15), connection: 1, queued: 0, streamStart: 17)
        record.recordEmission(
            Self.line("+G"), bytes: Array("+G\r\n".utf8), at: Self.ms(16), connection: 1, queued: 4, streamStart: 17)
        #expect(record.emission(6).map(record.followsACutOutput) == true)
        // Another connection's cut does not spread.
        record.recordConnection(2, at: Self.ms(20))
        record.recordEmission(
            Self.line("+H"), bytes: Array("+H\r\n".utf8), at: Self.ms(21), connection: 2, queued: 4, streamStart: 0)
        #expect(record.emission(7).map(record.followsACutOutput) == false)
    }
}
