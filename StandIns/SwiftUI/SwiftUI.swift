// Stand-in for Apple's SwiftUI, the part the documentation's samples use, so
// that they compile on Linux in the Apple stand-in build
// (XTALK_APPLE_STANDINS=1); it is never shipped and draws nothing. Each
// declaration has the Swift-visible shape of Apple's (a subset of the
// members), from https://developer.apple.com/documentation/swiftui/<symbol>:
//   View          https://developer.apple.com/documentation/swiftui/view
//   ViewBuilder   https://developer.apple.com/documentation/swiftui/viewbuilder
//   State         https://developer.apple.com/documentation/swiftui/state
//   Binding       https://developer.apple.com/documentation/swiftui/binding
//   Text          https://developer.apple.com/documentation/swiftui/text
//   List          https://developer.apple.com/documentation/swiftui/list
//   ForEach       https://developer.apple.com/documentation/swiftui/foreach
//   View.task     https://developer.apple.com/documentation/swiftui/view/task(priority:_:)
//   StateObject   https://developer.apple.com/documentation/swiftui/stateobject
//   Button        https://developer.apple.com/documentation/swiftui/button
//   TupleView     https://developer.apple.com/documentation/swiftui/tupleview
//   View.toolbar  https://developer.apple.com/documentation/swiftui/view/toolbar(content:)-5w0tj
//   View.onDisappear
//                 https://developer.apple.com/documentation/swiftui/view/ondisappear(perform:)

import Combine

/// A piece of user interface.
@MainActor @preconcurrency
public protocol View {
    /// The type of view this view is made of.
    associatedtype Body: View
    /// The content of the view.
    @ViewBuilder @MainActor @preconcurrency var body: Self.Body { get }
}

extension Never: View {
    public typealias Body = Never
    public var body: Never { fatalError("Never has no body") }
}

/// Builds views from closures.
@resultBuilder
public struct ViewBuilder {
    public static func buildBlock() -> EmptyView { EmptyView() }
    public static func buildBlock<Content: View>(_ content: Content) -> Content { content }
    public static func buildExpression<Content: View>(_ content: Content) -> Content { content }
    public static func buildBlock<C0: View, C1: View>(_ c0: C0, _ c1: C1) -> TupleView<(C0, C1)> {
        TupleView((c0, c1))
    }
}

/// A view created from a tuple of views.
public struct TupleView<T>: View {
    nonisolated(unsafe) public var value: T
    nonisolated public init(_ value: T) { self.value = value }
    public var body: Never { fatalError("TupleView has no body") }
}

/// A view that shows nothing.
public struct EmptyView: View {
    nonisolated public init() {}
    public var body: Never { fatalError("EmptyView has no body") }
}

/// A property wrapper type that can read and write a value managed by SwiftUI.
@propertyWrapper
public struct State<Value>: DynamicProperty {
    nonisolated(unsafe) private let box: StateBox<Value>

    nonisolated public init(wrappedValue value: Value) {
        box = StateBox(value)
    }

    public var wrappedValue: Value {
        get { box.value }
        nonmutating set { box.value = newValue }
    }

    public var projectedValue: Binding<Value> {
        Binding(get: { box.value }, set: { box.value = $0 })
    }
}

extension State: @unchecked Sendable where Value: Sendable {}

private final class StateBox<Value> {
    nonisolated(unsafe) var value: Value
    init(_ value: Value) { self.value = value }
}

/// A stored value that SwiftUI updates (the marker protocol of `State`).
public protocol DynamicProperty {}

/// A two-way connection to a value stored elsewhere.
@propertyWrapper
public struct Binding<Value> {
    nonisolated(unsafe) private let get: () -> Value
    nonisolated(unsafe) private let set: (Value) -> Void

    nonisolated public init(get: @escaping () -> Value, set: @escaping (Value) -> Void) {
        self.get = get
        self.set = set
    }

    public var wrappedValue: Value {
        get { get() }
        nonmutating set { set(newValue) }
    }
}

/// A view that displays one or more lines of read-only text.
public struct Text: View {
    private let content: String

    nonisolated public init<S: StringProtocol>(_ content: S) {
        self.content = String(content)
    }

    public var body: Never { fatalError("Text has no body") }
}

/// A structure that computes views on demand from a collection of identified data.
public struct ForEach<Data: RandomAccessCollection, ID: Hashable, Content: View>: View {
    nonisolated(unsafe) public let data: Data
    nonisolated(unsafe) public let content: (Data.Element) -> Content

