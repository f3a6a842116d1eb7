// Stand-in for Apple's Combine, the part the SDK and Apple-style app code use:
// `ObservableObject`, `@Published` and subscribing with `sink`. It exists only
// so that the Apple code paths (`@XTalkPublished` as Combine's `@Published`,
// `ObservableObject` conformances, `$property.sink { ... }`) compile and run on
// Linux in the Apple stand-in build (XTALK_APPLE_STANDINS=1); it is never
// shipped. Delivery is synchronous on the sending thread, as in Combine.
//
// Each declaration has the Swift-visible shape of Apple's (a subset of the
// members), from https://developer.apple.com/documentation/combine/<symbol>:
//   Publisher              https://developer.apple.com/documentation/combine/publisher
//   Subscriber             https://developer.apple.com/documentation/combine/subscriber
//   Subscription           https://developer.apple.com/documentation/combine/subscription
//   Subscribers.Demand     https://developer.apple.com/documentation/combine/subscribers/demand
//   Subscribers.Completion https://developer.apple.com/documentation/combine/subscribers/completion
//   Subscribers.Sink       https://developer.apple.com/documentation/combine/subscribers/sink
//   Cancellable            https://developer.apple.com/documentation/combine/cancellable
//   AnyCancellable         https://developer.apple.com/documentation/combine/anycancellable
//   PassthroughSubject     https://developer.apple.com/documentation/combine/passthroughsubject
//   CurrentValueSubject    https://developer.apple.com/documentation/combine/currentvaluesubject
//   ObservableObject       https://developer.apple.com/documentation/combine/observableobject
//   ObservableObjectPublisher
//                          https://developer.apple.com/documentation/combine/observableobjectpublisher
//   Published              https://developer.apple.com/documentation/combine/published
//   Published.Publisher    https://developer.apple.com/documentation/combine/published/publisher

import Foundation

// MARK: - Protocols

/// A type that can be asked to stop an activity (a subscription, a timer, ...).
public protocol Cancellable {
    /// Stops the activity and frees what it holds.
    func cancel()
}

/// A subscriber's link to a publisher: the subscriber asks for values through it, or cancels.
public protocol Subscription: Cancellable {
    /// Tells the publisher it may send up to `demand` more values.
    func request(_ demand: Subscribers.Demand)
}

/// A type that receives values, then at most one completion, from a publisher.
public protocol Subscriber<Input, Failure> {
    /// The values received.
    associatedtype Input
    /// The error a failing publisher ends with.
    associatedtype Failure: Error

    /// Receives the subscription, once, before anything else; the subscriber requests values through it.
    func receive(subscription: any Subscription)
    /// Receives one value and returns how many more values it wants on top of the outstanding demand.
    func receive(_ input: Input) -> Subscribers.Demand
    /// Receives the end of the stream: `.finished` or `.failure(error)`.
    func receive(completion: Subscribers.Completion<Failure>)
}

/// A type that delivers a sequence of values over time to its subscribers.
public protocol Publisher<Output, Failure> {
    /// The values published.
    associatedtype Output
    /// The error the publisher may end with (`Never` if it cannot fail).
    associatedtype Failure: Error

    /// Attaches `subscriber`, which then receives a subscription, values and a completion.
    func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure
}

extension Publisher {
    /// Attaches `subscriber` to this publisher; the public entry point, as in Combine.
    public func subscribe<S: Subscriber>(_ subscriber: S) where S.Input == Output, S.Failure == Failure {
        receive(subscriber: subscriber)
    }

    /// Subscribes with closures and unlimited demand; the subscription lasts as long as the returned token.
    public func sink(
        receiveCompletion: @escaping (Subscribers.Completion<Failure>) -> Void,
        receiveValue: @escaping (Output) -> Void
    ) -> AnyCancellable {
        let sink = Subscribers.Sink<Output, Failure>(receiveCompletion: receiveCompletion, receiveValue: receiveValue)
        subscribe(sink)
        return AnyCancellable(sink)
    }
}

extension Publisher where Failure == Never {
    /// Subscribes with a closure and unlimited demand; the subscription lasts as long as the returned token.
    public func sink(receiveValue: @escaping (Output) -> Void) -> AnyCancellable {
        sink(receiveCompletion: { _ in }, receiveValue: receiveValue)
    }
}

// MARK: - Subscribers

/// Namespace of subscriber-side types, as in Combine.
public enum Subscribers {
    /// How many more values a subscriber wants: a number, or unlimited.
    public struct Demand: Equatable, Comparable, Hashable, Sendable, CustomStringConvertible {
        /// The count, or nil for unlimited.
        private let limit: Int?

