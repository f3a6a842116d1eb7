// `ObservableObject` and `@Published` come with `import XTalkBleSdk` (or
// XTalkDeviceAuthSdk) on every platform, so that Apple-style model code
// (`final class Model: ObservableObject` with `@Published` properties, as in
// the API guides) compiles the same everywhere:
// - where Combine exists (Apple platforms, and Linux in the Apple stand-in
//   build), they are Combine's, re-exported: the client's `$connectionState`
//   is a Combine publisher and the client an `ObservableObject`;
// - elsewhere (Linux), the stand-ins below only store values; observe the
//   SDK's own state with the Observation framework.
// With OpenCombine or another Combine port imported too, qualify the names.

#if canImport(Combine)
    @_exported import Combine
#else
    /// Linux stand-in for Combine's `ObservableObject`: a marker protocol.
    public protocol ObservableObject: AnyObject {}

    /// Linux stand-in for Combine's `@Published`: plain storage, no publisher.
    @propertyWrapper
    public struct Published<Value> {
        /// The stored value.
        public var wrappedValue: Value

        /// Stores the initial value.
        public init(wrappedValue: Value) {
            self.wrappedValue = wrappedValue
        }

        /// Stores the initial value (Combine's older spelling).
        public init(initialValue: Value) {
            wrappedValue = initialValue
        }
    }
#endif