    nonisolated public init(
        _ data: Data, id: KeyPath<Data.Element, ID>, @ViewBuilder content: @escaping (Data.Element) -> Content
    ) {
        self.data = data
        self.content = content
    }

    public var body: Never { fatalError("ForEach has no body") }
}

extension ForEach where ID == Data.Element.ID, Data.Element: Identifiable {
    nonisolated public init(_ data: Data, @ViewBuilder content: @escaping (Data.Element) -> Content) {
        self.init(data, id: \.id, content: content)
    }
}

/// A container that presents rows of data arranged in a single column.
public struct List<SelectionValue: Hashable, Content: View>: View {
    nonisolated(unsafe) private let content: Content

    nonisolated public init<Data: RandomAccessCollection, ID: Hashable, RowContent: View>(
        _ data: Data, id: KeyPath<Data.Element, ID>, @ViewBuilder rowContent: @escaping (Data.Element) -> RowContent
    ) where Content == ForEach<Data, ID, RowContent>, SelectionValue == Never {
        content = ForEach(data, id: id, content: rowContent)
    }

    nonisolated public init<Data: RandomAccessCollection, RowContent: View>(
        _ data: Data, @ViewBuilder rowContent: @escaping (Data.Element) -> RowContent
    ) where Content == ForEach<Data, Data.Element.ID, RowContent>, Data.Element: Identifiable, SelectionValue == Never {
        content = ForEach(data, content: rowContent)
    }

    public var body: Never { fatalError("List has no body") }
}

/// A control that initiates an action.
public struct Button<Label: View>: View {
    nonisolated(unsafe) private let label: Label
    private let action: @MainActor () -> Void

    nonisolated public init<S: StringProtocol>(_ title: S, action: @escaping @MainActor () -> Void)
    where Label == Text {
        label = Text(title)
        self.action = action
    }

    public var body: Never { fatalError("Button has no body") }
}

/// A property wrapper type that instantiates an observable object.
@MainActor @propertyWrapper @preconcurrency
public struct StateObject<ObjectType: ObservableObject>: DynamicProperty {
    nonisolated(unsafe) private let box: StateBox<ObjectType?>
    nonisolated(unsafe) private let make: () -> ObjectType

    nonisolated public init(wrappedValue thunk: @autoclosure @escaping () -> ObjectType) {
        box = StateBox(nil)
        make = thunk
    }

    public var wrappedValue: ObjectType {
        if let object = box.value { return object }
        let object = make()
        box.value = object
        return object
    }
}

/// A view with a modifier applied (what `toolbar(content:)` and `onDisappear(perform:)` return).
public struct ModifiedContent<Content, Modifier>: View {
    nonisolated(unsafe) public var content: Content
    nonisolated(unsafe) public var modifier: Modifier

    nonisolated init(content: Content, modifier: Modifier) {
        self.content = content
        self.modifier = modifier
    }

    public var body: Never { fatalError("ModifiedContent has no body") }
}

/// A view with an asynchronous task attached (what `task(priority:_:)` returns).
public struct TaskView<Content: View>: View {
    nonisolated(unsafe) let content: Content
    let priority: TaskPriority
    let action: @isolated(any) @Sendable () async -> Void

    nonisolated init(
        content: Content, priority: TaskPriority, action: @escaping @isolated(any) @Sendable () async -> Void
    ) {
        self.content = content
        self.priority = priority
        self.action = action
    }

    public var body: Never { fatalError("the task modifier has no body") }
}

extension View {
    /// Populates the toolbar or navigation bar with the views you provide.
    nonisolated public func toolbar<Content: View>(@ViewBuilder content: () -> Content) -> some View {
        ModifiedContent(content: self, modifier: content())
    }

    /// Adds an action to perform after this view disappears.
    nonisolated public func onDisappear(perform action: (() -> Void)? = nil) -> some View {
        ModifiedContent(content: self, modifier: action)
    }

    /// Adds an asynchronous task to perform before this view appears; SwiftUI
    /// cancels it when the view disappears. (As in SwiftUI's interface, the
    /// action inherits the caller's actor: a view's task runs on the main actor.)
    nonisolated public func task(
        priority: TaskPriority = .userInitiated,
        @_inheritActorContext _ action: @escaping @isolated(any) @Sendable () async -> Void
    ) -> some View {
        TaskView(content: self, priority: priority, action: action)
    }
}
