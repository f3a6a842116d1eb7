import Foundation
import Testing
import XTalkTestSupport
import XTalkFakeBlueZ

@testable import XTalkDBus

/// Whether this machine can run the suites that need a real `dbus-daemon`.
/// CI sets `XTALK_REQUIRE_DBUS=1` so that a missing daemon fails instead of skipping.
let dbusDaemonAvailable = PrivateBus.daemonPath() != nil
let dbusMissing: Comment = "skipped: dbus-daemon is not installed (Debian: apt-get install dbus-daemon)"

@Test func dbusDaemonIsPresentWhereRequired() {
    if ProcessInfo.processInfo.environment["XTALK_REQUIRE_DBUS"] == "1" {
        #expect(dbusDaemonAvailable, "XTALK_REQUIRE_DBUS=1 but dbus-daemon was not found")
    }
}

@MainActor
func openConnection(_ bus: PrivateBus) async throws -> DBusConnection {
    try await withCheckedThrowingContinuation { continuation in
        DBusConnection.open(DBusAddress.parse(bus.address)) { continuation.resume(with: $0) }
    }
}

@MainActor
func call(
    _ connection: DBusConnection, destination: String?, path: String, interface: String?, member: String,
    body: [DBusValue] = [], timeout: Duration = DBusConnection.defaultCallTimeout
) async -> Result<DBusMessage, DBusError> {
    await withCheckedContinuation { continuation in
        connection.call(
            destination: destination, path: path, interface: interface, member: member, body: body, timeout: timeout
        ) { continuation.resume(returning: $0) }
    }
}

@MainActor
func requestName(_ connection: DBusConnection, _ name: String) async throws {
    let reply = try await call(
        connection, destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
        interface: "org.freedesktop.DBus", member: "RequestName", body: [.string(name), .uint32(4)]
    ).get()
    #expect(reply.body == [.uint32(1)])  // DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER
}

@Suite("D-Bus connection on a private dbus-daemon", .enabled(if: dbusDaemonAvailable, dbusMissing), .serialized)
@MainActor
struct DBusConnectionTests {
    @Test func callsSignalsAndErrorsBetweenTwoConnections() async throws {
        let bus = try await PrivateBus.start()
        defer { bus.stop() }
        let server = try await openConnection(bus)
        let client = try await openConnection(bus)
        #expect(server.uniqueName.hasPrefix(":"))
        #expect(server.uniqueName != client.uniqueName)
        server.onMethodCall = { call in
            switch call.member {
            case "Echo": server.send(.methodReturn(to: call, body: call.body))
            case "Shout":
                server.send(.signal(path: "/x", interface: "com.example.Test", member: "Heard", body: call.body))
                server.send(.methodReturn(to: call))
            default: server.send(.error(to: call, name: "com.example.Error.Nope", text: "no such thing"))
            }
        }
        try await requestName(server, "com.example.Test")

        let payload: [DBusValue] = [.bytes(Data(0..<255)), .propertyMap(["a": .int16(-1)])]
        let echo = try await call(
            client, destination: "com.example.Test", path: "/x", interface: "com.example.Test", member: "Echo",
            body: payload
        ).get()
        #expect(echo.body == payload)

        let failure = await call(
            client, destination: "com.example.Test", path: "/x", interface: "com.example.Test", member: "Other")
        #expect(failure.failure == DBusError(name: "com.example.Error.Nope", message: "no such thing"))

        var heard: [DBusMessage] = []
        client.onSignal = { heard.append($0) }
        _ = await withCheckedContinuation { continuation in
            client.addMatch("type='signal',interface='com.example.Test'") { continuation.resume(returning: $0) }
        }
        _ = try await call(
            client, destination: "com.example.Test", path: "/x", interface: "com.example.Test", member: "Shout",
            body: [.string("hi")]
        ).get()
        #expect(await eventually { heard.count == 1 })
        #expect(heard.first?.body == [.string("hi")])
        #expect(heard.first?.sender == server.uniqueName)
    }

    /// At most 64 calls wait for replies at once; the rest wait in order, and
    /// every call is answered exactly once.
    @Test func boundsCallsInFlight() async throws {
        let bus = try await PrivateBus.start()
        defer { bus.stop() }
        let server = try await openConnection(bus)
        let client = try await openConnection(bus)
        var held: [DBusMessage] = []
        server.onMethodCall = { held.append($0) }
        try await requestName(server, "com.example.Slow")
        var answers: [Int: Int] = [:]
        for index in 0..<200 {
            client.call(
                destination: "com.example.Slow", path: "/x", interface: "com.example.Slow", member: "Hold",
                body: [.int32(Int32(index))]
            ) { reply in
                if case .success(let message) = reply, case .int32(let value)? = message.body.first {
                    answers[Int(value), default: 0] += 1
                }
            }
        }
        #expect(client.callsInFlight == DBusConnection.maximumCallsInFlight)
        #expect(client.callsWaiting == 200 - DBusConnection.maximumCallsInFlight)
        #expect(await eventually { held.count == DBusConnection.maximumCallsInFlight })
        // Answer as they come; the waiting ones follow, in order.
        var answered = 0
        while answered < 200 {
            #expect(await eventually { held.count > answered })
            let call = held[answered]
            #expect(call.body == [.int32(Int32(answered))])
            server.send(.methodReturn(to: call, body: call.body))
            answered += 1
            #expect(client.callsInFlight <= DBusConnection.maximumCallsInFlight)
        }
        #expect(await eventually { answers.count == 200 })
        #expect(answers.values.allSatisfy { $0 == 1 })
    }

