import Foundation
import Testing
@testable import XTalkBleSdk
@testable import XTalkSimulator

/// The device's record: what a checker reads to tell the SDK's faults from the device's.
@Suite("Device record: commands, emissions and their delivery")
@MainActor
struct DeviceRecordTests {
    @Test("a command's answer is recorded against it, with when it was emitted and delivered")
    func answerIsAttributed() async throws {
        var device = XTalkSimulatedDevice()
        device.firmware.encoding = .plain
        device.firmware.echo = true
        device.firmware.processingDelay = .milliseconds(5)
        let probe = CentralProbe(devices: [device])
        await probe.connectAndSubscribe()
        probe.backend.writeValue(
            Data("AT+PING=r1\r\n".utf8), for: CentralProbe.tx, of: probe.id, type: .withoutResponse)
        await probe.advance(.seconds(1))
        let record = probe.peripheral.record
        let command = try #require(record.commands.last)
        #expect(command.text == "AT+PING=r1")
        #expect(command.connection == 1)
        #expect(record.connectedAt[1] != nil)
        #expect(record.hostWrites.last?.bytes == Array("AT+PING=r1\r\n".utf8))
        let answer = try #require(record.emissions.first { $0.output.kind == .answer(command: command.number) })
        #expect(answer.output.lines == ["AT+PING=r1", "+PING:r1", "OK"])
        #expect(answer.at == command.at + .milliseconds(5))
        #expect(answer.queued == answer.bytes.count)
        let delivered = try #require(answer.deliveredAt)
        #expect(delivered >= answer.at)
        #expect(answer.deliveredWhole)
        #expect(probe.notifications.reduce(Data(), +) == Data(answer.bytes))
        probe.finish()
    }

    @Test("output with nobody subscribed, or after the link is gone, is recorded as never delivered")
    func undeliveredOutput() async throws {
        let probe = CentralProbe()
        await probe.advance(.zero)
        probe.peripheral.receiveRadioFrame(Data([1, 2, 3]))
        var frame = try #require(probe.peripheral.record.emissions.last)
        #expect(frame.output.kind == .radioFrame)
        #expect(frame.connection == nil)
        #expect(frame.deliveredAt == nil)
        probe.backend.connect(probe.id)
        await probe.advance(.seconds(1))
        probe.peripheral.receiveRadioFrame(Data([4, 5, 6]))  // connected, not subscribed
        frame = try #require(probe.peripheral.record.emissions.last)
        #expect(frame.connection == 1)
        #expect(frame.queued == 0)
        probe.backend.setNotifyValue(true, for: CentralProbe.rx, of: probe.id)
        await probe.advance(.seconds(1))
        probe.peripheral.receiveRadioFrame(Data([7, 8, 9]))
        probe.peripheral.disconnect()  // before the next connection event
        await probe.advance(.seconds(1))
        frame = try #require(probe.peripheral.record.emissions.last)
        #expect(frame.queued == frame.bytes.count)
        #expect(frame.firstDeliveredAt == nil)
        #expect(!frame.deliveredWhole)
        probe.finish()
    }
}
