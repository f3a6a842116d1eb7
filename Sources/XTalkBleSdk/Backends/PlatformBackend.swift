/// The platform's Bluetooth backend for `XTalkBleClient()`.
@MainActor
package enum PlatformBackend {
    /// Makes a backend; the simulator provides one to stand in for the platform.
    package typealias Provider = @MainActor @Sendable () -> any BleBackend

    /// Set for the duration of a task (and its children) to make
    /// `XTalkBleClient()` use another backend, e.g. a simulated environment.
    /// Task-local, so there is no global state.
    @TaskLocal package static var override: Provider?

    package static func make() -> any BleBackend {
        if let override { return override() }
        let scheduler = ClockTimerScheduler(clock: ContinuousClock())
        #if os(Linux)
            return BlueZBackend(scheduler: scheduler)
        #else
            return CoreBluetoothBackend(scheduler: scheduler)
        #endif
    }
}
