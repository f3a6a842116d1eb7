import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator
#if os(Linux)
    #if canImport(XTalkCoreBluetoothStandIn)
        import XTalkCoreBluetoothStandIn
    #else
        import CoreBluetooth  // the stand-in, under Apple's name (XTALK_APPLE_STANDINS=1)
    #endif
#endif

/// CI runs this suite twice: as is, and with `XTALK_BACKEND=corebluetooth`
/// (.ci/run). The second run proves something only if the client really went
/// through the CoreBluetooth backend; a misspelt value would silently run the
/// simulated central again.
@Suite("The backend the client suite runs through", .timeLimit(.minutes(5)))
@MainActor
struct BackendSelectionTests {
    @Test("XTALK_BACKEND names a known backend")
    func knownBackend() {
        #expect(
            ["simulator", "corebluetooth"].contains(ClientHarness.backendName),
            "XTALK_BACKEND=\(ClientHarness.backendName) is not a backend this suite knows")
    }

    @Test("the harness built the backend XTALK_BACKEND names, and the connection went through it")
    func backendIsTheNamedOne() async throws {
        let harness = ClientHarness()
        await harness.connect()
        #if os(Linux)
            let radio = harness.environment.coreBluetoothRadio
        #else
            let radio: Never? = nil
        #endif
        if ClientHarness.backendName == "corebluetooth" {
            #if os(Linux)
                let manager = try #require(radio?.centralManager, "a CoreBluetooth central manager over the stand-in")
                let peripheral = try #require(
                    manager.retrievePeripherals(withIdentifiers: [harness.peripheral.id]).first)
                #expect(peripheral.services?.isEmpty == false, "services were discovered through CoreBluetooth")
            #else
                Issue.record("XTALK_BACKEND=corebluetooth is a Linux stand-in run")
            #endif
        } else {
            #expect(radio == nil, "the simulated central, with no CoreBluetooth stand-in")
        }
        #expect(
            try await harness.run { try await harness.client.runAtCommand("AT+PING=backend") } == [
                "+PING:backend", "OK",
            ])
        await harness.finish()
    }
}
