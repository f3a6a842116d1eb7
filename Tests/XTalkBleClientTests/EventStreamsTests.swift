import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

/// Issue 14, item 1: every read of `events` is its own stream, as SwiftUI's
/// `.task` re-subscription needs.
@Suite("events: one stream per reader, cancellable, bounded, never losing a state change", .timeLimit(.minutes(5)))
@MainActor
struct EventStreamsTests {
    /// Reads `stream` until `count` events arrived (or it ends).
    static func read(_ stream: AsyncStream<XTalkBleEvent>, count: Int) -> Task<[XTalkBleEvent], Never> {
        Task { @MainActor in
            var received: [XTalkBleEvent] = []
            for await event in stream {
                received.append(event)
                if received.count == count { break }
            }
            return received
        }
    }

    static func lines(_ events: [XTalkBleEvent]) -> [String] {
        events.compactMap { if case .atLine(let line) = $0 { line } else { nil } }
    }

    @Test("a consumer cancelled (a view disappeared) and a new one started receives the next command's lines")
    func resubscribe() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let first = Task { @MainActor [client = harness.client] in
            for await _ in client.events {}
        }
        await harness.advance(.milliseconds(10))
        first.cancel()
        await harness.clock.awaitEnd(of: first, "the cancelled consumer's loop")
        let second = harness.consumeEvents()
        await harness.advance(.milliseconds(10))
        #expect(try await harness.run { try await harness.client.runAtCommand("AT+VER?") } == ["+VER:2.1.0", "OK"])
        harness.client.teardown()
        let received = await harness.consumed(by: second, "the new consumer")
        #expect(Self.lines(received) == ["+VER:2.1.0", "OK"])
    }

    @Test("two consumers both receive every event, in order; cancelling one leaves the other")
    func twoConsumers() async throws {
        let harness = ClientHarness()
        let a = harness.consumeEvents()
        let bStream = harness.client.events
        let b = Task { @MainActor in
            var received: [XTalkBleEvent] = []
            for await event in bStream {
                received.append(event)
                if case .atLine("OK") = event { break }  // leaves after the first answer
            }
            return received
        }
        await harness.connect()
        _ = try await harness.run { try await harness.client.runAtCommand("AT+VER?") }
        let bReceived = await harness.clock.awaitEnd(of: b, "the consumer that leaves") ?? []
        _ = try await harness.run { try await harness.client.runAtCommand("AT+PING=x") }
        harness.client.teardown()
        let aReceived = await harness.consumed(by: a, "the consumer that stays")
        #expect(aReceived == harness.events, "every event, in order")
        #expect(bReceived == Array(harness.events.prefix(bReceived.count)), "the same events, in the same order")
        #expect(Self.lines(bReceived) == ["+VER:2.1.0", "OK"])
        #expect(Self.lines(aReceived) == ["+VER:2.1.0", "OK", "+PING:x", "OK"])
        #expect(harness.client.droppedEventCount == 0)
    }

    @Test("a 5,000-frame flood with a stalled consumer, then link loss: the stream still yields the state change")
    func floodThenLinkLoss() async {
        // What is tested is the stream, not the link: on an ideal link, with
        // timers due together fired together and two yields per firing, the
        // flood costs a few hundred main-queue hops, not the 75,000 that took
        // this test past a minute under ThreadSanitizer.
        var device = ClientHarness.fastDevice()
        device.link = .ideal
        let harness = ClientHarness(
            devices: [device], options: XTalkBleClientOptions(eventBufferLimit: 64),
            clock: XTalkVirtualClock(settleYields: 2, firesInstantTogether: true))
        await harness.connect()
        let stream = harness.client.events  // read, then not consumed while the flood lasts
        let start = harness.events.count
        for batch in 0..<50 {
            for index in 0..<100 { harness.peripheral.receiveRadioFrame(Data([UInt8(batch), UInt8(index)])) }
            await harness.advance(.seconds(1))
        }
        let frames = harness.events[start...].filter { if case .diPayload = $0 { true } else { false } }.count
        #expect(frames == 5_000, "the flood reached the client")
        harness.peripheral.disconnect()
        await harness.advance(.seconds(1))
        #expect(harness.client.connectionState == .disconnected)
        harness.client.teardown()
        let received = await harness.consumed(by: harness.consumeEvents(stream), "the stalled consumer")
        #expect(received.count <= 64 + 1, "bounded: \(received.count)")
        #expect(received.last == .connectionStateChanged(.disconnected), "the link loss is not dropped")
        #expect(harness.client.droppedEventCount == harness.events.count - start - received.count)
    }

    @Test("one stream iterated by two tasks: each event reaches one of them, and teardown ends both (no hang)")
    func sharedStream() async throws {
        let harness = ClientHarness()
        let stream = harness.client.events
        // Misuse (an AsyncStream has one reader), but it must not strand a reader.
        let readers = (0..<2).map { _ in harness.consumeEvents(stream) }
        await harness.advance(.milliseconds(10))  // both are waiting
        await harness.connect()
        _ = try await harness.run { try await harness.client.runAtCommand("AT+VER?") }
        harness.client.teardown()
        var received: [XTalkBleEvent] = []
        for reader in readers { received += await harness.consumed(by: reader, "a reader of the shared stream") }
        #expect(received.count == harness.events.count, "every event once, none lost, none twice")
        #expect(
            received.map(String.init(describing:)).sorted() == harness.events.map(String.init(describing:)).sorted())
    }

    @Test("teardown() finishes every live stream; a stream read after it is already finished")
    func teardownFinishesAll() async {
        let harness = ClientHarness()
        let consumers = (0..<3).map { _ in harness.consumeEvents() }
        await harness.connect()
        harness.client.teardown()
        for consumer in consumers {
            #expect(await harness.consumed(by: consumer) == harness.events)
        }
        let late = harness.consumeEvents()
        #expect(await harness.consumed(by: late, "a stream read after teardown()").isEmpty)
    }

    @Test(
        "three lines in one notification reach a waiting reader in order; teardown() mid-round hands it what it got"
    )
    func roundOfSeveralEvents() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let encode: ([UInt8]) -> [UInt8] = { [encoding = harness.client.atEncoding] bytes in
            encoding == .xor ? bytes.map { $0 ^ 0x5A } : bytes
        }
        // Every event of one notification is one delivery round: pushed to the
        // streams together, each waiting reader woken once.
        let whole = harness.consumeEvents()
        await harness.advance(.milliseconds(10))  // waiting
        harness.peripheral.notify(Data(encode(Array("+A:1\r\n+B:2\r\n+C:3\r\n".utf8))))
        await harness.advance(.milliseconds(100))
        // A callback that ends the client while the round is delivered: the
        // reader still gets the events the round gave it before, then the end.
        let cut = harness.consumeEvents()
        await harness.advance(.milliseconds(10))
        let client = harness.client
        var seen: [XTalkBleEvent] = []
        client.onEvent = { event in
            seen.append(event)
            if event == .atLine("+E:5") { client.teardown() }
        }
        harness.peripheral.notify(Data(encode(Array("+D:4\r\n+E:5\r\n+F:6\r\n".utf8))))
        await harness.advance(.milliseconds(100))
        #expect(seen == [.atLine("+D:4"), .atLine("+E:5")], "the round stops at teardown()")
        let wholeReceived = await harness.consumed(by: whole, "the reader of the first round")
        #expect(Self.lines(wholeReceived).prefix(3) == ["+A:1", "+B:2", "+C:3"])
        #expect(Self.lines(wholeReceived).suffix(2) == ["+D:4", "+E:5"])
        let cutReceived = await harness.consumed(by: cut, "the reader when teardown() came")
        #expect(cutReceived == [.atLine("+D:4"), .atLine("+E:5")], "what the round gave it, then the end")
    }
}

@Suite("events: a client released without teardown()", .timeLimit(.minutes(5)))
@MainActor
struct ReleasedClientTests {
    @Test("a client released without teardown() goes away and finishes its streams")
    func releasedClientFinishesStreams() async throws {
        let clock = XTalkVirtualClock()
        let environment = XTalkSimulatedEnvironment(devices: [ClientHarness.fastDevice()], clock: clock)
        var client: XTalkBleClient? = ClientHarness.makeClient(environment, XTalkBleClientOptions())
        weak let released = client
        let stream = try #require(client?.events)
        let reader = Task { @MainActor in
            var count = 0
            for await _ in stream { count += 1 }
            return count
        }
        client?.startScan()
        await clock.advance(by: .milliseconds(500))
        client = nil
        await clock.advance(by: .milliseconds(100))
        #expect(released == nil, "nothing keeps a released client alive")
        // A reader of the released client's stream ends instead of waiting for good.
        let count = await clock.awaitEnd(of: reader, "the reader of a released client's stream")
        #expect((count ?? 0) > 0, "it got the scan's events before the end")
    }
}