        /// Wraps a count (clamped at zero) or nil for unlimited.
        private init(limit: Int?) {
            self.limit = limit.map { Swift.max(0, $0) }
        }

        /// As many values as the publisher produces.
        public static let unlimited = Demand(limit: nil)
        /// No more values.
        public static let none = Demand(limit: 0)

        /// At most `value` more values.
        public static func max(_ value: Int) -> Demand {
            Demand(limit: value)
        }

        /// The count, or nil when unlimited.
        public var max: Int? { limit }

        /// "unlimited" or "max(n)", as Combine prints it.
        public var description: String { limit.map { "max(\($0))" } ?? "unlimited" }

        /// The sum of two demands; unlimited absorbs everything.
        public static func + (lhs: Demand, rhs: Demand) -> Demand {
            guard let left = lhs.limit, let right = rhs.limit else { return .unlimited }
            let (sum, overflow) = left.addingReportingOverflow(right)
            return overflow ? .unlimited : Demand(limit: sum)
        }

        /// Adds `rhs` to `lhs`.
        public static func += (lhs: inout Demand, rhs: Demand) {
            lhs = lhs + rhs
        }

        /// Orders by count; unlimited is greater than any count.
        public static func < (lhs: Demand, rhs: Demand) -> Bool {
            switch (lhs.limit, rhs.limit) {
            case (nil, _): false
            case (_, nil): true
            case let (left?, right?): left < right
            }
        }

        /// The demand left after one value is delivered; unlimited stays unlimited.
        var afterOneDelivery: Demand { limit.map { Demand(limit: $0 - 1) } ?? .unlimited }
    }

    /// The end of a publisher's stream.
    public enum Completion<Failure: Error> {
        /// Ended normally.
        case finished
        /// Ended with an error.
        case failure(Failure)
    }

    /// The subscriber behind `sink`: requests unlimited values and calls its closures.
    public final class Sink<Input, Failure: Error>: Subscriber, Cancellable {
        /// Called with each value.
        public let receiveValue: (Input) -> Void
        /// Called once with the completion.
        public let receiveCompletion: (Subscribers.Completion<Failure>) -> Void
        /// Guards `subscription`: a publisher may call from any thread.
        private let lock = NSLock()
        /// The active subscription; nil before subscribing and after completion or cancellation.
        private var subscription: (any Subscription)?
        /// Set once cancelled or completed, so that a late subscription is refused.
        private var isDone = false

        /// A sink that calls `receiveValue` for each value and `receiveCompletion` at the end.
        public init(
            receiveCompletion: @escaping (Subscribers.Completion<Failure>) -> Void,
            receiveValue: @escaping (Input) -> Void
        ) {
            self.receiveCompletion = receiveCompletion
            self.receiveValue = receiveValue
        }

        /// Keeps the first subscription and asks it for everything; any other is cancelled.
        public func receive(subscription: any Subscription) {
            let accepted = lock.withLock {
                guard self.subscription == nil, !isDone else { return false }
                self.subscription = subscription
                return true
            }
            // Requested outside the lock: the publisher may deliver values synchronously.
            if accepted { subscription.request(.unlimited) } else { subscription.cancel() }
        }

        /// Passes the value to `receiveValue`; the demand is already unlimited.
        public func receive(_ input: Input) -> Subscribers.Demand {
            receiveValue(input)
            return .none
        }

        /// Passes the completion to `receiveCompletion` and lets the subscription go.
        public func receive(completion: Subscribers.Completion<Failure>) {
            lock.withLock {
                isDone = true
                subscription = nil
            }
            receiveCompletion(completion)
        }

        /// Cancels the subscription; no value arrives afterwards.
        public func cancel() {
            let subscription = lock.withLock {
                isDone = true
                defer { self.subscription = nil }
                return self.subscription
            }
            subscription?.cancel()
        }
    }
}

extension Subscribers.Completion: Equatable where Failure: Equatable {}
extension Subscribers.Completion: Hashable where Failure: Hashable {}
extension Subscribers.Completion: Sendable where Failure: Sendable {}

// MARK: - Cancellation token

/// A cancellation token that cancels its activity when cancelled or deinitialized.
public final class AnyCancellable: Cancellable, Hashable {
    /// Guards `action`: `cancel()` may be called from several threads at once.
    private let lock = NSLock()
    /// What cancelling does; nil once done.
    private var action: (() -> Void)?

    /// A token that runs `cancel` once, when cancelled or deinitialized.
    public init(_ cancel: @escaping () -> Void) {
        action = cancel
    }

