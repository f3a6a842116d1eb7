import Foundation
import XTalkBleSdk

extension XTalkBleClient {
    /// A client whose Bluetooth is the simulated environment: the same client
    /// type an app ships, against simulated devices, in virtual time when the
    /// environment has an `XTalkVirtualClock`. Use one client per environment.
    public convenience init(
        simulator: XTalkSimulatedEnvironment, options: XTalkBleClientOptions = XTalkBleClientOptions()
    ) {
        self.init(backend: simulator.backend, options: options)
    }
}

extension XTalkSimulatedEnvironment {
    /// Runs `operation` with this environment standing in for the platform's
    /// Bluetooth: every `XTalkBleClient()` created inside it (and in its child
    /// tasks) talks to these simulated devices. Lets app code that creates its
    /// own client run unchanged in tests. Use it for one client at a time.
    public func runAsPlatformBluetooth<T>(_ operation: @MainActor () async throws -> T) async rethrows -> T {
        let backend = self.backend
        return try await PlatformBackend.$override.withValue({ backend }) {
            try await operation()
        }
    }
}
