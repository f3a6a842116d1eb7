import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator

/// Every public entry point of the client with bad values: each gets its
/// documented typed error before any byte is written, and the client stays
/// usable (the next good command gets its own answer).
@Suite("Bad input: every public entry point, a typed error, a usable client", .timeLimit(.minutes(5)))
@MainActor
struct BadInputTableTests {
    /// One bad call and the error it must produce.
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let error: XTalkBleError
        let call: @MainActor @Sendable (XTalkBleClient) async throws -> Void
        var testDescription: String { name }
    }

    nonisolated static func invalid(_ reason: String) -> XTalkBleError { .writeFailed(reason) }

    nonisolated static let badCommandTexts: [(String, String)] = [
        ("", "invalid AT command: the text is empty"),
        ("AT\r", "invalid AT command: CR at byte 2 would end the line early"),
        ("AT\nAT", "invalid AT command: LF at byte 2 would end the line early"),
        ("AT\r\n", "invalid AT command: CR at byte 2 would end the line early"),
        ("AT+NAME=é", "invalid AT command: byte 8 (0xC3) is not printable ASCII"),
        ("AT+NAME=📡", "invalid AT command: byte 8 (0xF0) is not printable ASCII"),
        ("AT\u{0}", "invalid AT command: byte 2 (0x00) is not printable ASCII"),
        ("AT\t", "invalid AT command: byte 2 (0x09) is not printable ASCII"),
        ("AT\u{7F}", "invalid AT command: byte 2 (0x7F) is not printable ASCII"),
    ]

    nonisolated static let cases: [Case] = {
        var cases: [Case] = []
        for (text, reason) in badCommandTexts {
            let shown = text.debugDescription
            cases.append(
                Case(name: "runAtCommand(\(shown))", error: invalid(reason)) { client in
                    _ = try await client.runAtCommand(text)
                })
            cases.append(
                Case(name: "runAtCommand(\(shown), .collectUntilTimeout)", error: invalid(reason)) { client in
                    _ = try await client.runAtCommand(text, timeoutMs: 100, responseMode: .collectUntilTimeout)
                })
            cases.append(
                Case(name: "sendAtCommandNoWait(\(shown))", error: invalid(reason)) { client in
                    try client.sendAtCommandNoWait(text)
                })
            cases.append(
                Case(name: "session.runAtCommand(\(shown))", error: invalid(reason)) { client in
                    try await client.withExclusiveAtSession { session in _ = try await session.runAtCommand(text) }
                })
        }
        for timeout in [0, -1, Int.min] {
            let reason = "invalid timeout: \(timeout) ms (it must be greater than zero)"
            cases.append(
                Case(name: "runAtCommand(timeoutMs: \(timeout))", error: invalid(reason)) { client in
                    _ = try await client.runAtCommand("AT", timeoutMs: timeout)
                })
            cases.append(
                Case(name: "session.runAtCommand(timeoutMs: \(timeout))", error: invalid(reason)) { client in
                    try await client.withExclusiveAtSession { session in
                        _ = try await session.runAtCommand("AT", timeoutMs: timeout)
                    }
                })
            cases.append(
                Case(name: "sendRfPayload(timeoutMs: \(timeout))", error: invalid(reason)) { client in
                    try await client.sendRfPayload(Data([1]), timeoutMs: timeout)
                })
        }
        let empty = "invalid RF payload: it is empty (1–240 bytes allowed)"
        let oversized = "invalid RF payload: 241 bytes (1–240 bytes allowed)"
        cases.append(Case(name: "sendRfPayload(empty)", error: invalid(empty)) { try await $0.sendRfPayload(Data()) })
        cases.append(
            Case(name: "sendRfPayload(241 bytes)", error: invalid(oversized)) {
                try await $0.sendRfPayload(Data(count: 241))
            })
        cases.append(
            Case(name: "sendRfPayloadNoWait(empty)", error: invalid(empty)) { try $0.sendRfPayloadNoWait(Data()) })
        cases.append(
            Case(name: "sendRfPayloadNoWait(241 bytes)", error: invalid(oversized)) {
                try $0.sendRfPayloadNoWait(Data(count: 241))
            })
        cases.append(
            Case(name: "session.sendRfPayload(241 bytes)", error: invalid(oversized)) { client in
                try await client.withExclusiveAtSession { session in try await session.sendRfPayload(Data(count: 241)) }
            })
        return cases
    }()

    @Test("a bad value gets its typed error before any byte is written; the client stays usable", arguments: cases)
    func badValue(_ bad: Case) async throws {
        let harness = ClientHarness()
        await harness.connect()
        let client = harness.client
        let bytesBefore = harness.peripheral.hostBytesDelivered
        let error = await harness.error { try await bad.call(client) }
        #expect(XTalkBleError.from(error) == bad.error)
        await harness.advance(.milliseconds(100))
        #expect(harness.peripheral.hostBytesDelivered == bytesBefore, "nothing was written")
        #expect(harness.peripheral.processedCommands.isEmpty)
        // Usable afterwards, in every way.
        #expect(try await harness.run { try await client.runAtCommand("AT+PING=after") } == ["+PING:after", "OK"])
        try await harness.run { try await client.sendRfPayload(Data([0xA5])) }
        #expect(client.atReady && client.connectionState == .connected)
        await harness.finish()
    }

    @Test("device-information queries with a timeout of zero or less return nil at once; the client stays usable")
    func deviceQueries() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let client = harness.client
        for timeout in [0, -1, Int.min] {
            let start = harness.clock.elapsed
            #expect(await client.fetchBatteryLevel(timeoutMs: timeout) == nil)
            #expect(await client.fetchBleFirmwareVersion(timeoutMs: timeout) == nil)
            #expect(await client.fetchHardwareVersion(timeoutMs: timeout) == nil)
            #expect(harness.clock.elapsed == start)
        }
        #expect(try await harness.run { await client.fetchBatteryLevel() } != nil)
        #expect(try await harness.run { try await client.runAtCommand("AT") } == ["OK"])
        await harness.finish()
    }

    @Test("connect(id:) with an unknown id publishes .deviceNotFound; a real id connects afterwards")
    func unknownDevice() async throws {
        let harness = ClientHarness()
        await harness.scan()
        let unknown = UUID()
        harness.client.connect(id: unknown)
        #expect(harness.client.connectionState == .failed(.deviceNotFound(unknown)))
        #expect(harness.environment.peripherals[0].connections == 0)
        await harness.connect()
        #expect(try await harness.run { try await harness.client.runAtCommand("AT") } == ["OK"])
        await harness.finish()
    }

    @Test("bad options: connectTimeout ≤ 0 fails connect(id:) with a reason and no link; eventBufferLimit < 1 means 1")
    func badOptions() async throws {
        for timeout in [Duration.zero, .seconds(-1)] {
            let harness = ClientHarness(options: XTalkBleClientOptions(connectTimeout: timeout))
            await harness.scan()
            let id = try #require(harness.client.scanResults.first?.id)
            harness.client.connect(id: id)
            #expect(
                harness.client.connectionState
                    == .failed(
                        .connectionFailed(
                            "invalid configuration: connectTimeout is \(timeout) (it must be greater than zero)")))
            await harness.advance(.milliseconds(200))
            #expect(harness.environment.peripherals[0].connections == 0, "no link was touched")
            await harness.finish()
        }
        let harness = ClientHarness(options: XTalkBleClientOptions(eventBufferLimit: -5), readsEventsAtStart: true)
        harness.client.startScan()
        await harness.advance(.milliseconds(50))
        for index in 0..<3 { harness.peripheral.emitLine("+N:\(index)") }  // (not connected: nothing arrives)
        harness.client.stopScan()
        #expect(harness.stateEvents == [.scanning, .idle])
        harness.client.teardown()
        // A limit of 1: the state changes are kept (never dropped), so nothing else fits.
        #expect(
            await harness.remainingEvents() == [.connectionStateChanged(.scanning), .connectionStateChanged(.idle)])
        let other = ClientHarness(options: XTalkBleClientOptions(eventBufferLimit: -5), readsEventsAtStart: true)
        await other.connect()
        let stream = other.client.events  // read when connected: lines only from here
        for index in 0..<3 { other.peripheral.emitLine("+N:\(index)") }
        await other.advance(.milliseconds(100))
        other.client.teardown()
        #expect(await other.consumed(by: other.consumeEvents(stream)) == [.atLine("+N:2")], "the newest event only")
        #expect(other.client.droppedEventCount == 2 + 3, "two lines here, three beside the state changes")
        await other.finish()
        await harness.finish()
    }

    @Test("removing an unknown observer, or one twice, does nothing")
    func unknownObservers() async throws {
        let harness = ClientHarness()
        await harness.connect()
        let client = harness.client
        client.removeAtLineObserver(UUID())
        client.removeSendFinishLineObserver(UUID())
        client.removePassthroughRawObserver(UUID())
        var lines: [String] = []
        let token = client.observeAtLines { lines.append($0) }
        client.removeAtLineObserver(token)
        client.removeAtLineObserver(token)
        client.removeSendFinishLineObserver(token)  // a token of another kind
        #expect(try await harness.run { try await client.runAtCommand("AT") } == ["OK"])
        #expect(lines.isEmpty)
        await harness.finish()
    }
}
