import Foundation
import XTalkBleSdk

extension XTalkBleClient {
    /// A client whose Bluetooth is the simulated environment: the same client
    /// type an app ships, against simulated devices, in virtual time when the
    /// environment has an `XTalkVirtualClock`. Use one client per environment.
    public convenience init(simulator: XTalkSimulatedEnvironment, options: XTalkBleClientOptions = XTalkBleClientOptions()) {
        self.init(backend: simulator.backend, options: options)
    }
}
