import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

@MainActor
final class FrameLog {
    var entries: [(cnt: Int?, payload: Data)] = []
}

@Suite("200 concurrent callers under a +DI: flood")
@MainActor
struct ConcurrencyStressTests {
    enum Outcome: Equatable, Sendable {
        case ping([String])
        case sent
        case session([[String]])
    }

    @Test("every caller gets exactly its own response; every DI payload arrives in order, none lost",
          arguments: [(23, Duration.milliseconds(25), 24), (247, .milliseconds(5), 64)])
    func stress(mtu: Int, trafficInterval: Duration, payloadSize: Int) async throws {
        var device = ClientHarness.fastDevice()
        device.link.mtu = mtu
        device.firmware.airtimeBase = .milliseconds(2)
        device.firmware.airtimePerByte = .microseconds(50)
        let harness = ClientHarness(devices: [device])
        await harness.connect()
        // The consumer reads the event stream, and keeps up.
        let frames = FrameLog()
        let stream = harness.client.events
        let consumer = Task { @MainActor in
            for await event in stream {
                if case .diPayload(let payload, let meta) = event { frames.entries.append((meta.diCnt, payload)) }
            }
        }
        harness.peripheral.startRadioTraffic(every: trafficInterval, payloadSize: payloadSize)
        let client = harness.client
        var tasks: [Task<Outcome, any Error>] = []
        for index in 0..<200 {
            switch index % 10 {
            case 0, 5:
                let payload = Data([UInt8(truncatingIfNeeded: index), UInt8(truncatingIfNeeded: index >> 8), 0xAB])
                tasks.append(harness.start {
                    try await client.sendRfPayload(payload)
                    return .sent
                })
            case 7:
                tasks.append(harness.start {
                    .session(try await client.withExclusiveAtSession { session in
                        [try await session.runAtCommand("AT+PING=s\(index)a"), try await session.runAtCommand("AT+PING=s\(index)b")]
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
        await harness.advance(.seconds(1))
        consumer.cancel()
        let radioFrames = frames.entries
        #expect(harness.peripheral.droppedNotificationBytes == 0, "the flood fits the link")
        #expect(radioFrames.count > 100, "a real flood: \(radioFrames.count) frames")
        let counts = radioFrames.compactMap(\.cnt)
        #expect(counts == Array(1...counts.count), "in order, none lost")
        #expect(radioFrames.allSatisfy { $0.payload.count == payloadSize })
        #expect(harness.client.droppedEventCount == 0)
        await harness.finish()
    }
}
