import Foundation
import Testing
import XTalkBleSdk
import XTalkDeviceAuthSdk
import XTalkSimulator
import XTalkTestSupport

/// A connected client on a simulated device, the seed's adapter over it, and
/// an authenticator; virtual time throughout.
@MainActor
final class AuthHarness {
    let clock = XTalkVirtualClock()
    let environment: XTalkSimulatedEnvironment
    let client: XTalkBleClient
    let transport: XTalkBleAuthTransport
    let authenticator: XTalkDeviceAuthenticator
    private(set) var states: [XTalkDeviceAuthState] = []
    let logs = LogLines()

    /// The authenticator's warnings.
    private(set) var warnings: [String] = []

    init(
        firmware: XTalkSimulatedFirmware = XTalkSimulatedFirmware(), link: XTalkSimulatedLink? = nil,
        randomBytes: (@Sendable (Int) throws -> [UInt8])? = nil, bundle: Bundle? = nil
    ) {
        var device = XTalkSimulatedDevice(firmware: firmware)
        device.link =
            link
            ?? {
                var fast = XTalkSimulatedLink()
                fast.connectionInterval = .milliseconds(7.5)
                return fast
            }()
        environment = XTalkSimulatedEnvironment(devices: [device], clock: clock)
        let logs = self.logs
        client = XTalkBleClient(
            simulator: environment,
            options: XTalkBleClientOptions(
                logLevel: .debug, logHandler: { _, message in logs.append(message) }))
        transport = XTalkBleAuthTransport(ble: client)
        if randomBytes != nil || bundle != nil {
            authenticator = XTalkDeviceAuthenticator(
                transport: transport, randomBytes: randomBytes, bundle: bundle ?? .main)
        } else {
            authenticator = XTalkDeviceAuthenticator(transport: transport)
        }
        authenticator.logHandler = { [weak self] message in self?.warnings.append(message) }
    }

    var peripheral: XTalkSimulatedPeripheral { environment.peripherals[0] }

    func connect() async {
        client.startScan()
        for _ in 0..<100 where client.scanResults.isEmpty { await clock.advance(by: .milliseconds(10)) }
        guard let result = client.scanResults.first else {
            Issue.record("no device found")
            return
        }
        client.connect(id: result.id)
        for _ in 0..<1_000 where !client.atReady { await clock.advance(by: .milliseconds(5)) }
        #expect(client.atReady)
    }

    /// Authenticates, recording every published state; returns the outcome.
    func authenticate(_ configuration: XTalkDeviceAuthConfiguration = XTalkDeviceAuthConfiguration())
        async -> Result<XTalkDeviceAuthResult, XTalkDeviceAuthError>
    {
        let authenticator = self.authenticator
        let recorder = Task { @MainActor [weak self] in
            while !Task.isCancelled {
                if let self, self.states.last != authenticator.state { self.states.append(authenticator.state) }
                await Task.yield()
            }
        }
        defer { recorder.cancel() }
        do {
            let result = try await clock.run { try await authenticator.authenticate(configuration: configuration) }
            await clock.settle()
            if states.last != authenticator.state { states.append(authenticator.state) }
            return .success(result)
        } catch let error as XTalkDeviceAuthError {
            await clock.settle()
            if states.last != authenticator.state { states.append(authenticator.state) }
            return .failure(error)
        } catch {
            Issue.record("unexpected error \(error)")
            return .failure(.transportUnavailable)
        }
    }

    /// Starts an authentication that waits on the device (its replies are
    /// delayed): 100 ms in, it is probing.
    func runWaitingOnDevice(sourceLocation: SourceLocation = #_sourceLocation) async
        -> Task<XTalkDeviceAuthResult, any Error>
    {
        peripheral.device.firmware.faults.replyDelay = .milliseconds(500)
        let authenticator = self.authenticator
        let running = Task { @MainActor in try await authenticator.authenticate() }
        await clock.advance(by: .milliseconds(100))
        #expect(authenticator.state == .probing, sourceLocation: sourceLocation)
        return running
    }

    func finish() async {
        client.teardown()
        environment.shutDown()
        await clock.settle()
        #expect(clock.pendingTimerCount == 0)
    }
}

extension XTalkSimulatedFirmware {
    /// The canonical identity of serial XT2648012345.
    static let expectedDid = "did:xtalk:B5803039"
}
