// The client's published state as app code sees it: through Combine where it
// exists (Apple platforms, and Linux in the Apple stand-in build), through the
// Observation framework elsewhere.

import Foundation
import Testing
import XTalkBleSdk
import XTalkSimulator
import XTalkTestSupport

#if canImport(Combine)
    import Combine
#else
    import Observation
#endif

@Suite("Apple surface", .timeLimit(.minutes(5)))
@MainActor
struct AppleSurfaceTests {
    /// A client on one simulated device in virtual time, with what it needs to be shut down.
    @MainActor
    struct Fixture {
        /// The virtual clock the environment runs on.
        let clock = XTalkVirtualClock()
        /// The simulated Bluetooth with one healthy device.
        let environment: XTalkSimulatedEnvironment
        /// The client under test.
        let client: XTalkBleClient

        /// Builds the environment and the client.
        init() {
            environment = XTalkSimulatedEnvironment(devices: [XTalkSimulatedDevice()], clock: clock)
            client = XTalkBleClient(simulator: environment)
        }

        /// Tears the client and the environment down and lets pending timers run out.
        func finish() async {
            client.teardown()
            environment.shutDown()
            await clock.settle()
        }
    }

    #if canImport(Combine)
        /// `$connectionState` is a Combine publisher: the current state on subscription, then each change;
        /// and the client's `objectWillChange` announces the change, as for any `ObservableObject`.
        @Test("$connectionState publishes .scanning after startScan()")
        func combinePublishesConnectionState() async {
            let fixture = Fixture()
            var states: [XTalkConnectionState] = []
            var willChangeCount = 0
            let stateSubscription = fixture.client.$connectionState.sink { states.append($0) }
            let changeSubscription = fixture.client.objectWillChange.sink { _ in willChangeCount += 1 }
            #expect(states == [.idle])
            fixture.client.startScan()
            await fixture.clock.advance(by: .milliseconds(100))
            #expect(states.prefix(2) == [.idle, .scanning])
            #expect(fixture.client.connectionState == .scanning)
            #expect(willChangeCount >= 1)
            stateSubscription.cancel()
            changeSubscription.cancel()
            let heardBeforeCancel = states.count
            fixture.client.stopScan()
            #expect(fixture.client.connectionState == .idle)
            #expect(states.count == heardBeforeCancel, "a cancelled subscription hears nothing more")
            await fixture.finish()
        }

        /// A model written as in the API guides (`ObservableObject` with `@Published`) behaves as Combine
        /// documents: `objectWillChange` and `$property` fire before the new value is stored, and a
        /// subscription ends when its `AnyCancellable` is cancelled or released.
        @Test("@Published publishes in willSet; AnyCancellable ends the subscription")
        func publishedModelFollowsCombine() {
            /// App code as the guides write it.
            final class Model: ObservableObject {
                /// A published counter.
                @Published var count = 0
            }
            let model = Model()
            var values: [String] = []
            var announcements: [Int] = []
            var tokens: Set<AnyCancellable> = []
            model.objectWillChange.sink { _ in announcements.append(model.count) }.store(in: &tokens)
            model.$count.sink { values.append("\($0) while \(model.count)") }.store(in: &tokens)
            model.count = 1
            model.count = 2
            #expect(values == ["0 while 0", "1 while 0", "2 while 1"])
            #expect(announcements == [0, 1])
            tokens.removeAll()
            model.count = 3
            #expect(values.count == 3)
            #expect(announcements.count == 2)
        }
    #else
        /// Without Combine, `connectionState` is observable with the Observation framework.
        @Test("connectionState is tracked by withObservationTracking")
        func observationTracksConnectionState() async {
            let fixture = Fixture()
            let counter = ChangeCounter()
            let client = fixture.client
            withObservationTracking {
                _ = client.connectionState
            } onChange: {
                counter.increment()
            }
            #expect(counter.value == 0)
            client.startScan()
            await fixture.clock.advance(by: .milliseconds(100))
            #expect(client.connectionState == .scanning)
            #expect(counter.value == 1, "onChange fires once, for the first change")
            await fixture.finish()
        }

        /// The registrar is public so that app code can observe through it directly.
        @Test("observationRegistrar is the registrar the published properties report to")
        func registrarReportsPublishedChanges() async {
            let fixture = Fixture()
            let counter = ChangeCounter()
            let client = fixture.client
            let registrar = client.observationRegistrar
            withObservationTracking {
                registrar.access(client, keyPath: \.scanResults)
            } onChange: {
                counter.increment()
            }
            client.startScan()
            await fixture.clock.advance(by: .milliseconds(500))
            #expect(!client.scanResults.isEmpty)
            #expect(counter.value == 1, "the results' change was reported through the public registrar")
            await fixture.finish()
        }
    #endif
}
