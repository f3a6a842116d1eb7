// One declaration of the client's observable state for every platform:
// `@XTalkPublished public private(set) var …` is Combine's `@Published` on
// Apple platforms (so `$connectionState` and `ObservableObject` work exactly as
// the API reference says) and, elsewhere, a wrapper that reports reads and
// writes to the Observation framework.

#if canImport(Combine)
    import Combine

    /// Combine's `@Published` on Apple platforms.
    public typealias XTalkPublished<Value> = Published<Value>
#else
    import Observation

    /// A class whose `@XTalkPublished` properties are observable with the
    /// Observation framework (`withObservationTracking`).
    public protocol XTalkObservationHost: AnyObject, Observable {
        /// The registrar the published properties report to.
        var observationRegistrar: ObservationRegistrar { get }
    }

    /// On platforms without Combine: a stored property whose reads and writes
    /// are reported to the enclosing object's Observation registrar. Usable only
    /// inside an `XTalkObservationHost` class.
    @propertyWrapper
    public struct XTalkPublished<Value> {
        private var stored: Value

        /// Stores the initial value (Combine's older spelling).
        public init(initialValue: Value) {
            stored = initialValue
        }

        /// Stores the initial value.
        public init(wrappedValue: Value) {
            stored = wrappedValue
        }

        /// Unused: access goes through the enclosing instance, which is what lets
        /// the wrapper reach the registrar.
        @available(*, unavailable, message: "@XTalkPublished is only available on properties of classes")
        public var wrappedValue: Value {
            get { stored }
            set { stored = newValue }
        }

        public static subscript<Host: XTalkObservationHost>(
            _enclosingInstance host: Host,
            wrapped wrappedKeyPath: ReferenceWritableKeyPath<Host, Value>,
            storage storageKeyPath: ReferenceWritableKeyPath<Host, XTalkPublished<Value>>
        ) -> Value {
            get {
                host.observationRegistrar.access(host, keyPath: wrappedKeyPath)
                return host[keyPath: storageKeyPath].stored
            }
            set {
                host.observationRegistrar.withMutation(of: host, keyPath: wrappedKeyPath) {
                    host[keyPath: storageKeyPath].stored = newValue
                }
            }
        }
    }
#endif
