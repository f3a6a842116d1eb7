// Where Combine does not exist (Linux), code written for Apple platforms
// against this SDK (`final class Model: ObservableObject` with `@Published`
// properties, as in the API guides) still compiles. These stand-ins only
// store values; observe the SDK's own state with the Observation framework.
// With OpenCombine or another Combine port imported too, qualify the names.

#if !canImport(Combine)
/// Linux stand-in for Combine's `ObservableObject`: a marker protocol.
public protocol ObservableObject: AnyObject {}

/// Linux stand-in for Combine's `@Published`: plain storage, no publisher.
@propertyWrapper
public struct Published<Value> {
    public var wrappedValue: Value

    public init(wrappedValue: Value) {
        self.wrappedValue = wrappedValue
    }

    public init(initialValue: Value) {
        wrappedValue = initialValue
    }
}
#endif