    /// A token that cancels `canceller` when cancelled or deinitialized.
    public init<C: Cancellable>(_ canceller: C) {
        action = { canceller.cancel() }
    }

    /// Cancels, as Combine does, when the last reference goes away.
    deinit {
        cancel()
    }

    /// Runs the cancellation once; later calls do nothing.
    public func cancel() {
        let action = lock.withLock {
            defer { self.action = nil }
            return self.action
        }
        action?()
    }

    /// Tokens are equal only to themselves.
    public static func == (lhs: AnyCancellable, rhs: AnyCancellable) -> Bool {
        lhs === rhs
    }

    /// Hashes the token's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }

    /// Keeps the token in a set, so that the subscription lives as long as the set.
    public func store(in set: inout Set<AnyCancellable>) {
        set.insert(self)
    }

    /// Keeps the token in a collection, so that the subscription lives as long as the collection.
    public func store<C: RangeReplaceableCollection>(in collection: inout C) where C.Element == AnyCancellable {
        collection.append(self)
    }
}

// MARK: - Fan-out (internal)

/// One subscriber's subscription to a `Broadcaster`; the base class lets the broadcaster hold any subscriber type.
class BroadcastConduit<Output, Failure: Error>: Subscription {
    /// Offers a value; delivered if the subscriber has demand, otherwise kept or dropped (see `Conduit`).
    func offer(_ value: Output) {}
    /// Ends the subscription with a completion.
    func finish(_ completion: Subscribers.Completion<Failure>) {}
    /// Adds demand; overridden.
    func request(_ demand: Subscribers.Demand) {}
    /// Cancels; overridden.
    func cancel() {}
}

/// The subscription of one concrete subscriber: tracks its demand and buffers what it may not
/// receive yet. A current-value publisher keeps the newest undelivered value until demand arrives;
/// a passthrough one drops values the subscriber has not asked for, as Combine's subjects do.
final class Conduit<Downstream: Subscriber>: BroadcastConduit<Downstream.Input, Downstream.Failure> {
    /// Guards every mutable property; never held while calling the subscriber.
    private let lock = NSLock()
    /// The subscriber; nil after completion or cancellation.
    private var downstream: Downstream?
    /// Values the subscriber still accepts, the buffered ones included.
    private var demand = Subscribers.Demand.none
    /// Accepted values not delivered yet, oldest first: a value sent while the subscriber is still
    /// handling the previous one (a re-entrant send) waits here, so that order is kept.
    private var buffer: [Downstream.Input] = []
    /// Whether, without demand, the newest value is kept (current value) or dropped (passthrough).
    private let keepsLatest: Bool
    /// Set while a value is being handed to the subscriber, so that nested calls only buffer.
    private var isDelivering = false
    /// The broadcaster to leave on cancellation; weak, so that a subscription does not keep a publisher alive.
    private weak var parent: Broadcaster<Downstream.Input, Downstream.Failure>?

    /// A subscription of `downstream` to `parent`; with `initial`, it keeps the newest value (current-value semantics).
    init(downstream: Downstream, parent: Broadcaster<Downstream.Input, Downstream.Failure>, initial: Downstream.Input?)
    {
        self.downstream = downstream
        self.parent = parent
        keepsLatest = initial != nil
        buffer = initial.map { [$0] } ?? []
    }

    /// Adds demand and delivers what is buffered.
    override func request(_ demand: Subscribers.Demand) {
        lock.withLock { self.demand += demand }
        drain()
    }

    /// Accepts a new value if the subscriber wants it (or keeps it as the newest), then delivers.
    override func offer(_ value: Downstream.Input) {
        lock.withLock {
            guard downstream != nil else { return }
            if demand > .max(buffer.count) {
                buffer.append(value)
            } else if keepsLatest {
                // No demand for it yet: only the newest value is worth delivering later.
                buffer = [value]
            }
        }
        drain()
    }

    /// Hands buffered values to the subscriber while it has demand, one at a time, in order.
    private func drain() {
        while true {
            let next: (Downstream, Downstream.Input)? = lock.withLock {
                guard !isDelivering, demand > .none, let downstream, !buffer.isEmpty else { return nil }
                demand = demand.afterOneDelivery
                isDelivering = true
                return (downstream, buffer.removeFirst())
            }
            guard let (downstream, value) = next else { return }
            let more = downstream.receive(value)
            lock.withLock {
                isDelivering = false
                demand += more
            }
        }
    }

