import Foundation
import Testing
import XTalkBleBridge
import XTalkBleSdk

/// The sans-I/O device machine alone: events in, actions out, no clock.
@Suite("Low-level bridge: the device machine (sans I/O)")
struct BridgeDeviceMachineTests {
    let profile = BridgeProfile.oneKey

    /// Drives a machine to ready; returns it.
    func readyMachine(capacity: Int = 244) -> BridgeDeviceMachine {
        var machine = BridgeDeviceMachine()
        #expect(machine.connect(1) == [.connect, .startTimer(.connect, after: .seconds(15), generation: 1)])
        #expect(machine.linkUp() == [.discoverServices([profile.service])])
        #expect(
            machine.servicesDiscovered([profile.service], error: nil)
                == [.discoverCharacteristics([profile.write, profile.notify], service: profile.service)])
        let characteristics = [
            BleCharacteristicInfo(uuid: profile.write, properties: [.write, .writeWithoutResponse]),
            BleCharacteristicInfo(uuid: profile.notify, properties: [.notify]),
        ]
        #expect(
            machine.characteristicsDiscovered(characteristics, service: profile.service, error: nil)
                == [.startTimer(.connect, after: .seconds(35), generation: 1), .subscribe(profile.notifyRef)])
        #expect(
            machine.notificationStateUpdated(profile.notifyRef, isNotifying: true, error: nil)
                == [.startTimer(.settle, after: .milliseconds(150), generation: 1)])
        #expect(machine.settled(capacity: capacity, generation: 1) == [.cancelTimer(.connect), .resolve(1, .null)])
        return machine
    }

    /// A machine whose connect (request 1) has reached the subscription.
    func subscribingMachine() -> BridgeDeviceMachine {
        var machine = BridgeDeviceMachine()
        _ = machine.connect(1)
        _ = machine.linkUp()
        _ = machine.servicesDiscovered([profile.service], error: nil)
        _ = machine.characteristicsDiscovered(
            [
                BleCharacteristicInfo(uuid: profile.write, properties: [.writeWithoutResponse]),
                BleCharacteristicInfo(uuid: profile.notify, properties: [.notify]),
            ], service: profile.service, error: nil)
        return machine
    }

    @Test func connectsInOrderAndResolvesEveryWaiterOnce() {
        var machine = subscribingMachine()
        #expect(machine.connect(2) == [], "one connect under way: they resolve together")
        _ = machine.notificationStateUpdated(profile.notifyRef, isNotifying: true, error: nil)
        // Capacity 20 (MTU 23): re-read after the settle, twice at most.
        #expect(
            machine.settled(capacity: 20, generation: 1).contains(
                .startTimer(.settle, after: .milliseconds(150), generation: 1)))
        #expect(machine.settled(capacity: 20, generation: 1).count == 1)
        #expect(
            machine.settled(capacity: 20, generation: 1) == [
                .cancelTimer(.connect), .resolve(1, .null), .resolve(2, .null),
            ])
        #expect(machine.isReady)
    }

    /// What a subscription that did not take is answered with: notifications
    /// left off without an error is 716 (BleCharacteristicNotifyChangeFailure),
    /// a pairing refused or failed 705, a pairing the device forgot 719, any
    /// other error 709. The connect's waiter gets it, once.
    @Test(
        arguments: [
            (nil, 716), (BleBackendError.Code.insufficientEncryption, 705), (.insufficientAuthentication, 705),
            (.peerRemovedPairing, 719), (.writeNotPermitted, 709), (.attribute(0x80), 709),
        ] as [(BleBackendError.Code?, Int)])
    func aSubscriptionThatDidNotTake(error: BleBackendError.Code?, code: Int) {
        var machine = subscribingMachine()
        let actions = machine.notificationStateUpdated(
            profile.notifyRef, isNotifying: false, error: error.map { BleBackendError($0, "refused") })
        let rejections = actions.compactMap { action -> (BridgeRequestID, BridgeError)? in
            if case .reject(let id, let error) = action { return (id, error) }
            return nil
        }
        #expect(rejections.map(\.0) == [1])
        #expect(rejections.first?.1.code.rawValue == code)
        #expect(actions.contains(.cancelLink), "the half-made link is let go")
        #expect(!machine.isReady)
    }

    /// The driver forgets a machine that holds nothing; the one that replaces
    /// it starts past the forgotten one's generations, so a timer of before
    /// never matches a session of after.
    @Test func aReplacingMachineIgnoresTheForgottenOnesTimers() {
        var forgotten = BridgeDeviceMachine()
        _ = forgotten.connect(1)
        #expect(!forgotten.holdsNothing, "a connect waits")
        _ = forgotten.connectTimedOut(generation: 1)
        #expect(forgotten.holdsNothing)
        var machine = BridgeDeviceMachine(generation: forgotten.generation)
        _ = machine.connect(2)
        #expect(machine.connectTimedOut(generation: 1) == [], "the forgotten machine's timer")
        #expect(
            machine.connectTimedOut(generation: machine.generation).contains(
                .reject(2, BridgeError(.timeout, "the connection was not ready in time"))))
    }

    @Test func staleTimersAreIgnored() {
        var machine = readyMachine()
        #expect(machine.connectTimedOut(generation: 1) == [], "the connect's timer of a finished connect")
        _ = machine.disconnect(7)
        #expect(machine.settled(capacity: 244, generation: 1) == [])
        #expect(machine.writeRetryFired(generation: 1) == [])
    }

    @Test func sendsAreCutAtTheCapacityAndResolveWhenTheLastPieceIsHandedOver() {
        var machine = readyMachine()
        #expect(machine.send(5, hex: String(repeating: "ab", count: 500), withoutResponse: nil, capacity: 244) == [])
        var writes: [Int] = []
        var resolved: [BridgeRequestID] = []
        while true {
            let actions = machine.pump(canSendWithoutResponse: true)
            if actions.isEmpty { break }
            for action in actions {
                if case .write(let data, .withoutResponse) = action { writes.append(data.count) }
                if case .resolve(let id, .null) = action { resolved.append(id) }
            }
        }
        #expect(writes == [244, 244, 12])
        #expect(resolved == [5])
    }

    @Test func withoutCreditsTheMachineWaitsAndLooksAgainOnce() {
        var machine = readyMachine()
        _ = machine.send(5, hex: "00", withoutResponse: true, capacity: 244)
        #expect(
            machine.pump(canSendWithoutResponse: false) == [
                .startTimer(.writeRetry, after: .milliseconds(50), generation: 1)
            ])
        #expect(machine.pump(canSendWithoutResponse: false) == [], "one retry timer at a time")
        #expect(machine.readyToSend() == [.cancelTimer(.writeRetry)])
        #expect(
            machine.pump(canSendWithoutResponse: true) == [.write(Data([0]), .withoutResponse), .resolve(5, .null)])
    }

    /// The SDK calls connect again on a ready device with every acquire; the
    /// link and its sends stay, and so must their look-again timer (a lost
    /// ready callback would otherwise leave the send waiting for good).
    @Test func aSendWaitingForCreditsKeepsLookingAcrossANewSession() {
        var machine = readyMachine()
        _ = machine.send(5, hex: "00", withoutResponse: true, capacity: 244)
        #expect(
            machine.pump(canSendWithoutResponse: false) == [
                .startTimer(.writeRetry, after: .milliseconds(50), generation: 1)
            ])
        #expect(
            machine.connect(2) == [
                .startTimer(.writeRetry, after: .milliseconds(50), generation: 2), .resolve(2, .null),
            ], "the timer is carried into the new session")
        #expect(machine.writeRetryFired(generation: 1) == [], "the old session's timer (replaced)")
        #expect(machine.writeRetryFired(generation: 2) == [])
        #expect(
            machine.pump(canSendWithoutResponse: false) == [
                .startTimer(.writeRetry, after: .milliseconds(50), generation: 2)
            ], "still no credits: it looks again")
        #expect(machine.readyToSend() == [.cancelTimer(.writeRetry)])
        #expect(
            machine.pump(canSendWithoutResponse: true) == [.write(Data([0]), .withoutResponse), .resolve(5, .null)])
    }

    @Test func aFailedWriteWithResponseRejectsOnlyItsSend() {
        var machine = readyMachine()
        _ = machine.send(5, hex: "0102", withoutResponse: false, capacity: 1)
        _ = machine.send(6, hex: "03", withoutResponse: false, capacity: 1)
        #expect(machine.pump(canSendWithoutResponse: true) == [.write(Data([1]), .withResponse)])
        #expect(machine.pump(canSendWithoutResponse: true) == [], "one write with response at a time")
        let failed = machine.writeCompleted(error: BleBackendError(.writeNotPermitted, "no"))
        #expect(failed.count == 1)
        guard case .reject(5, let error)? = failed.first else {
            Issue.record("\(failed)")
            return
        }
        #expect(error.code == .writeCharacteristic)
        #expect(machine.pump(canSendWithoutResponse: true) == [.write(Data([3]), .withResponse)])
        #expect(machine.writeCompleted(error: nil) == [.resolve(6, .null)])
    }

    /// A device that speaks as soon as notifications are on (a hello frame)
    /// does so during the settle: those chunks are the first the app's
    /// receives get, in order, not lost to the settle.
    @Test func notificationsDuringTheSettleAreKeptForTheFirstReceives() {
        var machine = subscribingMachine()
        _ = machine.notificationStateUpdated(profile.notifyRef, isNotifying: true, error: nil)
        #expect(machine.notified(profile.notifyRef, value: Data([0xA1])) == [])
        #expect(machine.notified(profile.notifyRef, value: Data([0xA2, 0xA3])) == [])
        #expect(machine.queuedChunkCount == 2, "kept during the settle")
        #expect(machine.settled(capacity: 244, generation: 1) == [.cancelTimer(.connect), .resolve(1, .null)])
        #expect(machine.receive(10) == [.resolve(10, .string("a1"))])
        #expect(machine.receive(11) == [.resolve(11, .string("a2a3"))])
        #expect(machine.receive(12) == [], "nothing more: parked")
    }

    @Test func theEndOfASessionAnswersEverythingOnceAndKeepsNothing() {
        var machine = readyMachine()
        _ = machine.notified(profile.notifyRef, value: Data([9]))
        #expect(machine.queuedChunkCount == 1)
        #expect(machine.receive(10) == [.resolve(10, .string("09"))])
        _ = machine.receive(11)
        _ = machine.send(12, hex: "00", withoutResponse: false, capacity: 244)
        _ = machine.notified(profile.notifyRef, value: Data([8]))  // to the parked receive
        _ = machine.receive(13)
        let ended = machine.linkEnded(BridgeError(.deviceDisconnected, "lost"))
        let rejected = ended.compactMap { action -> BridgeRequestID? in
            if case .reject(let id, _) = action { return id }
            return nil
        }
        #expect(rejected.sorted() == [12, 13])
        #expect(machine.queuedChunkCount == 0 && machine.queuedBytes == 0)
        #expect(!machine.isReady)
        #expect(machine.notified(profile.notifyRef, value: Data([7])) == [], "nothing after the end")
        #expect(machine.linkEnded(BridgeError(.deviceDisconnected, "again")) == [])
    }
}