    /// When the bus goes away, every pending call fails once with
    /// `Disconnected`, `onClose` runs once, and later calls fail at once.
    @Test func aVanishedBusFailsPendingCallsOnce() async throws {
        let bus = try await PrivateBus.start()
        let server = try await openConnection(bus)
        let client = try await openConnection(bus)
        server.onMethodCall = { _ in }  // never answers
        try await requestName(server, "com.example.Silent")
        var failures: [String] = []
        var closes = 0
        client.onClose = { _ in closes += 1 }
        for _ in 0..<3 {
            client.call(destination: "com.example.Silent", path: "/x", interface: nil, member: "Wait") { reply in
                if case .failure(let error) = reply { failures.append(error.name) }
            }
        }
        bus.stop()
        #expect(await eventually { failures.count == 3 && closes == 1 })
        #expect(failures == Array(repeating: "org.freedesktop.DBus.Error.Disconnected", count: 3))
        #expect(client.isClosed)
        let late = await call(client, destination: "com.example.Silent", path: "/x", interface: nil, member: "Wait")
        #expect(late.failure?.name == "org.freedesktop.DBus.Error.Disconnected")
        try? await Task.sleep(for: .milliseconds(20))
        #expect(failures.count == 3 && closes == 1)
    }

    /// A descriptor passed in a reply (as BlueZ's AcquireWrite does) works
    /// at the receiver, and every copy of it is closed once the receiver lets
    /// go: the sender's, the bus's and the receiver's (the far end sees EOF).
    @Test func passesFileDescriptorsAndClosesEveryCopy() async throws {
        let bus = try await PrivateBus.start()
        defer { bus.stop() }
        let server = try await openConnection(bus)
        let client = try await openConnection(bus)
        #expect(server.passesFileDescriptors && client.passesFileDescriptors)
        var farEnds: [Int32] = []
        server.onMethodCall = { call in
            let pair = try! SocketPair.sequencedPackets()
            farEnds.append(pair.0)
            var reply = DBusMessage.methodReturn(to: call, body: [.unixFD(0), .uint16(247)])
            reply.fileDescriptors = [DBusFileDescriptor(adopting: pair.1)]
            server.send(reply)
        }
        try await requestName(server, "com.example.Pipes")
        defer { farEnds.forEach { _ = close($0) } }

        // Used: bytes written on the received descriptor reach the far end.
        var used: DBusMessage? = try await call(
            client, destination: "com.example.Pipes", path: "/x", interface: nil, member: "Acquire"
        ).get()
        #expect(used?.body == [.unixFD(0), .uint16(247)])
        let descriptor = try #require(used?.fileDescriptors.first?.rawValue)
        #expect(send(descriptor, [1, 2, 3] as [UInt8], 3, 0) == 3)
        #expect(SocketPair.read(farEnds[0]) == [1, 2, 3])
        #expect(SocketPair.read(farEnds[0], wait: false) == nil, "nothing closed yet")
        used = nil
        #expect(SocketPair.read(farEnds[0]) == [], "every copy closed: end of file")

        // Never looked at: dropping the message closes what it carried.
        _ = try await call(client, destination: "com.example.Pipes", path: "/x", interface: nil, member: "Acquire")
            .get()
        #expect(SocketPair.read(farEnds[1]) == [])
    }

    @Test func aCallWithoutAReplyTimesOut() async throws {
        let bus = try await PrivateBus.start()
        defer { bus.stop() }
        let server = try await openConnection(bus)
        let client = try await openConnection(bus)
        server.onMethodCall = { _ in }
        try await requestName(server, "com.example.Silent")
        let reply = await call(
            client, destination: "com.example.Silent", path: "/x", interface: nil, member: "Wait",
            timeout: .milliseconds(50))
        #expect(reply.failure?.name == "org.freedesktop.DBus.Error.NoReply")
        #expect(client.callsInFlight == 0)
    }

    @Test func noBusIsAnErrorThatSaysWhere() async throws {
        let result = await withCheckedContinuation { continuation in
            DBusConnection.open([.unixPath("/nonexistent/xtalk-bus")]) { continuation.resume(returning: $0) }
        }
        guard case .failure(let error) = result else {
            Issue.record("connected to nothing")
            return
        }
        #expect(error.message.contains("no bus at /nonexistent/xtalk-bus"))
    }
}

/// Sockets for the descriptor-passing tests.
enum SocketPair {
    static func sequencedPackets() throws -> (Int32, Int32) {
        var ends: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &ends) == 0 else { throw POSIXError(.EMFILE) }
        return (ends[0], ends[1])
    }

    /// One packet (empty at end of file); nil when nothing came (within a second when waiting).
    static func read(_ descriptor: Int32, wait: Bool = true) -> [UInt8]? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, wait ? 5_000 : 0) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return count < 0 ? nil : Array(buffer[0..<count])
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