    /// Ends with a completion; the subscriber hears nothing afterwards.
    override func finish(_ completion: Subscribers.Completion<Downstream.Failure>) {
        let downstream = lock.withLock {
            defer {
                self.downstream = nil
                buffer.removeAll()
            }
            return self.downstream
        }
        downstream?.receive(completion: completion)
    }

    /// Stops delivery and leaves the broadcaster.
    override func cancel() {
        lock.withLock {
            downstream = nil
            buffer.removeAll()
        }
        parent?.detach(self)
    }
}

/// Sends each value to every current subscriber, in subscription order; the engine of every publisher here.
final class Broadcaster<Output, Failure: Error> {
    /// Guards the subscriber list and the completion; never held while calling a subscriber.
    private let lock = NSLock()
    /// Current subscriptions, in subscription order.
    private var conduits: [BroadcastConduit<Output, Failure>] = []
    /// How the stream ended, once it has.
    private var completion: Subscribers.Completion<Failure>?

    /// An empty broadcaster.
    init() {}

    /// Subscribes `subscriber`; with `initial`, it receives that value first, as soon as it has demand.
    func attach<S: Subscriber>(_ subscriber: S, initial: Output?) where S.Input == Output, S.Failure == Failure {
        let conduit = Conduit(downstream: subscriber, parent: self, initial: initial)
        let ended = lock.withLock {
            if completion == nil { conduits.append(conduit) }
            return completion
        }
        subscriber.receive(subscription: conduit)
        if let ended { conduit.finish(ended) }
    }

    /// Offers `value` to every subscriber.
    func send(_ value: Output) {
        let current = lock.withLock { completion == nil ? conduits : [] }
        for conduit in current { conduit.offer(value) }
    }

    /// Ends the stream for every subscriber, once.
    func send(completion: Subscribers.Completion<Failure>) {
        let current: [BroadcastConduit<Output, Failure>] = lock.withLock {
            guard self.completion == nil else { return [] }
            self.completion = completion
            defer { conduits.removeAll() }
            return conduits
        }
        for conduit in current { conduit.finish(completion) }
    }

    /// Removes a cancelled subscription.
    func detach(_ conduit: BroadcastConduit<Output, Failure>) {
        lock.withLock { conduits.removeAll { $0 === conduit } }
    }
}

// MARK: - Subjects

/// A publisher that sends the values given to `send(_:)` to its current subscribers.
public final class PassthroughSubject<Output, Failure: Error>: Publisher {
    /// The subscribers.
    private let broadcaster = Broadcaster<Output, Failure>()

    /// A subject with no subscribers.
    public init() {}

    /// Attaches a subscriber; it receives the values sent from now on.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
        broadcaster.attach(subscriber, initial: nil)
    }

    /// Sends a value to every subscriber with demand.
    public func send(_ input: Output) {
        broadcaster.send(input)
    }

    /// Ends the stream.
    public func send(completion: Subscribers.Completion<Failure>) {
        broadcaster.send(completion: completion)
    }
}

extension PassthroughSubject where Output == Void {
    /// Sends `()`.
    public func send() {
        send(())
    }
}

/// A publisher that holds a current value, sends it to each new subscriber, then every new value.
public final class CurrentValueSubject<Output, Failure: Error>: Publisher {
    /// The subscribers.
    private let broadcaster = Broadcaster<Output, Failure>()
    /// Guards `current`.
    private let lock = NSLock()
    /// The current value.
    private var current: Output

    /// A subject holding `value`.
    public init(_ value: Output) {
        current = value
    }

    /// The current value; setting it sends the new value.
    public var value: Output {
        get { lock.withLock { current } }
        set { send(newValue) }
    }

    /// Attaches a subscriber; it receives the current value, then every new one.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
        broadcaster.attach(subscriber, initial: value)
    }

    /// Stores and sends a new value.
    public func send(_ input: Output) {
        lock.withLock { current = input }
        broadcaster.send(input)
    }

    /// Ends the stream.
    public func send(completion: Subscribers.Completion<Failure>) {
        broadcaster.send(completion: completion)
    }
}

// MARK: - ObservableObject

/// The publisher an `ObservableObject` sends on before any of its `@Published` properties changes.
public final class ObservableObjectPublisher: Publisher {
    /// Emits `()` and never fails.
    public typealias Output = Void
    /// Never fails.
    public typealias Failure = Never

    /// The subscribers.
    private let broadcaster = Broadcaster<Void, Never>()

    /// A publisher with no subscribers.
    public init() {}

    /// Attaches a subscriber; it hears every change announced from now on.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Void, S.Failure == Never {
        broadcaster.attach(subscriber, initial: nil)
    }

    /// Announces a change.
    public func send() {
        broadcaster.send(())
    }
}

