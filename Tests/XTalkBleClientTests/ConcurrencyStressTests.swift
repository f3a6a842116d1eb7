import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

@Suite("200 concurrent callers under a +DI: flood", .timeLimit(.minutes(10)))
@MainActor
struct ConcurrencyStressTests {
    enum Outcome: Equatable, Sendable {
        case ping([String])
        case sent
        case session([[String]])
    }

    @Test(
        "every caller gets exactly its own response; every DI payload arrives in order, none lost",
        arguments: [(23, Duration.milliseconds(25), 24), (247, .milliseconds(5), 64)])
    func stress(mtu: Int, trafficInterval: Duration, payloadSize: Int) async throws {
        var device = ClientHarness.fastDevice()
        device.link.mtu = mtu
        device.firmware.airtimeBase = .milliseconds(2)
        device.firmware.airtimePerByte = .microseconds(50)
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        // The consumer reads the event stream, and keeps up.
        let consumer = harness.consumeEvents()
        harness.peripheral.startRadioTraffic(every: trafficInterval, payloadSize: payloadSize)
        let client = harness.client
        var tasks: [Task<Outcome, any Error>] = []
        for index in 0..<200 {
            switch index % 10 {
            case 0, 5:
                let payload = Data([UInt8(truncatingIfNeeded: index), UInt8(truncatingIfNeeded: index >> 8), 0xAB])
                tasks.append(
                    harness.start {
                        try await client.sendRfPayload(payload)
                        return .sent
                    })
            case 7:
                tasks.append(
                    harness.start {
                        .session(
                            try await client.withExclusiveAtSession { session in
                                [
                                    try await session.runAtCommand("AT+PING=s\(index)a"),
                                    try await session.runAtCommand("AT+PING=s\(index)b"),
                                ]
                            })
                    })
            default:
                tasks.append(harness.start { .ping(try await client.runAtCommand("AT+PING=p\(index)")) })
            }
        }
        let outcomes = try await harness.run {
            var all: [Outcome] = []
            for task in tasks { all.append(try await task.value) }
            return all
        }
        for (index, outcome) in outcomes.enumerated() {
            switch index % 10 {
            case 0, 5: #expect(outcome == .sent)
            case 7: #expect(outcome == .session([["+PING:s\(index)a", "OK"], ["+PING:s\(index)b", "OK"]]))
            default: #expect(outcome == .ping(["+PING:p\(index)", "OK"]))
            }
        }
        // The radio sent every payload, in submission order.
        let senders: [Int] = (0..<200).filter { $0 % 10 == 0 || $0 % 10 == 5 }
        let expectedFrames: [Data] = senders.map { (index: Int) -> Data in
            Data([UInt8(truncatingIfNeeded: index), UInt8(truncatingIfNeeded: index >> 8), 0xAB])
        }
        #expect(harness.peripheral.transmittedFrames == expectedFrames)
        // Session commands ran back to back.
        let commands = harness.peripheral.processedCommands
        for index in stride(from: 7, to: 200, by: 10) {
            guard let first = commands.firstIndex(of: "AT+PING=s\(index)a") else {
                Issue.record("session \(index) did not run")
                continue
            }
            #expect(commands[first + 1] == "AT+PING=s\(index)b")
        }
        harness.peripheral.stopRadioTraffic()
        // The simulator numbers every frame it emits (cnt): a marker frame after
        // the flood carries the number of frames emitted before it, plus one.
        let marker = Data([0xEE, 0xEE, 0xEE])
        harness.peripheral.receiveRadioFrame(marker)
        await harness.advance(.seconds(1))
        harness.client.teardown()
        let radioFrames = await harness.consumed(by: consumer).compactMap { event -> (cnt: Int?, payload: Data)? in
            if case .diPayload(let payload, let meta) = event { (meta.diCnt, payload) } else { nil }
        }
        #expect(harness.peripheral.droppedNotificationBytes == 0, "the flood fits the link")
        let last = try #require(radioFrames.last, "radio frames reached the stream")
        #expect(last.payload == marker, "the marker frame arrived last")
        let emitted = try #require(last.cnt, "the marker has its cnt") - 1
        #expect(emitted > 100, "a real flood: \(emitted) frames")
        let flood = radioFrames.dropLast()
        #expect(
            flood.map { $0.cnt ?? 0 } == Array(1...emitted),
            "every emitted frame arrived, in order, none lost or repeated")
        #expect(flood.allSatisfy { $0.payload.count == payloadSize })
        #expect(harness.client.droppedEventCount == 0)
        await harness.finish()
    }
}