/// A class whose changes are announced by `objectWillChange` before they happen.
public protocol ObservableObject: AnyObject {
    /// The announcing publisher; by default an `ObservableObjectPublisher` fed by the `@Published` properties.
    associatedtype ObjectWillChangePublisher: Publisher = ObservableObjectPublisher
    where ObjectWillChangePublisher.Failure == Never

    /// Announces every change before it happens.
    var objectWillChange: ObjectWillChangePublisher { get }
}

/// Serializes installing an object's publisher into its `@Published` properties.
private let objectWillChangeInstallation = NSLock()

extension ObservableObject where ObjectWillChangePublisher == ObservableObjectPublisher {
    /// One publisher per object, shared by its `@Published` properties (found by reflection, as
    /// Combine does), created on first use. An object without them gets a fresh, silent publisher.
    public var objectWillChange: ObservableObjectPublisher {
        objectWillChangeInstallation.withLock {
            var properties: [any PublishedProperty] = []
            var mirror: Mirror? = Mirror(reflecting: self)
            while let current = mirror {
                properties += current.children.compactMap { $0.value as? any PublishedProperty }
                mirror = current.superclassMirror
            }
            if let existing = properties.lazy.compactMap({ $0.objectWillChange }).first { return existing }
            let publisher = ObservableObjectPublisher()
            for property in properties { property.objectWillChange = publisher }
            return publisher
        }
    }
}

/// What the default `objectWillChange` needs of a `@Published` property, whatever its value type.
protocol PublishedProperty {
    /// The enclosing object's publisher, once installed.
    var objectWillChange: ObservableObjectPublisher? { get nonmutating set }
}

// MARK: - Published

/// A property of an `ObservableObject` class that announces changes: `objectWillChange` fires and
/// `$property` (a publisher of the current and every new value) emits before each new value is stored.
@propertyWrapper
public struct Published<Value> {
    /// The value and its publishers; a reference, so that every copy of the wrapper shares them.
    final class Storage {
        /// The stored value.
        var value: Value
        /// The subscribers of `$property`.
        let broadcaster = Broadcaster<Value, Never>()
        /// The enclosing object's change publisher, installed by the default `objectWillChange`.
        var objectWillChange: ObservableObjectPublisher?

        /// Storage holding `value`.
        init(_ value: Value) {
            self.value = value
        }
    }

    /// Shared storage.
    let storage: Storage

    /// A published property with an initial value.
    public init(wrappedValue: Value) {
        storage = Storage(wrappedValue)
    }

    /// A published property with an initial value (the older spelling, kept by Combine).
    public init(initialValue: Value) {
        self.init(wrappedValue: initialValue)
    }

    /// Unused: access goes through the enclosing instance, which is what lets a change reach
    /// the object's `objectWillChange`.
    @available(*, unavailable, message: "@Published is only available on properties of classes")
    public var wrappedValue: Value {
        get { storage.value }
        set { storage.value = newValue }
    }

    /// The publisher of this property: the current value on subscription, then each new value.
    public var projectedValue: Published<Value>.Publisher {
        Publisher(storage: storage)
    }

    /// Reads and writes the property of `object`; a write announces the change, then stores the value.
    public static subscript<EnclosingSelf: AnyObject>(
        _enclosingInstance object: EnclosingSelf,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<EnclosingSelf, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<EnclosingSelf, Published<Value>>
    ) -> Value {
        get { object[keyPath: storageKeyPath].storage.value }
        set {
            let storage = object[keyPath: storageKeyPath].storage
            // Combine publishes in willSet: subscribers see the new value before the property holds it.
            storage.objectWillChange?.send()
            storage.broadcaster.send(newValue)
            storage.value = newValue
        }
    }

    /// The publisher of a `@Published` property (`$property`).
    public struct Publisher: Combine.Publisher {
        /// The property's values.
        public typealias Output = Value
        /// Never fails.
        public typealias Failure = Never

        /// The property's storage.
        let storage: Storage

        /// Attaches a subscriber; it receives the current value, then every new one.
        public func receive<S: Subscriber>(subscriber: S) where S.Input == Value, S.Failure == Never {
            storage.broadcaster.attach(subscriber, initial: storage.value)
        }
    }
}

extension Published: PublishedProperty {
    /// The enclosing object's change publisher, shared through the storage.
    var objectWillChange: ObservableObjectPublisher? {
        get { storage.objectWillChange }
        nonmutating set { storage.objectWillChange = newValue }
    }
}
